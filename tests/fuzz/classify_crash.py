#!/usr/bin/env python3
"""classify_crash.py: decides whom a sanitizer/libFuzzer report blames: our code or libhdf5.

Reads one report (the output of replaying one crash input) on stdin and prints one line:
  ours  <kind> <frame>   a finding in vecanneal (or the harness): the fuzz test fails
  hdf5  <kind> <frame>   a fault inside libhdf5's own code on its own memory, reached while it decodes
                         a damaged file (HDF5 is not instrumented; docs/testing.md lists these)
Rule: the innermost frame that is not the sanitizer runtime, libc or libFuzzer must be in libhdf5,
and so must the innermost such frame of the allocation stack (heap memory) or the owning frame
(stack memory) when the report names one. An allocation stack with no such frame (a block libFuzzer
or libc made for themselves) is no evidence against libhdf5: a wild read by libhdf5 is reported
against whichever block happens to lie next to it (seen: 8 bytes past libFuzzer's MutationDispatcher,
read by H5O__msg_iterate_real under H5Aexists). Anything else - our frames first, our buffers overrun by
HDF5 (e.g. H5Aread into a buffer we sized), UBSan, invariant aborts of the harness, leaks not
suppressed, and reports this script cannot parse - is 'ours'."""
import re
import sys

RUNTIME = re.compile(r"__interceptor_|__asan|__sanitizer|__ubsan|__lsan|sanitizer_common|libsanitizer|"
                     r"compiler-rt|asan_|/libc\.so|libc\.so\.6|sysdeps/|__memcpy|__memmove|__memset|"
                     r"__strlen|__libc_|\bmalloc\b|\bcalloc\b|\brealloc\b|\bfree\b|\babort\b|\braise\b|"
                     r"fuzzer::|libFuzzer|\b_start\b|\bmain\b \(|___interceptor|in memcpy|in memmove|"
                     r"in memset|in strlen|pthread_kill|gsignal|"
                     r"(^|\s)in (str|mem|wcs|stp)[a-z]* \(|/libm\.so|libstdc\+\+")  # intercepted libc string calls
FRAME = re.compile(r"^\s*#(\d+) 0x[0-9a-f]+ (.*)$")


def stacks(lines):
    """Yields (header, [frames]) for each stack trace in the report."""
    cur, header, prev = None, "", ""
    for ln in lines:
        m = FRAME.match(ln)
        if m:
            if m.group(1) == "0" or cur is None:
                if cur:
                    yield header, cur
                cur, header = [], prev
            cur.append(m.group(2))
        else:
            if cur:
                yield header, cur
                cur = None
            if ln.strip():
                prev = ln
    if cur:
        yield header, cur


def innermost(frames, default_last=True):
    """The first frame outside the runtime; when there is none, the last frame (or None)."""
    for fr in frames:
        if not RUNTIME.search(fr):
            return fr
    return (frames[-1] if frames else "?") if default_last else None


def main():
    text = sys.stdin.read()
    lines = text.splitlines()
    kind = "unknown"
    for pat, k in ((r"LeakSanitizer: detected memory leaks", "leak"), (r"libFuzzer: timeout", "timeout"),
                   (r"libFuzzer: out-of-memory|allocation-size-too-big|exceeds maximum supported size|"
                    r"allocator is out of memory", "oom"),
                   (r"runtime error:", "ubsan"), (r"fuzz invariant failed", "invariant"),
                   (r"AddressSanitizer: ([A-Za-z-]+)", None), (r"deadly signal", "signal")):
        m = re.search(pat, text)
        if m:
            kind = k or m.group(1)
            break
    st = list(stacks(lines))
    if not st or kind in ("leak", "ubsan", "invariant", "unknown"):
        print("ours", kind, innermost(st[0][1]) if st else "?")
        return
    access = innermost(st[0][1])
    blame_hdf5 = "libhdf5" in access
    # Heap: the allocation stack; stack memory: the frame that owns the variable.
    for header, frames in st[1:]:
        if "allocated by thread" in header or "freed by thread" in header or "previously allocated" in header:
            owner = innermost(frames, default_last=False)
            blame_hdf5 = blame_hdf5 and (owner is None or "libhdf5" in owner)
    m = re.search(r"is located in stack of thread.*?\n\s*#0 0x[0-9a-f]+ in (.*)", text)
    if m:
        blame_hdf5 = blame_hdf5 and "libhdf5" in m.group(1)
    if re.search(r"is located \d+ bytes (to the right|to the left|inside) of global variable", text):
        g = re.search(r"global variable '([^']*)' defined in '([^']*)'", text)
        blame_hdf5 = blame_hdf5 and bool(g) and "libhdf5" in g.group(2)
    print("hdf5" if blame_hdf5 else "ours", kind, access)


main()
