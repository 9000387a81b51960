#!/usr/bin/env python3
"""embed_cpu.py: sentence-transformers' CPU throughput on a corpus, for the comparison in docs/embed.md
(run by bench/embed_cpu.sh inside the .venv/embed-fixture environment; not needed by the tests).
Times SentenceTransformer.encode() (tokenisation + forward + pooling + normalisation, fp32, sorted by
length internally) after a warm-up, with torch limited to --threads threads, and optionally saves the
embeddings (raw float32, rows x 384) so the bench can compare them with vecanneal's.
usage: embed_cpu.py MODEL_DIR CORPUS.txt --threads T [--batch B] [--save OUT.f32] [--repeat R]"""
import argparse
import json
import os
import resource
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("corpus")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--save")
ap.add_argument("--repeat", type=int, default=1)
a = ap.parse_args()

import torch  # noqa: E402

torch.set_num_threads(a.threads)
torch.set_num_interop_threads(1)
from sentence_transformers import SentenceTransformer  # noqa: E402

lines = [l.decode("utf-8", "replace") for l in open(a.corpus, "rb").read().split(b"\n")]
if lines and lines[-1] == "":
    lines.pop()
model = SentenceTransformer(a.model, device="cpu")
model.encode(lines[:64], batch_size=a.batch)  # warm-up
best = None
for _ in range(a.repeat):
    c0, t0 = time.process_time(), time.perf_counter()
    emb = model.encode(lines, batch_size=a.batch, convert_to_numpy=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if best is None or wall < best[0]:
        best = (wall, cpu)
if a.save:
    emb.astype("<f4").tofile(a.save)
print(json.dumps({"impl": "sentence-transformers", "torch": torch.__version__, "threads": a.threads, "batch": a.batch,
                  "lines": len(lines), "wall_s": round(best[0], 3), "cpu_s": round(best[1], 3),
                  "lines_per_s": round(len(lines) / best[0], 1), "lines_per_cpu_s": round(len(lines) / best[1], 1),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
