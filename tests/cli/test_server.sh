#!/bin/sh
# test_server.sh - `particle serve`: flags and usage errors here; then the node suites in
# tests/server/ (official openai npm client, hostile requests over raw sockets, a short
# soak), each starting its own server on an ephemeral 127.0.0.1 port against a tiny
# synthetic model.  SERVER_SUITES overrides the list (e.g. "test_api").
. "$(dirname "$0")/lib.sh"

# ---- help and usage errors (no model needed) ----
expect_exit 0 "serve --help" -- "$PARTICLE" serve --help
for f in --model --host --port --api-key --api-key-file --alias --parallel --cache-prompts --max-queue --timeout \
	--max-body --max-connections --cors --chat-template-file --reasoning-format --no-metrics \
	--no-webui --log-requests --quiet --ctx-size --threads --memory --expert-slots --io --cache-policy \
	--kv-type --batch --checkpoints --no-lock --n-predict --temp --top-k --top-p --min-p --repeat-penalty \
	--repeat-last-n --seed PARTICLE_MODEL; do
	expect_grep "$TMP/out" -- "$f" "serve --help documents $f"
done
expect_exit 0 "particle --help" -- "$PARTICLE" --help
expect_grep "$TMP/out" "serve " "particle --help lists serve"

unset PARTICLE_MODEL
expect_exit 2 "serve without a model" -- "$PARTICLE" serve
expect_one_error_line "serve without a model"
M="$TMP/tiny.gguf"
if ! "$PARTICLE" mkmodel --arch qwen3moe --preset tiny --quant f32 -o "$M" >/dev/null 2>"$TMP/mk.err"; then
	bad "mkmodel failed: $(head -c 300 "$TMP/mk.err")"
	finish
	exit 1
fi
for bad_args in "--port 70000" "--port x" "--parallel 0" "--parallel 17" "--cache-prompts 65" "--max-body 1" "--timeout 0" "--cors" \
	"--reasoning-format weird" "--temp -1" "--bogus 1" "--api-key ''" "--io fast"; do
	# shellcheck disable=SC2086
	eval "set -- $bad_args"
	expect_exit 2 "invalid flags: $bad_args" -- "$PARTICLE" serve -m "$M" --no-lock "$@"
	expect_one_error_line "invalid flags: $bad_args"
done
expect_exit 2 "--api-key-file that is empty" -- "$PARTICLE" serve -m "$M" --api-key-file /dev/null
expect_exit 1 "missing model file" -- "$PARTICLE" serve -m "$TMP/nope.gguf"
expect_one_error_line "missing model file"

# ---- llama.cpp spellings of run/bench flags (aliases) ----
expect_exit 0 "run with llama.cpp flags" -- "$PARTICLE" run -m "$M" --no-lock --quiet -p "The sky" --temp 0 \
	--n-predict 6 --ctx-size 128 --repeat-penalty 1.1 -s 5 -b 32 -t 1
cp "$TMP/out" "$TMP/alias.out"
expect_exit 0 "run with particle flags" -- "$PARTICLE" run -m "$M" --no-lock --quiet --prompt "The sky" \
	--temperature 0 --max-new 6 --max-context 128 --repetition-penalty 1.1 --seed 5 --batch 32 --threads 1
if cmp -s "$TMP/out" "$TMP/alias.out" && [ -s "$TMP/out" ]; then ok; else bad "aliases give another answer"; fi
expect_exit 0 "run --help" -- "$PARTICLE" run --help
for f in "-p" "--n-predict" "--ctx-size" "--temp" "--repeat-penalty" "--batch-size"; do
	expect_grep "$TMP/out" -- "$f" "run --help lists the alias $f"
done
expect_exit 0 "bench with llama-bench flags" -- "$PARTICLE" bench -m "$M" --no-lock -p 8 -n 2 -t 1 -b 8 --disk-bw 1000 --json
expect_grep "$TMP/out" '"prompt_tokens": *8' "bench -p sets the prompt length"

# ---- the node suites ----
NODE_MODULES=tools/oracle/node_modules
if [ ! -d "$NODE_MODULES/openai" ] || ! command -v node >/dev/null 2>&1; then
	bad "node or the openai npm package is missing (make oracle)"
	finish
	exit 1
fi
export PARTICLE PT_MODEL="$M" PT_TMP="$TMP"
# The sanitizer build runs the same suites with a shorter soak (make test runs both builds).
case "$PARTICLE" in *asan*|*tsan*) : "${SOAK_SECONDS:=8}" ;; esac
[ -n "${SOAK_SECONDS:-}" ] && export SOAK_SECONDS
for s in ${SERVER_SUITES:-test_api test_constrained test_parallel test_hostile test_soak test_signals test_demo_model test_gptoss test_qwen35}; do
	f="tests/server/$s.mjs"
	[ -f "$f" ] || { bad "no suite $f"; continue; }
	timeout 600 node --test --test-concurrency=1 --test-reporter=tap "$f" >"$TMP/$s.tap" 2>&1
	rc=$?
	p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$TMP/$s.tap" | tail -n 1)
	f_=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$TMP/$s.tap" | tail -n 1)
	PASS=$((PASS + ${p:-0}))
	FAIL=$((FAIL + ${f_:-0}))
	if [ "${f_:-1}" -ne 0 ] || [ $rc -ne 0 ]; then
		[ "${f_:-0}" -eq 0 ] && FAIL=$((FAIL + 1))
		echo "FAIL: $s (exit $rc):" >&2
		grep -B2 -A30 '^not ok' "$TMP/$s.tap" | head -120 >&2
		tail -n 20 "$TMP/$s.tap" >&2
	fi
done
finish
