# lib.sh - tiny assertion helpers for CLI tests (POSIX sh).  Source it, call the checks, end
# with `finish`, which prints `N passed, N failed` and sets the exit status.
: "${PARTICLE:=build/particle}"
PASS=0
FAIL=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# Shared reference material: $PT_SHARED, else ../shared, else ../../shared (helper worktrees).
if [ -z "${PT_SHARED:-}" ]; then
	if [ -d ../shared ]; then PT_SHARED=../shared; else PT_SHARED=../../shared; fi
fi

ok() { PASS=$((PASS + 1)); }
bad() { FAIL=$((FAIL + 1)); echo "FAIL: $*" >&2; }

# The line of $TMP/err that says why (an error or sanitizer line), else its start.
err_line() {
	{ grep -m1 -E 'error|ERROR|runtime error|Sanitizer' "$TMP/err" || head -c 300 "$TMP/err"; } |
		head -c 300
}
# expect_exit CODE DESCRIPTION -- COMMAND...   (stdout -> $TMP/out, stderr -> $TMP/err)
expect_exit() {
	want=$1; desc=$2; shift 3
	"$@" >"$TMP/out" 2>"$TMP/err"
	got=$?
	if [ "$got" -eq "$want" ]; then ok; else bad "$desc: exit $got, want $want; stderr: $(err_line)"; fi
}
# expect_grep FILE PATTERN DESCRIPTION
expect_grep() {
	if grep -q -- "$2" "$1"; then ok; else bad "$3: '$2' not in $(head -c 300 "$1")"; fi
}
# expect_one_error_line: stderr is exactly one line starting with "particle: error: "
expect_one_error_line() {
	n=$(wc -l <"$TMP/err")
	if [ "$n" -eq 1 ] && grep -q '^particle: error: ' "$TMP/err"; then ok; else bad "$1: stderr not one error line: $(head -c 300 "$TMP/err")"; fi
}
finish() {
	echo "$PASS passed, $FAIL failed"
	[ "$FAIL" -eq 0 ]
}

# PT_TEST_SUBSET=1 (tools/run-tests.sh sets it for the ASan+UBSan pass of the CLI suites): the
# suites with an arch x option matrix run the representative subset docs/TESTING.md names
# ("Test time"); every check still runs on at least one combination.
SUBSET=${PT_TEST_SUBSET:-0}

# mkmodel_cached OUT MKMODEL-ARGS...: `$PARTICLE mkmodel ARGS -o OUT` through a cache of
# finished files beside the binary (<its dir>/test-models/<binary sha256>/<args sha256>.gguf):
# suites that need the same model write it once per build of particle.  OUT is a private copy
# (a test may rewrite it).  A file enters the cache only complete (written under a temporary
# name, then renamed); caches of earlier builds are removed.  PT_MODEL_CACHE=0: no cache.
# Returns mkmodel's exit status (its stdout/stderr go to the caller's).
# PT_MODEL_MAKER=BINARY: the files are written by BINARY (and cached under its hash) instead
# of $PARTICLE: tools/run-tests.sh gives the sanitizer passes the normal build, whose files
# are byte-identical (mkmodel is a pure function of its arguments; the sanitizer builds of
# mkmodel itself still run in test_mkmodel.sh, test_mkmodel_reroute.sh - fresh files,
# `small` included, compared byte for byte with the cached ones - and the unit tests).
mkmodel_cached() {
	mc_out=$1; shift
	mc_maker=${PT_MODEL_MAKER:-$PARTICLE}
	[ -x "$mc_maker" ] || mc_maker=$PARTICLE
	mc_bin=$(command -v "$mc_maker" 2>/dev/null)
	# only a real binary (its hash names what it writes), not a wrapper such as particle-qemu.sh
	if [ "${PT_MODEL_CACHE:-1}" = 0 ] || [ -z "$mc_bin" ] ||
		[ "$(head -c 4 "$mc_bin" | tail -c 3)" != ELF ]; then
		"$PARTICLE" mkmodel "$@" -o "$mc_out"
		return
	fi
	if [ -z "${MC_DIR:-}" ]; then
		mc_root="$(dirname "$mc_bin")/test-models"
		MC_DIR="$mc_root/$(sha256sum <"$mc_bin" | cut -c1-16)"
		mkdir -p "$MC_DIR" || return 1
		for mc_d in "$mc_root"/*; do [ "$mc_d" = "$MC_DIR" ] || rm -rf "$mc_d"; done
	fi
	mc_f="$MC_DIR/$(printf '%s\n' "$@" | sha256sum | cut -c1-32).gguf"
	if [ ! -f "$mc_f" ]; then
		mc_tmp=$(mktemp "$MC_DIR/.new.XXXXXX") || return 1
		"$mc_maker" mkmodel "$@" -o "$mc_tmp" || { mc_rc=$?; rm -f "$mc_tmp"; return $mc_rc; }
		mv -f "$mc_tmp" "$mc_f" || return 1
	fi
	cp "$mc_f" "$mc_out"
}
