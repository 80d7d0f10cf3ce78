""".keras files load in a NEW process after a plain ``import bert_tf``.

Each public model is built, compiled with ``bert_tf.create_optimizer`` (the
original's AdamWeightDecay) or Keras ``AdamW`` on our schedule, trained one
step with ``fit`` (so the optimizer has state), saved, and then loaded by a
new process that ran exactly ``import bert_tf; import keras`` and then
``keras.models.load_model(path)`` in a ``fork()`` per model (each load starts
from that state; one process start for all, :data:`LOADER`): same class,
same weights, same optimizer state, identical outputs. The process also
checks that ``import bert_tf``
itself loaded neither TensorFlow nor Keras (the pretraining-data workers rely
on it; see ``bert_tf/_keras_registry.py``).
"""

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf import _keras_registry
from bert_tf import config as config_lib
from bert_tf import optimization
from bert_tf.modeling import encoder as encoder_lib
from bert_tf.modeling import models
from bert_tf.modeling import multiple_choice
from bert_tf.modeling import tagging

CONFIG = config_lib.BertConfig(
    vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=48, max_position_embeddings=32, type_vocab_size=2)
B, S = 4, 12


def _features(rng, shape):
  lengths = rng.randint(3, S + 1, shape[:-1])
  mask = (np.arange(S) < lengths[..., None]).astype(np.int32)
  return {"input_ids": (rng.randint(1, CONFIG.vocab_size, shape) * mask).astype(np.int32),
          "input_mask": mask,
          "segment_ids": ((np.arange(S) >= 5) * mask).astype(np.int32)}


def _case(what, rng):
  """(model, x, y, loss) for one public model."""
  sce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  if what == "classifier":
    return (models.build_classifier(CONFIG, 3), _features(rng, (B, S)),
            rng.randint(0, 3, (B,)), sce)
  if what == "pretrainer":
    x = _features(rng, (B, S))
    x["masked_lm_positions"] = np.sort(rng.randint(1, 3, (B, 2)), axis=1).astype(np.int32)
    y = {"masked_lm_logits": rng.randint(0, CONFIG.vocab_size, (B, 2)),
         "next_sentence_logits": rng.randint(0, 2, (B,))}
    return models.build_pretrainer(CONFIG), x, y, {k: sce for k in y}
  if what == "question_answerer":
    y = {"start_logits": rng.randint(0, S, (B,)), "end_logits": rng.randint(0, S, (B,))}
    return models.build_question_answerer(CONFIG), _features(rng, (B, S)), y, {k: sce for k in y}
  if what == "token_classifier":
    model = tagging.BertTokenClassifier(CONFIG, 5)
    return model, _features(rng, (B, S)), rng.randint(0, 5, (B, S)), sce
  if what == "multiple_choice":
    return (multiple_choice.build_multiple_choice(CONFIG), _features(rng, (B, 4, S)),
            rng.randint(0, 4, (B,)), sce)
  assert what == "functional_encoder"
  inputs = {k: keras.Input((None,), dtype="int32", name=k) for k in encoder_lib.INPUT_NAMES}
  out = encoder_lib.BertEncoder(CONFIG, name="bert")(inputs)
  model = keras.Model(inputs, {"pooled_output": out["pooled_output"]})
  y = {"pooled_output": rng.normal(size=(B, CONFIG.hidden_size)).astype(np.float32)}
  return model, _features(rng, (B, S)), y, {"pooled_output": "mse"}


def _optimizer(kind):
  if kind == "create_optimizer":
    return bert_tf.create_optimizer(1e-3, 100, 10)
  opt = keras.optimizers.AdamW(
      learning_rate=optimization.WarmupLinearDecay(1e-3, 100, 10), weight_decay=0.01)
  opt.exclude_from_weight_decay(var_names=["gamma", "beta", "bias"])
  return opt


# The new process: ``import bert_tf`` (which must load neither TensorFlow nor
# Keras), then ``import keras``, then, for each request line on stdin
# ("model.keras x.npz out.npz"), a fork() that loads the model and writes
# its outputs, weights and optimizer state: every load starts from exactly
# that state, as a new process's would, without paying the imports 12 times.
LOADER = textwrap.dedent("""
    import os
    import sys
    import traceback
    import numpy as np
    import bert_tf
    assert "tensorflow" not in sys.modules and "keras" not in sys.modules, "import bert_tf loaded TF"
    import keras

    def load(path, x_path, out_path):
      model = keras.models.load_model(path)
      x = dict(np.load(x_path))
      out = model(x)
      out = out if isinstance(out, dict) else {"output": out}
      result = {"out/" + k: np.asarray(v) for k, v in out.items()}
      result.update({"w/%d" % i: w.numpy() for i, w in enumerate(model.weights)})
      result.update({"opt/%d" % i: v.numpy() for i, v in enumerate(model.optimizer.variables)})
      np.savez(out_path, **result)
      with open(out_path + ".names", "w") as f:
        f.write("%s %s %s" % (type(model).__name__, type(model.optimizer).__name__,
                              type(model.optimizer.learning_rate).__name__
                              if hasattr(model.optimizer, "_learning_rate") else ""))

    print("ready", flush=True)
    for line in sys.stdin:
      pid = os.fork()
      if pid == 0:
        code = 0
        try:
          load(*line.split())
        except BaseException:
          traceback.print_exc()
          code = 1
        sys.stderr.flush()
        os._exit(code)
      print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
""")


@pytest.fixture(scope="module")
def loader():
  """The module's new process (:data:`LOADER`): ``load(model, x, out)``
  asserts that the process started (its imports passed) and that one forked
  load exited 0; a failure's message holds the process's stderr."""
  env = dict(os.environ)
  env.pop("KERAS_BACKEND", None)  # as in a user's shell: bert_tf selects it
  import tempfile  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as tmp:
    err_path = os.path.join(tmp, "stderr")
    with open(err_path, "w") as err:
      proc = subprocess.Popen([sys.executable, "-c", LOADER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=err, text=True, env=env)

    def read_err():
      with open(err_path) as f:
        return f.read()[-3000:]

    ready = proc.stdout.readline().strip() == "ready"  # "" if the imports failed

    def load(*paths):
      assert ready, read_err()
      proc.stdin.write(" ".join(map(str, paths)) + "\n")
      proc.stdin.flush()
      rc = proc.stdout.readline().strip()
      assert rc == "0", "load failed (%s):\n%s" % (rc, read_err())

    yield load
    proc.stdin.close()
    proc.wait(timeout=60)


WHATS = ["classifier", "pretrainer", "question_answerer", "token_classifier",
         "multiple_choice", "functional_encoder"]


# Two cases stay in the fast run; every other pair runs in the slow (CI) run.
FAST = {("classifier", "create_optimizer"), ("token_classifier", "keras_adamw")}
CASES = [pytest.param(w, o, marks=() if (w, o) in FAST else pytest.mark.slow)
         for w in WHATS for o in ("create_optimizer", "keras_adamw")]


@pytest.mark.parametrize("what,optimizer", CASES)
def test_load_model_in_a_fresh_process(tmp_path, what, optimizer, loader):
  rng = np.random.RandomState(WHATS.index(what))
  model, x, y, loss = _case(what, rng)
  model.compile(optimizer=_optimizer(optimizer), loss=loss)
  model.fit(x, y, batch_size=B, epochs=1, verbose=0)
  assert int(model.optimizer.iterations.numpy()) == 1
  path = str(tmp_path / "model.keras")
  model.save(path)
  np.savez(tmp_path / "x.npz", **x)
  loader(path, tmp_path / "x.npz", tmp_path / "out.npz")
  with open(str(tmp_path / "out.npz") + ".names") as f:
    names = f.read().split()
  assert names[0] == type(model).__name__
  assert names[1] == type(model.optimizer).__name__
  got = dict(np.load(tmp_path / "out.npz"))
  out = model(x)
  out = out if isinstance(out, dict) else {"output": out}
  for k, v in out.items():
    np.testing.assert_array_equal(got["out/" + k], v.numpy(), err_msg=k)
  assert sum(k.startswith("w/") for k in got) == len(model.weights)
  for i, w in enumerate(model.weights):
    np.testing.assert_array_equal(got["w/%d" % i], w.numpy(), err_msg=w.path)
  opt_vars = model.optimizer.variables
  assert len(opt_vars) > 2  # iterations, learning rate and the slots
  assert sum(k.startswith("opt/") for k in got) == len(opt_vars)
  for i, v in enumerate(opt_vars):
    np.testing.assert_array_equal(got["opt/%d" % i], v.numpy(), err_msg=v.path)


def test_registry_table_lists_every_registered_class():
  """The stand-ins of ``_keras_registry.CLASSES`` are exactly the classes the
  modules register (a new serializable class must be added there)."""
  import bert_tf.modeling  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  import bert_tf.optimization  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  import bert_tf.preprocessing  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  registered = {name: obj for name, obj in keras.saving.get_custom_objects().items()
                if name.startswith("bert_tf>")}
  assert set(registered) == set(_keras_registry.CLASSES)
  for name, obj in registered.items():
    assert isinstance(obj, type), "%s is still a stand-in after its module loaded" % name
    assert obj.__module__ == _keras_registry.CLASSES[name], name


def test_keras_imported_before_bert_tf(tmp_path):
  """``import keras`` first, then ``import bert_tf``: the stand-ins are put in
  at once, and a saved encoder model loads."""
  inputs = {k: keras.Input((None,), dtype="int32", name=k) for k in encoder_lib.INPUT_NAMES}
  out = encoder_lib.BertEncoder(CONFIG, name="bert")(inputs)
  keras.Model(inputs, out["pooled_output"]).save(str(tmp_path / "e.keras"))
  code = ("import keras, bert_tf; m = keras.models.load_model(%r); "
          "print(type(m.get_layer('bert')).__module__)" % str(tmp_path / "e.keras"))
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.split()[-1] == "bert_tf.modeling.encoder"


def test_without_import_bert_tf_keras_says_so(tmp_path):
  """The registry is what makes loading work: without ``import bert_tf``
  Keras cannot find the class (so the tests above can fail)."""
  model = models.build_classifier(CONFIG, 2)
  model(_features(np.random.RandomState(0), (1, S)))
  model.save(str(tmp_path / "c.keras"))
  code = "import keras; keras.models.load_model(%r)" % str(tmp_path / "c.keras")
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        timeout=600, env=dict(os.environ, KERAS_BACKEND="tensorflow"))
  assert proc.returncode != 0
  assert "BertClassifier" in proc.stderr


def test_corrupt_truncated_or_foreign_keras_file_is_one_clear_error(tmp_path):
  """``from_preset`` of a bad ``.keras`` file: a CheckpointError of one line
  naming the file, for random bytes, a truncated archive and a plain Keras
  model that is not bert_tf's."""
  from bert_tf import errors  # pylint: disable=g-import-not-at-top
  good = tmp_path / "good.keras"
  m = models.build_classifier(CONFIG, 2)
  m(_features(np.random.RandomState(0), (1, S)))
  m.save(str(good))
  corrupt = tmp_path / "corrupt.keras"
  corrupt.write_bytes(b"\x00not a zip archive" * 100)
  truncated = tmp_path / "truncated.keras"
  truncated.write_bytes(good.read_bytes()[:2000])
  foreign = tmp_path / "foreign.keras"
  inp = keras.Input((4,))
  keras.Model(inp, keras.layers.Dense(2)(inp)).save(str(foreign))
  for path in (corrupt, truncated, foreign):
    with pytest.raises(errors.CheckpointError) as e:
      bert_tf.BertClassifier.from_preset(str(path), num_labels=2)
    msg = str(e.value)
    assert str(path) in msg and "\n" not in msg, msg
  assert "not a bert_tf model" in str(pytest.raises(
      errors.CheckpointError, bert_tf.BertEncoder.from_preset, str(foreign)).value)
  loaded = bert_tf.BertClassifier.from_preset(str(good), num_labels=2)  # the good one loads
  assert len(loaded.weights) == len(m.weights)
