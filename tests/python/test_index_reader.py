#!/usr/bin/env python3
"""test_index_reader.py: python/vecanneal_index.py on indexes vecanneal writes (CTest python_index_reader).

Builds an l2 and a cosine index of `vecanneal gen --n 20000 --d 32` rows, opens them with the reader and
checks: strings are str, numbers int or float (root attributes, configuration, source), every dataset has
a description and units, counts sum to n and equal bincount(assignments), final_energy is
sum(counts * mse) / n, the source is the data file's real path and size, info prints the same checksum;
the frame: center is the training rows' mean (l2) or zeros (cosine), anchors = float32(anchors_centered +
center) bitwise (l2; cosine has no anchors_centered); an index compress wrote has no sources; two
`vecanneal add` runs give sources that match what info prints, with the checksums of compress's source and
of assign's input, and keep the frame; the format-1 fixture tests/data/index_format1.h5 and a format-2
index without the frame read too (None for what they lack). Then, with faiss: to_faiss gives an
IndexIVFFlat whose inverted lists hold exactly our assignment's members, faiss's quantizer puts every row
in our list but for near-ties (docs/index-format.md), and a search with nprobe = nlist returns the exact
neighbours of a flat index; to_faiss without rows gives an IndexIVFPQ of an index's codes (d 32, M 8; l2
and cosine) whose reconstruct(i) is our decode() of row i (1e-5 relative) and whose search with nprobe =
nlist returns the top 10 of an exact asymmetric distance to decode()'s rows but for near-ties (ADC_TIE), and
refuses an index with unequal subspaces (M 6) or without codes. Exit 77 (SKIP) only when faiss cannot be imported, after everything else passed.
Codes (compress --codes pq, l2 and cosine, d 32 in 6 subspaces of 6 and 5 columns): codebooks and codes of
the documented shapes and types, None without codes, and decode() gives rows whose squared error against
the source rows (in the index's frame) is the /pq error attribute times its variance, and below the
anchors' alone; an index `vecanneal add` wrote has no codes.

usage: test_index_reader.py --vecanneal BIN --source SRC_DIR --work DIR
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np

SKIP = 77
# A row may sit in another list than faiss's quantizer picks only when its distances to the two anchors
# agree to this much (relative to the larger; absolute for cosine's 1 - x.a): the anchors are stored in
# float32 in the source's coordinates, and faiss computes in float32 in its own order.
NEAR_TIE = 1e-5
# The IndexIVFPQ's top 10 may differ from the exact asymmetric distance's where two decoded rows' distances
# to the query agree to this much, relative to ||q||^2 + ||row||^2 (l2: faiss sums float32 tables that
# cancel to the distance) or absolute (cosine's q.row of unit vectors).
ADC_TIE = 1e-5


def run(cmd, env):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout}")
    return p.stdout


def check(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


def check_reader(vi, path, data_path, n, metric, info_text, train):
    with vi.open_index(path) as ix:
        check(ix.format_version == 2 == vi.FORMAT_VERSION, f"{path}: format_version {ix.format_version}")
        for k in ("format", "version", "metric", "backend", "source_file", "source_dataset", "source_dtype"):
            check(type(ix.attrs[k]) is str, f"{path}: attribute {k} is {type(ix.attrs[k]).__name__}, not str")
        for k in ("n", "d", "k_final", "iterations", "ranks", "seed", "format_version", "source_size"):
            check(type(ix.attrs[k]) is int, f"{path}: attribute {k} is {type(ix.attrs[k]).__name__}, not int")
        for k in ("final_energy", "total_variance", "distortion", "compression_ratio"):
            check(type(ix.attrs[k]) is float, f"{path}: attribute {k} is {type(ix.attrs[k]).__name__}, not float")
        # h5py itself (not only the reader's conversion) returns str for the format-2 strings.
        with h5py.File(path, "r") as f:
            check(type(f.attrs["metric"]) is str, f"{path}: h5py reads metric as {type(f.attrs['metric'])}")
            check(type(f["config"].attrs["init"]) is str, f"{path}: h5py reads config/init as bytes")
            for name in ("anchors", "assignments", "anchor_count", "anchor_mse", "history/energy",
                         "history/changed", "history/anchor_count", "history/temperature"):
                for a in ("description", "units"):
                    check(type(f[name].attrs.get(a)) is str, f"{path}: /{name} has no str attribute {a}")
            check("anchors" not in f["history"], f"{path}: /history/anchors is still written")
        c = ix.config
        for k, t in (("k", int), ("max_iter", int), ("seed", int), ("lr", float), ("cooling_rate", float),
                     ("init", str), ("robust", str), ("metric", str)):
            check(type(c[k]) is t, f"{path}: config {k} = {c[k]!r} is {type(c[k]).__name__}, not {t.__name__}")
        check(c["cooling_rate"] == 0.01 and c["max_iter"] == 20 and c["k"] == 64, f"{path}: config values {c}")
        check(list(c)[0] == "input" and list(c).index("k") < list(c).index("lr"),
              f"{path}: config not in the key table's order: {list(c)[:5]}")
        check(ix.metric == metric and ix.n == n and ix.d == 32, f"{path}: {ix}")
        check(ix.anchors.shape == (ix.k, ix.d) and ix.anchors.dtype == np.float32, f"{path}: anchors")
        check(ix.assignments.shape == (n,) and ix.assignments.dtype == np.uint32, f"{path}: assignments")
        check(int(ix.counts.sum()) == n, f"{path}: counts sum to {ix.counts.sum()}, not {n}")
        check(np.array_equal(np.bincount(ix.assignments, minlength=ix.k), ix.counts), f"{path}: counts != bincount")
        e = float(np.dot(ix.counts.astype(np.float64), ix.mse)) / n
        check(abs(e - ix.attrs["final_energy"]) <= 1e-9 * abs(e) + 1e-12,
              f"{path}: sum(counts * mse) / n = {e}, final_energy {ix.attrs['final_energy']}")
        h = ix.history
        it = ix.attrs["iterations"]
        check(all(len(h[k]) == it for k in h) and h["anchor_count"][-1] == ix.k, f"{path}: history {h}")
        src = ix.source
        check(src["file"] == os.path.realpath(data_path), f"{path}: source file {src['file']}")
        check(src["size"] == os.path.getsize(data_path), f"{path}: source size {src['size']}")
        check(type(src["checksum"]) is int and 0 <= src["checksum"] < 2**64, f"{path}: checksum {src['checksum']!r}")
        check(f"source_checksum    {src['checksum']:016x}" in info_text, f"{path}: info prints another checksum")
        check(ix.describe("anchor_count") == ("source rows assigned to each anchor", "rows"), f"{path}: describe")
        check(ix.reconstruct(slice(0, 5)).shape == (5, ix.d), f"{path}: reconstruct")
        check_frame(ix, path, metric, train)
        check(ix.sources is None, f"{path}: compress wrote /sources {ix.sources}")


def check_frame(ix, path, metric, train):
    """center and anchors_centered against the training rows and /anchors."""
    c = ix.center
    check(c is not None and c.shape == (ix.d,) and c.dtype == np.float64, f"{path}: center {c!r}")
    ac = ix.anchors_centered
    if metric == "cosine":
        check(not c.any(), f"{path}: cosine center is not zero: {c}")
        check(ac is None, f"{path}: cosine index has anchors_centered")
        return
    # compress rounds the mean to 16 significant bits (the same for any rank count): within half a unit
    # of the 16th bit of the mean, and holding no more bits than that.
    mean = train.astype(np.float64).mean(axis=0)
    frac, exp = np.frexp(c)
    check(np.array_equal(np.ldexp(np.rint(np.ldexp(frac, 16)), exp - 16), c), f"{path}: center has more than 16 bits")
    check(np.all(np.abs(c - mean) <= np.ldexp(1.0, np.frexp(mean)[1] - 17) * (1 + 1e-9)),
          f"{path}: center differs from the training rows' mean by {np.abs(c - mean).max():.3g}")
    check(ac is not None and ac.shape == (ix.k, ix.d) and ac.dtype == np.float32, f"{path}: anchors_centered {ac!r}")
    check(np.array_equal((ac.astype(np.float64) + c).astype(np.float32), ix.anchors),
          f"{path}: anchors != float32(anchors_centered + center)")


def info_sources(info_text):
    """The sources info prints: (number, how, row0, n, file:dataset) per line."""
    return [(int(m[1]), m[2], int(m[3]), int(m[4]), m[5])
            for m in re.finditer(r"^ +#(\d+) +(\S+) +rows (\d+) \+ (\d+)  (.*)$", info_text, re.M)]


def check_added(vi, base, added, data_path, n, n_new, info_text, base_checksum, new_checksum):
    """An index `vecanneal add` wrote twice over base (n rows): sources, counts and the frame kept."""
    with vi.open_index(base) as b, vi.open_index(added) as ix:
        total = n + 2 * n_new
        check(ix.n == total and ix.assignments.shape == (total,), f"{added}: {ix}")
        check(np.array_equal(np.bincount(ix.assignments, minlength=ix.k), ix.counts), f"{added}: counts != bincount")
        check(np.array_equal(ix.center, b.center) and np.array_equal(ix.anchors_centered, b.anchors_centered),
              f"{added}: the frame differs from {base}'s")
        src = ix.sources
        check(isinstance(src, list) and len(src) == 3, f"{added}: sources {src!r}")
        real = os.path.realpath(data_path)
        want = [("compress", "/train", 0, n, base_checksum), ("add", "/test", n, n_new, new_checksum),
                ("add", "/test", n + n_new, n_new, new_checksum)]
        for m, (s, (how, dset, row0, rows, checksum)) in enumerate(zip(src, want)):
            check(list(s) == ["how", "file", "dataset", "dtype", "size", "checksum", "row0", "n"],
                  f"{added}: source {m} keys {list(s)}")
            for k in ("how", "file", "dataset", "dtype"):
                check(type(s[k]) is str, f"{added}: source {m} {k} is {type(s[k]).__name__}, not str")
            for k in ("size", "checksum", "row0", "n"):
                check(type(s[k]) is int, f"{added}: source {m} {k} is {type(s[k]).__name__}, not int")
            check((s["how"], s["file"], s["dataset"], s["dtype"], s["size"], s["checksum"], s["row0"], s["n"]) ==
                  (how, real, dset, "float32", os.path.getsize(data_path), checksum, row0, rows),
                  f"{added}: source {m} is {s}")
        printed = info_sources(info_text)
        check(printed == [(m, s["how"], s["row0"], s["n"], f"{s['file']}:{s['dataset']}") for m, s in enumerate(src)],
              f"{added}: info prints sources {printed}, the reader {src}")
        check(sum(s["n"] for s in src) == ix.n, f"{added}: sources hold {sum(s['n'] for s in src)} rows, not {ix.n}")


def check_no_frame(vi, path):
    """A format-2 index written before /center and /anchors_centered existed."""
    with h5py.File(path, "r+") as f:
        del f["center"]
        if "anchors_centered" in f:
            del f["anchors_centered"]
    with vi.open_index(path) as ix:
        check(ix.format_version == 2 and ix.center is None and ix.anchors_centered is None and ix.sources is None,
              f"{path}: without the frame: center {ix.center!r}, anchors_centered {ix.anchors_centered!r}")
        check(ix.anchors.shape == (ix.k, ix.d), f"{path}: anchors")


def check_format1(vi, path):
    with vi.open_index(path) as ix:
        check(ix.format_version == 1, f"{path}: format_version {ix.format_version}")
        check(type(ix.attrs["metric"]) is str and type(ix.attrs["n"]) is int, f"{path}: attribute types")
        check(ix.n == 200 and ix.k == 6 and int(ix.counts.sum()) == 200, f"{path}: {ix}")
        check(np.array_equal(np.bincount(ix.assignments, minlength=ix.k), ix.counts), f"{path}: counts != bincount")
        c = ix.config
        check(c["max_iter"] == 8 and type(c["max_iter"]) is int, f"{path}: config max_iter {c['max_iter']!r}")
        check(c["lr"] == 2 and c["cooling_rate"] == 0.01 and c["init"] == "kmeans||", f"{path}: config {c}")
        check(len(ix.history["anchor_count"]) == 8 and ix.history["anchor_count"][-1] == 6, f"{path}: history")
        check(ix.source == {"file": "data.h5", "dataset": "/train", "dtype": "float32", "size": None,
                            "checksum": None}, f"{path}: source {ix.source}")
        check(ix.describe("anchors") == (None, None), f"{path}: describe")
        check(ix.center is None and ix.anchors_centered is None and ix.sources is None,
              f"{path}: center {ix.center!r}, anchors_centered {ix.anchors_centered!r}, sources {ix.sources!r}")


def check_faiss(faiss, vi, path, x, queries):
    with vi.open_index(path) as ix:
        ivf = vi.to_faiss(ix, x)
        check(isinstance(ivf, faiss.IndexIVFFlat), f"{path}: to_faiss gave {type(ivf)}")
        check(ivf.nlist == ix.k and ivf.ntotal == ix.n, f"{path}: nlist {ivf.nlist}, ntotal {ivf.ntotal}")
        a = ix.assignments.astype(np.int64)
        members = np.argsort(a, kind="stable")
        starts = np.concatenate([[0], np.cumsum(ix.counts.astype(np.int64))])
        for j in range(ix.k):
            size = ivf.invlists.list_size(j)
            ids = faiss.rev_swig_ptr(ivf.invlists.get_ids(j), size).copy() if size else np.zeros(0, np.int64)
            check(np.array_equal(np.sort(ids), members[starts[j]:starts[j + 1]]),
                  f"{path}: list {j} holds other rows than anchor {j}'s members")
        # faiss's quantizer on the rows as the IVF index sees them.
        xs = x.astype(np.float32, copy=True)
        if ix.metric == "cosine":
            faiss.normalize_L2(xs)
        _, q = ivf.quantizer.search(xs, 1)
        q = q[:, 0]
        other = np.flatnonzero(q != a)
        x64, anc = xs[other].astype(np.float64), ix.anchors.astype(np.float64)
        if ix.metric == "cosine":
            d_ours = 1 - np.einsum("ij,ij->i", x64, anc[a[other]])
            d_faiss = 1 - np.einsum("ij,ij->i", x64, anc[q[other]])
            gap = np.abs(d_ours - d_faiss)
        else:
            d_ours = ((x64 - anc[a[other]]) ** 2).sum(1)
            d_faiss = ((x64 - anc[q[other]]) ** 2).sum(1)
            gap = np.abs(d_ours - d_faiss) / np.maximum(np.maximum(d_ours, d_faiss), 1e-30)
        check(np.all(gap <= NEAR_TIE), f"{path}: {int((gap > NEAR_TIE).sum())} rows sit in another list than faiss's "
              f"quantizer puts them, beyond a near-tie (worst gap {gap.max() if len(gap) else 0:.3g})")
        print(f"  {path}: faiss quantizer agrees on {ix.n - len(other)} of {ix.n} rows ({len(other)} near-ties)")
        # nprobe = nlist visits every list: exact search, the same as a flat index.
        qs = queries.astype(np.float32, copy=True)
        if ix.metric == "cosine":
            faiss.normalize_L2(qs)
            flat = faiss.IndexFlatIP(ix.d)
        else:
            flat = faiss.IndexFlatL2(ix.d)
        flat.add(xs)
        ivf.nprobe = ivf.nlist
        D, I = ivf.search(qs, 10)
        D0, I0 = flat.search(qs, 10)
        check(np.allclose(D, D0, rtol=1e-5, atol=1e-5), f"{path}: nprobe = nlist distances differ from exact")
        tol = 1e-5 * np.maximum(np.abs(D0), 1)
        tied = np.zeros_like(D0, dtype=bool)
        tied[:, 1:] |= np.abs(np.diff(D0, axis=1)) <= tol[:, 1:]
        tied[:, :-1] |= np.abs(np.diff(D0, axis=1)) <= tol[:, :-1]
        check(np.all((I == I0) | tied), f"{path}: nprobe = nlist returns other neighbours than exact search")
        print(f"  {path}: IVF search with nprobe = nlist = {ivf.nlist} returns the exact 10 neighbours of "
              f"{len(qs)} queries")


def check_faiss_pq(faiss, vi, path, unequal, plain, queries):
    """to_faiss(index) without rows: the IndexIVFPQ of path's codes (d 32, M 8) against decode()."""
    for refused, why in ((unequal, "not a multiple"), (plain, "has no codes")):
        try:
            vi.to_faiss(refused)
        except ValueError as e:
            check(why in str(e), f"{refused}: to_faiss refuses with {e}")
        else:
            check(False, f"{refused}: to_faiss without rows built an index ({why} expected)")
    with vi.open_index(path) as ix:
        ivf = vi.to_faiss(ix)
        check(isinstance(ivf, faiss.IndexIVFPQ) and ivf.by_residual, f"{path}: to_faiss gave {type(ivf)}")
        check(ivf.nlist == ix.k and ivf.ntotal == ix.n and ivf.pq.M == 8 and ivf.pq.nbits == 8 and ivf.code_size == 8,
              f"{path}: nlist {ivf.nlist}, ntotal {ivf.ntotal}, M {ivf.pq.M}, code_size {ivf.code_size}")
        approx = ix.decode().astype(np.float64)
        ivf.make_direct_map()
        rows = np.arange(0, ix.n, 997)
        rec = np.stack([ivf.reconstruct(int(i)) for i in rows]).astype(np.float64)
        rel = np.linalg.norm(rec - approx[rows], axis=1) / np.linalg.norm(approx[rows], axis=1)
        check(np.all(rel <= 1e-5), f"{path}: reconstruct(i) differs from decode() by {rel.max():.3g} relative")
        qs = queries.astype(np.float32, copy=True)
        if ix.metric == "cosine":
            faiss.normalize_L2(qs)
        ivf.nprobe = ivf.nlist
        D, I = ivf.search(qs, 10)
        q64 = qs.astype(np.float64)
        if ix.metric == "cosine":
            exact, scale = -(q64 @ approx.T), np.ones((len(qs), 1))
        else:
            sq = (approx ** 2).sum(1)
            exact = (q64 ** 2).sum(1)[:, None] - 2 * q64 @ approx.T + sq[None, :]
            scale = (q64 ** 2).sum(1)[:, None] + sq.max()
        best = np.sort(exact, axis=1)[:, :10]
        check(np.all(I >= 0), f"{path}: the IndexIVFPQ returned fewer than 10 rows")
        got = np.take_along_axis(exact, I, axis=1)  # the exact distance of the row faiss put at each rank
        gap = np.abs(got - best) / scale
        check(np.all(gap <= ADC_TIE), f"{path}: the IndexIVFPQ's top 10 differs from the exact asymmetric "
              f"distance's beyond a near-tie (worst gap {gap.max():.3g})")
        check(np.allclose(-D if ix.metric == "cosine" else D, best, rtol=0, atol=ADC_TIE * scale.max()),
              f"{path}: the IndexIVFPQ's distances differ from the exact asymmetric distances")
        same = np.argsort(exact, axis=1, kind="stable")[:, :10] == I
        print(f"  {path}: IndexIVFPQ reconstructs decode() within {rel.max():.2g}; nprobe = nlist returns the exact "
              f"top 10 of the codes for {len(qs)} queries ({int((~same).sum())} of {same.size} ids at near-ties)")


def check_codes(vi, path, plain, train, metric):
    """An index of compress --codes pq --pq-m 6 (d 32): shapes, and decode() as the /pq error says."""
    with vi.open_index(plain) as ix:
        check(ix.pq is None and ix.codes is None and ix.codebooks is None, f"{plain}: codes without --codes pq")
    with vi.open_index(path) as ix:
        pq = ix.pq
        check(pq["m"] == 6 and pq["bits"] == 8 and pq["ksub"] == 256 and pq["dsub_max"] == 6, f"{path}: /pq {pq}")
        for k in ("bytes_per_vector", "compression_ratio", "variance", "anchor_error", "error"):
            check(type(pq[k]) is float, f"{path}: /pq {k} is {type(pq[k]).__name__}, not float")
        check(ix.codes.shape == (ix.n, 6) and ix.codes.dtype == np.uint8, f"{path}: codes {ix.codes.shape}")
        check(ix.codebooks.shape == (6, 256, 6) and ix.codebooks.dtype == np.float32, f"{path}: codebooks")
        check(ix.subspace_dims.tolist() == [6, 6, 5, 5, 5, 5], f"{path}: subspace_dims {ix.subspace_dims}")
        check(not ix.codebooks[2:, :, 5].any(), f"{path}: codebook values past a subspace's width are not 0")
        x = train.astype(np.float64)
        if metric == "cosine":
            x /= np.linalg.norm(x, axis=1, keepdims=True)
        approx = ix.decode()
        check(approx.shape == x.shape and approx.dtype == np.float32, f"{path}: decode() shape {approx.shape}")
        err = float(((approx.astype(np.float64) - x) ** 2).sum()) / ix.n / pq["variance"]
        check(abs(err - pq["error"]) <= 1e-3 * pq["error"], f"{path}: decode() error {err}, /pq error {pq['error']}")
        check(pq["error"] < pq["anchor_error"], f"{path}: error {pq['error']} not below the anchors' alone")
        check(np.array_equal(ix.decode(slice(100, 200)), approx[100:200]), f"{path}: decode of a slice")
    print(f"reader: {path}: decoded rows' error {err:.5g} of the variance, /pq error {pq['error']:.5g}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vecanneal", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    a.vecanneal, a.source = os.path.abspath(a.vecanneal), os.path.abspath(a.source)
    sys.path.insert(0, os.path.join(a.source, "python"))
    import vecanneal_index as vi

    os.makedirs(a.work, exist_ok=True)
    os.chdir(a.work)
    for f in os.listdir("."):
        os.remove(f)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_base_warn_component_unused="0")
    n = 20000
    run([a.vecanneal, "gen", "--out", "g.h5", "--n", str(n), "--d", "32", "--test", "200"], env)
    common = ["compress", "--input", "g.h5:/train", "--anchors", "64", "--set", "max_iter=20", "--set",
              "threads=1", "--set", "progress_every=0"]
    indexes = {"l2": "l2.idx.h5", "cosine": "cos.idx.h5"}
    with h5py.File("g.h5", "r") as f:
        train = f["train"][()]
    for metric, out in indexes.items():
        run([a.vecanneal] + common + ["--set", f"metric={metric}", "--out", out], env)
        check_reader(vi, out, "g.h5", n, metric, run([a.vecanneal, "info", out], env), train)
    for metric, out in indexes.items():
        coded = out.replace(".idx.h5", ".pq.h5")
        run([a.vecanneal] + common + ["--set", f"metric={metric}", "--codes", "pq", "--pq-m", "6", "--out", coded], env)
        check_codes(vi, coded, out, train, metric)
        run([a.vecanneal] + common + ["--set", f"metric={metric}", "--codes", "pq", "--pq-m", "8", "--out",
                                      out.replace(".idx.h5", ".pq8.h5")], env)
    check_format1(vi, os.path.join(a.source, "tests", "data", "index_format1.h5"))
    print("reader: l2 and cosine indexes (format 2) and the format-1 fixture read with typed values and frames")
    # Two adds of the 200 test rows: /sources holds compress's rows and both inputs.
    base = indexes["l2"]
    with vi.open_index(base) as ix:
        base_checksum = ix.source["checksum"]
    run([a.vecanneal, "assign", "--index", base, "--input", "g.h5:/test", "--out", "test.assign.h5"], env)
    with h5py.File("test.assign.h5", "r") as f:
        new_checksum = int(f.attrs["input_checksum"])
    run([a.vecanneal, "add", "--index", base, "--input", "g.h5:/test", "--out", "l2.add1.h5"], env)
    run([a.vecanneal, "add", "--index", "l2.add1.h5", "--input", "g.h5:/test", "--out", "l2.add2.h5"], env)
    run([a.vecanneal, "add", "--index", "l2.pq.h5", "--input", "g.h5:/test", "--out", "l2.pq.add.h5"], env)
    # add on an index with codes: the old codes and the codebooks kept, the new rows' decoded as the error says.
    with h5py.File("g.h5", "r") as f:
        check_codes(vi, "l2.pq.add.h5", base, np.concatenate([f["train"][()], f["test"][()]]), "l2")
    with vi.open_index("l2.pq.h5") as old, vi.open_index("l2.pq.add.h5") as ix:
        check(ix.n == n + 200 and np.array_equal(ix.codes[:n], old.codes) and
              np.array_equal(ix.codebooks, old.codebooks), "l2.pq.add.h5: the old codes or the codebooks changed")
    check_added(vi, base, "l2.add2.h5", "g.h5", n, 200, run([a.vecanneal, "info", "l2.add2.h5"], env), base_checksum,
                new_checksum)
    print("reader: sources of an index added to twice match info, compress's and assign's checksums")
    shutil.copy(base, "l2.noframe.h5")
    check_no_frame(vi, "l2.noframe.h5")
    print("reader: a format-2 index without /center and /anchors_centered reads, None for them")

    try:
        import faiss
    except ImportError as e:
        print(f"SKIP: the faiss part: faiss cannot be imported ({e}); pip install faiss-cpu")
        return SKIP
    with h5py.File("g.h5", "r") as f:
        x, queries = f["train"][()], f["test"][()]
    for path in indexes.values():
        check_faiss(faiss, vi, path, x, queries)
        check_faiss_pq(faiss, vi, path.replace(".idx.h5", ".pq8.h5"), path.replace(".idx.h5", ".pq.h5"), path, queries)
    print(f"PASS (faiss {faiss.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
