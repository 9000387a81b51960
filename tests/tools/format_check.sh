#!/usr/bin/env bash
# format_check.sh ROOT: fails when a C, C++ or CUDA file of src/, tests/ or bench/ is not laid out as
# ROOT/.clang-format says (clang-format 14: other versions lay out differently). Generated files
# (src/embed/unicode_tables.c) are left out. Exit 77 (CTest: skipped) without clang-format 14;
# scripts/setup.sh installs it for the test suite. To fix: tests/tools/format_check.sh ROOT --fix.
set -u
ROOT=${1:?ROOT}
FIX=${2:-}
CF=$(command -v clang-format-14 || command -v clang-format || true)
[ -n "$CF" ] && "$CF" --version | grep -q "version 14\." || { echo "SKIP: clang-format 14 not found"; exit 77; }
cd "$ROOT"
files=$(git ls-files 'src/*.c' 'src/*.h' 'src/*.cu' 'src/*.cuh' 'tests/*.c' 'tests/*.h' 'tests/*.cu' 'bench/*.c' 'bench/*.h' 2> /dev/null |
        grep -v '^src/embed/unicode_tables\.c$')
[ -n "$files" ] || { echo "FAIL: no source files found under $ROOT (not a git checkout?)"; exit 1; }
if [ "$FIX" = --fix ]; then
  echo "$files" | xargs "$CF" -i
  exit 0
fi
bad=0
for f in $files; do
  if ! "$CF" --dry-run -Werror "$f" > /dev/null 2>&1; then
    echo "not formatted: $f"
    bad=$((bad + 1))
  fi
done
echo "$(echo "$files" | wc -l) files checked, $bad not formatted (fix: tests/tools/format_check.sh $ROOT --fix)"
[ $bad -eq 0 ]
