"""The TF-only serving client: request rows in, one JSON-ready dict per row out.

What ``tools/predict_saved_model.py`` (and any client written against an
export) does with an exported SavedModel, in a module that imports only
TensorFlow, tensorflow-text, numpy and the standard library
(``tests/test_architecture.py`` holds it to that): no model, task or export
code, as TF Serving would load it, so it proves the export self-contained.

It also owns the layout both sides agree on, which the writer
(:mod:`bert_tf.export.base`) imports from here: the metadata file
``assets.extra/bert_tf_export.json`` (:data:`METADATA_FILE`,
:func:`read_metadata`) and the version rule (numeric folders under the
export directory, TF Serving's ``model_base_path`` layout; the highest is
served, the writer's next is one above it: :func:`version_numbers`).

The steps (each usable alone): :func:`resolve_export` (a version folder, or
the highest one), :func:`read_signatures` (from ``saved_model.pb``, before
any variable is restored), :func:`signature_inputs` (the export's input
order), :func:`rows_from_args` / :func:`rows_from_jsonl` (TF Serving's row
format), :func:`check_rows`, :func:`predict` (batched calls),
:func:`decode_outputs`; :func:`serve` runs them all. Every refusal is a
:class:`PredictError` with one line of text.

Example::

  from bert_tf.export import client
  for line in client.serve("/tmp/sst2_export", ["a gorgeous film", "dull"]):
    print(line)
"""

import base64
import json
import os
import re
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
# Registers the tokenizer ops that the exports use.
import tensorflow_text  # noqa: F401  pylint: disable=unused-import

SAVED_MODEL_FILE = "saved_model.pb"
ASSETS_EXTRA = "assets.extra"
METADATA_FILE = "bert_tf_export.json"
DEFAULT_SIGNATURE = "serving_default"
TFLITE_FILE = "model.tflite"
_VERSION_DIR = re.compile(r"\d+")


def version_numbers(export_dir: str) -> List[int]:
  """The numeric version folders of ``export_dir`` (TF Serving serves the
  highest; the writer's next version is one above it).

  Args:
    export_dir: an export base directory (str); a missing one has none.

  Returns:
    the version numbers (ints), ascending.
  """
  if not os.path.isdir(export_dir):
    return []
  return sorted(int(d) for d in os.listdir(export_dir) if _VERSION_DIR.fullmatch(d))


def metadata_path(saved_model_dir: str) -> str:
  """``saved_model_dir/assets.extra/bert_tf_export.json``."""
  return os.path.join(saved_model_dir, ASSETS_EXTRA, METADATA_FILE)


def read_metadata(saved_model_dir: str) -> dict:
  """The export's ``assets.extra/bert_tf_export.json`` (empty when absent or
  unreadable: a foreign SavedModel)."""
  try:
    with open(metadata_path(saved_model_dir), encoding="utf-8") as f:
      meta = json.load(f)
  except (OSError, ValueError):
    return {}
  return meta if isinstance(meta, dict) else {}


class PredictError(ValueError):
  """A request, export directory or flag this tool cannot serve (one line)."""


class InputSpec:
  """One input of a signature.

  Attributes:
    name: the input key.
    dtype: its ``tf.DType``.
    row_shape: the shape of one row's value (the signature's shape without
      the batch dimension; None where any size fits).
    width: strings one row takes on the command line for a rank-2 string
      input of known width (the export's ``num_choices``), else None.
  """

  def __init__(self, name: str, dtype: tf.DType, row_shape: Tuple[Optional[int], ...],
               width: Optional[int] = None):
    self.name = name
    self.dtype = dtype
    self.row_shape = tuple(row_shape)
    self.width = width

  @property
  def is_string(self) -> bool:
    """True for a ``tf.string`` input."""
    return self.dtype == tf.string

  def row_text(self) -> str:
    """One row's type: ``""`` for one string, ``[4] strings``, ``int32 [N]``."""
    if not self.row_shape and self.is_string:
      return ""
    dims = list(self.row_shape)
    if self.width is not None:
      dims[0] = self.width
    shape = "".join("[%s]" % ("N" if d is None else d) for d in dims)
    return ("%s strings" % shape) if self.is_string else (
        "%s %s" % (self.dtype.name, shape)).strip()

  def describe(self) -> str:
    """``name``, plus the row type when a row is not one string."""
    row = self.row_text()
    return "%s (%s)" % (self.name, row) if row else self.name


def resolve_export(path: str) -> str:
  """The SavedModel directory to serve for ``path``.

  Args:
    path: a version directory (holding ``saved_model.pb``) or an export
      directory with numeric version folders.

  Returns:
    ``path`` itself, or its highest numeric version folder that holds a
    ``saved_model.pb`` (TF Serving's choice).

  Raises:
    PredictError: no such directory, or neither kind of directory.
  """
  if not os.path.isdir(path):
    raise PredictError("%s: no such directory" % path)
  if os.path.exists(os.path.join(path, SAVED_MODEL_FILE)):
    return path
  versions = [v for v in version_numbers(path)
              if os.path.exists(os.path.join(path, str(v), SAVED_MODEL_FILE))]
  if not versions:
    raise PredictError("%s holds no saved_model.pb and no numeric version folder "
                       "with one (expected EXPORT_DIR/<version>/saved_model.pb)" % path)
  return os.path.join(path, str(max(versions)))


def read_signatures(saved_model_dir: str) -> Dict[str, Dict[str, tf.TensorSpec]]:
  """Every signature's inputs, read from ``saved_model.pb`` without loading
  the model (a bad request is refused before any variable is restored).

  Returns:
    signature name -> {input name: ``tf.TensorSpec``} (unknown dimensions
    None).

  Raises:
    PredictError: an unreadable ``saved_model.pb``.
  """
  from google.protobuf import message  # pylint: disable=g-import-not-at-top
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=g-import-not-at-top
  proto = saved_model_pb2.SavedModel()
  try:
    with open(os.path.join(saved_model_dir, SAVED_MODEL_FILE), "rb") as f:
      proto.ParseFromString(f.read())
  except (OSError, ValueError, message.DecodeError) as e:
    raise PredictError("%s: unreadable saved_model.pb (%s)" % (saved_model_dir, e)) from e
  if not proto.meta_graphs:
    raise PredictError("%s: saved_model.pb holds no graph" % saved_model_dir)
  out = {}
  for name, sig in proto.meta_graphs[0].signature_def.items():
    if name.startswith("__"):  # __saved_model_init_op
      continue
    specs = {}
    for key, info in sig.inputs.items():
      shape = None if info.tensor_shape.unknown_rank else [
          None if d.size < 0 else d.size for d in info.tensor_shape.dim]
      specs[key] = tf.TensorSpec(shape, tf.as_dtype(info.dtype), name=key)
    out[name] = specs
  return out


def signature_inputs(specs: Dict[str, tf.TensorSpec], metadata: dict,
                     signature_name: str) -> List[InputSpec]:
  """The signature's inputs in the export's order.

  Args:
    specs: the signature's inputs (:func:`read_signatures`).
    metadata: :func:`read_metadata`'s dict; its ``inputs`` (a list, or a
      dict by signature) gives the order, its ``num_choices`` the width of
      a rank-2 string input.
    signature_name: the signature's name (to pick from a dict ``inputs``).

  Returns:
    list of :class:`InputSpec`: metadata order when it names exactly the
    signature's inputs, else alphabetical.
  """
  order = metadata.get("inputs")
  if isinstance(order, dict):
    order = order.get(signature_name)
  if not (isinstance(order, list) and sorted(order) == sorted(specs)):
    order = sorted(specs)
  width = metadata.get("num_choices")
  out = []
  for name in order:
    spec = specs[name]
    dims = tuple(spec.shape.as_list()[1:]) if spec.shape.rank else ()
    w = (int(width) if isinstance(width, int) and spec.dtype == tf.string
         and len(dims) == 1 else None)
    out.append(InputSpec(name, spec.dtype, dims, w))
  return out


def expected(inputs: Sequence[InputSpec], signature_name: str) -> str:
  """``serving_default takes question, context`` for error lines."""
  return "%s takes %s" % (signature_name, ", ".join(i.describe() for i in inputs))


def _leaf(value, spec: InputSpec, where: str):
  """One scalar of a row, checked against the input's dtype."""
  name = spec.name
  if spec.is_string:
    if isinstance(value, str):
      try:  # undecodable command-line bytes come back as they were
        return value.encode("utf-8", "surrogateescape")
      except UnicodeEncodeError:  # a lone surrogate from a JSON escape
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
      try:
        return base64.b64decode(value["b64"], validate=True)
      except ValueError as e:
        raise PredictError("%s: %r: bad base64 (%s)" % (where, name, e)) from e
    raise PredictError("%s: %r must be a string, got %s" % (where, name,
                                                           json.dumps(value)[:60]))
  if spec.dtype.is_bool:
    if isinstance(value, bool):
      return value
    raise PredictError("%s: %r must hold true/false, got %s" % (where, name,
                                                               json.dumps(value)[:60]))
  ok = (isinstance(value, int) if spec.dtype.is_integer else
        isinstance(value, (int, float)))
  if not ok or isinstance(value, bool):
    raise PredictError("%s: %r must hold %s numbers, got %s" % (
        where, name, spec.dtype.name, json.dumps(value)[:60]))
  if spec.dtype.is_integer and not spec.dtype.min <= value <= spec.dtype.max:
    raise PredictError("%s: %r: %d is out of %s's range" % (where, name, value,
                                                           spec.dtype.name))
  return value


def _row_value(value, spec: InputSpec, where: str):
  """``(normalized value, shape)`` of one row's value of ``spec``.

  Raises:
    PredictError: wrong rank, ragged lists, wrong element type, or a width
      that the signature or the export fixes.
  """
  rank = len(spec.row_shape)

  def walk(v, depth):
    if depth == rank:
      return _leaf(v, spec, where), ()
    if not isinstance(v, list):
      raise PredictError("%s: %r must be a list%s (one row of %s), got %s" % (
          where, spec.name, " of lists" * (rank - depth - 1), spec.describe(),
          json.dumps(v)[:60]))
    items = [walk(x, depth + 1) for x in v]
    shapes = {s for _, s in items}
    if len(shapes) > 1:
      raise PredictError("%s: %r is not rectangular (lists of different lengths)"
                         % (where, spec.name))
    return [x for x, _ in items], (len(v),) + (shapes.pop() if shapes else
                                               (0,) * (rank - depth - 1))

  norm, shape = walk(value, 0)
  for got, want in zip(shape, spec.row_shape):
    if want is not None and got != want:
      raise PredictError("%s: %r has %d values per row; the signature takes %d" % (
          where, spec.name, got, want))
  if spec.width is not None and shape[0] != spec.width:
    raise PredictError("%s: %r has %d strings; this export takes %d per row "
                       "(num_choices)" % (where, spec.name, shape[0], spec.width))
  return norm, shape


def rows_from_args(strings: Sequence[str], inputs: Sequence[InputSpec],
                   signature_name: str = DEFAULT_SIGNATURE) -> List[Tuple[str, dict]]:
  """Command-line STRINGs -> request rows (see the module doc for the mapping).

  Returns:
    list of ``(where, {input: value})``; ``where`` names the first argument
    of the row (``argument 3``).

  Raises:
    PredictError: a count that is not a multiple of one row's, or a value
      that does not fit (naming the inputs the signature expects).
  """
  per_row = [i.width if i.width is not None else 1 for i in inputs]
  k = sum(per_row)
  if not strings or len(strings) % k:
    raise PredictError("%s: %d argument%s per row, got %d%s" % (
        expected(inputs, signature_name), k, "s" if k != 1 else "", len(strings),
        " (give them in this order, row after row)" if k > 1 else ""))
  rows = []
  for start in range(0, len(strings), k):
    pos, row = start, {}
    for spec, n in zip(inputs, per_row):
      where = "argument %d" % (pos + 1)
      if spec.width is not None:
        value = list(strings[pos:pos + n])
      elif spec.is_string and not spec.row_shape:
        value = strings[pos]
      else:
        try:
          value = json.loads(strings[pos])
        except ValueError as e:
          raise PredictError("%s: %r takes one JSON value per row (%s), got %r: %s"
                             % (where, spec.name, spec.row_text(), strings[pos][:60],
                                e)) from e
      row[spec.name] = value
      pos += n
    rows.append(("argument %d" % (start + 1), row))
  return rows


def rows_from_jsonl(path: str, inputs: Sequence[InputSpec],
                    signature_name: str = DEFAULT_SIGNATURE) -> List[Tuple[str, dict]]:
  """``--input_file`` JSON lines -> request rows.

  Args:
    path: the file (``-``: standard input), UTF-8.

  Returns:
    list of ``(where, {input: value})``, ``where`` = ``FILE:LINE``.

  Raises:
    PredictError: unreadable file; a line that is not JSON, not an object
      (or a bare value of a one-input signature), lacks an input or has an
      unknown one (naming file, line and the expected inputs); no row.
  """
  try:
    if path == "-":
      text = sys.stdin.buffer.read().decode("utf-8")
    else:
      with open(path, "rb") as f:
        text = f.read().decode("utf-8")
  except OSError as e:
    raise PredictError("--input_file: %s" % e) from e
  except UnicodeDecodeError as e:
    raise PredictError("--input_file: %s is not UTF-8 (%s)" % (path, e)) from e
  names = [i.name for i in inputs]
  rows = []
  for number, line in enumerate(text.splitlines(), 1):
    if not line.strip():
      continue
    where = "%s:%d" % ("<stdin>" if path == "-" else path, number)
    try:
      obj = json.loads(line)
    except ValueError as e:
      raise PredictError("%s: not JSON (%s)" % (where, e)) from e
    if len(names) == 1 and (not isinstance(obj, dict) or set(obj) == {"b64"}):
      obj = {names[0]: obj}  # a bare value of a one-input signature
    if not isinstance(obj, dict):
      raise PredictError("%s: not a JSON object of the inputs (%s)" % (
          where, expected(inputs, signature_name)))
    missing = [n for n in names if n not in obj]
    unknown = sorted(set(obj) - set(names))
    if missing or unknown:
      raise PredictError("%s: %s (%s)" % (
          where, "; ".join(
              (["no %s" % ", ".join(repr(m) for m in missing)] if missing else []) +
              (["unknown input %s" % ", ".join(repr(u) for u in unknown)]
               if unknown else [])),
          expected(inputs, signature_name)))
    rows.append((where, obj))
  if not rows:
    raise PredictError("--input_file: %s holds no request row" % path)
  return rows


def check_rows(rows: Sequence[Tuple[str, dict]], inputs: Sequence[InputSpec]
               ) -> List[dict]:
  """Normalized rows (strings as bytes), every value checked.

  Raises:
    PredictError: a value that does not fit its input, or rows of one
      request that mix widths (naming both rows).
  """
  out, first = [], {}
  for where, row in rows:
    norm = {}
    for spec in inputs:
      value, shape = _row_value(row[spec.name], spec, where)
      if spec.name in first and first[spec.name][1] != shape:
        raise PredictError(
            "%s: %r has shape %s but %s's has %s: the rows of one request must "
            "have the same width" % (where, spec.name, list(shape),
                                     first[spec.name][0], list(first[spec.name][1])))
      first.setdefault(spec.name, (where, shape))
      norm[spec.name] = value
    out.append(norm)
  return out


def batch_tensors(rows: Sequence[dict], inputs: Sequence[InputSpec]) -> Dict[str, tf.Tensor]:
  """The signature's keyword arguments for ``rows`` (checked by
  :func:`check_rows`): one tensor [B, ...] per input."""
  out = {}
  for spec in inputs:
    values = [r[spec.name] for r in rows]
    if spec.is_string:
      shape = np.shape(np.array(values, dtype=object)) if spec.row_shape else (len(rows),)
      flat = np.empty(int(np.prod(shape)), dtype=object)
      flat[:] = list(_flatten(values))
      out[spec.name] = tf.constant(flat.reshape(shape), tf.string)
    else:
      out[spec.name] = tf.constant(np.array(values, dtype=spec.dtype.as_numpy_dtype))
  return out


def _flatten(values):
  for v in values:
    if isinstance(v, list):
      yield from _flatten(v)
    else:
      yield v


def _plain(value, precision: int):
  """``tolist()`` output -> JSON-ready: bytes decoded, floats rounded."""
  if isinstance(value, list):
    return [_plain(v, precision) for v in value]
  if isinstance(value, bytes):
    return value.decode("utf-8", "replace")
  if isinstance(value, float) and precision and np.isfinite(value):
    return float("%.*g" % (precision, value))
  return value


def decode_outputs(outputs: Dict[str, tf.Tensor], batch: int,
                   precision: int = 6) -> List[Dict[str, Any]]:
  """Signature outputs -> one JSON-ready dict per row.

  Args:
    outputs: the signature's output dict (tensors [B, ...]).
    batch: B.
    precision: significant digits of floats (0: unrounded).

  Returns:
    ``batch`` dicts, output name -> the row's value: str for strings
    (UTF-8, invalid bytes replaced), bool, int, float (rounded; inf/nan
    kept), lists for tensors of higher rank. An output without the batch
    dimension is given whole to every row.
  """
  rows = [{} for _ in range(batch)]
  for name in sorted(outputs):
    a = np.asarray(outputs[name].numpy() if hasattr(outputs[name], "numpy")
                   else outputs[name])
    if a.ndim and a.shape[0] == batch:
      for i, v in enumerate(a.tolist()):
        rows[i][name] = _plain(v, precision)
    else:
      whole = _plain(a.tolist(), precision)
      for r in rows:
        r[name] = whole
  return rows


def _tf_message(e: Exception) -> str:
  """The informative line of a TensorFlow error (the assertion's text)."""
  text = getattr(e, "message", None) or str(e)
  lines = [l.strip() for l in text.splitlines() if l.strip()]
  for l in lines:
    if "assertion failed" in l:
      return l[:400]
  useful = [l for l in lines if not l.startswith(("Graph execution error",
                                                  "Detected at node", "[["))]
  return (useful or lines or [type(e).__name__])[0][:400]


def predict(fn, inputs: Sequence[InputSpec], rows: Sequence[dict], batch_size: int = 64,
            precision: int = 6) -> List[Dict[str, Any]]:
  """Calls the signature on ``rows`` in batches; one output dict per row.

  Raises:
    PredictError: the model refused a batch (its first and last row named).
  """
  results = []
  for start in range(0, len(rows), batch_size):
    chunk = rows[start:start + batch_size]
    try:
      out = fn(**batch_tensors(chunk, inputs))
    except (tf.errors.OpError, ValueError, TypeError) as e:
      raise PredictError("rows %d-%d: the export refused the request: %s" % (
          start + 1, start + len(chunk), _tf_message(e))) from e
    results.extend(decode_outputs(out, len(chunk), precision))
  return results


def _inputs_for_print(row: dict) -> dict:
  """A checked row as JSON-ready values (bytes decoded)."""
  def plain(v):
    if isinstance(v, list):
      return [plain(x) for x in v]
    if isinstance(v, bytes):
      return v.decode("utf-8", "replace")
    return v
  return {k: plain(v) for k, v in row.items()}


def is_litert(path: str) -> bool:
  """True for a ``.tflite`` file or a folder holding :data:`TFLITE_FILE`."""
  return (path.endswith(".tflite") and os.path.isfile(path)) or os.path.isfile(
      os.path.join(path, TFLITE_FILE))


def litert_registrars() -> list:
  """tensorflow-text's LiteRT kernel registrars (``SELECT_TFTEXT_OPS``).

  Raises:
    PredictError: tensorflow-text's ``tflite_registrar`` is missing.
  """
  try:
    from tensorflow_text import tflite_registrar  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise PredictError("tensorflow_text.tflite_registrar is missing (%s): the "
                       ".tflite's tokenizer ops need it" % e) from e
  return list(tflite_registrar.SELECT_TFTEXT_OPS)


def litert_interpreter(tflite_path: str, num_threads: Optional[int] = None):
  """An ``ai_edge_litert`` interpreter of ``tflite_path`` with tensorflow-text's
  kernels (XNNPACK applied, as LiteRT does by default).

  Args:
    tflite_path: a ``.tflite`` file.
    num_threads: CPU threads of the interpreter and XNNPACK (None: LiteRT's
      default).

  Raises:
    PredictError: ``ai_edge_litert`` not installed, or an unreadable file.
  """
  try:
    from ai_edge_litert import interpreter as litert  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise PredictError("serving a .tflite needs ai-edge-litert (pip install "
                       "ai-edge-litert): %s" % e) from e
  try:
    return litert.InterpreterWithCustomOps(
        custom_op_registerers=litert_registrars(), model_path=tflite_path,
        num_threads=num_threads)
  except (ValueError, RuntimeError) as e:
    raise PredictError("%s: cannot load the .tflite: %s" % (
        tflite_path, str(e).strip().splitlines()[0][:300])) from e


# String inputs whose .tflite graph reads valid UTF-8 only (NER's code-point
# offsets are counted from the bytes); the others drop invalid bytes in graph.
UTF8_ONLY = ("sentence",)


class LiteRTSignature:
  """A ``.tflite`` signature called as a SavedModel signature is.

  ``fn(**inputs)`` with numpy arrays or tensors [B, ...] returns the
  signature's outputs as numpy arrays. The graph answers what the
  SavedModel answers (an empty batch: empty outputs; a [B, 1] string input:
  flattened; invalid UTF-8: dropped as the SavedModel drops it); the
  requests it has no defined answer for are refused here, each in one line
  (:class:`PredictError`), before the interpreter runs: inputs of different
  batch sizes, a missing or unexpected input, another shape, and invalid
  UTF-8 in an NER ``sentence`` (:data:`UTF8_ONLY`: its offsets are counted
  on valid UTF-8).

  Args:
    tflite_path: the ``.tflite`` file; signature_name: its signature;
    num_threads: as :func:`litert_interpreter`.
  """

  def __init__(self, tflite_path: str, signature_name: str = DEFAULT_SIGNATURE,
               num_threads: Optional[int] = None):
    self.path = tflite_path
    self.interpreter = litert_interpreter(tflite_path, num_threads)
    sigs = self.interpreter.get_signature_list()
    if signature_name not in sigs:
      raise PredictError("%s has no signature %r (signatures: %s)" % (
          tflite_path, signature_name, ", ".join(sorted(sigs))))
    self.name = signature_name
    self.runner = self.interpreter.get_signature_runner(signature_name)
    self.input_details = self.runner.get_input_details()
    # A file of one signature is the interpreter's main graph: called through
    # the Interpreter's own API, its tensors are allocated again only when an
    # input's shape changes (the signature runner re-prepares every graph of
    # the file on every call: ~0.4 ms a question, bench/results/
    # litert_buckets_2026-12-05/). A file of several goes through the runner.
    main = {d["index"] for d in self.interpreter.get_input_details()}
    self._direct = len(sigs) == 1 and main == {
        d["index"] for d in self.input_details.values()}
    self._shapes = None
    self._outputs = {k: d["index"] for k, d in self.runner.get_output_details().items()}
    if self._direct:
      # The Interpreter refuses to allocate while another object (a signature
      # runner) holds its internals.
      self.runner = None

  def specs(self) -> Dict[str, tf.TensorSpec]:
    """input name -> ``tf.TensorSpec`` (unknown dimensions None)."""
    out = {}
    for name, d in self.input_details.items():
      shape = [None if s < 0 else int(s) for s in d["shape_signature"]]
      dtype = tf.string if d["dtype"] in (np.bytes_, np.object_, np.str_) else tf.as_dtype(
          d["dtype"])
      out[name] = tf.TensorSpec(shape, dtype, name=name)
    return out

  def __call__(self, **inputs) -> Dict[str, np.ndarray]:
    if sorted(inputs) != sorted(self.input_details):
      raise PredictError("%s takes %s, got %s" % (
          self.name, ", ".join(sorted(self.input_details)), ", ".join(sorted(inputs))))
    arrays, batch = {}, set()
    for name, value in inputs.items():
      a = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
      d = self.input_details[name]
      want = [None if s < 0 else int(s) for s in d["shape_signature"]]
      text = d["dtype"] in (np.bytes_, np.object_, np.str_)
      if text and len(want) == 1 and a.ndim == 2 and a.shape[1:] == (1,):
        pass  # [B, 1]: the graph flattens it, as the SavedModel does
      elif a.ndim != len(want) or any(w is not None and w != n
                                      for w, n in zip(want, a.shape)):
        raise PredictError("%s: input %s must have shape %s, got %s" % (
            self.name, name, ["B" if w is None else w for w in want], list(a.shape)))
      if text:
        flat = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in a.ravel()]
        for i, v in enumerate(flat if name in UTF8_ONLY else ()):
          try:
            v.decode("utf-8")
          except UnicodeDecodeError as e:
            raise PredictError("%s: input %s row %d is not valid UTF-8 (%s)" % (
                self.name, name, i // max(1, int(np.prod(a.shape[1:]))) + 1, e)) from e
        a = np.array(flat, dtype=object).reshape(a.shape)
      else:
        a = a.astype(d["dtype"])
      batch.add(a.shape[0])
      arrays[name] = a
    if len(batch) > 1:
      raise PredictError("%s: inputs %s hold different numbers of rows (%s)" % (
          self.name, ", ".join(sorted(arrays)), ", ".join(
              "%s=%d" % (k, v.shape[0]) for k, v in sorted(arrays.items()))))
    try:
      return self._invoke(arrays) if self._direct else self.runner(**arrays)
    except (ValueError, RuntimeError) as e:
      self._shapes = None  # a failed call may leave the tensors half-sized
      raise PredictError("%s: the .tflite refused the request: %s" % (
          self.path, str(e).strip().splitlines()[0][:300])) from e

  def _invoke(self, arrays: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """The main graph on ``arrays``, resized and allocated only when an
    input's shape differs from the last call's."""
    it = self.interpreter
    shapes = {k: tuple(v.shape) for k, v in arrays.items()}
    if shapes != self._shapes:
      for name, shape in shapes.items():
        it.resize_tensor_input(self.input_details[name]["index"], list(shape))
      it.allocate_tensors()
      self._shapes = shapes
    for name, value in arrays.items():
      it.set_tensor(self.input_details[name]["index"], value)
    it.invoke()
    return {name: it.get_tensor(index) for name, index in self._outputs.items()}


def resolve_litert(path: str) -> str:
  """The ``.tflite`` file of ``path`` (a file, a folder holding
  :data:`TFLITE_FILE`, or an export directory whose highest numeric version
  folder holds one); None when there is none."""
  if path.endswith(".tflite") and os.path.isfile(path):
    return path
  if os.path.isfile(os.path.join(path, TFLITE_FILE)):
    return os.path.join(path, TFLITE_FILE)
  versions = [v for v in version_numbers(path)
              if os.path.isfile(os.path.join(path, str(v), TFLITE_FILE))]
  saved = [v for v in version_numbers(path)
           if os.path.exists(os.path.join(path, str(v), SAVED_MODEL_FILE))]
  if versions and max(versions) > max(saved, default=0):
    return os.path.join(path, str(max(versions)), TFLITE_FILE)
  return None


def _refuse_mediapipe(tflite: Optional[str], path: str) -> None:
  """A MediaPipe Tasks export takes token ids (MediaPipe tokenizes, from the
  vocab in its TFLite metadata), not this client's strings: one line naming
  what runs it."""
  if tflite and read_metadata(path).get("format") == "mediapipe":
    raise PredictError(
        "%s is a MediaPipe Tasks model (token ids in, its tokenizer in the TFLite "
        "metadata): run it with mediapipe.tasks.python.text.TextClassifier (a classifier) "
        "or TextEmbedder (--what=features), or export --format=litert for raw text in"
        % tflite)


def serve(export: str, strings: Sequence[str] = (), *, input_file: Optional[str] = None,
          signature_name: str = DEFAULT_SIGNATURE, pair: bool = False,
          batch_size: int = 64, precision: int = 6,
          with_inputs: bool = False, num_threads: Optional[int] = None) -> List[str]:
  """The JSON lines that answer one request to ``export``.

  Args:
    export: a SavedModel version directory or an export directory
      (:func:`resolve_export`).
    strings: the request as command-line strings (:func:`rows_from_args`).
    input_file: the request as JSON lines instead (``-``: standard input;
      :func:`rows_from_jsonl`).
    signature_name: the signature to call.
    pair: call the ``pair`` signature (preprocessor, feature extraction); a
      two-input ``signature_name`` is taken as it is.
    batch_size: rows per signature call.
    precision: significant digits of floats (0: unrounded).
    with_inputs: add each row's inputs under ``"inputs"``.
    num_threads: a ``.tflite``'s interpreter threads (None: LiteRT's
      default); a SavedModel ignores it.

  ``export`` may also be a LiteRT export (a ``.tflite``, a folder holding
  ``model.tflite``, or an export directory whose newest version holds one:
  :func:`resolve_litert`), served by ``ai_edge_litert`` with
  tensorflow-text's kernels (:class:`LiteRTSignature`).

  Returns:
    one JSON object per request row (str, keys sorted, non-ASCII kept).

  Raises:
    PredictError: every bad request, export or argument combination, before
      anything is returned.
  """
  tflite = resolve_litert(export) if os.path.exists(export) else None
  path = os.path.dirname(tflite) if tflite else resolve_export(export)
  strings = list(strings)
  if input_file and strings:
    raise PredictError("give the request as command-line STRINGs or as --input_file, "
                       "not both")
  _refuse_mediapipe(tflite, path)
  if tflite:
    names = litert_interpreter(tflite, 1).get_signature_list()
    signatures = {n: LiteRTSignature(tflite, n, 1).specs() for n in names}
  else:
    signatures = read_signatures(path)
  name = signature_name
  if pair:
    if "pair" in signatures:
      name = "pair"
    elif len(signatures.get(name, ())) != 2:
      raise PredictError("--pair: %s has no 'pair' signature (signatures: %s)" % (
          path, ", ".join(sorted(signatures))))
  if name not in signatures:
    raise PredictError("%s has no signature %r (signatures: %s)" % (
        path, name, ", ".join(sorted(signatures))))
  inputs = signature_inputs(signatures[name], read_metadata(path), name)
  if not inputs:
    raise PredictError("%s: signature %r takes no input" % (path, name))
  if input_file:
    raw = rows_from_jsonl(input_file, inputs, name)
  elif strings:
    raw = rows_from_args(strings, inputs, name)
  else:
    raise PredictError("no request: give STRINGs after %s, or --input_file (%s)" % (
        export, expected(inputs, name)))
  rows = check_rows(raw, inputs)
  try:
    fn = (LiteRTSignature(tflite, name, num_threads) if tflite
          else tf.saved_model.load(path).signatures[name])
  except (OSError, ValueError, KeyError, tf.errors.OpError) as e:
    raise PredictError("%s: cannot load the SavedModel: %s" % (path, _tf_message(e))) from e
  results = predict(fn, inputs, rows, batch_size, precision)
  lines = []
  for row, result in zip(rows, results):
    if with_inputs:
      result = dict(result, inputs=_inputs_for_print(row))
    lines.append(json.dumps(result, sort_keys=True, ensure_ascii=False))
  return lines
