#!/usr/bin/env python3
"""codes-cpu: residual PQ codes (`compress --codes pq`, `search` on the codes) against faiss-cpu
IndexIVFPQ at the same nlist, M and 8 bits, on the same rows and cores: training time, reconstruction
error, recall@10 and queries per second at nprobe 1 to 64, without and with re-ranking; on generated
rows or (--text) on text embeddings made with `vecanneal embed`; and, with faiss alone, what an OPQ
rotation before the split buys.

Steps (all in one run, on one machine):
  1. data     `vecanneal gen --n N --d D --clusters C --spread S --seed SEED --test Q` (gen's /neighbors:
              the exact 100 nearest /train rows of every /test row); kept between runs, under the name
              search_cpu.py gives the same data. --text: search_cpu.py's text data (text_data: WordNet's
              glosses embedded by `vecanneal embed`, /train N rows, /test Q held-out rows, a cosine
              index) and ground truth (exact_truth: `search --exact --k 100`), the same kept files as
              `search-cpu --text`
  2. vecanneal `vecanneal compress --anchors K --codes pq --pq-m M` (defaults otherwise), 1 rank x THREADS
              threads, timed end to end (the index is rebuilt every run); its /pq attributes give the
              error (relative to the rows' variance) and the codebooks' train and encode seconds
  3. faiss    IndexIVFPQ(IndexFlatL2(d), d, K, M, 8), faiss's defaults (its k-means on a 256 x K sample
              for the coarse level, 2^8 x 256 residuals per codebook), train and add on the same rows,
              timed; its error = sum ||x - reconstruct(x)||^2 / n / variance over every row
              (make_direct_map + reconstruct_n), the variance = mean squared distance to the rows' mean.
              A cosine index (--text): the rows and queries scaled to unit length (vecanneal's frame),
              IndexIVFPQ(IndexFlatIP(d), d, K, M, 8, METRIC_INNER_PRODUCT) with spherical k-means, as
              search-cpu --text builds its IndexIVFFlat
  4. search   vecanneal `search --scan codes --nprobe LIST` (twice: the runs must agree) and with
              `--rerank R`; QPS per nprobe = search's own figure (its batches' wall time), best run.
              faiss: per nprobe, index.search of all queries (k 10), and a re-rank done in numpy: its
              best R (index.search with k R) measured again on the rows by the exact squared distance,
              the 10 best kept (the re-rank's time counted in its QPS); best of REPEATS.
  5. OPQ      faiss alone: OPQMatrix(d, M) (faiss's defaults: 50 iterations on at most 65536 rows)
              trained on the rows, then the IndexIVFPQ of step 3 trained and filled on the rotated rows
              (the same rows, so the same samples), both timed; its error = sum ||A x - reconstruct||^2
              (= ||x - A^T reconstruct||^2: A is orthonormal); search as step 4 on the rotated queries
              (rotated before the clock starts), re-ranked on the rotated rows (the same distances).
Ratios: faiss's time / ours (training), our error / faiss's, vecanneal QPS / faiss QPS per nprobe;
OPQ: its error / plain faiss's, its recall against plain faiss's per nprobe, its training time.

Checks (bench/verify.py's Checks; the last line says passed or FAILED, exit 1 on a failure):
  finished    every gen, embed, compress and search run exited 0 and wrote its outputs; the index usable
  error       our decode() of every row (python/vecanneal_index.py) against the rows gives the /pq
              error attribute within 1e-3 relative (the attribute measures what the codes hold)
  variance    the /pq variance attribute equals numpy's variance of the rows (in vecanneal's frame)
              within 1e-3 relative: the errors of both tools are shares of the same variance
  repeat      two `search --scan codes` runs give the same recall at every nprobe and the same result
              (/neighbors and /distances bitwise)
  monotone    each recall curve (vecanneal, faiss, faiss with OPQ; on codes and re-ranked) does not fall
              by more than MONOTONE_TOL from one nprobe to the next (approximate distances: a larger
              candidate set may push a true neighbour out of the top 10, by near-ties only)
  rerank      with re-ranking, recall at least that without (within MONOTONE_TOL), for every index
  opq         the trained rotation is orthonormal, max |A A^T - I| <= ORTHO_TOL (its error in the
              rotated frame is the rows' error, its re-rank distances the rows' distances)
"""
import argparse
import csv
import datetime
import os
import platform
import shlex
import sys
import time

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
import verify  # noqa: E402
from search_cpu import (TOPK, add_text_args, cpu_name, exact_truth, log, mpirun, read_sweep,  # noqa: E402
                        recall_at, sh, short_cpu, text_data, text_notes)

MONOTONE_TOL = 0.005
ERROR_RTOL = 1e-3
ORTHO_TOL = 1e-4


def variance(x):
    """Mean squared distance of the rows to their mean, in double, by blocks."""
    mean = x.mean(axis=0, dtype=np.float64)
    return sum(float(((x[i:i + 65536] - mean) ** 2).sum()) for i in range(0, len(x), 65536)) / len(x)


def squared_error(x, approx_rows):
    """sum over rows of ||x - approx||^2 (double), approx_rows(lo, hi) giving rows lo..hi-1."""
    total = 0.0
    for lo in range(0, len(x), 65536):
        hi = min(lo + 65536, len(x))
        total += float(((x[lo:hi].astype(np.float64) - approx_rows(lo, hi)) ** 2).sum())
    return total


def faiss_ivfpq(faiss, d, k, m, metric):
    """An untrained IndexIVFPQ of k lists and m codes of 8 bits; cosine: inner product on unit rows, its
    coarse k-means spherical (as search-cpu --text's IndexIVFFlat)."""
    if metric == "cosine":
        ivf = faiss.IndexIVFPQ(faiss.IndexFlatIP(d), d, k, m, 8, faiss.METRIC_INNER_PRODUCT)
        ivf.cp.spherical = True
        return ivf
    return faiss.IndexIVFPQ(faiss.IndexFlatL2(d), d, k, m, 8)


def faiss_fill(ivf, X, times, name):
    """Trains ivf on X and adds X, timed (times[name + " train"], [name + " add"]); returns its error
    sum ||x - reconstruct(x)||^2 over every row."""
    t = time.perf_counter()
    ivf.train(X)
    times[name + " train"] = time.perf_counter() - t
    t = time.perf_counter()
    ivf.add(X)
    times[name + " add"] = time.perf_counter() - t
    ivf.make_direct_map()
    return squared_error(X, lambda lo, hi: ivf.reconstruct_n(lo, hi - lo).astype(np.float64))


def faiss_sweep(ivf, X, Qs, truth, nprobes, rerank, repeats, name):
    """{nprobe: (recall, qps, recall reranked, qps reranked)}: faiss's codes, then its best `rerank`
    measured again on the rows X by the exact squared distance (numpy), best of repeats."""
    out = {}
    q2 = (Qs.astype(np.float64) ** 2).sum(1)
    for p in nprobes:
        ivf.nprobe = p
        best, best_r = 0.0, 0.0
        for _ in range(repeats):
            t = time.perf_counter()
            _, I = ivf.search(Qs, TOPK)
            best = max(best, len(Qs) / (time.perf_counter() - t))
            t = time.perf_counter()
            _, C = ivf.search(Qs, rerank)
            cand = np.where(C < 0, 0, C)
            rows = X[cand].astype(np.float64)  # q x R x d
            dist = q2[:, None] - 2 * np.einsum("qd,qrd->qr", Qs.astype(np.float64), rows) + (rows ** 2).sum(2)
            dist[C < 0] = np.inf
            top = np.argsort(dist, axis=1, kind="stable")[:, :TOPK]
            Ir = np.take_along_axis(C, top, axis=1)
            best_r = max(best_r, len(Qs) / (time.perf_counter() - t))
        out[p] = (recall_at(I, truth), best, recall_at(Ir, truth), best_r)
        log("%s nprobe %3d: recall %.4f, %.0f q/s; reranked %d: recall %.4f, %.0f q/s" % (name, p, out[p][0], best, rerank, out[p][2],
                                                                                        best_r))
    return out


def monotone(checks, name, nprobes, recs):
    falls = [(a, b) for a, b in zip(recs, recs[1:]) if b < a - MONOTONE_TOL]
    checks.add((not falls, "%s: recall over nprobe %s = %s (no fall beyond %g)" % (name, nprobes, ["%.4f" % r for r in recs],
                                                                                 MONOTONE_TOL)), "monotone")


def main():
    cores = os.cpu_count() or 1
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--text", action="store_true", help="text embeddings (vecanneal embed, search-cpu --text's) instead of generated rows")
    ap.add_argument("--n", type=int, help="rows [1000000; --text 50000]")
    ap.add_argument("--d", type=int, default=128, help="dimensions of generated rows [128]")
    ap.add_argument("--q", type=int, help="queries [10000; --text 2000]")
    ap.add_argument("--k", type=int, help="anchors = faiss nlist [1024; --text 256]")
    ap.add_argument("--m", type=int, help="PQ subspaces M (8 bits each) [16; --text 48: 8 columns a subspace, as 128 / 16]; faiss needs "
                    "d divisible by M")
    ap.add_argument("--nprobe", default="1,2,4,8,16,32,64", help="nprobe sweep [1,2,4,8,16,32,64]")
    ap.add_argument("--rerank", type=int, default=100, help="candidates re-ranked on the rows [100]")
    ap.add_argument("--threads", type=int, default=cores, help="cores given to each tool (vecanneal: 1 rank x THREADS) [%d]" % cores)
    ap.add_argument("--repeats", type=int, default=3, help="faiss searches per nprobe; the best QPS counts [3]")
    ap.add_argument("--clusters", type=int, default=1000, help="gen --clusters [1000]")
    ap.add_argument("--spread", type=float, default=1.5, help="gen --spread [1.5]")
    ap.add_argument("--seed", type=int, default=7, help="gen --seed; --text: the seed of the corpus's order [7]")
    add_text_args(ap)
    ap.add_argument("--vecanneal", default=os.environ.get("VECANNEAL", ""), help="binary [$VECANNEAL, build-cpu/ or build/vecanneal]")
    ap.add_argument("--data-dir", default=os.environ.get("VA_BENCH_DATA", os.path.join(REPO, "build", "bench-data")),
                    help="data (kept between runs) and the index [$VA_BENCH_DATA or build/bench-data]")
    ap.add_argument("--out-dir", default=os.path.join(REPO, "bench", "results"), help="result files [bench/results]")
    ap.add_argument("--tag", default="", help="suffix of the result names")
    ap.add_argument("--note", default="", help="a line for the result file (the machine's state)")
    a = ap.parse_args()
    a.n = a.n or (50000 if a.text else 1000000)
    a.q = a.q or (2000 if a.text else 10000)
    a.k = a.k or (256 if a.text else 1024)
    a.m = a.m or (48 if a.text else 16)
    if not a.vecanneal:
        for cand in ("build-cpu/vecanneal", "build/vecanneal"):
            if os.access(os.path.join(REPO, cand), os.X_OK):
                a.vecanneal = os.path.join(REPO, cand)
                break
    checks = verify.Checks()
    if not a.vecanneal or not os.access(a.vecanneal, os.X_OK):
        checks.add((False, "no vecanneal binary (--vecanneal or $VECANNEAL)"), "finished")
        return checks.verdict()
    import faiss
    import vecanneal_index as vi

    nprobes = sorted({min(int(x), a.k) for x in a.nprobe.split(",") if x})
    plist = ",".join(str(p) for p in nprobes)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cpu = cpu_name()
    stem = "%s_%s-%dcore_codes-cpu%s%s" % (datetime.date.today().isoformat(), short_cpu(cpu), cores, "-text" if a.text else "",
                                           ("-" + a.tag) if a.tag else "")
    os.makedirs(a.data_dir, exist_ok=True)
    os.makedirs(a.out_dir, exist_ok=True)
    t_start = time.perf_counter()
    load_start = os.getloadavg()
    log("codes-cpu: %s, %d rows, K %d, M %d x 8 bits, %d queries, nprobe %s, rerank %d, %d threads per tool; %s, %d CPUs, "
        "load %.2f %.2f %.2f" % ("text (%s)" % (a.corpus or "WordNet glosses") if a.text else "generated, d %d" % a.d, a.n, a.k, a.m, a.q,
                                 nprobes, a.rerank, a.threads, cpu, cores, *load_start))
    times = {}

    # 1. data (kept: same name, same data)
    if a.text:
        data = text_data(a, checks, env, times)
        if data is None:
            return checks.verdict()
    else:
        data = os.path.join(a.data_dir, "search_n%d_d%d_q%d_c%d_s%g_seed%d.h5" % (a.n, a.d, a.q, a.clusters, a.spread, a.seed))
        if not os.path.exists(data):
            ok, times["gen"] = sh(mpirun(a.threads) + [a.vecanneal, "gen", "--out", data, "--n", str(a.n), "--d", str(a.d), "--clusters",
                                                      str(a.clusters), "--spread", str(a.spread), "--seed", str(a.seed), "--test",
                                                      str(a.q)], checks, "gen", env)
            if not ok:
                return checks.verdict()
        else:
            log("data: %s (kept)" % data)
    with h5py.File(data, "r") as f:
        X = np.ascontiguousarray(f["/train"][()], dtype=np.float32)
        Qs = np.ascontiguousarray(f["/test"][()], dtype=np.float32)
    d = X.shape[1]
    if d % a.m:
        checks.add((False, "d %d is not a multiple of M %d: faiss's IndexIVFPQ needs equal subspaces" % (d, a.m)), "finished")
        return checks.verdict()

    # 2. vecanneal compress with codes (rebuilt: its time is a result)
    index = os.path.join(a.data_dir, os.path.basename(data)[:-3] + "_k%d_pq%d.index.h5" % (a.k, a.m))
    if os.path.exists(index):
        os.remove(index)
    ok, times["vecanneal compress"] = sh(mpirun(1) + [a.vecanneal, "compress", "--input", data + ":/train", "--anchors", str(a.k), "--codes",
                                                     "pq", "--pq-m", str(a.m), "--out", index, "--set", "threads=%d" % a.threads,
                                                     "--set", "progress_every=0"], checks, "compress", env)
    if not ok:
        return checks.verdict()
    checks.attempt(verify.run, index, None, a.n, label="finished")
    with vi.open_index(index) as ix:
        pq, K, metric, ours_seconds = ix.pq, ix.k, ix.metric, ix.attrs["seconds"]
        if metric == "cosine":  # vecanneal's frame and faiss's rows: unit rows and queries
            faiss.normalize_L2(X)
            faiss.normalize_L2(Qs)
        ours_err = pq["error"]
        err = squared_error(X, lambda lo, hi: ix.decode(slice(lo, hi)).astype(np.float64)) / a.n / pq["variance"]
    truth_file = exact_truth(a, data, index, checks, env, times) if a.text else data
    if truth_file is None:
        return checks.verdict()
    with h5py.File(truth_file, "r") as f:
        truth = f["/neighbors"][()]
    checks.add((X.shape[0] == a.n and Qs.shape == (a.q, d) and truth.shape[0] == a.q and truth.shape[1] >= TOPK,
                "%s: train %s, test %s; %s: neighbors %s" % (os.path.basename(data), X.shape, Qs.shape, os.path.basename(truth_file),
                                                             truth.shape)), "finished")
    var = variance(X)
    checks.add((abs(var - pq["variance"]) <= ERROR_RTOL * var, "variance of the rows (%s frame): numpy %.6g, the /pq attribute %.6g "
                "(within %g relative)" % (metric, var, pq["variance"], ERROR_RTOL)), "variance")
    checks.add((abs(err - ours_err) <= ERROR_RTOL * ours_err, "decode() of every row: error %.6g of the variance, the /pq attribute %.6g "
                "(within %g relative)" % (err, ours_err, ERROR_RTOL)), "error")
    log("vecanneal: K %d, %s, error %.5f of the variance (anchors alone %.5f), codebooks %.1f s, encoding %.1f s, job %.1f s"
        % (K, metric, ours_err, pq["anchor_error"], pq["train_seconds"], pq["encode_seconds"], ours_seconds))

    # 3. faiss IndexIVFPQ, its defaults, on the same rows and cores
    faiss.omp_set_num_threads(a.threads)
    ivf = faiss_ivfpq(faiss, d, a.k, a.m, metric)
    faiss_err = faiss_fill(ivf, X, times, "faiss") / a.n / var
    log("faiss: train %.1f s, add %.1f s, error %.5f of the variance" % (times["faiss train"], times["faiss add"], faiss_err))

    # 4. search: vecanneal on the codes (twice), and re-ranked; faiss the same
    work = os.path.join(a.data_dir, "codes-work")
    os.makedirs(work, exist_ok=True)
    va, results = {}, {}
    for run_name, extra in (("codes", []), ("codes again", []), ("rerank", ["--rerank", str(a.rerank)])):
        csvp, res = (os.path.join(work, "%s.%s" % (run_name.replace(" ", "_"), ext)) for ext in ("csv", "h5"))
        for p in (csvp, res):
            if os.path.exists(p):
                os.remove(p)
        ok, _ = sh(mpirun(1) + [a.vecanneal, "search", "--index", index, "--queries", data + ":/test", "--k", str(TOPK), "--scan", "codes",
                                "--nprobe", plist, "--ground-truth", truth_file + ":/neighbors", "--threads", str(a.threads), "--out", res,
                                "--sweep-csv", csvp] + extra, checks, "search " + run_name, env)
        if not ok:
            return checks.verdict()
        va[run_name] = read_sweep(csvp)
        with h5py.File(res, "r") as f:
            results[run_name] = (f["/neighbors"][()], f["/distances"][()])
    same = all(va["codes"][p][0] == va["codes again"][p][0] for p in nprobes) and all(
        np.array_equal(x, y) for x, y in zip(results["codes"], results["codes again"]))
    checks.add((same, "search --scan codes twice: the same recall at every nprobe and the same /neighbors and /distances"), "repeat")
    for p in nprobes:
        va["codes"][p] = (va["codes"][p][0], max(va["codes"][p][1], va["codes again"][p][1]))
    fz = faiss_sweep(ivf, X, Qs, truth, nprobes, a.rerank, a.repeats, "faiss")
    del ivf

    # 5. OPQ, faiss alone: the rotation, then the same IndexIVFPQ on the rotated rows
    opq = faiss.OPQMatrix(d, a.m)
    t = time.perf_counter()
    opq.train(X)
    times["opq rotation"] = time.perf_counter() - t
    A = faiss.vector_to_array(opq.A).reshape(d, d).astype(np.float64)
    ortho = float(np.abs(A @ A.T - np.eye(d)).max())
    checks.add((ortho <= ORTHO_TOL, "OPQ rotation orthonormal: max |A A^T - I| = %.2g (at most %g)" % (ortho, ORTHO_TOL)), "opq")
    Xr, Qr = opq.apply(X), opq.apply(Qs)
    del X
    ivf_opq = faiss_ivfpq(faiss, d, a.k, a.m, metric)
    opq_err = faiss_fill(ivf_opq, Xr, times, "faiss opq") / a.n / var
    log("faiss OPQ: rotation %.1f s, train %.1f s, add %.1f s, error %.5f of the variance" % (
        times["opq rotation"], times["faiss opq train"], times["faiss opq add"], opq_err))
    fo = faiss_sweep(ivf_opq, Xr, Qr, truth, nprobes, a.rerank, a.repeats, "faiss OPQ")

    curves = (("vecanneal codes", [va["codes"][p][0] for p in nprobes], "vecanneal rerank", [va["rerank"][p][0] for p in nprobes]),
              ("faiss codes", [fz[p][0] for p in nprobes], "faiss rerank", [fz[p][2] for p in nprobes]),
              ("faiss OPQ codes", [fo[p][0] for p in nprobes], "faiss OPQ rerank", [fo[p][2] for p in nprobes]))
    for name, plain, rname, rer in curves:
        monotone(checks, name, nprobes, plain)
        monotone(checks, "%s %d" % (rname, a.rerank), nprobes, rer)
    for name, plain, _, rer in curves:
        low = [p for p, x, y in zip(nprobes, plain, rer) if y < x - MONOTONE_TOL]
        checks.add((not low, "%s: recall reranked >= recall on codes (within %g) at every nprobe%s" % (
            name.rsplit(" ", 1)[0], MONOTONE_TOL, "" if not low else "; not at %s" % low)), "rerank")
    total = time.perf_counter() - t_start
    checks.add((True, "the run finished in %.0f s" % total), "finished")

    # tables and ratios
    faiss_train = times["faiss train"] + times["faiss add"]
    opq_train = times["opq rotation"] + times["faiss opq train"] + times["faiss opq add"]
    summary = [
        "| figure | vecanneal | faiss IndexIVFPQ | ratio |", "|---|---:|---:|---:|",
        "| training (s): vecanneal compress end to end; faiss train + add | %.1f | %.1f | faiss / ours %.2f |"
        % (times["vecanneal compress"], faiss_train, faiss_train / times["vecanneal compress"]),
        "| reconstruction error (of the variance) | %.5f | %.5f | ours / faiss %.3f |" % (ours_err, faiss_err, ours_err / faiss_err),
        "| bytes per vector | %g | %d + 8 (id) | - |" % (pq["bytes_per_vector"], a.m),
    ]
    opq_summary = [
        "| figure | faiss IndexIVFPQ | faiss OPQMatrix + IndexIVFPQ | ratio |", "|---|---:|---:|---:|",
        "| training (s): rotation; IndexIVFPQ train + add | -; %.1f | %.1f; %.1f | OPQ / plain %.2f |"
        % (faiss_train, times["opq rotation"], times["faiss opq train"] + times["faiss opq add"], opq_train / faiss_train),
        "| reconstruction error (of the variance) | %.5f | %.5f | OPQ / plain %.3f |" % (faiss_err, opq_err, opq_err / faiss_err),
    ]
    rows = []
    for p in nprobes:
        rows.append({"nprobe": p, "va_recall": va["codes"][p][0], "va_qps": va["codes"][p][1], "faiss_recall": fz[p][0],
                     "faiss_qps": fz[p][1], "va_rerank_recall": va["rerank"][p][0], "va_rerank_qps": va["rerank"][p][1],
                     "faiss_rerank_recall": fz[p][2], "faiss_rerank_qps": fz[p][3],
                     "qps_ratio": va["codes"][p][1] / fz[p][1], "rerank_qps_ratio": va["rerank"][p][1] / fz[p][3],
                     "faiss_opq_recall": fo[p][0], "faiss_opq_qps": fo[p][1], "faiss_opq_rerank_recall": fo[p][2],
                     "faiss_opq_rerank_qps": fo[p][3]})
    csv_path = os.path.join(a.out_dir, stem + ".csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        for row in rows:
            w.writerow({k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()})
    head = ["nprobe", "vecanneal recall", "vecanneal q/s", "faiss recall", "faiss q/s", "q/s ratio",
            "vecanneal rerank recall", "vecanneal rerank q/s", "faiss rerank recall", "faiss rerank q/s", "rerank q/s ratio"]
    table = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for r in rows:
        table.append("| %d | %.4f | %.0f | %.4f | %.0f | %.2f | %.4f | %.0f | %.4f | %.0f | %.2f |" % (
            r["nprobe"], r["va_recall"], r["va_qps"], r["faiss_recall"], r["faiss_qps"], r["qps_ratio"], r["va_rerank_recall"],
            r["va_rerank_qps"], r["faiss_rerank_recall"], r["faiss_rerank_qps"], r["rerank_qps_ratio"]))
    head = ["nprobe", "faiss recall", "faiss OPQ recall", "OPQ - plain", "faiss rerank recall", "faiss OPQ rerank recall", "OPQ - plain",
            "faiss q/s", "faiss OPQ q/s"]
    opq_table = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for r in rows:
        opq_table.append("| %d | %.4f | %.4f | %+.4f | %.4f | %.4f | %+.4f | %.0f | %.0f |" % (
            r["nprobe"], r["faiss_recall"], r["faiss_opq_recall"], r["faiss_opq_recall"] - r["faiss_recall"], r["faiss_rerank_recall"],
            r["faiss_opq_rerank_recall"], r["faiss_opq_rerank_recall"] - r["faiss_rerank_recall"], r["faiss_qps"], r["faiss_opq_qps"]))
    load_end = os.getloadavg()
    cmd = "bash bench/run.sh codes-cpu " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    md_path = os.path.join(a.out_dir, stem + ".md")
    rc_line, _ = verify.verdict_line(checks.items)
    with open(md_path, "w") as f:
        f.write("# codes-cpu: vecanneal PQ codes against faiss-cpu IndexIVFPQ\n\n")
        f.write("- command: `%s`\n" % cmd)
        f.write("- host: %s, %d CPUs, %s; load average at the start %.2f %.2f %.2f, at the end %.2f %.2f %.2f\n"
                % (cpu, cores, platform.platform(), *load_start, *load_end))
        if a.note:
            f.write("- note: %s\n" % a.note)
        if a.text:
            f.write(text_notes(a, data, d, metric, truth_file))
        else:
            f.write("- data: `vecanneal gen --n %d --d %d --clusters %d --spread %g --seed %d --test %d` (float32; gen's exact /neighbors)\n"
                    % (a.n, a.d, a.clusters, a.spread, a.seed, a.q))
        f.write("- vecanneal: %s; `compress --anchors %d --codes pq --pq-m %d` (defaults otherwise), 1 rank x %d threads: K %d, %s, "
                "codebooks %.1f s, encoding %.1f s, job %.1f s; `search --scan codes --k 10 --nprobe %s` (twice) and `--rerank %d`, 1 rank "
                "x %d threads, search's own q/s\n" % (a.vecanneal, a.k, a.m, a.threads, K, metric, pq["train_seconds"], pq["encode_seconds"],
                                                      ours_seconds, plist, a.rerank, a.threads))
        f.write("- faiss-cpu %s: IndexIVFPQ(%s(%d), %d, %d, %d, 8%s), defaults, omp_set_num_threads(%d); train %.1f s, add "
                "%.1f s; search of all %d queries, best of %d; re-rank of its best %d on the rows in numpy (float64), counted in its "
                "q/s; numpy %s, python %s\n" % (
                    faiss.__version__, "IndexFlatIP" if metric == "cosine" else "IndexFlatL2", d, d, a.k, a.m,
                    ", METRIC_INNER_PRODUCT; spherical k-means, unit rows and queries" if metric == "cosine" else "", a.threads,
                    times["faiss train"], times["faiss add"], a.q, a.repeats, a.rerank, np.__version__, platform.python_version()))
        f.write("- faiss OPQ: OPQMatrix(%d, %d) (defaults: %d iterations, at most %d training rows) trained on the rows in %.1f s, then "
                "the same IndexIVFPQ trained and filled on the rotated rows (train %.1f s, add %.1f s); searched as above on the rotated "
                "queries\n" % (d, a.m, opq.niter, opq.max_train_points, times["opq rotation"], times["faiss opq train"],
                               times["faiss opq add"]))
        f.write("- whole run %.0f s; file: %s\n\n" % (total, os.path.basename(csv_path)))
        f.write("\n".join(summary) + "\n\n" + "\n".join(table) + "\n\n")
        f.write("OPQ (faiss alone: a rotation before the split, same nlist, M, bits and training rows):\n\n")
        f.write("\n".join(opq_summary) + "\n\n" + "\n".join(opq_table) + "\n\n")
        f.write("Checks:\n\n" + "".join("- %s\n" % line for _, line in checks.items) + "\n" + rc_line + "\n")
    log("")
    log("\n".join(summary))
    log("")
    log("\n".join(table))
    log("")
    log("\n".join(opq_summary))
    log("")
    log("\n".join(opq_table))
    log("wrote %s, %s" % (md_path, csv_path))
    return checks.verdict()


if __name__ == "__main__":
    sys.exit(main())
