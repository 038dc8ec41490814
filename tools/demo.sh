#!/bin/sh
# demo.sh MODEL - creates the default demo model if absent (a synthetic qwen3moe `small`
# checkpoint: real tensor shapes and chat template, random weights, so the text is noise),
# describes it, then generates with `particle run`: a raw completion and a chat reply.
set -eu
model=$1
if [ ! -f "$model" ]; then
	mkdir -p "$(dirname "$model")"
	./build/particle mkmodel --arch qwen3moe --preset small --quant q4_k_m -o "$model"
fi
./build/particle inspect "$model"
echo
echo "\$ particle run -m $model --prompt 'The capital of France is' -n 32 --seed 1"
./build/particle run -m "$model" --prompt "The capital of France is" -n 32 --seed 1
echo
# mktemp, not a fixed name in a shared /tmp another user could plant a link at (SECURITY.md)
msgs=$(mktemp)
trap 'rm -f "$msgs"' EXIT
printf '%s\n' '[{"role":"user","content":"Write a haiku about disks."}]' >"$msgs"
echo "\$ particle run -m $model --messages messages.json -n 48 --temperature 0"
./build/particle run -m "$model" --messages "$msgs" -n 48 --temperature 0
