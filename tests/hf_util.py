"""Real inputs and head parameters shared by the Hugging Face tests
(test_hf_heads.py reads transformers' directories, test_hf_write.py writes
them)."""

import csv
import json
import os

from conftest import MC_DIR, SQUAD_V1_DIR


def squad_pairs(n):
  """The first question of each of the first ``n`` SQuAD v1.1 dev paragraphs
  and its context: ``(questions, contexts)``, lists of ``n`` str."""
  with open(os.path.join(SQUAD_V1_DIR, "dev.json"), encoding="utf-8") as f:
    paragraphs = [p for a in json.load(f)["data"] for p in a["paragraphs"]][:n]
  return [p["qas"][0]["question"] for p in paragraphs], [p["context"] for p in paragraphs]


def choices(n=2):
  """``n`` multiple-choice dev rows: ``(contexts [n], endings [n][4])``."""
  with open(os.path.join(MC_DIR, "dev.csv"), encoding="utf-8", newline="") as f:
    rows = list(csv.DictReader(f))[:n]
  return [r["sent1"] for r in rows], [[r["ending%d" % i] for i in range(4)] for r in rows]


def far_from_init(model, names, seed):
  """``model`` (a transformers PyTorch model) with its parameters under the
  name prefixes ``names`` drawn from N(0, 0.5), far from transformers'
  zero/0.02 init, so that a misread bias or layout shows; in eval mode."""
  import torch  # pylint: disable=g-import-not-at-top
  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.startswith(names):
        p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
  return model.eval()
