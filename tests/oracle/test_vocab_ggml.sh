#!/bin/sh
# test_vocab_ggml.sh - the real vocabularies llama.cpp ships for its own tokenizer tests
# (models/ggml-vocab-*.gguf with .inp/.out vectors, read from the llama.cpp source that
# node-llama-cpp bundles as llama/gitRelease.bundle): for every vocabulary whose
# pre-tokenizer particle implements, `particle tokenize` must give llama.cpp's ids for every
# test text (among them the qwen35 pre-tokenizer over Qwen2's vocabulary, which is what
# llama.cpp ships as ggml-vocab-qwen35.gguf, and DeepSeek-LLM's real one, which no npm
# package carries); a vocabulary particle does not implement must be refused with one error
# line and exit 2, never tokenized wrongly.
. tests/cli/lib.sh
B=tools/oracle/node_modules/node-llama-cpp/llama/gitRelease.bundle
[ -f "$B" ] || { bad "no $B (make oracle)"; finish; exit; }
git clone -q --bare "$B" "$TMP/src.git" 2>"$TMP/err" || { bad "clone of $B: $(head -c 200 "$TMP/err")"; finish; exit; }
g() { git -C "$TMP/src.git" "$@"; }
supported="deepseek-llm gemma-4 gpt-2 llama-bpe llama-spm phi-3 qwen2 qwen35"
refused="bert-bge command-r deepseek-coder falcon mpt refact starcoder"
for v in $supported; do
	f=models/ggml-vocab-$v.gguf
	if ! g show "HEAD:$f" >"$TMP/v.gguf" 2>/dev/null || ! g show "HEAD:$f.inp" >"$TMP/v.inp" ||
		! g show "HEAD:$f.out" >"$TMP/v.out"; then
		bad "$v: $f or its vectors missing in the bundle"
		continue
	fi
	if python3 tests/oracle/vocab_vectors.py "$TMP/v.inp" "$TMP/v.out" "$PARTICLE" "$TMP/v.gguf" >"$TMP/r.txt"; then
		ok
		echo "$v: $(tail -n 1 "$TMP/r.txt")"
	else
		bad "$v: $(head -n 3 "$TMP/r.txt" | tr '\n' ' ') $(tail -n 1 "$TMP/r.txt")"
	fi
done
for v in $refused; do
	g show "HEAD:models/ggml-vocab-$v.gguf" >"$TMP/v.gguf" 2>/dev/null || { bad "$v missing in the bundle"; continue; }
	expect_exit 2 "$v refused" -- "$PARTICLE" tokenize -m "$TMP/v.gguf" "Hello world"
	expect_one_error_line "$v refused"
done
finish
