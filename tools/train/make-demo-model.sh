#!/bin/sh
# make-demo-model.sh - `make demo-model`: retrains the committed demo model from Debian-packaged
# text (tools/train/DATA.md) on the CPU, exports it as Q8_0 GGUF, validates it with
# `particle inspect` and rewrites its manifest.  Takes about an hour on 2 shared cores.
# PYTHON_TORCH: a Python with torch and numpy (default Debian's /usr/bin/python3).
set -eu
PY=${PYTHON_TORCH:-/usr/bin/python3}
WORK=${WORK:-build/train}
OUT=${OUT:-models-demo/demo-qwen3moe-q8_0.gguf}
mkdir -p "$WORK" "$(dirname "$OUT")"
rm -f "$WORK/model.pt" "$WORK/loss.tsv" "$WORK/new.gguf" "$WORK/MANIFEST.md"
# The corpus and tokenizer are rebuilt too (no --reuse): the whole model comes from the packages.
nice -n 19 "$PY" tools/train/train.py --out "$WORK" 2>&1 | tee "$WORK/train.log"
"$PY" tools/train/export.py "$WORK" "$WORK/new.gguf" --type q8_0
./build/particle inspect "$WORK/new.gguf" >/dev/null
"$PY" tools/train/manifest.py "$WORK" "$WORK/new.gguf" "$WORK/MANIFEST.md"
mv "$WORK/new.gguf" "$OUT"
mv "$WORK/MANIFEST.md" "$(dirname "$OUT")/MANIFEST.md"
echo "make-demo-model: wrote $OUT and $(dirname "$OUT")/MANIFEST.md"
