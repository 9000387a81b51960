#!/usr/bin/env bash
# index_format.sh: the index describes itself (docs/index-format.md, format 2) and info still reads
# format 1. A 2-rank index (collective writes) and a 1-rank one (independent writes): format_version 2;
# every dataset's description and units are variable-length UTF-8 strings, so are the string attributes;
# numbers and configuration values are typed (int64, uint64, float64); /history/anchor_count replaces
# /history/anchors; the source is its absolute path (through a relative name and a symbolic link), its
# size, and a checksum of the rows read: the same for 1 and 2 ranks and for a copy of the file, another
# for other rows. info prints all of it. tests/data/index_format1.h5 is a format-1 index (written by
# vecanneal 0.1.0 before format_version existed: 200 x 4 rows of `gen --n 200 --d 4 --clusters 5
# --seed 7`, data.h5:/train, --anchors 6, max_iter 8, maintenance_interval 3, 2 ranks): info prints its
# fields, "(not recorded)" for what format 1 lacks, and its history from /history/anchors.
source "$(dirname "$0")/lib.sh"
SRC=${VECANNEAL_SOURCE:?}
cd "$WORK" || fail "cd $WORK"
rm -rf ./*
common=(compress --anchors 8 --set threads=1 --set progress_every=0 --set max_iter=6)
run_np 1 gen --out data.h5 --n 3000 --d 16 --clusters 10 --seed 3 > /dev/null || fail "gen"
run_np 1 gen --out other.h5 --n 3000 --d 16 --clusters 10 --seed 4 > /dev/null || fail "gen other"
mkdir sub && ln -s ../data.h5 sub/link.h5 && cp data.h5 copy.h5
run_np 2 "${common[@]}" --input sub/link.h5:/train --out p2.h5 > p2.log || { cat p2.log; fail "compress on 2 ranks"; }
run_np 1 "${common[@]}" --input ./data.h5:/train --set io=independent --out p1.h5 > p1.log || { cat p1.log; fail "compress on 1 rank"; }
run_np 1 "${common[@]}" --input copy.h5:/train --out copy.idx.h5 > /dev/null || fail "compress the copy"
run_np 1 "${common[@]}" --input other.h5:/train --out other.idx.h5 > /dev/null || fail "compress other rows"

attr() { "$TOOL" attr "$1" "$2" || fail "no attribute $2 in $1"; }
type_is() { # type_is FILE NAME TYPE
  local t
  t=$("$TOOL" attr-type "$1" "$2") || fail "no attribute $2 in $1"
  [ "$t" = "$3" ] || fail "$1: $2 is $t, not $3"
}
real=$(readlink -f data.h5)
for f in p2.h5 p1.h5; do
  [ "$(attr $f format_version)" = 2 ] || fail "$f: format_version $(attr $f format_version)"
  for a in format version source_file source_dataset source_dtype metric backend; do type_is $f $a utf8; done
  for a in format_version n d k_initial k_final iterations converged ranks seed source_size; do type_is $f $a int64; done
  for a in final_energy total_variance distortion compression_ratio seconds; do type_is $f $a float64; done
  type_is $f source_checksum uint64
  for ds in /anchors /assignments /anchor_count /anchor_mse /history/energy /history/changed /history/anchor_count \
    /history/temperature; do
    type_is $f "$ds/description" utf8
    type_is $f "$ds/units" utf8
  done
  [ "$(attr $f /history/anchor_count/units)" = anchors ] || fail "$f: /history/anchor_count units"
  [ "$(attr $f /anchor_mse/units)" = "source^2" ] || fail "$f: /anchor_mse units (l2)"
  "$TOOL" attr $f /history/anchors/units > /dev/null 2>&1 && fail "$f: /history/anchors still written"
  type_is $f config/k int64
  type_is $f config/seed int64
  type_is $f config/lr float64
  type_is $f config/init utf8
  type_is $f config/robust utf8
  [ "$(attr $f config/cooling_rate)" = 0.01 ] || fail "$f: config/cooling_rate $(attr $f config/cooling_rate)"
  [ "$(attr $f config/max_iter)" = 6 ] || fail "$f: config/max_iter"
  [ "$(attr $f source_file)" = "$real" ] || fail "$f: source_file $(attr $f source_file), not $real"
  [ "$(attr $f source_size)" = "$(stat -c %s data.h5)" ] || fail "$f: source_size $(attr $f source_size)"
done
sum=$(attr p2.h5 source_checksum)
[ "$sum" = "$(attr p1.h5 source_checksum)" ] || fail "the source checksum depends on the rank count"
[ "$sum" = "$(attr copy.idx.h5 source_checksum)" ] || fail "a copy of the rows has another checksum"
[ "$sum" != "$(attr other.idx.h5 source_checksum)" ] || fail "other rows have the same checksum"
[ "$(attr copy.idx.h5 source_file)" = "$(readlink -f copy.h5)" ] || fail "copy: source_file"
"$TOOL" close p1.h5 p2.h5 1e-5 || fail "1 and 2 ranks give other indexes"
"$TOOL" same p2.h5 p2.h5 > /dev/null || fail "h5tool same on format 2"
echo "format 2: types, descriptions, units and source checked (checksum $sum)"

# info on format 2
run_np 1 info p2.h5 > info2.txt || { cat info2.txt; fail "info on format 2"; }
for want in "format_version  *2" "source_file  *$real" "source_size  *$(stat -c %s data.h5)" \
  "source_checksum  *[0-9a-f]\{16\}" "history  *[0-9]* iterations, energy .* -> .*, anchors 8 -> [0-9]*" \
  "cooling_rate  *= 0.01" "lr  *= 2" "init  *= kmeans||" "n  *3000" "ranks  *2"; do
  grep -q "^ *$want\$" info2.txt || { cat info2.txt; fail "info on format 2: no line '$want'"; }
done

# info on format 1
v1=$SRC/tests/data/index_format1.h5
[ "$("$TOOL" attr "$v1" format_version 2> /dev/null)" = "" ] || fail "the format-1 fixture has a format_version"
run_np 1 info "$v1" > info1.txt || { cat info1.txt; fail "info on format 1"; }
for want in "format_version  *1" "source_file  *data.h5" "source_size  *(not recorded)" \
  "source_checksum  *(not recorded)" "n  *200" "d  *4" "k_final  *6" "iterations  *8" \
  "final_energy  *0.8187596360687166" "history  *8 iterations, energy .* -> 0.8187683982215822, anchors 6 -> 6" \
  "anchors: 6, empty 0" "max_iter  *= 8" "lr  *= 2" "init  *= kmeans||"; do
  grep -q "^ *$want\$" info1.txt || { cat info1.txt; fail "info on format 1: no line '$want'"; }
done
"$TOOL" same "$v1" "$v1" > /dev/null || fail "h5tool same on format 1"
echo "format 1: info reads $v1"
echo "PASS"
