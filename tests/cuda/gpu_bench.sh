#!/bin/sh
# gpu_bench.sh - issue 16's H200 figures for `particle eval --gpu` (decode steps) on a
# mkmodel `full` Q4_K_M model (default bailingmoe2 = the Sarvam-30B shape), made on the
# device: every expert in VRAM; the VRAM expert cache at half the experts per layer (the
# VRAM of llama.cpp's --n-cpu-moe 9 on this 18-MoE-layer shape); and at top-k slots per
# layer, the least it runs with (about the VRAM of --n-cpu-moe 18, which keeps every expert
# off the card).  Run from the repository root with
# the carried folder C (default .cuda-carry; C/particle, C/lib as for gpu_eval.sh).
# Env: ARCH, SKEW (real | 0 = uniform), NTOK (default 2128 = a
# 2,000-token prompt + 128 generated, all as decode steps), W (work folder).
C=${1:-.cuda-carry}
W=${W:-/tmp/gpu_bench}
P="$C/particle"
ARCH=${ARCH:-bailingmoe2}; SKEW=${SKEW:-real}; NTOK=${NTOK:-2128}
export LD_LIBRARY_PATH="$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$W"
m="$W/$ARCH-full-q4_k_m-skew$SKEW.gguf"
t0=$(date +%s)
[ -f "$m" ] || "$P" mkmodel --arch "$ARCH" --preset full --quant q4_k_m --router-skew "$SKEW" \
	--threads 16 -o "$m" >/dev/null || exit 1
echo "mkmodel: $(( $(date +%s) - t0 )) s, $(stat -c %s "$m") bytes"
"$P" inspect "$m" | grep -E "block_count|expert_count|expert_used|leading_dense|embedding_length |routed-expert|resident bytes|experts:"
E=$("$P" inspect "$m" | awk '$1 == "expert_count" { print $2 }')
K=$("$P" inspect "$m" | awk '$1 == "expert_used_count" { print $2 }')
L=$("$P" inspect "$m" | awk '$1 == "block_count" { print $2 }')
D=$("$P" inspect "$m" | awk '$1 == "leading_dense_block_count" { print $2 }')
V=$("$P" inspect "$m" | awk '/^tokenizer:/ { for (i = 1; i < NF; i++) if ($i == "vocab") print $(i + 1) }' | tr -d ,)
awk -v n="$NTOK" -v v="${V:-32000}" 'BEGIN { x = 777; for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%d%s", 300 + int(x / 65536) % (v - 600), (i < n - 1 ? "," : "\n") } }' >"$W/toks"
echo "layers $L (dense lead ${D:-0}), experts $E, top-$K, vocab $V"
for slots in ${SLOTS:-$E $((E / 2)) $K}; do
	"$P" eval --gpu --gpu-expert-slots "$slots" -m "$m" --tokens-file "$W/toks" --top 0 \
		--verbose >/dev/null 2>"$W/err"; rc=$?
	echo "slots/layer $slots (rc $rc):"
	grep -E "^particle: (plan: GPU|gpu:|error)" "$W/err"
done
