#!/bin/sh
# test_split.sh - llama.cpp loads particle's split files (issue 15): `mkmodel
# --split-max-size` writes the gguf-split convention, llama.cpp (tools/oracle/oracle.mjs eval,
# opened on part 1 as llama.cpp requires) gives probabilities identical to its own on the
# single file, and particle's, opened on any part, agree with llama.cpp's within the targets
# of test_eval.sh (mean KL <= 1e-2 quantized, top-1 >= 0.98, 200 tokens) and are identical to
# particle's on the single file.  A 3-part `small` qwen3moe Q4_K_M, and tiny gemma4 and
# bailingmoe2 files in 3 parts.
. "$(dirname "$0")/../cli/lib.sh"
ORACLE="$(dirname "$0")/../../tools/oracle/oracle.mjs"
N=200

awk -v n=$N 'BEGIN { x = 12345; printf "["; for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%d%s", int(x / 65536) % 256, (i < n - 1 ? "," : "]\n") } }' >"$TMP/toks.json"
tr -d '[]' <"$TMP/toks.json" >"$TMP/toks"

# check NAME ARCH PRESET SPLIT-FLAG VALUE
check() {
	name=$1; arch=$2; preset=$3; flag=$4; val=$5
	m="$TMP/$name.gguf"; s="$TMP/$name-split"
	if ! "$PARTICLE" mkmodel --arch "$arch" --preset "$preset" -o "$m" >/dev/null 2>"$TMP/mk.err" ||
	   ! "$PARTICLE" mkmodel --arch "$arch" --preset "$preset" "$flag" "$val" -o "$s.gguf" \
		>/dev/null 2>>"$TMP/mk.err"; then
		bad "$name: mkmodel failed: $(head -c 300 "$TMP/mk.err")"
		return
	fi
	p1="$s-00001-of-00003.gguf"; p2="$s-00002-of-00003.gguf"; p3="$s-00003-of-00003.gguf"
	if [ -f "$p1" ] && [ -f "$p2" ] && [ -f "$p3" ]; then ok; else bad "$name: not 3 parts"; return; fi
	if node "$ORACLE" eval "$m" "$TMP/toks.json" "$TMP/ref1" >/dev/null 2>"$TMP/o.err" &&
	   node "$ORACLE" eval "$p1" "$TMP/toks.json" "$TMP/ref3" >/dev/null 2>>"$TMP/o.err"; then
		ok
	else
		bad "$name: llama.cpp oracle failed: $(tail -c 300 "$TMP/o.err")"
		return
	fi
	if [ -s "$TMP/ref1" ] && cmp -s "$TMP/ref1" "$TMP/ref3"; then ok; else bad "$name: llama.cpp's probabilities differ between the single file and the split"; fi
	expect_exit 0 "$name: particle via part 2 vs llama.cpp on the split" -- "$PARTICLE" eval \
		-m "$p2" --tokens-file "$TMP/toks" --top 0 --batch $N --threads 2 \
		--probs-out "$TMP/pp.bin" --compare "$TMP/ref3" --max-mean-kl 1e-2 --min-top1 0.98
	echo "$name: llama.cpp (split) vs particle (split): $(grep '^compare:' "$TMP/err")"
	"$PARTICLE" eval -m "$m" --tokens-file "$TMP/toks" --top 0 --batch $N --threads 2 \
		--probs-out "$TMP/ps.bin" >/dev/null 2>&1
	if [ -s "$TMP/ps.bin" ] && cmp -s "$TMP/ps.bin" "$TMP/pp.bin"; then ok; else bad "$name: particle's probabilities differ between the single file and the split"; fi
	rm -f "$m" "$s"-0000?-of-00003.gguf
}

check "qwen3moe-small" qwen3moe small --split-max-size 100M
check "gemma4-tiny" gemma4 tiny --split-max-tensors 30
check "bailingmoe2-tiny" bailingmoe2 tiny --split-max-size 2200000
finish
