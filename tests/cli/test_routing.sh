#!/bin/sh
# test_routing.sh - `particle routing` and `mkmodel --routing-report`: synthetic checkpoints
# route like a trained load-balanced model at --router-skew 0 (every layer of tiny and small
# files of every arch uses >= 60 % of its experts, consecutive tokens' expert sets overlap
# well below 50 %), and a positive skew lowers the popularity entropy.  The skew-0 files come
# from lib.sh's model cache (test_mkmodel_reroute.sh writes the same ones); mkmodel's own
# --routing-report prints the same report as `particle routing` and is used for the rest.
# PT_TEST_SUBSET=1 (the ASan+UBSan run): the small preset of qwen3moe only.
. "$(dirname "$0")/lib.sh"

expect_exit 0 "routing --help" -- "$PARTICLE" routing --help
for flag in --model --tokens --json; do
	expect_grep "$TMP/out" -- "$flag" "help documents $flag"
done
expect_exit 2 "routing without a model" -- "$PARTICLE" routing
expect_one_error_line "routing without a model"
expect_exit 2 "routing bad flag" -- "$PARTICLE" routing -m x --frob
expect_exit 2 "routing bad --tokens" -- "$PARTICLE" routing -m x --tokens 1

# check_layers FILE WHAT: every layer row of the table passes the bounds
check_layers() {
	bad_rows=$(awk '/^ *[0-9]+ +[0-9]+\/[0-9]+/ {
		split($2, d, "/"); if (d[1] < 0.6 * d[2] || $6 >= 0.45) print }' "$1")
	rows=$(grep -c '^ *[0-9]* *[0-9]*/[0-9]' "$1")
	if [ -z "$bad_rows" ] && [ "$rows" -gt 0 ]; then ok; else
		bad "$2: layers outside the bounds (>= 60% experts, overlap < 0.45): $bad_rows"; fi
}
mean_entropy() { awk '/^ mean/ { print $4 }' "$1"; }

for arch in qwen3moe bailingmoe2 gemma4 glm4moe deepseek2 gpt-oss; do
	for preset in tiny small; do
		[ "$SUBSET" -eq 1 ] && [ $preset = small ] && [ $arch != qwen3moe ] && continue
		M="$TMP/$arch-$preset.gguf"
		expect_exit 0 "mkmodel $arch $preset" -- mkmodel_cached "$M" --arch "$arch" \
			--preset "$preset" --quant q4_0
		expect_exit 0 "routing $arch $preset" -- "$PARTICLE" routing -m "$M"
		expect_grep "$TMP/out" "^routing: $M, 256 tokens, top-" "$arch $preset: report header"
		check_layers "$TMP/out" "$arch $preset skew 0"
		rm -f "$M"
	done
	M="$TMP/$arch.gguf"
	expect_exit 0 "routing $arch" -- "$PARTICLE" mkmodel --arch "$arch" -o "$M" --routing-report
	e0=$(mean_entropy "$TMP/out")
	expect_exit 0 "routing --json $arch" -- "$PARTICLE" routing -m "$M" --json --tokens 64
	expect_grep "$TMP/out" '^{"model": ".*", "tokens": 64, "n_expert": [0-9]*, "top_k": [0-9]*, "layers": \[{"layer": [0-9]*, "distinct": ' "$arch: JSON shape"
	expect_exit 0 "mkmodel $arch skew 8" -- "$PARTICLE" mkmodel --arch "$arch" --router-skew 8 \
		-o "$M" --routing-report
	e8=$(mean_entropy "$TMP/out")
	if awk -v a="$e8" -v b="$e0" 'BEGIN { exit !(a < b) }'; then ok; else
		bad "$arch: skew 8 entropy $e8 not below skew 0 entropy $e0"; fi
	echo "$arch tiny: normalised popularity entropy skew 0 $e0, skew 8 $e8"
done
finish
