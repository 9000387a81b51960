#!/usr/bin/env python3
"""codes-gpu: residual PQ codes on the GPU: the encoding rate of `compress --codes pq --backend cuda` on 1 and
2 GPUs against the same compress on the CPU, and `search --backend cuda --scan codes` (alone and with
--rerank) against the float-row IVF search on the same GPU, at 1M x 128 with 1024 anchors, M 16 and 32
(8 bits), 10000 queries and k 10. Run through bench/codes_gpu.sh (`bash bench/run.sh codes-gpu`).

Per size N (with K anchors), in one run on one machine:
  1. data      `vecanneal gen --n N --d D --clusters C --spread S --seed 7 --test Q --neighbors 10`: gen's
               exact /neighbors are the ground truth of every recall (the file search_gpu.py makes and
               keeps under the same name)
  2. compress  for each M of --pq-m, rebuilt every run (its times are results): `compress --anchors K
               --codes pq --pq-m M --backend cuda --set max_iter=I`, 1 rank (1 GPU, all cores' threads)
               and, when 2 devices are visible, 2 ranks (2 GPUs, half the threads each); the same compress
               with `--backend cpu`, 1 rank x all host threads, is the reference peer. Each index's /pq
               attributes give train_seconds, encode_seconds, error and anchor_error
  3. search    on the 1-GPU index, 1 rank: `search --backend cuda --scan codes`, `--scan codes --rerank R`
               and `--scan rows` (the float rows), each `--nprobe 1,2,...,64 --k 10 --ground-truth
               DATA:/neighbors --sweep-csv --metrics`, REPEATS runs each (best q/s per nprobe); with 2
               devices the codes sweep again as `mpirun -n 2` (one GPU per rank)
  4. peers     on the same index at one nprobe (--cross-nprobe, 16): `--scan codes` and `--scan codes
               --rerank R` with --backend cuda and with --backend cpu (1 rank x all host threads)
Figures: encoding rows/s = n / encode_seconds (the /pq attribute: the wall time of the pass that encodes
every row, its residuals, codes and error sums, on rank 0's clock); q/s = search's own figure, the queries
over the wall time of their batches (probe, scan and merge; reads and list upload excluded), the best of the
runs; recall@10 against gen's /neighbors. Ratios: encoding rows/s of cuda 1 GPU / cpu, and 2 GPUs / 1 GPU;
q/s of codes / rows per nprobe, and codes on 2 GPUs / 1 GPU.

Checks (bench/verify.py's Checks; the last line says passed or FAILED, exit 1 on a failure):
  finished   every gen, compress and search run exited 0 within --step-timeout; every index usable
  engine     every search's metrics and sweep CSV name the engine asked for (--backend), and the metrics the
             scan (codes or rows) and the --rerank asked for
  codes      /pq/codes of the 1-GPU and 2-GPU compress bitwise identical (and so their /anchors,
             /assignments, /pq/codebooks); the CPU compress's against the 1-GPU one likewise where their
             /anchors and /assignments are bitwise equal (codes are residuals against the anchors: where the
             anchors differ, the codes cannot match, and the report says so instead of checking)
  peers      search on codes (and with --rerank) with --backend cuda: /neighbors and /distances bitwise those
             of --backend cpu at --cross-nprobe
  ranks      2 GPUs against 1: the same recall at every nprobe, the last nprobe's /neighbors and
             /distances bitwise identical
  repeats    every run of a configuration gives the same recall at every nprobe
  monotone   recall over nprobe does not fall: rows strictly; codes and codes + rerank by at most 0.002
             below an earlier nprobe's (a wrong candidate from a new list can push a true one out)
  rerank     recall with --rerank at least recall on codes alone at every nprobe (its candidates hold the
             codes' top k, measured exactly)

--backend cpu runs every step on the CPU (the "GPU" runs too, so the peers compare the CPU with itself) at
a small --sizes: a check of the script without a GPU; its figures mean nothing."""
import argparse
import csv
import json
import os
import platform
import shlex
import sys
import time

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import verify  # noqa: E402
from search_cpu import cpu_name, log, sh  # noqa: E402
from search_gpu import best_of, gpu_setup, rises, same_results  # noqa: E402

TOPK = 10
MONOTONE_SLACK = 0.002  # codes: how far recall may dip below an earlier nprobe's
PQ_FIGURES = ("train_seconds", "encode_seconds", "error", "anchor_error", "bytes_per_vector")
SCANS = (("codes", "on codes"), ("rerank", "on codes, re-ranked"), ("rows", "on the float32 rows"))


def pq_figures(index):
    """The /pq attributes of PQ_FIGURES and the root attribute seconds (the whole job), as floats."""
    with h5py.File(index, "r") as f:
        out = {k: float(f["/pq"].attrs[k]) for k in PQ_FIGURES}
        out["job_seconds"] = float(f.attrs["seconds"])
    return out


def index_parts(index):
    with h5py.File(index, "r") as f:
        return {k: f[k][()] for k in ("/anchors", "/assignments", "/pq/codebooks", "/pq/codes")}


def bitwise(x, y):
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def compare_codes(a, b):
    """{dataset: bitwise equal} over /anchors, /assignments, /pq/codebooks, /pq/codes of two indexes, and
    the number of rows whose codes differ (-1 when the shapes differ)."""
    pa, pb = index_parts(a), index_parts(b)
    same = {k: bitwise(pa[k], pb[k]) for k in pa}
    ca, cb = pa["/pq/codes"], pb["/pq/codes"]
    rows = int((ca != cb).any(1).sum()) if ca.shape == cb.shape else -1
    return same, rows


def codes_words(a, b, same, rows):
    what = "%s vs %s: " % (os.path.basename(a), os.path.basename(b))
    return what + ", ".join("%s %s" % (k, "bitwise equal" if v else "differ") for k, v in same.items()) + (
        "" if same["/pq/codes"] else " (%s rows' codes differ)" % ("shapes differ:" if rows < 0 else rows))


def main():
    cores = os.cpu_count() or 1
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000000:1024", help="N:K pairs, rows and anchors [1000000:1024]")
    ap.add_argument("--d", type=int, default=128, help="dimensions [128]")
    ap.add_argument("--q", type=int, default=10000, help="queries [10000]")
    ap.add_argument("--pq-m", default="16,32", help="compress --pq-m values, 8 bits each [16,32]")
    ap.add_argument("--nprobe", default="1,2,4,8,16,32,64", help="nprobe sweep [1,2,4,8,16,32,64]")
    ap.add_argument("--rerank", type=int, default=100, help="search --rerank R [100]")
    ap.add_argument("--cross-nprobe", type=int, default=16, help="nprobe of the cuda-against-cpu searches [16]")
    ap.add_argument("--repeats", type=int, default=2, help="search runs per configuration; the best q/s counts [2]")
    ap.add_argument("--max-iter", type=int, default=20, help="compress --set max_iter [20]")
    ap.add_argument("--precision", default="",
                    help="compress --set precision on the GPU [compress's default, tf32]; fp32 gives anchors "
                    "that may equal the CPU's, so that their codes can be compared")
    ap.add_argument("--clusters", type=int, default=1000, help="gen --clusters [1000]")
    ap.add_argument("--spread", type=float, default=1.5, help="gen --spread [1.5], as search-gpu")
    ap.add_argument("--seed", type=int, default=7, help="gen --seed [7]")
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"],
                    help="compress and search backend of the GPU runs [cuda]; cpu: a check of the script without a GPU")
    ap.add_argument("--two", default="auto", choices=["auto", "yes", "no"],
                    help="the 2-rank runs [auto: with 2 GPUs visible (CUDA_VISIBLE_DEVICES, else nvidia-smi); "
                    "cpu: yes]")
    ap.add_argument("--step-timeout", type=int, default=300, help="seconds one step may run [300]")
    ap.add_argument("--vecanneal", default=os.environ.get("VECANNEAL", ""), help="the binary [$VECANNEAL]")
    ap.add_argument("--data-dir", default=os.environ.get("VA_BENCH_DATA", "/tmp/vecanneal-search-gpu"),
                    help="data, kept between runs, and the indexes [$VA_BENCH_DATA or /tmp/vecanneal-search-gpu]")
    ap.add_argument("--out-dir", default=os.environ.get("OUT", os.path.join(os.getcwd(), "out-gpu")),
                    help="results [$OUT or ./out-gpu]")
    ap.add_argument("--tag", default="", help="suffix of the result names")
    a = ap.parse_args()

    checks = verify.Checks()
    setup = gpu_setup(a, "codes-gpu", checks)
    if setup is None:
        return checks.verdict()
    gpus, two, env, work, stem, version = setup
    sizes = [tuple(int(v) for v in s.split(":")) for s in a.sizes.split(",") if s]
    pq_ms = [int(m) for m in a.pq_m.split(",") if m]
    nprobes = sorted({int(x) for x in a.nprobe.split(",") if x})
    commands, notes = [], []
    t_start = time.perf_counter()
    log("codes-gpu: sizes %s, d %d, M %s x 8 bits, %d queries, nprobe %s, rerank %d, backend %s, 2 ranks: %s; %s; "
        "%s, %d CPUs" % (sizes, a.d, pq_ms, a.q, nprobes, a.rerank, a.backend, "yes" if two else "no",
                         "; ".join(gpus) or "no GPU", cpu_name(), cores))

    def run(cmd, label, name):
        commands.append(" ".join(shlex.quote(c) for c in cmd))
        return sh(cmd, checks, label, env, timeout=a.step_timeout, log_path=os.path.join(work, name + ".log"))

    def mpi(ranks):
        return ["mpirun", "-n", str(ranks), "--bind-to", "none"]

    def search(ranks, backend, args, name, scan, rerank):
        """One search run; its metrics (dict), or None when it failed."""
        out = os.path.join(work, name + ".h5")
        csvp, mp = os.path.join(work, name + ".csv"), os.path.join(work, name + ".json")
        for p in (out, csvp, mp):
            if os.path.exists(p):
                os.remove(p)
        cmd = mpi(ranks) + [a.vecanneal, "search"] + args + [
            "--k", str(TOPK), "--scan", scan, "--backend", backend, "--threads", str(max(1, cores // ranks)),
            "--out", out, "--sweep-csv", csvp, "--metrics", mp] + (["--rerank", str(rerank)] if rerank else [])
        ok, _ = run(cmd, "search %s" % name, name)
        if not ok:
            return None
        with open(mp) as f:
            m = json.load(f)
        with open(csvp, newline="") as f:
            named = sorted({r["backend"] for r in csv.DictReader(f)})
        got = (m.get("backend"), m.get("scan"), m.get("rerank"))
        checks.add((got == (backend, scan, rerank) and named == [backend],
                    "%s: the metrics name backend %s, scan %s, rerank %s, the sweep CSV backend %s (asked for "
                    "--backend %s --scan %s%s)" % (name, got[0], got[1], got[2], " ".join(named), backend, scan,
                                                  " --rerank %d" % rerank if rerank else "")), "engine")
        return m

    def sweep(ranks, qargs, tag, what, rerank, ps):
        """REPEATS sweeps of one scan on `ranks` ranks with the repeats and monotone checks; returns best_of's
        points, or None when no run finished."""
        scan = "rows" if what == "rows" else "codes"
        runs = [search(ranks, a.backend, qargs, "sweep%d_%s_%s_%d" % (ranks, tag, what, r), scan, rerank)
                for r in range(a.repeats)]
        runs = [m for m in runs if m]
        if not runs:
            return None
        best, same = best_of([{pt["nprobe"]: pt for pt in m["sweep"]} for m in runs])
        label = "%s %s, %d rank%s" % (tag, what, ranks, "s" if ranks > 1 else "")
        checks.add((same, "%s: %d runs, the same recall at every nprobe" % (label, len(runs))), "repeats")
        rec = [best[p][0] for p in ps]
        slack = 0.0 if what == "rows" else MONOTONE_SLACK
        checks.add((rises(rec, slack), "%s: recall over nprobe %s = %s%s" % (
            label, ps, ["%.4f" % r for r in rec], " (dips of at most %g allowed)" % slack if slack else "")),
                   "monotone")
        return best

    cases = []
    for n, K in sizes:
        ps = sorted({min(p, K) for p in nprobes})  # search clamps a larger nprobe to K
        cross = min(a.cross_nprobe, K)
        log("\n== %d x %d, K %d ==" % (n, a.d, K))
        # 1. data (kept)
        data = os.path.join(a.data_dir, "search_n%d_d%d_q%d_c%d_s%g_seed%d.h5" % (
            n, a.d, a.q, a.clusters, a.spread, a.seed))
        times = {}
        if not os.path.exists(data):
            ok, times["gen"] = run(
                mpi(cores) + [a.vecanneal, "gen", "--out", data, "--n", str(n), "--d", str(a.d), "--clusters",
                              str(a.clusters), "--spread", str(a.spread), "--seed", str(a.seed), "--test", str(a.q),
                              "--neighbors", str(TOPK)], "gen n%d" % n, "gen_n%d" % n)
            if not ok:
                continue
        for M in pq_ms:
            tag = "n%d_k%d_m%d" % (n, K, M)
            case = {"n": n, "K": K, "M": M, "nprobes": ps, "times": times if M == pq_ms[0] else {}, "enc": {},
                    "sweeps": {}}
            cases.append(case)
            log("\n-- %s --" % tag)
            # 2. compress: 1 GPU, 2 GPUs, the CPU
            layouts = [("gpu1", a.backend, 1)] + ([("gpu2", a.backend, 2)] if two else []) + [("cpu", "cpu", 1)]
            index = {}
            for name, backend, ranks in layouts:
                path = os.path.join(a.data_dir, "codes_%s_%s_%s_it%d.index.h5" % (tag, name, backend, a.max_iter))
                if os.path.exists(path):
                    os.remove(path)
                prec = ["--set", "precision=%s" % a.precision] if a.precision and backend == "cuda" else []
                ok, case["times"]["compress %s %s" % (tag, name)] = run(
                    mpi(ranks) + [a.vecanneal, "compress", "--input", data + ":/train", "--anchors", str(K), "--codes",
                                  "pq", "--pq-m", str(M), "--out", path, "--backend", backend, "--set",
                                  "max_iter=%d" % a.max_iter, "--set", "threads=%d" % max(1, cores // ranks), "--set",
                                  "progress_every=0"] + prec,
                    "compress %s %s" % (tag, name), "compress_%s_%s" % (tag, name))
                if ok and checks.attempt(verify.run, path, None, n, label="finished"):
                    index[name] = path
                    case["enc"][name] = dict(pq_figures(path), backend=backend, ranks=ranks,
                                             threads=max(1, cores // ranks))
            if "gpu1" in index and "gpu2" in index:
                same, rows = compare_codes(index["gpu2"], index["gpu1"])
                checks.add((all(same.values()), codes_words(index["gpu2"], index["gpu1"], same, rows)
                            + " (2 GPUs against 1)"), "codes")
            if "gpu1" in index and "cpu" in index:
                same, rows = compare_codes(index["cpu"], index["gpu1"])
                words = codes_words(index["cpu"], index["gpu1"], same, rows) + " (cpu against %s, 1 rank)" % a.backend
                if same["/anchors"] and same["/assignments"]:
                    checks.add((all(same.values()), words), "codes")
                else:
                    notes.append("%s: codes not compared, the anchors' runs differ: %s" % (tag, words))
                    log("note: " + notes[-1])
            if "gpu1" not in index:
                continue
            # 3. search on the 1-GPU index: codes, codes + rerank, rows; codes on 2 GPUs
            qargs = ["--index", index["gpu1"], "--queries", data + ":/test", "--nprobe", ",".join(str(p) for p in ps),
                     "--ground-truth", data + ":/neighbors"]
            sw = case["sweeps"]
            for what, rerank in (("codes", 0), ("rerank", a.rerank), ("rows", 0)):
                sw[what] = sweep(1, qargs, tag, what, rerank, ps)
            if sw["codes"] and sw["rerank"]:
                low = [p for p in ps if sw["rerank"][p][0] < sw["codes"][p][0]]
                checks.add((not low, "%s: recall with --rerank %d >= recall on codes at every nprobe%s" % (
                    tag, a.rerank, "" if not low else "; not at %s" % low)), "rerank")
            if two and sw["codes"]:
                sw["codes2"] = sweep(2, qargs, tag, "codes", 0, ps)
                if sw["codes2"]:
                    checks.add(([sw["codes2"][p][0] for p in ps] == [sw["codes"][p][0] for p in ps],
                                "%s codes: 2 ranks and 1 rank give the same recall at every nprobe" % tag), "ranks")
                    checks.attempt(same_results, os.path.join(work, "sweep2_%s_codes_0.h5" % tag),
                                   os.path.join(work, "sweep1_%s_codes_0.h5" % tag), label="ranks")
            # 4. the same search on the CPU at one nprobe
            cargs = ["--index", index["gpu1"], "--queries", data + ":/test", "--nprobe", str(cross)]
            for what, rerank in (("codes", 0), ("rerank", a.rerank)):
                names = ["cross_%s_%s_%s" % (tag, what, role) for role in ("gpu", "cpu")]
                if all([search(1, b, cargs, nm, "codes", rerank) for b, nm in zip((a.backend, "cpu"), names)]):
                    checks.attempt(same_results, *[os.path.join(work, nm + ".h5") for nm in names], label="peers")
            for p in os.listdir(work):  # the results are compared: only logs, CSVs and metrics stay
                if p.endswith(".h5"):
                    os.remove(os.path.join(work, p))

    total = time.perf_counter() - t_start
    checks.add((True, "the run finished in %.0f s" % total), "finished")
    write_results(a, cases, gpus, version, commands, notes, checks, stem, two, total)
    return checks.verdict()


def write_results(a, cases, gpus, version, commands, notes, checks, stem, two, total):
    """The summary .md and the CSV: per size and M the encoding table and the search table."""
    rows, tables = [], []
    threads = os.cpu_count() or 1
    one, pair = ("1 GPU", "2 GPUs") if a.backend == "cuda" else ("1 rank", "2 ranks")
    for c in cases:
        size = {"n": c["n"], "anchors": c["K"], "d": a.d, "pq_m": c["M"]}
        lines = ["### %d x %d, %d anchors, M %d x 8 bits\n" % (c["n"], a.d, c["K"], c["M"])]
        enc = c["enc"]
        if enc:
            head = ["run", "ranks x threads", "codebooks s", "encoding s", "encoding rows/s", "error", "anchor error",
                    "bytes per vector", "compress job s"]
            t = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
            for name, words in (("gpu1", "%s %s" % (a.backend, one)), ("gpu2", "%s %s" % (a.backend, pair)),
                                ("cpu", "cpu (peer)")):
                e = enc.get(name)
                if not e:
                    continue
                rate = c["n"] / e["encode_seconds"] if e["encode_seconds"] > 0 else float("nan")
                e["rate"] = rate
                t.append("| %s | %d x %d | %.2f | %.3f | %.0f | %.5f | %.5f | %g | %.1f |" % (
                    words, e["ranks"], e["threads"], e["train_seconds"], e["encode_seconds"], rate, e["error"],
                    e["anchor_error"], e["bytes_per_vector"], e["job_seconds"]))
                rows.append(dict(size, kind="encode", run=words, ranks=e["ranks"], threads=e["threads"],
                                 train_seconds=e["train_seconds"], encode_seconds=e["encode_seconds"],
                                 encode_rows_per_second=rate, error=e["error"], anchor_error=e["anchor_error"],
                                 job_seconds=e["job_seconds"]))
            lines += ["#### encoding (compress --codes pq --pq-m %d)\n" % c["M"], "\n".join(t), ""]
            if "gpu1" in enc and "cpu" in enc:
                lines.append("- encoding rows/s, %s %s / cpu (1 rank x %d threads): %.2f" % (
                    a.backend, one, threads, enc["gpu1"]["rate"] / enc["cpu"]["rate"]))
            if "gpu1" in enc and "gpu2" in enc:
                lines.append("- encoding rows/s, %s / %s: %.2f" % (
                    pair, one, enc["gpu2"]["rate"] / enc["gpu1"]["rate"]))
            lines.append("")
        sw = c["sweeps"]
        if all(sw.get(w) for w, _ in SCANS):
            two_ok = bool(sw.get("codes2"))
            head = ["nprobe", "codes recall@10", "codes q/s", "codes + rerank recall@10", "codes + rerank q/s",
                    "rows recall@10", "rows q/s", "codes q/s / rows q/s"] + (
                ["codes %s q/s" % pair, "%s / %s" % (pair, one)] if two_ok else [])
            t = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
            for p in c["nprobes"]:
                (rc, qc, _), (rr, qr, _), (rw, qw, _) = (sw[w][p] for w, _ in SCANS)
                cells = [str(p), "%.4f" % rc, "%.0f" % qc, "%.4f" % rr, "%.0f" % qr, "%.4f" % rw, "%.0f" % qw,
                         "%.2f" % (qc / qw)]
                row = dict(size, kind="search", run="%s %s" % (a.backend, one), ranks=1, threads=threads, queries=a.q,
                           nprobe=p, codes_recall=rc, codes_qps=qc, rerank_recall=rr, rerank_qps=qr, rows_recall=rw,
                           rows_qps=qw, codes_over_rows=qc / qw)
                if two_ok:
                    q2 = sw["codes2"][p][1]
                    cells += ["%.0f" % q2, "%.2f" % (q2 / qc)]
                    row.update(codes_qps_2gpu=q2, scaling_2gpu=q2 / qc)
                t.append("| " + " | ".join(cells) + " |")
                rows.append(row)
            lines += ["#### search --backend %s, 1 rank (and 2 ranks on codes), --rerank %d\n" % (a.backend, a.rerank),
                      "\n".join(t), ""]
        lines.append("- step times (s): %s" % (", ".join("%s %.1f" % kv for kv in c["times"].items())
                                               or "data kept"))
        tables.append("\n".join(lines) + "\n")
    fields = ["n", "anchors", "d", "pq_m", "kind", "run", "ranks", "threads", "train_seconds", "encode_seconds",
              "encode_rows_per_second", "error", "anchor_error", "job_seconds", "queries", "nprobe", "codes_recall",
              "codes_qps", "rerank_recall", "rerank_qps", "rows_recall", "rows_qps", "codes_over_rows",
              "codes_qps_2gpu", "scaling_2gpu"]
    csv_path = os.path.join(a.out_dir, stem + ".csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()})
    line, _ = verify.verdict_line(checks.items)
    md_path = os.path.join(a.out_dir, stem + ".md")
    with open(md_path, "w") as f:
        f.write("# codes-gpu: residual PQ codes, encoded and searched on the GPU\n\n")
        f.write("- command: `bash bench/run.sh codes-gpu %s`\n" % " ".join(shlex.quote(x) for x in sys.argv[1:]))
        f.write("- GPUs (nvidia-smi: index, name, memory, driver): %s\n" % ("; ".join(gpus) or "none"))
        f.write("- host: %s, %d CPUs, %s, python %s, numpy %s, h5py %s\n" % (
            cpu_name(), threads, platform.platform(), platform.python_version(), np.__version__, h5py.__version__))
        f.write("- vecanneal: %s (%s)\n" % (a.vecanneal, version))
        f.write("- data: `vecanneal gen --d %d --clusters %d --spread %g --seed %d --test %d --neighbors %d` (float32; "
                "gen's exact /neighbors are the ground truth)\n" % (a.d, a.clusters, a.spread, a.seed, a.q, TOPK))
        f.write("- compress: `--anchors K --codes pq --pq-m M --set max_iter=%d%s`, `--backend %s` on 1 rank x %d "
                "threads (1 GPU)%s, and `--backend cpu` on 1 rank x %d threads (the peer)\n" % (
                    a.max_iter, " --set precision=%s" % a.precision if a.precision else "", a.backend, threads,
                    " and 2 ranks x %d threads (2 GPUs, one each)" % max(1, threads // 2) if two else "", threads))
        f.write("- search: `--backend %s --k %d --nprobe %s --ground-truth DATA:/neighbors`, `--scan codes`, "
                "`--scan codes --rerank %d` and `--scan rows` on the 1-GPU index, 1 rank x %d threads%s; best of %d "
                "runs per nprobe\n" % (a.backend, TOPK, ",".join(str(p) for p in a.nprobe.split(",") if p), a.rerank,
                                       threads, ", codes also on 2 ranks x %d threads (2 GPUs)" % max(1, threads // 2)
                                       if two else "", a.repeats))
        if a.backend == "cpu":
            f.write("- --backend cpu: every run on the CPU, the peers compare the CPU with itself; a check of the "
                    "script, its figures mean nothing\n")
        if not two:
            f.write("- 2 GPUs: not run (fewer than 2 devices visible, or --two no)\n")
        f.write("- encoding rows/s = n / encode_seconds, the /pq attribute: the wall time of the pass that encodes "
                "every row (residuals, codes, error sums and their allreduce), rank 0's clock; codebooks s = the "
                "/pq train_seconds; error and anchor error = the /pq attributes, shares of the rows' variance (anchors "
                "and codes; anchors alone); compress job s = the index's seconds\n")
        f.write("- q/s = search's queries_per_second: the queries over the wall time of their batches (probe, scan, "
                "merge; the slowest rank's; reads and the list upload excluded), the best of the runs; recall@10 "
                "against gen's /neighbors\n")
        f.write("- whole run %.0f s; file: %s\n\n" % (total, os.path.basename(csv_path)))
        f.write("\n".join(tables) + "\n")
        if notes:
            f.write("Notes:\n\n" + "".join("- %s\n" % n for n in notes) + "\n")
        f.write("Commands, in order:\n\n```\n" + "\n".join(commands) + "\n```\n\n")
        f.write("Checks:\n\n" + "".join("- %s\n" % l for _, l in checks.items) + "\n" + line + "\n")
    log("")
    log("\n".join(tables))
    for n in notes:
        log("note: " + n)
    log("wrote %s, %s" % (md_path, csv_path))


if __name__ == "__main__":
    sys.exit(main())
