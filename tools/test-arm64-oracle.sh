#!/bin/sh
# test-arm64-oracle.sh - the aarch64 oracle comparison (issue 19; `make test-arm64-oracle`,
# not in `make test`: about 4 minutes per model emulated, most of it node and llama.cpp
# starting under qemu-user).  llama.cpp as node-llama-cpp 3.21.1's prebuilt linux-arm64
# binary on the official arm64 node 20.20.2 (tools/oracle-arm64), and the aarch64 particle,
# both under qemu-user -cpu max, on a tiny model of each architecture (Q8_0; glm4moe F16),
# 64 teacher-forced tokens: mean KL(llama.cpp || particle) <= 1e-2 and top-1 >= 0.98 (the
# x86-64 oracle suite's bounds for quantized models).  The x86-64 llama.cpp on the same
# tokens is printed beside it (tools/oracle/klcmp.mjs) to show how far the two llama.cpp
# builds are apart.  Ends with "N passed, N failed".
PARTICLE="$(cd "$(dirname "$0")/.." && pwd)/tools/particle-qemu.sh"
. "$(dirname "$0")/../tests/cli/lib.sh"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
X86=${PARTICLE_X86:-build/particle}
export QEMU_CPU=max
awk 'BEGIN { x = 12345; printf "["; for (i = 0; i < 64; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%d%s", int(x / 65536) % 256, (i < 63 ? "," : "]\n") } }' >"$TMP/toks.json"
tr -d '[]' <"$TMP/toks.json" >"$TMP/toks"
for arch in qwen3moe bailingmoe2 gemma4 glm4moe; do
	q=q8_0
	[ $arch = glm4moe ] && q=f16
	M="$TMP/$arch.gguf"
	"$X86" mkmodel --arch $arch --preset tiny --quant $q -o "$M" >/dev/null 2>&1 || { bad "$arch: mkmodel"; continue; }
	start=$(date +%s)
	if ! sh "$ROOT/tools/oracle-arm64/oracle.sh" eval "$M" "$TMP/toks.json" "$TMP/arm.bin" >"$TMP/o.out" 2>"$TMP/o.err"; then
		bad "$arch: arm64 llama.cpp oracle failed: $(tail -c 300 "$TMP/o.err")"
		continue
	fi
	t_oracle=$(( $(date +%s) - start ))
	"$PARTICLE" eval -m "$M" --tokens-file "$TMP/toks" --top 0 --batch 64 --compare "$TMP/arm.bin" \
		--max-mean-kl 1e-2 --min-top1 0.98 >/dev/null 2>"$TMP/err"
	rc=$?
	line=$(grep '^compare:' "$TMP/err")
	if [ $rc -eq 0 ] && [ -n "$line" ]; then ok; else bad "$arch $q: $line $(head -c 200 "$TMP/err")"; fi
	echo "$arch $q: aarch64 llama.cpp vs aarch64 particle: ${line#compare: } (oracle ${t_oracle}s emulated)"
	if [ -d "$ROOT/tools/oracle/node_modules/node-llama-cpp" ] &&
		node "$ROOT/tools/oracle/oracle.mjs" eval "$M" "$TMP/toks.json" "$TMP/x86.bin" >/dev/null 2>&1; then
		nv=$(sed -n 's/.*"n_vocab":\([0-9]*\).*/\1/p' "$TMP/o.out")
		echo "    x86-64 llama.cpp vs aarch64 llama.cpp: $(node "$ROOT/tools/oracle/klcmp.mjs" "$TMP/x86.bin" "$TMP/arm.bin" "$nv" 2>&1 | head -1)"
	fi
done
finish
