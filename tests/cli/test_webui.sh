#!/bin/sh
# test_webui.sh - the web UI of `particle serve` (issue 14): the embedded assets over HTTP
# (types, gzip, ETag/304, --no-webui), GET /v1/stats/stream, then the browser tests
# (tests/webui/run_webui.mjs: Debian's chromium through npm playwright-core) against a real
# server on an ephemeral loopback port with a tiny synthetic model.  Screenshots go to
# $WEBUI_SHOTS (default build/webui); `make screenshots` copies the chat one to docs/.
. "$(dirname "$0")/lib.sh"
SHOTS=${WEBUI_SHOTS:-build/webui}
M="$TMP/tiny.gguf"
# WEBUI_MODEL (make screenshots: the trained demo model, so the pictures show English)
if [ -n "${WEBUI_MODEL:-}" ]; then
	cp "$WEBUI_MODEL" "$M" || { bad "cannot copy $WEBUI_MODEL"; finish; exit 1; }
elif ! "$PARTICLE" mkmodel --arch qwen3moe --preset tiny --quant q8_0 -o "$M" >/dev/null 2>"$TMP/mk.err"; then
	bad "mkmodel failed: $(head -c 300 "$TMP/mk.err")"
	finish
	exit 1
fi
N_MOE=$("$PARTICLE" inspect "$M" --json | sed -n 's/.*"expert_layers":\([0-9]*\).*/\1/p')

PID=
URL=
# start_server LOG ARGS...: particle serve on an ephemeral port; sets PID and URL
start_server() {
	log=$1; shift
	"$PARTICLE" serve -m "$M" --host 127.0.0.1 --port 0 "$@" >"$log" 2>&1 &
	PID=$!
	URL=
	i=0
	while [ $i -lt 300 ] && [ -z "$URL" ]; do
		URL=$(grep -o 'http://127\.0\.0\.1:[0-9][0-9]*' "$log" | head -n 1)
		kill -0 "$PID" 2>/dev/null || break
		[ -z "$URL" ] && sleep 0.1
		i=$((i + 1))
	done
	[ -n "$URL" ]
}
stop_server() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	PID=
}
trap 'stop_server; rm -rf "$TMP"' EXIT

# the expert cache (not the mapping every expert of a tiny model fits in): the heat map then
# shows residency that changes
if ! start_server "$TMP/serve.log" --io direct --expert-slots 6; then
	bad "particle serve did not start: $(head -c 400 "$TMP/serve.log")"
	finish
	exit 1
fi
ok

# ---- assets over HTTP ----
curl -s -D "$TMP/h1" -o "$TMP/index.html" "$URL/"
expect_grep "$TMP/h1" '^HTTP/1.1 200' "GET / is 200"
expect_grep "$TMP/h1" '^Content-Type: text/html; charset=utf-8' "page content type"
expect_grep "$TMP/h1" "^Content-Security-Policy: default-src 'none'" "page has a CSP"
expect_grep "$TMP/h1" '^Cache-Control: no-cache' "page revalidates"
if cmp -s "$TMP/index.html" webui/index.html; then ok; else bad "GET / is not webui/index.html"; fi
curl -s --compressed -D "$TMP/h2" -o "$TMP/app.js" "$URL/assets/app.js"
expect_grep "$TMP/h2" '^Content-Encoding: gzip' "gzip when accepted"
expect_grep "$TMP/h2" '^Content-Type: text/javascript; charset=utf-8' "js content type"
expect_grep "$TMP/h2" '^Vary: Accept-Encoding' "Vary: Accept-Encoding"
if cmp -s "$TMP/app.js" webui/app.js; then ok; else bad "gzip'd app.js does not inflate to webui/app.js"; fi
curl -s -D "$TMP/h3" -o "$TMP/plain.css" "$URL/assets/app.css"
if grep -qi '^Content-Encoding' "$TMP/h3"; then bad "gzip sent without Accept-Encoding"; else ok; fi
if cmp -s "$TMP/plain.css" webui/app.css; then ok; else bad "app.css bytes differ"; fi
etag=$(sed -n 's/^ETag: *\(.*\)\r$/\1/p' "$TMP/h3")
code=$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "$URL/assets/app.css")
if [ -n "$etag" ] && [ "$code" = 304 ]; then ok; else bad "If-None-Match $etag -> $code, want 304"; fi
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'If-None-Match: "stale"' "$URL/assets/app.css")
if [ "$code" = 200 ]; then ok; else bad "stale ETag -> $code, want 200"; fi
code=$(curl -s -o /dev/null -w '%{http_code}' -I "$URL/assets/md.js")
if [ "$code" = 200 ]; then ok; else bad "HEAD asset -> $code"; fi
for p in /assets/nope.js /assets/../Makefile /index.html /assets/; do
	code=$(curl -s -o /dev/null -w '%{http_code}' --path-as-is "$URL$p")
	if [ "$code" = 404 ]; then ok; else bad "GET $p -> $code, want 404"; fi
done
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/")
if [ "$code" = 405 ]; then ok; else bad "POST / -> $code, want 405"; fi

# ---- the stats stream ----
curl -s -N -m 2 -D "$TMP/h4" "$URL/v1/stats/stream?interval_ms=100" >"$TMP/stats" 2>/dev/null
expect_grep "$TMP/h4" '^Content-Type: text/event-stream' "stats stream is SSE"
n=$(grep -c '^data: {' "$TMP/stats")
if [ "$n" -ge 5 ] && [ "$n" -le 30 ]; then ok; else bad "stats stream sent $n events in 2 s at 100 ms"; fi
if node -e '
const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter((l) => l.startsWith("data: "));
const s = JSON.parse(lines[lines.length - 1].slice(6));
const n = Number(process.argv[2]);
const ok = s.model.n_moe_layers === n && s.heat.uses.length === n && s.heat.resident.length === n &&
	s.heat.resident.every((r) => r.length === s.model.n_expert) && s.memory.rss_bytes > 0 &&
	s.memory.budget_bytes > 0 && s.server.slots_total >= 1 && typeof s.gen.decode_tok_s === "number" &&
	["cache", "mapped"].includes(s.experts.mode);
process.exit(ok ? 0 : 1);' "$TMP/stats" "$N_MOE"; then ok; else bad "stats event fields: $(tail -c 600 "$TMP/stats")"; fi
for q in interval_ms=5 interval_ms=abc interval_ms=99999 interval_ms=; do
	code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/stats/stream?$q")
	if [ "$code" = 400 ]; then ok; else bad "stats ?$q -> $code, want 400"; fi
done

# ---- the browser ----
node tests/webui/run_webui.mjs "$URL" "$SHOTS" "$N_MOE" >"$TMP/browser.log" 2>&1
rc=$?
cat "$TMP/browser.log"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$TMP/browser.log" | tail -n 1)
if [ -n "$line" ]; then
	PASS=$((PASS + $(echo "$line" | awk '{print $1}')))
	FAIL=$((FAIL + $(echo "$line" | awk '{print $3}')))
fi
if [ $rc -ne 0 ] && [ -z "$line" ]; then bad "browser tests crashed (exit $rc)"; fi
if kill -0 "$PID" 2>/dev/null; then ok; else bad "server died during the browser tests: $(tail -c 400 "$TMP/serve.log")"; fi
kill "$PID"
wait "$PID"
rc=$?
PID=
# a clean exit: no sanitizer report, no leak (ASan runs of this suite)
if [ "$rc" -eq 0 ] && ! grep -q 'Sanitizer' "$TMP/serve.log"; then ok; else bad "server exit $rc: $(grep -A5 Sanitizer "$TMP/serve.log" | head -c 600)"; fi

# ---- --api-key: the page is public, the stats stream is not; the page takes the key ----
if start_server "$TMP/serve3.log" --api-key webui-test-key; then
	code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/")
	if [ "$code" = 200 ]; then ok; else bad "--api-key: GET / -> $code, want 200"; fi
	code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/stats/stream")
	if [ "$code" = 401 ]; then ok; else bad "--api-key: stats without the key -> $code, want 401"; fi
	node tests/webui/run_webui.mjs "$URL" "$SHOTS" "$N_MOE" webui-test-key >"$TMP/browser2.log" 2>&1
	rc=$?
	cat "$TMP/browser2.log"
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$TMP/browser2.log" | tail -n 1)
	if [ -n "$line" ]; then
		PASS=$((PASS + $(echo "$line" | awk '{print $1}')))
		FAIL=$((FAIL + $(echo "$line" | awk '{print $3}')))
	fi
	if [ $rc -ne 0 ] && [ -z "$line" ]; then bad "browser key tests crashed (exit $rc)"; fi
	stop_server
else
	bad "serve --api-key did not start: $(head -c 300 "$TMP/serve3.log")"
fi

# ---- --no-webui: no page, the API (and the stats stream) stay ----
if start_server "$TMP/serve2.log" --no-webui; then
	code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/")
	if [ "$code" = 404 ]; then ok; else bad "--no-webui: GET / -> $code, want 404"; fi
	code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/assets/app.js")
	if [ "$code" = 404 ]; then ok; else bad "--no-webui: asset -> $code, want 404"; fi
	code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/models")
	if [ "$code" = 200 ]; then ok; else bad "--no-webui: /v1/models -> $code"; fi
	# an open stats stream (it never ends by itself) does not hold up SIGTERM
	curl -s -N -m 20 "$URL/v1/stats/stream" >"$TMP/stats2" 2>/dev/null &
	CURL=$!
	# the stream is open once its first event arrived (not a fixed second: under ASan on a
	# loaded machine the first event may take longer)
	i=0
	while ! grep -q '^data: {' "$TMP/stats2" 2>/dev/null && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
	t0=$(date +%s)
	kill "$PID"
	wait "$PID"
	rc=$?
	t1=$(date +%s)
	PID=
	# a stream that held the stop up would last the 5 s grace period: 4 s tells it apart
	# with room for a sanitizer build's exit on a loaded machine (was 2 s)
	if [ "$rc" -eq 0 ] && [ $((t1 - t0)) -le 4 ]; then ok; else bad "SIGTERM with a stats stream open: exit $rc after $((t1 - t0)) s"; fi
	if grep -q 'Sanitizer' "$TMP/serve2.log"; then bad "sanitizer report: $(grep -A5 Sanitizer "$TMP/serve2.log" | head -c 600)"; else ok; fi
	wait "$CURL"
	expect_grep "$TMP/stats2" '^data: {' "the stream sent events before the stop"
else
	bad "serve --no-webui did not start: $(head -c 300 "$TMP/serve2.log")"
fi
finish
