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

# expect_exit CODE DESCRIPTION -- COMMAND...   (stdout -> $TMP/out, stderr -> $TMP/err)
expect_exit() {
	want=$1; desc=$2; shift 3
	"$@" >"$TMP/out" 2>"$TMP/err"
	got=$?
	if [ "$got" -eq "$want" ]; then ok; else bad "$desc: exit $got, want $want; stderr: $(head -c 300 "$TMP/err")"; fi
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
