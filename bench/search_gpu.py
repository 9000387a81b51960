#!/usr/bin/env python3
"""search-gpu: `vecanneal search --backend cuda` (IVF over the index's anchors, on the GPU) against an
exact PyTorch brute force on the same GPU, at 1M and 8M x 128 with 10000 queries and k 10: queries per
second per nprobe, recall@10, the share of the device's copy bandwidth the list scan reaches, and strong
scaling on 2 GPUs. Run through bench/search_gpu.sh (`bash bench/run.sh search-gpu`).

Per size N (with K anchors), in one run on one machine:
  1. data      `vecanneal gen --n N --d D --clusters C --spread S --seed 7 --test Q`, with gen's exact
               /neighbors when N <= --gen-neighbors-max (it costs Q x N distances on the CPU), else
               --no-neighbors
  2. index     `vecanneal compress --anchors K --backend cuda --set max_iter=I` (1 rank)
  3. PyTorch   bench/search_gpu_torch.py, its own process: float32 brute force (addmm + topk, chunked
               over the base, TF32 off) over all Q queries, best of 3; its ids are the ground truth
               (TRUTH.h5:/neighbors); and the device's copy bandwidth (torch device-to-device copy)
  4. vecanneal `search --nprobe 1,2,...,64 --k 10 --ground-truth TRUTH --sweep-csv --metrics`, 1 rank
               on 1 GPU, REPEATS runs (best QPS per nprobe: search's own figure, the batches' wall time:
               probe on the host, scan on the GPU, merge; reads and list upload excluded)
  5. exact     on the first EXACT_Q queries: `search --exact` and `search --nprobe K` (every list)
  6. 2 GPUs    (when 2 devices are visible) the sweep of 4 as `mpirun -n 2`, one GPU per rank,
               REPEATS runs; strong scaling = QPS(2 GPUs) / QPS(1 GPU) per nprobe
Scan rate: the rows a sweep point reads = sum over the queries of the members of their nprobe nearest
anchors (the probes computed here in numpy from the index's /anchors, ordered by distance then anchor
id, as search orders them up to near-ties, and its per-anchor counts), x D x 4 bytes, over the point's seconds. The
seconds include the host's probe and merge, so the rate is a lower bound on the scan's own; rows read
by several queries of a batch at once may come from the L2 cache, so the rate can exceed the copy
bandwidth.

Checks (bench/verify.py's Checks; the last line says passed or FAILED, exit 1 on a failure):
  finished   every gen, compress, PyTorch and search run exited 0 within --step-timeout
  engine     every search run's metrics name the engine asked for (--backend)
  full probe search --nprobe K = search --exact on the first EXACT_Q queries: /neighbors and
             /distances bitwise identical (the same rows scanned: docs/search.md)
  exact      search --exact's recall@10 against PyTorch's ids >= EXACT_MIN (PyTorch's other formula,
             ||x||^2 - 2 q.x + ||q||^2, moves only near-ties); and, where gen wrote /neighbors, search
             --exact's ids and distances are gen's, bitwise
  monotone   recall does not decrease with nprobe (1 GPU and 2 GPUs)
  repeats    every run of a configuration gives the same recall at every nprobe
  ranks      2 GPUs against 1: /neighbors and /distances of the last nprobe bitwise identical, and the
             same recall at every nprobe

--backend cpu runs everything on the CPU (PyTorch too), at a small --sizes: a check of the script
without a GPU; its figures mean nothing."""
import argparse
import csv
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
import vecanneal_index as vi  # noqa: E402
import verify  # noqa: E402
from search_cpu import cpu_name, log, read_sweep, sh  # noqa: E402

TOPK = 10
EXACT_MIN = 0.999
GOAL_RECALL = 0.9


def gpu_lines():
    """nvidia-smi's line per GPU (index, name, memory, driver), or [] without one."""
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [l.strip() for l in p.stdout.splitlines() if l.strip()] if p.returncode == 0 else []


def short_gpu(line):
    """'0, NVIDIA H100 80GB HBM3, ...' -> 'h100'."""
    words = line.split(",")[1].split() if "," in line else []
    for w in words:
        if w[:1] in "HABL" and any(c.isdigit() for c in w):
            return w.lower()
    return "gpu"


def result_bits(path):
    with h5py.File(path, "r") as f:
        return f["/neighbors"][()], f["/distances"][()]


def same_results(a, b):
    """(ok, message): /neighbors and /distances of two result files bitwise identical."""
    (na, da), (nb, db) = result_bits(a), result_bits(b)
    what = "%s vs %s" % (os.path.basename(a), os.path.basename(b))
    if na.shape != nb.shape or da.shape != db.shape:
        return False, what + ": shapes %s / %s" % (na.shape, nb.shape)
    rows = np.flatnonzero((na != nb).any(1) | (da.view(np.uint32) != db.view(np.uint32)).any(1))
    return rows.size == 0, what + (": /neighbors and /distances bitwise identical (%d x %d)" % na.shape if rows.size == 0
                                   else ": %d of %d rows differ (first %d)" % (rows.size, na.shape[0], rows[0]))


def probes_of(Q, anchors, pmax):
    """Each query's pmax nearest anchors, by squared l2 then anchor id (search's order; float64 here,
    so an exact tie of search's float32 distances may order differently: the counts barely move)."""
    A = anchors.astype(np.float64)
    out = np.empty((len(Q), pmax), dtype=np.int64)
    an = (A * A).sum(1)
    for s in range(0, len(Q), 2048):
        q = Q[s:s + 2048].astype(np.float64)
        d2 = an[None, :] - 2.0 * q @ A.T
        out[s:s + len(q)] = np.argsort(d2, axis=1, kind="stable")[:, :pmax]
    return out


def best_of(runs):
    """{nprobe: (recall, best qps, seconds of the best)} over runs of {nprobe: metrics sweep point};
    None where a run's recall differs from the first's."""
    out, same = {}, True
    for run in runs:
        for p, pt in run.items():
            old = out.get(p)
            if old is not None and old[0] != pt["recall"]:
                same = False
            if old is None or pt["queries_per_second"] > old[1]:
                out[p] = (pt["recall"] if old is None else old[0], pt["queries_per_second"], pt["seconds"])
    return out, same


def main():
    cores = os.cpu_count() or 1
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--sizes", default="1000000:1024,8000000:4096", help="N:K pairs, rows and anchors [1000000:1024,8000000:4096]")
    ap.add_argument("--d", type=int, default=128, help="dimensions [128]")
    ap.add_argument("--q", type=int, default=10000, help="queries [10000]")
    ap.add_argument("--nprobe", default="1,2,4,8,16,32,64", help="nprobe sweep [1,2,4,8,16,32,64]")
    ap.add_argument("--exact-q", type=int, default=2000, help="queries of the --exact and nprobe = K runs [2000]")
    ap.add_argument("--repeats", type=int, default=2, help="vecanneal runs per configuration; the best QPS counts [2]")
    ap.add_argument("--torch-repeats", type=int, default=3, help="PyTorch timed runs; the best counts [3]")
    ap.add_argument("--max-iter", type=int, default=20, help="compress --set max_iter [20]")
    ap.add_argument("--clusters", type=int, default=1000, help="gen --clusters [1000]")
    ap.add_argument("--spread", type=float, default=1.5, help="gen --spread [1.5], as search-cpu")
    ap.add_argument("--seed", type=int, default=7, help="gen --seed [7]")
    ap.add_argument("--gen-neighbors-max", type=int, default=1000000, help="gen writes /neighbors up to this N [1000000]")
    ap.add_argument("--batch", type=int, default=0, help="search --batch [0: search's default]")
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"], help="search and compress backend, and the "
                    "PyTorch device [cuda]; cpu: a check of the script without a GPU")
    ap.add_argument("--two", default="auto", choices=["auto", "yes", "no"],
                    help="the 2-rank runs [auto: with 2 GPUs visible (CUDA_VISIBLE_DEVICES, else nvidia-smi); cpu: yes]")
    ap.add_argument("--chunk", type=int, default=1 << 18, help="PyTorch base rows per chunk [262144]")
    ap.add_argument("--copy-mib", type=int, default=4096, help="MiB per buffer of the copy-bandwidth measurement [4096]")
    ap.add_argument("--step-timeout", type=int, default=180, help="seconds one step may run [180]")
    ap.add_argument("--vecanneal", default=os.environ.get("VECANNEAL", ""), help="the binary [$VECANNEAL]")
    ap.add_argument("--python", default=sys.executable, help="the interpreter of the PyTorch peer [this one]")
    ap.add_argument("--data-dir", default=os.environ.get("VA_BENCH_DATA", "/tmp/vecanneal-search-gpu"),
                    help="data and indexes, kept between runs [$VA_BENCH_DATA or /tmp/vecanneal-search-gpu]")
    ap.add_argument("--out-dir", default=os.environ.get("OUT", os.path.join(os.getcwd(), "out-gpu")), help="results [$OUT or ./out-gpu]")
    ap.add_argument("--tag", default="", help="suffix of the result names")
    a = ap.parse_args()

    checks = verify.Checks()
    if not a.vecanneal or not os.access(a.vecanneal, os.X_OK):
        checks.add((False, "no vecanneal binary (--vecanneal or $VECANNEAL): %r" % a.vecanneal), "finished")
        return checks.verdict()
    sizes = [tuple(int(v) for v in s.split(":")) for s in a.sizes.split(",") if s]
    nprobes = sorted({int(x) for x in a.nprobe.split(",") if x})
    gpus = gpu_lines()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ndev = len([v for v in visible.split(",") if v.strip()]) if visible is not None else len(gpus)
    two = a.two == "yes" or (a.two == "auto" and (ndev >= 2 if a.backend == "cuda" else True))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", NCCL_NVLS_ENABLE="0",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    work = os.path.join(a.out_dir, "search-gpu-work")
    for p in (a.data_dir, a.out_dir, work):
        os.makedirs(p, exist_ok=True)
    hw = ("2x" if two else "") + short_gpu(gpus[0]) if gpus and a.backend == "cuda" else "cpu"
    stem = "%s_%s_search-gpu%s" % (datetime.date.today().isoformat(), hw, ("-" + a.tag) if a.tag else "")
    version = (subprocess.run([a.vecanneal, "--version"], stdout=subprocess.PIPE, text=True).stdout.strip().splitlines() or ["?"])[0]
    commands = []
    t_start = time.perf_counter()
    log("search-gpu: sizes %s, d %d, %d queries, nprobe %s, backend %s, 2 ranks: %s; %s; %s, %d CPUs"
        % (sizes, a.d, a.q, nprobes, a.backend, "yes" if two else "no", "; ".join(gpus) or "no GPU", cpu_name(), cores))

    def run(cmd, label, name):
        commands.append(" ".join(shlex.quote(c) for c in cmd))
        ok, dt = sh(cmd, checks, label, env, timeout=a.step_timeout, log_path=os.path.join(work, name + ".log"))
        return ok, dt

    def mpi(ranks):
        return ["mpirun", "-n", str(ranks), "--bind-to", "none"]

    def search(ranks, args, name, truth):
        """One search run; returns its metrics (dict) or None."""
        out = os.path.join(work, name + ".h5")
        csvp, mp = os.path.join(work, name + ".csv"), os.path.join(work, name + ".json")
        for p in (out, csvp, mp):
            if os.path.exists(p):
                os.remove(p)
        cmd = mpi(ranks) + [a.vecanneal, "search"] + args + ["--k", str(TOPK), "--ground-truth", truth, "--backend", a.backend,
                                                            "--threads", str(max(1, cores // ranks)), "--out", out,
                                                            "--sweep-csv", csvp, "--metrics", mp]
        if a.batch:
            cmd += ["--batch", str(a.batch)]
        ok, _ = run(cmd, "search %s" % name, name)
        if not ok:
            return None
        with open(mp) as f:
            m = json.load(f)
        checks.add((m.get("backend") == a.backend, "%s: the metrics name engine %r (asked for %s)" % (name, m.get("backend"), a.backend)),
                   "engine")
        return m

    cases = []
    for n, K in sizes:
        tag = "n%d_k%d" % (n, K)
        ps = sorted({min(p, K) for p in nprobes})  # search clamps a larger nprobe to K
        case = {"n": n, "K": K, "times": {}, "nprobes": ps}
        cases.append(case)
        log("\n== %d x %d, K %d ==" % (n, a.d, K))
        # 1. data (kept)
        gen_nb = n <= a.gen_neighbors_max
        data = os.path.join(a.data_dir, "search_n%d_d%d_q%d_c%d_s%g_seed%d%s.h5" % (n, a.d, a.q, a.clusters, a.spread, a.seed,
                                                                                 "" if gen_nb else "_nonb"))
        if not os.path.exists(data):
            ok, case["times"]["gen"] = run(mpi(cores) + [a.vecanneal, "gen", "--out", data, "--n", str(n), "--d", str(a.d), "--clusters",
                                                         str(a.clusters), "--spread", str(a.spread), "--seed", str(a.seed), "--test",
                                                         str(a.q)] + (["--neighbors", str(TOPK)] if gen_nb else ["--no-neighbors"]),
                                           "gen %s" % tag, "gen_" + tag)
            if not ok:
                continue
        case["gen_neighbors"] = gen_nb
        # 2. index (kept)
        index = data[:-3] + "_k%d_%s_it%d.index.h5" % (K, a.backend, a.max_iter)
        if not os.path.exists(index):
            ok, case["times"]["compress"] = run(mpi(1) + [a.vecanneal, "compress", "--input", data + ":/train", "--anchors", str(K),
                                                          "--out", index, "--backend", a.backend, "--set", "max_iter=%d" % a.max_iter,
                                                          "--set", "threads=%d" % cores, "--set", "progress_every=0"],
                                                "compress %s" % tag, "compress_" + tag)
            if not ok:
                continue
        checks.attempt(verify.run, index, None, n, label="finished")
        # 3. PyTorch: ground truth, QPS, copy bandwidth
        truth = os.path.join(work, "truth_%s.h5" % tag)
        pj = os.path.join(work, "torch_%s.json" % tag)
        ok, case["times"]["pytorch"] = run([a.python, os.path.join(HERE, "search_gpu_torch.py"), data, truth, "--json", pj, "--k", str(TOPK),
                                            "--chunk", str(a.chunk), "--repeats", str(a.torch_repeats), "--copy-mib", str(a.copy_mib),
                                            "--device", a.backend], "PyTorch %s" % tag, "torch_" + tag)
        if not ok:
            continue
        with open(pj) as f:
            case["torch"] = json.load(f)
        # 4. the sweep on 1 GPU
        qargs = ["--index", index, "--queries", data + ":/test", "--nprobe", ",".join(str(p) for p in ps)]
        runs1 = [search(1, qargs, "sweep1_%s_%d" % (tag, r), truth + ":/neighbors") for r in range(a.repeats)]
        runs1 = [m for m in runs1 if m]
        if not runs1:
            continue
        case["metrics1"] = runs1[0]
        case["sweep1"], same = best_of([{pt["nprobe"]: pt for pt in m["sweep"]} for m in runs1])
        checks.add((same, "%s, 1 rank: %d runs, the same recall at every nprobe" % (tag, len(runs1))), "repeats")
        rec = [case["sweep1"][p][0] for p in ps]
        checks.add((all(y >= x for x, y in zip(rec, rec[1:])), "%s, 1 rank: recall over nprobe %s = %s"
                    % (tag, ps, ["%.4f" % r for r in rec])), "monotone")
        # 5. exact and every list, on the first EXACT_Q queries
        nx = min(a.exact_q, a.q)
        sub = os.path.join(work, "first%d_%s.h5" % (nx, tag))
        with h5py.File(data, "r") as f, h5py.File(truth, "r") as t, h5py.File(sub, "w") as s:
            s["/test"] = f["/test"][:nx]
            s["/neighbors"] = t["/neighbors"][:nx]
            gen_truth = (f["/neighbors"][:nx, :TOPK], f["/distances"][:nx, :TOPK]) if gen_nb else None
        sargs = ["--index", index, "--queries", sub + ":/test"]
        mx = search(1, sargs + ["--exact"], "exact_%s" % tag, sub + ":/neighbors")
        mk = search(1, sargs + ["--nprobe", str(K)], "allk_%s" % tag, sub + ":/neighbors")
        ex, ak = os.path.join(work, "exact_%s.h5" % tag), os.path.join(work, "allk_%s.h5" % tag)
        if mx and mk:
            checks.attempt(same_results, ak, ex, label="full probe")
        if mx:
            case["exact"] = mx
            checks.add((mx["recall"] >= EXACT_MIN, "%s: search --exact on the first %d queries: recall@10 %.5f against PyTorch's ids "
                        "(at least %g)" % (tag, nx, mx["recall"], EXACT_MIN)), "exact")
            if gen_truth is not None:
                ids, dist = result_bits(ex)
                ok = np.array_equal(ids, gen_truth[0]) and np.array_equal(dist.view(np.uint32), gen_truth[1].astype(np.float32).view(np.uint32))
                checks.add((ok, "%s: search --exact's /neighbors and /distances = gen's on the first %d queries%s"
                            % (tag, nx, "" if ok else ": %d rows differ" % int((ids != gen_truth[0]).any(1).sum()))), "exact")
        # 6. 2 GPUs
        if two:
            runs2 = [search(2, qargs, "sweep2_%s_%d" % (tag, r), truth + ":/neighbors") for r in range(a.repeats)]
            runs2 = [m for m in runs2 if m]
            if runs2:
                case["sweep2"], same = best_of([{pt["nprobe"]: pt for pt in m["sweep"]} for m in runs2])
                checks.add((same, "%s, 2 ranks: %d runs, the same recall at every nprobe" % (tag, len(runs2))), "repeats")
                rec2 = [case["sweep2"][p][0] for p in ps]
                checks.add((all(y >= x for x, y in zip(rec2, rec2[1:])), "%s, 2 ranks: recall over nprobe = %s"
                            % (tag, ["%.4f" % r for r in rec2])), "monotone")
                checks.add((rec2 == rec, "%s: 2 ranks and 1 rank give the same recall at every nprobe" % tag), "ranks")
                checks.attempt(same_results, os.path.join(work, "sweep2_%s_0.h5" % tag), os.path.join(work, "sweep1_%s_0.h5" % tag),
                               label="ranks")
        # scan rate: rows of the probed lists
        with vi.open_index(index) as ix, h5py.File(data, "r") as f:
            Q = f["/test"][()]
            pr = probes_of(Q, ix.anchors, max(ps))
            counts = ix.counts.astype(np.int64)
            case["metric"] = ix.metric
        rows = np.cumsum(counts[pr], axis=1)  # q x pmax: rows scanned with the first p probes
        case["rows"] = {p: float(rows[:, p - 1].sum()) for p in ps}
        for p in os.listdir(work):  # the results are compared: only logs, CSVs and metrics stay
            if p.endswith(".h5"):
                os.remove(os.path.join(work, p))

    total = time.perf_counter() - t_start
    checks.add((True, "the run finished in %.0f s" % total), "finished")
    write_results(a, cases, gpus, version, commands, checks, stem, two, total)
    return checks.verdict()


def write_results(a, cases, gpus, version, commands, checks, stem, two, total):
    """The summary .md, the CSV and (with matplotlib) the recall-QPS plot."""
    rows, plot = [], []
    tables, notes = [], []
    for c in cases:
        if "sweep1" not in c or "torch" not in c:
            continue
        tq = c["torch"]["qps"]
        bw = c["torch"]["copy_GBps"]
        label = "%gM" % (c["n"] / 1e6) if c["n"] >= 1000000 else "%dk" % (c["n"] // 1000)
        head = ["nprobe", "recall@10", "rows read per query", "1 GPU q/s", "/ PyTorch exact", "scan GB/s", "of copy bandwidth"]
        if two and "sweep2" in c:
            head += ["2 GPUs q/s", "2 GPUs / 1 GPU"]
        t = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
        for p in c["nprobes"]:
            rec, qps, sec = c["sweep1"][p]
            gbs = c["rows"][p] * a.d * 4 / sec / 1e9
            row = {"n": c["n"], "anchors": c["K"], "d": a.d, "queries": a.q, "method": "vecanneal nprobe", "nprobe": p, "recall": rec,
                   "qps_1gpu": qps, "rows_per_query": c["rows"][p] / a.q, "scan_GBps": gbs, "copy_GBps": bw, "scan_fraction": gbs / bw,
                   "ratio_vs_pytorch": qps / tq}
            cells = [str(p), "%.4f" % rec, "%.0f" % (c["rows"][p] / a.q), "%.0f" % qps, "%.2f" % (qps / tq), "%.0f" % gbs, "%.2f" % (gbs / bw)]
            if two and "sweep2" in c:
                q2 = c["sweep2"][p][1]
                row["qps_2gpu"], row["scaling_2gpu"] = q2, q2 / qps
                cells += ["%.0f" % q2, "%.2f" % (q2 / qps)]
            rows.append(row)
            t.append("| " + " | ".join(cells) + " |")
            plot.append({"backend": "vecanneal %s 1 GPU" % label, "precision": "fp32", "nprobe": p, "recall": rec, "qps": qps})
            if two and "sweep2" in c:
                plot.append({"backend": "vecanneal %s 2 GPUs" % label, "precision": "fp32", "nprobe": p, "recall": c["sweep2"][p][0],
                             "qps": c["sweep2"][p][1]})
        ex = c.get("exact")
        if ex:
            rows.append({"n": c["n"], "anchors": c["K"], "d": a.d, "queries": ex["query_count"], "method": "vecanneal --exact",
                         "recall": ex["recall"], "qps_1gpu": ex["queries_per_second"], "ratio_vs_pytorch": ex["queries_per_second"] / tq})
            plot.append({"backend": "vecanneal %s --exact" % label, "precision": "fp32", "nprobe": "exact", "recall": ex["recall"],
                         "qps": ex["queries_per_second"]})
        rows.append({"n": c["n"], "anchors": c["K"], "d": a.d, "queries": a.q, "method": "PyTorch brute force", "recall": 1.0,
                     "qps_1gpu": tq, "copy_GBps": bw, "ratio_vs_pytorch": 1.0})
        plot.append({"backend": "PyTorch %s brute force" % label, "precision": "fp32", "nprobe": "exact", "recall": 1.0, "qps": tq})
        goal = next((p for p in c["nprobes"] if c["sweep1"][p][0] >= GOAL_RECALL), None)
        m1 = c["metrics1"]
        tj = c["torch"]
        lines = ["### %d x %d, %d anchors (%s)\n" % (c["n"], a.d, c["K"], c.get("metric", "?")), "\n".join(t), ""]
        lines.append("- PyTorch brute force (%d queries, all at once, chunks of %d rows): %.0f q/s (best of %s s); its upload %.2f s"
                     % (a.q, tj["chunk"], tq, ", ".join("%.3f" % s for s in tj["seconds"]), tj["upload_seconds"]))
        if ex:
            lines.append("- vecanneal --exact (first %d queries): %.0f q/s = %.2f x PyTorch; recall@10 against PyTorch's ids %.5f"
                         % (ex["query_count"], ex["queries_per_second"], ex["queries_per_second"] / tq, ex["recall"]))
        lines.append("- copy bandwidth (torch copy_, 2 x %d MiB read + written): %.0f GB/s" % (tj["copy_mib"], bw))
        lines.append("- vecanneal search, 1 GPU: read %.2f s, lists (grouping, upload) %.2f s, whole job %.2f s (first run)"
                     % (m1["read_seconds"], m1["lists_seconds"], m1["total_seconds"]))
        if goal is not None:
            lines.append("- at recall@10 >= %.1f (first at nprobe %d, recall %.4f): %.0f q/s = %.2f x PyTorch's exact q/s"
                         % (GOAL_RECALL, goal, c["sweep1"][goal][0], c["sweep1"][goal][1], c["sweep1"][goal][1] / tq))
        lines.append("- step times (s): %s" % (", ".join("%s %.1f" % kv for kv in c["times"].items()) or "data and index kept"))
        tables.append("\n".join(lines) + "\n")
    fields = ["n", "anchors", "d", "queries", "method", "nprobe", "recall", "rows_per_query", "qps_1gpu", "ratio_vs_pytorch", "scan_GBps",
              "copy_GBps", "scan_fraction", "qps_2gpu", "scaling_2gpu"]
    csv_path = os.path.join(a.out_dir, stem + ".csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()})
    png = ""
    if plot:
        plot_csv = os.path.join(a.out_dir, "search-gpu-work", "plot.csv")
        with open(plot_csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["backend", "precision", "nprobe", "recall", "qps"])
            w.writeheader()
            w.writerows(plot)
        png = os.path.join(a.out_dir, stem + ".png")
        p = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "plot-recall-qps.py"), plot_csv, png],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            log("no plot: " + p.stdout.strip())
            png = ""
    line, _ = verify.verdict_line(checks.items)
    md_path = os.path.join(a.out_dir, stem + ".md")
    with open(md_path, "w") as f:
        f.write("# search-gpu: vecanneal search on the GPU against an exact PyTorch brute force\n\n")
        f.write("- command: `bash bench/run.sh search-gpu %s`\n" % " ".join(shlex.quote(x) for x in sys.argv[1:]))
        f.write("- GPUs (nvidia-smi: index, name, memory, driver): %s\n" % ("; ".join(gpus) or "none"))
        f.write("- host: %s, %d CPUs, %s, python %s, numpy %s, h5py %s\n" % (cpu_name(), os.cpu_count() or 1, platform.platform(),
                                                                             platform.python_version(), np.__version__, h5py.__version__))
        tv = next((c["torch"] for c in cases if "torch" in c), None)
        if tv:
            f.write("- PyTorch %s (CUDA %s) on %s, float32, TF32 off\n" % (tv["torch"], tv["cuda"], tv["device"]))
        f.write("- vecanneal: %s (%s); search --backend %s --k %d, %s; 1 GPU = 1 rank x %d threads, 2 GPUs = 2 ranks x %d threads; "
                "best of %d runs per nprobe\n" % (a.vecanneal, version, a.backend, TOPK, "--batch %d" % a.batch if a.batch else
                                                  "search's default batch", os.cpu_count() or 1, max(1, (os.cpu_count() or 1) // 2), a.repeats))
        f.write("- data: `vecanneal gen --d %d --clusters %d --spread %g --seed %d --test %d` (float32); index: `compress --anchors K "
                "--backend %s --set max_iter=%d`\n" % (a.d, a.clusters, a.spread, a.seed, a.q, a.backend, a.max_iter))
        if not two:
            f.write("- 2 GPUs: not run (fewer than 2 devices visible, or --two no)\n")
        f.write("- recall@10 against PyTorch's ids; scan GB/s = rows of the probed lists x %d x 4 bytes / the sweep point's seconds "
                "(probe and merge on the host included: a lower bound on the scan's rate; L2 hits between queries of a batch can take "
                "it above the copy bandwidth)\n" % a.d)
        f.write("- whole run %.0f s; files: %s%s\n\n" % (total, os.path.basename(csv_path), ", " + os.path.basename(png) if png else ""))
        f.write("\n".join(tables) + "\n")
        f.write("Commands, in order:\n\n```\n" + "\n".join(commands) + "\n```\n\n")
        f.write("Checks:\n\n" + "".join("- %s\n" % l for _, l in checks.items) + "\n" + line + "\n")
    log("")
    log("\n".join(tables))
    log("wrote %s, %s%s" % (md_path, csv_path, ", " + png if png else ""))


if __name__ == "__main__":
    sys.exit(main())
