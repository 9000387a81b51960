#!/usr/bin/env python3
"""Per-iteration cost model of `vecanneal compress` (docs/memory.md), checked against a scaling
study (bench/scaling/run.py output: scaling.csv + calibration.json), and its prediction for a GPU node.

  python3 bench/scaling/cost_model.py bench/results/YYYY-MM-DD_cpu_scaling      # check, markdown on stdout
  python3 bench/scaling/cost_model.py DIR --write                            # also DIR/MODEL_CHECK.md
  python3 bench/scaling/cost_model.py --predict-gpu                          # the 4 x H200 prediction only

Model, per rank and iteration (n_l = n / P rows on the rank, W = d + 3 statistics per anchor):
  assign    = 2 n_l k d / F  +  n_l d / R            (product; argmin scan and exact r folded in F / R)
  reduce    = n_l d / R                              (robust statistics: one pass over the rows)
  allreduce = T(4 k) + T(8 (k W + 1))  [+ T(8 k trim_bins) with robust=trim]
              T(S) = 2 (P - 1) alpha + 2 (P - 1) / P * S * beta        (ring allreduce)
  update    = O(k d), maintenance = O(k^2 d) every maintenance_interval iterations (only when
              k_min / k_max widen k's range; a no-op by default)
  I/O       = n d elem_size bytes read once (amortised over the iterations)
Two parameter sets are compared with the measurements:
  calib-only: F = single-thread sgemm rate of one assign tile, R = streaming read rate / 4 bytes
              (every constant from calib.c, nothing from vecanneal runs)
  fitted:     F and R fitted on the strong-scaling run with the fewest ranks, then used for every
              other point (a prediction for those)
Oversubscribed points (ranks x threads > cores) get the compute terms multiplied by
ranks x threads / cores (time sharing).
"""
import argparse
import csv
import json
import os
import sys

LOOP = ["assign", "reduce", "allreduce", "update", "maintenance"]


def fit_alpha_beta(sweep, P):
    """T(S) = alpha * 2(P-1) + beta * 2(P-1)/P * S, fitted robustly on a noisy sweep: alpha from the median
    time of the messages of at most 512 B, beta from the median of the excess time per byte of the messages
    of 32 KiB and more."""
    small = sorted(t for s, t in sweep if s <= 512 and t > 0)
    large = [(s, t) for s, t in sweep if s >= 32768 and t > 0]
    if not small or not large:
        return None
    alpha = small[len(small) // 2] / (2.0 * (P - 1))
    per_byte = sorted(max(t - 2.0 * (P - 1) * alpha, 0.0) / (2.0 * (P - 1) / P * s) for s, t in large)
    m = len(per_byte)
    beta = per_byte[m // 2] if m % 2 else 0.5 * (per_byte[m // 2 - 1] + per_byte[m // 2])
    return alpha, beta


def ring(S, P, ab):
    if P < 2 or ab is None:
        return 0.0
    a, b = ab
    return 2.0 * (P - 1) * a + 2.0 * (P - 1) / P * S * b


def allreduce_bytes(k, d, trim_bins=0):
    """Bytes of the allreduces of one iteration (src/core/anneal.c): the MAX of the k farthest-member distances
    (float), the SUM of the k x (d + 3) statistics plus 2 scalars (changed rows, stop flag) in double, and
    with robust=trim the k x trim_bins histogram (double)."""
    calls = [4.0 * k, 8.0 * (k * (d + 3) + 2)]
    if trim_bins:
        calls.append(8.0 * k * trim_bins)
    return calls


def load(dirname):
    with open(os.path.join(dirname, "scaling.csv")) as f:
        rows = [dict(r) for r in csv.DictReader(f)]
    for r in rows:
        for key, v in list(r.items()):
            try:
                r[key] = float(v) if key not in ("mode", "precision", "backend", "phase_method") else v
            except (TypeError, ValueError):
                pass
        for key in ("ranks", "n", "d", "k", "iterations"):
            r[key] = int(r[key])
    calib = {}
    p = os.path.join(dirname, "calibration.json")
    if os.path.exists(p):
        with open(p) as f:
            calib = json.load(f)
    return rows, calib


def check(dirname, cores, threads):
    rows, calib = load(dirname)
    comp = calib.get("compute", {})
    F0 = comp.get("sgemm_flops_per_s")
    R0 = comp.get("read_bytes_per_s", 0) / 4.0 if comp.get("read_bytes_per_s") else None
    ab = {}
    for p, a in calib.get("allreduce", {}).items():
        ab[int(p)] = fit_alpha_beta(a["allreduce"], int(p))
    base = min((r for r in rows if r["mode"] == "strong"), key=lambda r: r["ranks"], default=None) or min(rows, key=lambda r: r["ranks"])
    nl0 = base["n"] / base["ranks"]
    d, k = base["d"], base["k"]
    t_red0 = base["reduce_mean_s_per_iter"]
    R_fit = nl0 * d / t_red0 if t_red0 > 0 else R0
    t_as0 = base["assign_mean_s_per_iter"] - nl0 * d / R_fit  # the r pass, at the reduce rate
    F_fit = 2.0 * nl0 * k * d / t_as0 if t_as0 > 0 else F0
    upd0 = base["update_mean_s_per_iter"]
    mnt0 = base["maintenance_mean_s_per_iter"]

    out = []
    out.append("Model constants (from %s):" % os.path.basename(os.path.normpath(dirname)))
    out.append("")
    if F0:
        out.append("- calib-only: F = %.1f GFLOP/s (single-thread sgemm, one assign tile), R = %.2f G elements/s "
                   "(streaming read %.1f GB/s / 4 B)" % (F0 / 1e9, R0 / 1e9, 4 * R0 / 1e9))
    out.append("- fitted on strong P=%d (n_l = %d): F = %.1f GFLOP/s (assign incl. argmin scan), R = %.3f G elements/s "
               "(reduce: %.2f ns per row element)" % (base["ranks"], nl0, F_fit / 1e9, R_fit / 1e9, 1e9 / R_fit))
    for p, v in sorted(ab.items()):
        if v:
            out.append("- MPI_Allreduce on %d ranks (calib sweep, ring fit, medians): alpha = %.2f us, beta = %.3f ns/B (%.2f GB/s)"
                       % (p, v[0] * 1e6, v[1] * 1e9, 1 / v[1] / 1e9 if v[1] > 0 else float("inf")))
    mb = [r["allreduce_bytes_per_iter"] for r in rows if r["ranks"] > 1 and isinstance(r.get("allreduce_bytes_per_iter"), float)]
    if mb:
        out.append("- allreduce bytes per iteration: model %.0f (4 k + 8 (k (d+3) + 2)), measured %s"
                   % (sum(allreduce_bytes(k, d)), ", ".join("%.0f" % b for b in sorted(set(mb)))))
    out.append("- update %.3f ms and maintenance %.3f ms per iteration taken as measured at P=%d (O(k d), O(k^2 d): "
               "independent of P)" % (1e3 * upd0, 1e3 * mnt0, base["ranks"]))
    out.append("")
    out.append("| mode | P | n_l | phase | calib-only ms | fitted ms | measured ms (mean over ranks) [min, max] |")
    out.append("| --- | ---: | ---: | --- | ---: | ---: | --- |")
    summary = []
    for r in rows:
        P, n = r["ranks"], r["n"]
        nl = n / P
        over = max(1.0, P * max(threads, 1) / float(cores))
        S = allreduce_bytes(r["k"], r["d"])
        t_ar = sum(ring(s, P, ab.get(P)) for s in S)
        pred = {}
        for label, F, R in (("calib", F0, R0), ("fit", F_fit, R_fit)):
            if not F or not R:
                pred[label] = None
                continue
            pred[label] = {
                "assign": over * (2.0 * nl * r["k"] * r["d"] / F + nl * r["d"] / R),
                "reduce": over * (nl * r["d"] / R),
                "allreduce": t_ar,
                "update": upd0,
                "maintenance": mnt0,
            }
        for ph in LOOP:
            meas = r["%s_mean_s_per_iter" % ph]
            mn, mx = r["%s_min_s_per_iter" % ph], r["%s_max_s_per_iter" % ph]
            c = pred["calib"][ph] if pred["calib"] else float("nan")
            f = pred["fit"][ph] if pred["fit"] else float("nan")
            out.append("| %s | %d%s | %d | %s | %.2f | %.2f | %.2f [%.2f, %.2f] |" % (
                r["mode"], P, "*" if over > 1 else "", nl, ph, 1e3 * c, 1e3 * f, 1e3 * meas, 1e3 * mn, 1e3 * mx))
        tc = sum(pred["calib"].values()) if pred["calib"] else float("nan")
        tf = sum(pred["fit"].values()) if pred["fit"] else float("nan")
        out.append("| %s | %d%s | %d | **total (loop)** | **%.1f** | **%.1f** | **%.1f** (ms/iteration) |" % (
            r["mode"], P, "*" if over > 1 else "", nl, 1e3 * tc, 1e3 * tf, r["ms_per_iteration"]))
        summary.append((r["mode"], P, tc * 1e3, tf * 1e3, r["ms_per_iteration"]))
    out.append("")
    out.append("\\* oversubscribed: compute terms x ranks x threads / cores.")
    out.append("")
    out.append("| mode | P | calib-only / measured | fitted / measured |")
    out.append("| --- | ---: | ---: | ---: |")
    for m, P, tc, tf, tm in summary:
        out.append("| %s | %d | %.2f | %.2f |" % (m, P, tc / tm, tf / tm))
    out.append("")
    # I/O, once
    rd = [(r["read_mean_s_per_iter"] * r["iterations"], r["n"], r["ranks"]) for r in rows]
    out.append("Read (once): " + ", ".join("%s P=%d: %.2f s = %.0f MB/s per job" % (r["mode"], P, t, r["n"] * r["d"] * 4 / t / 1e6)
                                            for (t, n, P), r in zip(rd, rows) if t > 0))
    return "\n".join(out)


def predict_gpu(n=32_000_000, d=128, k=1024, P=4, elem=2, F=790e12, bw=4.3e12, ar_1mb=20e-6, ar_lat=10e-6,
                eff=(1.0, 0.5), merge_ns=2.0, interval=10, read_gbs=(2.0, 10.0), iters=100):
    nl = n / P
    flops = 2.0 * nl * k * d
    lines = []
    lines.append("| term | formula | per GPU | time |")
    lines.append("| --- | --- | ---: | ---: |")
    t = {}
    for e in eff:
        t["mma%.0f" % (100 * e)] = flops / (F * e)
    lines.append("| assign product (fused mma, fp16) | 2 n_l k d / F | %.3g TFLOP | %s |" % (
        flops / 1e12, " / ".join("%.2f ms at %.0f%% of peak" % (1e3 * t["mma%.0f" % (100 * e)], 100 * e) for e in eff)))
    x_lp = nl * d * elem
    lines.append("| read X (fp16) in the assign | n_l d 2 B / HBM | %.2f GB | %.2f ms (hidden under the product: intensity k = %d flop/B > %.0f) |"
                 % (x_lp / 1e9, 1e3 * x_lp / bw, k, F / bw))
    x32 = nl * d * 4
    t["r"] = x32 / bw
    lines.append("| exact r of the winner (fp32 row, double) | n_l d 4 B / HBM | %.2f GB | %.2f ms |" % (x32 / 1e9, 1e3 * t["r"]))
    t["stats"] = (x32 + nl * 8) / bw
    lines.append("| statistics (fp32 rows + assign, r) | (n_l d 4 + 8 n_l) B / HBM | %.2f GB | %.2f ms (lower bound: atomics into k W doubles) |"
                 % ((x32 + nl * 8) / 1e9, 1e3 * t["stats"]))
    S = allreduce_bytes(k, d)
    t["allreduce"] = ar_1mb * (S[1] / 1e6) + ar_lat
    lines.append("| allreduce | %.2f MB sum + %.0f kB max | %.2f MB | %.3f ms (1 MB ~ 20 us over NVLink + one latency-bound call) |"
                 % (S[1] / 1e6, S[0] / 1e3, sum(S) / 1e6, 1e3 * t["allreduce"]))
    xfer = 8.0 * k * (d + 3) + 4.0 * k * d
    t["update"] = xfer / 25e9 + 50e-6
    lines.append("| update on the host + transfers | k W doubles down, k d floats up (PCIe ~25 GB/s) + ~50 us of launches | %.2f MB | %.2f ms |"
                 % (xfer / 1e6, 1e3 * t["update"]))
    lo = t["mma100"] + t["r"] + t["stats"] + t["allreduce"] + t["update"]
    hi = t["mma50"] + t["r"] + t["stats"] + t["allreduce"] + t["update"]
    lines.append("| **loop total** | | | **%.1f to %.1f ms/iteration** = %.1f to %.1f G rows/s |" % (1e3 * lo, 1e3 * hi, n / hi / 1e9, n / lo / 1e9))
    mt = merge_ns * 1e-9 * k * k * d
    lines.append("| maintenance (host, only with k_min/k_max widened) | %.1f ns x k^2 d every %d iterations | | +%.1f ms/iteration amortised (%.0f ms per event) |"
                 % (merge_ns, interval, 1e3 * mt / interval, 1e3 * mt))
    io = n * d * elem
    lines.append("| read the input (once) | n d 2 B | %.2f GB in all | %s |" % (
        io / 1e9, " / ".join("%.1f s at %.0f GB/s aggregate" % (io / (g * 1e9), g) for g in read_gbs)))
    return "\n".join(lines), lo, hi


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?", help="a run.py results folder")
    ap.add_argument("--cores", type=int, default=0, help="cores of the measured machine [from the report, else this machine]")
    ap.add_argument("--threads", type=int, default=1, help="threads per rank of the study [1]")
    ap.add_argument("--write", action="store_true", help="write DIR/MODEL_CHECK.md")
    ap.add_argument("--predict-gpu", action="store_true", help="print the 4 x H200 prediction")
    a = ap.parse_args(argv)
    if not a.dir and not a.predict_gpu:
        ap.error("give a results folder or --predict-gpu")
    text = []
    if a.dir:
        cores = a.cores
        if not cores:
            try:
                import re
                rep = open(os.path.join(a.dir, "REPORT.md")).read()
                cores = int(re.search(r"(\d+) usable core", rep).group(1))
            except (OSError, AttributeError, ValueError):
                cores = len(os.sched_getaffinity(0))
        text.append(check(a.dir, cores, a.threads))
    if a.predict_gpu:
        tbl, lo, hi = predict_gpu()
        text.append("PREDICTION (not measured): 4 x H200, n = 32M, d = 128, k = 1024, fp16 products\n\n" + tbl)
    s = "\n\n".join(text) + "\n"
    sys.stdout.write(s)
    if a.write and a.dir:
        with open(os.path.join(a.dir, "MODEL_CHECK.md"), "w") as f:
            f.write("# Cost model check (bench/scaling/cost_model.py)\n\n" + s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
