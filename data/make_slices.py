"""Rebuilds the task-data slices under data/ from the full sets in ../shared/data.

    python data/make_slices.py            # writes the slices
    python data/make_slices.py --check    # byte-compares them, writes nothing

Each slice keeps the source's layout, key order and canary, and is cut by the
rule in its folder's README.md (repeated in RULES below). The full sets, with
their sources and licences, are described in ../shared/data/README.md; this
script only needs the Python standard library.
"""

import argparse
import csv
import io
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(os.path.dirname(os.path.dirname(HERE)), "shared", "data")

# SQuAD v1 train: questions 3658 and 3662 (0-based, file order) hold answers
# with U+2009 thin spaces; the original run_squad.py's "Could not find
# answer" check skips them (their paragraphs are appended to the slice).
V1_THIN_SPACE_QUESTIONS = (3658, 3662)
NER_TRAIN_TWEETS, NER_DEV_TWEETS = 200, 60
MC_TRAIN_ROWS, MC_DEV_ROWS = 150, 60
# newsgroups20: per label, the first post (file order) of each length band, in
# whitespace words (the text is lower-cased, punctuation removed: ~1.2 word
# pieces a word): short, one 128-token window or so, several 512-token ones.
NEWS_BANDS = ((0, 100), (100, 400), (400, 2000))

RULES = {
    "squad_v1/train.json": "whole paragraphs in file order until >= 300 questions, "
                           "then the paragraphs of questions 3658 and 3662",
    "squad_v1/dev.json": "the first 30 paragraphs",
    "squad_v2_disfl/train.json": "whole articles (one context each) until >= 300 questions",
    "squad_v2_disfl/dev.json": "whole articles (one context each) until >= 150 questions",
    "ner_wnut16/train.txt": "the first 200 tweets, then the first later tweet with each "
                            "tag they lack",
    "ner_wnut16/dev.txt": "the first 60 tweets",
    "mc_wikihow/train.csv": "the header and the first 150 rows",
    "mc_wikihow/dev.csv": "the header and the first 60 rows",
    "corpus/austen_slice.txt": "the first 40 documents (chapters)",
    "newsgroups20/train.tsv": "the header; per label, the first post of under 100, "
                              "100-399 and 400-1,999 words, in file order (60)",
    "newsgroups20/dev.tsv": "the header; per label, the first post of under 100, "
                            "100-399 and 400-1,999 words, in file order (60)",
}


def _read(path):
  with open(path, encoding="utf-8", newline="") as f:
    return f.read()


def _squad_json(data, articles):
  """The source's top-level keys in their order, ``data`` replaced."""
  out = {k: (articles if k == "data" else v) for k, v in data.items()}
  return json.dumps(out, ensure_ascii=False)


def squad_v1_train(src):
  data = json.loads(_read(src))
  articles, n = [], 0
  for article in data["data"]:
    paragraphs = []
    for para in article["paragraphs"]:
      if n >= 300:
        break
      paragraphs.append(para)
      n += len(para["qas"])
    if paragraphs:
      articles.append(dict(article, paragraphs=paragraphs))
    if n >= 300:
      break
  extra, q = {}, 0  # article index -> [paragraphs], in file order
  for ai, article in enumerate(data["data"]):
    for para in article["paragraphs"]:
      if any(q <= i < q + len(para["qas"]) for i in V1_THIN_SPACE_QUESTIONS):
        extra.setdefault(ai, []).append(para)
      q += len(para["qas"])
  for ai, paragraphs in extra.items():
    articles.append(dict(data["data"][ai], paragraphs=paragraphs))
  return _squad_json(data, articles)


def squad_first_paragraphs(src, num_paragraphs):
  data = json.loads(_read(src))
  articles, left = [], num_paragraphs
  for article in data["data"]:
    if left <= 0:
      break
    paragraphs = article["paragraphs"][:left]
    left -= len(paragraphs)
    articles.append(dict(article, paragraphs=paragraphs))
  return _squad_json(data, articles)


def squad_whole_articles(src, min_questions):
  data = json.loads(_read(src))
  articles, n = [], 0
  for article in data["data"]:
    if n >= min_questions:
      break
    articles.append(article)
    n += sum(len(p["qas"]) for p in article["paragraphs"])
  return _squad_json(data, articles)


def _tweets(text):
  """CoNLL blocks (each with its trailing blank line) in file order."""
  blocks = [b for b in text.split("\n\n") if b.strip("\n")]
  return [b.strip("\n") + "\n\n" for b in blocks]


def ner_train(src):
  tweets = _tweets(_read(src))
  tags = lambda t: {line.split("\t")[1] for line in t.strip("\n").split("\n")}  # pylint: disable=unnecessary-lambda-assignment
  every = set().union(*map(tags, tweets))
  keep = tweets[:NER_TRAIN_TWEETS]
  missing = every - set().union(*map(tags, keep))
  for t in tweets[NER_TRAIN_TWEETS:]:
    if tags(t) & missing:
      keep.append(t)
      missing -= tags(t)
  assert not missing, missing
  return "".join(keep)


def ner_first(src, n):
  return "".join(_tweets(_read(src))[:n])


def csv_first_rows(src, n):
  text = _read(src)
  lines = text.split("\n")
  rows = list(csv.reader(io.StringIO(text)))
  assert len(rows) == len(lines) - 1, "a quoted field spans lines"  # one row a line
  return "\n".join(lines[:n + 1]) + "\n"


def first_documents(src, n):
  """The first ``n`` blank-line-separated documents, one newline after the last."""
  return "\n\n".join(_read(src).split("\n\n")[:n]) + "\n"


def posts_by_band(src):
  """The header and, per label, the first post of each of ``NEWS_BANDS``
  (word counts, ``[low, high)``), the chosen rows in file order."""
  lines = _read(src).split("\n")
  rows = [l for l in lines[1:] if l]
  words = [len(r.split("\t")[0].split()) for r in rows]
  labels = [r.split("\t")[1] for r in rows]
  keep = set()
  for label in sorted(set(labels)):
    for low, high in NEWS_BANDS:
      keep.add(next(i for i, (n, lab) in enumerate(zip(words, labels))
                    if lab == label and low <= n < high))
  return "\n".join(lines[:1] + [rows[i] for i in sorted(keep)]) + "\n"


def build(shared):
  s = lambda *p: os.path.join(shared, *p)  # pylint: disable=unnecessary-lambda-assignment
  return {
      "squad_v1/train.json": squad_v1_train(s("squad_v1", "train.json")),
      "squad_v1/dev.json": squad_first_paragraphs(s("squad_v1", "dev.json"), 30),
      "squad_v2_disfl/train.json": squad_whole_articles(s("squad_v2_disfl", "train.json"),
                                                        300),
      "squad_v2_disfl/dev.json": squad_whole_articles(s("squad_v2_disfl", "dev.json"), 150),
      "ner_wnut16/train.txt": ner_train(s("ner_wnut16", "train.txt")),
      "ner_wnut16/dev.txt": ner_first(s("ner_wnut16", "dev.txt"), NER_DEV_TWEETS),
      "mc_wikihow/train.csv": csv_first_rows(s("mc_wikihow", "train.csv"), MC_TRAIN_ROWS),
      "mc_wikihow/dev.csv": csv_first_rows(s("mc_wikihow", "dev.csv"), MC_DEV_ROWS),
      "corpus/austen_slice.txt": first_documents(s("corpus", "austen.txt"), 40),
      "newsgroups20/train.tsv": posts_by_band(s("newsgroups20", "train.tsv")),
      "newsgroups20/dev.tsv": posts_by_band(s("newsgroups20", "dev.tsv")),
  }


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--shared", default=SHARED, help="the full sets (../shared/data)")
  parser.add_argument("--check", action="store_true",
                      help="compare with the files in data/; write nothing")
  args = parser.parse_args(argv)
  if not os.path.isdir(args.shared):
    parser.error("--shared: %s is not a directory" % args.shared)
  differ = []
  for name, text in build(args.shared).items():
    path = os.path.join(HERE, name)
    if args.check:
      if not os.path.exists(path) or _read(path) != text:
        differ.append(name)
      continue
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
      f.write(text)
    print("wrote data/%s (%d bytes): %s" % (name, len(text.encode("utf-8")), RULES[name]))
  if differ:
    print("differ from a rebuild: %s" % ", ".join(differ))
    return 1
  if args.check:
    print("all %d slices equal a rebuild" % len(RULES))
  return 0


if __name__ == "__main__":
  sys.exit(main())
