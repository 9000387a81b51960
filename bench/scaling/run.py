#!/usr/bin/env python3
"""Strong and weak scaling of `vecanneal compress` over a list of rank counts.

Strong scaling keeps n fixed; weak scaling keeps n / ranks fixed. Every run is
`vecanneal compress` with an exact iteration count (max_iter=N, tol=0, min_changes=0), so
per-iteration times of different rank counts are comparable; each point is the median of
--repeats runs. Datasets come from `vecanneal gen` and are cached (--data-dir).

Outputs (in --out, default bench/results/<YYYY-MM-DD>_<tag>_scaling/):
  scaling.csv         one row per (mode, ranks): medians over the repeats
  time_per_iter.png   ms/iteration vs ranks (strong, weak) with the ideal lines
  efficiency.png      parallel efficiency vs ranks (strong: t1/(P tP); weak: t1/tP)
  phases.png          stacked per-iteration phase breakdown per rank count
  calibration.json    machine constants for docs/memory.md (sgemm rate, allreduce sweep)
  raw/                the metrics JSON of every run
  REPORT.md           hardware, the exact command line, the table, the efficiencies

Examples:
  python3 bench/scaling/run.py --ranks 1,2,4 --n 200000 --rows-per-rank 50000 --d 128 --k 256
  # inside a Slurm allocation (salloc -N1 --ntasks=4 --gpus-per-task=1 ...):
  python3 bench/scaling/run.py --launcher srun --backend cuda --precision fp16 --ranks 1,2,4 \\
      --n 32000000 --rows-per-rank 8000000 --d 128 --k 1024 --threads 8

Checks (bench/verify.py; REPORT.md lists them, the last line says passed or FAILED): every run
finishes with a usable index (anchors non-empty and finite, one assignment per row, finite energy);
the repeats of a point write the same index bit for bit (same ranks, threads and backend); each strong
run on P ranks agrees with the one on the fewest ranks (1): on the CPU identical assignments and anchors
within 1e-5 relative, with CUDA anchors within 1e-4 relative (verify.py, RANK_RULES).

The runs need only the Python standard library; the checks numpy and h5py; matplotlib draws the plots
(not installed by this script: without it the CSV and the report are still written, and the script
says how to install it). Exit status:
0 all runs done and every check passed, 1 a run or a check failed (the others are still reported),
2 bad arguments or no vecanneal binary.
"""
import argparse
import csv
import datetime
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
import verify  # noqa: E402
PHASES = ["read", "init", "assign", "reduce", "allreduce", "update", "maintenance", "write"]
LOOP_PHASES = ["assign", "reduce", "allreduce", "update", "maintenance"]
STATS = ["min", "mean", "max"]


def log(msg):
    print("scaling: " + msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- hardware
def cpu_info():
    model, flags = "unknown", ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1]
    except OSError:
        model = platform.processor() or "unknown"
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 1
    if os.environ.get("SLURM_CPUS_ON_NODE"):
        try:
            usable = min(usable, int(os.environ["SLURM_CPUS_ON_NODE"]))
        except ValueError:
            pass
    isa = [x for x in ("avx512f", "avx2", "fma", "avx512_bf16", "amx_tile") if re.search(r"\b%s\b" % x, flags)]
    mem_gib = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem_gib = int(line.split()[1]) / 1048576.0
    except OSError:
        pass
    extra = {}
    if shutil.which("lscpu"):
        try:
            out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
            for key in ("Socket(s)", "Core(s) per socket", "Thread(s) per core", "L3 cache", "Hypervisor vendor", "CPU family", "Model"):
                m = re.search(r"^%s:\s*(.+)$" % re.escape(key), out, re.M)
                if m:
                    extra[key] = m.group(1).strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return {"model": model, "cores": usable, "logical_cpus": os.cpu_count(), "isa": isa, "mem_gib": mem_gib, "lscpu": extra}


def gpu_info():
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [l.strip() for l in out.stdout.splitlines() if l.strip()] if out.returncode == 0 else []


def hw_tag(backend, gpus):
    if backend != "cpu" and gpus:
        name = gpus[0].split(",")[0]
        m = re.search(r"\b([A-Z]\d{2,4}[A-Za-z]*)\b", name)
        slug = (m.group(1) if m else re.sub(r"[^A-Za-z0-9]+", "-", name)).lower()
        return "%sx%d" % (slug, len(gpus))
    return "cpu"


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


def busy_cores(interval=1.0):
    """Cores kept busy by anything on this machine over `interval` seconds (from /proc/stat)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return sum(v[:8]), idle
    try:
        t0, i0 = sample()
        time.sleep(interval)
        t1, i1 = sample()
        return (os.cpu_count() or 1) * (1.0 - (i1 - i0) / max(t1 - t0, 1))
    except (OSError, ValueError, IndexError):
        return float("nan")


def wait_quiet(args):
    """Waits (up to --quiet-wait s) until fewer than --quiet-busy cores are busy; returns the last sample."""
    if args.quiet_wait <= 0:
        return busy_cores(0.5)
    t0 = time.time()
    b = busy_cores()
    while b > args.quiet_busy and time.time() - t0 < args.quiet_wait:
        b = busy_cores()
    if b > args.quiet_busy:
        log("warning: %.1f cores busy before the run (waited %.0f s for < %.1f)" % (b, args.quiet_wait, args.quiet_busy))
    return b


# ----------------------------------------------------------------------------- launching
class Launcher:
    def __init__(self, args, cores):
        self.kind = args.launcher
        self.extra = shlex.split(args.launcher_args)
        self.cores = cores
        self.threads = args.threads
        self.env = dict(os.environ)
        # The project's benchmark machines do not support NVLink multicast (NVLS); a benchmark run keeps it off.
        self.env["NCCL_NVLS_ENABLE"] = "0"
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            self.env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            self.env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        if self.threads > 0:
            self.env["OMP_NUM_THREADS"] = str(self.threads)

    def oversubscribed(self, ranks):
        return ranks * max(self.threads, 1) > self.cores

    def prefix(self, ranks):
        if self.kind == "srun":
            cmd = ["srun", "-n", str(ranks), "--mpi=pmix", "--kill-on-bad-exit=1"]
            if self.threads > 0:
                cmd.append("--cpus-per-task=%d" % self.threads)
            return cmd + self.extra
        cmd = [os.environ.get("MPIRUN", "mpirun"), "-n", str(ranks)]
        if self.oversubscribed(ranks):
            cmd.append("--oversubscribe")
        if self.threads > 1 or self.oversubscribed(ranks):
            cmd += ["--bind-to", "none"]  # threads of a rank (or oversubscribed ranks) share the cores freely
        return cmd + self.extra

    def run(self, ranks, argv, logfile, timeout):
        cmd = self.prefix(ranks) + argv
        t0 = time.time()
        with open(logfile, "w") as lf:
            lf.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
            lf.flush()
            try:
                p = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, env=self.env, timeout=timeout)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                rc = 124
                lf.write("\nscaling: timed out after %s s\n" % timeout)
        return rc, time.time() - t0, cmd


# ----------------------------------------------------------------------------- runs
def dataset(args, launcher, n, gen_ranks):
    os.makedirs(args.data_dir, exist_ok=True)
    name = "gauss_n%d_d%d_c%d_s%g_%s_seed%d.h5" % (n, args.d, args.clusters, args.spread, args.dtype, args.seed)
    path = os.path.join(args.data_dir, name)
    if os.path.exists(path):
        log("dataset cached: %s" % path)
        return path
    log("generating %s on %d rank(s)" % (path, gen_ranks))
    tmp = path + ".gen.h5"
    argv = [args.vecanneal, "gen", "--out", tmp, "--n", str(n), "--d", str(args.d), "--clusters", str(args.clusters),
            "--spread", str(args.spread), "--dtype", args.dtype, "--seed", str(args.seed)]
    rc, secs, _ = launcher.run(gen_ranks, argv, path + ".gen.log", args.timeout)
    if rc != 0 or not os.path.exists(tmp):
        raise RuntimeError("vecanneal gen failed (rc %d), see %s.gen.log" % (rc, path))
    os.replace(tmp, path)
    log("generated in %.1f s" % secs)
    return path


def compress_argv(args, data, out_index, metrics, iterations=None):
    argv = [args.vecanneal, "compress", "--input", data + ":/train", "--anchors", str(args.k), "--out", out_index,
            "--metrics", metrics, "--backend", args.backend]
    sets = ["max_iter=%d" % (args.iterations if iterations is None else iterations), "tol=0", "min_changes=0", "progress_every=0", "seed=%d" % args.seed]
    if args.threads > 0:
        sets.append("threads=%d" % args.threads)
    sets.append("precision=%s" % args.precision)  # always: the CUDA backend's own default is tf32
    if args.config:
        argv += ["--config", args.config]
    for s in sets + args.set:
        argv += ["--set", s]
    return argv


def run_point(args, launcher, mode, ranks, n, data, workdir, rawdir, iterations, label, checks, kept):
    """Runs one point --repeats times; checks every index, and the repeats' against the first, whose
    index stays in kept[(mode, ranks)] for the comparison across rank counts."""
    runs = []
    for rep in range(args.repeats):
        tag = "%s_p%d_%s_r%d" % (mode, ranks, label, rep)
        metrics = os.path.join(workdir, tag + ".json")
        index = os.path.join(workdir, tag + "_index.h5")
        for f in (metrics, index):
            if os.path.exists(f):
                os.remove(f)
        argv = compress_argv(args, data, index, metrics, iterations)
        busy0 = wait_quiet(args)
        load0 = loadavg()
        rc, secs, cmd = launcher.run(ranks, argv, os.path.join(workdir, tag + ".log"), args.timeout)
        if rc != 0 or not os.path.exists(metrics):
            log("%s ranks=%d %s repeat %d FAILED (rc %d), log %s" % (mode, ranks, label, rep, rc, os.path.join(workdir, tag + ".log")))
            continue
        with open(metrics) as f:
            m = json.load(f)
        if m.get("iterations") != iterations:
            log("warning: %s asked for %d iterations, ran %s" % (tag, iterations, m.get("iterations")))
        m["_wall_seconds"], m["_loadavg_before"], m["_busy_before"], m["_command"] = secs, load0, busy0, cmd
        with open(os.path.join(rawdir, tag + ".json"), "w") as f:
            json.dump({k: v for k, v in m.items() if k != "config"}, f, indent=1)
        what = "%s, %d ranks, n %d, %s, repeat %d" % (mode, ranks, n, label, rep)
        checks.attempt(verify.run, index, metrics, n, label=what)
        first = kept.setdefault((mode, ranks), index) if label == "i%d" % args.iterations else None
        if first and first != index:
            checks.attempt(verify.same, index, first, label=what + " against the first repeat")
        if not args.keep_index and index != first and os.path.exists(index):
            os.remove(index)
        runs.append(m)
        log("%s ranks=%d n=%d %s repeat %d: %.2f ms/iter, %.0f rows/s (wall %.1f s, %.1f cores busy before)"
            % (mode, ranks, n, label, rep, m["ms_per_iteration"], m["rows_per_second"], secs, busy0))
    return runs


def median_row(mode, ranks, n, args, runs, base_runs):
    """Medians over the repeats. Phase columns are seconds per loop iteration: with base runs (same
    job, --baseline-iterations B) they are (phase(I) - phase(B)) / (I - B), which removes the one-off
    parts (read, init and its collectives, the final assignment pass, write); without, phase(I) / I."""
    it = runs[0]["iterations"]
    if any(r["iterations"] != it for r in runs):
        log("warning: %s ranks=%d: iteration counts differ between repeats" % (mode, ranks))
    med = statistics.median
    row = {"mode": mode, "ranks": ranks, "n": n, "d": args.d, "k": args.k, "precision": args.precision,
           "backend": runs[0].get("backend", args.backend), "iterations": it, "repeats": len(runs),
           "ms_per_iteration": med([r["ms_per_iteration"] for r in runs]),
           "ms_per_iteration_min": min(r["ms_per_iteration"] for r in runs),
           "ms_per_iteration_max": max(r["ms_per_iteration"] for r in runs)}
    bit = base_runs[0]["iterations"] if base_runs else 0
    diff = bool(base_runs) and it > bit
    row["phase_method"] = "diff%d" % bit if diff else "total/I"
    for ph in PHASES:
        for s in STATS:
            full = med([r["phases_seconds"][ph][s] for r in runs])
            if diff and ph in LOOP_PHASES:
                v = (full - med([r["phases_seconds"][ph][s] for r in base_runs])) / (it - bit)
            else:  # one-off phases (read, init, write) are amortised over the iterations
                v = full / max(it, 1)
            row["%s_%s_s_per_iter" % (ph, s)] = v
    row["allreduce_ms_per_iter"] = 1e3 * row["allreduce_mean_s_per_iter"]
    bytes_full = med([r["allreduce_bytes_per_rank"] for r in runs])
    row["allreduce_bytes_per_iter"] = ((bytes_full - med([r["allreduce_bytes_per_rank"] for r in base_runs])) / (it - bit)
                                       if diff else bytes_full / max(it, 1))
    row["rows_per_second"] = med([r["rows_per_second"] for r in runs])
    row["loop_seconds"] = med([r["loop_seconds"] for r in runs])
    row["total_seconds"] = med([r["total_seconds"] for r in runs])
    row["k_final"] = runs[0]["k_final"]
    row["peak_rss_max"] = max(r["peak_rss_bytes"]["max"] for r in runs)
    row["loadavg_before"] = med([r["_loadavg_before"] for r in runs])
    row["busy_cores_before"] = med([r["_busy_before"] for r in runs])
    return row


def add_efficiency(rows):
    for mode in ("strong", "weak"):
        pts = sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["ranks"])
        if not pts:
            continue
        base = pts[0]
        for r in pts:
            if mode == "strong":  # t1 / (P tP), from the smallest rank count measured
                r["efficiency"] = base["ms_per_iteration"] * base["ranks"] / (r["ranks"] * r["ms_per_iteration"])
            else:  # t1 / tP
                r["efficiency"] = base["ms_per_iteration"] / r["ms_per_iteration"]
            r["speedup"] = base["ms_per_iteration"] / r["ms_per_iteration"] * (base["ranks"] if mode == "strong" else 1)


def csv_columns():
    cols = ["mode", "ranks", "n", "d", "k", "precision", "backend", "iterations", "repeats", "ms_per_iteration",
            "ms_per_iteration_min", "ms_per_iteration_max"]
    cols += ["%s_%s_s_per_iter" % (ph, s) for ph in PHASES for s in STATS]
    cols += ["allreduce_ms_per_iter", "allreduce_bytes_per_iter", "rows_per_second", "efficiency", "speedup", "loop_seconds",
             "total_seconds", "k_final", "peak_rss_max", "loadavg_before", "busy_cores_before", "phase_method"]
    return cols


def write_csv(path, rows):
    cols = csv_columns()
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: (("%.6g" % r[c]) if isinstance(r.get(c), float) else r.get(c, "")) for c in cols})


# ----------------------------------------------------------------------------- calibration
def calibrate(args, launcher, outdir, workdir, ranks_list):
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calib.c")
    exe = os.path.join(workdir, "calib")
    mpicc = os.environ.get("MPICC", "mpicc")
    inc = [d for d in ("/usr/include/x86_64-linux-gnu/openblas-pthread", "/usr/include/openblas") if os.path.isdir(d)]
    cmd = [mpicc, "-O3", "-march=native", "-o", exe, src] + ["-I" + d for d in inc] + ["-lopenblas"]
    if subprocess.run(cmd, capture_output=True).returncode != 0:
        cmd.remove("-march=native")
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            log("calibration skipped: cannot build calib.c (%s)" % p.stderr.strip()[:300])
            return None
    tile = max(64, min(4096, (512 * 1024 // 4) // args.k))  # cpu_assign.c auto_tile_rows
    out = {"note": "machine constants measured by bench/scaling/calib.c (see docs/memory.md)"}
    argv = [exe, "compute", "--rows", str(tile), "--k", str(args.k), "--d", str(args.d)]
    rc, _, _ = launcher.run(1, argv, os.path.join(workdir, "calib_compute.log"), 300)
    if rc == 0:
        line = [l for l in open(os.path.join(workdir, "calib_compute.log")).read().splitlines() if l.startswith("{")]
        if line:
            out["compute"] = json.loads(line[-1])
    out["allreduce"] = {}
    for p in ranks_list:
        if p < 2:
            continue
        log("calibrating MPI_Allreduce on %d ranks" % p)
        logf = os.path.join(workdir, "calib_allreduce_p%d.log" % p)
        rc, _, _ = launcher.run(p, [exe, "allreduce", "--max-bytes", str(4 << 20), "--seconds", "0.1"], logf, 300)
        if rc == 0:
            line = [l for l in open(logf).read().splitlines() if l.startswith("{")]
            if line:
                out["allreduce"][str(p)] = json.loads(line[-1])
    with open(os.path.join(outdir, "calibration.json"), "w") as f:
        json.dump(out, f, indent=1)
    return out


# ----------------------------------------------------------------------------- plots
def have_matplotlib():
    """The plots need matplotlib; this script installs nothing on its own."""
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        log("matplotlib missing: writing the CSV and the report only; for the plots install it "
            "(Debian/Ubuntu: apt-get install python3-matplotlib; elsewhere: python3 -m pip install matplotlib)")
        return False


def plots(outdir, rows, cores, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    modes = [m for m in ("strong", "weak") if any(r["mode"] == m for r in rows)]
    by = {m: sorted((r for r in rows if r["mode"] == m), key=lambda r: r["ranks"]) for m in modes}
    files = []

    def shade(ax, pts):
        over = [r["ranks"] for r in pts if r["ranks"] > cores]
        if over:
            ax.axvspan(cores * 1.2, max(over) * 1.3, color="0.9", zorder=0)
            ax.text(cores * 1.25, ax.get_ylim()[1], "oversubscribed\n(> %d cores)" % cores, va="top", fontsize=7, color="0.4")

    # time per iteration
    fig, axes = plt.subplots(1, len(modes), figsize=(5 * len(modes), 3.6), squeeze=False)
    for ax, m in zip(axes[0], modes):
        pts = by[m]
        P = [r["ranks"] for r in pts]
        t = [r["ms_per_iteration"] for r in pts]
        lo = [r["ms_per_iteration"] - r["ms_per_iteration_min"] for r in pts]
        hi = [r["ms_per_iteration_max"] - r["ms_per_iteration"] for r in pts]
        ax.errorbar(P, t, yerr=[lo, hi], marker="o", capsize=3, label="measured (median, min-max)")
        ideal = [t[0] * P[0] / p for p in P] if m == "strong" else [t[0]] * len(P)
        ax.plot(P, ideal, "k--", lw=1, label="ideal")
        ax.set_xscale("log", base=2)
        ax.set_xticks(P)
        ax.set_xticklabels([str(p) for p in P])
        if m == "strong":
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        else:
            ax.set_ylim(bottom=0, top=1.15 * max(r["ms_per_iteration_max"] for r in pts))
        ax.set_xlabel("ranks")
        ax.set_ylabel("ms / iteration")
        ax.set_title("%s scaling (n=%s)" % (m, pts[0]["n"] if m == "strong" else "%d/rank" % (pts[0]["n"] // pts[0]["ranks"])), fontsize=10)
        shade(ax, pts)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    f = os.path.join(outdir, "time_per_iter.png")
    fig.savefig(f, dpi=90)
    plt.close(fig)
    files.append(f)

    # efficiency
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for m in modes:
        pts = by[m]
        ax.plot([r["ranks"] for r in pts], [r["efficiency"] for r in pts], marker="o", label="%s: %s" % (m, "t1/(P tP)" if m == "strong" else "t1/tP"))
    allP = sorted({r["ranks"] for r in rows})
    ax.axhline(1.0, color="k", ls="--", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_xticks(allP)
    ax.set_xticklabels([str(p) for p in allP])
    ax.set_ylim(0, 1.2)
    ax.set_xlabel("ranks")
    ax.set_ylabel("parallel efficiency")
    shade(ax, rows)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    f = os.path.join(outdir, "efficiency.png")
    fig.savefig(f, dpi=90)
    plt.close(fig)
    files.append(f)

    # stacked phases (mean over ranks; allreduce includes the wait for the slowest rank)
    colors = {"assign": "#4c72b0", "reduce": "#dd8452", "allreduce": "#c44e52", "update": "#55a868", "maintenance": "#8172b3"}
    fig, axes = plt.subplots(1, len(modes), figsize=(5 * len(modes), 3.6), squeeze=False)
    for ax, m in zip(axes[0], modes):
        pts = by[m]
        x = list(range(len(pts)))
        bottom = [0.0] * len(pts)
        for ph in LOOP_PHASES:
            v = [max(0.0, 1e3 * r["%s_mean_s_per_iter" % ph]) for r in pts]  # a difference below the noise can be < 0
            ax.bar(x, v, bottom=bottom, color=colors[ph], label=ph, width=0.6)
            bottom = [b + y for b, y in zip(bottom, v)]
        loop = [r["ms_per_iteration"] for r in pts]
        ax.plot(x, loop, "k_", ms=30, mew=2, label="ms/iteration (loop)")
        ax.set_ylim(0, 1.3 * max(max(bottom), max(loop)))
        ax.set_xticks(x)
        ax.set_xticklabels(["%d%s" % (r["ranks"], "*" if r["ranks"] > cores else "") for r in pts])
        ax.set_xlabel("ranks (* oversubscribed)" if any(r["ranks"] > cores for r in pts) else "ranks")
        ax.set_ylabel("ms / iteration (mean over ranks)")
        ax.set_title("%s: phase breakdown" % m, fontsize=10)
        ax.legend(fontsize=7, ncol=3, loc="upper left", framealpha=0.9, markerscale=0.4)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    f = os.path.join(outdir, "phases.png")
    fig.savefig(f, dpi=90)
    plt.close(fig)
    files.append(f)
    return files


# ----------------------------------------------------------------------------- report
def report(outdir, args, rows, hw, gpus, cmdline, calib, plot_files, started, elapsed, launcher, checks):
    L = []
    L.append("# vecanneal scaling: %s, %s" % (hw_tag(args.backend, gpus), started.strftime("%Y-%m-%d")))
    L.append("")
    L.append("## Hardware")
    L.append("")
    L.append("- host: `%s`" % socket.gethostname())
    L.append("- CPU: %s; %d usable core(s) (%s logical CPUs)%s; ISA: %s" % (
        hw["model"], hw["cores"], hw["logical_cpus"],
        "; " + ", ".join("%s %s" % (k, v) for k, v in hw["lscpu"].items()) if hw["lscpu"] else "",
        ", ".join(hw["isa"]) or "?"))
    if hw["mem_gib"]:
        L.append("- memory: %.1f GiB" % hw["mem_gib"])
    L.append("- GPUs: %s" % ("; ".join(gpus) if gpus else "none (nvidia-smi absent or no device)"))
    try:
        rev = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        rev = ""
    L.append("- vecanneal: `%s`, sha256 %s%s" % (getattr(args, "vecanneal_source", args.vecanneal), getattr(args, "vecanneal_sha", "?")[:16],
                                               ", source tree %s at the end of the study" % rev if rev else ""))
    L.append("- launcher: %s; %s thread(s) per rank; backend %s; precision %s" % (
        args.launcher, args.threads if args.threads > 0 else "auto", args.backend, args.precision))
    over = sorted({r["ranks"] for r in rows if launcher.oversubscribed(r["ranks"])})
    if over:
        L.append("- **oversubscribed**: rank counts %s put more ranks x threads than cores (%d) on the machine. Their times "
                 "measure time-sharing, not scaling: efficiency beyond %d rank(s) is not meaningful here."
                 % (", ".join(map(str, over)), hw["cores"], max(1, hw["cores"] // max(args.threads, 1))))
    loads = [r["loadavg_before"] for r in rows if r.get("loadavg_before") == r.get("loadavg_before")]
    busy = [r["busy_cores_before"] for r in rows if r.get("busy_cores_before") == r.get("busy_cores_before")]
    if loads and busy:
        L.append("- machine noise: 1-minute load average %.1f to %.1f and %.1f to %.1f cores busy just before the runs "
                 "(medians per point). Busy cores or a load above the core count mean that other processes shared the "
                 "cores and the timings carry that noise." % (min(loads), max(loads), min(busy), max(busy)))
    L.append("")
    L.append("## Command")
    L.append("")
    L.append("```")
    L.append(cmdline)
    L.append("```")
    L.append("")
    L.append("Each compress run: `%s`" % " ".join(shlex.quote(c) for c in launcher.prefix(rows[0]["ranks"] if rows else 1)
                                                   + compress_argv(args, "DATA.h5", "INDEX.h5", "METRICS.json")))
    L.append("")
    L.append("Strong: n = %d fixed; weak: %d rows per rank; d = %d, k = %d, %d iterations per run (tol=0, min_changes=0), "
             "median of %d repeats. Data: `vecanneal gen` Gaussian mixture (%d clusters, spread %g, %s)."
             % (args.n, args.rows_per_rank, args.d, args.k, args.iterations, args.repeats, args.clusters, args.spread, args.dtype))
    L.append("Total wall time of this study: %.0f s." % elapsed)
    L.append("")
    L.append("## Results")
    L.append("")
    if 0 < args.baseline_iterations < args.iterations:
        how = ("(phase seconds of the %d-iteration run - those of the same job run for %d iteration(s)) / %d, which removes "
               "the one-off parts (read, init and its collectives, the final assignment pass, write)"
               % (args.iterations, args.baseline_iterations, args.iterations - args.baseline_iterations))
    else:
        how = ("phase seconds summed over the run / iterations (assign and reduce include the final assignment pass, "
               "allreduce includes init's collectives)")
    L.append("ms/iter = loop seconds / iterations (median over repeats, [min, max] across repeats). Phase columns: ms per "
             "loop iteration, mean over ranks, medians over repeats, = %s. The allreduce phase includes the wait for the "
             "slowest rank (load imbalance, descheduled ranks). A negative difference (marked noise) means that the one-off part "
             "varied between the runs by more than the loop part." % how)
    L.append("")
    L.append("| mode | ranks | n | ms/iter [min, max] | assign | reduce | allreduce | update | maint. | rows/s | efficiency | peak RSS/rank |")
    L.append("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        ph = [("%.1f" % v) if v >= -0.05 else "%.0f (noise)" % v for v in (1e3 * r["%s_mean_s_per_iter" % p] for p in LOOP_PHASES)]
        L.append("| %s | %d%s | %d | %.1f [%.1f, %.1f] | %s | %.3g M | %.2f | %.0f MiB |" % (
            r["mode"], r["ranks"], "*" if launcher.oversubscribed(r["ranks"]) else "", r["n"], r["ms_per_iteration"],
            r["ms_per_iteration_min"], r["ms_per_iteration_max"], " | ".join(ph), r["rows_per_second"] / 1e6,
            r["efficiency"], r["peak_rss_max"] / 1048576.0))
    L.append("")
    if over:
        L.append("\\* oversubscribed (more ranks x threads than cores).")
        L.append("")
    L.append("## Efficiency")
    L.append("")
    for m, formula in (("strong", "t1 / (P tP)"), ("weak", "t1 / tP")):
        pts = [r for r in rows if r["mode"] == m]
        if pts:
            L.append("- %s (%s): %s" % (m, formula, ", ".join("P=%d: %.2f%s" % (r["ranks"], r["efficiency"],
                                                                                  " (oversubscribed)" if launcher.oversubscribed(r["ranks"]) else "")
                                                             for r in pts)))
    L.append("")
    if calib:
        L.append("## Calibration (calibration.json)")
        L.append("")
        c = calib.get("compute")
        if c:
            L.append("- single-thread sgemm, assign tile %s: %.1f GFLOP/s; streaming read %.1f GB/s"
                     % ("x".join(map(str, c["sgemm_shape"])), c["sgemm_flops_per_s"] / 1e9, c["read_bytes_per_s"] / 1e9))
        for p, a in sorted(calib.get("allreduce", {}).items(), key=lambda kv: int(kv[0])):
            pts = {b: t for b, t in a["allreduce"]}
            sel = [b for b in (8, 2048, 131072, 524288, 2097152) if b in pts]
            L.append("- MPI_Allreduce on %s ranks: %s" % (p, ", ".join("%s: %.1f us" % (human_bytes(b), 1e6 * pts[b]) for b in sel)))
        L.append("")
        L.append("The cost model and its check against these numbers: `docs/memory.md`.")
        L.append("")
    if plot_files:
        L.append("## Plots")
        L.append("")
        for f in plot_files:
            L.append("![%s](%s)" % (os.path.basename(f), os.path.basename(f)))
        L.append("")
    L.append("## Verification")
    L.append("")
    L.extend("- " + line for _, line in checks.items)
    L.append("")
    L.append(verify.verdict_line(checks.items)[0])
    L.append("")
    with open(os.path.join(outdir, "REPORT.md"), "w") as f:
        f.write("\n".join(L))


def human_bytes(b):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024:
            return "%g %s" % (b, unit)
        b /= 1024.0
    return "%g TiB" % b


# ----------------------------------------------------------------------------- main
def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--ranks", default="1,2,4", help="rank counts, comma separated [1,2,4]")
    ap.add_argument("--modes", default="strong,weak", help="strong, weak or both [strong,weak]")
    ap.add_argument("--n", type=int, default=200000, help="strong scaling: total rows [200000]")
    ap.add_argument("--rows-per-rank", type=int, default=50000, help="weak scaling: rows per rank [50000]")
    ap.add_argument("--d", type=int, default=128, help="dimensions [128]")
    ap.add_argument("--k", type=int, default=256, help="anchors [256]")
    ap.add_argument("--precision", default="fp32", help="compute precision, passed as --set precision=P [fp32]")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda", "auto"], help="vecanneal backend [cpu]")
    ap.add_argument("--iterations", type=int, default=10, help="exact iterations per run [10]")
    ap.add_argument("--repeats", type=int, default=3, help="runs per point; the median is reported [3]")
    ap.add_argument("--baseline-iterations", type=int, default=1,
                    help="also run every point with this many iterations and difference the phase times, so that "
                         "the per-iteration phases exclude read/init/final pass/write; 0 = off (phase total / I) [1]")
    ap.add_argument("--quiet-wait", type=float, default=0, help="wait up to this many seconds before each run for the "
                    "machine to go quiet (fewer than --quiet-busy cores busy) [0: no wait]")
    ap.add_argument("--quiet-busy", type=float, default=0.5, help="busy cores counted as quiet [0.5]")
    ap.add_argument("--threads", type=int, default=1, help="threads per rank (--set threads=T); 0 = vecanneal decides [1]")
    ap.add_argument("--launcher", default="mpirun", choices=["mpirun", "srun"], help="mpirun on one box, srun inside a Slurm allocation")
    ap.add_argument("--launcher-args", default="", help="extra launcher arguments, one shell-quoted string")
    ap.add_argument("--config", default="", help="config file passed to compress (before the --set overrides)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra compress --set (repeatable)")
    ap.add_argument("--clusters", type=int, default=256, help="gen: mixture components [256]")
    ap.add_argument("--spread", type=float, default=1.0, help="gen: component spread [1.0]")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16"], help="gen: stored type [float32]")
    ap.add_argument("--seed", type=int, default=1, help="seed of gen and compress [1]")
    ap.add_argument("--vecanneal", default=os.path.join(REPO, "build", "vecanneal"), help="binary [REPO/build/vecanneal]")
    ap.add_argument("--data-dir", default=os.path.join(REPO, "build", "scaling-data"), help="dataset cache [REPO/build/scaling-data]")
    ap.add_argument("--work-dir", default="", help="logs, indexes and metrics of the runs [DATA_DIR/work-<tag>]")
    ap.add_argument("--out", default="", help="results folder [bench/results/<YYYY-MM-DD>_<tag>_scaling]")
    ap.add_argument("--tag", default="", help="hardware tag of the default --out [cpu, or e.g. h200x4]")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per launched command [1800]")
    ap.add_argument("--no-calibrate", action="store_true", help="skip calib.c (sgemm rate, allreduce sweep)")
    ap.add_argument("--no-plots", action="store_true", help="CSV and report only")
    ap.add_argument("--keep-index", action="store_true", help="keep the index files of the runs")
    ap.add_argument("--no-snapshot", action="store_true", help="run --vecanneal in place instead of a copy in the work "
                    "folder (the copy keeps a rebuild during the study from mixing two binaries)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands and exit")
    ap.add_argument("--replot", metavar="DIR", default="", help="only redraw the plots of a results folder from its scaling.csv")
    args = ap.parse_args(argv)
    try:
        args.ranks_list = sorted({int(x) for x in args.ranks.split(",") if x.strip()})
    except ValueError:
        ap.error("--ranks: comma-separated integers")
    if not args.ranks_list or min(args.ranks_list) < 1:
        ap.error("--ranks: positive integers")
    args.modes_list = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.modes_list or any(m not in ("strong", "weak") for m in args.modes_list):
        ap.error("--modes: strong, weak or strong,weak")
    for name in ("n", "rows_per_rank", "d", "k", "iterations", "repeats"):
        if getattr(args, name) < 1:
            ap.error("--%s must be >= 1" % name.replace("_", "-"))
    if args.precision.lower() in ("fp32", "float32", "f32"):
        args.precision = "fp32"
    args.vecanneal = os.path.abspath(args.vecanneal)
    args.data_dir = os.path.abspath(args.data_dir)
    if args.config:
        args.config = os.path.abspath(args.config)
    return args


def main(argv):
    args = parse(argv)
    started = datetime.datetime.now()
    t_start = time.time()
    cmdline = " ".join(shlex.quote(a) for a in ["python3", os.path.relpath(os.path.abspath(__file__), REPO)] + argv)
    hw = cpu_info()
    gpus = gpu_info()
    tag = args.tag or hw_tag(args.backend, gpus)
    outdir = os.path.abspath(args.out or os.path.join(REPO, "bench", "results", "%s_%s_scaling" % (started.strftime("%Y-%m-%d"), tag)))
    workdir = os.path.abspath(args.work_dir or os.path.join(args.data_dir, "work-%s" % tag))
    launcher = Launcher(args, hw["cores"])
    points = []  # (mode, ranks, n)
    for m in args.modes_list:
        for p in args.ranks_list:
            points.append((m, p, args.n if m == "strong" else args.rows_per_rank * p))
    if args.replot:
        with open(os.path.join(args.replot, "scaling.csv")) as f:
            rows = list(csv.DictReader(f))
        for r in rows:
            for key in list(r):
                if key not in ("mode", "precision", "backend", "phase_method"):
                    try:
                        r[key] = float(r[key]) if r[key] != "" else float("nan")
                    except ValueError:
                        pass
            r["ranks"], r["n"] = int(r["ranks"]), int(r["n"])
        if not have_matplotlib():
            return 1
        r0 = rows[0]
        title = "vecanneal %s, %s, d=%d k=%d %s, %d it, %s thr/rank" % (
            r0["backend"], hw["model"] if r0["backend"] == "cpu" or not gpus else gpus[0].split(",")[0], r0["d"], r0["k"],
            r0["precision"], r0["iterations"], args.threads or "auto")
        for f in plots(args.replot, rows, hw["cores"] // max(args.threads, 1), title):
            log("wrote " + f)
        return 0
    if args.dry_run:
        for m, p, n in points:
            print("%s P=%d n=%d: %s" % (m, p, n, " ".join(shlex.quote(c) for c in launcher.prefix(p) + compress_argv(
                args, os.path.join(args.data_dir, "DATA_n%d.h5" % n), "INDEX.h5", "METRICS.json"))))
        return 0
    if not os.access(args.vecanneal, os.X_OK):
        log("no vecanneal binary at %s (build it: cmake -S . -B build && make -C build, or pass --vecanneal)" % args.vecanneal)
        return 2
    if args.launcher == "srun" and not os.environ.get("SLURM_JOB_ID"):
        log("warning: --launcher srun outside a Slurm allocation (no SLURM_JOB_ID): srun will ask for its own")
    os.makedirs(outdir, exist_ok=True)
    rawdir = os.path.join(outdir, "raw")
    os.makedirs(rawdir, exist_ok=True)
    os.makedirs(workdir, exist_ok=True)
    log("results in %s, runs in %s; %d usable core(s), CPU %s, GPUs %s" % (outdir, workdir, hw["cores"], hw["model"], gpus or "none"))
    over = [p for p in args.ranks_list if launcher.oversubscribed(p)]
    if over:
        log("warning: ranks %s x %d thread(s) oversubscribe %d core(s): those timings are not scaling" % (over, max(args.threads, 1), hw["cores"]))

    args.vecanneal_source = args.vecanneal
    with open(args.vecanneal, "rb") as f:
        args.vecanneal_sha = hashlib.sha256(f.read()).hexdigest()
    if not args.no_snapshot:
        snap = os.path.join(workdir, "bin", "vecanneal")
        os.makedirs(os.path.dirname(snap), exist_ok=True)
        shutil.copy2(args.vecanneal, snap)
        args.vecanneal = snap
    log("vecanneal %s (sha256 %s)%s" % (args.vecanneal_source, args.vecanneal_sha[:16],
                                        ", run from the copy " + args.vecanneal if not args.no_snapshot else ""))
    gen_ranks = max(1, min(max(args.ranks_list), hw["cores"]))
    rows, failures = [], []
    checks, kept = verify.Checks(), {}
    datasets = {}
    for m, p, n in points:
        try:
            if n not in datasets:
                datasets[n] = dataset(args, launcher, n, gen_ranks)
        except RuntimeError as e:
            failures.append("%s P=%d: %s" % (m, p, e))
            log(str(e))
            continue
        runs = run_point(args, launcher, m, p, n, datasets[n], workdir, rawdir, args.iterations, "i%d" % args.iterations,
                         checks, kept)
        base = []
        if runs and 0 < args.baseline_iterations < args.iterations:
            base = run_point(args, launcher, m, p, n, datasets[n], workdir, rawdir, args.baseline_iterations,
                             "i%d" % args.baseline_iterations, checks, kept)
        for what, got in (("", runs), ("baseline ", base if runs and 0 < args.baseline_iterations < args.iterations else None)):
            if got is not None and len(got) < args.repeats:
                failures.append("%s P=%d: %d of %d %sruns failed (logs in %s)" % (m, p, args.repeats - len(got), args.repeats, what, workdir))
        if runs:
            rows.append(median_row(m, p, n, args, runs, base))
    for f in failures:
        checks.add((False, f))
    strong = sorted(p for (m, p) in kept if m == "strong")
    backend = next((r["backend"] for r in rows), args.backend)
    for p in strong[1:]:
        checks.attempt(verify.ranks, kept[("strong", p)], kept[("strong", strong[0])], backend,
                       label="strong, %d ranks against %d (%s rule)" % (p, strong[0], backend))
    if not args.keep_index:
        for index in kept.values():
            if os.path.exists(index):
                os.remove(index)
    if not rows:
        log("no run succeeded")
        return checks.verdict()
    add_efficiency(rows)
    write_csv(os.path.join(outdir, "scaling.csv"), rows)
    calib = None if args.no_calibrate else calibrate(args, launcher, outdir, workdir, args.ranks_list)
    plot_files = []
    if not args.no_plots and have_matplotlib():
        try:
            title = "vecanneal %s, %s, d=%d k=%d %s, %d it, %s thr/rank" % (
                args.backend, hw["model"] if args.backend == "cpu" or not gpus else gpus[0].split(",")[0], args.d, args.k,
                args.precision, args.iterations, args.threads or "auto")
            plot_files = plots(outdir, rows, hw["cores"] // max(args.threads, 1), title)
        except Exception as e:  # plots are a convenience: never lose the CSV for them
            log("plotting failed: %r" % (e,))
    report(outdir, args, rows, hw, gpus, cmdline, calib, plot_files, started, time.time() - t_start, launcher, checks)
    log("wrote %s (scaling.csv, REPORT.md%s)" % (outdir, ", " + ", ".join(os.path.basename(f) for f in plot_files) if plot_files else ""))
    return checks.verdict()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
