#!/usr/bin/env python3
"""search_gpu_torch.py DATA.h5 TRUTH.h5 --json OUT.json [--precision P]: the peer of `bash bench/run.sh
search-gpu` (run by bench/search_gpu.py in its own process, so that its device memory and context are gone
before vecanneal runs): an exact brute force in PyTorch on one GPU at a matmul precision, and the
device's copy bandwidth.

Brute force: the k nearest DATA:/train rows of every DATA:/test row by squared l2. The base is uploaded
once and its squared norms computed once (outside the timing, as an index would hold them); then, timed,
for every chunk of CHUNK base rows: D = ||x||^2 - 2 Q X_chunk^T (torch.addmm, q x CHUNK float32, the only
large buffer: never q x n), torch.topk(D, k, largest=False) and a merge with the running top-k (torch.cat
+ topk); ||q||^2 is added at the end. The products, by --precision:
  fp32  float32 throughout, TF32 off (torch.backends.cuda.matmul.allow_tf32 = False, float32 matmul
        precision "highest"): the benchmark's ground truth
  tf32  float32 tensors with TF32 on (allow_tf32 = True, float32 matmul precision "high"): cuBLAS
        multiplies on the tensor cores from the operands' top 19 bits, accumulating in float32
  fp16, bf16  the base and the queries cast to that type once on the device (rounded to nearest; the
        norms are float32 sums over the cast values); the products on the tensor cores, accumulated in
        float32 (the reduced-precision reductions off); they leave addmm as float32 through its
        out_dtype where this PyTorch has it for the device, else as fp16/bf16 products widened to
        float32 ("products" in the JSON says which)
Queries per second = q / the best of REPEATS runs, each timed with torch.cuda.synchronize() before and
after (all queries at once). The ids of the last run go to TRUTH.h5:/neighbors (int64, q x k) with their
/distances (float32): at fp32, the ground truth of the benchmark's recall.

Copy bandwidth (skipped with --copy-mib 0): dst.copy_(src) of two float32 buffers of COPY_MIB MiB each
on the device, 10 copies per timing, best of 5 timings; GB/s = 2 x bytes x 10 / seconds (every byte read
once and written once, as STREAM's "copy" counts it).

--device cpu runs the same code on the CPU (a check of the script without a GPU; its figures mean
nothing for the benchmark; TF32 has no effect there). Prints one JSON object and writes it to --json."""
import argparse
import json
import time

import h5py
import numpy as np


PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def distance_product(torch, precision, dev):
    """(fn(xn, Qc, Xc) -> float32 D = xn - 2 Qc Xc^T, the words for "products"): addmm at the
    precision; for fp16/bf16 with a float32 result where addmm has out_dtype on this device (tried once
    on a small case of the same shapes' kind), else the 16-bit products widened."""
    if precision in ("fp32", "tf32"):
        return (lambda xn, Qc, Xc: torch.addmm(xn, Qc, Xc.T, beta=1.0, alpha=-2.0)), "float32"
    half = torch.float16 if precision == "fp16" else torch.bfloat16
    try:
        m = torch.ones(2, 8, dtype=half, device=dev)
        torch.addmm(torch.zeros(1, 2, device=dev), m, m.T, beta=1.0, alpha=-2.0, out_dtype=torch.float32)
        return (lambda xn, Qc, Xc: torch.addmm(xn, Qc, Xc.T, beta=1.0, alpha=-2.0, out_dtype=torch.float32),
                "float32 (addmm out_dtype)")
    except (RuntimeError, TypeError, NotImplementedError):
        return (lambda xn, Qc, Xc: torch.mm(Qc, Xc.T).float().mul_(-2.0).add_(xn)), "%s, widened to float32" % precision


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", help="HDF5 file with /train and /test (float32)")
    ap.add_argument("truth", help="output: /neighbors and /distances of the brute force")
    ap.add_argument("--json", required=True, help="output: the figures")
    ap.add_argument("--k", type=int, default=10, help="neighbours per query [10]")
    ap.add_argument("--chunk", type=int, default=1 << 18, help="base rows per chunk [262144]")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs; the best counts [3]")
    ap.add_argument("--copy-mib", type=int, default=4096, help="MiB per copy buffer; 0: no copy measurement [4096]")
    ap.add_argument("--precision", default="fp32", choices=PRECISIONS, help="the products' precision [fp32]")
    ap.add_argument("--device", default="cuda", help="torch device [cuda]")
    a = ap.parse_args()

    import torch

    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    product, products = distance_product(torch, a.precision, dev)
    out = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "device": torch.cuda.get_device_name(dev) if cuda else "cpu", "chunk": a.chunk, "precision": a.precision,
           "tf32": tf32, "products": products, "k": a.k}

    # copy bandwidth
    out["copy_mib"] = a.copy_mib
    if a.copy_mib > 0:
        elems = a.copy_mib * (1 << 20) // 4
        src = torch.ones(elems, dtype=torch.float32, device=dev)
        dst = torch.empty_like(src)
        dst.copy_(src)
        sync()
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(10):
                dst.copy_(src)
            sync()
            best = min(best, time.perf_counter() - t)
        out["copy_GBps"] = 2 * elems * 4 * 10 / best / 1e9
        del src, dst
        if cuda:
            torch.cuda.empty_cache()

    with h5py.File(a.data, "r") as f:
        t = time.perf_counter()
        X = torch.from_numpy(np.ascontiguousarray(f["/train"][()], dtype=np.float32))
        Q = torch.from_numpy(np.ascontiguousarray(f["/test"][()], dtype=np.float32))
        out["read_seconds"] = time.perf_counter() - t
    n, q = X.shape[0], Q.shape[0]
    t = time.perf_counter()
    X, Q = X.to(dev), Q.to(dev)
    if a.precision in ("fp16", "bf16"):  # the stored values: the norms below are theirs
        half = torch.float16 if a.precision == "fp16" else torch.bfloat16
        X, Q = X.to(half), Q.to(half)
    Xf = X.float()  # X itself at fp32 and tf32
    xn = (Xf * Xf).sum(1)
    del Xf
    sync()
    out["upload_seconds"] = time.perf_counter() - t
    out["n"], out["q"], out["d"] = n, q, X.shape[1]

    def brute():
        Qf = Q.float()
        qn = (Qf * Qf).sum(1, keepdim=True)
        best_d = best_i = None
        for s in range(0, n, a.chunk):
            e = min(n, s + a.chunk)
            D = product(xn[s:e].unsqueeze(0), Q, X[s:e])
            dd, ii = torch.topk(D, min(a.k, e - s), dim=1, largest=False)
            ii += s
            if best_d is not None:
                dd, pos = torch.topk(torch.cat([best_d, dd], 1), a.k, dim=1, largest=False)
                ii = torch.gather(torch.cat([best_i, ii], 1), 1, pos)
            best_d, best_i = dd, ii
            del D
        return best_d + qn, best_i

    secs = []
    for _ in range(a.repeats):
        sync()
        t = time.perf_counter()
        dist, ids = brute()
        sync()
        secs.append(time.perf_counter() - t)
    out["seconds"] = secs
    out["qps"] = q / min(secs)
    out["peak_memory_bytes"] = torch.cuda.max_memory_allocated(dev) if cuda else None
    with h5py.File(a.truth, "w") as f:
        f["/neighbors"] = ids.cpu().numpy().astype(np.int64)
        f["/distances"] = dist.cpu().numpy().astype(np.float32)
        f.attrs["source"] = "bench/search_gpu_torch.py: PyTorch %s brute force (addmm + topk), products %s" % (
            a.precision, products)
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
