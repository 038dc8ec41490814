#!/bin/sh
# test_template.sh - every chat template in shared/fixtures/templates (and
# tests/fixtures/templates), rendered over every
# conversation in tests/fixtures/conversations with four option sets (generation prompt on /
# off, enable_thinking false / true), must come out of `particle template` byte-equal to
# Python jinja2 configured as Hugging Face transformers does (tests/oracle/jinja_render.py).
# A case where jinja2 raises must make particle fail (exit 2) and vice versa.
. tests/cli/lib.sh
python3 -c 'import jinja2' 2>/dev/null || { echo "python3 jinja2 missing"; echo "0 passed, 1 failed"; exit 1; }
# plus the real templates not in shared/ yet (tests/fixtures/templates/SOURCES.md)
templates=$(ls "$PT_SHARED"/fixtures/templates/*.jinja tests/fixtures/templates/*.jinja |
	tr '\n' ',' | sed 's/,$//')
convs=$(ls tests/fixtures/conversations/*.json | tr '\n' ',' | sed 's/,$//')
[ -n "$templates" ] && [ -n "$convs" ] || { bad "no templates or conversations found"; finish; exit; }
mkdir -p "$TMP/py"
python3 tests/oracle/jinja_render.py batch "$TMP/py" "$templates" "$convs" || bad "oracle batch failed"
ntempl=$(echo "$templates" | tr ',' '\n' | wc -l)
tab=$(printf '\t')
# check_cases CASES OUT: one `particle template` per case of CASES (the oracle batch's
# cases.tsv lines); adds to PASS/FAIL and writes "PASS FAIL rendered failed_both" to OUT
check_cases() { # (runs in a background subshell: its own counts, added up after)
	PASS=0; FAIL=0
	rendered=0
	failed_both=0
	cases=$1 w=$2 # (set -- below takes the positional parameters for each case's flags)
	while IFS="$tab" read -r case a1 a2 a3 a4 a5 a6 a7 a8 a9 a10 a11 a12; do
		[ -n "$case" ] || continue
		set -- "$a1" "$a2" "$a3" "$a4" "$a5" "$a6" "$a7" "$a8"
		[ -n "$a9" ] && set -- "$@" "$a9"
		[ -n "$a10" ] && set -- "$@" "$a10"
		[ -n "$a11" ] && set -- "$@" "$a11"
		[ -n "$a12" ] && set -- "$@" "$a12"
		"$PARTICLE" template "$@" >"$w.out" 2>"$w.err"
		rc=$?
		if [ -f "$TMP/py/$case.out" ]; then
			if [ "$rc" -ne 0 ]; then
				bad "$case: particle exit $rc, jinja2 rendered; $(head -c 200 "$w.err")"
			elif cmp -s "$TMP/py/$case.out" "$w.out"; then
				ok; rendered=$((rendered + 1))
			else
				bad "$case: output differs from jinja2 ($(cmp "$TMP/py/$case.out" "$w.out" 2>&1 | head -1))"
			fi
		elif [ -f "$TMP/py/$case.err" ]; then
			if [ "$rc" -eq 2 ] && [ "$(wc -l <"$w.err")" -eq 1 ]; then
				ok; failed_both=$((failed_both + 1))
			else
				bad "$case: jinja2 raised ($(head -c 120 "$TMP/py/$case.err")), particle exit $rc"
			fi
		else
			bad "$case: no oracle result"
		fi
	done <"$cases"
	echo "$PASS $FAIL $rendered $failed_both" >"$w"
}
# ~1400 short processes: two workers (odd and even cases), so both cores are busy
awk 'NR % 2 == 1' "$TMP/py/cases.tsv" >"$TMP/cases1"
awk 'NR % 2 == 0' "$TMP/py/cases.tsv" >"$TMP/cases2"
check_cases "$TMP/cases1" "$TMP/w1" &
check_cases "$TMP/cases2" "$TMP/w2" &
wait
rendered=0
failed_both=0
for w in "$TMP/w1" "$TMP/w2"; do
	if [ -s "$w" ]; then
		read -r p f r b <"$w"
		PASS=$((PASS + p)); FAIL=$((FAIL + f))
		rendered=$((rendered + r)); failed_both=$((failed_both + b))
	else
		bad "template worker $w ended without its tally"
	fi
done
# -m MODEL: the template and the BOS/EOS text come from the GGUF (tokens[bos/eos_token_id]).
F="$PT_SHARED/fixtures/templates"
C=tests/fixtures/conversations
for spec in "qwen3:<|endoftext|>:<|im_end|>" "gemma4:<bos>:<eos>" "llama-3.1:<|begin_of_text|>:<|eot_id|>"; do
	name=${spec%%:*}; rest=${spec#*:}; b=${rest%%:*}; e=${rest#*:}
	python3 tests/oracle/make_gguf.py "$TMP/$name.gguf" "$F/$name.jinja" 1 2 "<unk>" "$b" "$e" || bad "make_gguf $name"
	for conv in 05-tool-call-object 08-hindi; do
		python3 tests/oracle/jinja_render.py --template "$F/$name.jinja" --messages "$C/$conv.json" \
			--bos-token "$b" --eos-token "$e" >"$TMP/py.out" 2>/dev/null || bad "oracle $name $conv"
		"$PARTICLE" template -m "$TMP/$name.gguf" --messages "$C/$conv.json" >"$TMP/c.out" 2>"$TMP/c.err"
		if cmp -s "$TMP/py.out" "$TMP/c.out"; then ok; else bad "-m $name $conv differs: $(head -c 200 "$TMP/c.err")"; fi
	done
done
# mkmodel's glm4moe file: GLM-4.5's real template embedded, rendered from the GGUF as jinja2
# renders the fixture with the file's BOS/EOS text ([gMASK], <|endoftext|>)
if "$PARTICLE" mkmodel --arch glm4moe --preset tiny --layers 2 --quant q8_0 -o "$TMP/glm.gguf" \
	2>"$TMP/c.err"; then
	for conv in 05-tool-call-object 08-hindi; do
		python3 tests/oracle/jinja_render.py --template tests/fixtures/templates/glm-4.5.jinja \
			--messages "$C/$conv.json" --bos-token "[gMASK]" --eos-token "<|endoftext|>" \
			>"$TMP/py.out" 2>/dev/null || bad "oracle glm-4.5 $conv"
		"$PARTICLE" template -m "$TMP/glm.gguf" --messages "$C/$conv.json" >"$TMP/c.out" 2>"$TMP/c.err"
		if cmp -s "$TMP/py.out" "$TMP/c.out"; then ok; else bad "-m glm4moe $conv differs: $(head -c 200 "$TMP/c.err")"; fi
	done
else
	bad "mkmodel glm4moe: $(head -c 200 "$TMP/c.err")"
fi
# --template overrides the model's template but keeps its BOS/EOS text; flags override those
printf '{{ bos_token }}|{{ eos_token }}' >"$TMP/be.jinja"
"$PARTICLE" template -m "$TMP/gemma4.gguf" --template "$TMP/be.jinja" --messages $C/02-no-system.json >"$TMP/c.out" 2>&1
[ "$(cat "$TMP/c.out")" = "<bos>|<eos>" ] && ok || bad "--template with -m: $(cat "$TMP/c.out")"
"$PARTICLE" template -m "$TMP/gemma4.gguf" --template "$TMP/be.jinja" --bos-token B --messages $C/02-no-system.json >"$TMP/c.out" 2>&1
[ "$(cat "$TMP/c.out")" = "B|<eos>" ] && ok || bad "--bos-token over -m: $(cat "$TMP/c.out")"
python3 tests/oracle/make_gguf.py "$TMP/none.gguf" - 0 0 "<s>"
expect_exit 2 "model without template" -- "$PARTICLE" template -m "$TMP/none.gguf" --messages $C/02-no-system.json
expect_one_error_line "model without template"
expect_grep "$TMP/err" "no tokenizer.chat_template" "missing template named"
python3 tests/oracle/make_gguf.py "$TMP/badid.gguf" "$TMP/be.jinja" 7 0 "<s>"
expect_exit 2 "bos id out of range" -- "$PARTICLE" template -m "$TMP/badid.gguf" --messages $C/02-no-system.json
expect_grep "$TMP/err" "bos_token_id = 7 is outside" "bad bos id named"
head -c 20 "$TMP/qwen3.gguf" >"$TMP/trunc.gguf"
expect_exit 2 "truncated GGUF" -- "$PARTICLE" template -m "$TMP/trunc.gguf" --messages $C/02-no-system.json
expect_one_error_line "truncated GGUF"
echo "templates: $ntempl, byte-equal renders: $rendered, both failed: $failed_both"
[ "$rendered" -ge 400 ] || bad "too few successful renders ($rendered)"
finish
