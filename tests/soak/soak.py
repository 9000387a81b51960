#!/usr/bin/env python3
"""soak.py: a bounded soak of `vecanneal compress`: N short jobs with random valid configurations on
1-4 ranks (oversubscribed on small machines), each run twice with the same seed; every job must exit 0
and the two runs must write bitwise identical indexes (h5tool same). Stdlib only.

usage: soak.py --vecanneal BIN --h5tool TOOL [--jobs 200] [--seed 1] [--work DIR] [--time-limit 1500]
Prints one line per failure and a closing line 'N passed, N failed'.
"""
import argparse, os, random, shutil, subprocess, sys, tempfile, time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vecanneal", required=True)
    ap.add_argument("--h5tool", required=True)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", default=None)
    ap.add_argument("--time-limit", type=float, default=1500, help="stop starting new jobs after this many seconds")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    work = a.work or tempfile.mkdtemp(prefix="va-soak-")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
               OMPI_MCA_btl_base_warn_component_unused="0")
    datasets = []
    for i, (n, d, c, kind, dtype) in enumerate([(800, 4, 5, "gauss", "float32"), (3000, 16, 20, "gauss", "float16"),
                                                 (5000, 32, 50, "gauss", "float32"), (1200, 128, 1, "vlc-demo", "float32")]):
        path = os.path.join(work, f"d{i}.h5")
        subprocess.run(["mpirun", "-n", "2", a.vecanneal, "gen", "--out", path, "--n", str(n), "--d", str(d), "--clusters", str(c),
                        "--kind", kind, "--dtype", dtype, "--seed", str(i + 1), "--outliers", "0.01" if kind == "gauss" else "0"],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        datasets.append((path, n))
    passed = failed = 0
    t0 = time.time()
    ranks_used = {}
    for job in range(a.jobs):
        if time.time() - t0 > a.time_limit:
            print(f"time limit reached after {job} jobs")
            break
        path, n = rng.choice(datasets)
        k = rng.randint(1, min(48, n // 4))
        sets = {
            "seed": rng.randint(0, 10**6), "robust": rng.choice(["none", "trim", "huber"]),
            "init": rng.choice(["kmeans||", "random", "farthest"]), "metric": rng.choice(["auto", "l2", "cosine"]),
            "lr": round(rng.uniform(0.05, 3.0), 3), "T0": round(rng.uniform(0.1, 10), 3), "cooling_rate": round(rng.uniform(0, 0.1), 3),
            "max_step": rng.choice([0, 0.05, 1.0]), "momentum": rng.choice([0, 0.3, 0.8]), "max_iter": rng.randint(1, 25),
            "tol": rng.choice([0, 1e-4, 1e-2]), "tol_mode": rng.choice(["relative", "absolute"]), "min_changes": rng.choice([-1, 0, 5]),
            "maintenance_interval": rng.choice([0, 1, 3, 7]), "merge_factor": rng.choice([0, 0.1, 0.5]),
            "split_count_factor": rng.choice([0, 1.5, 3]), "split_var_factor": rng.choice([0, 2, 4]),
            "split_var_mode": rng.choice(["relative", "absolute"]), "k_min": rng.choice([0, 1, max(1, k // 2)]),
            "k_max": rng.choice([0, -1, k + 8]), "trim_bins": rng.choice([8, 64, 256]), "threads": rng.choice([1, 2]),
            "io": rng.choice(["auto", "independent"]), "checkpoint_every": rng.choice([0, 0, 4]), "progress_every": 0,
        }
        if sets["k_max"] > 0 and sets["k_max"] < sets["k_min"]:
            sets["k_max"] = 0
        P = rng.randint(1, 4)
        ranks_used[P] = ranks_used.get(P, 0) + 1
        outs = []
        ok = True
        for rep in range(2):
            out = os.path.join(work, f"job{job}_{rep}.h5")
            cmd = ["timeout", "120", "mpirun", "-n", str(P), a.vecanneal, "compress", "--input", f"{path}:/train", "--anchors", str(k),
                   "--out", out, "--backend", "cpu"]
            for key, v in sets.items():
                cmd += ["--set", f"{key}={v}"]
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if p.returncode != 0:
                print(f"FAIL job {job}: exit {p.returncode}: {' '.join(cmd)}\n{p.stdout[-1500:]}")
                ok = False
                break
            outs.append(out)
        if ok:
            s = subprocess.run([a.h5tool, "same", outs[0], outs[1]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if s.returncode != 0:
                print(f"FAIL job {job}: repeated run differs: {s.stdout.strip()} (P={P}, {sets})")
                ok = False
        for o in outs:
            os.remove(o)
        passed += ok
        failed += not ok
    secs = time.time() - t0
    print(f"soak: {passed + failed} jobs ({dict(sorted(ranks_used.items()))} by rank count), {2 * (passed + failed)} runs in {secs:.0f} s")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
