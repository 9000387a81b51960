#!/usr/bin/env python3
"""vecfiles.py: writes the vector files of tests/jobs/formats.sh from an HDF5 dataset's rows.

The rows come from a contiguous dataset's raw bytes (located by h5dump -p -H, so no h5py is needed);
.npy files are written by numpy.save, TEXMEX files (.fvecs, .bvecs, .ivecs: every row an int32 d, then
d components, little-endian) by the small writer below.

  vecfiles.py npy SRC.h5 DTYPE OUT.npy [fortran|bigendian]   rows as DTYPE (numpy name), in C order
  vecfiles.py texmex SRC.h5 DTYPE OUT                        rows as float32/uint8/int32 in TEXMEX layout
  vecfiles.py bad KIND SRC.h5 OUT                            a malformed file (kinds in main)
Several commands in one run (numpy loads once): separate them with '::'.
"""
import re
import subprocess
import sys

import numpy as np

H5_TYPES = {"H5T_IEEE_F32LE": "<f4", "H5T_IEEE_F64LE": "<f8", "H5T_STD_U8LE": "|u1", "H5T_STD_I8LE": "|i1",
            "16-bit little-endian floating-point": "<f2"}


def load(path, dataset="/train"):
    """The dataset's rows, read from the file's bytes at the offset h5dump reports."""
    out = subprocess.run(["h5dump", "-p", "-H", "-d", dataset, path], check=True, capture_output=True,
                         text=True).stdout
    dims = [int(x) for x in re.search(r"DATASPACE\s+SIMPLE \{ \( ([0-9, ]+) \)", out).group(1).split(",")]
    if not re.search(r"STORAGE_LAYOUT \{\s*CONTIGUOUS", out):
        sys.exit("vecfiles.py: %s:%s is not contiguous" % (path, dataset))
    offset = int(re.search(r"OFFSET (\d+)", out).group(1))
    dtype = next((v for k, v in H5_TYPES.items() if k in out), None)
    if dtype is None:
        sys.exit("vecfiles.py: unknown element type in %s:%s" % (path, dataset))
    x = np.fromfile(path, dtype=dtype, count=dims[0] * dims[1], offset=offset)
    return x.reshape(dims[0], dims[1])


def texmex(rows, dtype):
    """The TEXMEX layout: per row a little-endian int32 d, then the d components as dtype."""
    n, d = rows.shape
    rec = np.dtype([("d", "<i4"), ("v", dtype, (d,))])
    out = np.empty(n, dtype=rec)
    out["d"] = d
    out["v"] = rows
    return out.tobytes()


def as_type(rows, dtype):
    cast = rows.astype(dtype)
    if not np.array_equal(cast.astype(np.float64), rows.astype(np.float64)):
        sys.exit("vecfiles.py: the rows do not convert exactly to %s" % dtype)
    return cast


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "npy":
        rows = as_type(load(argv[2]), argv[3])
        how = argv[5] if len(argv) > 5 else ""
        if how == "fortran":
            rows = np.asfortranarray(rows)
        elif how == "bigendian":
            rows = rows.astype(rows.dtype.newbyteorder(">"))
        np.save(argv[4], rows, allow_pickle=False)
    elif cmd == "texmex":
        open(argv[4], "wb").write(texmex(as_type(load(argv[2]), argv[3]), argv[3]))
    elif cmd == "bad":
        kind, rows, out = argv[2], load(argv[3]).astype("<f4"), argv[4]
        n, d = rows.shape
        if kind == "truncated":  # the last row cut short
            open(out, "wb").write(texmex(rows, "<f4")[:-7])
        elif kind == "dims":  # row 3n/4 (in the last rank's block) says d + 1, the file's size still whole rows
            data = bytearray(texmex(rows, "<f4"))
            at = (3 * n // 4) * (4 + 4 * d)
            data[at:at + 4] = np.array(d + 1, dtype="<i4").tobytes()
            open(out, "wb").write(bytes(data))
        elif kind == "zero_d":
            open(out, "wb").write(np.array(0, dtype="<i4").tobytes() + rows[0].tobytes())
        elif kind == "int64":
            np.save(out, rows.astype("<i8"))
        elif kind == "1d":
            np.save(out, rows[:, 0].copy())
        elif kind == "3d":
            np.save(out, rows[: n // 2 * 2].reshape(n // 2, 2, d))
        elif kind == "empty":
            np.save(out, np.zeros((0, d), dtype="<f4"))
        elif kind == "nan":
            bad = rows.copy()
            bad[n - 3, 1] = np.nan
            np.save(out, bad)
        elif kind == "short_npy":  # the header promises more rows than the file holds
            np.save(out, rows)
            with open(out, "r+b") as f:
                f.truncate(f.seek(0, 2) - 4 * d - 1)
        elif kind == "not_npy":
            open(out, "wb").write(b"rows,of,text\n1,2,3\n" * 10)
        else:
            sys.exit("vecfiles.py: unknown kind %s" % kind)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    args = sys.argv[1:]
    while args:
        one = args[:args.index("::")] if "::" in args else args
        args = args[len(one) + 1:]
        main([sys.argv[0]] + one)
