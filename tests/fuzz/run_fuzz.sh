#!/usr/bin/env bash
# run_fuzz.sh: builds and runs the libFuzzer harnesses of tests/fuzz (docs/testing.md).
#   run_fuzz.sh build  OUT               compile every harness into OUT/bin (clang, libFuzzer, ASan, UBSan)
#   run_fuzz.sh run    OUT TARGET SECS   fuzz TARGET for SECS seconds from its committed corpus; exit 1
#                                        on any crash, leak, timeout, UB or harness invariant in our code
#                                        (input + report in OUT/artifacts/TARGET; faults inside libhdf5 are
#                                        listed, not failed: classify_crash.py)
#   run_fuzz.sh replay OUT [TARGET...]   run every committed input (regressions/, then corpus/) once
#   run_fuzz.sh merge  OUT [TARGET...]   minimise the committed corpus (libFuzzer -merge=1; h5probe kept)
#   run_fuzz.sh list                     print the target names
# OUT is a scratch folder (CTest passes ${CMAKE_BINARY_DIR}/fuzz). Toolchain flags for HDF5/MPI come
# from OUT/toolchain.env when CMake wrote one (the HDF5 and MPI the project was configured with),
# else from pkg-config hdf5-openmpi / hdf5 and mpicc --showme. Exit 77 (CTest: skipped) when clang
# with libFuzzer is not installed (Debian: apt-get install clang libclang-rt-14-dev).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$(cd "$HERE/../.." && pwd)"
# VA_FUZZ_SRC_ROOT: build the harnesses against another checkout's src/ (e.g. to try a fix first).
SRCROOT="${VA_FUZZ_SRC_ROOT:-$SRC}"
TARGETS=(config_file config_kv h5probe vecfile tokenizer vocab json safetensors)

sources_of() {
  case $1 in
    config_file|config_kv) echo "src/core/config.c src/util/format.c" ;;
    h5probe) echo "src/io/h5io.c src/io/vecfile.c src/util/util.c src/util/format.c src/util/checksum.c src/io/files.c src/core/stop.c src/util/stall.c" ;;
    vecfile) echo "src/io/vecfile.c" ;;
    tokenizer|vocab) echo "src/embed/tokenizer.c src/embed/unicode_tables.c" ;;
    json) echo "src/embed/json.c src/embed/tokenizer.c src/embed/unicode_tables.c" ;;
    safetensors) echo "src/embed/safetensors.c src/embed/json.c src/embed/tokenizer.c src/embed/unicode_tables.c" ;;
  esac
}
# HDF5's and MPI's flags: h5probe links both; vecfile only includes mpi.h (through util/util.h).
needs_hdf5() { [ "$1" = h5probe ] || [ "$1" = vecfile ]; }
available() { for s in $(sources_of "$1"); do [ -f "$SRCROOT/$s" ] || return 1; done; }

# LSan: Open MPI and HDF5 keep process-lifetime allocations (free lists, component tables) and HDF5
# leaks on some of its own error paths when decoding damaged files; leaks with one of their frames
# are theirs. Ours (allocated from our frames only) are still reported.
export LSAN_OPTIONS="suppressions=$SRC/tests/sanitize/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="abort_on_error=0:detect_leaks=1:allocator_may_return_null=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# The harnesses write each input to a temporary file: in memory that is ten times faster.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi

cmd=${1:-}; shift || true
case $cmd in
  list) printf '%s\n' "${TARGETS[@]}"; exit 0 ;;
  build|run|replay|merge) ;;
  *) sed -n '2,13p' "$0"; exit 2 ;;
esac
OUT=${1:?OUT folder}; shift
mkdir -p "$OUT/bin" "$OUT/corpus" "$OUT/artifacts" "$OUT/obj"

build() {
  local cc=${FUZZ_CC:-}
  if [ -z "$cc" ]; then for c in clang clang-18 clang-17 clang-16 clang-15 clang-14; do command -v $c > /dev/null && { cc=$c; break; }; done; fi
  [ -n "$cc" ] || { echo "SKIP: no clang found (apt-get install clang libclang-rt-14-dev)"; exit 77; }
  printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' > "$OUT/obj/probe.c"
  "$cc" -fsanitize=fuzzer,address,undefined "$OUT/obj/probe.c" -o "$OUT/obj/probe" 2> "$OUT/obj/probe.log" \
    || { echo "SKIP: $cc cannot link -fsanitize=fuzzer,address,undefined (libclang-rt-*-dev missing?)"; cat "$OUT/obj/probe.log"; exit 77; }
  local h5cflags h5libs
  if [ -f "$OUT/toolchain.env" ]; then
    source "$OUT/toolchain.env"   # FUZZ_H5_CFLAGS, FUZZ_H5_LIBS (from CMake)
    h5cflags=$FUZZ_H5_CFLAGS; h5libs=$FUZZ_H5_LIBS
  else
    local pc=hdf5-openmpi; pkg-config --exists $pc || pc=hdf5
    h5cflags="$(pkg-config --cflags $pc) $(mpicc --showme:compile 2> /dev/null)"
    h5libs="$(pkg-config --libs $pc) $(mpicc --showme:link 2> /dev/null)"
    [ $pc = hdf5-openmpi ] && h5cflags="$h5cflags -DVECANNEAL_PARALLEL_HDF5=1"
  fi
  local common=(-g -O1 -std=c11 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
                -I"$SRCROOT/src" -DVA_FUZZ_DIR="\"$HERE\"" -DVECANNEAL_VERSION="\"fuzz\"")
  local t rc=0
  for t in "${TARGETS[@]}"; do
    if ! available $t; then echo "note: $t not built (sources $(sources_of $t) absent)"; continue; fi
    local srcs=() s
    for s in $(sources_of $t); do srcs+=("$SRCROOT/$s"); done
    local extra=() libs=()
    if needs_hdf5 $t; then read -ra extra <<< "$h5cflags"; read -ra libs <<< "$h5libs"; fi
    if "$cc" "${common[@]}" "${extra[@]}" "$HERE/fuzz_$t.c" "${srcs[@]}" "${libs[@]}" -lm -o "$OUT/bin/fuzz_$t" 2> "$OUT/obj/$t.log"; then
      echo "built $OUT/bin/fuzz_$t"
    else
      cat "$OUT/obj/$t.log"; echo "FAIL: building fuzz_$t"; rc=1
    fi
  done
  return $rc
}

# Options every run shares: per-input time limit (a hang is a finding), memory limits (an allocation
# sized from the input beyond 2 GiB is a finding), the target's dictionary when there is one.
# FUZZ_ENV: environment of the fuzzing run itself. h5probe fuzzes with production allocation
# semantics (an impossible malloc returns NULL, as glibc's does, instead of ending the run): libhdf5
# asks for absurd sizes read from damaged headers all the time and handles the NULL. Replays (and
# so the classification of every saved input) use the strict settings, which name the allocation.
fuzz_opts() {
  local t=$1
  FOPTS=(-timeout=10 -rss_limit_mb=2560 -malloc_limit_mb=2048 -print_final_stats=1)
  FUZZ_ENV=()
  [ -f "$HERE/dict/$t.dict" ] && FOPTS+=(-dict="$HERE/dict/$t.dict")
  if [ "$t" = h5probe ]; then FUZZ_ENV=(ASAN_OPTIONS="$ASAN_OPTIONS:allocator_may_return_null=1"); fi
  return 0
}

run() {
  local t=${1:?TARGET} secs=${2:?SECONDS}
  local bin="$OUT/bin/fuzz_$t"
  if [ ! -x "$bin" ]; then
    available $t || { echo "SKIP: $t (sources absent)"; exit 77; }
    build > /dev/null || exit 1
  fi
  fuzz_opts $t
  local fopts=("${FOPTS[@]}")
  [ "$t" = h5probe ] && fopts=("${fopts[@]/-malloc_limit_mb=2048/-malloc_limit_mb=1000000}")
  local art="$OUT/artifacts/$t"
  rm -rf "$art"; mkdir -p "$OUT/corpus/$t" "$art"
  local seeds="$HERE/corpus/$t"
  [ -d "$seeds" ] || seeds=""
  echo "fuzzing $t for $secs s (new inputs: $OUT/corpus/$t, crash inputs: $art/)"
  # h5probe: fork mode with crashes ignored, so that a fault inside libhdf5 (which we cannot fix)
  # does not end the search for ours; the other targets stop at their first crash. Every saved
  # input is classified below.
  local mode=()
  [ "$t" = h5probe ] && mode=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
  local start=$SECONDS
  (cd "$art" && env "${FUZZ_ENV[@]}" "$bin" "${fopts[@]}" "${mode[@]}" \
      -max_total_time="$secs" -artifact_prefix="$art/" "$OUT/corpus/$t" $seeds) > "$OUT/$t.log" 2>&1
  local rc=$?
  local last; last=$(grep -E "^#[0-9]+(:|[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED))" "$OUT/$t.log" | tail -1)
  echo "$t: ${last:-no progress line} (libFuzzer exit $rc, $((SECONDS - start)) s)"
  local saved; saved=$(find "$art" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  if [ $rc -ne 0 ] && [ "$saved" -eq 0 ]; then
    tail -40 "$OUT/$t.log"; echo "FAIL: fuzz_$t failed without saving an input (log: $OUT/$t.log)"; return 1
  fi
  local f verdict ours=0 theirs=0 unrepro=0
  for f in "$art"/crash-* "$art"/leak-* "$art"/timeout-* "$art"/oom-*; do
    [ -f "$f" ] || continue
    # An oom input is replayed with room above the malloc limit, so that the allocation that passes it is
    # reported with its stack: under the fuzzing's own RSS limit the RSS check could fire first (libhdf5
    # touching a 23 GB block it asked for on a damaged file), with no stack, which reads as ours.
    local ropts=("${FOPTS[@]}")
    case $f in */oom-*) ropts=("${ropts[@]/-rss_limit_mb=2560/-rss_limit_mb=8192}") ;; esac
    # An input that crashed inside a fork job (after other inputs in the same process) may not crash on
    # its own: seen once in CI, a use-after-free at the memcpy interceptor pc of libhdf5's known faults,
    # in a job whose earlier inputs hit those faults. With no stack it cannot be classified, fixed or
    # committed as a regression input, so after 4 clean replays it is kept and reported, not counted.
    local rc_replay=0 tries=0
    while [ $rc_replay -eq 0 ] && [ $tries -lt 4 ]; do
      (cd "$art" && "$bin" "${ropts[@]}" "$f") > "$f.report" 2>&1; rc_replay=$?; tries=$((tries + 1))
    done
    if [ $rc_replay -eq 0 ]; then
      unrepro=$((unrepro + 1)); mkdir -p "$art/unreproduced"; mv "$f" "$f.report" "$art/unreproduced/"
      echo "  not reproduced on its own ($tries replays; it crashed after other inputs in its fork job): $(basename "$f")"
      continue
    fi
    verdict=$(python3 "$HERE/classify_crash.py" < "$f.report")
    case $verdict in
      hdf5*) theirs=$((theirs + 1)); mkdir -p "$art/hdf5"; mv "$f" "$f.report" "$art/hdf5/"
             echo "  libhdf5 fault (not ours, see docs/testing.md): $(basename "$f"): ${verdict#hdf5 }" | cut -c1-160 ;;
      *) ours=$((ours + 1))
         echo "=== FINDING $(basename "$f"): ${verdict#ours }"
         grep -v -E "^(INFO|MS:|#[0-9]+ +(NEW|REDUCE|pulse))" "$f.report" | head -40 ;;
    esac
  done
  echo "$t: $ours finding(s) in our code, $theirs fault(s) inside libhdf5, $unrepro not reproduced on their own"
  if [ $ours -gt 0 ]; then
    echo "FAIL: fuzz_$t found a problem; inputs and reports in $art/."
    echo "Reproduce: $bin <input>; once fixed, commit the input as tests/fuzz/regressions/$t/<name>."
    return 1
  fi
  return 0
}

replay() {
  local t rc=0 n
  local targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=("${TARGETS[@]}")
  for t in "${targets[@]}"; do
    available $t || { echo "note: $t skipped (sources absent)"; continue; }
    [ -x "$OUT/bin/fuzz_$t" ] || build > /dev/null || return 1
    fuzz_opts $t
    # Regression inputs one process each (a fresh process, as when the bug was found), then the
    # corpus in one process.
    local files=() f bad=0
    mapfile -t files < <(find "$HERE/regressions/$t" -type f ! -name '*.md' 2> /dev/null | sort)
    for f in "${files[@]}"; do
      if ! (cd "$OUT/artifacts" && "$OUT/bin/fuzz_$t" "${FOPTS[@]}" "$f") > "$OUT/replay_$t.log" 2>&1; then
        grep -v -E "^(INFO|MS:)" "$OUT/replay_$t.log" | head -40
        echo "FAIL: replay $t: regression input ${f#$SRC/} fails"; bad=1
      fi
    done
    local nreg=${#files[@]}
    mapfile -t files < <(find "$HERE/corpus/$t" -type f 2> /dev/null | sort)
    if [ ${#files[@]} -gt 0 ] && ! (cd "$OUT/artifacts" && "$OUT/bin/fuzz_$t" "${FOPTS[@]}" "${files[@]}") > "$OUT/replay_$t.log" 2>&1; then
      n=$(grep -c "^Running:" "$OUT/replay_$t.log")
      grep -v -E "^(INFO|MS:|Running:|Executed)" "$OUT/replay_$t.log" | head -40
      echo "FAIL: replay $t: corpus input $(grep "^Running:" "$OUT/replay_$t.log" | tail -1 | cut -d' ' -f2) (number $n of ${#files[@]}) fails"
      bad=1
    fi
    [ $bad -eq 0 ] && echo "replay $t: $nreg regression and ${#files[@]} corpus inputs, clean"
    [ $bad -eq 0 ] || rc=1
  done
  return $rc
}

# merge OUT [TARGET...]: minimises the committed corpus of each target to the inputs that keep its
# coverage (libFuzzer -merge=1 into an empty folder), then replaces tests/fuzz/corpus/TARGET with them.
# The h5probe corpus is a set of hand-made seeds named by what they test (h5probe.expect): left alone.
merge() {
  local t targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=("${TARGETS[@]}")
  for t in "${targets[@]}"; do
    [ "$t" = h5probe ] && { echo "merge: h5probe's seeds are kept as they are"; continue; }
    [ -x "$OUT/bin/fuzz_$t" ] || build > /dev/null || return 1
    fuzz_opts $t
    local new=$OUT/merged/$t
    rm -rf "$new" && mkdir -p "$new"
    (cd "$OUT/artifacts" && "$OUT/bin/fuzz_$t" "${FOPTS[@]}" -merge=1 "$new" "$HERE/corpus/$t") > "$OUT/merge_$t.log" 2>&1 ||
      { tail -20 "$OUT/merge_$t.log"; echo "FAIL: merge $t"; return 1; }
    local before after
    before=$(find "$HERE/corpus/$t" -type f | wc -l); after=$(find "$new" -type f | wc -l)
    rm -rf "$HERE/corpus/$t" && mkdir -p "$HERE/corpus/$t" && cp "$new"/* "$HERE/corpus/$t/"
    echo "merge $t: $before -> $after inputs"
  done
}

case $cmd in
  build) build ;;
  run) run "$@" ;;
  replay) replay "$@" ;;
  merge) merge "$@" ;;
esac
