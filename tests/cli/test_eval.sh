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
expect_exit 2 "bad kv type" -- "$PARTICLE" eval -m x.gguf --tokens 1 --kv-type q8_0
expect_grep "$TMP/err" "kv-type" "bad kv type named"
expect_exit 2 "bad batch" -- "$PARTICLE" eval -m x.gguf --tokens 1 --batch 0
expect_exit 2 "bad threads" -- "$PARTICLE" eval -m x.gguf --tokens 1 --threads abc
expect_exit 2 "bad token list" -- "$PARTICLE" eval -m x.gguf --tokens 1,x
expect_one_error_line "bad token list"
expect_exit 2 "prompt without tokenizer" -- "$PARTICLE" eval -m x.gguf --prompt hello
expect_one_error_line "prompt without tokenizer"
expect_grep "$TMP/err" "tokenizer" "prompt error explains"
expect_exit 2 "missing tokens file" -- "$PARTICLE" eval -m x.gguf --tokens-file "$TMP/none"
expect_exit 1 "missing model file" -- "$PARTICLE" eval -m "$TMP/none.gguf" --tokens 1,2
expect_one_error_line "missing model file"
finish
