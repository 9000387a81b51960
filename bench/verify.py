#!/usr/bin/env python3
"""verify.py: the result checks of the benchmarks (bench/run.sh) and the verification line each one
ends with. One function per rule; the shell scripts call the command line, the Python benchmarks
import the functions. Needs numpy and h5py (imported when a check runs).

Each check prints "ok: ..." or "FAILED: ..."; with VERIFY_LOG set (the shell scripts set it to a file
of their run) the line is also appended there, and `verdict` turns that file into the last line:
"verification: passed (N checks)" or "verification: FAILED (M of N checks: ...)", exit 1 on a failure
or when nothing was checked.

  verify.py run INDEX.h5 [METRICS.json] [N]  a compress run finished: anchors non-empty and finite,
                                             N assignments (when given) each naming an anchor, final
                                             energy finite (the index's, and the metrics' when given)
  verify.py same A.h5 B.h5                   every dataset of two indexes bitwise identical
  verify.py close A.h5 B.h5 RTOL FRAC        at most FRAC of the assignments differ and every anchor
                                             agrees to RTOL relative, ||a - b|| <= RTOL ||b||
                                             (the rule of tests/tools/h5tool close)
  verify.py ranks A.h5 B.h5 BACKEND          an index on P ranks against the one on 1 rank: `close` with
                                             the rule of BACKEND (RANK_RULES below)
  verify.py cosine A B MIN                   row i of A against row i of B, same row count: cosine >= MIN
                                             on every row (MIN: a number, or fp32, fp16, batching for the
                                             EMBED_ tolerances below); A, B: FILE.h5[:/DATASET] (default
                                             /train) or raw float32 rows of 384 (.f32, with or without
                                             the VAEMBF32 header of tests/data/embed_ref.f32)
  verify.py fail MESSAGE                     records a failed check (a run that did not finish); exits 0
  verify.py verdict                          the verification line over $VERIFY_LOG
Every check takes --label TEXT, which starts its line."""
import argparse
import json
import math
import os
import sys

# Indexes on P ranks against 1 rank, per backend: (anchor RTOL, share of assignments allowed to differ).
#   cpu:  docs/algorithm.md, "Determinism", and tests/jobs/ranks.sh: identical assignments, anchors 1e-5
#   cuda: bench/gpu_loop_scaling.sh at 8M x 128 x 1024 fp16: anchors 1e-4; rows at a near-tie may follow
#         the anchors' rounding, so the share of differing assignments is printed, not bounded
RANK_RULES = {"cpu": (1e-5, 0.0), "cuda": (1e-4, 1.0)}
# Embeddings, the tolerances of the embed tests (tests/embed/test_encoder*.c, tests/embed/e2e_cuda.sh):
EMBED_FP32 = 0.9999  # fp32 encoder against sentence-transformers' fp32 rows
EMBED_FP16 = 0.999  # fp16/bf16 encoder against sentence-transformers' rows
EMBED_BATCHING = 0.9999  # fp16/bf16: the same line in another batch (another GPU count)


def _index(path):
    import h5py
    import numpy as np

    with h5py.File(path, "r") as f:
        data = {}
        f.visititems(lambda name, obj: data.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
        energy = float(f.attrs.get("final_energy", np.nan))
    return data, energy


def run(index, metrics=None, n=None):
    """(ok, message): the compress run that wrote INDEX (and METRICS) finished with a usable index."""
    import numpy as np

    data, energy = _index(index)
    A, a = data.get("anchors"), data.get("assignments")
    bad = []
    if A is None or A.ndim != 2 or A.shape[0] == 0:
        bad.append("no anchors")
    elif not np.isfinite(A).all():
        bad.append("anchors not finite")
    if a is None or (n is not None and a.shape[0] != int(n)):
        bad.append("%s assignments, expected %s" % (None if a is None else a.shape[0], n))
    elif A is not None and A.ndim == 2 and a.size and int(a.max()) >= A.shape[0]:
        bad.append("an assignment names no anchor")
    if metrics:
        with open(metrics) as f:
            energy_m = float(json.load(f).get("final_energy", math.nan))
        if not math.isfinite(energy_m):
            bad.append("metrics' final_energy %r" % energy_m)
    if not math.isfinite(energy):
        bad.append("final_energy %r" % energy)
    k = A.shape[0] if A is not None and A.ndim == 2 else 0
    what = "%s: k %d, %s rows, final energy %.8g" % (os.path.basename(index), k, "?" if a is None else a.shape[0], energy)
    return not bad, what + ("; " + ", ".join(bad) if bad else "")


def same(a, b):
    """(ok, message): every dataset of the two index files bitwise identical."""
    import numpy as np

    da, _ = _index(a)
    db, _ = _index(b)

    def bits(x):
        x = np.asarray(x)
        return x.dtype, x.shape, (x.tolist() if x.dtype == object else x.tobytes())

    diff = sorted(name for name in set(da) | set(db) if name not in da or name not in db or bits(da[name]) != bits(db[name]))
    what = "%s vs %s" % (os.path.basename(a), os.path.basename(b))
    return not diff, what + (": differ in " + ", ".join(diff) if diff else ": bitwise identical (%d datasets)" % len(da))


def close(a, b, rtol, frac):
    """(ok, message): h5tool close's rule, ||a_j - b_j|| <= rtol ||b_j|| for every anchor j and at
    most frac of the assignments different."""
    import numpy as np

    da, _ = _index(a)
    db, _ = _index(b)
    what = "%s vs %s" % (os.path.basename(a), os.path.basename(b))
    A, B = da["anchors"].astype(np.float64), db["anchors"].astype(np.float64)
    xa, xb = da["assignments"], db["assignments"]
    if A.shape != B.shape or xa.shape != xb.shape:
        return False, what + ": shapes differ (anchors %s / %s, assignments %s / %s)" % (A.shape, B.shape, xa.shape, xb.shape)
    nb = np.linalg.norm(B, axis=1)
    e = np.linalg.norm(A - B, axis=1)
    worst = float(np.max(np.where(nb > 0, e / np.where(nb > 0, nb, 1), e))) if len(A) else 0.0
    ndiff = int(np.count_nonzero(xa != xb))
    ok = worst <= rtol and ndiff <= frac * xa.size
    return ok, what + ": worst relative anchor difference %.3g (tolerance %.3g), %d of %d assignments differ (allowed %g)" % (
        worst, rtol, ndiff, xa.size, frac * xa.size)


def ranks(a, b, backend):
    rtol, frac = RANK_RULES[backend]
    return close(a, b, rtol, frac)


def _rows(spec):
    """The rows of an embedding set, sliceable without reading them all: an h5py dataset or a memmap."""
    import numpy as np

    if spec.endswith(".f32"):
        with open(spec, "rb") as f:
            head = f.read(16)
        if head[:8] == b"VAEMBF32":
            rows, dim = (int(v) for v in np.frombuffer(head[8:16], dtype="<u4"))
            return np.memmap(spec, dtype="<f4", mode="r", offset=16, shape=(rows, dim))
        return np.memmap(spec, dtype="<f4", mode="r").reshape(-1, 384)
    import h5py

    path, _, dataset = spec.partition(":")
    return h5py.File(path, "r")[dataset or "/train"]


def cosine(a, b, minimum):
    """(ok, message): cosine of row i of A with row i of B >= minimum for every row. minimum: a number
    or the name of a tolerance above (fp32, fp16, batching)."""
    import numpy as np

    minimum = float({"fp32": EMBED_FP32, "fp16": EMBED_FP16, "batching": EMBED_BATCHING}.get(minimum, minimum))
    x, y = _rows(a), _rows(b)
    what = "%s vs %s" % (a, b)
    if x.shape != y.shape or x.shape[0] == 0:
        return False, what + ": shapes %s and %s" % (x.shape, y.shape)
    c = np.empty(x.shape[0])
    for s in range(0, x.shape[0], 1 << 16):  # in slices: a GPU corpus has millions of rows
        u, v = np.asarray(x[s:s + (1 << 16)], dtype=np.float64), np.asarray(y[s:s + (1 << 16)], dtype=np.float64)
        c[s:s + len(u)] = (u * v).sum(1) / np.sqrt((u * u).sum(1) * (v * v).sum(1))
    c = np.where(np.isfinite(c), c, -1.0)
    return bool(c.min() >= minimum), what + ": %d rows, min cosine %.9f (1 - %.1e, row %d), mean 1 - %.1e, tolerance %g" % (
        len(c), c.min(), 1 - c.min(), int(c.argmin()), 1 - c.mean(), minimum)


class Checks:
    """Collects (ok, message) results; prints each, appends it to $VERIFY_LOG when set."""

    def __init__(self):
        self.items = []

    def add(self, result, label=""):
        ok, msg = result
        line = ("ok: " if ok else "FAILED: ") + (label + ": " if label else "") + msg
        print(line, flush=True)
        if os.environ.get("VERIFY_LOG"):
            with open(os.environ["VERIFY_LOG"], "a") as f:
                f.write(line + "\n")
        self.items.append((ok, line))
        return ok

    def attempt(self, fn, *args, label=""):
        """add(fn(*args)); an exception (a missing or unreadable file) is a failed check."""
        try:
            return self.add(fn(*args), label)
        except Exception as e:  # noqa: BLE001 - any failure to read a result fails the check
            return self.add((False, "%s%r: %s" % (fn.__name__, args, str(e).split(" (")[0])), label)

    def verdict(self):
        """0 or 1. Prints the verification line unless an enclosing script collects $VERIFY_LOG."""
        if not os.environ.get("VERIFY_LOG"):
            print(verdict_line(self.items)[0], flush=True)
        return 0 if self.items and all(ok for ok, _ in self.items) else 1


def verdict_line(items):
    failed = [line[len("FAILED: "):] for ok, line in items if not ok]
    if not items:
        return "verification: FAILED (nothing was checked)", 1
    if failed:
        more = "; and %d more (above)" % (len(failed) - 3) if len(failed) > 3 else ""
        return "verification: FAILED (%d of %d checks: %s%s)" % (len(failed), len(items), "; ".join(failed[:3]), more), 1
    return "verification: passed (%d checks)" % len(items), 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, params in (("run", ["index", "metrics?", "n?"]), ("same", ["a", "b"]), ("close", ["a", "b", "rtol", "frac"]),
                         ("ranks", ["a", "b", "backend"]), ("cosine", ["a", "b", "minimum"]), ("fail", ["message"]),
                         ("verdict", [])):
        p = sub.add_parser(name)
        for prm in params:
            p.add_argument(prm.rstrip("?"), nargs="?" if prm.endswith("?") else None)
        p.add_argument("--label", default="")
    a = ap.parse_args(argv)
    if a.cmd == "verdict":
        path = os.environ.get("VERIFY_LOG", "")
        lines = open(path).read().splitlines() if path and os.path.exists(path) else []
        items = [(l.startswith("ok: "), l) for l in lines if l.startswith(("ok: ", "FAILED: "))]
        line, rc = verdict_line(items)
        print(line)
        return rc
    checks = Checks()
    if a.cmd == "fail":
        checks.add((False, a.message), a.label)
        return 0
    elif a.cmd == "run":
        checks.attempt(run, a.index, a.metrics or None, a.n, label=a.label)
    elif a.cmd == "close":
        checks.attempt(close, a.a, a.b, float(a.rtol), float(a.frac), label=a.label)
    elif a.cmd == "ranks":
        checks.attempt(ranks, a.a, a.b, a.backend, label=a.label)
    elif a.cmd == "cosine":
        checks.attempt(cosine, a.a, a.b, a.minimum, label=a.label)
    else:
        checks.attempt(same, a.a, a.b, label=a.label)
    return 0 if checks.items[-1][0] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
