#!/bin/sh
# demo.sh MODEL - creates the default demo model if absent, then runs it.
set -eu
model=$1
if [ ! -f "$model" ]; then
	if ./build/particle mkmodel --help >/dev/null 2>&1; then
		mkdir -p "$(dirname "$model")"
		./build/particle mkmodel --arch qwen3moe --preset small --quant q4_k_m -o "$model"
	fi
fi
if [ -f "$model" ]; then
	./build/particle inspect "$model"
else
	echo "particle: demo model generator not built yet; showing help" >&2
	./build/particle --help
fi
