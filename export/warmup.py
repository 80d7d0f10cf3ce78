"""TF Serving warm-up requests (``assets.extra/tf_serving_warmup_requests``).

TF Serving replays these requests when it loads a model version, before it
serves traffic: a server that lacks one of the graph's ops fails the load
instead of the first real request, and the first request is not slow.

The file is a TFRecord of ``tensorflow.serving.PredictionLog`` protos, each
holding a ``PredictLog`` whose ``PredictRequest`` names the signature and its
input tensors (TF Serving ``saved_model_warmup`` format, at most 1000
records). The protos are written here from their wire format (field numbers
of ``tensorflow_serving/apis/{prediction_log,predict,model}.proto``) so the
export needs no ``tensorflow-serving-api`` package; the tests parse the file
back with that package's message classes.
"""

import numpy as np
import tensorflow as tf

WARMUP_FILE = "tf_serving_warmup_requests"

# Field numbers, tensorflow_serving/apis/*.proto.
_MODEL_SPEC_NAME = 1            # ModelSpec.name
_MODEL_SPEC_SIGNATURE = 3       # ModelSpec.signature_name
_REQUEST_MODEL_SPEC = 1         # PredictRequest.model_spec
_REQUEST_INPUTS = 2             # PredictRequest.inputs (map<string, TensorProto>)
_MAP_KEY, _MAP_VALUE = 1, 2     # map entry
_PREDICT_LOG_REQUEST = 1        # PredictLog.request
_PREDICTION_LOG_PREDICT = 6     # PredictionLog.predict_log


def _varint(n):
  out = bytearray()
  while True:
    b = n & 0x7F
    n >>= 7
    out.append(b | (0x80 if n else 0))
    if not n:
      return bytes(out)


def _field(number, payload):
  """A length-delimited field (wire type 2): bytes, strings, messages."""
  return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def predict_request(inputs, signature_name="serving_default", model_name=""):
  """Serialized ``tensorflow.serving.PredictRequest``.

  Args:
    inputs: ``{input_name: array-like}`` (lists of str/bytes become DT_STRING,
      integer arrays keep their numpy dtype, e.g. int32).
    signature_name: the signature to run.
    model_name: ``ModelSpec.name`` (TF Serving ignores it during warm-up).

  Returns:
    bytes.
  """
  spec = b""
  if model_name:
    spec += _field(_MODEL_SPEC_NAME, model_name.encode())
  spec += _field(_MODEL_SPEC_SIGNATURE, signature_name.encode())
  out = _field(_REQUEST_MODEL_SPEC, spec)
  for name in sorted(inputs):
    value = inputs[name]
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, bytes))
                                                for v in value):
      value = np.array([v.encode() if isinstance(v, str) else v for v in value],
                       dtype=object)
    tensor = tf.make_tensor_proto(value).SerializeToString()
    entry = _field(_MAP_KEY, name.encode()) + _field(_MAP_VALUE, tensor)
    out += _field(_REQUEST_INPUTS, entry)
  return out


def prediction_log(request_bytes):
  """Serialized ``PredictionLog`` with ``predict_log.request`` = the request."""
  return _field(_PREDICTION_LOG_PREDICT, _field(_PREDICT_LOG_REQUEST, request_bytes))


def write_warmup_requests(path, requests):
  """Writes a TFRecord of PredictionLogs.

  Args:
    path: output file (``<version>/assets.extra/tf_serving_warmup_requests``).
    requests: list of ``(signature_name, {input_name: values})``.

  Returns:
    number of records written.

  Raises:
    ValueError: more than 1000 requests (TF Serving's limit).
  """
  if len(requests) > 1000:
    raise ValueError("TF Serving reads at most 1000 warm-up records, got %d"
                     % len(requests))
  with tf.io.TFRecordWriter(path) as w:
    for signature_name, inputs in requests:
      w.write(prediction_log(predict_request(inputs, signature_name)))
  return len(requests)
