#!/bin/sh
# run-tests.sh - runs every test suite after `make test` has built them, then prints the
# total as the plain line `N passed, N failed`.  Each suite prints its own closing
# `N passed, N failed` line; a suite that crashes or prints none counts as one failure.
set -u
cd "$(dirname "$0")/.." || exit 2
total_pass=0
total_fail=0
res=$(mktemp -d)   # per suite KEY: KEY.name, KEY.log, KEY.rc, KEY.secs
failures=$(mktemp) # the FAIL lines of every failed suite, repeated at the very end
times=$(mktemp)    # "SECONDS NAME" per suite, for the slowest-suites table at the end
run_start=$(date +%s)
nkey=0
trap 'rm -rf "$res" "$failures" "$times"' EXIT

# run_suite KEY NAME COMMAND...: runs one suite, its output and status into $res/KEY.*.
# Per-user state (expert-popularity profiles, lock PID files, the models directory) goes to a
# scratch cache of this suite alone: tests never touch the real ~/.cache, nor see its
# profiles, nor another suite's (a profile written by one suite made the next one's runs
# start with warm-up reads: behaviour that depended on the order of the suites).
run_suite() {
	key=$1; echo "$2" >"$res/$key.name"; shift 2
	mkdir -m 700 "$res/$key.cache"
	t0=$(date +%s)
	XDG_CACHE_HOME="$res/$key.cache" "$@" >"$res/$key.log" 2>&1
	echo $? >"$res/$key.rc"
	echo $(($(date +%s) - t0)) >"$res/$key.secs"
	rm -rf "$res/$key.cache"
}

# report KEY: prints a finished suite's output and time and adds its closing
# `N passed, N failed` line to the total (a suite that crashes or prints none: one failure).
report() {
	name=$(cat "$res/$1.name"); log=$res/$1.log
	# a lane that died before its suite ended: a failure, not a hole in the tally
	[ -f "$res/$1.rc" ] || { echo 1 >"$res/$1.rc"; echo 0 >"$res/$1.secs"; echo "(the suite did not finish)" >>"$log"; }
	rc=$(cat "$res/$1.rc"); secs=$(cat "$res/$1.secs")
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

suite() { # suite NAME COMMAND...: runs now, alone
	nkey=$((nkey + 1))
	echo "== $1"
	run_suite "$nkey" "$@"
	report "$nkey"
}

# Two at a time (the oracle suites, the aarch64 emulation, the fuzz smoke runs): suites with
# no timing-sensitive check that mostly keep one core busy (node with one thread, python,
# qemu-user, libFuzzer), so a second one uses the other core.  pair_add queues one; pair_run
# runs the queue on two lanes, each taking the next unclaimed suite (heaviest queued first),
# then reports every one in queue order.
pairq=$res/pairq
: >"$pairq"
pair_add() { # pair_add NAME COMMAND...  (the command: words without tabs or newlines)
	nkey=$((nkey + 1))
	printf '%s' "$nkey" >>"$pairq"
	for a in "$@"; do printf '\t%s' "$a" >>"$pairq"; done
	printf '\n' >>"$pairq"
}
pair_lane() {
	tab=$(printf '\t')
	while IFS= read -r job; do
		key=${job%%"$tab"*}
		mkdir "$res/$key.claim" 2>/dev/null || continue # the other lane has it
		# shellcheck disable=SC2086
		(IFS=$tab; set -f; run_suite $job)
	done <"$pairq"
}
pair_run() {
	echo "== $(wc -l <"$pairq") suites, two at a time: $(cut -f2 "$pairq" | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
	pair_lane &
	pair_lane &
	wait
	tab=$(printf '\t')
	while IFS= read -r job; do
		key=${job%%"$tab"*}
		[ -f "$res/$key.name" ] || echo "$job" | cut -f2 >"$res/$key.name"
		echo "== $(cat "$res/$key.name")"
		report "$key"
	done <"$pairq"
	: >"$pairq"
}
fuzz_smoke() { # fuzz_smoke BINARY: the committed corpus plus a short mutation run
	corpus=tests/fuzz/corpus/$(basename "$1" | sed 's/^fuzz_//')
	mkdir -p "$corpus"
	work=$(mktemp -d)
	# new inputs go to a scratch dir
	"$1" -runs="${FUZZ_RUNS:-20000}" -max_len=65536 -timeout=10 -rss_limit_mb=2048 "$work" "$corpus"
	rc=$?
	rm -rf "$work"
	return $rc
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
suite "unit tests" build/pt_test
suite "unit tests (ASan+UBSan)" build/asan/pt_test
# ThreadSanitizer for the threaded parts: the kernels' pool (its claim words), the expert
# tests (the I/O completion path and compute threads) ...
[ -x build/tsan/pt_test ] && suite "pool unit tests (TSan)" build/tsan/pt_test pool
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
	# tests/cli/lib.sh; docs/TESTING.md "Test time"); the shared synthetic models are the
	# normal build's (PT_MODEL_MAKER: byte-identical files, written once, not again at ASan speed)
	suite "cli $(basename "$t") (ASan+UBSan)" env PARTICLE=build/asan/particle PT_TEST_SUBSET=1 \
		PT_MODEL_MAKER=build/particle sh "$t"
done
# CUDA backend (issue 16): where nvcc exists, `make CUDA=1` must build (no GPU needed) and
# its binary must pass the GPU flag tests; the kernel test itself needs a GPU (tests/cuda).
if [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
	suite "cuda build (make CUDA=1 all cuda-test)" make -s CUDA=1 -j"$(nproc)" all cuda-test
	[ -x build/cuda/particle ] && suite "cli test_gpu.sh (CUDA build)" \
		env PARTICLE=build/cuda/particle sh tests/cli/test_gpu.sh
fi
# aarch64 kernels under qemu-user (issue 19; installs its arm64 packages, cross-builds first)
pair_add "aarch64 kernels, CLI and streaming (qemu-user)" sh tools/test-arm64.sh
# the oracle suites, the longest first (each lane takes the next one: the pair ends together)
for t in test_mkmodel test_tokenizer test_eval test_template test_run; do
	[ -f "tests/oracle/$t.sh" ] && pair_add "oracle $t.sh" env PARTICLE=build/particle sh "tests/oracle/$t.sh"
done
for t in tests/oracle/test_*.sh; do
	[ -f "$t" ] || continue
	case $(basename "$t" .sh) in test_mkmodel|test_tokenizer|test_eval|test_template|test_run) continue ;; esac
	pair_add "oracle $(basename "$t")" env PARTICLE=build/particle sh "$t"
done
for f in build/fuzz/fuzz_*; do
	[ -x "$f" ] || continue
	pair_add "fuzz smoke $(basename "$f")" fuzz_smoke "$f"
done
pair_run
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
