#!/usr/bin/env bash
# asan_tree.sh SOURCE BUILD [EXCLUDE_REGEX]: builds vecanneal with AddressSanitizer + UndefinedBehavior-
# Sanitizer in BUILD (-DVECANNEAL_SANITIZE=ON -DVECANNEAL_CUDA=OFF, RelWithDebInfo) and runs that
# tree's cpu and mpi tests (except EXCLUDE_REGEX). Every sanitizer report is fatal (halt_on_error) and
# is also collected in BUILD/sanitizer-logs (ASan/LSan write there; UBSan reports, which gcc's combined
# runtime prints to stderr only, are picked out of the test logs and the tests' work folders), so a
# report from a process whose exit code a test ignores still fails this test. Leaks: LeakSanitizer
# on, with tests/sanitize/lsan.supp covering only memory Open MPI and HDF5 allocate themselves.
# Exit 0 only when every test passes and no report was written.
set -uo pipefail
# reliability_memory runs jobs under ulimit -v, where ASan cannot reserve its shadow memory.
SRC=${1:?SOURCE}; B=${2:?BUILD}; EXCLUDE=${3:-serial_hdf5_build|reliability_memory}
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOGS=$B/sanitizer-logs
mkdir -p "$B"
start=$SECONDS
echo "== configure and build $B (ASan + UBSan, RelWithDebInfo)"
cmake -S "$SRC" -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVECANNEAL_SANITIZE=ON -DVECANNEAL_CUDA=OFF \
  > "$B/configure.log" 2>&1 || { cat "$B/configure.log"; echo "FAIL: configure"; exit 1; }
cmake --build "$B" -j "${VECANNEAL_BUILD_JOBS:-2}" > "$B/build.log" 2>&1 || { tail -40 "$B/build.log"; echo "FAIL: build"; exit 1; }
echo "   built in $((SECONDS - start)) s"

rm -rf "$LOGS" "$B/testwork" "$B"/Testing/Temporary/LastTest*.log; mkdir -p "$LOGS"
# Open MPI unloads its plug-ins in MPI_Finalize; keep them mapped so leak stacks name them (nodlclose.c).
cc -shared -fPIC -O2 "$HERE/nodlclose.c" -o "$B/libnodlclose.so" || { echo "FAIL: building nodlclose.c"; exit 1; }
# halt_on_error: the first report ends the process (UBSan would otherwise print and go on).
# detect_stack_use_after_return / check_initialization_order / strict_string_checks: the stricter checks.
# verify_asan_link_order=0: libnodlclose.so is preloaded ahead of libasan (it allocates nothing).
# log_path: each process writes its reports to LOGS/<tool>.<pid> (and nothing to stderr).
# Allocation stacks use the fast (frame-pointer) unwinder: the full DWARF one (fast_unwind_on_malloc=0)
# names every frame but makes each MPI start-up ~10x slower (6 s instead of 0.6 s per mpirun here).
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_string_checks=1:verify_asan_link_order=0:log_path=$LOGS/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$LOGS/ubsan"
# use_tls=0: LeakSanitizer does not scan thread-local storage for pointers. With glibc 2.36-9+deb12u14
# (Debian 12's libc since late 2026) gcc 12's LSan reads a bogus dynamic-TLS range once Open MPI has
# dlopen()ed its plug-ins ("DTLS 12 at 0x...bdf-0x...1ce1", then "Tracer caught signal 11" and a fatal
# error in every MPI process). Without TLS as a root, memory reachable only from TLS counts as leaked:
# more reports, never fewer, so no leak of ours can hide; lsan.supp names the two library-owned ones.
export LSAN_OPTIONS="use_tls=0:suppressions=$HERE/lsan.supp:print_suppressions=0"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t0=$SECONDS
echo "== ctest -L 'cpu|mpi' -E '$EXCLUDE' in $B"
LD_PRELOAD="$B/libnodlclose.so${LD_PRELOAD:+:$LD_PRELOAD}" \
  ctest --test-dir "$B" -L "cpu|mpi" -E "$EXCLUDE" --output-on-failure --timeout 900 -j "${VECANNEAL_SANITIZE_JOBS:-1}"
rc=$?
echo "   tests ran in $((SECONDS - t0)) s"
# gcc's combined ASan+UBSan runtime prints UBSan reports to stderr even with log_path: look for them in
# what the tests printed and in the files their scripts saved (the tests' work folders).
grep -rIl -E "runtime error:|ERROR: (AddressSanitizer|LeakSanitizer)" "$B/Testing/Temporary" "$B/testwork" \
  "$B"/embed_e2e 2> /dev/null | while read -r f; do cp "$f" "$LOGS/stderr-of-$(echo "${f#$B/}" | tr / _)"; done
nlogs=$(find "$LOGS" -type f | wc -l)
if [ "$nlogs" -gt 0 ]; then
  echo "== $nlogs sanitizer report(s):"
  for f in $(find "$LOGS" -type f | sort); do echo "--- $f"; head -60 "$f"; done
  echo "FAIL: sanitizer reports (full text in $LOGS)"
  exit 1
fi
[ $rc -eq 0 ] || { echo "FAIL: tests failed in the sanitizer tree (no sanitizer report was written)"; exit 1; }
echo "PASS: sanitizer tree clean ($((SECONDS - start)) s in all)"
