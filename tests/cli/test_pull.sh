#!/bin/sh
# test_pull.sh - `particle pull`, `pull --verify`, `particle list` and -m NAME against a real
# HTTP server on loopback: Debian nginx (its own temp prefix and config, ephemeral port,
# killed at the end) serving models made by `particle mkmodel --preset tiny`, and
# tests/net/faultproxy.py in front of it for drops, 5xx, stalls, a server without Range, a
# Hugging Face mirror (hf: names, X-Linked-Etag) and a token check.  No other traffic.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
PROXY="$HERE/../net/faultproxy.py"
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	umount "$TMP/full" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
	echo "SKIP: nginx not installed (tools/deps.sh installs it)"; echo "0 passed, 0 failed"; exit 0
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
export PARTICLE_PULL_BACKOFF_MS=20 PARTICLE_PULL_STALL_S=2
unset HF_TOKEN PARTICLE_HF_ENDPOINT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# ---- the server: nginx over $TMP/www ------------------------------------------------------
WWW="$TMP/www"; NG="$TMP/nginx"
mkdir -p "$WWW" "$NG/tmp"
"$PARTICLE" mkmodel --arch qwen3moe --preset tiny -o "$WWW/tiny.gguf" >/dev/null 2>&1 || { bad "mkmodel tiny"; finish; exit 1; }
python3 "$HERE/../net/mksplit.py" "$WWW" m 3
mkdir -p "$WWW/bad"
python3 "$HERE/../net/mksplit.py" "$WWW/bad" m 3 --bad-part 2
SIZE=$(wc -c <"$WWW/tiny.gguf")
# a file that is not a GGUF at all, 8 MiB (the refusal must come before 1 MiB arrives)
head -c 8388608 /dev/urandom >"$WWW/junk.gguf"
NPORT=$(free_port)
USERLINE=""; [ "$(id -u)" = 0 ] && USERLINE="user root;"
cat >"$NG/nginx.conf" <<CONF
$USERLINE
worker_processes 1;
pid $NG/nginx.pid;
error_log $NG/error.log;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path $NG/tmp/body; proxy_temp_path $NG/tmp/proxy;
	fastcgi_temp_path $NG/tmp/fcgi; uwsgi_temp_path $NG/tmp/uwsgi; scgi_temp_path $NG/tmp/scgi;
	server { listen 127.0.0.1:$NPORT; root $WWW; }
}
CONF
"$NGINX" -p "$NG" -e "$NG/error.log" -c "$NG/nginx.conf" -g 'daemon off;' &
PIDS="$PIDS $!"
# nginx writes its pid file after it has bound the port
i=0; while [ ! -s "$NG/nginx.pid" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
[ -s "$NG/nginx.pid" ] || { bad "nginx did not start: $(cat "$NG/error.log")"; finish; exit 1; }
BASE="http://127.0.0.1:$NPORT"

# One fault proxy in front of nginx for every case; set_faults ARGS... gives it the faults
# of the next case (and zeroes its byte count $PC).
PC="$TMP/count"; echo 0 >"$PC"
python3 "$PROXY" --upstream "$NPORT" --port-file "$TMP/pport" --count-file "$PC" --root "$WWW" \
	--config "$TMP/pconf" &
PIDS="$PIDS $!"
i=0; while [ ! -s "$TMP/pport" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
PP=$(cat "$TMP/pport")
[ -n "$PP" ] || { bad "fault proxy did not start"; finish; exit 1; }
NCONF=0
set_faults() {
	NCONF=$((NCONF + 1))
	echo "$*" >"$TMP/pconf.tmp$NCONF"; mv "$TMP/pconf.tmp$NCONF" "$TMP/pconf"
	# the proxy notices on its next request; make that request now so the count starts at 0
	"$PARTICLE" pull "http://127.0.0.1:$PP/reload.gguf" -o "$TMP" >/dev/null 2>&1
	echo 0 >"$PC"
}
lt_110() { # BYTES: true when BYTES < 1.1 x SIZE
	[ "$1" -lt $((SIZE + SIZE / 10)) ]
}
leftovers() { # DIR: files other than the expected ones
	ls -A "$1" | grep -v -e '^tiny\.gguf$' | tr '\n' ' '
}

# ---- plain download ---------------------------------------------------------------------
mkdir -p "$TMP/o1"
expect_exit 0 "plain pull" -- "$PARTICLE" pull "$BASE/tiny.gguf" -o "$TMP/o1" --quiet
# the pulled file is not left in the page cache (its written pages sit there in small folios,
# and a model mapped from them decodes up to 2.5x slower: util/safefile.h); at most what the
# GGUF check reads back
if command -v fincore >/dev/null 2>&1 && [ "$(stat -f -c %T "$TMP/o1")" != tmpfs ]; then
	res=$(fincore -b -n -o RES "$TMP/o1/tiny.gguf" | tr -d ' ')
	[ "$res" -lt $((SIZE / 4)) ] && ok || bad "pulled file still cached: $res of $SIZE bytes"
fi
if cmp -s "$WWW/tiny.gguf" "$TMP/o1/tiny.gguf"; then ok; else bad "plain pull: bytes differ"; fi
expect_grep "$TMP/out" "pulled .*tiny.gguf: .*sha256 $(sha256sum "$WWW/tiny.gguf" | cut -c1-64) (no published checksum: computed)" "summary line"
[ -z "$(leftovers "$TMP/o1")" ] && ok || bad "plain pull left: $(leftovers "$TMP/o1")"
expect_exit 0 "pull again: already there" -- "$PARTICLE" pull "$BASE/tiny.gguf" -o "$TMP/o1"
expect_grep "$TMP/err" "already there" "already there message"
# progress lines when stderr is not a terminal, one at the end at least
mkdir -p "$TMP/o1b"
expect_exit 0 "pull with progress" -- "$PARTICLE" pull "$BASE/tiny.gguf" -o "$TMP/o1b" --jobs 3
expect_grep "$TMP/err" "^pull: tiny.gguf 100.0% 6.1/6.1 MiB" "plain progress line"

# a progress bar on a terminal: one line redrawn with \r, bytes, %, rate, ETA
mkdir -p "$TMP/o1c"
python3 - "$PARTICLE" "$BASE/tiny.gguf" "$TMP/o1c" >"$TMP/tty.txt" 2>&1 <<'PY'
import os, subprocess, sys
m, s = os.openpty()
p = subprocess.Popen([sys.argv[1], "pull", sys.argv[2], "-o", sys.argv[3]], stdout=subprocess.DEVNULL, stderr=s)
os.close(s)
out = b""
while True:
    try:
        b = os.read(m, 4096)
    except OSError:
        break
    if not b:
        break
    out += b
p.wait()
sys.stdout.write(out.decode("utf-8", "replace").replace("\r", "<CR>").replace("\033", "<ESC>"))
PY
expect_grep "$TMP/tty.txt" "<CR><ESC>\[Ktiny.gguf *\[##############################\] 100.0%  *6.1/6.1 MiB .* MiB/s ETA 0:00" "terminal progress bar"

# ---- --verify ---------------------------------------------------------------------------
SHA=$(sha256sum "$WWW/tiny.gguf" | cut -c1-64)
expect_exit 0 "verify" -- "$PARTICLE" pull --verify "$TMP/o1/tiny.gguf" --sha256 "$SHA"
expect_grep "$TMP/out" "OK (GGUF v3" "verify says OK"
expect_exit 2 "verify wrong sha" -- "$PARTICLE" pull --verify "$TMP/o1/tiny.gguf" --sha256 "$(echo "$SHA" | tr 0-9a-f 1-9a-f0)"
expect_one_error_line "verify wrong sha"
head -c 3000000 "$TMP/o1/tiny.gguf" >"$TMP/trunc.gguf"
for opt in --pack --repack "-o $TMP" "--jobs 2" "--limit-rate 1M"; do
	# shellcheck disable=SC2086 # the option and its value are two words
	expect_exit 2 "verify refuses $opt" -- "$PARTICLE" pull --verify "$TMP/o1/tiny.gguf" $opt
	expect_grep "$TMP/err" "takes only --sha256" "verify with $opt says why"
done
expect_exit 2 "verify truncated" -- "$PARTICLE" pull --verify "$TMP/trunc.gguf"
expect_grep "$TMP/err" "past the end" "verify truncated says why"

# ---- parallel ranges, small chunks, --pack identical to `particle pack` --------------------
mkdir -p "$TMP/o2" "$TMP/p2"
PARTICLE_PULL_CHUNK=65536 expect_exit 0 "pull --pack --jobs 4" -- "$PARTICLE" pull "$BASE/tiny.gguf" -o "$TMP/o2" --pack --jobs 4 --quiet
cmp -s "$WWW/tiny.gguf" "$TMP/o2/tiny.gguf" && ok || bad "--jobs 4: bytes differ"
"$PARTICLE" pack "$TMP/o2/tiny.gguf" -o "$TMP/p2/tiny.gguf.xpack" >/dev/null 2>&1
cmp -s "$TMP/o2/tiny.gguf.xpack" "$TMP/p2/tiny.gguf.xpack" && ok || bad "--pack: pack differs from particle pack"
cmp -s "$TMP/o2/tiny.gguf.xpack.json" "$TMP/p2/tiny.gguf.xpack.json" && ok || bad "--pack: manifest differs"
expect_exit 0 "pack --verify of the pulled pack" -- "$PARTICLE" pack "$TMP/o2/tiny.gguf" --verify
expect_exit 0 "list shows the pack" -- "$PARTICLE" list --dir "$TMP/o2"
expect_grep "$TMP/out" "^tiny.gguf .* qwen3moe .* pack$" "list: pack present"

# ---- --limit-rate caps the total rate ------------------------------------------------------
mkdir -p "$TMP/o2b"
expect_exit 0 "--limit-rate" -- "$PARTICLE" pull "$BASE/tiny.gguf" -o "$TMP/o2b" --limit-rate 3M --quiet
RATE=$(sed -n 's/.* in \([0-9.]*\) s (.*/\1/p' "$TMP/out")
awk -v t="$RATE" 'BEGIN { exit !(t >= 1.6) }' && ok || bad "--limit-rate 3M: 6.1 MiB took $RATE s"

# ---- Hugging Face mirror: hf: names, X-Linked-Etag, models dir, list, -m NAME ----------------
set_faults --hf
export PARTICLE_MODELS="$TMP/models"
PARTICLE_HF_ENDPOINT="http://127.0.0.1:$PP/" expect_exit 0 "hf: pull" -- "$PARTICLE" pull hf:acme/tiny-GGUF/tiny.gguf@main --quiet
cmp -s "$WWW/tiny.gguf" "$TMP/models/tiny.gguf" && ok || bad "hf: bytes differ"
expect_grep "$TMP/out" "(the hub (X-Linked-Etag))" "hf: checksum from the hub"
expect_exit 0 "list" -- "$PARTICLE" list
expect_grep "$TMP/out" "^tiny.gguf .* MiB  qwen3moe" "list shows the model with its arch"
expect_exit 0 "run -m NAME from the models dir" -- "$PARTICLE" run -m tiny -n 2 --temperature 0 --prompt hi
PARTICLE_HF_ENDPOINT="http://127.0.0.1:$PP" expect_exit 2 "hf: 404" -- "$PARTICLE" pull hf:acme/tiny-GGUF/missing.gguf
expect_grep "$TMP/err" "not found (HTTP 404)" "hf 404 message"
expect_exit 2 "hf: bad name" -- "$PARTICLE" pull hf:acme/../x.gguf
expect_one_error_line "hf: bad name"

# a wrong published checksum: refused, .partial kept, no final file
set_faults --hf --hf-sha 0000000000000000000000000000000000000000000000000000000000000000
mkdir -p "$TMP/o3"
PARTICLE_HF_ENDPOINT="http://127.0.0.1:$PP" expect_exit 2 "wrong checksum" -- "$PARTICLE" pull hf:acme/tiny-GGUF/tiny.gguf -o "$TMP/o3" --quiet
expect_grep "$TMP/err" "SHA-256 mismatch" "wrong checksum message"
[ -f "$TMP/o3/tiny.gguf.partial" ] && [ ! -e "$TMP/o3/tiny.gguf" ] && ok || bad "wrong checksum: want .partial kept and no final file: $(ls "$TMP/o3")"
expect_exit 0 "list shows an unfinished download" -- "$PARTICLE" list --dir "$TMP/o3"
expect_grep "$TMP/out" "^tiny.gguf .*download incomplete" "list: incomplete download"
mkdir -p "$TMP/o3b"
expect_exit 2 "wrong --sha256" -- "$PARTICLE" pull "$BASE/tiny.gguf" -o "$TMP/o3b" --sha256 "$(echo "$SHA" | tr 0-9a-f 1-9a-f0)" --quiet
[ ! -e "$TMP/o3b/tiny.gguf" ] && ok || bad "wrong --sha256 left a final file"

# ---- 401 and HF_TOKEN -------------------------------------------------------------------
set_faults --require-token s3cret
mkdir -p "$TMP/o4"
expect_exit 2 "401 without token" -- "$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o4"
expect_grep "$TMP/err" "HTTP 401.*HF_TOKEN" "401 hint names HF_TOKEN"
expect_one_error_line "401"
HF_TOKEN=s3cret expect_exit 0 "with HF_TOKEN" -- "$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o4" --quiet
cmp -s "$WWW/tiny.gguf" "$TMP/o4/tiny.gguf" && ok || bad "token pull: bytes differ"

# ---- 404 --------------------------------------------------------------------------------
expect_exit 2 "404" -- "$PARTICLE" pull "$BASE/nope.gguf" -o "$TMP/o4"
expect_one_error_line "404"
expect_exit 2 "not a gguf name" -- "$PARTICLE" pull "$BASE/tiny.bin" -o "$TMP/o4"

# ---- 416: the file is shorter than announced ----------------------------------------------
set_faults --head-size $((SIZE + 3000000))
mkdir -p "$TMP/o4b"
expect_exit 2 "416" -- "$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o4b" --quiet
expect_grep "$TMP/err" "HTTP 416 (range not satisfiable)" "416 message"
expect_one_error_line "416"
[ ! -e "$TMP/o4b/tiny.gguf" ] && ok || bad "416 left a final file"

# ---- server without Range: one sequential stream ------------------------------------------
set_faults --no-range
mkdir -p "$TMP/o5"
expect_exit 0 "no Range" -- "$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o5" --jobs 4
cmp -s "$WWW/tiny.gguf" "$TMP/o5/tiny.gguf" && ok || bad "no Range: bytes differ"
expect_grep "$TMP/out" "server without Range" "no Range noted"

# ---- drops, 5xx, stalls: retried, resumed from the bytes received -------------------------
set_faults --drop-after 700000 --drops 4
mkdir -p "$TMP/o6"
PARTICLE_PULL_CHUNK=2097152 expect_exit 0 "drops" -- "$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o6" --jobs 2 --quiet
cmp -s "$WWW/tiny.gguf" "$TMP/o6/tiny.gguf" && ok || bad "drops: bytes differ"
N=$(cat "$PC"); lt_110 "$N" && ok || bad "drops: $N bytes sent for a $SIZE-byte file"
# --repack: the interleaved pack built while downloading (parallel ranges, pieces cut across
# experts, dropped connections resumed mid-expert) is byte for byte `particle pack --repack`'s
if "$PARTICLE" mkmodel --arch qwen3moe --preset small --layers 1 --quant q4_k_m \
	-o "$WWW/rp.gguf" >/dev/null 2>&1; then
	set_faults --drop-after 700000 --drops 4
	mkdir -p "$TMP/o6r" "$TMP/p6r"
	PARTICLE_PULL_CHUNK=2097152 expect_exit 0 "pull --repack, drops" -- "$PARTICLE" pull \
		"http://127.0.0.1:$PP/rp.gguf" -o "$TMP/o6r" --jobs 4 --repack
	expect_grep "$TMP/out" "interleaved expert pack written" "pull --repack summary"
	cmp -s "$WWW/rp.gguf" "$TMP/o6r/rp.gguf" && ok || bad "pull --repack: model bytes differ"
	"$PARTICLE" pack "$TMP/o6r/rp.gguf" --repack -o "$TMP/p6r/rp.gguf.xpack" >/dev/null 2>&1
	cmp -s "$TMP/o6r/rp.gguf.xpack" "$TMP/p6r/rp.gguf.xpack" && ok ||
		bad "pull --repack: pack differs from particle pack --repack"
	cmp -s "$TMP/o6r/rp.gguf.xpack.json" "$TMP/p6r/rp.gguf.xpack.json" && ok ||
		bad "pull --repack: manifest differs"
	grep -q '"layout":.*"x16"' "$TMP/o6r/rp.gguf.xpack.json" && ok ||
		bad "pull --repack: manifest has no interleaved part"
	expect_exit 0 "pack --verify of the pulled interleaved pack" -- "$PARTICLE" pack \
		"$TMP/o6r/rp.gguf" --verify
	expect_grep "$TMP/out" "interleaved" "verify names the layout"
	# without --repack the same download gives the plain pack (and the two differ)
	set_faults
	mkdir -p "$TMP/o6p"
	PARTICLE_PULL_CHUNK=2097152 expect_exit 0 "pull --pack of the same" -- "$PARTICLE" pull \
		"http://127.0.0.1:$PP/rp.gguf" -o "$TMP/o6p" --jobs 4 --pack --quiet
	! cmp -s "$TMP/o6p/rp.gguf.xpack" "$TMP/o6r/rp.gguf.xpack" && ok ||
		bad "pull --pack and --repack wrote the same pack"
	rm -f "$WWW/rp.gguf"
else
	bad "mkmodel small q4_k_m"
fi
set_faults --fail 3
mkdir -p "$TMP/o7"
expect_exit 0 "5xx" -- "$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o7" --quiet
cmp -s "$WWW/tiny.gguf" "$TMP/o7/tiny.gguf" && ok || bad "5xx: bytes differ"
set_faults --stall-after 400000 --stall-s 6
mkdir -p "$TMP/o8"
expect_exit 0 "stall" -- "$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o8" --jobs 1 --quiet
cmp -s "$WWW/tiny.gguf" "$TMP/o8/tiny.gguf" && ok || bad "stall: bytes differ"
set_faults --fail 100
mkdir -p "$TMP/o9"
PARTICLE_PULL_BACKOFF_MS=1 expect_exit 1 "5xx forever: gives up" -- "$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o9"
expect_grep "$TMP/err" "giving up after 8 retries: HTTP 50" "gives up with the reason"

# ---- SIGINT: exit 130, .partial + state kept, resume completes with < 1.1x the bytes --------
set_faults --rate 1500000
mkdir -p "$TMP/o10"
PARTICLE_PULL_CHUNK=262144 "$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o10" --jobs 2 --pack >"$TMP/int.out" 2>"$TMP/int.err" &
PULL=$!
i=0; while [ "$(cat "$PC")" -lt 2000000 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
kill -INT $PULL; wait $PULL; rc=$?
[ $rc -eq 130 ] && ok || bad "SIGINT: exit $rc, want 130: $(cat "$TMP/int.err")"
grep -q "interrupted: .*partial kept; run the same command again to resume" "$TMP/int.err" && ok || bad "SIGINT message: $(cat "$TMP/int.err")"
[ -f "$TMP/o10/tiny.gguf.partial" ] && [ -f "$TMP/o10/tiny.gguf.partial.state" ] && [ ! -e "$TMP/o10/tiny.gguf" ] && ok || bad "SIGINT: files $(ls "$TMP/o10")"
FIRST=$(cat "$PC")
set_faults
PARTICLE_PULL_CHUNK=262144 expect_exit 0 "resume after SIGINT" -- "$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o10" --jobs 2 --pack --quiet
cmp -s "$WWW/tiny.gguf" "$TMP/o10/tiny.gguf" && ok || bad "SIGINT resume: bytes differ"
expect_grep "$TMP/out" "resumed" "summary says resumed"
TOTAL=$(( FIRST + $(cat "$PC") )); lt_110 "$TOTAL" && ok || bad "SIGINT resume: $TOTAL bytes for $SIZE"
cmp -s "$TMP/o10/tiny.gguf.xpack" "$TMP/p2/tiny.gguf.xpack" && ok || bad "--pack across a resume differs"
[ -z "$(leftovers "$TMP/o10" | sed 's/tiny.gguf.xpack.json//; s/tiny.gguf.xpack//' | tr -d ' ')" ] && ok || bad "resume left: $(leftovers "$TMP/o10")"

# ---- a crash (SIGKILL): the state file survives; the resume is byte-equal -------------------
set_faults --rate 1500000
mkdir -p "$TMP/o11"
"$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o11" --jobs 2 >/dev/null 2>&1 &
PULL=$!
i=0; while [ "$(cat "$PC")" -lt 3000000 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
kill -KILL $PULL; wait $PULL 2>/dev/null
[ -f "$TMP/o11/tiny.gguf.partial.state" ] && ok || bad "SIGKILL: no state file"
set_faults
expect_exit 0 "resume after SIGKILL" -- "$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o11" --quiet
cmp -s "$WWW/tiny.gguf" "$TMP/o11/tiny.gguf" && ok || bad "SIGKILL resume: bytes differ"

# ---- two pulls of one file: the second is refused while the first runs --------------------
set_faults --rate 400000
mkdir -p "$TMP/o14"
"$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o14" --quiet >/dev/null 2>&1 &
PULL=$!
i=0; while [ "$(cat "$PC")" -lt 300000 ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
expect_exit 1 "concurrent pull refused" -- "$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o14"
expect_grep "$TMP/err" "another particle pull is writing .*tiny.gguf.partial" "concurrent pull message"
kill -INT $PULL; wait $PULL
[ -f "$TMP/o14/tiny.gguf.partial" ] && ok || bad "concurrent: the first pull's .partial is gone"

# ---- a corrupt header: refused before 1 MiB is downloaded --------------------------------
set_faults
mkdir -p "$TMP/o12"
expect_exit 2 "not a GGUF" -- "$PARTICLE" pull "http://127.0.0.1:$PP/junk.gguf" -o "$TMP/o12" --jobs 4
expect_grep "$TMP/err" "not a valid GGUF model (refused after" "junk refused"
N=$(cat "$PC"); [ "$N" -lt 1048576 ] && ok || bad "junk: $N bytes downloaded before the refusal"
set_faults --corrupt-at 9
expect_exit 2 "corrupt tensor count" -- "$PARTICLE" pull "http://127.0.0.1:$PP/tiny.gguf" -o "$TMP/o12" --jobs 4
expect_grep "$TMP/err" "not a valid GGUF model" "corrupt header refused"
N=$(cat "$PC"); [ "$N" -lt 1048576 ] && ok || bad "corrupt header: $N bytes downloaded before the refusal"
[ ! -e "$TMP/o12/tiny.gguf" ] && ok || bad "corrupt header: final file exists"

# ---- split model: any part names it, every part arrives and is checked -------------------
mkdir -p "$TMP/o13"
expect_exit 0 "split pull by part 2" -- "$PARTICLE" pull "$BASE/m-00002-of-00003.gguf" -o "$TMP/o13" --quiet
for k in 1 2 3; do
	f="m-0000$k-of-00003.gguf"
	cmp -s "$WWW/$f" "$TMP/o13/$f" && ok || bad "split: $f differs or missing"
done
expect_exit 2 "split with a mismatched part" -- "$PARTICLE" pull "$BASE/bad/m-00001-of-00003.gguf" -o "$TMP/o13b" --quiet
mkdir -p "$TMP/o13b"
expect_exit 2 "split with a mismatched part" -- "$PARTICLE" pull "$BASE/bad/m-00001-of-00003.gguf" -o "$TMP/o13b" --quiet
expect_grep "$TMP/err" "m-00002-of-00003.gguf: named as part 2 of 3 but its header says part 1 of 3" "mismatched part named"
[ ! -e "$TMP/o13b/m-00002-of-00003.gguf" ] && ok || bad "mismatched part kept as final"

# ---- disk full (a small tmpfs; root only) ------------------------------------------------
mkdir -p "$TMP/full"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=2m tmpfs "$TMP/full" 2>/dev/null; then
	expect_exit 1 "disk full" -- "$PARTICLE" pull "$BASE/tiny.gguf" -o "$TMP/full"
	expect_grep "$TMP/err" "not enough free space in $TMP/full: need 6.1 MiB more" "disk full message"
	expect_one_error_line "disk full"
	[ -z "$(ls -A "$TMP/full")" ] && ok || bad "disk full left: $(ls -A "$TMP/full")"
	umount "$TMP/full"
else
	echo "SKIP: disk-full case needs root to mount a tmpfs" >&2
fi

# ---- usage ------------------------------------------------------------------------------
expect_exit 2 "no source" -- "$PARTICLE" pull
expect_exit 2 "ftp source" -- "$PARTICLE" pull ftp://x/y.gguf
expect_one_error_line "ftp source"
expect_exit 2 "bad --sha256" -- "$PARTICLE" pull "$BASE/tiny.gguf" --sha256 abc
expect_exit 0 "help" -- "$PARTICLE" pull --help
expect_grep "$TMP/out" "hf:OWNER/REPO/PATH.gguf" "help names hf:"

finish
