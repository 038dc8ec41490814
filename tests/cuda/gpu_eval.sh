#!/bin/sh
# gpu_eval.sh - `particle eval --gpu` on the lent H200 (issue 16), run from the repository
# root with the carried folder C (default .cuda-carry): C/particle (make CUDA=1), C/lib (its
# shared libraries), C/toks (200 ids), C/ref-NAME.bin (llama.cpp oracle probabilities made
# on the CPU machine by tools/oracle/oracle.mjs eval) and C/sums.txt (sha256 of the models).
# The models are made here by particle mkmodel (deterministic: the sums must match).
#
# Per model: the CPU path (particle eval, 16 threads) and the GPU path with every expert in
# VRAM, half the experts per layer, and the minimum (top-k slots), each compared with
# llama.cpp and the CPU path (mean KL, top-1: tests/cuda/klcmp.py), and the GPU logits
# byte-compared across the three budgets.  Limits as tests/oracle/test_eval.sh: mean KL
# <= 1e-3 (F16), <= 1e-2 (quantized), top-1 >= 0.98.  Prints "N passed, N failed".
C=${1:-.cuda-carry}
W=${W:-/tmp/gpu_eval}
P="$C/particle"
export LD_LIBRARY_PATH="$C/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$W"
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
MODELS=${MODELS:-"qwen3moe-tiny-f16 qwen3moe-tiny-q8_0 qwen3moe-tiny-q4_k_m qwen3moe-tiny-q6_k
bailingmoe2-tiny-f16 bailingmoe2-tiny-q8_0 bailingmoe2-tiny-q4_k_m bailingmoe2-tiny-q6_k
gemma4-tiny-f16 gemma4-tiny-q8_0 gemma4-tiny-q4_k_m gemma4-tiny-q6_k
qwen3moe-small-q4_k_m bailingmoe2-small-q4_k_m gemma4-small-q4_k_m"}
for name in $MODELS; do
	arch=${name%%-*}; rest=${name#*-}; preset=${rest%%-*}; q=${rest#*-}
	m="$W/$name.gguf"
	[ -f "$m" ] || "$P" mkmodel --arch "$arch" --preset "$preset" --quant "$q" --threads 16 \
		-o "$m" >/dev/null 2>"$W/mk.err" || { bad "$name: mkmodel: $(head -c 200 "$W/mk.err")"; continue; }
	want=$(grep " $name.gguf\$" "$C/sums.txt" | cut -d' ' -f1)
	got=$(sha256sum "$m" | cut -d' ' -f1)
	[ "$want" = "$got" ] && ok || bad "$name: mkmodel bytes differ from the reference machine's"
	E=$("$P" inspect "$m" | awk '$1 == "expert_count" { print $2 }')
	K=$("$P" inspect "$m" | awk '$1 == "expert_used_count" { print $2 }')
	case $q in f16|f32) lim=1e-3 ;; *) lim=1e-2 ;; esac
	ref="$C/ref-$name.bin"
	"$P" eval -m "$m" --tokens-file "$C/toks" --top 0 --batch 200 --threads 16 \
		--probs-out "$W/cpu.bin" >/dev/null 2>"$W/cpu.err" || { bad "$name: CPU eval: $(head -c 300 "$W/cpu.err")"; continue; }
	for budget in all half min; do
		case $budget in all) slots=$E ;; half) slots=$((E / 2 > K ? E / 2 : K)) ;; min) slots=$K ;; esac
		"$P" eval --gpu --gpu-expert-slots "$slots" -m "$m" --tokens-file "$C/toks" --top 0 \
			--verbose --logits-out "$W/gpu-$budget.logits" --probs-out "$W/gpu.bin" \
			>/dev/null 2>"$W/gpu.err" || { bad "$name $budget: GPU eval: $(grep error "$W/gpu.err" | head -c 400)"; continue; }
		grep '^particle: gpu:' "$W/gpu.err" | sed "s/^/  $name $budget: /"
		if [ "$budget" = all ]; then
			line=$(python3 "$C/klcmp.py" "$ref" "$W/gpu.bin" "$lim")
			echo "  $name: llama.cpp vs GPU: $line"
			case $line in *PASS*) ok ;; *) bad "$name: llama.cpp vs GPU: $line" ;; esac
			line=$(python3 "$C/klcmp.py" "$W/cpu.bin" "$W/gpu.bin" "$lim")
			echo "  $name: CPU vs GPU:       $line"
			case $line in *PASS*) ok ;; *) bad "$name: CPU vs GPU: $line" ;; esac
			echo "  $name: llama.cpp vs CPU: $(python3 "$C/klcmp.py" "$ref" "$W/cpu.bin" "$lim")"
		elif cmp -s "$W/gpu-all.logits" "$W/gpu-$budget.logits"; then
			ok
		else
			bad "$name: GPU logits with $slots slots/layer differ from every expert resident"
		fi
	done
done
# errors: a budget below the resident core, a device that is not there
m="$W/qwen3moe-tiny-q4_k_m.gguf"
"$P" eval --gpu --vram 1M -m "$m" --tokens 1,2,3 >/dev/null 2>"$W/e1"; rc=$?
echo "  --vram 1M: rc $rc: $(cat "$W/e1")"
[ $rc = 1 ] && grep -q "VRAM on CUDA device.*too small" "$W/e1" && ok || bad "--vram 1M"
"$P" eval --gpu-device 7 -m "$m" --tokens 1,2,3 >/dev/null 2>"$W/e2"; rc=$?
echo "  --gpu-device 7: rc $rc: $(cat "$W/e2")"
[ $rc = 1 ] && grep -q "visible" "$W/e2" && ok || bad "--gpu-device 7"
echo "$pass passed, $fail failed"
