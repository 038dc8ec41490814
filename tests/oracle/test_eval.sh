#!/bin/sh
# test_eval.sh - the forward pass against llama.cpp (tools/oracle/oracle.mjs eval: one batch,
# flash attention as llama.cpp's default) on `particle mkmodel` tiny models, every arch x
# {F32, F16, Q8_0, Q4_K_M, Q6_K, Q3_K_M, Q2_K} (glm4moe, deepseek2: F32, F16, Q4_K_M), 200
# teacher-forced tokens, particle in one prefill chunk.  deepseek2 (MLA) is also compared at
# the AVX-512, AVX2 and scalar kernel levels (PARTICLE_CPU) where the CPU has them, on F32 and
# on its published mixture Q4_K_M (F16 at the best level only: docs/TESTING.md, "Test time").
#
# Target (issue #4), asserted: mean KL(llama.cpp || particle) <= 1e-3 for F32/F16, <= 1e-2
# for the quantized mixtures, top-1 agreement >= 98 %, on every tiny combination and on the
# small Q4_K_M file of each arch.  Each line also shows the model's own sensitivity
# (particle's one-chunk vs token-by-token run): agreement with llama.cpp cannot be better
# than it, and mkmodel's generator keeps it small (docs/MODELS.md, "Conditioning").
#
# Also: --threads 1 and 2 give bit-identical logits; with an F32 KV cache one-chunk prefill
# equals token-by-token decode bit for bit; with the default F16 cache (prefill uses ggml's
# tiled attention numerics, decode its one-row F16 numerics, as llama.cpp does) the two
# agree within mean KL 1e-2 on F32 weights.
. "$(dirname "$0")/../cli/lib.sh"
OB_ORACLE="$(dirname "$0")/../../tools/oracle/oracle.mjs"
. "$(dirname "$0")/batch.sh"
N=200

# 200 deterministic ids below 256 (every tiny vocabulary has the 256 byte tokens), as a
# JSON array for the oracle and a comma list for particle.
awk -v n=$N 'BEGIN { x = 12345; printf "["; for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%d%s", int(x / 65536) % 256, (i < n - 1 ? "," : "]\n") } }' >"$TMP/toks.json"
tr -d '[]' <"$TMP/toks.json" >"$TMP/toks"

# field NAME LINE: the first value after NAME in a compare line.
field() { echo "$2" | awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }'; }

# run_eval NAME MODEL TARGET_KL REF [JOB]: llama.cpp (REF: its dump of MODEL, written by job
# JOB of the arch's oracle batch, or by an earlier job when JOB is empty) vs particle (one
# chunk), and particle's own one-chunk vs token-by-token difference on the same file as the
# model's sensitivity.
run_eval() {
	name=$1; model=$2; target=$3; ref=$4
	if [ -n "${5:-}" ] && [ "$(ob_rc "$5")" != 0 ]; then
		bad "$name: llama.cpp oracle failed: $(tail -c 300 "$(ob_err "$5")")"
		return
	fi
	"$PARTICLE" eval -m "$model" --tokens-file "$TMP/toks" --top 0 --batch $N --threads 2 \
		--probs-out "$TMP/pre.bin" --compare "$ref" --max-mean-kl 1e9 --min-top1 0 \
		>/dev/null 2>"$TMP/err1"
	"$PARTICLE" eval -m "$model" --tokens-file "$TMP/toks" --top 0 --batch 1 --threads 2 \
		--compare "$TMP/pre.bin" --max-mean-kl 1e9 --min-top1 0 >/dev/null 2>"$TMP/err2"
	vs=$(grep '^compare:' "$TMP/err1"); self=$(grep '^compare:' "$TMP/err2")
	if [ -z "$vs" ] || [ -z "$self" ]; then
		bad "$name: eval failed: $(head -c 300 "$TMP/err1" "$TMP/err2")"
		return
	fi
	kl=$(field mean_kl "$vs"); t1=$(field top1 "$vs")
	skl=$(field mean_kl "$self"); st1=$(field top1 "$self")
	verdict=$(awk -v kl="$kl" -v t1="$t1" -v t="$target" 'BEGIN {
		printf "%s (mean KL <= %s, top-1 >= 0.98)", (kl + 0 <= t + 0 && t1 + 0 >= 0.98) ? "target met" : "TARGET MISSED", t }')
	case $verdict in "target met"*) ok ;; *) bad "$name: $verdict" ;; esac
	echo "$name: $verdict"
	echo "    llama.cpp vs particle:        mean_kl $kl top1 $t1 max_kl $(field max_kl "$vs")"
	echo "    particle prefill vs decode:   mean_kl $skl top1 $st1"
}

for arch in qwen3moe gemma4 bailingmoe2 glm4moe deepseek2; do
	# the later families: their float types and their published mixture (issue 17)
	qs="f32 f16 q8_0 q4_k_m q6_k q3_k_m q2_k"
	case $arch in glm4moe|deepseek2) qs="f32 f16 q4_k_m" ;; esac
	# every file of the arch first, with llama.cpp's dump of each queued: one oracle batch
	# (tests/oracle/batch.sh) per arch instead of one node process per file
	made=""
	for q in $qs; do
		m="$TMP/$arch-$q.gguf"
		if ! mkmodel_cached "$m" --arch "$arch" --preset tiny --quant "$q" \
			>"$TMP/mk.out" 2>"$TMP/mk.err"; then
			bad "$arch $q: mkmodel failed: $(head -c 300 "$TMP/mk.err")"
			continue
		fi
		ob_add eval "$m" "$TMP/toks.json" "$TMP/ref-$q"
		made="$made $q:$OB_N"
	done
	small="$TMP/$arch-small-q4_k_m.gguf"
	if mkmodel_cached "$small" --arch "$arch" --preset small --quant q4_k_m \
		>"$TMP/mk.out" 2>"$TMP/mk.err"; then
		ob_add eval "$small" "$TMP/toks.json" "$TMP/ref-small"; small_job=$OB_N
	else
		bad "$arch small q4_k_m: mkmodel failed: $(head -c 300 "$TMP/mk.err")"; small=""
	fi
	lite=""
	if [ "$arch" = deepseek2 ]; then # V2-Lite's layout: attn_q, softmax, mscale_all_dim 0.707
		lite="$TMP/$arch-lite.gguf"
		if "$PARTICLE" mkmodel --arch "$arch" --preset tiny-lite --quant f16 -o "$lite" \
			>"$TMP/mk.out" 2>"$TMP/mk.err"; then
			ob_add eval "$lite" "$TMP/toks.json" "$TMP/ref-lite"; lite_job=$OB_N
		else
			bad "$arch tiny-lite: mkmodel failed: $(head -c 300 "$TMP/mk.err")"; lite=""
		fi
	fi
	ob_run
	for qj in $made; do
		q=${qj%%:*}; job=${qj#*:}
		m="$TMP/$arch-$q.gguf"
		case $q in f32|f16) target=1e-3 ;; *) target=1e-2 ;; esac
		run_eval "$arch $q" "$m" $target "$TMP/ref-$q" "$job"
		[ "$arch" = deepseek2 ] && [ "$q" != f16 ] || continue
		for lvl in avx512 avx2 scalar; do
			PARTICLE_CPU=$lvl "$PARTICLE" eval -m "$m" --tokens 1 --top 0 >/dev/null \
				2>&1 || continue # the CPU lacks the level
			export PARTICLE_CPU=$lvl
			run_eval "$arch $q ($lvl)" "$m" $target "$TMP/ref-$q"
			unset PARTICLE_CPU
		done
	done
	if [ -n "$small" ]; then
		run_eval "$arch small q4_k_m" "$small" 1e-2 "$TMP/ref-small" "$small_job"
		rm -f "$small"
	fi
	if [ -n "$lite" ]; then
		run_eval "$arch tiny-lite f16" "$lite" 1e-3 "$TMP/ref-lite" "$lite_job"
		rm -f "$lite"
	fi
	rm -f "$TMP"/ref-*
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
