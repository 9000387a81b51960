#!/usr/bin/env python3
"""make_h5_seeds.py: writes the committed seed corpus of the h5probe fuzzer (tests/fuzz/corpus/h5probe).

Small HDF5 files (a few KiB) covering what va_input_probe distinguishes: every supported element type,
contiguous / chunked / filtered / compact layouts, the ann-benchmarks layout with a 'distance'
attribute (fixed and variable-length strings, wrong types), and every rejection (missing, group, link,
1-D/3-D/scalar/null dataspace, empty, unsupported types, no data written, truncated). Files made by
the project's own tools with the system HDF5 (h5tool make-bad, vecanneal gen) are added by
make_h5_seeds.sh. Needs h5py; writes with libver 'earliest' (and one v110 file) so that HDF5 1.10
reads them. Not run by CI: the output is committed.
The regression inputs of bugs found this way go to REGDIR (tests/fuzz/regressions/h5probe).
usage: make_h5_seeds.py OUTDIR REGDIR"""
import os
import sys

import h5py
import numpy as np

out, regdir = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
os.makedirs(regdir, exist_ok=True)
rng = np.random.default_rng(7)


def f(name, **kw):
    return h5py.File(os.path.join(out, name), "w", libver=kw.pop("libver", "earliest"), **kw)


def x(n=6, d=3, dt="<f4"):
    return rng.standard_normal((n, d)).astype(dt)


for dt, tag in (("<f4", "f32"), ("<f8", "f64"), ("<f2", "f16"), ("u1", "u8"), ("i1", "i8"), (">f4", "f32be")):
    with f(f"{tag}.h5") as h:
        h["train"] = x(dt=dt) if dt[-2] == "f" else rng.integers(0, 100, (6, 3)).astype(dt)

with f("ann_angular.h5") as h:  # ann-benchmarks: root attribute, variable-length string
    h["train"] = x(8, 4)
    h["test"] = x(2, 4)
    h["neighbors"] = np.zeros((2, 3), "i4")
    h["distances"] = np.zeros((2, 3), "f4")
    h.attrs["distance"] = "angular"
with f("attr_dataset_fixed.h5") as h:  # dataset attribute, fixed-length string
    h["train"] = x()
    h["train"].attrs.create("distance", np.bytes_("cosine"), dtype="S6")
with f("attr_nonstring.h5") as h:
    h["train"] = x()
    h.attrs["distance"] = 3
with f("attr_long.h5") as h:
    h["train"] = x()
    h["train"].attrs.create("distance", np.bytes_("e" * 200), dtype="S200")
with f("attr_array.h5") as h:
    h["train"] = x()
    h.attrs["distance"] = ["angular", "euclidean"]

with f("chunked_gzip.h5") as h:
    h.create_dataset("train", data=x(20, 4), chunks=(5, 4), compression="gzip")
with f("chunked_shuffle_fletcher.h5") as h:
    h.create_dataset("train", data=x(20, 4), chunks=(4, 2), shuffle=True, fletcher32=True)
with f("chunked_unlimited.h5") as h:
    h.create_dataset("train", data=x(10, 4), maxshape=(None, 4), chunks=(3, 4))
with f("v110_chunked.h5", libver="v110") as h:
    g = h.create_group("g")
    g.create_dataset("train", data=x(10, 4), maxshape=(None, None), chunks=(2, 2))
    h["train"] = h["g/train"]  # hard link
with f("compact.h5") as h:
    space = h5py.h5s.create_simple((4, 2))
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    ds = h5py.h5d.create(h.id, b"train", h5py.h5t.IEEE_F32LE, space, dcpl=dcpl)
    ds.write(h5py.h5s.ALL, h5py.h5s.ALL, x(4, 2))

with f("group.h5") as h:
    h.create_group("train")
with f("softlink.h5") as h:
    h["data/x"] = x()
    h["train"] = h5py.SoftLink("/data/x")
with f("dangling_softlink.h5") as h:
    h["train"] = h5py.SoftLink("/nowhere")
with f("extlink.h5") as h:
    h["train"] = h5py.ExternalLink("missing-file.h5", "/train")
with f("nodataset.h5") as h:
    h["test"] = x()

with f("dims1.h5") as h:
    h["train"] = np.arange(8, dtype="f4")
with f("dims3.h5") as h:
    h["train"] = np.zeros((2, 2, 2), "f4")
with f("scalar.h5") as h:
    h["train"] = np.float32(1)
with f("nullspace.h5") as h:
    h.create_dataset("train", data=h5py.Empty("f4"))
with f("empty_rows.h5") as h:
    h.create_dataset("train", shape=(0, 4), dtype="f4")
with f("empty_cols.h5") as h:
    h.create_dataset("train", shape=(4, 0), dtype="f4")
with f("nodata.h5") as h:
    h.create_dataset("train", shape=(5, 3), dtype="f4")  # late allocation: no storage
with f("int32.h5") as h:
    h["train"] = np.zeros((4, 2), "i4")
with f("compound.h5") as h:
    h["train"] = np.zeros((4, 2), [("a", "f4"), ("b", "i2")])
with f("string.h5") as h:
    h["train"] = np.array([[b"ab", b"cd"]], "S2")
with f("bool.h5") as h:
    h["train"] = np.zeros((3, 2), bool)
with f("nan.h5") as h:
    a = x()
    a[2, 1] = np.nan
    h["train"] = a

# Truncated: a contiguous dataset whose bytes run past the end of the file.
p = os.path.join(out, "truncated.h5")
with f("truncated.h5") as h:
    h["train"] = x(64, 16)
size = os.path.getsize(p)
with open(p, "r+b") as fh:
    fh.truncate(size // 2)

# Not HDF5 at all, or only its signature.
open(os.path.join(out, "empty_file.h5"), "wb").close()
with open(os.path.join(out, "signature_only.h5"), "wb") as fh:
    fh.write(b"\x89HDF\r\n\x1a\n")
with open(os.path.join(out, "text.h5"), "wb") as fh:
    fh.write(b"not an hdf5 file\n")
# --- regressions (docs/testing.md, "Findings") ---
def r(name):
    return h5py.File(os.path.join(regdir, name), "w", libver="earliest")


# F1: 'distance' holding an array of strings: read_str_attr read every element into a one-element
# buffer (heap overflow for fixed-length strings, stack overflow for variable-length ones).
with r("distance_array_fixed.h5") as h:
    h["train"] = np.ones((4, 2), "f4")
    h["train"].attrs.create("distance", np.array([b"angular", b"cosine!", b"euclide"], dtype="S7"))
with r("distance_array_vlen.h5") as h:
    h["train"] = np.ones((4, 2), "f4")
    h.attrs.create("distance", ["angular"] * 5, dtype=h5py.string_dtype("ascii"))
# F2: UTF-8 strings (what h5py writes for attrs['distance'] = 'angular', as ann-benchmarks does)
# were not read (HDF5 does not convert UTF-8 to the ASCII memory type), so metric = auto missed
# 'angular'. Checked by h5probe.expect (hint cosine).
with r("distance_vlen_utf8.h5") as h:
    h["train"] = np.ones((3, 2), "f4")
    h.attrs["distance"] = "angular"
with r("distance_fixed_utf8.h5") as h:
    h["train"] = np.ones((4, 2), "f4")
    h["train"].attrs.create("distance", "angular", dtype=h5py.string_dtype("utf-8", 7))
print(len(os.listdir(out)), "files in", out, "and", len(os.listdir(regdir)), "in", regdir)
