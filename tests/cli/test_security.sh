#!/bin/sh
# test_security.sh - hostile objects planted where particle creates, updates or locks files
# (issue 22, SECURITY.md "Other local users").  For every path particle writes - the lock's
# PID file, an expert pack (its temp, final name and manifest), the lazy pack cache's data
# and log, a routing trace, stats JSON (run and eval), --logits-out, mkmodel -o and
# mkmodel --reroute - a symlink and a hard link to a victim file are planted first; the
# victim must be byte-identical afterwards (sha256) and particle must either work (the link
# replaced, not followed) or exit 1 with one clear error line.  Also: a world-writable cache
# directory, files owned by another uid (as root: the particle part runs as nobody through
# setpriv; skipped with a message otherwise), and the model lock refusing a second process
# reached through another path, a symlink and a hard link, naming the holder's PID.
. "$(dirname "$0")/lib.sh"

sha() { sha256sum "$1" | cut -d' ' -f1; }
# new_victim NAME: a file with known content; prints its path, records its hash in $TMP/NAME.sha
new_victim() {
	printf 'precious %s %s\n' "$1" "$$" >"$TMP/$1"
	sha "$TMP/$1" >"$TMP/$1.sha"
	echo "$TMP/$1"
}
# victim_intact DESC VICTIM
victim_intact() {
	if [ -f "$2" ] && [ "$(sha "$2")" = "$(cat "$2.sha")" ]; then ok; else bad "$1: victim $2 changed"; fi
}
# plant KIND PATH VICTIM  (KIND: sym | hard)
plant() {
	rm -f "$2"
	if [ "$1" = sym ]; then ln -s "$3" "$2"; else ln "$3" "$2"; fi
}
# replaced DESC PATH VICTIM: PATH is now a regular file of its own, not the planted link
replaced() {
	if [ -f "$2" ] && [ ! -L "$2" ] && [ "$(stat -c %i "$2")" != "$(stat -c %i "$3")" ]; then ok
	else bad "$1: $2 is still the planted link"; fi
}
# exit1_clear DESC: exit status 1 (in $rc) and one "particle: error:" line naming the problem
exit1_clear() {
	if [ "$rc" -eq 1 ]; then ok; else bad "$1: exit $rc, want 1; stderr: $(head -c 300 "$TMP/err")"; fi
	expect_one_error_line "$1"
}

M="$TMP/m.gguf"
if ! "$PARTICLE" mkmodel --arch qwen3moe --preset tiny --quant f32 -o "$M" >/dev/null 2>"$TMP/mk.err"; then
	bad "mkmodel failed: $(head -c 300 "$TMP/mk.err")"
	finish
	exit 1
fi
# Private state of this test only: never the real ~/.cache or $XDG_RUNTIME_DIR.
export XDG_CACHE_HOME="$TMP/cache" XDG_RUNTIME_DIR="$TMP/rt"
mkdir -m 700 "$TMP/rt"
RUN="--prompt hi -n 1 --quiet"
EVAL="--tokens 1,2,3 --top 0 --batch 1 --expert-slots 4"

# ---- user-named outputs: the link at the name is replaced, its target untouched ----
for kind in sym hard; do
	v=$(new_victim "v-mkmodel-$kind")
	plant $kind "$TMP/out.gguf" "$v"
	expect_exit 0 "mkmodel -o over a $kind link" -- "$PARTICLE" mkmodel --arch qwen3moe --layers 1 -o "$TMP/out.gguf"
	victim_intact "mkmodel -o $kind" "$v"
	replaced "mkmodel -o $kind" "$TMP/out.gguf" "$v"
	expect_exit 0 "mkmodel -o $kind: result loads" -- "$PARTICLE" inspect "$TMP/out.gguf"

	v=$(new_victim "v-stats-$kind")
	plant $kind "$TMP/s.json" "$v"
	# shellcheck disable=SC2086
	expect_exit 0 "run --stats-json over a $kind link" -- "$PARTICLE" run -m "$M" $RUN --stats-json "$TMP/s.json"
	victim_intact "run --stats-json $kind" "$v"
	replaced "run --stats-json $kind" "$TMP/s.json" "$v"
	expect_grep "$TMP/s.json" '"ids"' "run --stats-json $kind: written"

	for flag in --stats-json --logits-out --trace-experts; do
		v=$(new_victim "v-eval$flag-$kind")
		plant $kind "$TMP/e.out" "$v"
		# shellcheck disable=SC2086
		expect_exit 0 "eval $flag over a $kind link" -- "$PARTICLE" eval -m "$M" $EVAL $flag "$TMP/e.out"
		victim_intact "eval $flag $kind" "$v"
		replaced "eval $flag $kind" "$TMP/e.out" "$v"
		[ -s "$TMP/e.out" ] && ok || bad "eval $flag $kind: output empty"
	done

	# an expert pack: its final name, its manifest, and the old predictable temp name
	P="$TMP/p.xpack"
	v=$(new_victim "v-pack-$kind")
	v2=$(new_victim "v-manifest-$kind")
	v3=$(new_victim "v-packtmp-$kind")
	plant $kind "$P" "$v"
	plant $kind "$P.json" "$v2"
	plant $kind "$P.tmp" "$v3"
	expect_exit 0 "pack over $kind links" -- "$PARTICLE" pack "$M" -o "$P"
	victim_intact "pack $kind" "$v"
	victim_intact "pack manifest $kind" "$v2"
	victim_intact "pack temp $kind" "$v3"
	replaced "pack $kind" "$P" "$v"
	replaced "pack manifest $kind" "$P.json" "$v2"
	expect_exit 0 "pack $kind: verifies" -- "$PARTICLE" pack "$M" -o "$P" --verify
	if ls -a "$TMP" | grep -q '^\.p\.xpack.*\.tmp-'; then bad "pack $kind: temp left behind"; else ok; fi
	rm -f "$P" "$P.json" "$P.tmp"
done
# streams the user names are written as streams, never replaced
# shellcheck disable=SC2086
expect_exit 0 "--stats-json /dev/stdout" -- "$PARTICLE" run -m "$M" $RUN --stats-json /dev/stdout
expect_grep "$TMP/out" '"ids"' "--stats-json /dev/stdout: JSON on stdout"
[ -c /dev/null ] && ok || bad "/dev/null is no longer a character device"

# ---- in-place edit (mkmodel --reroute): never through a link ----
cp "$TMP/out.gguf" "$TMP/r.gguf"
for kind in sym hard; do
	v=$(new_victim "v-reroute-$kind")
	cp "$TMP/r.gguf" "$v"; sha "$v" >"$v.sha"
	plant $kind "$TMP/rr.gguf" "$v"
	"$PARTICLE" mkmodel --reroute "$TMP/rr.gguf" --router-skew 0.5 >"$TMP/out" 2>"$TMP/err"; rc=$?
	exit1_clear "reroute through a $kind link"
	expect_grep "$TMP/err" "refusing to edit" "reroute $kind: says why"
	victim_intact "reroute $kind" "$v"
done
expect_exit 0 "reroute of the file itself" -- "$PARTICLE" mkmodel --reroute "$TMP/r.gguf" --router-skew 0.5

# ---- the lazy pack cache (per-user state updated in place) ----
PC="$TMP/pc"
# shellcheck disable=SC2086
expect_exit 0 "pack cache: first use" -- "$PARTICLE" eval -m "$M" $EVAL --pack-cache "$PC" --pack-cache-size 8M
[ "$(stat -c %a "$PC")" = 700 ] && ok || bad "pack cache dir mode $(stat -c %a "$PC"), want 700"
for f in particle-pcache.data particle-pcache.log; do
	for kind in sym hard; do
		v=$(new_victim "v-$f-$kind")
		plant $kind "$PC/$f" "$v"
		# shellcheck disable=SC2086
		"$PARTICLE" eval -m "$M" $EVAL --pack-cache "$PC" --pack-cache-size 8M >"$TMP/out" 2>"$TMP/err"; rc=$?
		exit1_clear "pack cache $f as a $kind link"
		expect_grep "$TMP/err" "$PC/$f" "pack cache $f $kind: names the file"
		victim_intact "pack cache $f $kind" "$v"
		rm -f "$PC/$f"
	done
done
mkdir -p "$TMP/pcw" && chmod 777 "$TMP/pcw"
# shellcheck disable=SC2086
"$PARTICLE" eval -m "$M" $EVAL --pack-cache "$TMP/pcw" --pack-cache-size 8M >"$TMP/out" 2>"$TMP/err"; rc=$?
exit1_clear "world-writable pack cache dir"
expect_grep "$TMP/err" "writable by group or others" "world-writable pack cache dir: says why"
[ -z "$(ls -A "$TMP/pcw")" ] && ok || bad "files created in a world-writable pack cache dir"
ln -s "$PC" "$TMP/pcl"
# shellcheck disable=SC2086
"$PARTICLE" eval -m "$M" $EVAL --pack-cache "$TMP/pcl" --pack-cache-size 8M >"$TMP/out" 2>"$TMP/err"; rc=$?
exit1_clear "symlinked pack cache dir"

# ---- the model lock: no file in /tmp, PID file only in a private directory ----
dev_ino=$(printf '%x-%x' "$(stat -c %d "$M")" "$(stat -c %i "$M")")
pidf="$TMP/rt/particle/$dev_ino.pid"
# shellcheck disable=SC2086
expect_exit 0 "run creates the private PID dir" -- "$PARTICLE" run -m "$M" $RUN
[ "$(stat -c %a "$TMP/rt/particle")" = 700 ] && ok || bad "PID dir mode $(stat -c %a "$TMP/rt/particle")"
[ ! -e "$pidf" ] && ok || bad "PID file left after exit"
for kind in sym hard; do
	v=$(new_victim "v-pid-$kind")
	plant $kind "$pidf" "$v"
	# shellcheck disable=SC2086
	expect_exit 0 "run with a $kind link at the PID file" -- "$PARTICLE" run -m "$M" $RUN
	victim_intact "PID file $kind" "$v"
	# the old lock file name in /tmp: planted, and ignored
	old="/tmp/particle-$dev_ino.lock"
	if [ ! -e "$old" ] && [ ! -L "$old" ]; then
		plant $kind "$old" "$v"
		# shellcheck disable=SC2086
		expect_exit 0 "run with a $kind link at the old /tmp lock name" -- env -u XDG_RUNTIME_DIR "$PARTICLE" run -m "$M" $RUN
		victim_intact "old /tmp lock name $kind" "$v"
		rm -f "$old"
	fi
done
# a shared XDG_RUNTIME_DIR is not used; a world-writable cache dir gets no PID file
chmod 1777 "$TMP/rt"
rm -rf "$TMP/rt/particle"
mkdir -p "$TMP/cache/particle/locks" && chmod 777 "$TMP/cache/particle/locks"
# shellcheck disable=SC2086
expect_exit 0 "run with shared runtime and cache dirs" -- "$PARTICLE" run -m "$M" $RUN --verbose
expect_grep "$TMP/err" "PID file was not written.*writable by group or others" "unsafe PID dir: warned"
[ ! -e "$TMP/rt/particle" ] && ok || bad "created state in a shared XDG_RUNTIME_DIR"
[ -z "$(ls -A "$TMP/cache/particle/locks")" ] && ok || bad "PID file in a world-writable dir"
chmod 700 "$TMP/rt" "$TMP/cache/particle/locks"

# ---- the lock refuses a second process through another path, a symlink, a hard link ----
mkdir "$TMP/ld"
cp "$M" "$TMP/ld/m.gguf"
ln -s "$TMP/ld/m.gguf" "$TMP/ld/sym.gguf"
ln "$TMP/ld/m.gguf" "$TMP/ld/hard.gguf"
mkfifo "$TMP/fifo"
printf '%s\n' '[{"role":"user","content":"hi"}]' >"$TMP/hi.json"
"$PARTICLE" run -m "$TMP/ld/m.gguf" --messages - -n 1 --quiet <"$TMP/fifo" >/dev/null 2>&1 &
holder=$!
exec 3>"$TMP/fifo"
i=0
until cat "$TMP"/rt/particle/*.pid 2>/dev/null | grep -qx "$holder" || [ $i -ge 200 ]; do
	sleep 0.05; i=$((i + 1))
done
for p in "$TMP/ld/../ld/./m.gguf" "$TMP/ld/sym.gguf" "$TMP/ld/hard.gguf"; do
	# shellcheck disable=SC2086
	"$PARTICLE" run -m "$p" $RUN >"$TMP/out" 2>"$TMP/err"; rc=$?
	exit1_clear "second process via $p"
	expect_grep "$TMP/err" "pid $holder" "second process via $p: names the holder's PID"
done
cat "$TMP/hi.json" >&3
exec 3>&-
wait $holder && ok || bad "lock holder failed"

# ---- another uid: pre-created files and directories it owns (root only) ----
if [ "$(id -u)" -ne 0 ]; then
	echo "skip: not root, the other-uid cases need setpriv to a second user"
else
	# A world-traversable copy of what nobody needs: the binary and the model.
	S=$(mktemp -d /tmp/pt_sec.XXXXXX)
	chmod 755 "$S"
	cp "$PARTICLE" "$S/particle" && cp "$M" "$S/m.gguf" && chmod 755 "$S/particle" && chmod 644 "$S/m.gguf"
	mkdir -m 700 "$S/home" "$S/pc" && chown 65534:65534 "$S/home" "$S/pc"
	mkdir -m 1777 "$S/shared"   # like /tmp: sticky and world-writable
	as_nobody() {
		setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$S/home" \
			XDG_CACHE_HOME="$S/home/.cache" XDG_RUNTIME_DIR= "$@"
	}
	# root's file in the shared dir where nobody is told to write: not truncated
	for f in s.json l.bin out.gguf; do
		printf 'root owns this\n' >"$S/shared/$f"; chmod 666 "$S/shared/$f"
		sha "$S/shared/$f" >"$S/shared.$f.sha"
	done
	# shellcheck disable=SC2086
	as_nobody "$S/particle" run -m "$S/m.gguf" $RUN --stats-json "$S/shared/s.json" >"$TMP/out" 2>"$TMP/err"; rc=$?
	exit1_clear "nobody: --stats-json over root's file in a sticky dir"
	# shellcheck disable=SC2086
	as_nobody "$S/particle" eval -m "$S/m.gguf" $EVAL --logits-out "$S/shared/l.bin" >"$TMP/out" 2>"$TMP/err"; rc=$?
	exit1_clear "nobody: --logits-out over root's file in a sticky dir"
	as_nobody "$S/particle" mkmodel --arch qwen3moe --layers 1 -o "$S/shared/out.gguf" >"$TMP/out" 2>"$TMP/err"; rc=$?
	exit1_clear "nobody: mkmodel -o over root's file in a sticky dir"
	for f in s.json l.bin out.gguf; do
		[ "$(sha "$S/shared/$f")" = "$(cat "$S/shared.$f.sha")" ] && ok || bad "nobody changed root's $f"
	done
	if ls -a "$S/shared" | grep -q '\.tmp-'; then bad "nobody: temp files left in the shared dir"; else ok; fi
	# root's (world-writable) file planted in nobody's pack cache: refused, not written
	printf 'root owns this\n' >"$S/pc/particle-pcache.data"; chmod 666 "$S/pc/particle-pcache.data"
	sha "$S/pc/particle-pcache.data" >"$S/pc.sha"
	# shellcheck disable=SC2086
	as_nobody "$S/particle" eval -m "$S/m.gguf" $EVAL --pack-cache "$S/pc" --pack-cache-size 8M >"$TMP/out" 2>"$TMP/err"; rc=$?
	exit1_clear "nobody: pack cache file owned by root"
	expect_grep "$TMP/err" "owned by uid 0" "nobody: pack cache names the owner"
	[ "$(sha "$S/pc/particle-pcache.data")" = "$(cat "$S/pc.sha")" ] && ok || bad "nobody wrote root's pack cache file"
	# a cache directory owned by root (as if planted): the lock's PID file is skipped, run works
	mkdir -p "$S/home/.cache/particle/locks"
	chown 65534:65534 "$S/home/.cache" "$S/home/.cache/particle"
	chown 0:0 "$S/home/.cache/particle/locks" && chmod 755 "$S/home/.cache/particle/locks"
	rm -f "$S/home/.cache/particle/locks"/*
	# shellcheck disable=SC2086
	as_nobody "$S/particle" run -m "$S/m.gguf" $RUN --verbose >"$TMP/out" 2>"$TMP/err"; rc=$?
	[ $rc -eq 0 ] && ok || bad "nobody: run with a root-owned locks dir: exit $rc $(head -c 300 "$TMP/err")"
	expect_grep "$TMP/err" "owned by uid 0" "nobody: root-owned locks dir warned"
	[ -z "$(ls -A "$S/home/.cache/particle/locks")" ] && ok || bad "nobody wrote into root's locks dir"
	# root's file planted at nobody's PID-file name: replaced by rename, its bytes untouched
	chown 65534:65534 "$S/home/.cache/particle/locks"
	printf 'root owns this\n' >"$S/rootpid"; chmod 666 "$S/rootpid"; sha "$S/rootpid" >"$S/rootpid.sha"
	ln "$S/rootpid" "$S/home/.cache/particle/locks/$(printf '%x-%x' "$(stat -c %d "$S/m.gguf")" "$(stat -c %i "$S/m.gguf")").pid"
	# shellcheck disable=SC2086
	as_nobody "$S/particle" run -m "$S/m.gguf" $RUN >"$TMP/out" 2>"$TMP/err"; rc=$?
	[ $rc -eq 0 ] && ok || bad "nobody: run with root's file at the PID name: exit $rc $(head -c 300 "$TMP/err")"
	[ "$(sha "$S/rootpid")" = "$(cat "$S/rootpid.sha")" ] && ok || bad "nobody wrote root's file at the PID name"
	# and nobody's own state is created private
	# shellcheck disable=SC2086
	as_nobody "$S/particle" eval -m "$S/m.gguf" $EVAL --pack-cache "$S/home/pc2" --pack-cache-size 8M >"$TMP/out" 2>"$TMP/err"; rc=$?
	[ $rc -eq 0 ] && ok || bad "nobody: own pack cache: exit $rc $(head -c 300 "$TMP/err")"
	[ "$(stat -c '%u %a' "$S/home/pc2")" = "65534 700" ] && ok || bad "nobody's pack cache dir: $(stat -c '%u %a' "$S/home/pc2")"
	[ "$(stat -c '%u %a' "$S/home/pc2/particle-pcache.data")" = "65534 600" ] && ok || bad "nobody's pack cache file not 0600"
	rm -rf "$S"
fi

finish
