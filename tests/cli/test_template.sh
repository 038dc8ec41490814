#!/bin/sh
# test_template.sh - `particle template` flags, inputs and error lines.
. tests/cli/lib.sh
T=tests/fixtures/conversations
cat >"$TMP/t.jinja" <<'TEMPLATE'
{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{% if add_generation_prompt %}<gen>{% endif %}{{ tools|length if tools is defined else "-" }}{{ eos_token }}{{ extra }}
TEMPLATE

expect_exit 0 "help" -- "$PARTICLE" template --help
expect_grep "$TMP/out" "--no-generation-prompt" "help lists flags"
expect_grep "$TMP/out" "--var NAME=JSON" "help lists --var"

expect_exit 0 "render" -- "$PARTICLE" template --template "$TMP/t.jinja" --messages $T/02-no-system.json --bos-token '<s>' --eos-token '</s>'
printf '<s>[user:Tell me a joke.]<gen>-</s>' >"$TMP/want"
if cmp -s "$TMP/out" "$TMP/want"; then ok; else bad "render output: $(cat "$TMP/out")"; fi

expect_exit 0 "no generation prompt, tools, var" -- "$PARTICLE" template --template "$TMP/t.jinja" --messages $T/04-tools-defined.json --no-generation-prompt --var 'extra="!"'
printf '[system:You can call tools.][user:What'"'"'s the weather in Paris?]2!' >"$TMP/want"
if cmp -s "$TMP/out" "$TMP/want"; then ok; else bad "tools/var output: $(cat "$TMP/out")"; fi

# --no-generation-prompt passes add_generation_prompt as an explicit false (HF semantics):
# a template that defaults an undefined variable to true must still see false.
printf '{%%- if add_generation_prompt is defined %%}D{{ add_generation_prompt }}{%%- else %%}U{%%- endif %%}' >"$TMP/agp.jinja"
expect_exit 0 "explicit add_generation_prompt=false" -- "$PARTICLE" template --template "$TMP/agp.jinja" --messages $T/02-no-system.json --no-generation-prompt
printf 'DFalse' >"$TMP/want"
if cmp -s "$TMP/out" "$TMP/want"; then ok; else bad "explicit false: $(cat "$TMP/out")"; fi
expect_exit 0 "explicit add_generation_prompt=true" -- "$PARTICLE" template --template "$TMP/agp.jinja" --messages $T/02-no-system.json
printf 'DTrue' >"$TMP/want"
if cmp -s "$TMP/out" "$TMP/want"; then ok; else bad "explicit true: $(cat "$TMP/out")"; fi

printf '[{"type":"function","function":{"name":"f"}}]' >"$TMP/tools.json"
expect_exit 0 "--tools overrides" -- "$PARTICLE" template --template "$TMP/t.jinja" --messages $T/04-tools-defined.json --tools "$TMP/tools.json"
expect_grep "$TMP/out" "<gen>1" "--tools file used"
printf '[]' >"$TMP/none.json"
expect_exit 0 "empty tools leave tools undefined" -- "$PARTICLE" template --template "$TMP/t.jinja" --messages $T/04-tools-defined.json --tools "$TMP/none.json"
expect_grep "$TMP/out" "<gen>-" "empty tools undefined"

# bad input: exit 2, one error line naming what and where
printf '[{"role":"user","content":"hi"},' >"$TMP/trunc.json"
expect_exit 2 "malformed JSON" -- "$PARTICLE" template --template "$TMP/t.jinja" --messages "$TMP/trunc.json"
expect_one_error_line "malformed JSON"
expect_grep "$TMP/err" "malformed JSON in .*trunc.json at offset" "malformed JSON names file and offset"
printf '[{"role":"wizard","content":"hi"}]' >"$TMP/role.json"
expect_exit 2 "unknown role" -- "$PARTICLE" template --template "$TMP/t.jinja" --messages "$TMP/role.json"
expect_one_error_line "unknown role"
expect_grep "$TMP/err" "messages\[0\]: unknown role 'wizard'" "unknown role named"
printf '[{"role":"user","content":5}]' >"$TMP/shape.json"
expect_exit 2 "content shape" -- "$PARTICLE" template --template "$TMP/t.jinja" --messages "$TMP/shape.json"
expect_grep "$TMP/err" "messages\[0\]: \"content\" must be" "content shape named"
printf '[{"role":"user","content":"a"},{"role":"assistant","tool_calls":[{"function":{"name":1}}]}]' >"$TMP/tc.json"
expect_exit 2 "tool call shape" -- "$PARTICLE" template --template "$TMP/t.jinja" --messages "$TMP/tc.json"
expect_grep "$TMP/err" "messages\[1\]: tool call function.name" "tool call shape named"
printf '{"msgs":[]}' >"$TMP/obj.json"
expect_exit 2 "object without messages" -- "$PARTICLE" template --template "$TMP/t.jinja" --messages "$TMP/obj.json"
printf '[{"role":"user","content":"\377"}]' >"$TMP/utf8.json"
expect_exit 2 "invalid UTF-8" -- "$PARTICLE" template --template "$TMP/t.jinja" --messages "$TMP/utf8.json"
expect_one_error_line "invalid UTF-8"
expect_exit 2 "bad --var" -- "$PARTICLE" template --template "$TMP/t.jinja" --messages $T/02-no-system.json --var 'x=[1,'
expect_one_error_line "bad --var"
expect_exit 2 "unknown flag" -- "$PARTICLE" template --template "$TMP/t.jinja" --messages $T/02-no-system.json --frobnicate
expect_one_error_line "unknown flag"
expect_exit 2 "missing --messages" -- "$PARTICLE" template --template "$TMP/t.jinja"
expect_exit 2 "missing template" -- "$PARTICLE" template --messages $T/02-no-system.json
expect_exit 2 "missing file" -- "$PARTICLE" template --template "$TMP/nope.jinja" --messages $T/02-no-system.json

# template errors: exit 2 with line and column
printf 'ok\n{%% if x %%}\n{{ 1 + }}\n' >"$TMP/bad.jinja"
expect_exit 2 "syntax error" -- "$PARTICLE" template --template "$TMP/bad.jinja" --messages $T/02-no-system.json
expect_one_error_line "syntax error"
expect_grep "$TMP/err" "at line 3, column 8" "syntax error position"
printf '{{ raise_exception("Conversation roles must alternate") }}' >"$TMP/raise.jinja"
expect_exit 2 "raise_exception" -- "$PARTICLE" template --template "$TMP/raise.jinja" --messages $T/02-no-system.json
expect_grep "$TMP/err" "raise_exception: Conversation roles must alternate at line 1" "raise_exception message"
printf '{%% for i in range(100000) %%}{%% for j in range(10) %%}{%% endfor %%}{%% endfor %%}' >"$TMP/loop.jinja"
expect_exit 2 "loop limit" -- "$PARTICLE" template --template "$TMP/loop.jinja" --messages $T/02-no-system.json
expect_grep "$TMP/err" "loop iterations" "loop limit message"
finish
