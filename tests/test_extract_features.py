"""Feature extraction (paper section 5.3; google-research/bert ``extract_features.py``).

* input lines and truncation: the original's rules, errors naming file and line;
* values: Hugging Face ``BertModel(output_hidden_states=True)`` on MiniLM
  (1e-5), and the ORIGINAL script (bert-tensorflow 1.0.4, its own process,
  ``tests/original_extract_features.py``) on the same TF1 checkpoint (1e-5,
  identical tokens and JSON layout);
* the tool: flag-worded errors, no partial output file;
* ``export_encoder_all_layers``: served in a fresh process importing only
  TensorFlow + tensorflow-text, hostile strings included.
"""

import json
import os
import re

import numpy as np
import pytest

from conftest import ROOT, VOCAB, TINY_CONFIG, run_tool
from bert_tf import errors
from bert_tf import tokenization
from bert_tf.data import extract

# A line per case: single, pair, truncation of both kinds, empty line,
# accents, CJK, "|||" without spaces, a text_b that tokenizes to nothing
# (NUL), whitespace inside, a line of only spaces, a last line without "\n".
LINES = [
    "Hello world.",
    "Who was Jim Henson ? ||| Jim Henson was a puppeteer",
    "the quick brown fox jumps over the lazy dog " * 6,
    "a b c d e f g h i j k l m n o p q r s t u v w ||| " + "x y z " * 8,
    "",
    "Das Café Müller, eine naïve Façade — in Zürich.",
    "北京大学 and 東京 ||| 漢字",
    "no|||spaces here",
    "hello ||| \x00",
    "tab\there\x0bvertical",
    "   ",
    "short ||| " + "a much much longer second segment that must be trimmed first " * 2,
    "last line without a newline",
]


def _write_input(path, lines=LINES, newline_at_end=False):
  with open(path, "w", encoding="utf-8", newline="") as f:
    f.write("\n".join(lines) + ("\n" if newline_at_end else ""))
  return str(path)


def _read_json_lines(path):
  with open(path, encoding="utf-8") as f:
    return [json.loads(l) for l in f]


# ------------------------------------------------------------ TF-free input side

def test_read_examples_follow_the_original(tmp_path):
  path = tmp_path / "in.txt"
  path.write_bytes(b"a b ||| c d\r\n\nno|||space\n  x  ||| y \nlast")
  got = [(e.unique_id, e.text_a, e.text_b) for e in extract.read_examples(str(path))]
  assert got == [(0, "a b", "c d"), (1, "", None), (2, "no|||space", None),
                 (3, "x ", "y"), (4, "last", None)]  # the original's regex keeps "x "
  path.write_bytes(b"one\n")  # nothing after a final newline is a line
  assert len(extract.read_examples(str(path))) == 1


def test_bad_lines_name_file_and_line(tmp_path):
  path = tmp_path / "in.txt"
  path.write_text("fine\nalso ||| fine\na ||| b ||| c\n", encoding="utf-8")
  with pytest.raises(errors.InputError, match=r"in\.txt:3: more than one '\|\|\|'"):
    extract.read_examples(str(path))
  path.write_bytes(b"fine\n\xff\xfe bad\n")
  with pytest.raises(errors.InputError, match=r"in\.txt:2: invalid UTF-8"):
    extract.read_examples(str(path))


def test_truncation_and_packing_follow_the_original():
  tok = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
  conv = lambda a, b=None, n=8: extract.convert_example(
      extract.InputExample(0, a, b), n, tok)
  # the longer segment loses its last token first; ties pop text_b
  f = conv("a b c d e", "f g")
  assert f.tokens == ["[CLS]", "a", "b", "c", "[SEP]", "f", "g", "[SEP]"]
  assert f.input_type_ids == [0, 0, 0, 0, 0, 1, 1, 1]
  assert conv("a b c", "d e f").tokens == ["[CLS]", "a", "b", "c", "[SEP]", "d", "e", "[SEP]"]
  assert conv("a b c d e f g h i").tokens == ["[CLS]"] + list("abcdef") + ["[SEP]"]
  # a text_b that tokenizes to nothing counts as absent (single-segment rules)
  f = conv("a b c d e f g h", "\x00")
  assert f.tokens == ["[CLS]"] + list("abcdef") + ["[SEP]"] and max(f.input_type_ids) == 0
  assert conv("").tokens == ["[CLS]", "[SEP]"]
  assert f.input_ids == tok.convert_tokens_to_ids(f.tokens)
  assert extract.parse_layers("-1, -4,0", 4) == [-1, -4, 0]
  for bad in ("-5", "4", "x", ""):
    with pytest.raises(errors.ParamsError):
      extract.parse_layers(bad, 4)


def test_vectorized_rounding_is_the_originals():
  rng = np.random.default_rng(0)
  x = np.concatenate(
      [rng.standard_normal(40000).astype(np.float32) * s for s in (1e-6, 1e-4, 1, 30)]
      + [np.arange(-512, 512, dtype=np.float32) / 128,  # exact ties: 1/128 = 0.0078125
         np.array([0.0, -0.0, 5e-7, -5e-7, -1e-7, 3.4e38, 1e-45], np.float32)])
  want = [round(float(v), 6) for v in x]
  got = extract.round6(x).tolist()
  assert json.dumps(got) == json.dumps(want)  # same reprs, signed zeros included
  assert round(0.0078125, 6) == 0.007812 and round(-1e-7, 6) == 0.0


# ------------------------------------------------------------- values vs HF

def test_values_and_schema_match_hugging_face(minilm_dir, tmp_path):
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import feature_extraction  # pylint: disable=g-import-not-at-top
  layers = [-1, -2, -3, -4, 0]
  ex = feature_extraction.FeatureExtractor.from_checkpoint(
      minilm_dir, layers=",".join(map(str, layers)), max_seq_length=24, batch_size=3)
  lines = LINES[:6] + LINES[11:]
  out = str(tmp_path / "out.jsonl")
  assert ex.write_json(_write_input(tmp_path / "in.txt", lines), out) == len(lines)
  with open(out, encoding="utf-8") as f:
    raw = f.read().splitlines()
  assert raw[0].startswith('{"linex_index": 0, "features": [{"token": "[CLS]", '
                           '"layers": [{"index": -1, "values": [')
  hf = transformers.BertModel.from_pretrained(minilm_dir, add_pooling_layer=False).eval()
  tok = tokenization.FullTokenizer(os.path.join(minilm_dir, "vocab.txt"), True)
  worst = 0.0
  for i, line in enumerate(raw):
    d = json.loads(line)
    assert list(d) == ["linex_index", "features"] and d["linex_index"] == i
    feat = extract.convert_example(extract.parse_line(lines[i], i), 24, tok)
    assert [t["token"] for t in d["features"]] == feat.tokens
    with torch.no_grad():
      hidden = hf(input_ids=torch.tensor([feat.input_ids]),
                  token_type_ids=torch.tensor([feat.input_type_ids]),
                  output_hidden_states=True).hidden_states[1:]  # drop embeddings
    for t, token_feature in enumerate(d["features"]):
      assert list(token_feature) == ["token", "layers"]
      assert [l["index"] for l in token_feature["layers"]] == layers
      for l in token_feature["layers"]:
        values = l["values"]
        assert len(values) == 384 and all(v == round(v, 6) for v in values)
        want = hidden[l["index"]][0, t].numpy()
        worst = max(worst, float(np.abs(np.array(values) - want).max()))
  assert worst < 1e-5, worst


# ---------------------------------------------------- original checkpoint, tool

@pytest.fixture(scope="module")
def tf1_model(tmp_path_factory):
  """A 4-layer random BERT saved as an original TF1 checkpoint (+ config)."""
  from bert_tf import checkpoints  # pylint: disable=g-import-not-at-top
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import encoder as encoder_lib  # pylint: disable=g-import-not-at-top
  d = tmp_path_factory.mktemp("tf1")
  with open(TINY_CONFIG) as f:
    cfg = json.load(f)
  cfg.update(num_hidden_layers=4, hidden_size=64, intermediate_size=128,
             max_position_embeddings=64)
  with open(d / "bert_config.json", "w") as f:
    json.dump(cfg, f)
  enc = encoder_lib.BertEncoder(config_lib.BertConfig.from_dict(cfg), name="bert")
  prefix = checkpoints.save_tf1_checkpoint(checkpoints.encoder_variables(enc),
                                           str(d / "bert_model.ckpt"))
  return {"dir": str(d), "ckpt": prefix, "config": str(d / "bert_config.json"),
          "encoder": enc}


def test_our_checkpoint_gives_the_tf1_values(tf1_model, tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import feature_extraction  # pylint: disable=g-import-not-at-top
  prefix = tf.train.Checkpoint(encoder=tf1_model["encoder"]).write(str(tmp_path / "ours"))
  kw = dict(layers="-1,0", max_seq_length=16, batch_size=2)
  ours = feature_extraction.FeatureExtractor.from_checkpoint(
      prefix, tf1_model["config"], VOCAB, **kw)
  tf1 = feature_extraction.FeatureExtractor.from_checkpoint(  # config found beside it
      tf1_model["ckpt"], vocab_file=VOCAB, **kw)
  examples = [extract.parse_line(l, i) for i, l in enumerate(LINES[:5])]
  for (fa, va), (fb, vb) in zip(ours.extract(examples), tf1.extract(examples)):
    assert fa.tokens == fb.tokens and va.shape == (2, len(fa.tokens), 64)
    np.testing.assert_allclose(va, vb, atol=1e-6)
  empty = tmp_path / "empty.txt"
  empty.write_text("")
  assert tf1.write_json(str(empty), str(tmp_path / "empty.jsonl")) == 0
  assert (tmp_path / "empty.jsonl").read_text() == ""


def _tool(args):
  return run_tool([os.path.join(ROOT, "tools", "extract_features.py")] + args, check=False)


@pytest.mark.slow  # tool processes or a trained run: full suite, not the day-to-day loop (issue 41)
def test_tool_errors_leave_no_output(tf1_model, tmp_path):
  lines = ["line %d" % i for i in range(40)] + ["a ||| b ||| c"]
  inp = _write_input(tmp_path / "in.txt", lines, newline_at_end=True)
  out = tmp_path / "out" / "features.jsonl"
  common = ["--output_file=%s" % out, "--init_checkpoint=" + tf1_model["ckpt"],
            "--vocab_file=" + VOCAB, "--batch_size=1", "--max_seq_length=32"]  # 32 lines written before the error
  proc = _tool(["--input_file=" + inp] + common)
  assert proc.returncode != 0
  assert ("extract_features: error: --input_file: %s:41: more than one '|||'" % inp
          in proc.stderr), proc.stderr
  assert "Traceback" not in proc.stderr
  assert not out.exists() and os.listdir(out.parent) == []
  proc = _tool(["--input_file=" + inp, "--layers=-1,-5"] + common)
  assert "extract_features: error: --layers -5 out of range" in proc.stderr, proc.stderr
  assert not out.exists()


@pytest.mark.slow  # 9-16 s (process start-ups / a reference run): full suite only, keeps the fast loop < 5 min
def test_matches_the_original_script(tf1_model, tmp_path):
  inp = _write_input(tmp_path / "in.txt")
  common = ["--input_file=" + inp, "--vocab_file=" + VOCAB,
            "--bert_config_file=" + tf1_model["config"],
            "--init_checkpoint=" + tf1_model["ckpt"], "--max_seq_length=20",
            "--batch_size=4", "--layers=-1,-2,-3,-4,0"]
  theirs, ours = str(tmp_path / "orig.jsonl"), str(tmp_path / "ours.jsonl")
  run_tool([os.path.join(ROOT, "tests", "original_extract_features.py"),
            str(tmp_path / "work"), "--output_file=" + theirs] + common)
  exports = tmp_path / "exports"
  proc = _tool(["--output_file=" + ours, "--export_dir=%s" % exports] + common)
  assert proc.returncode == 0, proc.stderr
  assert proc.stderr == "", proc.stderr  # quiet by default
  lines = proc.stdout.splitlines()
  assert len(lines) == 2, proc.stdout
  wrote = re.fullmatch(r"extract_features: wrote (\d+) examples x 5 layers "
                       r"\(-1,-2,-3,-4,0\) to %s in \d+\.\ds" % re.escape(ours), lines[0])
  assert wrote, lines[0]
  with open(ours, encoding="utf-8") as f:
    assert int(wrote.group(1)) == len(f.read().splitlines())
  assert lines[1] == "extract_features: SavedModel written to %s" % (exports / "1")
  with open(exports / "1" / "assets.extra" / "bert_tf_export.json") as f:
    assert json.load(f)["export"] == "encoder_all_layers"
  want, got = _read_json_lines(theirs), _read_json_lines(ours)
  assert len(want) == len(got) == len(LINES)
  worst, same, total = 0.0, 0, 0
  for w, g in zip(want, got):
    assert list(w) == list(g) and w["linex_index"] == g["linex_index"]
    assert [f["token"] for f in w["features"]] == [f["token"] for f in g["features"]]
    for fw, fg in zip(w["features"], g["features"]):
      assert list(fw) == list(fg)
      for lw, lg in zip(fw["layers"], fg["layers"]):
        assert list(lw) == list(lg) and lw["index"] == lg["index"]
        worst = max(worst, float(np.abs(np.array(lw["values"]) - lg["values"]).max()))
        same += sum(a == b for a, b in zip(lw["values"], lg["values"]))
        total += len(lw["values"])
  assert worst < 1e-5, worst
  assert same > 0.9 * total, (same, total)  # the same 6-decimal rounding
  assert max(len(w["features"]) for w in want) == 20  # truncation was exercised


# ------------------------------------------------------------------ the export

TEXTS = [b"Hello world.", b"", b"\xff\xfe invalid \xc3 utf-8", b"x " * 500000,
         "Das Café Müller".encode()]
TEXTS_B = [b"Jim Henson was a puppeteer", b"b", b"\xff", b"y", "Zürich".encode()]


@pytest.mark.slow
def test_export_all_layers_in_a_fresh_process(tf1_model, tmp_path):
  from test_export import FRESH_PROCESS, _decode, _string_input  # pylint: disable=g-import-not-at-top
  from bert_tf import export  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import feature_extraction  # pylint: disable=g-import-not-at-top
  enc = tf1_model["encoder"]
  path = export.export_encoder_all_layers(enc, str(tmp_path / "exp"), vocab_file=VOCAB,
                                          max_seq_length=16)
  meta = export.read_metadata(path)
  assert meta["export"] == "encoder_all_layers" and meta["num_hidden_layers"] == 4
  jobs = [{"path": path, "signature": "serving_default",
           "inputs": {"text_a": _string_input(TEXTS)}},
          {"path": path, "signature": "pair",
           "inputs": {"text_a": _string_input(TEXTS), "text_b": _string_input(TEXTS_B)}}]
  spec, out = str(tmp_path / "jobs.json"), str(tmp_path / "fresh.json")
  with open(spec, "w") as f:
    json.dump(jobs, f)
  run_tool(["-c", FRESH_PROCESS, spec, out])
  with open(out) as f:
    single, pair = [_decode(r) for r in json.load(f)]
  ex = feature_extraction.FeatureExtractor(enc, VOCAB, max_seq_length=16,
                                           layers=[0, 1, 2, 3])
  for got, b in ((single, None), (pair, TEXTS_B)):
    assert set(got) == {"encoder_outputs", "sequence_output", "pooled_output",
                        "input_mask", "input_ids", "segment_ids", "tokens"}
    n, num_layers, s, h = got["encoder_outputs"].shape
    assert (n, num_layers, h) == (5, 4, 64) and s == 16  # the 1 MB row is truncated
    assert np.isfinite(got["encoder_outputs"]).all()
    np.testing.assert_allclose(got["sequence_output"], got["encoder_outputs"][:, -1], atol=0)
    for row in (0, 1, 4):  # ordinary strings: the reference pipeline's values
      text_b = None if b is None else b[row].decode("utf-8", "replace")
      example = extract.InputExample(0, TEXTS[row].decode(), text_b)
      feat, values = next(ex.extract([example]))
      k = len(feat.tokens)
      assert [t.decode() for t in got["tokens"][row][:k]] == feat.tokens
      assert got["input_mask"][row].sum() == k and not any(got["tokens"][row][k:])
      np.testing.assert_allclose(got["encoder_outputs"][row, :, :k], values, atol=1e-5)
  assert list(single["tokens"][1][:2]) == [b"[CLS]", b"[SEP]"]  # empty string
