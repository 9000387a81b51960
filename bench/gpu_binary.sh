#!/usr/bin/env bash
# gpu_binary.sh: sourced by GPU benchmark wrappers (search_gpu.sh, codes_gpu.sh, gpu_index_time.sh) with HERE, OUT:
# sets VA to the vecanneal binary to run, as an absolute path: $VA when given, else $BUILD_DIR/vecanneal
# (default build-gpu), built there with CUDA for sm_90 when missing. A failed build ends the script with
# bench/verify.py's FAILED line (exit 1), the build's last lines printed.
VA=${VA:-}
if [ -z "$VA" ]; then
  B=${BUILD_DIR:-build-gpu}
  VA=$B/vecanneal
  if [ ! -x "$VA" ]; then
    echo "building $VA (CUDA, sm_90)"
    { cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DVECANNEAL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      > "$OUT/cmake.log" 2>&1 &&
      make -C "$B" -j"$(nproc)" vecanneal > "$OUT/build.log" 2>&1; } || {
      tail -20 "$OUT/build.log" "$OUT/cmake.log" 2> /dev/null
      export VERIFY_LOG=$OUT/verification.log
      : > "$VERIFY_LOG"
      python3 "$HERE/verify.py" fail "the build of $VA failed ($OUT/build.log)"
      exec python3 "$HERE/verify.py" verdict
    }
  fi
fi
case $VA in /*) ;; *) VA=$PWD/$VA ;; esac
