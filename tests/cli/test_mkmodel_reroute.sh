#!/bin/sh
# test_mkmodel_reroute.sh - `particle mkmodel --reroute FILE --router-skew S`: rerouting a
# skew-0 file is byte-identical to a fresh mkmodel at S (tiny and small, every arch, 'real'
# and a number), rerouting back to 0 restores the skew-0 bytes, and bad uses are refused
# with one error line.  Also: --router-skew real adds routing locality measured by
# `particle routing` (next-token repeat well above skew 0's).  The skew-0 files come from
# lib.sh's model cache (shared with test_routing.sh).  PT_TEST_SUBSET=1 (the ASan+UBSan
# run): the small preset of qwen3moe only (tiny: every arch).
. "$(dirname "$0")/lib.sh"

expect_exit 0 "help" -- "$PARTICLE" mkmodel --help
expect_grep "$TMP/out" -- "--reroute" "help documents --reroute"
expect_grep "$TMP/out" "'real'" "help documents --router-skew real"
expect_exit 2 "reroute without --router-skew" -- "$PARTICLE" mkmodel --reroute "$TMP/x.gguf"
expect_one_error_line "reroute without --router-skew"
expect_exit 2 "reroute with --arch" -- "$PARTICLE" mkmodel --reroute "$TMP/x.gguf" \
	--router-skew 1 --arch qwen3moe
expect_grep "$TMP/err" "not --arch" "reroute names the flag it refuses"
expect_exit 2 "bad skew word" -- "$PARTICLE" mkmodel --arch qwen3moe --router-skew fake -o "$TMP/x.gguf"
expect_exit 1 "reroute a missing file" -- "$PARTICLE" mkmodel --reroute "$TMP/none.gguf" --router-skew 1
expect_one_error_line "reroute a missing file"
printf 'GGUF not really' >"$TMP/junk.gguf"
expect_exit 2 "reroute a non-GGUF" -- "$PARTICLE" mkmodel --reroute "$TMP/junk.gguf" --router-skew 1
expect_one_error_line "reroute a non-GGUF"

# same A B WHAT
same() { if cmp -s "$1" "$2"; then ok; else bad "$3: $1 and $2 differ"; fi; }

for arch in qwen3moe bailingmoe2 sarvam_moe gemma4 glm4moe deepseek2 gpt-oss; do
	for preset in tiny small; do
		[ "$preset" = small ] && [ "$arch" = sarvam_moe ] && continue
		[ "$SUBSET" -eq 1 ] && [ $preset = small ] && [ $arch != qwen3moe ] && continue
		q=q4_k_m; [ "$preset" = small ] && q=q4_0
		Z="$TMP/$arch-$preset-0.gguf" R="$TMP/$arch-$preset-r.gguf" F="$TMP/$arch-$preset-f.gguf"
		expect_exit 0 "$arch $preset skew 0" -- mkmodel_cached "$Z" --arch "$arch" \
			--preset "$preset" --quant $q
		cp "$Z" "$R"
		for s in real 2.5; do
			expect_exit 0 "$arch $preset fresh $s" -- "$PARTICLE" mkmodel --arch "$arch" \
				--preset "$preset" --quant $q --router-skew $s -o "$F"
			expect_exit 0 "$arch $preset reroute $s" -- "$PARTICLE" mkmodel --reroute "$R" \
				--router-skew $s --threads 3
			# the rewritten file is left out of the page cache (written pages sit there
			# in small folios: util/safefile.h), though the cp above cached all of it
			if [ "$arch" = qwen3moe ] && command -v fincore >/dev/null 2>&1 &&
				[ "$(stat -f -c %T "$TMP")" != tmpfs ]; then
				res=$(fincore -b -n -o RES "$R" | tr -d ' ') size=$(stat -c %s "$R")
				[ "$res" -lt $((size / 4)) ] && ok ||
					bad "$arch $preset reroute $s: still cached: $res of $size bytes"
			fi
			same "$R" "$F" "$arch $preset reroute to $s vs fresh"
		done
		expect_exit 0 "$arch $preset reroute 0" -- "$PARTICLE" mkmodel --reroute "$R" --router-skew 0
		same "$R" "$Z" "$arch $preset reroute back to 0"
		rm -f "$Z" "$R" "$F"
	done
done

# Locality: 'real' raises the next-token repeat far above skew 0's (tiny qwen3moe).
M="$TMP/q.gguf"
overlap() { awk '/^ mean/ { print $5; exit }' "$1"; }
expect_exit 0 "routing skew 0" -- "$PARTICLE" mkmodel --arch qwen3moe --preset small --quant q4_0 \
	-o "$M" --routing-report
o0=$(overlap "$TMP/out")
expect_exit 0 "reroute real + report" -- "$PARTICLE" mkmodel --reroute "$M" --router-skew real \
	--routing-report
expect_grep "$TMP/out" "within8" "report has the within-8 measure"
o1=$(overlap "$TMP/out")
if awk -v a="$o1" -v b="$o0" 'BEGIN { exit !(a > 0.35 && a < 0.65 && b < 0.2) }'; then ok; else
	bad "next-token repeat skew 0 $o0 (want < 0.2), real $o1 (want 0.35-0.65)"; fi
echo "small qwen3moe next-token repeat: skew 0 $o0, real $o1"
finish
