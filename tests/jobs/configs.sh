#!/usr/bin/env bash
# configs.sh: the committed configs match what the binary resolves (no drift between docs and code),
# every config parses, every input type loads (float32/64/16, uint8, int8), init = file works, and
# info and --metrics produce readable output.
source "$(dirname "$0")/lib.sh"
SRC=${VECANNEAL_SOURCE:?}
# default.ini documents every key without setting one, so it changes nothing under any preset.
diff <("$BIN" compress --print-config) "$SRC/configs/default.ini" > /dev/null \
  || fail "configs/default.ini is stale: regenerate with vecanneal compress --print-config > configs/default.ini"
[ -z "$(grep -v '^#' "$SRC/configs/default.ini" | grep -v '^\[' | grep -v '^$')" ] \
  || fail "configs/default.ini sets a key; it must only document them"
diff <("$BIN" compress --preset vlc --print-config) <("$BIN" compress --config "$SRC/configs/default.ini" --preset vlc --print-config) > /dev/null \
  || fail "--config configs/default.ini --preset vlc does not resolve to preset vlc"
diff <("$BIN" compress --preset vlc --print-config) <("$BIN" compress --config "$SRC/configs/vlc-parity.ini" --print-config) > /dev/null \
  || fail "configs/vlc-parity.ini differs from preset vlc"
# A config file overrides only the keys it sets, and the job says which preset values it replaced.
printf 'max_iter = 3\n' > "$WORK/over.ini"
"$BIN" compress --config "$WORK/over.ini" --preset vlc --print-config | grep -qx 'max_iter = 3' \
  || fail "a config file's key did not override the preset"
"$BIN" compress --config "$WORK/over.ini" --preset vlc --print-config | grep -qx 'init = farthest\|# init = farthest' \
  || fail "a config file that does not set init changed the preset's init"
for c in "$SRC"/configs/*.ini; do
  "$BIN" compress --config "$c" --print-config > /dev/null || fail "config $c does not parse"
done
echo "configs: all parse; default.ini and vlc-parity.ini match the binary"

for kind in f64 u8 i8; do
  "$TOOL" make-bad "$WORK/$kind.h5" $kind || fail "make $kind"
  run_np 2 compress --input "$WORK/$kind.h5:/train" --anchors 4 --out "$WORK/$kind.idx.h5" --set threads=1 --set progress_every=0 > /dev/null || fail "compress $kind input"
  echo "input type $kind: $("$TOOL" attr "$WORK/$kind.idx.h5" source_dtype), energy $("$TOOL" attr "$WORK/$kind.idx.h5" final_energy)"
done
run_np 2 gen --out "$WORK/h.h5" --n 3000 --d 16 --dtype float16 > /dev/null || fail "gen float16"
run_np 2 gen --out "$WORK/f.h5" --n 3000 --d 16 > /dev/null || fail "gen float32"
run_np 2 compress --config "$WORK/over.ini" --preset vlc --input "$WORK/f.h5:/train" --anchors 8 --out "$WORK/over.idx.h5" \
  --set threads=1 --set progress_every=0 > "$WORK/over.log" || fail "compress with a config over preset vlc"
grep -q 'config: set over preset vlc: max_iter = 3 (.*over.ini:1; preset: 1000), k = 8 (--anchors; preset: 1024)' "$WORK/over.log" \
  || fail "the job did not report the keys set over the preset: $(grep config: "$WORK/over.log")"
[ "$("$TOOL" attr "$WORK/over.idx.h5" iterations)" = 3 ] || fail "max_iter = 3 of the config file not applied over the preset"
for t in h f; do
  run_np 2 compress --input "$WORK/$t.h5:/train" --anchors 8 --out "$WORK/$t.idx.h5" --set threads=1 --set progress_every=0 \
    --metrics "$WORK/$t.json" > /dev/null || fail "compress $t"
done
echo "float16 energy $("$TOOL" attr "$WORK/h.idx.h5" final_energy) vs float32 $("$TOOL" attr "$WORK/f.idx.h5" final_energy)"
[ "$("$TOOL" attr "$WORK/h.idx.h5" source_dtype)" = float16 ] || fail "float16 input not recognised"
python3 -c "import json,sys; m=json.load(open(sys.argv[1])); assert m['iterations']>0 and 'assign' in m['phases_seconds'] and m['peak_rss_bytes']['max']>0" "$WORK/f.json" \
  || fail "metrics JSON malformed"
"$BIN" info "$WORK/f.idx.h5" | grep -q "compression_ratio" || fail "info"
run_np 2 compress --input "$WORK/f.h5:/train" --set "init=file:$WORK/f.idx.h5:/anchors" --out "$WORK/f2.idx.h5" --set threads=1 \
  --set progress_every=0 --set max_iter=3 > /dev/null || fail "init=file"
[ "$("$TOOL" attr "$WORK/f2.idx.h5" k_initial)" = "$("$TOOL" attr "$WORK/f.idx.h5" k_final)" ] || fail "init=file: k differs"
echo "PASS: configs"
