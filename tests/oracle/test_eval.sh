#!/bin/sh
# test_eval.sh - the forward pass against llama.cpp: for every arch x {F32, F16, Q8_0,
# Q4_K_M, Q6_K} tiny model from `particle mkmodel`, a 200-token teacher-forced sequence
# must give mean KL(llama.cpp || particle) <= 1e-3 (F32/F16) or <= 1e-2 (quantized) and
# top-1 agreement >= 98 %.  Also: --threads 1 and 2 give bit-identical logits; one-chunk
# prefill equals token-by-token decode bit for bit with an F32 KV cache, and within the
# documented tolerance (mean KL <= 1e-2, the size of llama.cpp's own batched-vs-decode
# difference on these models) with the default F16 cache, whose prefill uses ggml's tiled
# attention numerics.
. "$(dirname "$0")/../cli/lib.sh"
ORACLE="$(dirname "$0")/../../tools/oracle/oracle.mjs"
N=200

# 200 deterministic ids below 256 (every tiny vocabulary has the 256 byte tokens), as a
# JSON array for the oracle and a comma list for particle.
awk -v n=$N 'BEGIN { x = 12345; printf "["; for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%d%s", int(x / 65536) % 256, (i < n - 1 ? "," : "]\n") } }' >"$TMP/toks.json"
tr -d '[]' <"$TMP/toks.json" >"$TMP/toks"

# run_eval NAME MODEL LIMIT [extra eval flags...]: oracle + compare, prints the compare line.
run_eval() {
	name=$1; model=$2; limit=$3; shift 3
	if ! node "$ORACLE" eval "$model" "$TMP/toks.json" "$TMP/ref" >/dev/null 2>"$TMP/oracle.err"; then
		bad "$name: llama.cpp oracle failed: $(tail -c 300 "$TMP/oracle.err")"
		return
	fi
	expect_exit 0 "$name: KL <= $limit, top-1 >= 0.98" -- "$PARTICLE" eval -m "$model" \
		--tokens-file "$TMP/toks" --top 0 --compare "$TMP/ref" --max-mean-kl "$limit" \
		--min-top1 0.98 "$@"
	echo "$name: $(grep '^compare:' "$TMP/err")"
}

for arch in qwen3moe gemma4 bailingmoe2; do
	for q in f32 f16 q8_0 q4_k_m q6_k; do
		m="$TMP/$arch-$q.gguf"
		if ! "$PARTICLE" mkmodel --arch "$arch" --preset tiny --quant "$q" -o "$m" \
			>"$TMP/mk.out" 2>"$TMP/mk.err"; then
			bad "$arch $q: mkmodel failed: $(head -c 300 "$TMP/mk.err")"
			continue
		fi
		case $q in f32|f16) lim=1e-3 ;; *) lim=1e-2 ;; esac
		run_eval "$arch $q" "$m" $lim --threads 2
	done
	# thread-count and prefill/decode invariants on one quantized mixture
	m="$TMP/$arch-q4_k_m.gguf"
	[ -f "$m" ] || continue
	for t in 1 2; do
		"$PARTICLE" eval -m "$m" --tokens-file "$TMP/toks" --top 0 --threads $t \
			--logits-out "$TMP/t$t.bin" >/dev/null 2>&1
	done
	if [ -s "$TMP/t1.bin" ] && cmp -s "$TMP/t1.bin" "$TMP/t2.bin"; then ok; else bad "$arch: --threads 1 vs 2 logits differ"; fi
	for b in 1 $N; do
		"$PARTICLE" eval -m "$m" --tokens-file "$TMP/toks" --top 0 --kv-type f32 \
			--batch $b --logits-out "$TMP/b$b.bin" >/dev/null 2>&1
	done
	if [ -s "$TMP/b1.bin" ] && cmp -s "$TMP/b1.bin" "$TMP/b$N.bin"; then ok; else bad "$arch: f32 KV prefill vs decode logits differ"; fi
	"$PARTICLE" eval -m "$m" --tokens-file "$TMP/toks" --top 0 --batch $N \
		--probs-out "$TMP/p.bin" >/dev/null 2>&1
	expect_exit 0 "$arch: f16 KV prefill vs decode within tolerance" -- "$PARTICLE" eval \
		-m "$m" --tokens-file "$TMP/toks" --top 0 --batch 1 --compare "$TMP/p.bin" \
		--max-mean-kl 1e-2 --min-top1 0.9
	echo "$arch f16-KV prefill vs decode: $(grep '^compare:' "$TMP/err")"
done
finish
