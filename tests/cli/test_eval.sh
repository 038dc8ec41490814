#!/bin/sh
# test_eval.sh - `particle eval` argument handling (model-backed numerics are in
# tests/oracle/test_eval.sh).
. "$(dirname "$0")/lib.sh"
expect_exit 0 "eval --help" -- "$PARTICLE" eval --help
for flag in --model --prompt --tokens --tokens-file --top --logits-out --probs-out --compare \
	--max-mean-kl --min-top1 --threads --kv-type --batch --ctx; do
	expect_grep "$TMP/out" -- "$flag" "help documents $flag"
done
expect_exit 2 "no model" -- "$PARTICLE" eval --tokens 1,2
expect_one_error_line "no model"
expect_exit 2 "no tokens" -- "$PARTICLE" eval -m x.gguf
expect_one_error_line "no tokens"
expect_exit 2 "two token sources" -- "$PARTICLE" eval -m x.gguf --tokens 1 --prompt hi
expect_exit 2 "unknown flag" -- "$PARTICLE" eval -m x.gguf --tokens 1 --frob 3
expect_grep "$TMP/err" "frob" "unknown flag named"
expect_exit 2 "flag without value" -- "$PARTICLE" eval -m x.gguf --tokens
expect_one_error_line "flag without value"
expect_exit 2 "bad kv type" -- "$PARTICLE" eval -m x.gguf --tokens 1 --kv-type q4_0
expect_grep "$TMP/err" "kv-type" "bad kv type named"
expect_exit 2 "bad batch" -- "$PARTICLE" eval -m x.gguf --tokens 1 --batch 0
expect_exit 2 "bad threads" -- "$PARTICLE" eval -m x.gguf --tokens 1 --threads abc
expect_exit 2 "bad token list" -- "$PARTICLE" eval -m x.gguf --tokens 1,x
expect_one_error_line "bad token list"
expect_exit 2 "missing tokens file" -- "$PARTICLE" eval -m x.gguf --tokens-file "$TMP/none"
expect_exit 1 "missing model file" -- "$PARTICLE" eval -m "$TMP/none.gguf" --tokens 1,2
expect_one_error_line "missing model file"

# A tiny model: --prompt equals --tokens of the same ids; output shape; files written.
M="$TMP/m.gguf"
expect_exit 0 "mkmodel" -- "$PARTICLE" mkmodel --arch qwen3moe --preset tiny --quant q8_0 -o "$M"
expect_exit 0 "tokenize" -- "$PARTICLE" tokenize -m "$M" --ids-only "Hello world"
ids=$(tr ' ' ',' <"$TMP/out")
expect_exit 0 "eval --tokens" -- "$PARTICLE" eval -m "$M" --tokens "$ids" --top 3 \
	--logits-out "$TMP/l.bin" --probs-out "$TMP/p.bin" --threads 1
cp "$TMP/out" "$TMP/by_ids"
n=$(echo "$ids" | tr ',' '\n' | grep -c .)
if [ "$(wc -l <"$TMP/by_ids")" -eq "$n" ]; then ok; else bad "one JSON line per position"; fi
expect_grep "$TMP/by_ids" '^{"pos":0,"token":[0-9]*,"top":\[\[[0-9]*,-[0-9.]*\],\[' "JSON line shape"
nv=$(( $(wc -c <"$TMP/l.bin") / 4 / n ))
if [ "$nv" -gt 256 ] && [ "$(wc -c <"$TMP/p.bin")" -eq "$(wc -c <"$TMP/l.bin")" ]; then ok; else bad "logits/probs file sizes"; fi
expect_exit 0 "eval --prompt" -- "$PARTICLE" eval -m "$M" --prompt "Hello world" --top 3 --threads 1
if cmp -s "$TMP/out" "$TMP/by_ids"; then ok; else bad "--prompt differs from --tokens of the same ids"; fi
expect_exit 0 "self compare" -- "$PARTICLE" eval -m "$M" --tokens "$ids" --top 0 --compare "$TMP/p.bin" --max-mean-kl 1e-6 --min-top1 1
expect_grep "$TMP/err" "^compare: positions $n mean_kl" "compare line"
rev=$(echo "$ids" | tr ',' '\n' | sort -rn | tr '\n' ',')
expect_exit 1 "compare over the limit fails" -- "$PARTICLE" eval -m "$M" --tokens "$rev" --top 0 \
	--compare "$TMP/p.bin" --max-mean-kl 1e-3 --min-top1 0.98
expect_grep "$TMP/err" "FAIL" "compare failure reported"
expect_exit 2 "compare wrong size" -- "$PARTICLE" eval -m "$M" --tokens "1,2" --top 0 --compare "$TMP/p.bin"
expect_one_error_line "compare wrong size"
expect_exit 2 "token out of vocabulary" -- "$PARTICLE" eval -m "$M" --tokens 99999999 --top 0
expect_one_error_line "token out of vocabulary"
finish
