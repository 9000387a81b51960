#!/usr/bin/env python3
"""plot-recall-qps.py SWEEP.csv OUT.png: recall against queries per second, one point per nprobe, from the
CSV of `vecanneal search --nprobe 1,2,4,... --ground-truth ... --sweep-csv SWEEP.csv` (columns
backend,precision,nprobe,recall,qps; one line per backend and precision drawn as its own curve, each
point labelled with its nprobe). Needs matplotlib (nothing else); exits 2 without it."""
import csv
import sys

if len(sys.argv) != 3:
    sys.exit(__doc__)
try:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt
except ImportError:
    print("plot-recall-qps.py: matplotlib is not installed", file=sys.stderr)
    sys.exit(2)

curves = {}
with open(sys.argv[1], newline="") as f:
    for row in csv.DictReader(f):
        if not row["recall"]:
            sys.exit("%s: nprobe %s has no recall (run search with --ground-truth)" % (sys.argv[1], row["nprobe"]))
        curves.setdefault((row["backend"], row["precision"]), []).append(
            (float(row["recall"]), float(row["qps"]), row["nprobe"]))

fig, ax = plt.subplots(figsize=(6, 4))
for (backend, precision), pts in sorted(curves.items()):
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label="%s %s" % (backend, precision))
    for recall, qps, nprobe in pts:
        ax.annotate(nprobe, (recall, qps), textcoords="offset points", xytext=(4, 4), fontsize=7)
ax.set_xlabel("recall")
ax.set_ylabel("queries per second")
ax.set_yscale("log")
ax.grid(True, which="both", alpha=0.3)
ax.legend()
ax.set_title("vecanneal search: recall against QPS (labels: nprobe)")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
