#!/usr/bin/env python3
"""make_vecfile_seeds.py: writes the committed seed corpus of the vecfile fuzzer (tests/fuzz/corpus/vecfile).

Small vector files covering what va_vecfile_probe distinguishes (docs/inputs.md): .npy files as numpy.save
writes them (format 1.0 and 2.0, every supported dtype, a Python-2 style 'L' shape) and every rejection
(wrong magic, unknown version, truncated header or data, bytes after the array, Fortran order, big-endian,
unsupported and structured dtypes, 0-D/1-D/3-D/9-D and empty shapes, a damaged dict); TEXMEX files (.fvecs,
.bvecs, .ivecs) that are valid, and truncated, empty, of zero or negative d, with a last row or a middle row
of another d. The harness probes every input as each of the four formats, so each seed feeds both parsers.
Needs numpy. Not run by CI: the output is committed.
usage: make_vecfile_seeds.py OUTDIR"""
import io
import os
import struct
import sys

import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(11)


def put(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def npy(a, version=None):
    b = io.BytesIO()
    np.lib.format.write_array(b, a, version=version)
    return b.getvalue()


def npy_raw(header, body=b"", magic=b"\x93NUMPY", version=(1, 0)):
    """A .npy file with a hand-written header dict (padded as numpy pads it)."""
    h = header.encode("latin1")
    h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
    return magic + bytes(version) + struct.pack("<H", len(h)) + h + body


def texmex(rows, fmt):
    return b"".join(struct.pack("<i", len(r)) + struct.pack(f"<{len(r)}{fmt}", *r) for r in rows)


x = rng.standard_normal((4, 3))
# valid .npy
put("npy_f4.npy", npy(x.astype("<f4")))
put("npy_f2.npy", npy(x.astype("<f2")))
put("npy_f8.npy", npy(x.astype("<f8")))
put("npy_u1.npy", npy((x * 40 + 100).astype("u1")))
put("npy_i1.npy", npy((x * 40).astype("i1")))
put("npy_v2.npy", npy(x.astype("<f4"), version=(2, 0)))
put("npy_one_row.npy", npy(x[:1].astype("<f4")))
put("npy_long_shape.npy", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (4L, 3L), }",
                                  x.astype("<f4").tobytes()))
put("npy_dquote_keys.npy", npy_raw('{"descr": "<f4", "fortran_order": False, "shape": (4, 3)}',
                                   x.astype("<f4").tobytes()))
# rejected .npy
put("npy_bad_magic.npy", b"\x93NUMPZ" + npy(x.astype("<f4"))[6:])
put("npy_version_4.npy", npy(x.astype("<f4"))[:6] + b"\x04\x00" + npy(x.astype("<f4"))[8:])
put("npy_short_prefix.npy", b"\x93NUMPY\x01")
put("npy_v2_short_prefix.npy", b"\x93NUMPY\x02\x00\x40\x00")
put("npy_header_past_end.npy", b"\x93NUMPY\x01\x00\xff\x7f{'descr': '<f4'")
put("npy_truncated_data.npy", npy(x.astype("<f4"))[:-5])
put("npy_trailing_bytes.npy", npy(x.astype("<f4")) + npy(x.astype("<f4")))
put("npy_fortran.npy", npy(np.asfortranarray(x.astype("<f4"))))
put("npy_fortran_garbage.npy", npy_raw("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (4, 3), }",
                                       x.astype("<f4").tobytes()))
put("npy_big_endian.npy", npy(x.astype(">f4")))
put("npy_i4.npy", npy((x * 40).astype("<i4")))
put("npy_complex.npy", npy(x.astype("<c8")))
put("npy_structured.npy", npy(np.zeros(4, dtype=[("a", "<f4"), ("b", "<f4", (2,))])))
put("npy_1d.npy", npy(x[:, 0].astype("<f4")))
put("npy_3d.npy", npy(x.reshape(2, 2, 3).astype("<f4")))
put("npy_9d.npy", npy(x.reshape(1, 1, 1, 1, 1, 1, 1, 4, 3).astype("<f4")))
put("npy_0d.npy", npy(np.float32(1)))
put("npy_empty_rows.npy", npy(np.zeros((0, 3), "<f4")))
put("npy_empty_cols.npy", npy(np.zeros((4, 0), "<f4")))
put("npy_negative_shape.npy", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (-4, 3), }",
                                      x.astype("<f4").tobytes()))
put("npy_huge_shape.npy", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775807, "
                                  "9223372036854775807), }", x.astype("<f4").tobytes()))
put("npy_shape_unclosed.npy", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3, }"))
put("npy_no_descr.npy", npy_raw("{'fortran_order': False, 'shape': (4, 3), }", x.astype("<f4").tobytes()))
put("npy_empty_header.npy", b"\x93NUMPY\x01\x00\x00\x00")
# valid TEXMEX
rows = x.astype("<f4").tolist()
put("fvecs_4x3.fvecs", texmex(rows, "f"))
put("bvecs_4x3.bvecs", texmex((x * 40 + 100).astype("u1").tolist(), "B"))
put("ivecs_4x3.ivecs", texmex((x * 40).astype("<i4").tolist(), "i"))
put("fvecs_one_row.fvecs", texmex(rows[:1], "f"))
# rejected TEXMEX
put("fvecs_empty.fvecs", b"")
put("fvecs_short_d.fvecs", b"\x03\x00")
put("fvecs_d0.fvecs", struct.pack("<i", 0) * 4)
put("fvecs_negative_d.fvecs", struct.pack("<i", -3) + b"\x00" * 12)
put("fvecs_huge_d.fvecs", struct.pack("<i", 2**31 - 1) + b"\x00" * 12)
put("fvecs_truncated.fvecs", texmex(rows, "f")[:-3])
put("fvecs_shorter_than_row.fvecs", texmex(rows[:1], "f")[:10])
put("fvecs_last_row_d.fvecs", texmex(rows[:3], "f") + struct.pack("<i", 2) + struct.pack("<3f", *rows[3]))
# accepted by the probe (first and last rows agree), refused by the read: a middle row of another d
mixed = texmex(rows, "f")
put("fvecs_middle_row_d.fvecs", mixed[:16] + struct.pack("<i", 7) + mixed[20:])
print(len(os.listdir(out)), "files in", out)
