#!/bin/sh
# test_template.sh - every chat template in shared/fixtures/templates, rendered over every
# conversation in tests/fixtures/conversations with four option sets (generation prompt on /
# off, enable_thinking false / true), must come out of `particle template` byte-equal to
# Python jinja2 configured as Hugging Face transformers does (tests/oracle/jinja_render.py).
# A case where jinja2 raises must make particle fail (exit 2) and vice versa.
. tests/cli/lib.sh
python3 -c 'import jinja2' 2>/dev/null || { echo "python3 jinja2 missing"; echo "0 passed, 1 failed"; exit 1; }
templates=$(ls "$PT_SHARED"/fixtures/templates/*.jinja | tr '\n' ',' | sed 's/,$//')
convs=$(ls tests/fixtures/conversations/*.json | tr '\n' ',' | sed 's/,$//')
[ -n "$templates" ] && [ -n "$convs" ] || { bad "no templates or conversations found"; finish; exit; }
mkdir -p "$TMP/py"
python3 tests/oracle/jinja_render.py batch "$TMP/py" "$templates" "$convs" || bad "oracle batch failed"
ntempl=$(echo "$templates" | tr ',' '\n' | wc -l)
rendered=0
failed_both=0
tab=$(printf '\t')
while IFS="$tab" read -r case a1 a2 a3 a4 a5 a6 a7 a8 a9 a10 a11 a12; do
	[ -n "$case" ] || continue
	set -- "$a1" "$a2" "$a3" "$a4" "$a5" "$a6" "$a7" "$a8"
	[ -n "$a9" ] && set -- "$@" "$a9"
	[ -n "$a10" ] && set -- "$@" "$a10"
	[ -n "$a11" ] && set -- "$@" "$a11"
	[ -n "$a12" ] && set -- "$@" "$a12"
	"$PARTICLE" template "$@" >"$TMP/c.out" 2>"$TMP/c.err"
	rc=$?
	if [ -f "$TMP/py/$case.out" ]; then
		if [ "$rc" -ne 0 ]; then
			bad "$case: particle exit $rc, jinja2 rendered; $(head -c 200 "$TMP/c.err")"
		elif cmp -s "$TMP/py/$case.out" "$TMP/c.out"; then
			ok; rendered=$((rendered + 1))
		else
			bad "$case: output differs from jinja2 ($(cmp "$TMP/py/$case.out" "$TMP/c.out" 2>&1 | head -1))"
		fi
	elif [ -f "$TMP/py/$case.err" ]; then
		if [ "$rc" -eq 2 ] && [ "$(wc -l <"$TMP/c.err")" -eq 1 ]; then
			ok; failed_both=$((failed_both + 1))
		else
			bad "$case: jinja2 raised ($(head -c 120 "$TMP/py/$case.err")), particle exit $rc"
		fi
	else
		bad "$case: no oracle result"
	fi
done <"$TMP/py/cases.tsv"
echo "templates: $ntempl, byte-equal renders: $rendered, both failed: $failed_both"
[ "$rendered" -ge 400 ] || bad "too few successful renders ($rendered)"
finish
