#!/bin/sh
# run-tests.sh - runs every test suite after `make test` has built them, then prints the
# total as the plain line `N passed, N failed`.  Each suite prints its own closing
# `N passed, N failed` line; a suite that crashes or prints none counts as one failure.
set -u
cd "$(dirname "$0")/.." || exit 2
total_pass=0
total_fail=0
log=$(mktemp)
failures=$(mktemp) # the FAIL lines of every failed suite, repeated at the very end
times=$(mktemp)    # "SECONDS NAME" per suite, for the slowest-suites table at the end
run_start=$(date +%s)
# Per-user state (expert-popularity profiles, lock PID files, the models directory) goes to a
# scratch cache for the run: tests never touch the real ~/.cache, nor see its profiles.
XDG_CACHE_HOME=$(mktemp -d)
export XDG_CACHE_HOME
trap 'rm -f "$log" "$failures" "$times"; rm -rf "$XDG_CACHE_HOME"' EXIT

suite() { # suite NAME COMMAND...
	name=$1; shift
	echo "== $name"
	t0=$(date +%s)
	"$@" >"$log" 2>&1
	rc=$?
	secs=$(($(date +%s) - t0))
	cat "$log"
	echo "== $name: ${secs} s"
	echo "$secs $name" >>"$times"
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	if [ -n "$line" ]; then
		p=$(echo "$line" | awk '{print $1}')
		f=$(echo "$line" | awk '{print $3}')
		if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	elif [ "$rc" -eq 0 ]; then p=1; f=0
	else p=0; f=1
	fi
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
	if [ "$f" -ne 0 ]; then
		echo "== $name: FAILED (exit $rc)"
		{ echo "$name: $f failed (exit $rc)"
		  grep -E 'FAIL|not ok|ERROR|Assertion|runtime error' "$log" | head -n 8 | cut -c1-240
		} >>"$failures"
	fi
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
suite "unit tests" build/pt_test
suite "unit tests (ASan+UBSan)" build/asan/pt_test
# ThreadSanitizer only for the expert tests: the I/O completion path and compute threads.
[ -x build/tsan/pt_test ] && suite "expert unit tests (TSan)" build/tsan/pt_test expert
# ... and the streaming forward pass end to end (engine, store, io_uring and pread pool).
[ -x build/tsan/pt_test ] && suite "engine unit tests (TSan)" build/tsan/pt_test gen_engine
[ -x build/tsan/particle ] && suite "cli test_stream.sh (TSan, quick)" \
	env PARTICLE=build/tsan/particle STREAM_QUICK=1 TSAN_OPTIONS=halt_on_error=1 \
	sh tests/cli/test_stream.sh
for t in tests/cli/test_*.sh; do
	[ -f "$t" ] || continue
	suite "cli $(basename "$t") " env PARTICLE=build/particle sh "$t"
	# ASan+UBSan: the representative subset of the arch x option matrices (PT_TEST_SUBSET,
	# tests/cli/lib.sh; docs/TESTING.md "Test time")
	suite "cli $(basename "$t") (ASan+UBSan)" env PARTICLE=build/asan/particle PT_TEST_SUBSET=1 \
		sh "$t"
done
# CUDA backend (issue 16): where nvcc exists, `make CUDA=1` must build (no GPU needed) and
# its binary must pass the GPU flag tests; the kernel test itself needs a GPU (tests/cuda).
if [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
	suite "cuda build (make CUDA=1 all cuda-test)" make -s CUDA=1 -j"$(nproc)" all cuda-test
	[ -x build/cuda/particle ] && suite "cli test_gpu.sh (CUDA build)" \
		env PARTICLE=build/cuda/particle sh tests/cli/test_gpu.sh
fi
# aarch64 kernels under qemu-user (issue 19; installs its arm64 packages, cross-builds first)
suite "aarch64 kernels, CLI and streaming (qemu-user)" sh tools/test-arm64.sh
for t in tests/oracle/test_*.sh; do
	[ -f "$t" ] || continue
	suite "oracle $(basename "$t")" env PARTICLE=build/particle sh "$t"
done
for f in build/fuzz/fuzz_*; do
	[ -x "$f" ] || continue
	n=$(basename "$f")
	corpus=tests/fuzz/corpus/${n#fuzz_}
	mkdir -p "$corpus"
	work=$(mktemp -d)
	# Smoke run: the committed corpus plus a short mutation run; new inputs go to a scratch dir.
	suite "fuzz smoke $n" "$f" -runs="${FUZZ_RUNS:-20000}" -max_len=65536 -timeout=10 \
		-rss_limit_mb=2048 "$work" "$corpus"
	rm -rf "$work"
done
# A CI log is often read from its tail: the failures again, just above the total.
if [ -s "$failures" ]; then
	echo "== failed checks (repeated from above)"
	cat "$failures"
fi
# Where the time goes (docs/TESTING.md, "Test time"): the ten slowest suites.
echo "== slowest suites (wall seconds; all suites $(($(date +%s) - run_start)) s)"
sort -rn "$times" | head -n 10 | awk '{ printf "%6d s  ", $1; $1 = ""; sub(/^ /, ""); print }'
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
