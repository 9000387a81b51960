#!/usr/bin/env bash
# make_fixture.sh: regenerates the committed embed fixtures (tests/data/embed_*) and the Unicode tables
# (src/embed/unicode_tables.c) from the reference implementations. Not run by CI: it installs
# sentence-transformers (and so torch, several GB) into .venv/embed-fixture, and the corpus packages.
# usage: tests/embed/make_fixture.sh   (after scripts/fetch-model)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="$ROOT/.venv/embed-fixture"
MODEL="$ROOT/models/all-MiniLM-L6-v2"
[[ -f "$MODEL/tokenizer.json" ]] || "$ROOT/scripts/fetch-model"
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
fi
# The versions the committed fixtures were made with.
"$VENV/bin/pip" install --quiet --disable-pip-version-check \
  sentence-transformers==6.2.0 transformers==5.23.0 tokenizers==0.23.3 torch==2.15.0 numpy
if ! dpkg -s wordnet-base fortunes fortunes-de fortunes-ru fortunes-cs fortunes-pl fortunes-es fortunes-eo fortunes-bg fortunes-zh >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wordnet-base fortunes fortunes-de fortunes-ru fortunes-cs \
    fortunes-pl fortunes-es fortunes-eo fortunes-bg fortunes-zh
fi
cd "$ROOT"
"$VENV/bin/python" scripts/gen-unicode-tables.py src/embed/unicode_tables.c
HF_HUB_OFFLINE=1 "$VENV/bin/python" tests/embed/make_fixture.py "$MODEL" tests/data
ls -la tests/data/embed_*
