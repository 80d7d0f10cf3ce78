"""mc_wikihow transfer split: the reverse direction of dev (step -> goal), as BIG-bench goal_inference."""
import csv, random, re, sys
src, dst = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(src, newline="", encoding="utf-8")))
goals = [re.match(r"The most reasonable step of '(.*)' is$", r["sent1"]).group(1) for r in rows]
rng = random.Random(0)
out = []
for i, r in enumerate(rows):
  step = r["ending%s" % r["label"]]
  others = rng.sample([g for j, g in enumerate(goals) if j != i and g != goals[i]], 3)
  label = rng.randrange(4)
  choices = others[:label] + [goals[i]] + others[label:]
  s1 = "The most likely goal of '%s' is" % step
  out.append({"video-id": "wikihow-goalrev-%d" % i, "fold-ind": i, "startphrase": s1, "sent1": s1,
              "sent2": "", "gold-source": "gold", **{"ending%d" % k: c for k, c in enumerate(choices)},
              "label": label})
with open(dst, "w", newline="", encoding="utf-8") as f:
  w = csv.DictWriter(f, fieldnames=list(out[0])); w.writeheader(); w.writerows(out)
print(len(out), "rows ->", dst)
