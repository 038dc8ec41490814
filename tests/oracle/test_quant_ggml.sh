#!/bin/sh
# test_quant_ggml.sh - the quant module against ggml itself: builds quant_vs_ggml.c against
# build/libparticle.a and runs it on the libggml-base.so shipped by node-llama-cpp (installed
# by `make oracle`).  Every reference quantizer must produce ggml's bytes, every dequantizer
# ggml's float bits, fp16/bf16 conversions ggml's halves.
set -u
cd "$(dirname "$0")/../.." || exit 2
lib=tools/oracle/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so
if [ ! -f "$lib" ]; then
	echo "FAIL: $lib missing (run make oracle)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
if [ ! -f build/libparticle.a ]; then
	echo "FAIL: build/libparticle.a missing (run make)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -Wall -Wextra -Werror -Isrc \
	-Iinclude tests/oracle/quant_vs_ggml.c build/libparticle.a -ldl -lm -o "$tmp/qvg"; then
	echo "FAIL: cannot build quant_vs_ggml" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
# ggml-cpu's x86-64 baseline build: its generic MXFP4 dot is the scalar reference
cpu=$(dirname "$lib")/libggml-cpu-x64.so
"$tmp/qvg" "$lib" "$cpu"
