#!/usr/bin/env python3
"""gpu_loop_ncu.py: where one iteration of the GPU annealing loop spends its time, kernel by kernel, read by
Nsight Compute (`bash bench/run.sh gpu-loop-ncu [ARGS]` on a GPU machine, from the repository root).

Steps:
  1. data     `vecanneal gen --n N --d D --clusters 2000 --spread 0.5 --seed 7` (the rows of bench/gpu_peers.py),
              kept in --data-dir between runs
  2. plain    `vecanneal compress --anchors K --backend cuda --set precision=P --set max_iter=20`: the job's own
              ms per iteration (the metrics' ms_per_iteration: the loop's wall time over its iterations)
  3. profile  the same compress with --set max_iter=ITERS under `ncu --clock-control none` (the clocks left
              alone), one metric pass per kernel: its duration, DRAM and SM throughput (% of the sustained
              peak), achieved occupancy (active warps, % of the peak), grid and registers
One iteration is the launches from one update_kernel (the anchors' step that ends an iteration) up to the
next; the last complete one is reported. Kernels are grouped: argmin (the assign pass: the fused products
and argmin, or the GEMM path's), statistics (the sort of rows by anchor and the segmented sums), and the
rest (anchor norms, the update, the scalars). ncu runs each kernel alone, so the sum of one iteration's
kernels leaves out the overlap and the host's turn-around: plain ms less that sum is reported as the gaps.

Checks (bench/verify.py's Checks; the last line says passed or FAILED, exit 1 on a failure): both runs
exit 0; a complete iteration is found in the profile, with an argmin and a statistics kernel; the sum of
its kernels is between 0.5 and 1.3 times the plain run's ms per iteration (a profile that does not describe
the loop the job runs fails).

Results: $OUT/DATE_GPU_gpu-loop-ncu.md (default ./out-gpu) and .csv (every profiled launch: kernel, us, the
other metrics); ncu's own CSV as gpu-loop-ncu-raw.csv."""
import argparse
import csv
import datetime
import io
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import verify  # noqa: E402

METRICS = ["gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
           "sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm__warps_active.avg.pct_of_peak_sustained_active",
           "launch__grid_size", "launch__registers_per_thread"]


def group_of(name):
    """argmin, statistics or other, from a kernel's name."""
    if re.search(r"wgmma|fused|argmin|assign|gemm|sgemm|hgemm|cutlass|r_rows", name):
        return "argmin"
    if re.search(r"RadixSort|DeviceScan|seg_|^count_|iota|stats|partial", name):
        return "statistics"
    return "other"


def number(text):
    return float(text.replace(",", "")) if text not in ("", "n/a") else float("nan")


def parse(path):
    """The profiled launches in order: dicts of name and the METRICS (durations in us)."""
    lines = [line for line in open(path) if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("".join(lines))))
    if len(rows) < 3:
        return []
    head, units = rows[0], rows[1]
    col = {n: i for i, n in enumerate(head)}
    scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "nsecond": 1e-3}
    tunit = scale.get(units[col["gpu__time_duration.sum"]], 1e-3)
    out = []
    for r in rows[2:]:
        e = {"name": r[col["Kernel Name"]]}
        for m in METRICS:
            e[m] = number(r[col[m]])
        e["us"] = e["gpu__time_duration.sum"] * tunit
        out.append(e)
    return out


def write_compact(launches, path):
    """The launches in order, one line each: the kernel, its duration in us and the other METRICS."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["launch", "kernel", "us"] + METRICS[1:])
        for i, e in enumerate(launches):
            w.writerow([i, e["name"], "%.3f" % e["us"]] + ["%g" % e[m] for m in METRICS[1:]])


def last_iteration(launches):
    """The launches of the last complete iteration: from the next-to-last update_kernel to the last."""
    marks = [i for i, e in enumerate(launches) if e["name"].startswith("update_kernel")]
    if len(marks) < 2:
        return []
    return launches[marks[-2]:marks[-1]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vecanneal", required=True, help="the CUDA build's binary")
    ap.add_argument("--n", type=int, default=1000000, help="rows [1000000]")
    ap.add_argument("--d", type=int, default=128, help="dimensions [128]")
    ap.add_argument("--k", type=int, default=1024, help="anchors [1024]")
    ap.add_argument("--precision", default="fp16", help="compress precision [fp16]")
    ap.add_argument("--iters", type=int, default=4, help="iterations of the profiled run [4]")
    ap.add_argument("--ncu", default="ncu", help="Nsight Compute's command line tool [ncu]")
    ap.add_argument("--data-dir", default=os.environ.get("VA_BENCH_DATA", "/tmp/vecanneal-gpu-loop"))
    ap.add_argument("--from-csv", help="report an earlier profile's CSV (with --plain-ms) instead of running")
    ap.add_argument("--plain-ms", type=float, help="with --from-csv: the plain run's ms per iteration")
    a = ap.parse_args()
    out = os.environ.get("OUT", os.path.join(os.getcwd(), "out-gpu"))
    os.makedirs(out, exist_ok=True)
    os.makedirs(a.data_dir, exist_ok=True)
    checks = verify.Checks()
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip().splitlines() if not a.from_csv else ["(from a CSV)"]
    tag = "h200" if gpu and "H200" in gpu[0] else "h100" if gpu and "H100" in gpu[0] else "gpu"
    csv_path = os.path.join(out, "gpu-loop-ncu-raw.csv")  # ncu's own CSV, the job's output between its lines
    result_csv = os.path.join(out, "%s_%s_gpu-loop-ncu.csv" % (datetime.date.today().isoformat(), tag))
    t0 = time.time()
    if a.from_csv:
        csv_path, plain_ms = a.from_csv, a.plain_ms
    else:
        data = os.path.join(a.data_dir, "loop_n%d_d%d.h5" % (a.n, a.d))
        if not os.path.exists(data):
            r = subprocess.run([a.vecanneal, "gen", "--out", data, "--n", str(a.n), "--d", str(a.d), "--clusters",
                                "2000", "--spread", "0.5", "--seed", "7"], env=env, capture_output=True, text=True)
            if not checks.add((r.returncode == 0, "gen exited %d" % r.returncode), "finished"):
                return checks.verdict()
        job = [a.vecanneal, "compress", "--input", data + ":/train", "--anchors", str(a.k), "--backend", "cuda",
               "--set", "precision=" + a.precision, "--set", "progress_every=0"]
        metrics = os.path.join(out, "gpu-loop-plain.json")
        r = subprocess.run(job + ["--set", "max_iter=20", "--out", os.path.join(a.data_dir, "plain.h5"), "--metrics",
                                  metrics], env=env, capture_output=True, text=True)
        if not checks.add((r.returncode == 0, "plain compress exited %d" % r.returncode), "finished"):
            return checks.verdict()
        plain_ms = json.load(open(metrics))["ms_per_iteration"]
        with open(csv_path, "w") as f:
            r = subprocess.run([a.ncu, "--clock-control", "none", "--metrics", ",".join(METRICS), "--csv", "--page",
                                "raw"] + job + ["--set", "max_iter=%d" % a.iters, "--out",
                                                os.path.join(a.data_dir, "profiled.h5")],
                               env=env, stdout=f, stderr=subprocess.PIPE, text=True)
        if not checks.add((r.returncode == 0, "ncu on compress exited %d%s" % (
                r.returncode, (": " + r.stderr.strip().splitlines()[-1]) if r.returncode and r.stderr.strip() else "")),
                "finished"):
            return checks.verdict()
    launches = parse(csv_path)
    write_compact(launches, result_csv)
    it = last_iteration(launches)
    groups = {g: sum(e["us"] for e in it if group_of(e["name"]) == g) for g in ("argmin", "statistics", "other")}
    found = bool(it) and groups["argmin"] > 0 and groups["statistics"] > 0
    checks.add((found, "one iteration of %d kernels found in the profile, argmin %.1f us, statistics %.1f us" % (
        len(it), groups["argmin"], groups["statistics"])), "profile")
    total = sum(e["us"] for e in it)
    ok = found and plain_ms and 0.5 <= total / (1000.0 * plain_ms) <= 1.3
    checks.add((bool(ok), "the iteration's kernels sum to %.1f us against the plain run's %.3f ms per iteration" % (
        total, plain_ms or float("nan"))), "profile")
    md = os.path.join(out, "%s_%s_gpu-loop-ncu.md" % (datetime.date.today().isoformat(), tag))
    with open(md, "w") as f:
        f.write("# gpu-loop-ncu: one iteration of the GPU loop, kernel by kernel (Nsight Compute)\n\n")
        f.write("- command: `bash bench/run.sh gpu-loop-ncu %s`\n" % " ".join(sys.argv[1:]))
        f.write("- GPU: %s; shape %d x %d, k %d, precision %s; ncu --clock-control none, each kernel alone\n" % (
            ", ".join(gpu), a.n, a.d, a.k, a.precision))
        f.write("- plain run: %.3f ms per iteration (20 iterations at most, its metrics' ms_per_iteration)\n"
                % plain_ms)
        f.write("- DRAM % and SM % of the sustained peak over the kernel's time; occupancy = active warps, % of "
                "the peak\n\n")
        f.write("| kernel | group | us | share of the plain iteration | DRAM % | SM % | occupancy % | grid | regs |\n")
        f.write("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
        for e in it:
            f.write("| %s | %s | %.1f | %.1f%% | %.1f | %.1f | %.1f | %d | %d |\n" % (
                e["name"].split("(")[0][:60], group_of(e["name"]), e["us"], 100 * e["us"] / (1000 * plain_ms),
                e[METRICS[1]], e[METRICS[2]], e[METRICS[3]], e[METRICS[4]], e[METRICS[5]]))
        f.write("\n| group | us | share |\n|---|---:|---:|\n")
        for g in ("argmin", "statistics", "other"):
            f.write("| %s | %.1f | %.1f%% |\n" % (g, groups[g], 100 * groups[g] / (1000 * plain_ms)))
        gaps = 1000 * plain_ms - total
        f.write("| gaps and host (plain less the kernels) | %.1f | %.1f%% |\n\n"
                % (gaps, 100 * gaps / (1000 * plain_ms)))
        f.write("every launch: %s; whole run %.0f s\n" % (os.path.basename(result_csv), time.time() - t0))
    print("wrote %s" % md)
    return checks.verdict()


if __name__ == "__main__":
    sys.exit(main())
