# e2e_lib.sh: shared by the embed end-to-end scripts (sourced): failure counting and `expect`, which
# runs a command into NAME.log and checks its exit code and that every rank reported it
# (VECANNEAL_TRACE_EXIT; the rank count is the value after the command's -n, else 1).
export VECANNEAL_TRACE_EXIT=1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect CODE NAME CMD...
expect() {
  local code="$1" name="$2"
  shift 2
  "$@" > "$name.log" 2>&1
  local rc=$? want=1 prev="" x ranks
  for x in "$@"; do
    [[ "$prev" == "-n" ]] && want="$x"
    prev="$x"
  done
  ranks=$(grep -c "exits with code $code\$" "$name.log")
  if [[ $rc -ne $code || $ranks -ne $want ]]; then
    fail "$name: exit $rc (expected $code on all $want ranks, $ranks rank(s) reported it)"
    sed 's/^/    /' "$name.log" | tail -20
  else
    echo "ok: $name (exit $code on all $want ranks)"
  fi
}

# Prints the summary line and returns the status.
finish() {
  echo "$1: $((fails == 0 ? 1 : 0)) passed, $((fails == 0 ? 0 : 1)) failed ($fails check(s) failed)"
  [[ $fails -eq 0 ]]
}
