"""How much of a ``.tflite`` XNNPACK runs: every graph of the file, measured.

LiteRT applies XNNPACK (its default CPU delegate) to every graph of a model:
the main graph and each subgraph that an ``IF`` / ``WHILE`` runs, such as
the length buckets' encoders of the classifier and multiple-choice exports
(:data:`bert_tf.export.litert.BUCKETS`). After delegation a graph's node
list holds its remaining operators and one ``DELEGATE`` node per partition
that XNNPACK took; LiteRT's Python API lists that node list for the main
graph only. So each graph is measured as the main graph of a copy of the
file (the graphs reordered, every ``IF`` / ``WHILE`` / ``CALL_ONCE`` index
renumbered to match; nothing else changed), run once on a batch-1 request
of zeros in the interpreter the client uses
(:func:`bert_tf.export.client.litert_interpreter`'s kernels). XNNPACK
partitions a graph from its operators and tensor types, which the copy
keeps, so the counts are the ones the real file gets.

Source: LiteRT's ``Interpreter::ModifyGraphWithDelegate`` (every subgraph)
and its flatbuffer schema (``ai_edge_litert.schema_py_generated``, read and
written with ``ai_edge_litert.tools.flatbuffer_utils``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Dict, List

import numpy as np

from bert_tf.export import client

# Operators whose options name other graphs by index: (options class name,
# the attributes holding a graph index).
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
  """The file's bytes with graph ``k`` first (graphs 0 and k swapped; no
  signatures, so the interpreter runs graph 0). ``model`` is left as it was."""
  from ai_edge_litert.tools import flatbuffer_utils as fu  # pylint: disable=g-import-not-at-top
  _swap_graphs(model, k)
  saved_signatures, model.signatureDefs = model.signatureDefs, []
  try:
    return bytes(fu.convert_object_to_bytearray(model))
  finally:
    model.signatureDefs = saved_signatures
    _swap_graphs(model, k)


def _zeros(detail) -> np.ndarray:
  shape = [1 if d < 0 else int(d) for d in detail["shape_signature"]]
  if detail["dtype"] in (np.bytes_, np.object_, object):
    return np.full(shape, b"x", dtype=np.bytes_)
  return np.zeros(shape, detail["dtype"])


def _count(nodes: List[dict]) -> Dict[str, int]:
  """Operators of a delegated node list, and those inside a partition
  (between a ``DELEGATE`` node's input and output tensors)."""
  ops = [n for n in nodes if n["op_name"] != "DELEGATE"]
  parts = [n for n in nodes if n["op_name"] == "DELEGATE"]
  matmuls = sum(n["op_name"] in ("FULLY_CONNECTED", "BATCH_MATMUL") for n in ops)
  # A delegated operator's node stays in the list but leaves the execution
  # plan; it is found by walking back from a partition's outputs.
  producer = {int(t): n["index"] for n in ops for t in n["outputs"]}
  inputs_of = {n["index"]: [int(t) for t in n["inputs"] if t >= 0] for n in ops}
  delegated = set()
  for part in parts:
    boundary = {int(t) for t in part["inputs"]}
    stack, seen = [int(t) for t in part["outputs"]], set()
    while stack:
      t = stack.pop()
      if t in seen or t in boundary or t not in producer:
        continue
      seen.add(t)
      op = producer[t]
      delegated.add(op)
      stack.extend(inputs_of[op])
  return {"ops": len(ops), "delegated": len(delegated), "partitions": len(parts),
          "matmuls": matmuls}


def xnnpack_share(tflite_path: str, num_threads: int = 1) -> Dict[str, object]:
  """XNNPACK's share of every graph of a ``.tflite``, measured.

  Every graph (each signature's, each ``IF`` branch's) runs once as the
  main graph of a copy of the file, on batch-1 inputs of zeros (strings:
  ``"x"``), in the interpreter the client uses.

  Args:
    tflite_path: the file.
    num_threads: the interpreter's.

  Returns:
    ``{"ops": N, "delegated": D, "partitions": K, "graphs": [...]}``: the
    totals over every graph, and per graph (file order) a dict with
    ``index``, ``name``, ``ops``, ``delegated``, ``partitions`` and
    ``matmuls`` (its FULLY_CONNECTED / BATCH_MATMUL operators: an encoder's
    graph has them, the tokenizer's and control flow's have none).

  Raises:
    client.PredictError: ai-edge-litert or tensorflow-text's registrar
      missing.
    ValueError / RuntimeError: the file does not load.
  """
  from ai_edge_litert import interpreter as litert  # pylint: disable=g-import-not-at-top
  from ai_edge_litert.tools import flatbuffer_utils as fu  # pylint: disable=g-import-not-at-top
  model = fu.read_model(tflite_path)
  registrars = client.litert_registrars()
  graphs = []
  with _native_stderr_quiet():  # LiteRT's "INFO: Created ... XNNPACK delegate" line
    for k in range(len(model.subgraphs)):
      graphs.append(_measure(litert, model, k, registrars, num_threads))
  total = {key: sum(g[key] for g in graphs) for key in ("ops", "delegated", "partitions")}
  return dict(total, graphs=graphs)


@contextlib.contextmanager
def _native_stderr_quiet():
  """File descriptor 2 to /dev/null for the block (LiteRT's C++ log lines;
  Python errors still raise)."""
  sys.stderr.flush()
  saved = os.dup(2)
  try:
    with open(os.devnull, "w") as null:
      os.dup2(null.fileno(), 2)
    yield
  finally:
    os.dup2(saved, 2)
    os.close(saved)


def _measure(litert, model, k: int, registrars, num_threads: int) -> dict:
  """One graph's counts: graph ``k`` run as the main graph of a copy."""
  interp = litert.InterpreterWithCustomOps(
      custom_op_registerers=registrars, model_content=_as_main_graph(model, k),
      num_threads=num_threads)
  for d in interp.get_input_details():
    interp.resize_tensor_input(d["index"], [1 if s < 0 else int(s)
                                            for s in d["shape_signature"]])
  interp.allocate_tensors()
  for d in interp.get_input_details():
    interp.set_tensor(d["index"], _zeros(d))
  interp.invoke()
  name = model.subgraphs[k].name
  return dict(index=k, name=name.decode() if isinstance(name, bytes) else str(name or ""),
              **_count(interp._get_ops_details()))  # pylint: disable=protected-access
