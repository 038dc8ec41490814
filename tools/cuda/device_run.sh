#!/bin/sh
# device_run.sh [C] - issue 16's device checks for the batched GPU prefill in ONE call on the
# lent H200, within a time budget (DEADLINE seconds, default 170), building nothing: the
# carried folder C (default build/cuda-carry, made here by tools/cuda/mkcarry.sh) holds particle
# and cuda_test_kern from `make CUDA=1 all cuda-test`, their shared libraries (C/lib) and
# klcmp.py.  Writes at most 8 files to $OUT (default /tmp/device_run_out):
#   kern.log     cuda_test_kern --bench: every kernel vs the CPU scalar reference, the
#                prefill matmul bit for bit vs the decode matvec, matvec/matmul timings
#   parity.log   tiny/small models made there by mkmodel: GPU prompt in chunks vs token by
#                token (PARTICLE_GPU_PREFILL=0) vs the minimum expert budget, logits cmp'd
#                byte for byte; GPU vs CPU mean KL / top-1; run --gpu text vs the CPU
#   bench.log    the Sarvam-30B shape (bailingmoe2 full Q4_K_M, made there in the
#                background while the rest runs): bench --gpu, 2,000-token prompt + 128
#                generated, every expert resident (prefill in chunks), then pp512, then
#                64 expert slots per layer (chunks through the VRAM expert cache)
#   summary.log  one line per check, "N passed, N failed"
# Env: DEADLINE, MODELS (the parity models), FULL_BENCH=0 (no Sarvam model, no bench).
# Lead: run from the repository root, e.g.
#   make CUDA=1 all cuda-test && sh tools/cuda/mkcarry.sh   (here, ~40 MB)
#   run(command="sh tools/cuda/device_run.sh", carry=["build/cuda-carry"], timeout_s=220)
C=${1:-build/cuda-carry}
O=${OUT:-/tmp/device_run_out}
W=${W:-/tmp/device_run}
DEADLINE=${DEADLINE:-170}
P="$C/particle"
export LD_LIBRARY_PATH="$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$O" "$W"
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( DEADLINE - $(date +%s) + T0 )); }
S="$O/summary.log"
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   [$(el) s] $*" >>"$S"; }
bad() { fail=$((fail + 1)); echo "FAIL [$(el) s] $*" >>"$S"; echo "FAIL: $*"; }
: >"$S"
nvidia-smi -L >>"$S" 2>&1; echo "cores $(nproc), $(free -g | awk '/Mem:/ {print $2}') GiB" >>"$S"

# (1) the full model in the background (the longest step: ~94 s with 16 threads before)
FULL="$W/bailingmoe2-full-q4_k_m.gguf"
[ "${FULL_BENCH:-1}" = 0 ] || ( "$P" mkmodel --arch bailingmoe2 --preset full --quant q4_k_m --router-skew real \
	--threads 12 -o "$FULL.part" >"$W/mkfull.log" 2>&1 && mv "$FULL.part" "$FULL" ) &
MKPID=$!
[ "${FULL_BENCH:-1}" = 0 ] && MKPID=

# (2) kernel tests
"$C/cuda_test_kern" --bench >"$O/kern.log" 2>&1; rc=$?
line=$(tail -1 "$O/kern.log")
[ $rc = 0 ] && ok "cuda_test_kern: $line" || bad "cuda_test_kern rc $rc: $line"

# (3) parity on small models: 600 teacher-forced ids below 256 (3 prefill chunks: 256, 256,
# 88; gemma4's sliding rings wrap)
N=600
awk -v n=$N 'BEGIN { x = 12345; for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%d%s", int(x / 65536) % 256, (i < n - 1 ? "," : "\n") } }' >"$W/toks"
L="$O/parity.log"
: >"$L"
for name in ${MODELS:-qwen3moe-tiny-q4_k_m bailingmoe2-tiny-q4_k_m gemma4-tiny-q4_k_m gemma4-tiny-f16 gemma4-tiny-q8_0 bailingmoe2-small-q4_k_m gemma4-small-q4_k_m}; do
	[ "$(left)" -gt 75 ] || { echo "skip $name: $(left) s left" >>"$L"; continue; }
	arch=${name%%-*}; rest=${name#*-}; preset=${rest%%-*}; q=${rest#*-}
	m="$W/$name.gguf"
	"$P" mkmodel --arch "$arch" --preset "$preset" --quant "$q" --threads 4 -o "$m" \
		>/dev/null 2>"$W/mk.err" || { bad "$name: mkmodel: $(head -c 200 "$W/mk.err")"; continue; }
	E=$("$P" inspect "$m" | awk '$1 == "expert_count" { print $2 }')
	K=$("$P" inspect "$m" | awk '$1 == "expert_used_count" { print $2 }')
	case $q in f16|f32) lim=1e-3 ;; *) lim=1e-2 ;; esac
	"$P" eval -m "$m" --tokens-file "$W/toks" --top 0 --batch $N --threads 4 \
		--probs-out "$W/cpu.bin" >/dev/null 2>"$W/cpu.err" || { bad "$name: CPU eval: $(head -c 300 "$W/cpu.err")"; continue; }
	for v in chunk step min; do
		slots=$E; pf=1
		[ $v = step ] && pf=0
		[ $v = min ] && slots=$K
		PARTICLE_GPU_PREFILL=$pf "$P" eval --gpu --gpu-expert-slots "$slots" -m "$m" \
			--tokens-file "$W/toks" --top 0 --verbose --logits-out "$W/$v.logits" \
			--probs-out "$W/$v.bin" >/dev/null 2>"$W/gpu.err" \
			|| { bad "$name $v: GPU eval: $(grep error "$W/gpu.err" | head -c 400)"; continue; }
		echo "$name $v: $(grep '^particle: gpu:' "$W/gpu.err")" >>"$L"
	done
	for v in step min; do
		if cmp -s "$W/chunk.logits" "$W/$v.logits"; then ok "$name: chunked prefill logits = $v"
		else bad "$name: chunked prefill logits differ from $v ($(cmp "$W/chunk.logits" "$W/$v.logits" 2>&1 | head -c 120))"; fi
	done
	kl=$(python3 "$C/klcmp.py" "$W/cpu.bin" "$W/chunk.bin" $lim $N 2>&1)
	echo "$name: CPU vs GPU: $kl" >>"$L"
	case $kl in *PASS*) ok "$name: CPU vs GPU $kl" ;; *) bad "$name: CPU vs GPU $kl" ;; esac
done
m="$W/qwen3moe-tiny-q4_k_m.gguf"
if [ -f "$m" ]; then
	a=$("$P" run -m "$m" --prompt 'The capital of France is a city that' -n 24 --temperature 0 --quiet 2>&1 | md5sum)
	b=$("$P" run --gpu -m "$m" --prompt 'The capital of France is a city that' -n 24 --temperature 0 --quiet 2>&1 | md5sum)
	[ "$a" = "$b" ] && ok "run --gpu text = CPU ($a)" || bad "run --gpu text differs from the CPU"
fi

# (4) the Sarvam-30B shape
B="$O/bench.log"
echo "waiting for mkmodel full at $(el) s" >"$B"
while [ -n "$MKPID" ] && kill -0 $MKPID 2>/dev/null && [ "$(left)" -gt 25 ]; do sleep 1; done
if [ -z "$MKPID" ]; then
	echo "FULL_BENCH=0: no Sarvam bench" >>"$B"
elif kill -0 $MKPID 2>/dev/null; then
	kill $MKPID; bad "mkmodel full not done within the budget ($(el) s): no Sarvam bench"
elif [ -f "$FULL" ]; then
	echo "mkmodel full done by $(el) s: $(stat -c %s "$FULL") bytes" >>"$B"
	"$P" bench --gpu --gpu-expert-slots 128 -m "$FULL" --prompt-tokens 2000 --gen 128 \
		>>"$B" 2>&1; rc=$?
	[ $rc = 0 ] && ok "Sarvam full bench --gpu 2000+128: $(grep -E '^(prefill|decode) ' "$B" | tr '\n' ' ')" \
		|| bad "Sarvam full bench rc $rc: $(tail -2 "$B" | tr '\n' ' ')"
	if [ "$(left)" -gt 12 ]; then
		echo "--- pp512" >>"$B"
		"$P" bench --gpu --gpu-expert-slots 128 -m "$FULL" --prompt-tokens 512 --gen 16 \
			>>"$B" 2>&1 && ok "Sarvam full pp512: $(grep '^prefill' "$B" | tail -1)"
	fi
	if [ "$(left)" -gt 15 ]; then # half the experts: chunks through the VRAM expert cache
		echo "--- 64 slots" >>"$B"
		"$P" bench --gpu --gpu-expert-slots 64 -m "$FULL" --prompt-tokens 2000 --gen 128 \
			>>"$B" 2>&1 && ok "Sarvam full, 64 slots: $(grep -E '^(prefill|decode) ' "$B" | tail -2 | tr '\n' ' ')"
	fi
else
	bad "mkmodel full failed: $(tail -c 300 "$W/mkfull.log")"
fi
echo "total $(el) s" >>"$S"
echo "$pass passed, $fail failed" >>"$S"
cat "$S"
