#!/bin/sh
# test_demo_model.sh - the committed demo model (models-demo/, trained by `make demo-model`)
# against llama.cpp (tools/oracle/oracle.mjs, node-llama-cpp):
# - the file matches its manifest's SHA-256 and `particle inspect` validates it;
# - llama.cpp and particle tokenize English, chat markup and non-ASCII text identically
#   (gpt2 model, gpt-2 pre-tokenizer), with and without special-token parsing;
# - teacher-forced logits of 160 tokens of a chat turn and prose: mean KL(llama.cpp ||
#   particle) <= 1e-2 (Q8_0 weights) and top-1 agreement >= 0.98, in one prefill chunk and
#   token by token;
# - the model does what it was trained for, at its scale: greedy, the chat answer to "What is
#   a volcano?" has the shape of its training answers ("A <noun> is ...": the words are often
#   wrong, docs/MODELS.md), and its router is more local than memoryless routing (mean
#   next-token overlap above 1.5 k/E, `particle routing`).
. "$(dirname "$0")/../cli/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ORACLE="$ROOT/tools/oracle/oracle.mjs"
M="$ROOT/models-demo/demo-qwen3moe-q8_0.gguf"
N=160

if [ ! -f "$M" ]; then
	bad "missing $M (committed; make demo-model rebuilds it)"
	finish
	exit 1
fi

# 1. manifest and inspect
want=$(sed -n 's/^| SHA-256 | `\([0-9a-f]*\)` |$/\1/p' "$ROOT/models-demo/MANIFEST.md")
got=$(sha256sum "$M" | cut -d' ' -f1)
if [ -n "$want" ] && [ "$want" = "$got" ]; then ok; else bad "SHA-256 $got, manifest says '$want'"; fi
expect_exit 0 "particle inspect" -- "$PARTICLE" inspect "$M"
expect_grep "$TMP/out" "architecture: qwen3moe" "inspect: architecture"
expect_grep "$TMP/out" "tokenizer: model gpt2, pre gpt-2, vocab 4096" "inspect: tokenizer"

# 2. tokenizer vs llama.cpp
cat >"$TMP/text" <<'TXT'
<|im_start|>user
What does "serendipity" mean?<|im_end|>
<|im_start|>assistant
"Serendipity" means good luck in making unexpected and fortunate discoveries.<|im_end|>
The old man's boat wasn't   there; it'd gone at 3.14159 o'clock!! -- Anonymous
	tabs, UPPER lower_snake x-y, café, 日本語, emoji 🙂 and <|endoftext|> as text.
TXT
for mode in special plain; do
	if [ $mode = special ]; then pf=""; of="--special"; else pf="--no-special"; of=""; fi
	# shellcheck disable=SC2086
	"$PARTICLE" tokenize -m "$M" --no-bos $pf --file "$TMP/text" >"$TMP/pt.json" 2>"$TMP/err" &&
		node "$ORACLE" tokenize "$M" "$TMP/text" $of >"$TMP/ll.json" 2>>"$TMP/err"
	if [ -s "$TMP/pt.json" ] && cmp -s "$TMP/pt.json" "$TMP/ll.json"; then ok; else
		bad "tokenize ($mode): particle $(head -c 200 "$TMP/pt.json") llama.cpp $(head -c 200 "$TMP/ll.json") $(head -c 200 "$TMP/err")"
	fi
done

# 3. logits vs llama.cpp: BOS + the text above, first N tokens
"$PARTICLE" tokenize -m "$M" --file "$TMP/text" --ids-only >"$TMP/ids" 2>"$TMP/err"
tr ' ' '\n' <"$TMP/ids" | grep . | head -n $N | paste -sd, - >"$TMP/toks"
printf '[%s]\n' "$(cat "$TMP/toks")" >"$TMP/toks.json"
field() { echo "$2" | awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }'; }
if node "$ORACLE" eval "$M" "$TMP/toks.json" "$TMP/ref" >/dev/null 2>"$TMP/oracle.err"; then
	for b in $N 1; do
		"$PARTICLE" eval -m "$M" --tokens-file "$TMP/toks" --top 0 --batch $b --threads 2 \
			--compare "$TMP/ref" --max-mean-kl 1e-2 --min-top1 0.98 >/dev/null 2>"$TMP/err"
		rc=$?
		line=$(grep '^compare:' "$TMP/err")
		if [ $rc -eq 0 ] && [ -n "$line" ]; then ok; else bad "eval --batch $b vs llama.cpp: rc $rc $line $(head -c 300 "$TMP/err")"; fi
		echo "demo model q8_0, particle batch $b vs llama.cpp: mean_kl $(field mean_kl "$line") top1 $(field top1 "$line") max_kl $(field max_kl "$line")"
	done
else
	bad "llama.cpp oracle failed: $(tail -c 300 "$TMP/oracle.err")"
fi

# 4. trained behaviour: a definition, and local routing
printf '%s\n' '[{"role":"user","content":"What is a volcano?"}]' >"$TMP/msg.json"
expect_exit 0 "chat run" -- "$PARTICLE" run -m "$M" --messages "$TMP/msg.json" -n 24 --temperature 0
expect_grep "$TMP/out" "^An\\? [A-Za-z-]* is " "chat answer has the definition shape"
echo "chat answer: $(head -c 200 "$TMP/out" | tr '\n' ' ')"
expect_exit 0 "routing" -- "$PARTICLE" routing -m "$M" --json
ov=$(sed -n 's/.*"mean_overlap": \([0-9.]*\).*/\1/p' "$TMP/out")
if awk -v o="$ov" 'BEGIN { exit !(o + 0 > 1.5 * 4 / 32) }'; then ok; else bad "routing overlap '$ov' not above 1.5 k/E = 0.1875"; fi
echo "routing: mean overlap $ov (memoryless 0.125)"
finish
