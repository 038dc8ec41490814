#!/bin/sh
# test_gpu.sh - the GPU flags of run / eval / bench (issue 16).  PARTICLE may be a CPU-only
# build (every GPU flag exits 2 with how to build with CUDA) or a `make CUDA=1` build on a
# machine without a usable GPU (exit 1, one error line naming the cause).  Bad values exit 2
# in both.  Parsing happens before the model is opened, so no model file is needed.
. "$(dirname "$0")/lib.sh"

"$PARTICLE" run -m /nonexistent.gguf --prompt hi --gpu >"$TMP/out" 2>"$TMP/err"
if grep -q 'no CUDA backend' "$TMP/err"; then
	gpu_rc=2
	msg='particle: error: this build has no CUDA backend; rebuild with make CUDA=1'
else
	gpu_rc=1
	msg='particle: error: --gpu: '
fi

for cmd in "run --prompt hi" "eval --prompt hi" "bench"; do
	for flags in "--gpu" "--gpu-layers all" "--gpu-layers 12" "--vram 16G" "--gpu-device 0" \
		     "--gpu --vram 1.5G --gpu-device 3 --gpu-layers 0"; do
		# shellcheck disable=SC2086
		expect_exit $gpu_rc "$cmd $flags" -- "$PARTICLE" $cmd -m /nonexistent.gguf $flags
		expect_one_error_line "$cmd $flags"
		expect_grep "$TMP/err" "$msg" "$cmd $flags message"
	done
	# shellcheck disable=SC2086
	expect_exit 2 "$cmd --gpu-layers foo" -- "$PARTICLE" $cmd -m x --gpu-layers foo
	expect_grep "$TMP/err" "gpu-layers" "$cmd --gpu-layers foo names the flag"
	# shellcheck disable=SC2086
	expect_exit 2 "$cmd --gpu-layers 70000" -- "$PARTICLE" $cmd -m x --gpu-layers 70000
	# shellcheck disable=SC2086
	expect_exit 2 "$cmd --vram 0" -- "$PARTICLE" $cmd -m x --vram 0
	# shellcheck disable=SC2086
	expect_exit 2 "$cmd --vram 12Q" -- "$PARTICLE" $cmd -m x --vram 12Q
	# shellcheck disable=SC2086
	expect_exit 2 "$cmd --gpu-device -1" -- "$PARTICLE" $cmd -m x --gpu-device -1
	# shellcheck disable=SC2086
	expect_exit 2 "$cmd --gpu-device (no value)" -- "$PARTICLE" $cmd -m x --gpu-device
	expect_one_error_line "$cmd --gpu-device (no value)"
done

# A CUDA build with no driver says so (the only case a GPU-less machine can show).
if [ $gpu_rc -eq 1 ]; then
	"$PARTICLE" run -m x --prompt hi --gpu >"$TMP/out" 2>"$TMP/err"
	if grep -q 'no NVIDIA driver\|no CUDA device' "$TMP/err"; then ok; else bad "cuda build without GPU: $(cat "$TMP/err")"; fi
fi

# --gpu-expert-slots: a GPU flag (eval), bounded.
expect_exit $gpu_rc "eval --gpu-expert-slots 4" -- "$PARTICLE" eval -m /nonexistent.gguf --prompt hi --gpu-expert-slots 4
expect_grep "$TMP/err" "$msg" "eval --gpu-expert-slots message"
expect_exit 2 "eval --gpu-expert-slots 0" -- "$PARTICLE" eval -m x --prompt hi --gpu-expert-slots 0
expect_grep "$TMP/err" "gpu-expert-slots" "eval --gpu-expert-slots 0 names the flag"
for c in run eval bench; do
	"$PARTICLE" $c --help >"$TMP/out" 2>&1
	expect_grep "$TMP/out" '--gpu-expert-slots N' "$c --help"
done
# run and bench run on the GPU too: their --gpu-expert-slots is a GPU flag like eval's
expect_exit $gpu_rc "bench --gpu-expert-slots 4" -- "$PARTICLE" bench -m /nonexistent.gguf --gpu-expert-slots 4
expect_grep "$TMP/err" "$msg" "bench --gpu-expert-slots message"

# The help of each command lists the flags.
for c in run eval bench; do
	"$PARTICLE" $c --help >"$TMP/out" 2>&1
	expect_grep "$TMP/out" '--gpu-layers N|all' "$c --help"
	expect_grep "$TMP/out" '--vram SIZE' "$c --help"
	expect_grep "$TMP/out" '--gpu-device I' "$c --help"
done
finish
