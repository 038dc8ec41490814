#!/bin/sh
# make-demo-model.sh - `make demo-model`: retrains the committed demo model from Debian-packaged
# text (tools/train/DATA.md) on the CPU in two stages (700 steps from scratch, then 500 more
# steps from those weights at a lower learning rate), exports it as Q8_0 GGUF, validates it
# with `particle inspect` and rewrites its manifest.  The committed model took 49 minutes of
# training (one thread, nice 19, on a 2-core machine shared with builds); data and tokenizer
# add about 3 minutes.
# PYTHON_TORCH: a Python with torch and numpy (default Debian's /usr/bin/python3).
set -eu
PY=${PYTHON_TORCH:-/usr/bin/python3}
WORK=${WORK:-build/train}
OUT=${OUT:-models-demo/demo-qwen3moe-q8_0.gguf}
S1=$WORK/stage1 S2=$WORK/stage2
mkdir -p "$S1" "$S2" "$(dirname "$OUT")"
rm -f "$S1/model.pt" "$S2/model.pt" "$WORK/new.gguf" "$WORK/MANIFEST.md"
# Stage 1 rebuilds the corpus and the tokenizer (no --reuse): everything comes from the packages.
nice -n 19 "$PY" tools/train/train.py --out "$S1" >"$S1/train.log" 2>&1 || { tail "$S1/train.log"; exit 1; }
cp "$S1/tokenizer.json" "$S1/tokens.npy" "$S2/"
nice -n 19 "$PY" tools/train/train.py --out "$S2" --reuse --init "$S1/model.pt" --steps 500 \
	--lr 1e-3 --warmup 10 --seed 21 >"$S2/train.log" 2>&1 || { tail "$S2/train.log"; exit 1; }
tail -n 40 "$S2/train.log"
"$PY" tools/train/export.py "$S2" "$WORK/new.gguf" --type q8_0
./build/particle inspect "$WORK/new.gguf" >/dev/null
"$PY" tools/train/manifest.py "$WORK/MANIFEST.md" "$WORK/new.gguf" "$S1" "$S2"
mv "$WORK/new.gguf" "$OUT"
mv "$WORK/MANIFEST.md" "$(dirname "$OUT")/MANIFEST.md"
echo "make-demo-model: wrote $OUT and $(dirname "$OUT")/MANIFEST.md"
