#!/bin/sh
# test_run.sh - `particle run`: flags and their errors, raw and chat one-shot runs, stop
# strings (one split across tokens: run_stop.py), max-new, EOS, seed determinism across
# thread counts, Ctrl-C in a one-shot run (exit 130 after the stats), the memory check,
# the single-process lock, and an interactive session through a pseudo-terminal
# (run_pty.py: two turns, /new, Ctrl-C mid-reply, a further turn equal to a fresh run).
. "$(dirname "$0")/lib.sh"
DIR=$(dirname "$0")

# ---- help and usage errors (no model needed) ----
expect_exit 0 "run --help" -- "$PARTICLE" run --help
for f in --model --prompt --messages --template --raw --max-new --max-context --temperature \
	--top-k --top-p --min-p --repetition-penalty --repeat-last-n --seed --stop --threads \
	--memory --expert-slots --io --cache-policy --kv-type --batch --no-lock --quiet \
	--verbose --stats-json --repack --no-repack PARTICLE_MODEL; do
	expect_grep "$TMP/out" "$f" "run --help documents $f"
done
expect_exit 0 "particle --help" -- "$PARTICLE" --help
expect_grep "$TMP/out" "run " "particle --help lists run"

M="$TMP/q.gguf"
if ! "$PARTICLE" mkmodel --arch qwen3moe --preset tiny --quant f32 -o "$M" >/dev/null 2>"$TMP/mk.err"; then
	bad "mkmodel failed: $(head -c 300 "$TMP/mk.err")"
	finish
	exit 1
fi

unset PARTICLE_MODEL
expect_exit 2 "no model" -- "$PARTICLE" run --prompt hi
expect_one_error_line "no model"
expect_grep "$TMP/err" "PARTICLE_MODEL" "no model names PARTICLE_MODEL"
expect_exit 1 "missing model file" -- "$PARTICLE" run -m "$TMP/nope.gguf" --prompt hi
expect_one_error_line "missing model file"
expect_grep "$TMP/err" "nope.gguf" "missing model named"
for bad_args in "--bogus 1" "--temperature abc" "--temperature -1" "--top-p 2" "--min-p 1.5" \
	"--top-k -3" "-n x" "-c 0" "--threads 9999" "--memory lots" "--kv-type q8" "--io fast" \
	"--cache-policy fifo" "--stop" "--repetition-penalty 0" "--raw"; do
	# shellcheck disable=SC2086
	expect_exit 2 "invalid flags: $bad_args" -- "$PARTICLE" run -m "$M" --prompt hi $bad_args
	expect_one_error_line "invalid flags: $bad_args"
done
expect_exit 2 "--stop ''" -- "$PARTICLE" run -m "$M" --prompt hi --stop ""
expect_exit 2 "--prompt and --messages" -- "$PARTICLE" run -m "$M" --prompt hi --messages x.json
expect_exit 2 "no prompt, stdin not a terminal" -- "$PARTICLE" run -m "$M" </dev/null
expect_one_error_line "no prompt, stdin not a terminal"
# the attention numerics switch (src/model/forward.h): a bad value is bad input; ggml's
# one-row numerics and the default both answer
expect_exit 2 "PARTICLE_ATTN=f16" -- env PARTICLE_ATTN=f16 "$PARTICLE" run -m "$M" --prompt hi -n 2
expect_one_error_line "PARTICLE_ATTN=f16"
expect_grep "$TMP/err" "expected f32 or ggml" "PARTICLE_ATTN=f16 names the values"
for v in ggml f32; do
	expect_exit 0 "PARTICLE_ATTN=$v" -- env PARTICLE_ATTN=$v "$PARTICLE" run -m "$M" --prompt hi -n 4 --temperature 0
done

# ---- messages errors ----
printf '[{"role":"user","content":"hi"' >"$TMP/bad.json"
expect_exit 2 "malformed messages JSON" -- "$PARTICLE" run -m "$M" --messages "$TMP/bad.json"
expect_one_error_line "malformed messages JSON"
expect_grep "$TMP/err" "offset" "malformed JSON names the offset"
printf '[{"role":"wizard","content":"hi"}]' >"$TMP/role.json"
expect_exit 2 "unknown role" -- "$PARTICLE" run -m "$M" --messages "$TMP/role.json"
expect_one_error_line "unknown role"
expect_grep "$TMP/err" "messages\[0\]: unknown role 'wizard'" "unknown role named"
printf '{"messages":[{"role":"user","content":42}]}' >"$TMP/shape.json"
expect_exit 2 "content of the wrong type" -- "$PARTICLE" run -m "$M" --messages "$TMP/shape.json"
printf '{"msgs":[]}' >"$TMP/nomsg.json"
expect_exit 2 "object without messages" -- "$PARTICLE" run -m "$M" --messages "$TMP/nomsg.json"
expect_exit 2 "missing messages file" -- "$PARTICLE" run -m "$M" --messages "$TMP/none.json"
printf '[]' >"$TMP/empty.json"
expect_exit 2 "empty messages array" -- "$PARTICLE" run -m "$M" --messages "$TMP/empty.json"
expect_grep "$TMP/err" "empty.json: no messages" "empty messages named"
printf '[{"role":"user","content":"\377"}]' >"$TMP/utf8.json"
expect_exit 2 "invalid UTF-8 in messages" -- "$PARTICLE" run -m "$M" --messages "$TMP/utf8.json"
expect_grep "$TMP/err" "invalid UTF-8 in .*utf8.json at offset 27" "invalid UTF-8 offset named"
printf '[{"role":"assistant","content":null,"tool_calls":[{"function":{}}]}]' >"$TMP/tc.json"
expect_exit 2 "tool call without a name" -- "$PARTICLE" run -m "$M" --messages "$TMP/tc.json"
expect_grep "$TMP/err" "messages\[0\]: tool call function.name must be a string" "tool call shape named"
expect_exit 2 "messages path is a directory" -- "$PARTICLE" run -m "$M" --messages "$TMP"
expect_one_error_line "messages path is a directory"
printf '{%% for m in messages %%}{{ m.content }}{%% endfor' >"$TMP/broken.jinja"
printf '[{"role":"user","content":"hi"}]' >"$TMP/hi.json"
expect_exit 2 "broken --template" -- "$PARTICLE" run -m "$M" --messages "$TMP/hi.json" --template "$TMP/broken.jinja"

# ---- one-shot runs ----
G="--temperature 0 --quiet"
# shellcheck disable=SC2086
expect_exit 0 "raw completion" -- "$PARTICLE" run -m "$M" --prompt "The quick brown fox" -n 16 $G --stats-json "$TMP/s.json"
cp "$TMP/out" "$TMP/raw.out"
python3 - "$TMP/s.json" 16 max-new <<'PY' && ok || bad "raw completion stats"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["generated_tokens"] == int(sys.argv[2]) == len(d["ids"]), d
assert d["stop_reason"] == sys.argv[3], d["stop_reason"]
assert d["prompt_tokens"] == len(d["prompt_ids"]) > 0
for k in ("prefill_tps", "ttft_s", "decode_tps", "peak_rss_bytes", "budget_bytes",
          "expert_hit_rate", "read_bytes", "read_mib_s", "layers", "text"):
    assert k in d, k
PY
PARTICLE_MODEL="$M" "$PARTICLE" run --prompt "The quick brown fox" -n 16 --temperature 0 --quiet >"$TMP/env.out" 2>"$TMP/err"
if cmp -s "$TMP/env.out" "$TMP/raw.out"; then ok; else bad "PARTICLE_MODEL: different output"; fi
printf 'The quick brown fox' | "$PARTICLE" run -m "$M" --prompt - -n 16 --temperature 0 --quiet >"$TMP/stdin.out" 2>"$TMP/err"
if cmp -s "$TMP/stdin.out" "$TMP/raw.out"; then ok; else bad "--prompt -: different output"; fi
# footer on stderr unless --quiet
"$PARTICLE" run -m "$M" --prompt "The quick brown fox" -n 8 --temperature 0 >"$TMP/out" 2>"$TMP/err"
for k in "prompt [0-9]* tokens" "prefill" "first token" "generated 8 tokens" "decode" \
	"stop: max-new" "peak RSS" "budget" "experts mapped"; do
	expect_grep "$TMP/err" "$k" "stats footer (model fits: mapped) has '$k'"
done
"$PARTICLE" run -m "$M" --prompt "The quick brown fox" -n 8 --temperature 0 --io direct >"$TMP/out" 2>"$TMP/err"
for k in "generated 8 tokens" "peak RSS" "budget" "expert hit rate" "MiB/s"; do
	expect_grep "$TMP/err" "$k" "stats footer (--io direct) has '$k'"
done
# chat from a file and from stdin
expect_exit 0 "chat" -- "$PARTICLE" run -m "$M" --messages "$TMP/hi.json" -n 16 --temperature 0 --quiet
cp "$TMP/out" "$TMP/chat.out"
"$PARTICLE" run -m "$M" --messages - -n 16 --temperature 0 --quiet <"$TMP/hi.json" >"$TMP/out" 2>"$TMP/err"
if cmp -s "$TMP/out" "$TMP/chat.out"; then ok; else bad "--messages -: different output"; fi
printf '{{ messages[0].content }} says:' >"$TMP/t.jinja"
expect_exit 0 "--template override" -- "$PARTICLE" run -m "$M" --messages "$TMP/hi.json" --template "$TMP/t.jinja" -n 4 --temperature 0 --quiet --stats-json "$TMP/t.json"
python3 - "$TMP/t.json" "$PARTICLE" "$M" <<'PY' && ok || bad "--template prompt ids"
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
want = json.loads(subprocess.run([sys.argv[2], "tokenize", "-m", sys.argv[3], "hi says:"],
                                 capture_output=True, text=True, check=True).stdout)
assert d["prompt_ids"] == want, (d["prompt_ids"], want)
PY

# ---- stop strings ----
if out=$(python3 "$DIR/run_stop.py" "$PARTICLE" "$M" "The quick brown fox" 2>&1); then ok; else bad "stop strings: $out"; fi
echo "$out"

# ---- max-new and EOS ----
# (sampled: greedy decoding of the tiny model settles into a loop without EOS)
"$PARTICLE" run -m "$M" --prompt "The quick brown fox" -n 0 -c 2048 --temperature 0.7 --seed 3 --quiet --stats-json "$TMP/eos.json" >"$TMP/eos.out" 2>"$TMP/err"
python3 - "$TMP/eos.json" "$PARTICLE" "$M" <<'PY' && ok || bad "EOS stops generation"
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
assert d["stop_reason"] == "eos", d["stop_reason"]
last = d["ids"][-1]
# the end-of-generation token is the last id and its text is not printed
txt = subprocess.run([sys.argv[2], "detokenize", "-m", sys.argv[3], str(last)],
                     capture_output=True, text=True).stdout
assert txt and txt not in d["text"], (txt, d["text"][-40:])
PY
# shellcheck disable=SC2086
"$PARTICLE" run -m "$M" --prompt "Once upon a time" -n 5 $G --stats-json "$TMP/n5.json" >/dev/null 2>&1
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['generated_tokens']==5 and d['stop_reason']=='max-new'" "$TMP/n5.json" && ok || bad "max-new 5"
"$PARTICLE" run -m "$M" --prompt "The quick brown fox" -n 0 -c 12 --temperature 0 --quiet --stats-json "$TMP/ctx.json" >/dev/null 2>&1
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['stop_reason']=='context' and d['prompt_tokens']+d['generated_tokens']==13, d" "$TMP/ctx.json" && ok || bad "context end stops"

# ---- seed determinism ----
S="--prompt Hello -n 48 --temperature 0.9 --top-k 0 --top-p 1 --quiet"
# shellcheck disable=SC2086
"$PARTICLE" run -m "$M" $S --seed 7 -t 1 >"$TMP/a1" 2>/dev/null
# shellcheck disable=SC2086
"$PARTICLE" run -m "$M" $S --seed 7 -t 1 >"$TMP/a2" 2>/dev/null
# shellcheck disable=SC2086
"$PARTICLE" run -m "$M" $S --seed 7 -t 2 --batch 3 >"$TMP/a3" 2>/dev/null
# shellcheck disable=SC2086
"$PARTICLE" run -m "$M" $S --seed 7 -t 2 --expert-slots 4 >"$TMP/a4" 2>/dev/null
# shellcheck disable=SC2086
"$PARTICLE" run -m "$M" $S --seed 7 --io mmap >"$TMP/a5" 2>/dev/null
# shellcheck disable=SC2086
"$PARTICLE" run -m "$M" $S --seed 8 -t 1 >"$TMP/b1" 2>/dev/null
if [ -s "$TMP/a1" ] && cmp -s "$TMP/a1" "$TMP/a2"; then ok; else bad "same seed, same text"; fi
if cmp -s "$TMP/a1" "$TMP/a3"; then ok; else bad "same seed, 1 vs 2 threads: different text"; fi
if cmp -s "$TMP/a1" "$TMP/a4"; then ok; else bad "same seed, 4 expert slots (top-k) vs all: different text"; fi
if cmp -s "$TMP/a1" "$TMP/a5"; then ok; else bad "same seed, --io mmap: different text"; fi
if ! cmp -s "$TMP/a1" "$TMP/b1"; then ok; else bad "seeds 7 and 8 gave the same 48 sampled tokens"; fi

# ---- Ctrl-C in a one-shot run: stops within a token, stats printed, exit 130 ----
# greedy: the tiny model loops without EOS, so the run lasts until the interrupt
"$PARTICLE" run -m "$M" --prompt "The quick brown fox" -n 0 -c 4096 --temperature 0 \
	>"$TMP/int.out" 2>"$TMP/int.err" &
pid=$!
i=0
while [ ! -s "$TMP/int.out" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
kill -INT $pid
wait $pid
rc=$?
if [ $rc -eq 130 ]; then ok; else bad "Ctrl-C: exit $rc, want 130"; fi
expect_grep "$TMP/int.err" "stop: cancelled" "Ctrl-C: stats printed with stop reason"

# ---- memory check before loading ----
"$PARTICLE" run -m "$M" --prompt hi -n 1 --memory 1000T >"$TMP/out" 2>"$TMP/err"
rc=$?
if { [ $rc -eq 2 ] && grep -q "cgroup memory limit" "$TMP/err"; } ||
	grep -q "warning: --memory 1024000.00 GiB is more than the machine can give now" "$TMP/err"; then ok
else bad "--memory above the machine: exit $rc, $(head -c 300 "$TMP/err")"; fi

# ---- single-process lock: the second process is refused (exit 1, names the PID) ----
mkfifo "$TMP/fifo"
mkdir "$TMP/locks"
export XDG_RUNTIME_DIR="$TMP/locks"   # PID files of this test only (the lock is on the model)
"$PARTICLE" run -m "$M" --messages - -n 1 --quiet <"$TMP/fifo" >/dev/null 2>&1 &
holder=$!
exec 3>"$TMP/fifo"   # the holder starts, loads the model and waits for its messages
i=0
until cat "$TMP"/locks/particle/*.pid 2>/dev/null | grep -qx "$holder" || [ $i -ge 200 ]; do
	sleep 0.05; i=$((i + 1))
done
"$PARTICLE" run -m "$M" --prompt hi -n 1 --quiet >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -eq 1 ]; then ok; else bad "second process: exit $rc, want 1"; fi
expect_one_error_line "second process"
expect_grep "$TMP/err" "$holder" "lock refusal names the holder's PID"
expect_exit 0 "--no-lock overrides" -- "$PARTICLE" run -m "$M" --prompt hi -n 1 --quiet --no-lock
cat "$TMP/hi.json" >&3
exec 3>&-
wait $holder
if [ $? -eq 0 ]; then ok; else bad "lock holder failed"; fi
expect_exit 0 "lock released at exit" -- "$PARTICLE" run -m "$M" --prompt hi -n 1 --quiet

# ---- interactive session through a pseudo-terminal ----
B="$TMP/b.gguf"
if "$PARTICLE" mkmodel --arch bailingmoe2 --preset tiny --quant f32 -o "$B" >/dev/null 2>&1 &&
	out=$(python3 "$DIR/run_pty.py" "$PARTICLE" "$B" "$TMP" 2>&1); then ok; else bad "interactive session: $out"; fi
echo "$out"
# the same session on qwen35moe: linear-attention state restored from checkpoints (issue 18)
# --repack (issue 21): a small-preset Q4_K_M model (256-wide rows) has matrices to repack;
# the tiny F32 one has none and says so
R="$TMP/repack.gguf"
if "$PARTICLE" mkmodel --arch qwen3moe --preset small --layers 1 --quant q4_k_m -o "$R" \
	>/dev/null 2>&1; then
	expect_exit 0 "run --repack" -- "$PARTICLE" run -m "$R" --prompt hi -n 4 --repack --verbose
	if grep -Eq "particle: repack: [1-9][0-9]* matrices .*experts included" "$TMP/err" ||
		grep -q "particle: repack: skipped (no interleaved kernel" "$TMP/err"; then ok
	else bad "run --repack --verbose: no repack line: $(head -c 600 "$TMP/err")"; fi
	[ -s "$TMP/out" ] && ok || bad "run --repack printed nothing"
	cp "$TMP/out" "$TMP/repack_mapped.txt"
	# the defaults (issue 21 round 16): a one-shot run keeps the weights as stored (the quick
	# start; the last of --no-repack / --repack counts); serve (and interactive chat) repack a
	# model that runs from memory, and the resident weights of one whose experts stream
	for flags in "" "--no-repack" "--repack --no-repack"; do
		expect_exit 0 "run $flags" -- "$PARTICLE" run -m "$R" --prompt hi -n 4 --verbose $flags
		grep -q "particle: repack:" "$TMP/err" &&
			bad "run $flags: repacked: $(grep 'repack:' "$TMP/err")" || ok
	done
	expect_exit 0 "run --no-repack --repack" -- "$PARTICLE" run -m "$R" --prompt hi -n 4 \
		--verbose --no-repack --repack
	expect_grep "$TMP/err" "particle: repack: [1-9][0-9]* matrices\|repack: skipped" \
		"the last of --no-repack / --repack counts"
	serve_log() { # serve_log FLAGS...: serve's stderr until it listens, in $TMP/serve.err
		# emptied here, not only by the background job's redirection: the loop below must
		# not find the previous serve's "http://" before the new job has truncated the file
		: >"$TMP/serve.out"
		: >"$TMP/serve.err"
		"$PARTICLE" serve -m "$R" --port 0 --no-lock --verbose "$@" >"$TMP/serve.out" \
			2>"$TMP/serve.err" &
		spid=$!
		i=0
		while [ $i -lt 600 ] && ! grep -q "http://" "$TMP/serve.out" &&
			kill -0 $spid 2>/dev/null; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -TERM $spid 2>/dev/null
		wait $spid
	}
	serve_log
	expect_grep "$TMP/serve.err" "particle: repack: [1-9][0-9]* matrices .*experts included\|repack: skipped" \
		"serve repacks a model in RAM by default"
	serve_log --io direct
	expect_grep "$TMP/serve.err" "particle: repack: routed experts stream as stored" \
		"serve with streamed experts: the experts as stored"
	expect_grep "$TMP/serve.err" "stream as stored, computed in the interleaved numerics\|repack: skipped" \
		"serve with streamed experts: computed in the copies' numerics (X16_ROWS)"
	expect_grep "$TMP/serve.err" "particle: repack: [1-9][0-9]* matrices\|repack: skipped" \
		"serve with streamed experts: the resident weights copied by default"
	grep -q "experts included" "$TMP/serve.err" && bad "serve --io direct copied the experts" || ok
	# the copies made while experts stream: the rest of the file is read without read-ahead
	# (issue 21 round 28); a model in RAM keeps its read-ahead
	expect_grep "$TMP/serve.err" "matrices .*; the rest of the file read without read-ahead\|repack: skipped" \
		"serve with streamed experts: the mapping advised MADV_RANDOM"
	# ...but for the resident matrices the copy left in it (the F32 routers at least), read
	# whole every token: their read-ahead back (issue 21 round 32)
	expect_grep "$TMP/serve.err" "without read-ahead, except the [0-9.]* [KMG]*i*B of resident matrices left in it\|repack: skipped" \
		"serve with streamed experts: the matrices left mapped read ahead"
	serve_log
	grep -q "without read-ahead" "$TMP/serve.err" && bad "serve in RAM: read-ahead off" || ok
	serve_log --no-repack
	grep -q "particle: repack:" "$TMP/serve.err" && bad "serve --no-repack repacked" || ok
	# an interleaved expert pack (particle pack --repack): streamed --repack runs read it and
	# answer as the in-RAM copy does; runs without --repack leave it (named: refused)
	expect_exit 0 "pack --repack" -- "$PARTICLE" pack "$R" --repack
	expect_grep "$TMP/out" "expert tensors interleaved" "pack --repack summary"
	expect_exit 0 "verify an interleaved pack" -- "$PARTICLE" pack "$R" --verify
	expect_grep "$TMP/out" "interleaved" "verify names the layout"
	expect_exit 2 "pack --repack --verify" -- "$PARTICLE" pack "$R" --repack --verify
	expect_one_error_line "pack --repack --verify"
	expect_exit 0 "run --repack, interleaved pack" -- "$PARTICLE" run -m "$R" --prompt hi -n 4 \
		--repack --io direct --verbose
	if grep -q "routed experts read interleaved from the expert pack" "$TMP/err"; then
		cmp -s "$TMP/out" "$TMP/repack_mapped.txt" && ok ||
			bad "streamed from the interleaved pack: text differs from the in-RAM copy's"
	elif grep -q "ignoring expert pack.*no interleaved\|repack: skipped" "$TMP/err"; then ok
	else bad "run --repack --io direct: pack neither used nor refused: $(head -c 600 "$TMP/err")"; fi
	expect_exit 0 "run, interleaved pack left" -- "$PARTICLE" run -m "$R" --prompt hi -n 4 \
		--io direct --verbose
	expect_grep "$TMP/err" "ignoring expert pack .*run with --repack" "pack left without --repack"
	expect_grep "$TMP/err" "particle: experts: .* of slots faulted in at open in [0-9.]* s" \
		"streamed experts: the slots faulted in at open"
	expect_exit 0 "run, slots not faulted in" -- env PARTICLE_POPULATE=0 "$PARTICLE" run \
		-m "$R" --prompt hi -n 4 --io direct --verbose
	if grep -q "faulted in at open" "$TMP/err"; then bad "PARTICLE_POPULATE=0 still faults the slots in"
	else ok; fi
	serve_log --io direct # serve's default uses an interleaved pack as --repack does
	expect_grep "$TMP/serve.err" "routed experts read interleaved from the expert pack\|ignoring expert pack.*no interleaved" \
		"serve with streamed experts uses the interleaved pack by default"
	expect_exit 2 "eval --pack interleaved, no --repack" -- "$PARTICLE" eval -m "$R" --prompt hi \
		--pack "$R.xpack"
	expect_one_error_line "eval --pack interleaved, no --repack"
	rm -f "$R.xpack" "$R.xpack.json"
else
	bad "mkmodel small q4_k_m failed"
fi
expect_exit 2 "--repack with --gpu" -- "$PARTICLE" run -m "$M" --prompt hi --repack --gpu
expect_one_error_line "--repack with --gpu"
expect_grep "$TMP/err" "cannot be combined" "--repack --gpu says why"
expect_exit 0 "run --repack, nothing to repack" -- "$PARTICLE" run -m "$M" --prompt hi -n 2 \
	--repack --verbose
expect_grep "$TMP/err" "particle: repack: 0 matrices\|repack: skipped" "repack of an F32 model"

Q="$TMP/q35.gguf"
if "$PARTICLE" mkmodel --arch qwen35moe --preset tiny --quant q8_0 -o "$Q" >/dev/null 2>&1 &&
	out=$(python3 "$DIR/run_pty.py" "$PARTICLE" "$Q" "$TMP" 2>&1); then ok; else bad "qwen35moe interactive session: $out"; fi
echo "$out" | sed 's/^/qwen35moe: /'
finish
