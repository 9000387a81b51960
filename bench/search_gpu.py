#!/usr/bin/env python3
"""search-gpu: `vecanneal search --backend cuda` (IVF over the index's anchors, on the GPU) against an
exact PyTorch brute force on the same GPU, at 1M and 8M x 128 with 10000 queries and k 10, with the list
scan at each --precision (fp32, tf32, fp16, bf16): queries per second per nprobe, recall@10, the share
of the device's copy bandwidth the list scan reaches, and strong scaling on 2 GPUs. Run through
bench/search_gpu.sh (`bash bench/run.sh search-gpu`).

Per size N (with K anchors), in one run on one machine:
  1. data      `vecanneal gen --n N --d D --clusters C --spread S --seed 7 --test Q`, with gen's exact
               /neighbors when N <= --gen-neighbors-max (it costs Q x N distances on the CPU), else
               --no-neighbors
  2. index     `vecanneal compress --anchors K --backend cuda --set max_iter=I` (1 rank)
  3. PyTorch   bench/search_gpu_torch.py, its own process per precision, over all Q queries, best of
               --torch-repeats: at fp32 (addmm + topk, chunked over the base, TF32 off), whose ids are
               the ground truth of every recall (TRUTH.h5:/neighbors), with the device's copy bandwidth
               (torch device-to-device copy); then at each tensor-core precision of --precisions (tf32:
               TF32 on; fp16/bf16: base and queries cast, float32 accumulation), the peer of our scan at
               that precision (its recall@10 against the fp32 ids is reported)
  4. vecanneal for each precision P of --precisions: `search --precision P --nprobe 1,2,...,64 --k 10
               --ground-truth TRUTH --sweep-csv --metrics`, 1 rank on 1 GPU, REPEATS runs (best QPS per
               nprobe: search's own figure, the batches' wall time: probe on the host, scan on the GPU,
               merge; reads and list upload excluded)
  5. exact     for each P, on the first EXACT_Q queries: `search --precision P --exact` and `--nprobe K`
               (every list)
  6. 2 GPUs    (when 2 devices are visible) the sweep of 4 as `mpirun -n 2`, one GPU per rank, REPEATS
               runs, at fp32 and at the faster of fp16 and bf16 (the higher 1-GPU QPS at the largest
               nprobe; a 2-GPU sweep costs seconds); strong scaling = QPS(2 GPUs) / QPS(1 GPU) per nprobe
Scan rate: the rows a sweep point reads = sum over the queries of the members of their nprobe nearest
anchors (the probes computed here in numpy from the index's /anchors, ordered by distance then anchor
id, as search orders them up to near-ties, and its per-anchor counts), x D x the bytes of a stored
element (4; 2 where the engine computed fp16 or bf16), over the point's seconds. The seconds include the
host's probe and merge, so the rate is a lower bound on the scan's own; rows read by several queries of a
batch at once may come from the L2 cache, so the rate can exceed the copy bandwidth.

Checks (bench/verify.py's Checks; the last line says passed or FAILED, exit 1 on a failure). Recall is
always against PyTorch fp32's ids; "tensor-core" = tf32, fp16, bf16:
  finished   every gen, compress, PyTorch and search run exited 0 within --step-timeout
  engine     every search run's metrics and sweep CSV name the engine asked for (--backend) and the
             precision asked for (cuda), or fp32 (cpu: the CPU engine ignores --precision)
  full probe fp32: search --nprobe K = search --exact on the first EXACT_Q queries, /neighbors and
             /distances bitwise identical (the same rows scanned: docs/search.md); tensor-core: their
             recall@10 within 0.001
  exact      search --exact's recall@10 against PyTorch's ids >= EXACT_MIN[P] (fp32 0.999: PyTorch's other
             formula, ||x||^2 - 2 q.x + ||q||^2, moves only near-ties; tf32 and fp16 0.99; bf16 0.97); and,
             at fp32 where gen wrote /neighbors, search --exact's ids and distances are gen's, bitwise
  monotone   recall does not decrease with nprobe (1 GPU and 2 GPUs; tensor-core: by at most
             0.002 below an earlier nprobe's, the rounding may reorder near neighbours)
  repeats    every run of a configuration gives the same recall at every nprobe
  ranks      2 GPUs against 1 at the same precision: /neighbors and /distances of the last nprobe bitwise
             identical, and the same recall at every nprobe (a distance is a function of the query and
             the row alone at every precision)

--backend cpu runs everything on the CPU (PyTorch too), at a small --sizes: a check of the script
without a GPU; its figures mean nothing. There every precision runs the CPU engine (its names: cpu,
fp32), checked by the precision's rules."""
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
from search_cpu import cpu_name, log, sh  # noqa: E402

TOPK = 10
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")  # search --precision, in the order of the report
SIXTEEN_BIT = ("fp16", "bf16")  # rows stored in 16 bits: candidates for the 2-GPU sweep
PRECISION_WORDS = {"fp32": "the CPU's recipe, bitwise the CPU engine's results",
                   "tf32": "the products on the tensor cores, rows stored in float32",
                   "fp16": "the products on the tensor cores, rows stored in fp16",
                   "bf16": "the products on the tensor cores, rows stored in bf16"}
EXACT_MIN = {"fp32": 0.999, "tf32": 0.99, "fp16": 0.99, "bf16": 0.97}  # --exact's recall@10 against PyTorch fp32
MONOTONE_SLACK = 0.002  # tensor-core precisions: how far recall may dip below an earlier nprobe's
FULL_PROBE_SLACK = 0.001  # tensor-core precisions: |recall(nprobe K) - recall(--exact)|
GOAL_RECALL = 0.9


def gpu_lines():
    """nvidia-smi's line per GPU (index, name, memory, driver), or [] without one."""
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version",
                            "--format=csv,noheader"],
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
    if rows.size:
        return False, what + ": %d of %d rows differ (first %d)" % (rows.size, na.shape[0], rows[0])
    return True, what + ": /neighbors and /distances bitwise identical (%d x %d)" % na.shape


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


def element_bytes(precision):
    """Bytes of a stored row element where the engine computed at `precision` (the metrics' name)."""
    return 2 if precision in SIXTEEN_BIT else 4


def recall_of(ids, truth):
    """recall@TOPK of the rows of ids against the first TOPK ids of the same rows of truth."""
    hit = (ids[:, :TOPK, None] == truth[:, None, :TOPK]).any(2)
    return float(hit.sum()) / hit.size


def rises(recalls, slack):
    """Every recall at least the best earlier one less slack (0: non-decreasing)."""
    return all(r >= max(recalls[:i]) - slack for i, r in enumerate(recalls) if i)



def gpu_setup(a, family, checks):
    """What a GPU benchmark (search-gpu, codes-gpu) starts with, from its arguments (vecanneal, backend, two,
    data_dir, out_dir, tag): the visible GPUs, whether two are used, the environment of its runs, its work
    folder (created, with the data and result folders), the result files' stem (DATE_HW_FAMILY[-TAG]) and the
    binary's version line. None, with a failed check, when the binary is missing."""
    if not a.vecanneal or not os.access(a.vecanneal, os.X_OK):
        checks.add((False, "no vecanneal binary (--vecanneal or $VECANNEAL): %r" % a.vecanneal), "finished")
        return None
    gpus = gpu_lines()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ndev = len([v for v in visible.split(",") if v.strip()]) if visible is not None else len(gpus)
    two = a.two == "yes" or (a.two == "auto" and (ndev >= 2 if a.backend == "cuda" else True))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", NCCL_NVLS_ENABLE="0",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    work = os.path.join(a.out_dir, family + "-work")
    for p in (a.data_dir, a.out_dir, work):
        os.makedirs(p, exist_ok=True)
    hw = ("2x" if two else "") + short_gpu(gpus[0]) if gpus and a.backend == "cuda" else "cpu"
    stem = "%s_%s_%s%s" % (datetime.date.today().isoformat(), hw, family, ("-" + a.tag) if a.tag else "")
    version = (subprocess.run([a.vecanneal, "--version"], stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()
               or ["?"])[0]
    return gpus, two, env, work, stem, version

def main():
    cores = os.cpu_count() or 1
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000000:1024,8000000:4096",
                    help="N:K pairs, rows and anchors [1000000:1024,8000000:4096]")
    ap.add_argument("--d", type=int, default=128, help="dimensions [128]")
    ap.add_argument("--q", type=int, default=10000, help="queries [10000]")
    ap.add_argument("--nprobe", default="1,2,4,8,16,32,64", help="nprobe sweep [1,2,4,8,16,32,64]")
    ap.add_argument("--precisions", default=",".join(PRECISIONS),
                    help="search --precision values, each swept on 1 GPU with its --exact run, and PyTorch at "
                    "each tensor-core one besides fp32 [fp32,tf32,fp16,bf16]")
    ap.add_argument("--exact-q", type=int, default=2000, help="queries of the --exact and nprobe = K runs [2000]")
    ap.add_argument("--repeats", type=int, default=2, help="vecanneal runs per configuration; the best QPS counts [2]")
    ap.add_argument("--torch-repeats", type=int, default=3, help="PyTorch timed runs; the best counts [3]")
    ap.add_argument("--max-iter", type=int, default=20, help="compress --set max_iter [20]")
    ap.add_argument("--clusters", type=int, default=1000, help="gen --clusters [1000]")
    ap.add_argument("--spread", type=float, default=1.5, help="gen --spread [1.5], as search-cpu")
    ap.add_argument("--seed", type=int, default=7, help="gen --seed [7]")
    ap.add_argument("--gen-neighbors-max", type=int, default=1000000,
                    help="gen writes /neighbors up to this N [1000000]")
    ap.add_argument("--batch", type=int, default=0, help="search --batch [0: search's default]")
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"], help="search and compress backend, and the "
                    "PyTorch device [cuda]; cpu: a check of the script without a GPU")
    ap.add_argument("--two", default="auto", choices=["auto", "yes", "no"],
                    help="the 2-rank runs [auto: with 2 GPUs visible (CUDA_VISIBLE_DEVICES, else nvidia-smi); "
                    "cpu: yes]")
    ap.add_argument("--chunk", type=int, default=1 << 18, help="PyTorch base rows per chunk [262144]")
    ap.add_argument("--copy-mib", type=int, default=4096,
                    help="MiB per buffer of the copy-bandwidth measurement [4096]")
    ap.add_argument("--step-timeout", type=int, default=180, help="seconds one step may run [180]")
    ap.add_argument("--vecanneal", default=os.environ.get("VECANNEAL", ""), help="the binary [$VECANNEAL]")
    ap.add_argument("--python", default=sys.executable, help="the interpreter of the PyTorch peer [this one]")
    ap.add_argument("--data-dir", default=os.environ.get("VA_BENCH_DATA", "/tmp/vecanneal-search-gpu"),
                    help="data and indexes, kept between runs [$VA_BENCH_DATA or /tmp/vecanneal-search-gpu]")
    ap.add_argument("--out-dir", default=os.environ.get("OUT", os.path.join(os.getcwd(), "out-gpu")),
                    help="results [$OUT or ./out-gpu]")
    ap.add_argument("--tag", default="", help="suffix of the result names")
    a = ap.parse_args()
    asked = [p for p in a.precisions.split(",") if p]
    if not asked or any(p not in PRECISIONS for p in asked):
        ap.error("--precisions takes a list of %s, got %r" % (", ".join(PRECISIONS), a.precisions))
    precisions = [p for p in PRECISIONS if p in asked]

    checks = verify.Checks()
    setup = gpu_setup(a, "search-gpu", checks)
    if setup is None:
        return checks.verdict()
    gpus, two, env, work, stem, version = setup
    sizes = [tuple(int(v) for v in s.split(":")) for s in a.sizes.split(",") if s]
    nprobes = sorted({int(x) for x in a.nprobe.split(",") if x})
    commands = []
    t_start = time.perf_counter()
    log("search-gpu: sizes %s, d %d, %d queries, nprobe %s, precisions %s, backend %s, 2 ranks: %s; %s; %s, %d CPUs"
        % (sizes, a.d, a.q, nprobes, ",".join(precisions), a.backend, "yes" if two else "no",
           "; ".join(gpus) or "no GPU", cpu_name(), cores))

    def run(cmd, label, name):
        commands.append(" ".join(shlex.quote(c) for c in cmd))
        ok, dt = sh(cmd, checks, label, env, timeout=a.step_timeout, log_path=os.path.join(work, name + ".log"))
        return ok, dt

    def mpi(ranks):
        return ["mpirun", "-n", str(ranks), "--bind-to", "none"]

    def search(ranks, args, name, truth, precision):
        """One search run at --precision precision; returns its metrics (dict) or None."""
        out = os.path.join(work, name + ".h5")
        csvp, mp = os.path.join(work, name + ".csv"), os.path.join(work, name + ".json")
        for p in (out, csvp, mp):
            if os.path.exists(p):
                os.remove(p)
        cmd = mpi(ranks) + [a.vecanneal, "search"] + args + [
            "--k", str(TOPK), "--ground-truth", truth, "--backend", a.backend, "--precision", precision,
            "--threads", str(max(1, cores // ranks)), "--out", out, "--sweep-csv", csvp, "--metrics", mp]
        if a.batch:
            cmd += ["--batch", str(a.batch)]
        ok, _ = run(cmd, "search %s" % name, name)
        if not ok:
            return None
        with open(mp) as f:
            m = json.load(f)
        with open(csvp, newline="") as f:
            named = sorted({(r["backend"], r["precision"]) for r in csv.DictReader(f)})
        want = (a.backend, precision if a.backend == "cuda" else "fp32")  # the CPU engine computes fp32
        ok = (m.get("backend"), m.get("precision")) == want and named == [want]
        checks.add((ok, "%s: the metrics name %s,%s and the sweep CSV %s (asked for --backend %s --precision %s)"
                    % (name, m.get("backend"), m.get("precision"), " ".join(",".join(x) for x in named),
                       a.backend, precision)), "engine")
        return m

    def sweep(ranks, qargs, tag, P, truth, ps):
        """REPEATS sweeps on `ranks` ranks at precision P with the repeats and monotone checks; returns
        (best_of's points, the first run's metrics), or (None, None) when no run finished."""
        runs = [search(ranks, qargs, "sweep%d_%s_%s_%d" % (ranks, tag, P, r), truth + ":/neighbors", P)
                for r in range(a.repeats)]
        runs = [m for m in runs if m]
        if not runs:
            return None, None
        best, same = best_of([{pt["nprobe"]: pt for pt in m["sweep"]} for m in runs])
        what = "%s %s, %d rank%s" % (tag, P, ranks, "s" if ranks > 1 else "")
        checks.add((same, "%s: %d runs, the same recall at every nprobe" % (what, len(runs))), "repeats")
        rec = [best[p][0] for p in ps]
        slack = 0.0 if P == "fp32" else MONOTONE_SLACK
        checks.add((rises(rec, slack), "%s: recall over nprobe %s = %s%s" % (
            what, ps, ["%.4f" % r for r in rec], " (dips of at most %g allowed)" % slack if slack else "")), "monotone")
        return best, runs[0]

    cases = []
    for n, K in sizes:
        tag = "n%d_k%d" % (n, K)
        ps = sorted({min(p, K) for p in nprobes})  # search clamps a larger nprobe to K
        case = {"n": n, "K": K, "times": {}, "nprobes": ps, "runs": {P: {} for P in precisions}, "torch": {},
                "torch_recall": {"fp32": 1.0}}
        cases.append(case)
        log("\n== %d x %d, K %d ==" % (n, a.d, K))
        # 1. data (kept)
        gen_nb = n <= a.gen_neighbors_max
        data = os.path.join(a.data_dir, "search_n%d_d%d_q%d_c%d_s%g_seed%d%s.h5" % (
            n, a.d, a.q, a.clusters, a.spread, a.seed, "" if gen_nb else "_nonb"))
        if not os.path.exists(data):
            ok, case["times"]["gen"] = run(
                mpi(cores) + [a.vecanneal, "gen", "--out", data, "--n", str(n), "--d", str(a.d), "--clusters",
                              str(a.clusters), "--spread", str(a.spread), "--seed", str(a.seed), "--test", str(a.q)]
                + (["--neighbors", str(TOPK)] if gen_nb else ["--no-neighbors"]), "gen %s" % tag, "gen_" + tag)
            if not ok:
                continue
        # 2. index (kept)
        index = data[:-3] + "_k%d_%s_it%d.index.h5" % (K, a.backend, a.max_iter)
        if not os.path.exists(index):
            ok, case["times"]["compress"] = run(
                mpi(1) + [a.vecanneal, "compress", "--input", data + ":/train", "--anchors", str(K), "--out", index,
                          "--backend", a.backend, "--set", "max_iter=%d" % a.max_iter, "--set", "threads=%d" % cores,
                          "--set", "progress_every=0"], "compress %s" % tag, "compress_" + tag)
            if not ok:
                continue
        checks.attempt(verify.run, index, None, n, label="finished")
        # 3. PyTorch: fp32 (the ground truth, QPS, copy bandwidth), then each tensor-core precision asked for
        truth = os.path.join(work, "truth_%s.h5" % tag)
        for P in ["fp32"] + [p for p in precisions if p != "fp32"]:
            tp = truth if P == "fp32" else os.path.join(work, "torch_%s_%s.h5" % (tag, P))
            pj = os.path.join(work, "torch_%s_%s.json" % (tag, P))
            ok, case["times"]["pytorch " + P] = run(
                [a.python, os.path.join(HERE, "search_gpu_torch.py"), data, tp, "--json", pj, "--k", str(TOPK),
                 "--chunk", str(a.chunk), "--repeats", str(a.torch_repeats), "--precision", P,
                 "--copy-mib", str(a.copy_mib if P == "fp32" else 0), "--device", a.backend],
                "PyTorch %s %s" % (tag, P), "torch_%s_%s" % (tag, P))
            if not ok:
                if P == "fp32":
                    break
                continue
            with open(pj) as f:
                case["torch"][P] = json.load(f)
            if P != "fp32":
                case["torch_recall"][P] = recall_of(result_bits(tp)[0], result_bits(truth)[0])
        if "fp32" not in case["torch"]:
            continue
        # the first EXACT_Q queries and their truth, for 5
        nx = min(a.exact_q, a.q)
        sub = os.path.join(work, "first%d_%s.h5" % (nx, tag))
        with h5py.File(data, "r") as f, h5py.File(truth, "r") as t, h5py.File(sub, "w") as s:
            s["/test"] = f["/test"][:nx]
            s["/neighbors"] = t["/neighbors"][:nx]
            gen_truth = (f["/neighbors"][:nx, :TOPK], f["/distances"][:nx, :TOPK]) if gen_nb else None
        qargs = ["--index", index, "--queries", data + ":/test", "--nprobe", ",".join(str(p) for p in ps)]
        sargs = ["--index", index, "--queries", sub + ":/test"]
        for P in precisions:
            r = case["runs"][P]
            # 4. the sweep on 1 GPU
            r["sweep1"], r["metrics1"] = sweep(1, qargs, tag, P, truth, ps)
            if r["sweep1"] is None:
                continue
            # 5. exact and every list, on the first EXACT_Q queries
            mx = search(1, sargs + ["--exact"], "exact_%s_%s" % (tag, P), sub + ":/neighbors", P)
            mk = search(1, sargs + ["--nprobe", str(K)], "allk_%s_%s" % (tag, P), sub + ":/neighbors", P)
            ex, ak = os.path.join(work, "exact_%s_%s.h5" % (tag, P)), os.path.join(work, "allk_%s_%s.h5" % (tag, P))
            if mx and mk and P == "fp32":
                checks.attempt(same_results, ak, ex, label="full probe")
            elif mx and mk:
                checks.add((abs(mk["recall"] - mx["recall"]) <= FULL_PROBE_SLACK,
                            "%s %s: on the first %d queries search --nprobe %d recall@10 %.5f, --exact %.5f "
                            "(within %g)" % (tag, P, nx, K, mk["recall"], mx["recall"], FULL_PROBE_SLACK)),
                           "full probe")
            if not mx:
                continue
            r["exact"] = mx
            checks.add((mx["recall"] >= EXACT_MIN[P], "%s %s: search --exact on the first %d queries: recall@10 %.5f "
                        "against PyTorch fp32's ids (at least %g)" % (tag, P, nx, mx["recall"], EXACT_MIN[P])), "exact")
            if P == "fp32" and gen_truth is not None:
                ids, dist = result_bits(ex)
                ok = np.array_equal(ids, gen_truth[0]) and np.array_equal(
                    dist.view(np.uint32), gen_truth[1].astype(np.float32).view(np.uint32))
                checks.add((ok, "%s: search --exact's /neighbors and /distances = gen's on the first %d queries%s"
                            % (tag, nx, "" if ok else ": %d rows differ" % int((ids != gen_truth[0]).any(1).sum()))),
                           "exact")
        # 6. 2 GPUs: fp32 and the faster 16-bit precision
        done = [P for P in precisions if case["runs"][P].get("sweep1")]
        fast = [P for P in done if P in SIXTEEN_BIT]
        case["fast16"] = max(fast, key=lambda P: case["runs"][P]["sweep1"][ps[-1]][1]) if fast else None
        case["two"] = ([p for p in done if p == "fp32"] + ([case["fast16"]] if case["fast16"] else [])) if two else []
        for P in case["two"]:
            r = case["runs"][P]
            r["sweep2"], _ = sweep(2, qargs, tag, P, truth, ps)
            if r["sweep2"] is None:
                continue
            checks.add(([r["sweep2"][p][0] for p in ps] == [r["sweep1"][p][0] for p in ps],
                        "%s %s: 2 ranks and 1 rank give the same recall at every nprobe" % (tag, P)), "ranks")
            checks.attempt(same_results, os.path.join(work, "sweep2_%s_%s_0.h5" % (tag, P)),
                           os.path.join(work, "sweep1_%s_%s_0.h5" % (tag, P)), label="ranks")
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
    write_results(a, precisions, cases, gpus, version, commands, checks, stem, two, total)
    return checks.verdict()


def write_results(a, precisions, cases, gpus, version, commands, checks, stem, two, total):
    """The summary .md, the CSV and (with matplotlib) the recall-QPS plot: per size one table per
    precision, the --exact table against PyTorch at fp32 and at the same precision."""
    rows, plot, tables = [], [], []
    for c in cases:
        done = [P for P in precisions if c["runs"][P].get("sweep1")]
        if "fp32" not in c["torch"] or not done:
            continue
        tj = c["torch"]["fp32"]
        tq, bw = tj["qps"], tj["copy_GBps"]
        label = "%gM" % (c["n"] / 1e6) if c["n"] >= 1000000 else "%dk" % (c["n"] // 1000)
        size = {"n": c["n"], "anchors": c["K"], "d": a.d}
        lines = ["### %d x %d, %d anchors (%s)\n" % (c["n"], a.d, c["K"], c.get("metric", "?"))]
        for P in done:
            r = c["runs"][P]
            m1 = r["metrics1"]
            engine = "%s,%s" % (m1["backend"], m1["precision"])
            tp = c["torch"].get(P, {}).get("qps")  # PyTorch at the same precision, where it ran
            head = ["nprobe", "recall@10", "rows read per query", "1 GPU q/s", "/ PyTorch fp32", "scan GB/s",
                    "of copy bandwidth"] + (["2 GPUs q/s", "2 GPUs / 1 GPU"] if r.get("sweep2") else [])
            t = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
            for p in c["nprobes"]:
                rec, qps, sec = r["sweep1"][p]
                gbs = c["rows"][p] * a.d * element_bytes(m1["precision"]) / sec / 1e9
                row = dict(size, queries=a.q, method="vecanneal nprobe", precision=P, engine=engine, nprobe=p,
                           recall=rec, qps_1gpu=qps, rows_per_query=c["rows"][p] / a.q, scan_GBps=gbs, copy_GBps=bw,
                           scan_fraction=gbs / bw, ratio_vs_pytorch=qps / tq)
                if tp:
                    row["ratio_vs_pytorch_same_precision"] = qps / tp
                cells = [str(p), "%.4f" % rec, "%.0f" % (c["rows"][p] / a.q), "%.0f" % qps, "%.2f" % (qps / tq),
                         "%.0f" % gbs, "%.2f" % (gbs / bw)]
                plot.append({"backend": "vecanneal %s 1 GPU" % label, "precision": P, "nprobe": p, "recall": rec,
                             "qps": qps})
                if r.get("sweep2"):
                    rec2, q2, _ = r["sweep2"][p]
                    row["qps_2gpu"], row["scaling_2gpu"] = q2, q2 / qps
                    cells += ["%.0f" % q2, "%.2f" % (q2 / qps)]
                    plot.append({"backend": "vecanneal %s 2 GPUs" % label, "precision": P, "nprobe": p,
                                 "recall": rec2, "qps": q2})
                rows.append(row)
                t.append("| " + " | ".join(cells) + " |")
            lines += ["#### --precision %s: %s (engine %s)\n" % (P, PRECISION_WORDS[P], engine), "\n".join(t), ""]
            lines.append("- 1 GPU, first run: read %.2f s, lists (grouping, upload) %.2f s, whole job %.2f s"
                         % (m1["read_seconds"], m1["lists_seconds"], m1["total_seconds"]))
            goal = next((p for p in c["nprobes"] if r["sweep1"][p][0] >= GOAL_RECALL), None)
            if goal is not None:
                lines.append("- at recall@10 >= %.1f (first at nprobe %d, recall %.4f): %.0f q/s = %.2f x PyTorch "
                             "fp32's exact q/s" % (GOAL_RECALL, goal, r["sweep1"][goal][0], r["sweep1"][goal][1],
                                                   r["sweep1"][goal][1] / tq))
            lines.append("")
        # exact search: vecanneal --exact and PyTorch, per precision
        nx = next((c["runs"][P]["exact"]["query_count"] for P in done if "exact" in c["runs"][P]), min(a.exact_q, a.q))
        head = ["precision", "--exact q/s", "/ PyTorch fp32", "/ PyTorch same precision", "--exact recall@10",
                "PyTorch q/s", "PyTorch recall@10"]
        t = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
        for P in precisions:
            ex, tjp = c["runs"][P].get("exact"), c["torch"].get(P)
            if not ex and not tjp:
                continue
            cells = [P]
            if ex:
                xq = ex["queries_per_second"]
                cells += ["%.0f" % xq, "%.3f" % (xq / tq), "%.3f" % (xq / tjp["qps"]) if tjp else "-",
                          "%.5f" % ex["recall"]]
                row = dict(size, queries=ex["query_count"], method="vecanneal --exact", precision=P,
                           engine="%s,%s" % (ex["backend"], ex["precision"]), recall=ex["recall"], qps_1gpu=xq,
                           ratio_vs_pytorch=xq / tq)
                if tjp:
                    row["ratio_vs_pytorch_same_precision"] = xq / tjp["qps"]
                rows.append(row)
                plot.append({"backend": "vecanneal %s --exact" % label, "precision": P, "nprobe": "exact",
                             "recall": ex["recall"], "qps": xq})
            else:
                cells += ["-"] * 4
            if tjp:
                cells += ["%.0f" % tjp["qps"], "%.5f" % c["torch_recall"][P]]
                rows.append(dict(size, queries=a.q, method="PyTorch brute force", precision=P,
                                 engine="torch %s,%s" % (a.backend, P), recall=c["torch_recall"][P],
                                 qps_1gpu=tjp["qps"], copy_GBps=bw if P == "fp32" else None,
                                 ratio_vs_pytorch=tjp["qps"] / tq))
                plot.append({"backend": "PyTorch %s brute force" % label, "precision": P, "nprobe": "exact",
                             "recall": c["torch_recall"][P], "qps": tjp["qps"]})
            else:
                cells += ["-"] * 2
            t.append("| " + " | ".join(cells) + " |")
        lines += ["#### exact search: vecanneal --exact on the first %d queries, PyTorch on all %d\n" % (nx, a.q),
                  "\n".join(t), ""]
        for P in precisions:
            tjp = c["torch"].get(P)
            if tjp:
                lines.append("- PyTorch brute force %s (%d queries, all at once, chunks of %d rows; products %s): "
                             "%.0f q/s (best of %s s); its upload %.2f s"
                             % (P, a.q, tjp["chunk"], tjp["products"], tjp["qps"],
                                ", ".join("%.3f" % s for s in tjp["seconds"]), tjp["upload_seconds"]))
        lines.append("- recall@10 against PyTorch fp32's ids; the ratios are q/s over PyTorch's q/s")
        lines.append("- copy bandwidth (torch copy_, 2 x %d MiB read + written): %.0f GB/s" % (tj["copy_mib"], bw))
        if two:
            why = " (%s: of %s the higher 1-GPU q/s at nprobe %d)" % (
                c["fast16"], " and ".join(p for p in done if p in SIXTEEN_BIT), c["nprobes"][-1]) if c["fast16"] else ""
            lines.append("- 2 GPUs: %s%s" % (", ".join(c["two"]) or "none", why))
        lines.append("- step times (s): %s" % (", ".join("%s %.1f" % kv for kv in c["times"].items())
                                               or "data and index kept"))
        tables.append("\n".join(lines) + "\n")
    fields = ["n", "anchors", "d", "queries", "method", "precision", "engine", "nprobe", "recall", "rows_per_query",
              "qps_1gpu", "ratio_vs_pytorch", "ratio_vs_pytorch_same_precision", "scan_GBps", "copy_GBps",
              "scan_fraction", "qps_2gpu", "scaling_2gpu"]
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
    threads = os.cpu_count() or 1
    with open(md_path, "w") as f:
        f.write("# search-gpu: vecanneal search on the GPU against an exact PyTorch brute force\n\n")
        f.write("- command: `bash bench/run.sh search-gpu %s`\n" % " ".join(shlex.quote(x) for x in sys.argv[1:]))
        f.write("- GPUs (nvidia-smi: index, name, memory, driver): %s\n" % ("; ".join(gpus) or "none"))
        f.write("- host: %s, %d CPUs, %s, python %s, numpy %s, h5py %s\n" % (
            cpu_name(), threads, platform.platform(), platform.python_version(), np.__version__, h5py.__version__))
        tv = next((c["torch"] for c in cases if "fp32" in c["torch"]), None)
        if tv:
            f.write("- PyTorch %s (CUDA %s) on %s: fp32 = float32 with TF32 off (the ground truth); %s\n" % (
                tv["fp32"]["torch"], tv["fp32"]["cuda"], tv["fp32"]["device"], "; ".join(
                    "%s = %s, products %s" % (P, "float32 with TF32 on" if P == "tf32" else "base and queries cast",
                                              tv[P]["products"]) for P in precisions if P != "fp32" and P in tv)
                or "no other precision"))
        f.write("- vecanneal: %s (%s); search --backend %s --precision %s --k %d, %s; 1 GPU = 1 rank x %d threads, "
                "2 GPUs = 2 ranks x %d threads; best of %d runs per nprobe\n" % (
                    a.vecanneal, version, a.backend, "|".join(precisions), TOPK,
                    "--batch %d" % a.batch if a.batch else "search's default batch", threads, max(1, threads // 2),
                    a.repeats))
        if a.backend == "cpu":
            f.write("- --backend cpu: every --precision runs the CPU engine (fp32); a check of the script, its "
                    "figures mean nothing\n")
        f.write("- data: `vecanneal gen --d %d --clusters %d --spread %g --seed %d --test %d` (float32); index: "
                "`compress --anchors K --backend %s --set max_iter=%d`\n"
                % (a.d, a.clusters, a.spread, a.seed, a.q, a.backend, a.max_iter))
        if not two:
            f.write("- 2 GPUs: not run (fewer than 2 devices visible, or --two no)\n")
        f.write("- recall@10 against PyTorch fp32's ids; scan GB/s = rows of the probed lists x %d x the bytes of a "
                "stored element (4; 2 at fp16 and bf16) / the sweep point's seconds (probe and merge on the host "
                "included: a lower bound on the scan's rate; L2 hits between queries of a batch can take it above "
                "the copy bandwidth)\n" % a.d)
        f.write("- whole run %.0f s; files: %s%s\n\n" % (total, os.path.basename(csv_path),
                                                        ", " + os.path.basename(png) if png else ""))
        f.write("\n".join(tables) + "\n")
        f.write("Commands, in order:\n\n```\n" + "\n".join(commands) + "\n```\n\n")
        f.write("Checks:\n\n" + "".join("- %s\n" % l for _, l in checks.items) + "\n" + line + "\n")
    log("")
    log("\n".join(tables))
    log("wrote %s, %s%s" % (md_path, csv_path, ", " + png if png else ""))


if __name__ == "__main__":
    sys.exit(main())
