#!/bin/sh
# test-arm64.sh - the emulated aarch64 suite (issue 19; docs/TESTING.md "aarch64 under
# emulation"): cross-builds build/aarch64/pt_test and particle, then runs the kernel subset
# under qemu-user twice: -cpu max (neon, dotprod and i8mm levels) and -cpu cortex-a53 (no
# dotprod: the neon and scalar fallbacks), then the CLI and streaming subset
# (tools/test-arm64-cli.sh; needs the x86-64 build/particle).  Ends with one "N passed, N
# failed" line.
set -u
cd "$(dirname "$0")/.." || exit 1
sh tools/deps-arm64.sh || { echo "0 passed, 1 failed"; exit 1; }
if ! nice make -j2 ARCH=aarch64 test-bin >build/arm64-build.log 2>&1; then
	tail -20 build/arm64-build.log
	echo "0 passed, 1 failed"
	exit 1
fi
# Every kernel test (each NEON level against the scalar reference), the pool, the
# activation quantizers, SwiGLU / GeGLU, the softcap, RMS norm and attention (not the
# 21M-point expf and 24M-point tanh sweeps: minutes emulated; the SwiGLU, softcap and
# softmax tests cover the NEON exponential and tanh against the scalar ones).
SUBSET="test_kern test_pool test_dn_ test_act_ test_ops_swiglu test_ops_geglu test_ops_softcap
	test_ops_rmsnorm test_attn_dots test_attn_softmax test_attn_vacc test_attn_f16 test_attn_q8
	test_kv_q8 test_quant_lane"
pass=0 fail=0
# tally RC LABEL tail|fails: adds the last "N passed, N failed" line of $out to the totals; a
# run that exits non-zero or prints no total counts as one failure and shows its output
tally() {
	line=$(echo "$out" | tail -1)
	p=$(echo "$line" | awk '$2 == "passed," {print $1}')
	f=$(echo "$line" | awk '$2 == "passed," {print $3}')
	if [ -z "$p" ] || [ "$1" -ne 0 ]; then
		if [ "$3" = fails ]; then echo "$out" | grep -A3 FAIL | head -40; else echo "$out" | tail -20; fi
		p=${p:-0} f=$(( ${f:-0} + 1 ))
	fi
	echo "$2: $line"
	pass=$((pass + p)) fail=$((fail + f))
}
# neoverse-n1: dotprod without i8mm, so the detection's middle answer (a short subset: the
# levels themselves are all covered under max)
for cpu in max cortex-a53 neoverse-n1; do
	case $cpu in
	max) want=i8mm set=$SUBSET ;;
	cortex-a53) want=neon set=$SUBSET ;;
	*) want=dotprod set="test_kern_particle_cpu test_kern_dot4 test_kern_tile_matches" ;;
	esac
	# shellcheck disable=SC2086
	out=$(QEMU_CPU=$cpu PT_TEST_KERN_MAX=$want PT_QEMU_BIN=build/aarch64/pt_test \
		sh tools/particle-qemu.sh $set 2>&1)
	tally $? "qemu -cpu $cpu" tail
done
# 64 KiB pages (qemu-user -p): the page size the guest sees, the read engine's pread pool
# (buffered and O_DIRECT) and the expert cache; the CLI part below streams under it too.
out=$(QEMU_PAGESIZE=65536 PT_TEST_PAGESIZE=65536 PT_QEMU_BIN=build/aarch64/pt_test \
	sh tools/particle-qemu.sh test_expert_io_page test_expert_io_pread test_expert_io_direct_alignment \
	test_expert_io_rejects test_expert_cache 2>&1)
tally $? "qemu 64 KiB pages" tail
# the CLI and streaming subset (tools/test-arm64-cli.sh) needs the x86-64 particle too
out=$(sh tools/test-arm64-cli.sh 2>&1)
tally $? "qemu CLI and streaming" fails
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
