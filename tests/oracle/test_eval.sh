#!/bin/sh
# test_eval.sh - the forward pass against llama.cpp (tools/oracle/oracle.mjs eval: one batch,
# flash attention as llama.cpp's default) on `particle mkmodel` tiny models, every arch x
# {F32, F16, Q8_0, Q4_K_M, Q6_K}, 200 teacher-forced tokens, particle in one prefill chunk.
#
# Target (issue #4): mean KL(llama.cpp || particle) <= 1e-3 for F32/F16, <= 1e-2 for the
# quantized mixtures, top-1 agreement >= 98 %.  Every combination is checked against a
# regression guard and prints `target met` or `TARGET MISSED`.  The guard is looser than the
# target (mean KL <= 1e-2, top-1 >= 93 %) because these synthetic models are chaotic: a
# last-bit difference flips an activation's Q8 rounding or a near-tied router choice, and the
# change then propagates - llama.cpp's own one-batch and token-by-token runs of the same
# Q4_K_M files differ by mean KL 1.3e-3 (qwen3moe), 7.5e-2 (gemma4), 3.1e-2 (bailingmoe2).
# Single-token runs (no attention history) agree with llama.cpp to ~5e-7 in the logits for
# every arch and mixture; see docs/ARCHITECTURE.md.
#
# Also: --threads 1 and 2 give bit-identical logits; with an F32 KV cache one-chunk prefill
# equals token-by-token decode bit for bit; with the default F16 cache (prefill uses ggml's
# tiled attention numerics, decode its one-row F16 numerics, as llama.cpp does) the two
# agree within mean KL 1e-2 on F32 weights.
. "$(dirname "$0")/../cli/lib.sh"
ORACLE="$(dirname "$0")/../../tools/oracle/oracle.mjs"
N=200

# 200 deterministic ids below 256 (every tiny vocabulary has the 256 byte tokens), as a
# JSON array for the oracle and a comma list for particle.
awk -v n=$N 'BEGIN { x = 12345; printf "["; for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%d%s", int(x / 65536) % 256, (i < n - 1 ? "," : "]\n") } }' >"$TMP/toks.json"
tr -d '[]' <"$TMP/toks.json" >"$TMP/toks"

# run_eval NAME MODEL TARGET_KL: oracle + compare under the guard; reports the target.
run_eval() {
	name=$1; model=$2; target=$3
	if ! node "$ORACLE" eval "$model" "$TMP/toks.json" "$TMP/ref" >/dev/null 2>"$TMP/oracle.err"; then
		bad "$name: llama.cpp oracle failed: $(tail -c 300 "$TMP/oracle.err")"
		return
	fi
	expect_exit 0 "$name: mean KL <= 1e-2, top-1 >= 0.93 (guard)" -- "$PARTICLE" eval \
		-m "$model" --tokens-file "$TMP/toks" --top 0 --batch $N --threads 2 \
		--compare "$TMP/ref" --max-mean-kl 1e-2 --min-top1 0.93
	line=$(grep '^compare:' "$TMP/err")
	verdict=$(echo "$line" | awk -v t="$target" '{ for (i = 1; i < NF; i++) { if ($i == "mean_kl" && kl == "") kl = $(i + 1); if ($i == "top1" && t1 == "") t1 = $(i + 1) } }
		END { if (kl + 0 <= t + 0 && t1 + 0 >= 0.98) print "target met"; else print "TARGET MISSED (mean KL <= " t ", top-1 >= 0.98)" }')
	echo "$name: $verdict: $line"
}

for arch in qwen3moe gemma4 bailingmoe2; do
	for q in f32 f16 q8_0 q4_k_m q6_k; do
		m="$TMP/$arch-$q.gguf"
		if ! "$PARTICLE" mkmodel --arch "$arch" --preset tiny --quant "$q" -o "$m" \
			>"$TMP/mk.out" 2>"$TMP/mk.err"; then
			bad "$arch $q: mkmodel failed: $(head -c 300 "$TMP/mk.err")"
			continue
		fi
		case $q in f32|f16) target=1e-3 ;; *) target=1e-2 ;; esac
		run_eval "$arch $q" "$m" $target
	done
	m="$TMP/$arch-q4_k_m.gguf"
	if [ -f "$m" ]; then
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
	fi
	m="$TMP/$arch-f32.gguf"
	if [ -f "$m" ]; then
		"$PARTICLE" eval -m "$m" --tokens-file "$TMP/toks" --top 0 --batch $N \
			--probs-out "$TMP/p.bin" >/dev/null 2>&1
		expect_exit 0 "$arch: f16 KV prefill vs decode within tolerance" -- "$PARTICLE" eval \
			-m "$m" --tokens-file "$TMP/toks" --top 0 --batch 1 --compare "$TMP/p.bin" \
			--max-mean-kl 1e-2 --min-top1 0.95
		echo "$arch f32 weights, f16 KV, prefill vs decode: $(grep '^compare:' "$TMP/err")"
	fi
done
finish
