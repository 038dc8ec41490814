#!/bin/sh
# test_stream.sh - streaming routed experts through the engine (issue 6):
#  * logits bit-identical (cmp) to the all-in-RAM (mmap) run for every arch, I/O mode, cache
#    policy and budget (top-k slots = the minimum, a few more, every expert, and --memory at
#    the planner's smallest budget), for prefill waves (--batch 16) and decode (--batch 1);
#  * the planner refuses a too-small budget with the numbers;
#  * a `small` model whose expert bytes are >= 3x the budget runs with peak RSS <= budget + 5%.
. "$(dirname "$0")/lib.sh"
case "$PARTICLE" in *asan*) SAN=1 ;; *) SAN=0 ;; esac

# STREAM_QUICK=1 (the ThreadSanitizer run): top-k slots only, no small model.
QUICK=${STREAM_QUICK:-0}

T=$(seq -s, 3 60)
expect_exit 0 "eval --help" -- "$PARTICLE" eval --help
for flag in --memory --expert-slots --io --cache-policy --pack --pack-cache --pack-cache-size \
	--trace-experts --stats-json --no-lock --verbose; do
	expect_grep "$TMP/out" -- "$flag " "help documents $flag"
done
for arch in qwen3moe bailingmoe2 gemma4 glm4moe deepseek2 gpt-oss; do
	M="$TMP/$arch.gguf"
	expect_exit 0 "mkmodel $arch" -- "$PARTICLE" mkmodel --arch "$arch" --preset tiny -o "$M"
	expect_exit 0 "$arch: verbose run" -- "$PARTICLE" eval -m "$M" --tokens 1,2 --top 0 --verbose
	k=$(sed -n 's/.* experts (top-\([0-9]*\)).*/\1/p' "$TMP/err")
	ne=$(sed -n 's/.* \([0-9]*\) experts (top-.*/\1/p' "$TMP/err")
	# smallest budget the planner accepts, from its refusal
	expect_exit 2 "$arch: budget too small refused" -- "$PARTICLE" eval -m "$M" --tokens "$T" \
		--top 0 --batch 16 --memory 1M
	expect_one_error_line "$arch: refusal"
	expect_grep "$TMP/err" "too small: resident [0-9.]* [KMG]*i*B + KV [0-9.]* [KMG]*i*B .* slots/layer x .*smallest budget that works: [0-9]* bytes" "$arch: refusal numbers"
	min=$(sed -n 's/.*smallest budget that works: \([0-9]*\) bytes.*/\1/p' "$TMP/err")
	expect_exit 0 "$arch: --io mmap runs past the budget (not enforceable)" -- "$PARTICLE" eval \
		-m "$M" --tokens "$T" --top 0 --batch 16 --memory 1M --io mmap --verbose
	expect_grep "$TMP/err" "budget .* not enforced" "$arch: mmap budget note"
	for b in 16 1; do
		expect_exit 0 "$arch: reference b$b" -- "$PARTICLE" eval -m "$M" --tokens "$T" --top 0 \
			--batch "$b" --io mmap --logits-out "$TMP/ref.bin"
		for io in direct buffered; do
			for pol in lfu lru; do
				set -- "--expert-slots $k" "--expert-slots $((k + 3))" \
					"--expert-slots $ne" "--memory $min"
				[ "$QUICK" -eq 1 ] && set -- "--expert-slots $k"
				for s in "$@"; do
					# shellcheck disable=SC2086
					expect_exit 0 "$arch b$b $io $pol $s" -- "$PARTICLE" eval -m "$M" \
						--tokens "$T" --top 0 --batch "$b" --io "$io" \
						--cache-policy "$pol" $s --logits-out "$TMP/l.bin" \
						--stats-json "$TMP/s.json"
					if cmp -s "$TMP/ref.bin" "$TMP/l.bin"; then ok; else
						bad "$arch b$b $io $pol $s: logits differ from the mmap run"; fi
				done
				expect_grep "$TMP/s.json" '"misses": [1-9]' "$arch $io $pol: experts were read"
			done
		done
		# the pread pool (io_uring unavailable), minimum slots
		expect_exit 0 "$arch b$b pread pool" -- env PARTICLE_IO=pread "$PARTICLE" eval -m "$M" \
			--tokens "$T" --top 0 --batch "$b" --expert-slots "$k" --logits-out "$TMP/l.bin" \
			--verbose
		expect_grep "$TMP/err" "experts: .*pread" "$arch: pread pool in use"
		if cmp -s "$TMP/ref.bin" "$TMP/l.bin"; then ok; else
			bad "$arch b$b pread pool: logits differ from the mmap run"; fi
	done
	# read-ahead on (default) and off: the same logits as the mapping, in decode (batch 1:
	# the guess of the next layer's experts) and in prefill (batch 16: waves of half the
	# slots, each next wave read while one computes)
	for b in 16 1; do
		expect_exit 0 "$arch: reference b$b again" -- "$PARTICLE" eval -m "$M" --tokens "$T" \
			--top 0 --batch "$b" --io mmap --logits-out "$TMP/ref.bin"
		for ra in 1 0; do
			expect_exit 0 "$arch: b$b read-ahead $ra" -- env PARTICLE_READ_AHEAD=$ra \
				"$PARTICLE" eval -m "$M" --tokens "$T" --top 0 --batch "$b" --io direct \
				--expert-slots $((k + 2)) --no-profile --logits-out "$TMP/l.bin" \
				--stats-json "$TMP/s.json"
			if cmp -s "$TMP/ref.bin" "$TMP/l.bin"; then ok; else
				bad "$arch: b$b read-ahead $ra logits differ from the mmap run"; fi
			if [ "$ra" = 1 ]; then
				expect_grep "$TMP/s.json" '"read_ahead_used": [1-9]' "$arch b$b: read ahead, used"
			else
				expect_grep "$TMP/s.json" '"read_ahead": 0,' "$arch b$b: nothing read ahead"
			fi
		done
	done
	[ "$k" -gt 0 ] && [ "$ne" -gt "$k" ] && ok || bad "$arch: top-k $k / $ne experts parsed"
	# an expert pack beside the model (one read per expert) and the lazy pack cache
	expect_exit 0 "$arch: pack" -- "$PARTICLE" pack "$M"
	expect_exit 0 "$arch: eval with the pack" -- "$PARTICLE" eval -m "$M" --tokens "$T" --top 0 \
		--batch 1 --expert-slots "$k" --logits-out "$TMP/l.bin" --verbose
	expect_grep "$TMP/err" "experts: .*expert pack" "$arch: pack in use"
	if cmp -s "$TMP/ref.bin" "$TMP/l.bin"; then ok; else bad "$arch: pack logits differ"; fi
	for run in 1 2; do
		expect_exit 0 "$arch: pack cache run $run" -- "$PARTICLE" eval -m "$M" --tokens "$T" \
			--top 0 --batch 1 --expert-slots "$k" --pack-cache "$TMP/pc" \
			--pack-cache-size 8M --logits-out "$TMP/l.bin"
		if cmp -s "$TMP/ref.bin" "$TMP/l.bin"; then ok; else
			bad "$arch: pack cache run $run logits differ"; fi
	done
	rm -rf "$TMP/pc" "$M".xpack*
done

if [ "$QUICK" -eq 1 ]; then finish; exit; fi

# Bounded memory: a small model, budget just above the planner's minimum.
S="$TMP/small.gguf"
expect_exit 0 "mkmodel small" -- mkmodel_cached "$S" --arch qwen3moe --preset small --quant q4_k_m
expect_exit 2 "small: refusal" -- "$PARTICLE" eval -m "$S" --tokens "$T" --top 0 --memory 1M
min=$(sed -n 's/.*smallest budget that works: \([0-9]*\) bytes.*/\1/p' "$TMP/err")
budget=$((min + 2 * 1048576))
expect_exit 0 "small: bounded run" -- "$PARTICLE" eval -m "$S" --tokens "$T" --top 0 \
	--memory "$budget" --stats-json "$TMP/s.json" --verbose --logits-out "$TMP/l.bin"
expect_grep "$TMP/err" "^particle: plan: resident" "plan line printed"
rss=$(sed -n 's/.*"peak_rss_bytes": \([0-9]*\).*/\1/p' "$TMP/s.json")
read_b=$(sed -n 's/.*"bytes_read": \([0-9]*\), "read_s".*/\1/p' "$TMP/s.json" | head -n 1)
fsize=$(wc -c <"$S")
echo "small model: file $fsize bytes, budget $budget bytes, peak RSS $rss bytes, expert bytes read $read_b"
if [ "$fsize" -ge $((3 * budget)) ]; then ok; else bad "small model is not >= 3x the budget"; fi
if [ "$SAN" -eq 1 ]; then
	echo "(peak RSS bound not checked under ASan: shadow memory)"
elif [ -n "$rss" ] && [ "$rss" -le $((budget + budget / 20)) ]; then ok
else bad "peak RSS $rss > budget $budget + 5%"; fi
expect_exit 0 "small: mmap reference" -- "$PARTICLE" eval -m "$S" --tokens "$T" --top 0 \
	--io mmap --logits-out "$TMP/ref.bin"
if cmp -s "$TMP/ref.bin" "$TMP/l.bin"; then ok; else bad "small: bounded logits differ"; fi

# Flags.
expect_exit 2 "bad --io" -- "$PARTICLE" eval -m "$S" --tokens 1 --io fast
expect_one_error_line "bad --io"
expect_exit 2 "bad --cache-policy" -- "$PARTICLE" eval -m "$S" --tokens 1 --cache-policy mru
expect_exit 2 "bad --memory" -- "$PARTICLE" eval -m "$S" --tokens 1 --memory lots
expect_exit 0 "trace" -- "$PARTICLE" eval -m "$S" --tokens 1,2,3 --top 0 --trace-experts "$TMP/t.txt" --no-lock
n=$(grep -c '^[0-9]' "$TMP/t.txt")
if [ "$n" -eq 24 ]; then ok; else bad "trace has $n records, want 3 tokens x 8 layers"; fi
expect_exit 0 "cachesim on the trace" -- "$PARTICLE" cachesim "$TMP/t.txt" --slots 4
finish
