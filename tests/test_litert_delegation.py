"""XNNPACK's share of every graph of a .tflite (bench/litert_delegation.py).

A small converted model with nested ``tf.cond``s, as the bucketed exports
have: branch graphs of float ops XNNPACK takes whole (FULLY_CONNECTED,
TANH), a branch with an op it has no kernel for (CUMSUM on int32) and a
branch holding the inner ``IF``. The counts must tell them apart, the main
graph's must equal a plain interpreter's node list, and every graph run as
the main graph of the copy (its ``IF`` renumbered) must compute what it
computes inside the file.

The module is a benchmark's (it reads LiteRT's private node list), not the
package's: it is loaded from its file, as bench scripts are not a package.
"""

import importlib.util
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.export import client

pytest.importorskip("ai_edge_litert")

_SPEC = importlib.util.spec_from_file_location(
    "litert_delegation", os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "bench", "litert_delegation.py"))
litert_delegation = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(litert_delegation)

W = np.random.RandomState(0).randn(8, 8).astype(np.float32)


def _kinds(model):
  """Graph index -> "if" / "cumsum" / "float" / "main" by its operators."""
  from ai_edge_litert.tools import flatbuffer_utils as fu
  out = {}
  for k, graph in enumerate(model.subgraphs):
    names = {fu.opcode_to_name(model, op.opcodeIndex) for op in graph.operators}
    out[k] = ("main" if k == 0 else "if" if "IF" in names
              else "cumsum" if "CUMSUM" in names else "float")
  return out


@pytest.fixture(scope="module")
def cond_tflite(tmp_path_factory):
  @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32),
                                tf.TensorSpec([None, 8], tf.int32)])
  def serve(x, ids):
    total = tf.reduce_sum(x)

    def dense(scale):
      # The weights a constant of the branch, as the encoder's are.
      return lambda: tf.tanh(tf.matmul(x, tf.constant(W)) + 1.0) * scale

    def cumsum_branch():
      return tf.cast(tf.cumsum(ids, axis=1), tf.float32) * 2.0

    inner = lambda: tf.cond(total > 100.0, dense(3.0), dense(1.0))  # pylint: disable=unnecessary-lambda-assignment
    return {"y": tf.cond(total > 0, inner, cumsum_branch)}

  module = tf.Module()
  module.serve = serve
  conv = tf.lite.TFLiteConverter.from_concrete_functions([serve.get_concrete_function()],
                                                         module)
  conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
  path = tmp_path_factory.mktemp("lite") / "cond.tflite"
  path.write_bytes(conv.convert())
  return str(path)


def test_every_graph_is_counted_and_tells_delegated_from_not(cond_tflite):
  from ai_edge_litert.tools import flatbuffer_utils as fu
  share = litert_delegation.xnnpack_share(cond_tflite)
  model = fu.read_model(cond_tflite)
  graphs = share["graphs"]
  assert [g["index"] for g in graphs] == list(range(len(model.subgraphs))) == list(range(5))
  assert [g["ops"] for g in graphs] == [len(s.operators) for s in model.subgraphs]
  kinds = _kinds(model)
  assert sorted(kinds.values()) == ["cumsum", "float", "float", "if", "main"], kinds
  for g in graphs:
    kind = kinds[g["index"]]
    if kind == "float":  # one partition holding every operator
      assert (g["delegated"], g["partitions"]) == (g["ops"], 1), graphs
    elif kind == "cumsum":  # the MUL taken, the int32 CUMSUM left
      assert 0 < g["delegated"] < g["ops"], graphs
    else:  # control flow: the IF stays with LiteRT
      assert g["delegated"] < g["ops"], graphs
  assert share["ops"] == sum(g["ops"] for g in graphs)
  assert share["delegated"] == sum(g["delegated"] for g in graphs)

  # The main graph's count is the plain interpreter's node list after a run.
  interp = client.litert_interpreter(cond_tflite, 1)
  interp.get_signature_runner()(x=np.ones([1, 8], np.float32), ids=np.ones([1, 8], np.int32))
  nodes = interp._get_ops_details()  # pylint: disable=protected-access
  assert graphs[0]["ops"] == len([n for n in nodes if n["op_name"] != "DELEGATE"])
  assert graphs[0]["partitions"] == len([n for n in nodes if n["op_name"] == "DELEGATE"])


def test_a_graph_promoted_to_main_computes_what_it_computes_in_the_file(cond_tflite):
  from ai_edge_litert import interpreter as litert
  from ai_edge_litert.tools import flatbuffer_utils as fu
  model = fu.read_model(cond_tflite)
  before = bytes(fu.convert_object_to_bytearray(model))
  x = np.random.RandomState(1).rand(2, 8).astype(np.float32)  # 0 < sum < 100
  ids = np.arange(16, dtype=np.int32).reshape(2, 8)
  full = client.litert_interpreter(cond_tflite, 1).get_signature_runner()

  def run_graph(k, xk):
    interp = litert.Interpreter(model_content=litert_delegation._as_main_graph(model, k))  # pylint: disable=protected-access
    ins = interp.get_input_details()
    # A branch takes what the IF passes: the batch sum (a scalar), x, ids.
    feed = [np.float32(xk.sum()) if len(d["shape_signature"]) == 0 else
            xk if d["dtype"] == np.float32 else ids for d in ins]
    for d, v in zip(ins, feed):
      interp.resize_tensor_input(d["index"], np.shape(v))
    interp.allocate_tensors()
    for d, v in zip(ins, feed):
      interp.set_tensor(d["index"], v)
    interp.invoke()
    got = interp.get_tensor(interp.get_output_details()[0]["index"])
    return bool(np.allclose(got, full(x=xk, ids=ids)["y"], atol=1e-5))

  small, big, negative = x, x * 100.0, -x
  kinds = _kinds(model)
  for k, kind in kinds.items():
    if kind == "if":  # the inner IF, renumbered, picks its branch right
      assert (run_graph(k, small), run_graph(k, big)) == (True, True)
    elif kind == "cumsum":
      assert run_graph(k, negative)
  floats = [k for k, kind in kinds.items() if kind == "float"]
  # Of the two dense branches, each is the file's answer on one input.
  assert sorted([(run_graph(k, small), run_graph(k, big)) for k in floats]) == [
      (False, True), (True, False)]
  # The caller's model object is left as the file.
  assert bytes(fu.convert_object_to_bytearray(model)) == before
