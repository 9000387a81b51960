#!/usr/bin/env python3
"""embed_gpu_ncu.py: where the CUDA encoder's time goes on long lines, kernel by kernel, read by Nsight
Compute (`bash bench/run.sh embed-gpu-ncu --bench BUILD/embed_gpu_bench [ARGS]` on a GPU machine, from the
repository root).

For each line length L (default 32, 128 and 256 tokens: bench/embed_gpu.py synth lines of L - 2 one-token
words) and one precision (default fp16), batch 256:
  1. plain    embed_gpu_bench (the encoder alone, CUDA events around each batch's forward), 3 timed passes
  2. profile  the same with one timed pass under `ncu --clock-control none` (each kernel alone, the clocks
              left as they are); the timed pass is the second half of the launches, from the first batch's
              embedding kernel on (the first half is the warm-up pass)
  3. report   per group of kernels: the matrix products (cuBLASLt, with their epilogues: bias, residual
              add, GELU in fp16/bf16), attention, LayerNorm (and the embedding's), GELU (fp32 only),
              pooling: us of the pass, share, DRAM and SM throughput (time-weighted), and for the
              products and attention their FLOPs over their time against the dense fp16 peak given by
              --peak-tflops (989.4: the H200's and H100 SXM's dense fp16/bf16 tensor rate)
FLOPs counted: per token and layer 2 x 384 x (1152 + 384 + 2 x 1536) for the products, 4 x L x 384 for
attention's two products (L the line's tokens).
Checks (bench/verify.py): the plain runs and ncu exit 0, the timed pass found (an even number of embedding
kernels), products and attention in it, its kernels' sum within 0.5-1.5 x the plain forward time.
Results: $OUT/DATE_GPU_embed-gpu-ncu.md and .csv (default ./out-gpu)."""
import argparse
import csv
import datetime
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import verify  # noqa: E402
from gpu_loop_ncu import METRICS, parse  # noqa: E402

H, FFN, LAYERS = 384, 1536, 6
GROUPS = ("products", "attention", "layernorm", "gelu", "pooling", "other")


def group_of(name):
    """The kernel's group, from its name (ours by name; cuBLASLt's kernels, those with a GELU epilogue
    included, are the rest of the products)."""
    for key, g in (("attention_", "attention"), ("ln_kernel", "layernorm"), ("gelu_kernel", "gelu"),
                   ("pool_kernel", "pooling"), ("scatter_rows", "pooling")):
        if key in name:
            return g
    if any(k in name for k in ("gemm", "nvjet", "xmma", "cutlass", "sm90_", "Kernel2")):
        return "products"
    return "other"


def weighted(launches, metric):
    t = sum(e["us"] for e in launches)
    return sum(e["us"] * e[metric] for e in launches) / t if t else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help="the CUDA build's embed_gpu_bench")
    ap.add_argument("--model", default=".gpu-model", help="model directory with model-fp16.safetensors")
    ap.add_argument("--tokens", default="32,128,256", help="line lengths in tokens [32,128,256]")
    ap.add_argument("--precision", default="fp16", help="fp16 or bf16 [fp16]")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lines", type=int, default=2048, help="lines per corpus [2048]")
    ap.add_argument("--peak-tflops", type=float, default=989.4, help="dense fp16 tensor peak [989.4]")
    ap.add_argument("--ncu", default="ncu")
    ap.add_argument("--work", default="/tmp/embed-gpu-ncu")
    a = ap.parse_args()
    out = os.environ.get("OUT", os.path.join(os.getcwd(), "out-gpu"))
    os.makedirs(out, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    checks = verify.Checks()
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip().splitlines()
    tag = "h200" if gpu and "H200" in gpu[0] else "h100" if gpu and "H100" in gpu[0] else "gpu"
    stem = os.path.join(out, "%s_%s_embed-gpu-ncu" % (datetime.date.today().isoformat(), tag))
    vocab = os.path.join(a.model, "vocab.txt")
    t0 = time.time()
    rows = []  # per (L, group)
    summary = []  # per L
    for L in [int(x) for x in a.tokens.split(",")]:
        corpus = os.path.join(a.work, "synthetic_%dtok.txt" % L)
        with open(corpus, "w") as f:
            subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "embed_gpu.py"), "synth", vocab,
                            str(a.lines), str(L - 2), "3"], stdout=f, check=True)
        cmd = [a.bench, a.model, "model-fp16.safetensors", corpus, str(a.batch)]
        r = subprocess.run(cmd + ["3", a.precision], capture_output=True, text=True)
        if not checks.add((r.returncode == 0, "L %d: embed_gpu_bench exited %d" % (L, r.returncode)), "finished"):
            continue
        plain = json.loads([x for x in r.stdout.splitlines() if x.startswith("{")][-1])
        raw = os.path.join(a.work, "ncu_%d.csv" % L)
        with open(raw, "w") as f:
            r = subprocess.run([a.ncu, "--clock-control", "none", "--metrics", ",".join(METRICS), "--csv", "--page",
                                "raw"] + cmd + ["1", a.precision], stdout=f, stderr=subprocess.PIPE, text=True)
        if not checks.add((r.returncode == 0, "L %d: ncu exited %d" % (L, r.returncode)), "finished"):
            continue
        launches = parse(raw)
        starts = [i for i, e in enumerate(launches) if "embed_ln" in e["name"]]
        ok = len(starts) >= 2 and len(starts) % 2 == 0
        timed = launches[starts[len(starts) // 2]:] if ok else []
        us = {g: sum(e["us"] for e in timed if group_of(e["name"]) == g) for g in GROUPS}
        checks.add((ok and us["products"] > 0 and us["attention"] > 0,
                    "L %d: the timed pass found (%d batches), products %.0f us, attention %.0f us" % (
                        L, len(starts) // 2, us["products"], us["attention"])), "profile")
        total = sum(us.values())
        fwd_us = 1000.0 * plain["forward_ms_median"]
        checks.add((ok and 0.5 <= total / fwd_us <= 1.5, "L %d: the pass's kernels sum to %.0f us against the plain "
                    "forward's %.0f us" % (L, total, fwd_us)), "profile")
        tokens, lines = plain["tokens"], plain["lines"]
        flops = {"products": 2.0 * tokens * H * (3 * H + H + 2 * FFN) * LAYERS,
                 "attention": 4.0 * (tokens / lines) * tokens * H * LAYERS}
        for g in GROUPS:
            sel = [e for e in timed if group_of(e["name"]) == g]
            tf = flops[g] / (us[g] * 1e-6) / 1e12 if g in flops and us[g] > 0 else float("nan")
            rows.append({"tokens_per_line": L, "group": g, "launches": len(sel), "us": round(us[g], 1),
                         "share": round(us[g] / total, 4) if total else 0, "tflops": round(tf, 1) if tf == tf else "",
                         "pct_of_peak": round(100 * tf / a.peak_tflops, 1) if tf == tf else "",
                         "dram_pct": round(weighted(sel, METRICS[1]), 1) if sel else "",
                         "sm_pct": round(weighted(sel, METRICS[2]), 1) if sel else ""})
        summary.append((L, lines, tokens, plain["forward_ms_median"], plain["forward_sentences_per_s"], total,
                        (flops["products"] + flops["attention"]) / (fwd_us * 1e-6) / 1e12))
    with open(stem + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()) if rows else ["tokens_per_line"])
        w.writeheader()
        w.writerows(rows)
    with open(stem + ".md", "w") as f:
        f.write("# embed-gpu-ncu: the CUDA encoder's forward pass by kernel group (Nsight Compute)\n\n")
        f.write("- command: `bash bench/run.sh embed-gpu-ncu %s`\n" % " ".join(sys.argv[1:]))
        f.write("- GPU: %s; %s, batch %d, %d lines a corpus of one-token words; ncu --clock-control none, each "
                "kernel alone; dense peak taken as %.1f TFLOP/s\n\n" % (gpu[0] if gpu else "?", a.precision, a.batch,
                                                                       a.lines, a.peak_tflops))
        f.write("| tokens a line | plain forward ms | sentences/s | kernels' sum ms | TFLOP/s over the plain forward "
                "| % of peak |\n|---:|---:|---:|---:|---:|---:|\n")
        for L, lines, tokens, ms, sps, total, tf in summary:
            f.write("| %d | %.3f | %.0f | %.3f | %.1f | %.1f |\n" % (L, ms, sps, total / 1000, tf,
                                                                    100 * tf / a.peak_tflops))
        f.write("\n| tokens a line | group | launches | us | share | TFLOP/s | % of peak | DRAM % | SM % |\n")
        f.write("|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
        for r in rows:
            f.write("| %s |\n" % " | ".join(str(r[k]) for k in r))
        f.write("\nraw launches: %s/ncu_L.csv; whole run %.0f s\n" % (a.work, time.time() - t0))
    print(open(stem + ".md").read())
    return checks.verdict()


if __name__ == "__main__":
    sys.exit(main())
