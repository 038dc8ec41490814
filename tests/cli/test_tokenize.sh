#!/bin/sh
# test_tokenize.sh - `particle mkvocab`, `tokenize`, `detokenize` on a tiny byte-level
# vocabulary written here: ids, special handling, id list formats, exit codes and errors.
. "$(dirname "$0")/lib.sh"

mkdir -p "$TMP/hf"
cat >"$TMP/hf/tokenizer.json" <<'JSON'
{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120a": 4, "1": 5, "2": 6},
  "merges": ["a b", "\u0120 a"]},
 "added_tokens": [{"id": 7, "content": "<|im_end|>", "special": true},
                  {"id": 8, "content": "<think>", "special": false}],
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
   {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
   {"type": "ByteLevel"}]}}
JSON
printf '{"eos_token": "<|im_end|>", "add_bos_token": false, "chat_template": "{{ x }}"}' \
	>"$TMP/hf/tokenizer_config.json"
M=$TMP/v.gguf

expect_exit 0 "mkvocab" -- $PARTICLE mkvocab --arch qwen3moe "$TMP/hf" "$M"
expect_exit 0 "tokenize" -- $PARTICLE tokenize -m "$M" "ab a12"
expect_grep "$TMP/out" '^\[2,4,5,6\]$' "ids of 'ab a12'"
expect_exit 0 "tokenize special" -- $PARTICLE tokenize -m "$M" "a<|im_end|><think>"
expect_grep "$TMP/out" '^\[0,7,8\]$' "control and user-defined tokens matched"
expect_exit 0 "tokenize --no-special" -- $PARTICLE tokenize -m "$M" --no-special "a<|im_end|><think>"
expect_grep "$TMP/out" '^\[0,8\]$' "control text not matched, user-defined still is"
expect_exit 0 "tokenize --ids-only" -- $PARTICLE tokenize -m "$M" --ids-only "ab a"
expect_grep "$TMP/out" '^2 4$' "--ids-only"
expect_exit 0 "tokenize --pieces" -- $PARTICLE tokenize -m "$M" --pieces " a"
expect_grep "$TMP/out" '"piece":"Ġa"' "--pieces shows the vocab text"
printf 'ab\na' >"$TMP/in.txt"
expect_exit 0 "tokenize --file" -- $PARTICLE tokenize -m "$M" --file "$TMP/in.txt"
expect_grep "$TMP/out" '^\[2,0\]$' "--file (newline has no piece and is dropped)"
expect_exit 0 "detokenize commas" -- $PARTICLE detokenize -m "$M" "2,4,5,6"
expect_grep "$TMP/out" '^ab a12$' "detokenize text"
expect_exit 0 "detokenize json" -- $PARTICLE detokenize -m "$M" "[2, 7, 8]"
expect_grep "$TMP/out" '^ab<|im_end|><think>$' "control rendered by default"
expect_exit 0 "detokenize --no-special" -- $PARTICLE detokenize -m "$M" --no-special "2 7 8"
expect_grep "$TMP/out" '^ab<think>$' "control hidden with --no-special"
expect_exit 2 "detokenize out of range" -- $PARTICLE detokenize -m "$M" "1,99"
expect_one_error_line "out of range id"
expect_grep "$TMP/err" "out of range" "out-of-range message"
expect_exit 2 "detokenize garbage" -- $PARTICLE detokenize -m "$M" "1,x"
expect_one_error_line "bad id"
expect_exit 2 "tokenize without -m" -- $PARTICLE tokenize "abc"
expect_one_error_line "missing -m"
expect_exit 2 "tokenize unknown flag" -- $PARTICLE tokenize -m "$M" --frobnicate "abc"
expect_one_error_line "unknown flag"
expect_exit 2 "tokenize two inputs" -- $PARTICLE tokenize -m "$M" "a" "b"
expect_exit 0 "tokenize --help" -- $PARTICLE tokenize --help
expect_grep "$TMP/out" "--no-special" "help lists flags"
expect_exit 0 "detokenize --help" -- $PARTICLE detokenize --help
expect_exit 0 "mkvocab --help" -- $PARTICLE mkvocab --help
expect_exit 1 "tokenize missing model file" -- $PARTICLE tokenize -m "$TMP/nope.gguf" "a"
expect_one_error_line "missing model"
expect_exit 0 "mkvocab forced unknown pre" -- $PARTICLE mkvocab --pre no-such "$TMP/hf" "$TMP/bad.gguf"
expect_exit 2 "tokenize refuses unknown pre" -- $PARTICLE tokenize -m "$TMP/bad.gguf" "a"
expect_grep "$TMP/err" "unknown pre-tokenizer type 'no-such'" "refusal names the pre"
finish
