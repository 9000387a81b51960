"""vecanneal_index: read a vecanneal index (docs/index-format.md) with h5py and numpy only.

    import vecanneal_index as vi
    with vi.open_index("index.h5") as ix:
        ix.anchors, ix.assignments, ix.counts, ix.mse   # numpy arrays
        ix.attrs["final_energy"], ix.config["lr"]        # str, int or float
        ix.history["energy"], ix.source["checksum"]
        ix.center, ix.anchors_centered, ix.sources        # the frame and the inputs (None when absent)
        ix.pq, ix.codes, ix.codebooks                    # compress --codes pq (None without codes)
        approx = ix.decode()                             # anchor + decoded residual (+ center for l2)
        ivf = vi.to_faiss(ix, rows)                      # a faiss.IndexIVFFlat of the rows (needs faiss)
        ivfpq = vi.to_faiss(ix)                          # a faiss.IndexIVFPQ of the codes (needs faiss)

Reads format 2 (written by this vecanneal) and format 1 (files without a format_version attribute):
in format 1, strings are bytes on disk and are decoded here; configuration values are text on disk
and become int or float here when they read as one (everything else stays str); the source is the
path as the job was given it, with no size or checksum (None); /history/anchors is returned as
history["anchor_count"]. Numbers come back as Python int and float, strings as str. What an index
records only since some version (/center, /anchors_centered, /sources) is None where it is absent, and
so are the codes of an index compressed without --codes pq (docs/codes.md).

to_faiss(index, data) with the source rows builds an IndexIVFFlat of those rows on our lists; to_faiss(index)
without rows builds an IndexIVFPQ of the index's own codes (compress --codes pq with d divisible by M; l2
or cosine), nothing trained or re-encoded: see to_faiss.
"""

import h5py
import numpy as np

__all__ = ["Index", "open_index", "to_faiss", "FORMAT_VERSION"]

#: The newest layout this module reads (root attribute format_version; absent = 1).
FORMAT_VERSION = 2

_HISTORY = ("energy", "changed", "anchor_count", "temperature")
#: The attributes of each /sources entry, in the order they are written (docs/index-format.md).
_SOURCE_KEYS = ("how", "file", "dataset", "dtype", "size", "checksum", "row0", "n")


def _plain(value):
    """An attribute value as a Python str, int or float (numpy scalars and bytes converted)."""
    if isinstance(value, bytes):  # numpy.bytes_ too: fixed-length strings of format 1
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    return value


def _typed_text(text):
    """A format-1 configuration value (text) as int or float when it reads as one, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class Index:
    """An open index. Arrays are read when first used; close() (or a with block) closes the file."""

    def __init__(self, path):
        self.path = path
        self._f = h5py.File(path, "r")
        attrs = {k: _plain(v) for k, v in self._f.attrs.items()}
        if attrs.get("format") != "vecanneal-index":
            self._f.close()
            raise ValueError(f"{path} is not a vecanneal index (no format = vecanneal-index attribute)")
        self.format_version = int(attrs.get("format_version", 1))
        if self.format_version > FORMAT_VERSION:
            self._f.close()
            raise ValueError(f"{path} has index format {self.format_version}; this reader knows up to {FORMAT_VERSION}")
        #: Root attributes: str, int or float.
        self.attrs = attrs
        self.metric = attrs["metric"]
        self.n, self.d, self.k = int(attrs["n"]), int(attrs["d"]), int(attrs["k_final"])
        cfg = {k: _plain(v) for k, v in self._f["config"].attrs.items()} if "config" in self._f else {}
        if self.format_version == 1:
            cfg = {k: _typed_text(v) if isinstance(v, str) else v for k, v in cfg.items()}
        #: The job's resolved configuration, one entry per key, in the key table's order (format 2).
        self.config = cfg
        #: The source: file (absolute in format 2), dataset, dtype, size in bytes and checksum of the
        #: rows as read (format 2; None in format 1).
        self.source = {
            "file": attrs.get("source_file"),
            "dataset": attrs.get("source_dataset"),
            "dtype": attrs.get("source_dtype"),
            "size": attrs.get("source_size"),
            "checksum": attrs.get("source_checksum"),
        }
        self._cache = {}

    def _read(self, name):
        if name not in self._cache:
            self._cache[name] = self._f[name][()]
        return self._cache[name]

    @property
    def anchors(self):
        """k x d float32: the anchor vectors, in the source's coordinates (cosine: unit length)."""
        return self._read("anchors")

    @property
    def assignments(self):
        """n uint32: the anchor of every source row, in source row order."""
        return self._read("assignments")

    @property
    def counts(self):
        """k uint64: rows assigned to each anchor (equals np.bincount(assignments, minlength=k))."""
        return self._read("anchor_count")

    @property
    def mse(self):
        """k float64: mean distance of each anchor's members to it (squared Euclidean, or 1 - x.a)."""
        return self._read("anchor_mse")

    @property
    def center(self):
        """d float64: the mean compress subtracted from every row (l2; zeros for cosine), or None in an
        index written before it was recorded."""
        return self._read("center") if "center" in self._f else None

    @property
    def anchors_centered(self):
        """k x d float32: the anchors as the final pass compared rows with them, in the frame of center
        (anchors = float32(anchors_centered + center)); None for cosine and in an index written before
        it was recorded."""
        return self._read("anchors_centered") if "anchors_centered" in self._f else None

    @property
    def sources(self):
        """The inputs of an index `vecanneal add` wrote, in /assignments order: a list of dicts with how
        ("compress" or "add"), file, dataset, dtype, size, checksum, row0 and n (its rows are
        assignments[row0:row0 + n]; a key the entry lacks is None). None when the index has no /sources
        (compress wrote it: self.source describes its rows)."""
        if "sources" not in self._f:
            return None
        if "sources" not in self._cache:
            g = self._f["sources"]
            self._cache["sources"] = [{k: _plain(g[str(m)].attrs.get(k)) for k in _SOURCE_KEYS}
                                      for m in range(len(g))]
        return self._cache["sources"]

    @property
    def pq(self):
        """The codes' attributes (compress --codes pq, docs/codes.md): m, bits, ksub, dsub_max, train_rows,
        bytes_per_vector, compression_ratio, variance, anchor_error, error, train_seconds, encode_seconds,
        description; None without codes."""
        return {k: _plain(v) for k, v in self._f["pq"].attrs.items()} if "pq" in self._f else None

    @property
    def codes(self):
        """n x m uint8: the code of every source row in every subspace; None without codes."""
        return self._read("pq/codes") if "pq" in self._f else None

    @property
    def codebooks(self):
        """m x ksub x dsub_max float32: each subspace's centroids, residuals in the index's frame (values
        past a subspace's width are 0); None without codes."""
        return self._read("pq/codebooks") if "pq" in self._f else None

    @property
    def subspace_dims(self):
        """m int64: the columns of each subspace, consecutive from column 0; None without codes."""
        return self._read("pq/subspace_dims") if "pq" in self._f else None

    def decode(self, rows=slice(None)):
        """The rows decoded from their codes (float32, source coordinates): the anchor as the final pass saw
        it, plus each subspace's centroid in its columns, plus center (l2). cosine rows come back near unit
        length (the source's norms are not kept). Raises ValueError without codes."""
        if self.codes is None:
            raise ValueError(f"{self.path} has no codes (compress --codes pq writes them)")
        codes = self.codes[rows]
        frame = self.anchors if self.metric == "cosine" else self.anchors_centered
        out = frame[self.assignments[rows]].astype(np.float32)
        books, start = self.codebooks, 0
        for m, width in enumerate(self.subspace_dims.tolist()):
            out[:, start:start + width] += books[m, codes[:, m], :width]
            start += width
        if self.metric == "cosine":
            return out
        return (out + self.center).astype(np.float32)

    @property
    def history(self):
        """Per-iteration arrays: energy, changed, anchor_count, temperature."""
        if "history" not in self._cache:
            g = self._f["history"]
            old = {"anchor_count": "anchors"} if self.format_version == 1 else {}
            self._cache["history"] = {k: g[old.get(k, k)][()] for k in _HISTORY}
        return self._cache["history"]

    def describe(self, name):
        """(description, units) of a dataset (format 2; None, None in format 1)."""
        a = self._f[name].attrs
        return _plain(a.get("description")), _plain(a.get("units"))

    def reconstruct(self, rows=slice(None)):
        """The decompressed rows: each row's anchor (float32)."""
        return self.anchors[self.assignments[rows]]

    def close(self):
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"<vecanneal index {self.path}: format {self.format_version}, n {self.n}, d {self.d}, "
                f"k {self.k}, {self.metric}>")


def open_index(path):
    """Opens an index file (format 1 or 2)."""
    return Index(path)


def to_faiss(index, data=None):
    """A faiss inverted-file index on our anchors and lists: nothing is trained or re-assigned, the
    coarse quantizer holds our anchors (nlist = k) and inverted list j holds exactly the rows we assigned
    to anchor j, with ids = source row numbers. Needs faiss (pip install faiss-cpu); raises ImportError
    without it.

    data given: an IndexIVFFlat of the source rows (n x d, any numeric type, in source row order), as the
    index was built from. l2: METRIC_L2 on the rows as given. cosine: METRIC_INNER_PRODUCT on the rows
    scaled to unit length (a copy; zero rows stay zero), as vecanneal compared them.

    data None: an IndexIVFPQ of the index's codes (compress --codes pq, docs/codes.md), without the rows:
    M subspaces of 8 bits, our codebooks as its PQ centroids, by_residual, and every row's codes added to
    its list as they are. faiss's subspaces are all d / M wide, so an index whose d is not a multiple of M
    is refused (ValueError), as is one without codes. l2: METRIC_L2, the quantizer holding /anchors (the
    source's coordinates), so queries go in as given; the codes describe x - center - anchors_centered,
    which is x - anchors up to the float32 rounding of anchors = anchors_centered + center (half a unit of
    the anchors' last place, far below the codes' own error). cosine: METRIC_INNER_PRODUCT, search
    ranks by q.(a + e), as vecanneal's 1 - q.(a + e) does. reconstruct(i) (after make_direct_map()) gives
    our decode() of row i up to that rounding.

    In both, queries of a cosine index must be scaled to unit length, and nprobe = nlist visits every row.
    """
    import faiss

    if not isinstance(index, Index):
        with open_index(index) as ix:
            return to_faiss(ix, data)
    ix = index
    if data is None:
        return _to_faiss_pq(faiss, ix)
    x = np.ascontiguousarray(data, dtype=np.float32)
    if x.shape != (ix.n, ix.d):
        raise ValueError(f"data is {x.shape}, the index was built from {(ix.n, ix.d)}")
    if ix.metric == "cosine":
        x = x.copy()
        faiss.normalize_L2(x)
    quantizer, metric = _faiss_quantizer(faiss, ix)
    ivf = faiss.IndexIVFFlat(quantizer, ix.d, ix.k, metric)
    ivf.is_trained = True  # the quantizer holds the anchors: nothing to train
    lists = np.ascontiguousarray(ix.assignments, dtype=np.int64)
    ids = np.arange(ix.n, dtype=np.int64)
    ivf.add_core(ix.n, faiss.swig_ptr(x), faiss.swig_ptr(ids), faiss.swig_ptr(lists))
    return ivf


def _faiss_quantizer(faiss, ix):
    """A flat quantizer holding our anchors (source coordinates; cosine: unit) and the IVF metric."""
    if ix.metric == "cosine":
        quantizer, metric = faiss.IndexFlatIP(ix.d), faiss.METRIC_INNER_PRODUCT
    elif ix.metric == "l2":
        quantizer, metric = faiss.IndexFlatL2(ix.d), faiss.METRIC_L2
    else:
        raise ValueError(f"{ix.path}: metric {ix.metric!r} has no faiss equivalent here (l2 or cosine)")
    quantizer.add(np.ascontiguousarray(ix.anchors, dtype=np.float32))
    return quantizer, metric


def _to_faiss_pq(faiss, ix):
    """to_faiss without rows: the IndexIVFPQ of the index's codes (see to_faiss)."""
    if ix.codes is None:
        raise ValueError(f"{ix.path} has no codes (compress --codes pq writes them): pass the source rows "
                         f"to to_faiss for an IndexIVFFlat")
    pq = ix.pq
    m, bits, dims = int(pq["m"]), int(pq["bits"]), ix.subspace_dims
    if ix.d % m != 0:
        raise ValueError(f"{ix.path}: d {ix.d} is not a multiple of its {m} subspaces (widths "
                         f"{sorted(set(dims.tolist()), reverse=True)}); faiss's IndexIVFPQ needs d / M columns "
                         f"in every subspace: compress with a --pq-m that divides d")
    if bits != 8:
        raise ValueError(f"{ix.path}: {bits}-bit codes; this export handles 8-bit codes only")
    quantizer, metric = _faiss_quantizer(faiss, ix)
    ivf = faiss.IndexIVFPQ(quantizer, ix.d, ix.k, m, bits, metric)
    ivf.by_residual = True
    books = np.ascontiguousarray(ix.codebooks[:, :, :ix.d // m], dtype=np.float32)  # m x 256 x d/m
    faiss.copy_array_to_vector(books.ravel(), ivf.pq.centroids)
    ivf.is_trained = True  # the quantizer holds the anchors and the PQ our codebooks: nothing to train
    ivf.precompute_table()  # what faiss's own training ends with (l2: the anchor-centroid terms)
    lists = ix.assignments.astype(np.int64)
    order = np.argsort(lists, kind="stable")  # list by list, ascending row numbers within a list
    codes = np.ascontiguousarray(ix.codes[order], dtype=np.uint8)
    bounds = np.searchsorted(lists[order], np.arange(ix.k + 1))
    for j in range(ix.k):
        lo, hi = int(bounds[j]), int(bounds[j + 1])
        if hi > lo:
            ids = np.ascontiguousarray(order[lo:hi], dtype=np.int64)
            ivf.invlists.add_entries(j, hi - lo, faiss.swig_ptr(ids), faiss.swig_ptr(codes[lo:hi]))
    ivf.ntotal = ix.n
    return ivf
