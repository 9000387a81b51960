#!/usr/bin/env python3
"""search-cpu: `vecanneal search` (IVF over the index's anchors, CPU) against faiss-cpu IndexIVFFlat,
recall@10 and queries per second at nprobe 1 to 64, on generated data or (--text) on text embeddings
made with `vecanneal embed`, on the same cores.

Steps (all in one run, on one machine):
  1. data     `vecanneal gen --n N --d D --clusters C --spread S --test Q` (gen's /neighbors: the exact
              100 nearest /train rows of every /test row, computed with search --exact's kernel).
              --text: the corpus (default: every WordNet 3.0 gloss, /usr/share/wordnet/data.* of
              Debian's wordnet-base; or --corpus FILE, one text per line), its distinct lines in an
              order shuffled with --seed, the first N + Q of them embedded by `vecanneal embed` (CPU,
              one rank per core; the embedding is kept, so a rerun skips it); rows 0..N-1 are /train
              (with embed's distance = angular: a cosine index), rows N..N+Q-1 the queries /test
  2. index    `vecanneal compress --anchors K` (vecanneal's defaults otherwise)
     --text: ground truth = `vecanneal search --exact --k 100` of the queries (its /neighbors)
  3. vecanneal `vecanneal search --k 10 --nprobe LIST --ground-truth TRUTH:/neighbors --sweep-csv`, in
              every layout of ranks x threads = cores (2 cores: 2 ranks x 1 thread and 1 rank x 2
              threads), each run REPEATS times; QPS per nprobe = the best run (search's own figure:
              the batches' wall time, without the reads)
  4. faiss    (a) "faiss, our lists": python/vecanneal_index.py's to_faiss(index, rows), an
              IndexIVFFlat whose quantizer holds our anchors and whose lists are our assignments;
              (b) "faiss, own k-means": IndexIVFFlat(IndexFlatL2, d, K) trained by faiss (its
              k-means, default settings: 10 iterations on a 256 x K sample) and given the same rows.
              A cosine index (--text): to_faiss's METRIC_INNER_PRODUCT on unit rows, and for (b)
              IndexIVFFlat(IndexFlatIP, d, K, METRIC_INNER_PRODUCT) with spherical k-means
              (cp.spherical), both on unit rows and queries (faiss.normalize_L2).
              faiss.omp_set_num_threads(cores); per nprobe, index.search over all queries, best of
              REPEATS; recall@10 against the same /neighbors.
Ratios: vecanneal QPS / faiss QPS at the same nprobe, for each layout and each faiss index. The goal
(at recall@10 >= 0.9, at least faiss-cpu's QPS) is judged at the smallest nprobe where each tool
reaches recall 0.9 (its QPS there), and reported; it is not a verification failure.

Checks (bench/verify.py's Checks; the last line says passed or FAILED, exit 1 on a failure):
  full probe  vecanneal at nprobe = K (every list) on the first EXACT_Q queries: recall@10 >= 0.999
              against the ground truth (gen's /neighbors or search --exact's: search --exact finds
              them exactly; only near-tie orderings between the two passes could differ)
  monotone    vecanneal's recall does not decrease with nprobe (docs/search.md: the rows scanned at
              nprobe p are a subset of those at p + 1), in every layout
  layouts     the layouts give the same recall at every nprobe (the result is bitwise the same for
              any rank and thread count)
  same lists  faiss on our lists: recall within SAME_LISTS_TOL of vecanneal's at every nprobe (the
              same lists and probes; only near-ties in faiss's other distance formula differ)
  finished    every gen, embed, compress and search run exited 0 and wrote its outputs
"""
import argparse
import csv
import datetime
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
import verify  # noqa: E402

SAME_LISTS_TOL = 0.005
FULL_PROBE_MIN = 0.999
EXACT_Q = 500
GOAL_RECALL = 0.9
TOPK = 10


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def short_cpu(name):
    low = name.lower()
    for key in ("epyc", "xeon", "ryzen", "core"):
        if key in low:
            return key
    return low.split()[0] if low else "cpu"


def log(msg):
    print(msg, flush=True)


def sh(cmd, checks, label, env=None, timeout=None, log_path=None):
    """Runs cmd (a list); returns (ok, seconds). A failure, or a run past timeout seconds (its process
    group is killed), is a failed 'finished' check. log_path keeps the whole output."""
    log("$ " + " ".join(shlex.quote(c) for c in cmd))
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, process_group=0)
    try:
        out, _ = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # mpirun and its ranks: the group this call started
        out, _ = p.communicate()
        rc = None
    dt = time.perf_counter() - t
    if log_path:
        with open(log_path, "w") as f:
            f.write(out)
    tail = "\n".join(out.splitlines()[-6:])
    if tail:
        log("  " + tail.replace("\n", "\n  "))
    if rc != 0:
        how = "was killed at the %d s limit" % timeout if rc is None else "exited %d" % rc
        checks.add((False, "%s %s after %.1f s" % (label, how, dt)), "finished")
        return False, dt
    log("  (%.1f s)" % dt)
    return True, dt


def mpirun(ranks):
    base = ["mpirun", "-n", str(ranks)]
    if ranks == 1:
        base += ["--bind-to", "none"]  # one rank, several threads: not pinned to one core
    return base


def read_sweep(path):
    out = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            out[int(row["nprobe"])] = (float(row["recall"]), float(row["qps"]))
    return out


def recall_at(found, truth, k=TOPK):
    hits = 0
    for f, t in zip(found[:, :k], truth[:, :k]):
        hits += len(np.intersect1d(f, t, assume_unique=False))
    return hits / (k * len(truth))


def first_at(rows, key_recall, key_qps, goal=GOAL_RECALL):
    """(nprobe, recall, qps) at the smallest nprobe whose recall >= goal, or None."""
    for r in rows:
        if r[key_recall] >= goal:
            return r["nprobe"], r[key_recall], r[key_qps]
    return None


WORDNET = ["/usr/share/wordnet/data.%s" % pos for pos in ("noun", "verb", "adj", "adv")]


def corpus_lines(path):
    """The distinct non-empty lines (bytes) of the corpus, in file order. No path: WordNet 3.0's glosses
    (Debian's wordnet-base), the text after ' | ' on each synset line of data.noun, .verb, .adj, .adv."""
    if path:
        lines = [line.rstrip(b"\r\n") for line in open(path, "rb")]
    else:
        missing = [f for f in WORDNET if not os.path.exists(f)]
        if missing:
            raise FileNotFoundError("%s is missing: apt-get install wordnet-base, or give --corpus" % missing[0])
        lines = [line.split(b" | ", 1)[1].rstrip() for f in WORDNET for line in open(f, "rb")
                 if not line.startswith(b"  ") and b" | " in line]
    return list(dict.fromkeys(line for line in lines if line.strip()))


def text_data(a, checks, env, times):
    """--text's data file: /train = the embeddings of the first N lines of the shuffled corpus, /test =
    those of the next Q, with embed's attributes (distance = angular). Kept, as is the embedding; returns
    the path, or None after a failed check."""
    name = os.path.splitext(os.path.basename(a.corpus))[0] if a.corpus else "wordnet"
    stem = os.path.join(a.data_dir, "text_%s_n%d_q%d_seed%d" % (name, a.n, a.q, a.seed))
    data, emb = stem + ".h5", stem + "_embed.h5"
    if os.path.exists(data):
        log("data: %s (kept)" % data)
        return data
    if not os.path.exists(emb):
        try:
            lines = corpus_lines(a.corpus)
        except OSError as e:
            checks.add((False, "corpus: %s" % e), "finished")
            return None
        if len(lines) < a.n + a.q:
            checks.add((False, "corpus: %d distinct lines, fewer than --n + --q = %d" % (len(lines), a.n + a.q)), "finished")
            return None
        order = np.random.default_rng(a.seed).permutation(len(lines))[:a.n + a.q]
        with open(stem + ".txt", "wb") as f:
            f.write(b"".join(lines[i] + b"\n" for i in order))
        log("corpus: %d of %d distinct lines -> %s" % (a.n + a.q, len(lines), stem + ".txt"))
        ok, times["embed"] = sh(mpirun(a.threads) + [a.vecanneal, "embed", "--input", stem + ".txt", "--out", emb, "--model", a.model,
                                                     "--threads", "1", "--progress", "0", "--metrics", stem + "_embed.json"],
                                checks, "embed", env)
        if not ok:
            return None
    with h5py.File(emb, "r") as f, h5py.File(stem + ".tmp.h5", "w") as g:
        E = f["/train"]
        g["/train"], g["/test"] = E[:a.n], E[a.n:a.n + a.q]
        for key, value in f.attrs.items():
            g.attrs[key] = value
        for key, value in E.attrs.items():
            g["/train"].attrs[key] = value
    os.rename(stem + ".tmp.h5", data)
    return data


def add_text_args(ap):
    """The options text_data() reads besides n, q, seed, threads, vecanneal and data_dir."""
    ap.add_argument("--corpus", default="", help="--text: one text per line [WordNet 3.0's glosses, %s]" % WORDNET[0][:-5])
    ap.add_argument("--model", default=os.environ.get("VECANNEAL_MODEL", os.path.join(REPO, "models", "all-MiniLM-L6-v2")),
                    help="--text: embed --model [$VECANNEAL_MODEL or models/all-MiniLM-L6-v2]")


def exact_truth(a, data, index, checks, env, times):
    """--text's ground truth: `vecanneal search --exact --k 100` of /test over the index's rows (kept:
    it depends on the rows and the metric only, so every index of the data shares it); returns its path,
    or None after a failed check."""
    truth_file = data[:-3] + "_exact100.h5"
    if not os.path.exists(truth_file):
        ok, times["exact"] = sh(mpirun(1) + [a.vecanneal, "search", "--index", index, "--queries", data + ":/test", "--exact", "--k",
                                             "100", "--threads", str(a.threads), "--out", truth_file], checks, "search --exact", env)
        if not ok:
            return None
    return truth_file


def text_notes(a, data, d, metric, truth_file):
    """The result file's lines on --text's data: the corpus, its embedding and the ground truth."""
    lines = ["- data: %d + %d distinct lines of %s, in an order shuffled with seed %d, embedded by `vecanneal embed --model %s` "
             "(CPU, fp32): /train the first %d rows, the queries the next %d; %d-d, %s; ground truth "
             "`vecanneal search --exact --k 100` (%s)\n" % (
                 a.n, a.q, a.corpus or "WordNet 3.0's glosses (Debian's wordnet-base, /usr/share/wordnet/data.{noun,verb,adj,adv}; "
                 "the WordNet 3.0 license of Princeton University)", a.seed, a.model, a.n, a.q, d, metric, os.path.basename(truth_file))]
    if os.path.exists(data[:-3] + "_embed.json"):
        with open(data[:-3] + "_embed.json") as e:
            m = json.load(e)
        lines.append("- the embedding (`%s`, made when the data was): %d lines, %d tokens, %d ranks x %d threads, %.1f lines/s, "
                     "%.1f lines per CPU second\n" % (os.path.basename(data[:-3] + "_embed.json"), m["lines"], m["tokens"], m["ranks"],
                                                       m["threads_per_rank"], m["lines_per_second"], m["lines_per_cpu_second"]))
    return "".join(lines)


def main():
    cores = os.cpu_count() or 1
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--text", action="store_true", help="text embeddings (vecanneal embed) instead of generated rows")
    ap.add_argument("--n", type=int, help="rows [1000000; --text 50000]")
    ap.add_argument("--d", type=int, default=128, help="dimensions of generated rows [128]")
    ap.add_argument("--k", type=int, help="anchors = faiss nlist [1024; --text 256]")
    ap.add_argument("--q", type=int, help="queries [10000; --text 2000]")
    ap.add_argument("--nprobe", default="1,2,4,8,16,32,64", help="nprobe sweep [1,2,4,8,16,32,64]")
    ap.add_argument("--threads", type=int, default=cores, help="cores given to each tool [the machine's: %d]" % cores)
    ap.add_argument("--layouts", default="", help="vecanneal ranks x threads, e.g. 2x1,1x2 [every R x T = threads]")
    ap.add_argument("--repeats", type=int, default=3, help="runs per tool and nprobe; the best QPS counts [3]")
    ap.add_argument("--clusters", type=int, default=1000, help="gen --clusters [1000]")
    ap.add_argument("--spread", type=float, default=1.5, help="gen --spread [1.5]: recall@10 crosses 0.9 near nprobe 16 of 1024 (at 1.0 it is 0.98 at nprobe 1, at 2.0 below 0.7 at 64)")
    ap.add_argument("--seed", type=int, default=7, help="gen --seed; --text: the seed of the corpus's order [7]")
    add_text_args(ap)
    ap.add_argument("--vecanneal", default=os.environ.get("VECANNEAL", ""), help="binary [$VECANNEAL, build-cpu/ or build/vecanneal]")
    ap.add_argument("--data-dir", default=os.environ.get("VA_BENCH_DATA", os.path.join(REPO, "build", "bench-data")),
                    help="data and index, kept between runs [$VA_BENCH_DATA or build/bench-data]")
    ap.add_argument("--out-dir", default=os.path.join(REPO, "bench", "results"), help="result files [bench/results]")
    ap.add_argument("--tag", default="", help="suffix of the result names")
    ap.add_argument("--note", default="", help="a line for the result file (the machine's state)")
    a = ap.parse_args()
    a.n = a.n or (50000 if a.text else 1000000)
    a.q = a.q or (2000 if a.text else 10000)
    a.k = a.k or (256 if a.text else 1024)

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

    nprobes = sorted({int(x) for x in a.nprobe.split(",") if x})
    if a.layouts:
        layouts = [tuple(int(v) for v in s.split("x")) for s in a.layouts.split(",")]
    else:
        layouts = [(r, a.threads // r) for r in range(a.threads, 0, -1) if a.threads % r == 0]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cpu = cpu_name()
    date = datetime.date.today().isoformat()
    stem = "%s_%s-%dcore_search-cpu%s%s" % (date, short_cpu(cpu), cores, "-text" if a.text else "", ("-" + a.tag) if a.tag else "")
    os.makedirs(a.data_dir, exist_ok=True)
    os.makedirs(a.out_dir, exist_ok=True)
    t_start = time.perf_counter()
    load_start = os.getloadavg()
    log("search-cpu: %s, %d rows, K %d, %d queries, nprobe %s, %d threads per tool, layouts %s; %s, %d CPUs, load %.2f %.2f %.2f"
        % ("text (%s)" % (a.corpus or "WordNet glosses") if a.text else "generated, d %d" % a.d, a.n, a.k, a.q, nprobes, a.threads,
           ["%dx%d" % l for l in layouts], cpu, cores, *load_start))
    times = {}

    # 1. data (kept: same name, same data)
    data = os.path.join(a.data_dir, "search_n%d_d%d_q%d_c%d_s%g_seed%d.h5" % (a.n, a.d, a.q, a.clusters, a.spread, a.seed))
    if a.text:
        data = text_data(a, checks, env, times)
        if data is None:
            return checks.verdict()
    elif not os.path.exists(data):
        ok, times["gen"] = sh(mpirun(a.threads) + [a.vecanneal, "gen", "--out", data, "--n", str(a.n), "--d", str(a.d),
                                                  "--clusters", str(a.clusters), "--spread", str(a.spread), "--seed", str(a.seed),
                                                  "--test", str(a.q)], checks, "gen", env)
        if not ok:
            return checks.verdict()
    else:
        log("data: %s (kept)" % data)
    with h5py.File(data, "r") as f:
        X = np.ascontiguousarray(f["/train"][()], dtype=np.float32)
        Qs = np.ascontiguousarray(f["/test"][()], dtype=np.float32)
    d = X.shape[1]

    # 2. index
    index = os.path.join(a.data_dir, os.path.basename(data)[:-3] + "_k%d.index.h5" % a.k)
    if not os.path.exists(index):
        ok, times["compress"] = sh(mpirun(1) + [a.vecanneal, "compress", "--input", data + ":/train", "--anchors", str(a.k),
                                               "--out", index, "--set", "threads=%d" % a.threads, "--set", "progress_every=0"],
                                  checks, "compress", env)
        if not ok:
            return checks.verdict()
    else:
        log("index: %s (kept)" % index)
    checks.attempt(verify.run, index, None, a.n, label="finished")
    with vi.open_index(index) as ix:
        K, metric = ix.k, ix.metric
        ivf_ours = vi.to_faiss(ix, X)
    nprobes = sorted({min(p, K) for p in nprobes})  # search clamps a larger nprobe to K

    # ground truth: gen's /neighbors, or --text: search --exact's (kept)
    truth_file = exact_truth(a, data, index, checks, env, times) if a.text else data
    if truth_file is None:
        return checks.verdict()
    with h5py.File(truth_file, "r") as f:
        truth = f["/neighbors"][()]
    ok = X.shape == (a.n, d if a.text else a.d) and Qs.shape == (a.q, d) and truth.shape[0] == a.q and truth.shape[1] >= TOPK
    checks.add((ok, "%s: train %s, test %s; %s: neighbors %s" % (os.path.basename(data), X.shape, Qs.shape, os.path.basename(truth_file),
                                                                 truth.shape)), "finished")

    # 3. vecanneal search, every layout, REPEATS runs each
    work = os.path.join(a.data_dir, "search-work")
    os.makedirs(work, exist_ok=True)
    va = {}  # (r, t) -> {nprobe: (recall, best qps)}
    plist = ",".join(str(p) for p in nprobes)
    for rep in range(a.repeats):
        for (r, t) in layouts:
            csvp = os.path.join(work, "sweep_%dx%d_%d.csv" % (r, t, rep))
            for p in (csvp, os.path.join(work, "result.h5")):
                if os.path.exists(p):
                    os.remove(p)
            ok, _ = sh(mpirun(r) + [a.vecanneal, "search", "--index", index, "--queries", data + ":/test", "--k", str(TOPK),
                                    "--nprobe", plist, "--ground-truth", truth_file + ":/neighbors", "--threads", str(t),
                                    "--out", os.path.join(work, "result.h5"), "--sweep-csv", csvp],
                       checks, "search %dr x %dt" % (r, t), env)
            if not ok:
                continue
            sw = read_sweep(csvp)
            cur = va.setdefault((r, t), {})
            for p, (rec, qps) in sw.items():
                old = cur.get(p)
                if old is not None and old[0] != rec:
                    checks.add((False, "%dr x %dt nprobe %d: recall %.4f, then %.4f" % (r, t, p, old[0], rec)), "layouts")
                cur[p] = (rec, max(qps, old[1] if old else 0.0))
    if not va:
        return checks.verdict()

    # full probe on the first EXACT_Q queries
    nq = min(EXACT_Q, a.q)
    sub = os.path.join(work, "queries_first%d.h5" % nq)
    with h5py.File(sub, "w") as f:
        f["/test"] = Qs[:nq]
        f["/neighbors"] = truth[:nq]
    csvf = os.path.join(work, "sweep_full.csv")
    for p in (csvf, os.path.join(work, "result_full.h5")):
        if os.path.exists(p):
            os.remove(p)
    r0, t0 = layouts[0]
    ok, _ = sh(mpirun(r0) + [a.vecanneal, "search", "--index", index, "--queries", sub + ":/test", "--k", str(TOPK),
                             "--nprobe", str(K), "--ground-truth", sub + ":/neighbors", "--threads", str(t0),
                             "--out", os.path.join(work, "result_full.h5"), "--sweep-csv", csvf], checks, "search nprobe K", env)
    if ok:
        rec = read_sweep(csvf)[K][0]
        checks.add((rec >= FULL_PROBE_MIN, "vecanneal at nprobe = K = %d on the first %d queries: recall@10 %.4f against %s's "
                    "/neighbors (at least %g)" % (K, nq, rec, os.path.basename(truth_file), FULL_PROBE_MIN)), "full probe")

    # 4. faiss: our lists, then its own k-means (cosine: inner product on unit rows and queries)
    faiss.omp_set_num_threads(a.threads)
    if metric == "cosine":
        X, Qs = X.copy(), Qs.copy()
        faiss.normalize_L2(X)
        faiss.normalize_L2(Qs)
    t = time.perf_counter()
    if metric == "cosine":
        ivf_own = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, K, faiss.METRIC_INNER_PRODUCT)
        ivf_own.cp.spherical = True
    else:
        ivf_own = faiss.IndexIVFFlat(faiss.IndexFlatL2(d), d, K, faiss.METRIC_L2)
    ivf_own.train(X)
    ivf_own.add(X)
    times["faiss train+add"] = time.perf_counter() - t
    log("faiss own k-means: train + add %.1f s" % times["faiss train+add"])
    fz = {}
    for name, ivf in (("ours", ivf_ours), ("own", ivf_own)):
        res = {}
        for p in nprobes:
            ivf.nprobe = p
            best, ids = 0.0, None
            for _ in range(a.repeats):
                t = time.perf_counter()
                _, I = ivf.search(Qs, TOPK)
                best = max(best, a.q / (time.perf_counter() - t))
                ids = I
            res[p] = (recall_at(ids, truth), best)
            log("faiss %-4s nprobe %3d: recall %.4f, %.0f q/s" % (name, p, res[p][0], best))
        fz[name] = res

    # checks on recall
    for (r, t), sw in va.items():
        recs = [sw[p][0] for p in nprobes if p in sw]
        mono = all(b >= a_ for a_, b in zip(recs, recs[1:])) and len(recs) == len(nprobes)
        checks.add((mono, "vecanneal %dr x %dt: recall over nprobe %s = %s" % (r, t, nprobes, ["%.4f" % x for x in recs])), "monotone")
    ref = va[layouts[0]] if layouts[0] in va else next(iter(va.values()))
    for (r, t), sw in va.items():
        diff = [p for p in nprobes if p in sw and p in ref and sw[p][0] != ref[p][0]]
        checks.add((not diff, "vecanneal %dr x %dt: recall equal to the first layout's at every nprobe%s"
                    % (r, t, "" if not diff else "; differs at %s" % diff)), "layouts")
    worst = max(abs(fz["ours"][p][0] - ref[p][0]) for p in nprobes if p in ref)
    checks.add((worst <= SAME_LISTS_TOL, "faiss on our lists vs vecanneal: largest recall difference %.4f over nprobe %s (at most %g)"
                % (worst, nprobes, SAME_LISTS_TOL)), "same lists")
    total = time.perf_counter() - t_start
    checks.add((True, "the run finished in %.0f s" % total), "finished")

    # table
    lay = [l for l in layouts if l in va]
    rows = []
    for p in nprobes:
        row = {"nprobe": p}
        for (r, t) in lay:
            row["va_%dx%d_recall" % (r, t)], row["va_%dx%d_qps" % (r, t)] = va[(r, t)].get(p, (float("nan"), float("nan")))
        row["va_best_qps"] = max(row["va_%dx%d_qps" % l] for l in lay)
        row["va_recall"] = row["va_%dx%d_recall" % lay[0]]
        row["faiss_ours_recall"], row["faiss_ours_qps"] = fz["ours"][p]
        row["faiss_own_recall"], row["faiss_own_qps"] = fz["own"][p]
        for (r, t) in lay:
            row["ratio_%dx%d_ours" % (r, t)] = row["va_%dx%d_qps" % (r, t)] / row["faiss_ours_qps"]
            row["ratio_%dx%d_own" % (r, t)] = row["va_%dx%d_qps" % (r, t)] / row["faiss_own_qps"]
        rows.append(row)
    fields = list(rows[0].keys())
    csv_path = os.path.join(a.out_dir, stem + ".csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for row in rows:
            w.writerow({k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()})

    head = ["nprobe", "vecanneal recall"] + ["vecanneal %dr x %dt q/s" % l for l in lay] + [
        "faiss our lists recall", "faiss our lists q/s", "faiss own k-means recall", "faiss own k-means q/s"] + [
        "ratio %dr x %dt / faiss our lists" % l for l in lay] + ["ratio %dr x %dt / faiss own" % l for l in lay]
    table = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for row in rows:
        cells = [str(row["nprobe"]), "%.4f" % row["va_recall"]] + ["%.0f" % row["va_%dx%d_qps" % l] for l in lay] + [
            "%.4f" % row["faiss_ours_recall"], "%.0f" % row["faiss_ours_qps"], "%.4f" % row["faiss_own_recall"],
            "%.0f" % row["faiss_own_qps"]] + ["%.2f" % row["ratio_%dx%d_ours" % l] for l in lay] + [
            "%.2f" % row["ratio_%dx%d_own" % l] for l in lay]
        table.append("| " + " | ".join(cells) + " |")

    # the goal: at recall >= 0.9, vecanneal's QPS (best layout) against each faiss index's
    goal = []
    for (r, t) in lay:
        v = first_at(rows, "va_recall", "va_%dx%d_qps" % (r, t))
        for name, key in (("faiss on our lists", "faiss_ours"), ("faiss own k-means", "faiss_own")):
            f_ = first_at(rows, key + "_recall", key + "_qps")
            who = "vecanneal %dr x %dt vs %s" % (r, t, name)
            if v is None:
                goal.append("- %s: vecanneal never reaches recall %.1f in this sweep: goal not met" % (who, GOAL_RECALL))
            elif f_ is None:
                goal.append("- %s: faiss never reaches recall %.1f in this sweep; vecanneal does at nprobe %d (%.0f q/s): goal met"
                            % (who, GOAL_RECALL, v[0], v[2]))
            else:
                goal.append("- %s: recall >= %.1f first at nprobe %d (recall %.4f, %.0f q/s) against faiss's nprobe %d "
                            "(recall %.4f, %.0f q/s): ratio %.2f, goal %s"
                            % (who, GOAL_RECALL, v[0], v[1], v[2], f_[0], f_[1], f_[2], v[2] / f_[2],
                               "met" if v[2] >= f_[2] else "NOT met"))
    load_end = os.getloadavg()
    cmd = "bash bench/run.sh search-cpu " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    md_path = os.path.join(a.out_dir, stem + ".md")
    rc_line, _ = verify.verdict_line(checks.items)
    with open(md_path, "w") as f:
        f.write("# search-cpu: vecanneal search against faiss-cpu IndexIVFFlat\n\n")
        f.write("- command: `%s`\n" % cmd)
        f.write("- host: %s, %d CPUs, %s; load average at the start %.2f %.2f %.2f, at the end %.2f %.2f %.2f\n"
                % (cpu, cores, platform.platform(), *load_start, *load_end))
        if a.note:
            f.write("- note: %s\n" % a.note)
        if a.text:
            f.write(text_notes(a, data, d, metric, truth_file))
        else:
            f.write("- data: `vecanneal gen --n %d --d %d --clusters %d --spread %g --seed %d --test %d` (float32; gen's exact "
                    "/neighbors as ground truth)\n" % (a.n, a.d, a.clusters, a.spread, a.seed, a.q))
        f.write("- index: `vecanneal compress --anchors %d` (defaults), 1 rank x %d threads; K = %d\n" % (a.k, a.threads, K))
        f.write("- vecanneal: %s; search --k 10 --nprobe %s, layouts %s (ranks x threads), best of %d runs per nprobe\n"
                % (a.vecanneal, plist, ", ".join("%dr x %dt" % l for l in lay), a.repeats))
        f.write("- faiss-cpu %s, omp_set_num_threads(%d), index.search over all %d queries, best of %d%s; numpy %s, h5py %s, "
                "python %s\n" % (faiss.__version__, a.threads, a.q, a.repeats, "; cosine: METRIC_INNER_PRODUCT on unit rows and "
                                 "queries, own k-means spherical" if metric == "cosine" else "", np.__version__, h5py.__version__,
                                 platform.python_version()))
        f.write("- step times (s): %s; whole run %.0f s\n" % (
            ", ".join("%s %.1f" % kv for kv in times.items()) or "data and index kept from an earlier run", total))
        f.write("- file: %s\n\n" % os.path.basename(csv_path))
        f.write("\n".join(table) + "\n\n")
        f.write("Goal (at recall@10 >= %.1f, at least faiss-cpu's queries per second on the same cores):\n\n" % GOAL_RECALL)
        f.write("\n".join(goal) + "\n\n")
        f.write("Checks:\n\n" + "".join("- %s\n" % line for _, line in checks.items) + "\n" + rc_line + "\n")
    log("")
    log("\n".join(table))
    log("")
    log("goal (recall@10 >= %.1f, at least faiss-cpu's q/s on the same cores):" % GOAL_RECALL)
    log("\n".join(goal))
    log("wrote %s, %s" % (md_path, csv_path))
    return checks.verdict()


if __name__ == "__main__":
    sys.exit(main())
