#!/usr/bin/env bash
# parity.sh: the parity preset on the prototype's demo data, its "large" case (n 10000, d 128, k 256,
# configs/vlc-demo-large.ini). The final energy must land in the prototype's range (it reported about
# 0.011; the accepted band is 0.008 to 0.012, see docs/algorithm.md).
source "$(dirname "$0")/lib.sh"
cfg=${VECANNEAL_SOURCE:?}/configs/vlc-demo-large.ini
run_np 2 gen --kind vlc-demo --n 10000 --d 128 --out "$WORK/demo.h5" > /dev/null || fail "gen"
run_np 2 compress --config "$cfg" --input "$WORK/demo.h5:/train" --out "$WORK/demo_index.h5" --set threads=1 > "$WORK/parity.log" || { cat "$WORK/parity.log"; fail "compress"; }
tail -n 3 "$WORK/parity.log"
E=$("$TOOL" attr "$WORK/demo_index.h5" final_energy)
it=$("$TOOL" attr "$WORK/demo_index.h5" iterations)
k=$("$TOOL" attr "$WORK/demo_index.h5" k_final)
echo "parity (vlc-demo large): energy $E after $it iterations, k $k"
awk -v e="$E" 'BEGIN { exit !(e >= 0.008 && e <= 0.012) }' || fail "energy $E outside [0.008, 0.012]"
echo "PASS: parity"
