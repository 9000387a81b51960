#!/usr/bin/env python3
"""CPU comparison of `vecanneal compress` with scikit-learn KMeans (lloyd) and faiss-cpu k-means.

Every tool reads the same HDF5 file (h5py for the peers), runs the same iteration budget B with the
same number of threads (2 by default) in the same process run, and is scored the same way:

  ms per iteration  time of the B iterations (initialisation excluded) / iterations run; with
                --repeats R, the minimum over R runs (other work on a shared machine only adds time)
      sklearn   KMeans(algorithm="lloyd", n_init=1, tol=0, init=<k-means++ array>) fitted twice,
                with max_iter=B and max_iter=1: (t_B - t_1) / (n_iter_B - n_iter_1). The k-means++
                seeding is sklearn.cluster.kmeans_plusplus (what KMeans(init="k-means++") runs),
                timed on its own and passed in as an array, so no fit pays for it; the difference
                of the two fits also cancels the per-fit overhead (input copy, centring, the final
                E-step).
      faiss     faiss.Kmeans(niter=B, max_points_per_centroid large enough that faiss trains on
                every row, not its default 256 x k sample); iteration_stats[i]["time"] is the
                cumulative time since training started, so (time[B-1] - time[0]) / (B - 1)
                excludes the initialisation.
      vecanneal "ms_per_iteration" of the --metrics JSON (the annealing loop only: init, the final
                assign pass and the index write are outside it). Run with --set max_iter=B
                --set tol=0 --set min_changes=0, as 1 rank x 2 threads
                (mpirun -n 1 --bind-to none ... --set threads=2) and 2 ranks x 1 thread.
  final energy      mean squared distance of a row to its nearest final centroid (sklearn inertia_/n,
                vecanneal final_energy, faiss computed here). Every tool's final centroids are also
                re-scored here with one float64 numpy evaluator ("energy_check"), vecanneal's from the
                /anchors of the index it wrote.

Two initialisations per case:
  own     each tool's default seeding (sklearn k-means++, faiss random rows, vecanneal kmeans||)
  shared  every tool starts from the same sklearn k-means++ centroids (vecanneal through
          --set init=file:..., faiss through train(init_centroids=...)), so any energy difference
          comes from the iterations alone.

--memory runs vecanneal on a few sizes and compares the peak RSS per rank from the metrics JSON
with the formula of docs/memory.md (baseline constant measured by a tiny run).

Checks (bench/verify.py's Checks; the last line says passed or FAILED, exit 1 on a failure):
  lloyd     vecanneal's plain-Lloyd run reaches scikit-learn's energy from the same start, to
            LLOYD_RTOL relative (the same algorithm: a wrong step, count or score shows here)
  energy    every vecanneal configuration's energy is at most ENERGY_FACTOR x scikit-learn's
            (measured: 0.992 to 1.001); energies are deterministic, so timing noise cannot fail it
  repeats   each vecanneal configuration's final energy is the same in every repeat
  memory    every --memory check run within MEMORY_TOL_PCT of the docs/memory.md prediction
            (measured: under 1%)
"""
import argparse
import csv
import datetime
import hashlib
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import time

import h5py
import numpy as np

import verify

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLOYD_RTOL = 1e-4
ENERGY_FACTOR = 1.01
MEMORY_TOL_PCT = 5.0


# --------------------------------------------------------------------------------------------------
# host and provenance
def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown-cpu"


def slug(s):
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


def load1():
    return os.getloadavg()[0]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def git(*args):
    try:
        return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def mpi_env():
    env = dict(os.environ)
    if os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


# --------------------------------------------------------------------------------------------------
# scoring
def energy_np(X, C, chunk=8192):
    """Mean over rows of the squared distance to the nearest row of C, in float64, chunked."""
    C64 = np.asarray(C, dtype=np.float64)
    cn = np.einsum("ij,ij->i", C64, C64)
    total = 0.0
    for s in range(0, X.shape[0], chunk):
        x = np.asarray(X[s:s + chunk], dtype=np.float64)
        d2 = np.einsum("ij,ij->i", x, x)[:, None] - 2.0 * (x @ C64.T) + cn[None, :]
        total += float(np.maximum(d2.min(axis=1), 0.0).sum())
    return total / X.shape[0]


# --------------------------------------------------------------------------------------------------
# vecanneal
def run_vecanneal(a, data, k, ranks, threads, budget, tag, init_file=None, extra=(), quiet=True):
    work = a.work_dir
    out = os.path.join(work, f"va_{tag}.h5")
    metrics = os.path.join(work, f"va_{tag}.json")
    for p in (out, metrics):
        if os.path.exists(p):
            os.unlink(p)
    cmd = ["mpirun", "-n", str(ranks)]
    if threads > 1:
        cmd += ["--bind-to", "none"]
    cmd += [a.vecanneal, "compress", "--input", f"{data}:/train", "--anchors", str(k), "--out", out,
            "--metrics", metrics, "--set", f"max_iter={budget}", "--set", "tol=0", "--set", "min_changes=0",
            "--set", f"threads={threads}", "--set", "progress_every=0", "--set", f"seed={a.seed}"]
    if init_file:
        cmd += ["--set", f"init=file:{init_file}:/anchors"]
    for kv in extra:
        cmd += ["--set", kv]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=mpi_env())
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"vecanneal failed ({p.returncode}): {shlex.join(cmd)}")
    if not quiet:
        sys.stdout.write(p.stdout)
    with open(metrics) as f:
        m = json.load(f)
    m["_wall"] = wall
    m["_cmd"] = shlex.join(cmd)
    m["_index"] = out
    return m


def read_anchors(index_path):
    with h5py.File(index_path, "r") as f:
        return f["/anchors"][:]


# --------------------------------------------------------------------------------------------------
# the comparison
def run_case(a, n, d, k, data, rows_out):
    from threadpoolctl import threadpool_limits
    import faiss
    from sklearn.cluster import KMeans, kmeans_plusplus

    B, T, R = a.budget, a.threads, a.repeats
    case = f"{n}x{d}x{k}"
    print(f"\n=== case n={n} d={d} k={k}: {data}, budget {B} iterations, {T} threads each, {R} repeat(s)", flush=True)
    with h5py.File(data, "r") as f:
        X = f["/train"][:]
    assert X.shape == (n, d) and X.dtype == np.float32, (X.shape, X.dtype)
    X = np.ascontiguousarray(X)

    # One entry per (tool, config, init): a list of timed runs, each a dict with at least
    # ms, energy, iters, load (load1 before), plus whatever the final row needs.
    runs = {}

    def record(key, **kw):
        runs.setdefault(key, []).append(kw)
        print(f"    rep {len(runs[key])}: {key[0]:9s} {key[1]:13s} init={key[2]:8s} {kw['ms']:9.2f} ms/iter"
              f"  energy {kw['energy']:.6f}  load1 {kw['load']:.2f}", flush=True)

    with threadpool_limits(limits=T):
        faiss.omp_set_num_threads(T)
        # ---- shared k-means++ seeding (also sklearn's own init), saved for vecanneal and faiss; kept
        #      between runs (same data file, k, seed and scikit-learn version) since it is deterministic
        import sklearn
        init_file = os.path.join(a.work_dir, f"kmeanspp_{case}_seed{a.seed}.h5")
        key = f"{os.path.abspath(data)} {os.path.getmtime(data):.0f} k={k} seed={a.seed} sklearn={sklearn.__version__}"
        C0 = None
        if os.path.exists(init_file):
            with h5py.File(init_file, "r") as f:
                if f.attrs.get("key", "") == key:
                    C0, t_pp = f["/anchors"][:], float(f.attrs["seconds"])
        if C0 is None:
            t0 = time.perf_counter()
            C0, _ = kmeans_plusplus(X, k, random_state=a.seed)
            t_pp = time.perf_counter() - t0
            with h5py.File(init_file, "w") as f:
                f["/anchors"] = C0.astype(np.float32)
                f.attrs["key"] = key
                f.attrs["seconds"] = t_pp
            print(f"  sklearn kmeans_plusplus: {t_pp:.2f} s (excluded from ms/iteration; kept in {init_file})", flush=True)
        else:
            print(f"  sklearn kmeans_plusplus: reused {init_file} (took {t_pp:.2f} s when made)", flush=True)
        C0 = np.ascontiguousarray(C0, dtype=np.float32)

        va_cfgs = [("own", 1, T), ("own", T, 1), ("shared", 1, T), ("shared", T, 1)]
        for rep in range(R):
            # ---- scikit-learn: fit(max_iter=B) - fit(max_iter=1), both from the k-means++ array
            lb = load1()
            fits = {}
            for mi in (1, B):
                t0 = time.perf_counter()
                km = KMeans(n_clusters=k, init=C0, n_init=1, max_iter=mi, tol=0.0, algorithm="lloyd",
                            random_state=a.seed).fit(X)
                fits[mi] = (time.perf_counter() - t0, km.n_iter_, km)
            (t1, it1, _), (tB, itB, kmB) = fits[1], fits[B]
            record(("sklearn", f"{T}thr", "kmeans++"), ms=1e3 * (tB - t1) / max(itB - it1, 1),
                   energy=float(kmB.inertia_) / n, iters=itB, load=lb, total=tB, init_s=t_pp, centers=kmB.cluster_centers_,
                   note=f"fit(max_iter={B}) {tB:.3f}s - fit(max_iter=1) {t1:.3f}s over {itB - it1} iterations")

            # ---- faiss: own (random rows) and shared init
            for init_kind in ("own", "shared"):
                lb = load1()
                km = faiss.Kmeans(d, k, niter=B, seed=a.seed, verbose=False,
                                  max_points_per_centroid=(n + k - 1) // k + 1)  # train on every row
                t0 = time.perf_counter()
                km.train(X, init_centroids=C0 if init_kind == "shared" else None)
                tot = time.perf_counter() - t0
                st = km.iteration_stats
                ms = 1e3 * (st[-1]["time"] - st[0]["time"]) / max(len(st) - 1, 1)
                record(("faiss", f"{T}thr", "random" if init_kind == "own" else "kmeans++"), ms=ms,
                       energy=energy_np(X, km.centroids), iters=len(st), load=lb, total=tot,
                       init_s=st[0]["time"] - ms / 1e3, centers=None,
                       note=f"faiss {faiss.__version__}; per-iteration from iteration_stats time[{len(st) - 1}]-time[0]")

            # ---- vecanneal: 1 rank x T threads and T ranks x 1 thread, own and shared init,
            #      and (check) plain Lloyd = eta 1 (lr 2, T0 1, no cooling) from the shared init
            cfgs = va_cfgs + ([("lloyd", 1, T)] if a.lloyd_check else [])
            for init_kind, ranks, thr in cfgs:
                lb = load1()
                extra = ("lr=2", "T0=1", "cooling_rate=0") if init_kind == "lloyd" else ()
                m = run_vecanneal(a, data, k, ranks, thr, B, f"{case}_{ranks}r{thr}t_{init_kind}",
                                  init_file=None if init_kind == "own" else init_file, extra=extra)
                ph = m["phases_seconds"]
                note = ("phases max s: " + ", ".join(f"{p} {ph[p]['max']:.3f}" for p in
                                                     ("init", "assign", "reduce", "allreduce", "update", "maintenance"))
                        + f"; loop {m['loop_seconds']:.3f}s; wall {m['_wall']:.2f}s"
                        + f"; peak_rss max {m['peak_rss_bytes']['max'] / 2**20:.1f} MiB")
                if init_kind == "lloyd":
                    note = "plain Lloyd (--set lr=2 --set T0=1 --set cooling_rate=0), eta = 1; " + note
                if int(m["iterations"]) != B:
                    note += f"; WARNING: stopped after {m['iterations']} iterations, not {B}"
                cfg = f"{ranks}r x {thr}t" + (" lloyd" if init_kind == "lloyd" else "")
                record(("vecanneal", cfg, "kmeans||" if init_kind == "own" else "kmeans++"), ms=m["ms_per_iteration"],
                       energy=m["final_energy"], iters=int(m["iterations"]), load=lb, total=m["_wall"],
                       init_s=ph["init"]["max"], centers=read_anchors(m["_index"]), note=note, init_kind=init_kind)

    # ---- one row per (tool, config, init): the fastest repeat; energies must agree between repeats
    va, fa, sk = {}, {}, None
    for key, rs in runs.items():
        best = min(rs, key=lambda r: r["ms"])
        energies = [r["energy"] for r in rs]
        spread = (max(energies) - min(energies)) / min(energies)
        note = best["note"]
        if key[0] == "vecanneal" and R > 1:
            a.checks.add((spread == 0, f"final energy of the {R} repeats: " + ", ".join(f"{e:.17g}" for e in energies)),
                         f"repeats, {case} vecanneal {key[1]} init {key[2]}")
        if R > 1:
            all_ms = ", ".join(f"{x['ms']:.2f}" for x in rs)
            note += f"; ms/iter of the {R} repeats: {all_ms}"
            if spread > 1e-6:
                note += f"; energy differs between repeats by {spread:.2e} (relative)"
        check = energy_np(X, best["centers"]) if best["centers"] is not None else best["energy"]
        tool, cfg, init = key
        r = dict(case=case, n=n, d=d, k=k, budget=B, tool=tool, config=cfg, init=init, iterations=best["iters"],
                 ms_per_iteration=round(best["ms"], 3), ms_per_iteration_median=round(float(np.median([x["ms"] for x in rs])), 3),
                 final_energy=best["energy"], energy_check=check,
                 init_seconds=round(best["init_s"], 3), total_seconds=round(best["total"], 3),
                 load1_min=round(min(x["load"] for x in rs), 2), load1_max=round(max(x["load"] for x in rs), 2), notes=note)
        rows_out.append(r)
        print(f"  {tool:9s} {cfg:13s} init={init:8s} iters={r['iterations']:3d} {r['ms_per_iteration']:9.2f} ms/iter"
              f" (median {r['ms_per_iteration_median']:.2f})  energy {r['final_energy']:.6f} (check {check:.6f})", flush=True)
        # ratios use the one float64 evaluator for every tool (sklearn's inertia_ is summed in float32)
        if tool == "sklearn":
            sk = (best["ms"], check)
        elif tool == "faiss":
            fa["own" if init == "random" else "shared"] = (best["ms"], check)
        else:
            va[(best["init_kind"], 1 if cfg.startswith("1r") else T)] = (best["ms"], check, None)
    sk_by_init = {"own": sk, "shared": sk}  # sklearn's own init is the shared one

    # ---- ratios
    print(f"\n  ratios for {case} (time = fastest ms/iteration, energy = energy check; < 1 favours vecanneal)")
    print(f"  {'init':7s} {'vecanneal':15s} {'t/sklearn':>10s} {'t/faiss':>9s} {'E/sklearn':>10s} {'E/faiss':>9s}")
    ratios = []
    combos = [(i, r) for i in ("own", "shared") for r in (1, T)] + ([("lloyd", 1)] if ("lloyd", 1) in va else [])
    for init_kind, ranks in combos:
        vms, ve, _ = va[(init_kind, ranks)]
        sms, se = sk_by_init["shared" if init_kind == "lloyd" else init_kind]
        fms, fe = fa["shared" if init_kind == "lloyd" else init_kind]
        cfg = f"{ranks}r x {T if ranks == 1 else 1}t" + (" lloyd" if init_kind == "lloyd" else "")
        r = dict(case=case, init=init_kind, vecanneal=cfg, time_vs_sklearn=vms / sms, time_vs_faiss=vms / fms,
                 energy_vs_sklearn=ve / se, energy_vs_faiss=ve / fe)
        ratios.append(r)
        print(f"  {init_kind:7s} {cfg:15s} {r['time_vs_sklearn']:10.3f} {r['time_vs_faiss']:9.3f}"
              f" {r['energy_vs_sklearn']:10.5f} {r['energy_vs_faiss']:9.5f}")
    for r in ratios:
        e = r["energy_vs_sklearn"]
        if r["init"] == "lloyd":
            a.checks.add((abs(e - 1) <= LLOYD_RTOL, f"energy = {e:.7f} x scikit-learn's from the same start (|1 - ratio| <= {LLOYD_RTOL:g})"),
                         f"lloyd, {case} {r['vecanneal']}")
        else:
            a.checks.add((e <= ENERGY_FACTOR, f"energy = {e:.5f} x scikit-learn's (at most {ENERGY_FACTOR:g})"),
                         f"energy, {case} init {r['init']} {r['vecanneal']}")
    return ratios


# --------------------------------------------------------------------------------------------------
# memory model (docs/memory.md)
def tile_rows_auto(k):
    """cpu_assign.c: rows per assign tile, auto = clamp(131072 / k, 64, 4096)."""
    return min(max((512 * 1024 // 4) // max(k, 1), 64), 4096)


def k_cap(k):
    """anneal.c ensure_capacity: per-anchor arrays grow in powers of two from 16."""
    cap = 16
    while cap < k:
        cap *= 2
    return cap


def predict_terms(n_local, d, k, threads, init="kmeans||", oversample=1.0, rounds=3, dtype_bytes=4,
                  read_chunk_mb=64.0, robust="none", trim_bins=256, kmeans_share=1.0):
    """The data-dependent bytes of one rank's peak RSS (docs/memory.md); the baseline B0 is not included.

    peak = B0 + X + anchors + max(read phase, init phase, loop phase); returns (total, breakdown)."""
    thr = max(1, min(threads, -(-n_local // tile_rows_auto(k))))  # va_assign_cpu: no more threads than tiles
    X = n_local * d * 4
    kc = k_cap(k)
    anchors = kc * (4 * d + 4 + 8 * d + 8 * (d + 3) + 4 + 4 + 8 + 8 + 4 + 4)  # A anorm vel acc rmax* rarg rms bins
    if robust == "trim":
        anchors += kc * trim_bins * 8
    tiles_k = thr * tile_rows_auto(k) * k * 4
    partials = (threads - 1) * k * (d + 3) * 8 if threads > 1 and n_local >= 4096 else 0
    loop = n_local * 12 + tiles_k + partials  # assign + prev + r; tile buffers; per-thread statistics
    if init == "kmeans||":
        # kmeans_share: the share of the rows kmeans|| reads (kmeans_sample k / n, at most 1); a sample's rows
        # are copied into blocks of at most 8 MiB for each pass
        m = 1 + int(round(oversample * k * rounds))  # expected candidates
        s = int(n_local * kmeans_share)
        block = min(s, max(1024, (8 << 20) // (4 * d))) * 4 * d if kmeans_share < 1 else 0
        tiles_m = max(1, min(threads, -(-s // tile_rows_auto(m)))) * tile_rows_auto(m) * m * 4
        candidates = m * (4 * d + 8 + 4 + 8 + 8 + 4)
        init_b = n_local * 4 + s * 12 + block + candidates + max(tiles_m, tiles_k) + k * (d + 1) * 8
    elif init == "random":
        init_b = n_local * 4 + k * 16 * 2  # prev; the rank's k smallest (key, row) pairs and their gather
    elif init == "farthest":
        init_b = n_local * 16  # prev + running minimum + one pass's distances and labels
    else:
        init_b = n_local * 4  # file: prev only
    read = 0
    if dtype_bytes != 4:
        chunk_rows = max(1, int(read_chunk_mb * 2**20) // (d * dtype_bytes))
        read = min(chunk_rows, n_local) * d * dtype_bytes
    phases = {"read": read, "init": init_b, "loop": loop}
    top = max(phases, key=phases.get)
    breakdown = {"X": X, "anchors": anchors, f"{top} phase": phases[top]}
    return X + anchors + phases[top], breakdown


def run_memory(a, datasets, mem_rows, f16=None):
    """datasets: {n: path} (d = mem_d); runs vecanneal for a few iterations and compares the peak RSS per
    rank of its metrics JSON with predict_terms + a baseline B0 measured by the smallest run."""
    d, k = a.mem_d, a.mem_k
    T = a.threads
    print(f"\n=== memory: d={d} k={k}, peak RSS per rank (metrics JSON) vs docs/memory.md", flush=True)
    tiny_n = min(datasets)
    big_n = max(datasets)
    base = {}
    runs = []
    for ranks, thr in ((1, T), (T, 1)):
        for n in sorted(datasets):
            runs.append((n, ranks, thr, "kmeans||", datasets[n], 4))
            if ranks == 1 and n == big_n:
                runs += [(n, 1, thr, "random", datasets[n], 4), (n, 1, thr, "farthest", datasets[n], 4)]
        if ranks == 1 and f16:
            runs.append((f16[0], 1, thr, "kmeans||", f16[1], 2))
    for n, ranks, thr, init, path, es in runs:
        extra = [] if init == "kmeans||" else [f"init={init}"]
        tag = f"mem_{n}_{ranks}r{thr}t_{init.strip('|')}_{8 * es}bit"
        m = run_vecanneal(a, path, k, ranks, thr, a.mem_iters, tag, extra=extra)
        cfg = m["config"]
        n_local = [n // ranks + (1 if r < n % ranks else 0) for r in range(ranks)]
        per_rank = m["peak_rss_bytes"]["per_rank"]
        share = min(1.0, int(cfg["kmeans_sample"]) * k / n) if int(cfg["kmeans_sample"]) > 0 else 1.0
        preds = [predict_terms(nl, d, k, thr, init=init, oversample=float(cfg["kmeans_oversample"]),
                               rounds=int(cfg["kmeans_rounds"]), dtype_bytes=es,
                               read_chunk_mb=float(cfg["read_chunk_mb"]), kmeans_share=share)[0] for nl in n_local]
        is_base = n == tiny_n and init == "kmeans||" and es == 4
        if is_base:
            base[ranks] = max(meas - p for meas, p in zip(per_rank, preds))
        b0 = base[ranks]
        # the rank with the largest measured peak, against its own prediction
        i = max(range(ranks), key=lambda r: per_rank[r])
        pred = b0 + preds[i]
        r = dict(n=n, d=d, k=k, dtype=f"float{8 * es}", ranks=ranks, threads=thr, init=init, n_local=n_local[i],
                 baseline_MiB=round(b0 / 2**20, 2), terms_MiB=round(preds[i] / 2**20, 2),
                 predicted_MiB=round(pred / 2**20, 2), measured_MiB=round(per_rank[i] / 2**20, 2),
                 per_rank_MiB=" ".join(f"{x / 2**20:.2f}" for x in per_rank),
                 error_pct=round(100.0 * (per_rank[i] - pred) / per_rank[i], 2),
                 role="baseline B0 (tiny run)" if is_base else "check")
        mem_rows.append(r)
        print(f"  n={n:7d} float{8 * es} {ranks}r x {thr}t init={init:8s} n_local={r['n_local']:7d}: B0 {r['baseline_MiB']:6.2f}"
              f" + terms {r['terms_MiB']:7.2f} = predicted {r['predicted_MiB']:7.2f} MiB, measured {r['measured_MiB']:7.2f}"
              f" MiB (per rank {r['per_rank_MiB']}), error {r['error_pct']:+.2f}%  [{r['role']}]", flush=True)
    for r in mem_rows:
        if r["role"] == "check":
            a.checks.add((abs(r["error_pct"]) <= MEMORY_TOL_PCT, f"measured {r['measured_MiB']} MiB against predicted "
                          f"{r['predicted_MiB']} MiB: {r['error_pct']:+.2f}% (at most {MEMORY_TOL_PCT:g}%)"),
                         f"memory, n {r['n']} {r['dtype']} {r['ranks']}r x {r['threads']}t init {r['init']}")
    return mem_rows


# --------------------------------------------------------------------------------------------------
def parse_cases(s):
    out = []
    for c in s.split(","):
        n, d, k = (int(v) for v in c.lower().split("x"))
        out.append((n, d, k))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vecanneal", default=os.path.join(REPO, "build", "vecanneal"))
    ap.add_argument("--data-dir", default=os.path.join(REPO, "build", "bench-data"),
                    help="where the datasets are (made by run_cpu_compare.sh)")
    ap.add_argument("--work-dir", default=None, help="indexes, metrics and init files [DATA_DIR/work]")
    ap.add_argument("--cases", default="100000x128x256,200000x128x1024", help="NxDxK,...")
    ap.add_argument("--dataset", action="append", default=[],
                    help="N:PATH of the HDF5 file (dataset /train) for a case; default DATA_DIR/gauss_nN_dD.h5")
    ap.add_argument("--budget", type=int, default=20, help="iterations for every tool")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=2,
                    help="timed runs per tool and configuration; ms/iteration is the minimum over them")
    ap.add_argument("--no-compare", action="store_true", help="skip the comparison (e.g. only --memory)")
    ap.add_argument("--no-lloyd-check", dest="lloyd_check", action="store_false",
                    help="skip the extra vecanneal run with eta = 1 (plain Lloyd) from the shared init")
    ap.add_argument("--memory", action="store_true", help="also check peak RSS against docs/memory.md")
    ap.add_argument("--mem-sizes", default="16384,200000,400000,800000",
                    help="n values for --memory (the smallest is the baseline run)")
    ap.add_argument("--mem-d", type=int, default=128)
    ap.add_argument("--mem-k", type=int, default=256)
    ap.add_argument("--mem-iters", type=int, default=2)
    ap.add_argument("--mem-f16", default="", help="N:PATH of a float16 dataset for the read-staging check")
    ap.add_argument("--results-dir", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--tag", default="", help="extra word in the result file names")
    ap.add_argument("--vecanneal-rev", default="",
                    help="which source the binary was built from (default: this checkout's git HEAD)")
    ap.add_argument("--gen-info", default="", help="how the datasets were generated (recorded in the .md)")
    a = ap.parse_args()
    a.checks = verify.Checks()
    a.work_dir = a.work_dir or os.path.join(a.data_dir, "work")
    os.makedirs(a.work_dir, exist_ok=True)
    os.makedirs(a.results_dir, exist_ok=True)
    if not os.access(a.vecanneal, os.X_OK):
        raise SystemExit(f"no vecanneal binary at {a.vecanneal} (run bench/run_cpu_compare.sh, which builds it)")

    paths = {}
    for spec in a.dataset:
        n, p = spec.split(":", 1)
        paths[int(n)] = p

    def data_for(n, d):
        return paths.get(n, os.path.join(a.data_dir, f"gauss_n{n}_d{d}.h5"))

    t_start = time.time()
    stamp = datetime.datetime.now().strftime("%Y-%m-%d")
    cpu = cpu_model()
    # bench/results/DATE_HARDWARE_BENCHMARK: one current result per benchmark and hardware
    base = f"{stamp}_{slug(cpu)}-{os.cpu_count()}core_cpu-compare" + (f"-{slug(a.tag)}" if a.tag else "")
    vec_sha = sha256(a.vecanneal)
    rev = a.vecanneal_rev or (git("rev-parse", "--short", "HEAD")
                              + (" + uncommitted changes in src/" if git("status", "--short", "src") else ""))
    print(f"host: {cpu}, {os.cpu_count()} CPUs, load1 {load1():.2f}; vecanneal {a.vecanneal} sha256 {vec_sha}; "
          f"source {rev}")

    rows, ratios, mem_rows = [], [], []
    if not a.no_compare:
        for n, d, k in parse_cases(a.cases):
            p = data_for(n, d)
            if not os.path.exists(p):
                raise SystemExit(f"missing dataset {p} (run bench/run_cpu_compare.sh)")
            ratios += run_case(a, n, d, k, p, rows)
    if a.memory:
        sizes = [int(s) for s in a.mem_sizes.split(",")]
        ds = {n: data_for(n, a.mem_d) for n in sizes}
        f16 = None
        if a.mem_f16:
            n16, p16 = a.mem_f16.split(":", 1)
            f16 = (int(n16), p16)
        for p in list(ds.values()) + ([f16[1]] if f16 else []):
            if not os.path.exists(p):
                raise SystemExit(f"missing dataset {p} (run bench/run_cpu_compare.sh)")
        run_memory(a, ds, mem_rows, f16)
    if sha256(a.vecanneal) != vec_sha:
        print("WARNING: the vecanneal binary changed during the run; results mix two builds")
    elapsed = time.time() - t_start

    # ---- files
    written = []
    if rows:
        path = os.path.join(a.results_dir, base + ".csv")
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
        written.append(path)
        path = os.path.join(a.results_dir, base + "-ratios.csv")
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(ratios[0].keys()))
            w.writeheader()
            for r in ratios:
                w.writerow({kk: (round(v, 5) if isinstance(v, float) else v) for kk, v in r.items()})
        written.append(path)
    if mem_rows:
        path = os.path.join(a.results_dir, base + "-memory.csv")
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(mem_rows[0].keys()))
            w.writeheader()
            w.writerows(mem_rows)
        written.append(path)
    if written:
        import sklearn
        import faiss
        from threadpoolctl import threadpool_info
        md = os.path.join(a.results_dir, base + ".md")

        def cell(v):  # table cells: "kmeans||" would end the cell
            return str(v).replace("|", "\\|")

        with open(md, "w") as f:
            f.write(f"# CPU comparison run {stamp}\n\n")
            f.write(f"- command: `{shlex.join([sys.executable] + sys.argv)}`\n")
            if os.environ.get("VA_BENCH_OUTER_CMD"):
                f.write(f"- launched by: `{os.environ['VA_BENCH_OUTER_CMD']}`\n")
            if a.gen_info:
                f.write(f"- datasets: {a.gen_info}\n")
            f.write(f"- host: {cpu}, {os.cpu_count()} CPUs, {platform.platform()}\n")
            f.write(f"- vecanneal: {a.vecanneal} (sha256 {vec_sha}), built from {rev}\n")
            f.write(f"- python {platform.python_version()}, numpy {np.__version__}, scikit-learn {sklearn.__version__},"
                    f" faiss-cpu {faiss.__version__}, h5py {h5py.__version__}\n")
            libs = sorted({f"{i.get('internal_api')} {i.get('version')} ({i.get('architecture', '')})"
                           for i in threadpool_info() if i.get("user_api") == "blas"})
            f.write(f"- BLAS in the Python process: {'; '.join(libs)}\n")
            f.write(f"- budget {a.budget} iterations, {a.threads} threads per tool, seed {a.seed}; wall {elapsed:.0f} s\n")
            f.write(f"- files: {', '.join(os.path.basename(p) for p in written)}\n")
            if rows:
                f.write("\n| case | tool | config | init | iters | ms/iter (min) | ms/iter (median) | final energy | energy check | init s | load1 min..max |\n")
                f.write("|---|---|---|---|---:|---:|---:|---:|---:|---:|---|\n")
                for r in rows:
                    f.write(f"| {r['case']} | {r['tool']} | {r['config']} | {cell(r['init'])} | {r['iterations']} | "
                            f"{r['ms_per_iteration']:.2f} | {r['ms_per_iteration_median']:.2f} | {r['final_energy']:.6f} | "
                            f"{r['energy_check']:.6f} | {r['init_seconds']} | {r['load1_min']}..{r['load1_max']} |\n")
                f.write("\n| case | init | vecanneal | time / sklearn | time / faiss | energy / sklearn | energy / faiss |\n")
                f.write("|---|---|---|---:|---:|---:|---:|\n")
                for r in ratios:
                    f.write(f"| {r['case']} | {r['init']} | {r['vecanneal']} | {r['time_vs_sklearn']:.3f} | "
                            f"{r['time_vs_faiss']:.3f} | {r['energy_vs_sklearn']:.5f} | {r['energy_vs_faiss']:.5f} |\n")
                f.write("\nvecanneal phase split (from its metrics JSON) and sklearn's fit times:\n\n")
                for r in rows:
                    if r["notes"]:
                        f.write(f"- {r['case']} {r['tool']} {r['config']} init {r['init']}: {r['notes']}\n")
            if mem_rows:
                f.write(f"\nMemory (d {a.mem_d}, k {a.mem_k}, {a.mem_iters} iterations; peak RSS per rank; "
                        "predicted = B0 + terms of docs/memory.md, B0 from the tiny run of the same ranks x threads):\n\n")
                f.write("| n | input | ranks x threads | init | n_local | B0 MiB | terms MiB | predicted MiB | measured MiB | per rank MiB | error | role |\n")
                f.write("|---:|---|---|---|---:|---:|---:|---:|---:|---|---:|---|\n")
                for r in mem_rows:
                    f.write(f"| {r['n']} | {r['dtype']} | {r['ranks']} x {r['threads']} | {cell(r['init'])} | {r['n_local']} | "
                            f"{r['baseline_MiB']} | {r['terms_MiB']} | {r['predicted_MiB']} | {r['measured_MiB']} | "
                            f"{r['per_rank_MiB']} | {r['error_pct']:+.2f}% | {r['role']} |\n")
            f.write("\nChecks:\n\n" + "".join(f"- {line}\n" for _, line in a.checks.items))
        written.append(md)
    print(f"\ndone in {elapsed:.0f} s; wrote " + ", ".join(os.path.relpath(p, REPO) for p in written))
    return a.checks.verdict()


if __name__ == "__main__":
    sys.exit(main())
