"""``hf://ORG/NAME[@REVISION]`` from the local Hugging Face cache, never the network.

A real cache layout is built here (``models--ORG--NAME/blobs/<sha256>``,
``snapshots/<commit>/<file>`` symlinks into the blobs, ``refs/main``) that
``huggingface_hub.scan_cache_dir`` accepts and transformers itself loads
offline; then ``from_preset("hf://...")`` (branch and commit), every tool's
``--init_checkpoint=hf://...`` (through the library's config/vocab/weights
resolution, one tool run of ``extract_features``), ``export_saved_model
--from_preset=hf://...`` whose served answers equal transformers' on real
movie reviews (labels by name), and an uncached repo's one line.
"""

import csv
import hashlib
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import errors
from bert_tf import huggingface
from bert_tf.modeling import models
from bert_tf.modeling import presets
from bert_tf.tasks import fine_tuning
from conftest import MOVIE_DIR, ROOT, run_tool

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
huggingface_hub = pytest.importorskip("huggingface_hub")

REPO = "bert-tf-tests/minilm-cropped-sentiment"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _sentences(n=5):
  with open(os.path.join(MOVIE_DIR, "dev.tsv"), encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
  return [rows[i][0] for i in range(0, len(rows), len(rows) // n)][:n]


def write_cache(cache, repo, commit, files_dir):
  """``files_dir``'s files as huggingface_hub stores a download of ``repo``."""
  base = os.path.join(cache, "models--" + repo.replace("/", "--"))
  os.makedirs(os.path.join(base, "blobs"))
  os.makedirs(os.path.join(base, "refs"))
  snap = os.path.join(base, "snapshots", commit)
  os.makedirs(snap)
  for name in sorted(os.listdir(files_dir)):
    with open(os.path.join(files_dir, name), "rb") as f:
      data = f.read()
    blob = hashlib.sha256(data).hexdigest()
    with open(os.path.join(base, "blobs", blob), "wb") as f:
      f.write(data)
    os.symlink(os.path.join("..", "..", "blobs", blob), os.path.join(snap, name))
  with open(os.path.join(base, "refs", "main"), "w", encoding="utf-8") as f:
    f.write(commit)
  return snap


@pytest.fixture(scope="module")
def cache(cropped_minilm_dir, minilm_dir, tmp_path_factory, request):
  """A hub cache holding REPO (a transformers 5 BertForSequenceClassification)."""
  root = tmp_path_factory.mktemp("hub")
  files = str(root / "files")
  torch.manual_seed(0)
  model = transformers.BertForSequenceClassification.from_pretrained(
      cropped_minilm_dir, id2label={0: "negative", 1: "positive"})
  gen = torch.Generator().manual_seed(1)
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.startswith("classifier"):
        p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
  model.eval().save_pretrained(files)
  transformers.AutoTokenizer.from_pretrained(minilm_dir).save_pretrained(files)
  cache_dir = str(root / "hub")
  write_cache(cache_dir, REPO, COMMIT, files)
  mp = pytest.MonkeyPatch()
  mp.setenv("HF_HUB_CACHE", cache_dir)
  request.addfinalizer(mp.undo)
  return {"dir": cache_dir, "model": model,
          "tokenizer": transformers.AutoTokenizer.from_pretrained(files)}


def test_the_cache_is_a_real_one(cache):
  info = huggingface_hub.scan_cache_dir(cache["dir"])
  assert not info.warnings, info.warnings
  (repo,) = info.repos
  assert repo.repo_id == REPO and [r.commit_hash for r in repo.revisions] == [COMMIT]
  assert {f.file_name for f in next(iter(repo.revisions)).files} >= {
      "config.json", "model.safetensors", "tokenizer.json"}
  # transformers resolves the repo id from this cache without the network.
  ref = transformers.AutoModelForSequenceClassification.from_pretrained(
      REPO, cache_dir=cache["dir"], local_files_only=True)
  assert ref.config.id2label == {0: "negative", 1: "positive"}


def test_from_preset_by_name_branch_and_commit(cache):
  texts = _sentences()
  enc = cache["tokenizer"](texts, padding=True, return_tensors="pt")
  with torch.no_grad():
    want = cache["model"](**enc).logits.numpy()
  snapshot = huggingface.resolve("hf://" + REPO)
  assert snapshot.endswith(os.path.join("snapshots", COMMIT))
  assert huggingface.resolve("hf://%s@main" % REPO) == snapshot
  for name in ("hf://" + REPO, "hf://%s@%s" % (REPO, COMMIT)):
    model = models.BertClassifier.from_preset(name, preprocessor=True)
    assert model.label_names == ["negative", "positive"], name
    np.testing.assert_allclose(model.predict(texts, verbose=0), want, atol=1e-5, err_msg=name)


def test_an_uncached_repo_is_one_line(cache):
  for name, fill in (("hf://google-bert/bert-base-uncased", "hf download google-bert/bert-base-uncased"),
                     ("hf://%s@v2" % REPO, "hf download %s --revision v2" % REPO)):
    with pytest.raises(errors.CheckpointError) as e:
      models.BertClassifier.from_preset(name)
    line = str(e.value)
    assert "\n" not in line and "is not in the Hugging Face cache %s" % cache["dir"] in line
    assert fill in line, line
  with pytest.raises(errors.CheckpointError, match="expected hf://ORG/NAME"):
    presets.get_preset_loader("hf://a b")


def test_a_cached_repo_without_weights_is_one_line(tmp_path, monkeypatch):
  files = tmp_path / "files"
  files.mkdir()
  (files / "config.json").write_text(json.dumps({"model_type": "bert"}))
  write_cache(str(tmp_path / "hub"), "bert-tf-tests/config-only", COMMIT, str(files))
  monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
  with pytest.raises(errors.CheckpointError, match="hf://bert-tf-tests/config-only: the "
                     "cached snapshot .* holds no Hugging Face BERT model"):
    models.BertClassifier.from_preset("hf://bert-tf-tests/config-only")


def test_init_checkpoint_takes_hf_names(cache, tmp_path):
  """The library's --init_checkpoint path: config, vocab and weights."""
  name = "hf://" + REPO

  class Params:
    init_checkpoint = name
    bert_config_file = None
    vocab_file = None

  config, vocab = fine_tuning.resolve_config_and_vocab(Params())
  assert config.hidden_size == 128 and os.path.exists(vocab)
  clf = models.BertClassifier(config, 2)
  what = presets.load_weights(clf, name, models.CLASSIFIER_TASK)
  assert "with the classification head" in what
  np.testing.assert_array_equal(clf.classifier.output_bias.numpy(),
                                cache["model"].classifier.bias.detach().numpy())
  # One real tool run with --init_checkpoint=hf://...
  lines = tmp_path / "in.txt"
  lines.write_text("\n".join(_sentences(2)) + "\n", encoding="utf-8")
  out = tmp_path / "features.jsonl"
  run_tool([os.path.join(ROOT, "tools", "extract_features.py"), "--input_file=%s" % lines, "--output_file=%s" % out,
            "--init_checkpoint=%s" % name, "--layers=-1", "--max_seq_length=32"],
           env={"HF_HUB_CACHE": cache["dir"]})
  first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
  enc = cache["tokenizer"](_sentences(2)[:1], return_tensors="pt", truncation=True, max_length=32)
  with torch.no_grad():
    hidden = cache["model"].bert(**enc).last_hidden_state.numpy()[0]
  got = np.array([f["layers"][0]["values"] for f in first["features"]])
  np.testing.assert_allclose(got, hidden, atol=1e-4)


@pytest.mark.slow
def test_export_saved_model_from_preset_serves_transformers_answers(cache, tmp_path):
  export_dir = tmp_path / "export"
  run_tool([os.path.join(ROOT, "tools", "export_saved_model.py"), "--from_preset=hf://" + REPO,
            "--export_dir=%s" % export_dir], env={"HF_HUB_CACHE": cache["dir"]})
  (version,) = os.listdir(export_dir)
  served = tf.saved_model.load(str(export_dir / version)).signatures["serving_default"]
  texts = _sentences()
  out = served(text=tf.constant(texts))
  enc = cache["tokenizer"](texts, padding=True, return_tensors="pt")
  with torch.no_grad():
    probs = torch.softmax(cache["model"](**enc).logits, -1).numpy()
  np.testing.assert_allclose(out["probabilities"].numpy(), probs, atol=1e-5)
  labels = [l.decode() for l in out["labels"].numpy()]
  assert labels == [cache["model"].config.id2label[int(i)] for i in probs.argmax(-1)]


def test_tools_name_an_uncached_repo_in_one_line(tmp_path):
  export_dir = tmp_path / "export"
  for args, flag in (
      (["export_saved_model.py", "--from_preset=hf://no-such-org/no-such-model",
        "--export_dir=%s" % export_dir], "--from_preset"),
      (["extract_features.py", "--input_file=%s" % os.path.join(MOVIE_DIR, "dev.tsv"),
        "--output_file=%s" % (tmp_path / "out.jsonl"),
        "--init_checkpoint=hf://no-such-org/no-such-model"], "--init_checkpoint")):
    proc = run_tool([os.path.join(ROOT, "tools", args[0])] + args[1:], check=False)
    lines = [l for l in proc.stderr.splitlines() if "error:" in l]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-2000:]
    assert ("%s: hf://no-such-org/no-such-model" % flag) in lines[0], lines
    assert "hf download no-such-org/no-such-model" in lines[0]
  assert not export_dir.exists() and not (tmp_path / "out.jsonl").exists()


def test_export_from_an_original_fine_tuned_checkpoint_and_a_keras_file(tmp_path):
  """``--from_preset``'s other sources: a TF1 ``model.ckpt-N`` and a ``.keras`` file."""
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  from bert_tf import preprocessing  # pylint: disable=g-import-not-at-top
  from bert_tf.export import fine_tuned  # pylint: disable=g-import-not-at-top
  from bert_tf.export import from_preset  # pylint: disable=g-import-not-at-top
  words = sorted({w.strip(".,;:!?'\"()").lower() for s in _sentences() for w in s.split()} - {""})
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
  config = config_lib.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=48,
                                 max_position_embeddings=64)
  rng = np.random.RandomState(0)
  model = models.build_classifier(config, 3)
  for w in model.weights:
    w.assign(rng.normal(0, 0.2, w.shape).astype(np.float32))
  ft = tmp_path / "ft"
  ft.mkdir()
  config.to_json_file(str(ft / "bert_config.json"))
  (ft / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
  checkpoints.save_tf1_checkpoint(checkpoints.encoder_variables(model.encoder) + [
      ("output_weights", model.classifier.output_weights),
      ("output_bias", model.classifier.output_bias)], str(ft / "model.ckpt-7"))
  pre = preprocessing.BertPreprocessor(str(ft / "vocab.txt"), True, 64)
  texts = _sentences()
  want = tf.nn.softmax(model(pre(tf.constant(texts))), -1).numpy()
  named = models.BertClassifier(config, 3, preprocessor=pre, id2label=["bad", "meh", "good"])
  for dst, src in zip(named.weights, model.weights):
    dst.assign(src)
  named.save(str(tmp_path / "clf.keras"))
  for preset, labels in ((str(ft / "model.ckpt-7"), ["0", "1", "2"]),
                         (str(tmp_path / "clf.keras"), ["bad", "meh", "good"])):
    run = from_preset.load_preset(preset, max_seq_length=64)
    assert run.kind == "classifier" and list(run.spec.labels) == labels, preset
    path = fine_tuned.export_run(run, None, str(tmp_path / ("export_" + os.path.basename(preset))))
    out = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_allclose(out["probabilities"].numpy(), want, atol=1e-5, err_msg=preset)
    assert [l.decode() for l in out["labels"].numpy()] == [labels[i] for i in want.argmax(-1)]
  with pytest.raises(errors.FineTunedDirError, match="--task=nope: one of"):
    from_preset.load_preset(str(ft / "model.ckpt-7"), task="nope")
