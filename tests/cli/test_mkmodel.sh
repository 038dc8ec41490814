#!/bin/sh
# test_mkmodel.sh - `particle mkmodel` flags, errors and a small end-to-end write that
# `particle inspect` accepts (the llama.cpp load checks live in tests/oracle/).
. "$(dirname "$0")/lib.sh"
expect_exit 0 "help" -- "$PARTICLE" mkmodel --help
for flag in --arch --preset --layers --quant --seed --router-skew --vocab --threads --progress --output; do
	expect_grep "$TMP/out" -- "$flag" "help documents $flag"
done
expect_exit 2 "no arguments" -- "$PARTICLE" mkmodel
expect_one_error_line "no arguments"
expect_exit 2 "missing -o" -- "$PARTICLE" mkmodel --arch qwen3moe
expect_exit 2 "unknown arch" -- "$PARTICLE" mkmodel --arch llama -o "$TMP/x.gguf"
expect_grep "$TMP/err" "llama" "unknown arch named"
expect_exit 2 "unknown preset" -- "$PARTICLE" mkmodel --arch gemma4 --preset huge -o "$TMP/x.gguf"
expect_exit 2 "unknown quant" -- "$PARTICLE" mkmodel --arch gemma4 --quant q3_k_xl -o "$TMP/x.gguf"
expect_exit 2 "zero layers" -- "$PARTICLE" mkmodel --arch gemma4 --layers 0 -o "$TMP/x.gguf"
expect_exit 2 "bad seed" -- "$PARTICLE" mkmodel --arch gemma4 --seed -1 -o "$TMP/x.gguf"
expect_exit 2 "bad skew" -- "$PARTICLE" mkmodel --arch gemma4 --router-skew 99 -o "$TMP/x.gguf"
expect_exit 2 "unknown flag" -- "$PARTICLE" mkmodel --arch gemma4 --frob 1 -o "$TMP/x.gguf"
expect_one_error_line "unknown flag"
expect_exit 2 "bailingmoe2 needs a dense and a MoE layer" -- "$PARTICLE" mkmodel --arch bailingmoe2 --layers 1 -o "$TMP/x.gguf"
expect_one_error_line "one bailing layer"
expect_exit 1 "unwritable output" -- "$PARTICLE" mkmodel --arch qwen3moe --layers 1 -o /nonexistent-dir/x.gguf
expect_one_error_line "unwritable output"
if [ -e /nonexistent-dir/x.gguf ]; then bad "partial file left"; else ok; fi
expect_exit 1 "missing vocab dir" -- "$PARTICLE" mkmodel --arch qwen3moe --layers 1 --vocab "$TMP/none" -o "$TMP/x.gguf"
if [ -e "$TMP/x.gguf" ]; then bad "file left after a failed --vocab"; else ok; fi

# End to end: every arch writes a file inspect accepts, with the expected architecture.
for arch in qwen3moe bailingmoe2 sarvam_moe gemma4 glm4moe deepseek2 gpt-oss; do
	expect_exit 0 "write $arch" -- "$PARTICLE" mkmodel --arch "$arch" --layers 2 --quant q8_0 --router-skew 1 -o "$TMP/$arch.gguf"
	if [ -s "$TMP/err" ]; then bad "$arch: stderr not empty without a tty: $(head -c 200 "$TMP/err")"; else ok; fi
	expect_exit 0 "inspect $arch" -- "$PARTICLE" inspect "$TMP/$arch.gguf"
	expect_grep "$TMP/out" "architecture: $arch" "$arch architecture"
	expect_grep "$TMP/out" "Q8_0" "$arch q8_0 tensors"
done
expect_exit 0 "progress" -- "$PARTICLE" mkmodel --arch gemma4 --layers 2 --progress -o "$TMP/p.gguf"
expect_grep "$TMP/err" "100%" "progress bar reaches 100%"
expect_exit 2 "gemma4 with one layer (llama.cpp cannot load it)" -- "$PARTICLE" mkmodel --arch gemma4 --layers 1 -o "$TMP/g1.gguf"
expect_one_error_line "gemma4 one layer"
# An interrupted write leaves nothing behind: no final file, no hidden temporary (SIGTERM, and
# SIGINT through env --default-signal: a background job of sh starts with SIGINT ignored).
for sig in TERM INT; do
	d="$TMP/interrupted-$sig"
	mkdir -p "$d"
	env --default-signal=INT "$PARTICLE" mkmodel --arch qwen3moe --preset small --quant q8_0 --threads 1 -o "$d/x.gguf" 2>"$TMP/err" &
	pid=$!
	i=0
	while [ $i -lt 400 ] && [ -z "$(ls -A "$d")" ]; do sleep 0.05; i=$((i + 1)); done
	kill -"$sig" "$pid"
	wait "$pid"
	rc=$?
	case $sig in TERM) want=143 ;; INT) want=130 ;; esac
	if [ "$rc" -eq "$want" ]; then ok; else bad "mkmodel killed by SIG$sig: exit $rc, want $want"; fi
	if [ -z "$(ls -A "$d")" ]; then ok; else bad "SIG$sig left files: $(ls -A "$d")"; fi
done
finish
