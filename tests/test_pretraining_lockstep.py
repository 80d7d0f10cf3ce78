"""Pretraining lockstep parity with Hugging Face and with the original.

Issue 25, item 1 (first half). A small BERT (``data/configs/bert_tiny_config.json``:
L=2, H=128, A=2, the uncased vocab of 30,522 tokens, the original's tanh
GELU) with OUR seeded random initial weights, copied into Hugging Face's
``BertForPreTraining`` of the same config (``hidden_act="gelu_new"``: the same
tanh formula; the decoder tied to the word embeddings and its bias to
``cls.predictions.bias``, as our masked-LM head is tied). The first 20
batches of our :class:`bert_tf.tasks.pretraining.PretrainingTask` training
dataset go to both sides in the same order, dropout off, float32, CPU, from
three inputs made by our tools' code from ``data/corpus/austen_slice.txt``
and ``data/vocab/uncased_vocab.txt``:

* ``static``: records of ``faithful.create_pretraining_data`` (the
  original's masks, fixed in the records);
* ``dynamic``: documents of ``dynamic.write_documents``, pairs and masks made
  in tf.data (``--dynamic``);
* ``whole_word``: records made with ``do_whole_word_mask=True``.

Our side: the task's ``compute_loss`` (+ ``loss_normalizers``) through
:class:`bert_tf.training.Trainer` with ``create_optimizer(1e-4, 1157, 115,
"adamw")`` (``--optimizer=adamw``); Hugging Face: ``torch.optim.AdamW``
(decay 0.01 except LayerNorm and biases, eps 1e-6), ``clip_grad_norm_(1.0)``
and ``get_linear_schedule_with_warmup(115, 1157)`` (``tests/lockstep_util.py``).

The loss: ours is the original's, masked LM ``sum(w * CE) / (sum(w) + 1e-5)``
over the ``masked_lm_positions`` (padded predictions have weight 0) plus
next sentence ``mean(CE)``. Hugging Face's own ``BertForPreTraining`` loss is
the MLM mean over labelled positions (no weights, no 1e-5); the HF side here
computes the ORIGINAL formula from ``BertForPreTraining``'s modules (the
encoder's output gathered at the masked positions, then ``model.cls``), so
both sides optimize the same function. Per step the masked-LM and the
next-sentence loss are compared (ours: ``mlm_loss_sum / (mlm_weight + 1e-5)``
and ``nsp_loss_sum / examples`` of the step's metric sums).

Asserted: each step's MLM and NSP loss within 1e-4 relative; after 20 steps
every weight within 1e-4 relative (``max|ours - ref| / max(max|ref|, sum of
the learning rates)`` per tensor: see ``lockstep_util``),
the tied word embeddings / output embedding and the MLM bias included. The
attention key biases start at 0 here and have no gradient (softmax ignores
them): they are checked to stay put instead (see ``lockstep_util.ZERO_GRADIENT``).

The original: our ``adamw_original`` (``AdamWeightDecay``) against
bert-tensorflow 1.0.4's ``modeling.BertModel`` + ``run_pretraining.
get_masked_lm_output`` / ``get_next_sentence_output`` + ``optimization.
create_optimizer`` in a TF1 graph, the same initial weights and batches.

Run with ``-n 0 -s`` (one process, output shown) for the tables of the largest
differences.
"""

import numpy as np
import pytest

from conftest import AUSTEN_SLICE, TINY_CONFIG, VOCAB, require

import lockstep_util as lu

SEQ, PREDS, BATCH = 128, 20, 8
LEARNING_RATE = 1e-4
INPUTS = ("static", "dynamic", "whole_word")


@pytest.fixture(scope="module")
def torch_ready():
  require("torch")
  require("transformers")
  return lu.torch_setup()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
  """Our pretraining inputs of the Austen slice: records (static, whole-word
  masks; one pass, dupe_factor 1) and tokenized documents (dynamic)."""
  from bert_tf.data.pretraining import dynamic  # pylint: disable=g-import-not-at-top
  from bert_tf.data.pretraining import faithful  # pylint: disable=g-import-not-at-top
  d = tmp_path_factory.mktemp("pretraining_inputs")
  out = {}
  for name, wwm in (("static", False), ("whole_word", True)):
    out[name] = str(d / (name + ".tfrecord"))
    faithful.create_pretraining_data(
        AUSTEN_SLICE, out[name], VOCAB, do_whole_word_mask=wwm, max_seq_length=SEQ,
        max_predictions_per_seq=PREDS, dupe_factor=1, random_seed=12345)
  out["dynamic"] = str(d / "documents.tfrecord")
  dynamic.write_documents(AUSTEN_SLICE, out["dynamic"], VOCAB)
  return out


def _task(inputs, name, out, optimizer="adamw"):
  from bert_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top
  config = config_lib.BertConfig.from_json_file(TINY_CONFIG)
  assert config.hidden_act == "gelu"  # the original's tanh form
  params = pretraining.PretrainingParams(
      input_file=inputs[name], output_dir=str(out), max_seq_length=SEQ,
      max_predictions_per_seq=PREDS, train_batch_size=BATCH,
      learning_rate=LEARNING_RATE, num_train_steps=lu.TOTAL_STEPS,
      num_warmup_steps=lu.WARMUP_STEPS, optimizer=optimizer, vocab_file=VOCAB,
      dynamic=name == "dynamic")
  task = pretraining.PretrainingTask(config, params)
  task.check_inputs()
  return task


def our_losses(sums):
  """This step's masked-LM and next-sentence loss from our metric sums."""
  return {"masked_lm": sums["mlm_loss_sum"] / (sums["mlm_weight"] + 1e-5),
          "next_sentence": sums["nsp_loss_sum"] / sums["examples"]}


def hf_model(config):
  """``BertForPreTraining`` of our config: float32, dropout 0, tied decoder."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  act = {"gelu": "gelu_new", "gelu_exact": "gelu"}[config.hidden_act]
  hf_config = transformers.BertConfig(
      vocab_size=config.vocab_size, hidden_size=config.hidden_size,
      num_hidden_layers=config.num_hidden_layers,
      num_attention_heads=config.num_attention_heads,
      intermediate_size=config.intermediate_size, hidden_act=act,
      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
      max_position_embeddings=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size,
      initializer_range=config.initializer_range, layer_norm_eps=1e-12)
  model = transformers.BertForPreTraining(hf_config).to(torch.float32)
  # See lockstep_util.build_hf: no frozen [PAD] row (the original has none).
  model.bert.embeddings.word_embeddings.padding_idx = None
  head = model.cls.predictions
  assert head.decoder.weight is model.bert.embeddings.word_embeddings.weight
  assert head.decoder.bias is head.bias
  model.train()
  return model


def hf_original_loss(model, batch):
  """The original's pretraining loss from ``BertForPreTraining``'s modules.

  The encoder's sequence output gathered at ``masked_lm_positions`` (as the
  original's ``gather_indexes``), ``model.cls`` (transform, LayerNorm, tied
  decoder + bias; the NSP head on the pooled output), then
  ``sum(w * CE) / (sum(w) + 1e-5) + mean(NSP CE)``.
  """
  import torch  # pylint: disable=g-import-not-at-top
  t = lambda k, dtype=torch.long: torch.as_tensor(np.asarray(batch[k]), dtype=dtype)  # noqa: E731
  out = model.bert(input_ids=t("input_ids"), attention_mask=t("input_mask"),
                   token_type_ids=t("segment_ids"))
  seq, pooled = out[0], out[1]
  pos = t("masked_lm_positions")
  gathered = torch.gather(seq, 1, pos.unsqueeze(-1).expand(-1, -1, seq.shape[-1]))
  scores, nsp_logits = model.cls(gathered, pooled)  # [B, P, V], [B, 2]
  logp = torch.log_softmax(scores, dim=-1)
  nll = -logp.gather(-1, t("masked_lm_ids").unsqueeze(-1)).squeeze(-1)
  w = t("masked_lm_weights", torch.float32)
  mlm = (nll * w).sum() / (w.sum() + 1e-5)
  nsp = torch.nn.functional.cross_entropy(nsp_logits, t("next_sentence_labels").view(-1))
  return mlm + nsp, {"masked_lm": mlm, "next_sentence": nsp}


def _batches(task):
  batches = lu.task_batches(task, BATCH)
  w = np.concatenate([b["masked_lm_weights"] for b in batches])
  labels = np.concatenate([b["next_sentence_labels"].ravel() for b in batches])
  assert (w == 0).any() and w.sum() > 10 * len(batches)  # padded predictions too
  assert set(labels.tolist()) == {0, 1}
  return batches


@pytest.mark.slow
@pytest.mark.parametrize("name", INPUTS)
def test_pretraining_lockstep_with_hugging_face(name, inputs, torch_ready, tmp_path):
  task = _task(inputs, name, tmp_path)
  batches = _batches(task)
  ours, _ = lu.train_ours(task, "pretraining", batches, step_losses=our_losses,
                          setup=lu.OurSetup(learning_rate=LEARNING_RATE))
  hf = hf_model(task.config)
  lu.check_and_copy_head(hf, "pretraining", ours.initial, copy_all=True)
  ref = lu.train_hf(hf, "pretraining", batches, learning_rate=LEARNING_RATE,
                    loss_fn=hf_original_loss)
  result = lu.compare(ours, ref, lu.NUM_STEPS,
                      zero_gradient=lu.ZERO_GRADIENT["pretraining"])
  print(result.table("pretraining (%s) vs Hugging Face BertForPreTraining" % name))
  print("HF global grad norms (clipped above %g): %s" % (
      lu.CLIP_NORM, " ".join("%.2f" % g for g in ref.grad_norms)))
  for n in ("bert.embeddings.word_embeddings.weight", "cls.predictions.bias"):
    # the tied input/output embedding, the MLM output bias
    print("%s: weight rel diff %.3e, update rel diff %.3e" % (
        n, result.weight_diffs[n], result.update_diffs[n]))
  assert len(result.zero_gradient) == task.config.num_hidden_layers
  bad = result.violations()
  assert not bad, "\n".join(bad[:20])


@pytest.mark.slow
@pytest.mark.parametrize("name", INPUTS)
def test_pretraining_lockstep_with_original_optimizer(name, inputs, original_bert,
                                                       tmp_path):
  del original_bert
  task = _task(inputs, name, tmp_path / "run", optimizer="adamw_original")
  batches = _batches(task)
  ours, _ = lu.train_ours(task, "pretraining", batches, step_losses=our_losses,
                          naming="tf1", setup=lu.OurSetup(
                              optimizer="adamw_original", learning_rate=LEARNING_RATE))
  work = str(tmp_path / "original")
  lu.save_original_case(work, "pretraining", batches, ours.initial,
                        task.config.to_dict(), LEARNING_RATE, lu.TOTAL_STEPS,
                        lu.WARMUP_STEPS)
  lu.run_original(work)
  ref = lu.read_original_run(work, ours.initial, lu.NUM_STEPS)
  result = lu.compare(ours, ref, lu.NUM_STEPS, lr_sum=lu.sum_of_lrs(
      LEARNING_RATE, lu.TOTAL_STEPS, lu.WARMUP_STEPS, lu.NUM_STEPS),
                      zero_gradient=lu.ZERO_GRADIENT["pretraining"])
  print(result.table("pretraining (%s), adamw_original vs bert-tensorflow 1.0.4" % name))
  for n in ("bert/embeddings/word_embeddings", "cls/predictions/output_bias"):
    print("%s: weight rel diff %.3e, update rel diff %.3e" % (
        n, result.weight_diffs[n], result.update_diffs[n]))
  bad = result.violations()
  assert not bad, "\n".join(bad[:20])
