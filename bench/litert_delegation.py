"""How much of a ``.tflite`` XNNPACK runs: every graph of the file, measured.

  python bench/litert_delegation.py EXPORT/1/model.tflite

Caveat: LiteRT documents no API for this. The counts come from
``Interpreter._get_ops_details()``, a private method of LiteRT's Python
interpreter (ai-edge-litert), so this lives in ``bench/`` and gives
measured figures only (the numbers in BUILD_NOTES.md); no package code or
tool output depends on it, and a LiteRT release may break it.

LiteRT applies XNNPACK (its default CPU delegate) to every graph of a model:
the main graph and each subgraph an ``IF`` / ``WHILE`` runs (the length
buckets' encoders of the classifier and multiple-choice exports). After
delegation a graph's node list holds its remaining operators and one
``DELEGATE`` node per partition XNNPACK took; the interpreter lists that
for the main graph only. So each graph is measured as the main graph of a
copy of the file (graphs 0 and k swapped, every ``IF`` / ``WHILE`` /
``CALL_ONCE`` index renumbered; nothing else changed), run once on a batch-1
request of zeros in the client's interpreter
(:func:`bert_tf.export.client.litert_interpreter`'s kernels). XNNPACK
partitions a graph from its operators and tensor types, which the copy
keeps, so the counts are the ones the real file gets.

Source: LiteRT's ``Interpreter::ModifyGraphWithDelegate`` (every subgraph)
and its flatbuffer schema (read and written with
``ai_edge_litert.tools.flatbuffer_utils``).
"""

import contextlib
import os
import sys
from typing import Dict, List

import numpy as np

from bert_tf.export import client

# Operator options that name other graphs by index: their attributes.
_GRAPH_INDEX_OPTIONS = {
    "IfOptionsT": ("thenSubgraphIndex", "elseSubgraphIndex"),
    "WhileOptionsT": ("condSubgraphIndex", "bodySubgraphIndex"),
    "CallOnceOptionsT": ("initSubgraphIndex",),
}


def _swap_graphs(model, k: int) -> None:
  """Graphs 0 and k swapped in place, every graph index an operator names
  renumbered to match (its own inverse: a second call undoes it)."""
  swap = lambda i: k if i == 0 else (0 if i == k else i)  # pylint: disable=unnecessary-lambda-assignment
  graphs = list(model.subgraphs)
  graphs[0], graphs[k] = graphs[k], graphs[0]
  model.subgraphs = graphs
  for graph in graphs:
    for op in graph.operators or ():
      for attr in _GRAPH_INDEX_OPTIONS.get(type(op.builtinOptions).__name__, ()):
        setattr(op.builtinOptions, attr, swap(getattr(op.builtinOptions, attr)))


def _as_main_graph(model, k: int) -> bytes:
  """The file's bytes with graph ``k`` first and no signatures (the
  interpreter then runs graph 0); ``model`` is left as it was."""
  from ai_edge_litert.tools import flatbuffer_utils as fu  # pylint: disable=g-import-not-at-top
  _swap_graphs(model, k)
  saved_signatures, model.signatureDefs = model.signatureDefs, []
  try:
    return bytes(fu.convert_object_to_bytearray(model))
  finally:
    model.signatureDefs = saved_signatures
    _swap_graphs(model, k)


def _count(nodes: List[dict]) -> Dict[str, int]:
  """Operators of a delegated node list, and those inside a partition: a
  delegated operator's node stays in the list, found by walking back from a
  partition's outputs to its inputs."""
  ops = [n for n in nodes if n["op_name"] != "DELEGATE"]
  parts = [n for n in nodes if n["op_name"] == "DELEGATE"]
  producer = {int(t): n["index"] for n in ops for t in n["outputs"]}
  inputs_of = {n["index"]: [int(t) for t in n["inputs"] if t >= 0] for n in ops}
  delegated = set()
  for part in parts:
    boundary, seen = {int(t) for t in part["inputs"]}, set()
    stack = [int(t) for t in part["outputs"]]
    while stack:
      t = stack.pop()
      if t in seen or t in boundary or t not in producer:
        continue
      seen.add(t)
      delegated.add(producer[t])
      stack.extend(inputs_of[producer[t]])
  matmuls = sum(n["op_name"] in ("FULLY_CONNECTED", "BATCH_MATMUL") for n in ops)
  return {"ops": len(ops), "delegated": len(delegated), "partitions": len(parts),
          "matmuls": matmuls}


def _measure(litert, model, k: int, registrars, num_threads: int) -> dict:
  """One graph's counts: graph ``k`` run as the main graph of a copy, on
  batch-1 zeros (strings: ``"x"``)."""
  interp = litert.InterpreterWithCustomOps(
      custom_op_registerers=registrars, model_content=_as_main_graph(model, k),
      num_threads=num_threads)
  details = interp.get_input_details()
  shapes = [[1 if s < 0 else int(s) for s in d["shape_signature"]] for d in details]
  for d, shape in zip(details, shapes):
    interp.resize_tensor_input(d["index"], shape)
  interp.allocate_tensors()
  for d, shape in zip(details, shapes):
    text = d["dtype"] in (np.bytes_, np.object_, object)
    interp.set_tensor(d["index"], np.full(shape, b"x", np.bytes_) if text
                      else np.zeros(shape, d["dtype"]))
  interp.invoke()
  name = model.subgraphs[k].name
  return dict(index=k, name=name.decode() if isinstance(name, bytes) else str(name or ""),
              **_count(interp._get_ops_details()))  # pylint: disable=protected-access


def xnnpack_share(tflite_path: str, num_threads: int = 1) -> Dict[str, object]:
  """XNNPACK's share of every graph of a ``.tflite``, measured.

  Args:
    tflite_path: the file.
    num_threads: the interpreter's.

  Returns:
    ``{"ops": N, "delegated": D, "partitions": K, "graphs": [...]}``: totals
    over every graph, and per graph (file order) ``index``, ``name``,
    ``ops``, ``delegated``, ``partitions``, ``matmuls`` (FULLY_CONNECTED /
    BATCH_MATMUL operators: an encoder graph has them).

  Raises:
    client.PredictError: ai-edge-litert or tensorflow-text's registrar missing.
    ValueError / RuntimeError: the file does not load.
  """
  from ai_edge_litert import interpreter as litert  # pylint: disable=g-import-not-at-top
  from ai_edge_litert.tools import flatbuffer_utils as fu  # pylint: disable=g-import-not-at-top
  model = fu.read_model(tflite_path)
  registrars = client.litert_registrars()
  sys.stderr.flush()  # LiteRT's C++ "Created ... XNNPACK delegate" lines: to /dev/null
  saved = os.dup(2)
  try:
    with open(os.devnull, "w") as null:
      os.dup2(null.fileno(), 2)
    graphs = [_measure(litert, model, k, registrars, num_threads)
              for k in range(len(model.subgraphs))]
  finally:
    os.dup2(saved, 2)
    os.close(saved)
  total = {key: sum(g[key] for g in graphs) for key in ("ops", "delegated", "partitions")}
  return dict(total, graphs=graphs)


if __name__ == "__main__":
  with contextlib.suppress(BrokenPipeError):
    for path in sys.argv[1:]:
      share = xnnpack_share(path)
      print("%s: XNNPACK runs %d of %d operators (%d partitions)" % (
          path, share["delegated"], share["ops"], share["partitions"]))
      for g in share["graphs"]:
        print("  graph %d %s: %d of %d (%d partitions, %d matmuls)" % (
            g["index"], g["name"], g["delegated"], g["ops"], g["partitions"], g["matmuls"]))
