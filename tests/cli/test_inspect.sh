#!/bin/sh
# test_inspect.sh - `particle inspect`: a valid MoE file (text, --json, --tensors), corrupt
# files (exit 2, one error line naming the problem), I/O errors (exit 1), usage errors (2).
# Files are written by tests/cli/mkgguf.py with struct (no gguf package).
. "$(dirname "$0")/lib.sh"
MK="python3 $(dirname "$0")/mkgguf.py"
$MK moe "$TMP/moe.gguf" || bad "mkgguf moe"

expect_exit 0 "valid file" -- "$PARTICLE" inspect "$TMP/moe.gguf"
expect_grep "$TMP/out" "architecture: qwen3moe" "text architecture"
expect_grep "$TMP/out" "resident bytes: 51200 B" "text resident bytes"
expect_grep "$TMP/out" "routed-expert bytes: 174080 B" "text expert bytes"
expect_grep "$TMP/out" "bytes per expert: 25600 B" "text bytes per expert"
expect_grep "$TMP/out" "attention.head_count_kv .*array of 2 i32, min 1 max 2" "per-layer array"
expect_grep "$TMP/out" "tokenizer: model gpt2, pre qwen2, vocab 10" "text tokenizer"
expect_grep "$TMP/out" "Q4_K  *4 tensors" "text types"
if grep -q "blk.0.attn_q.weight" "$TMP/out"; then bad "tensors listed without --tensors"; else ok; fi

expect_exit 0 "valid file --tensors" -- "$PARTICLE" inspect "$TMP/moe.gguf" --tensors
expect_grep "$TMP/out" "blk.1.ffn_down_exps.weight  *F16  *\[32, 256, 4\] offset 159744 bytes 65536" "tensor line"

expect_exit 0 "valid file --json" -- "$PARTICLE" inspect --json --tensors "$TMP/moe.gguf"
if python3 - "$TMP/out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
want = {"architecture": "qwen3moe", "name": "tiny moe", "n_layers": 2, "n_experts": 4,
        "n_experts_used": 2, "tensor_count": 14, "resident_bytes": 51200,
        "expert_bytes": 174080, "bytes_per_expert": 25600, "bytes_per_expert_min": 17920,
        "expert_layers": 2, "version": 3, "alignment": 32}
bad = [k for k, v in want.items() if d.get(k) != v]
import os
if d.get("file_bytes") != os.path.getsize(sys.argv[1].replace("out", "moe.gguf")): bad.append("file_bytes")
if d.get("types") != {"F32": 5, "F16": 2, "Q8_0": 3, "Q4_K": 4}: bad.append("types")
t = d.get("tokenizer", {})
if (t.get("model"), t.get("pre"), t.get("vocab_size"), t.get("bos_id"), t.get("eos_id"),
    t.get("eot_id"), t.get("chat_template"), t.get("chat_template_bytes")) != \
   ("gpt2", "qwen2", 10, 1, 5, -1, True, 14): bad.append("tokenizer")
if d.get("hparams", {}).get("rope.freq_base") != 1000000: bad.append("hparams")
if d.get("metadata", {}).get("tokenizer.ggml.tokens") != {"type": "string", "count": 10}: bad.append("metadata")
ts = d.get("tensors", [])
if len(ts) != 14 or ts[13] != {"name": "blk.1.ffn_down_exps.weight", "type": "F16",
                               "shape": [32, 256, 4], "offset": 159744, "bytes": 65536}:
    bad.append("tensors")
if d["resident_bytes"] + d["expert_bytes"] != d["tensor_bytes"]: bad.append("sum")
if bad:
    print("mismatch:", bad)
sys.exit(1 if bad else 0)
PY
then ok; else bad "--json fields"; fi

for kind in small v2 notensors; do
	$MK $kind "$TMP/$kind.gguf"
	expect_exit 0 "valid $kind" -- "$PARTICLE" inspect --json "$TMP/$kind.gguf"
	if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/out"; then ok; else bad "$kind json"; fi
done

# corrupt files: kind, expected message substring
while read -r kind msg; do
	$MK "$kind" "$TMP/$kind.gguf"
	expect_exit 2 "corrupt $kind" -- "$PARTICLE" inspect "$TMP/$kind.gguf"
	expect_one_error_line "corrupt $kind"
	expect_grep "$TMP/err" "$msg" "corrupt $kind message"
	expect_exit 2 "corrupt $kind --json" -- "$PARTICLE" inspect --json "$TMP/$kind.gguf"
	if [ -s "$TMP/out" ]; then bad "corrupt $kind printed to stdout"; else ok; fi
done <<'EOF2'
bad-magic bad magic.* at offset 0
v1 version 1 is obsolete
swapped byte-swapped
truncated tensor 'q': data (68 bytes) runs past the end of the file at offset
dup-tensor duplicate tensor name 'w' at offset
bad-type tensor 'w': unknown tensor type 37 at offset
misaligned tensor 'h': offset 40 is not a multiple of the alignment 32
past-eof runs past the end of the file
EOF2

: >"$TMP/empty.gguf"
expect_exit 2 "empty file" -- "$PARTICLE" inspect "$TMP/empty.gguf"
expect_one_error_line "empty file"
expect_exit 1 "missing file" -- "$PARTICLE" inspect "$TMP/nope.gguf"
expect_one_error_line "missing file"
expect_grep "$TMP/err" "nope.gguf" "missing file named"
expect_exit 1 "directory" -- "$PARTICLE" inspect "$TMP"
expect_one_error_line "directory"
if [ "$(id -u)" -ne 0 ]; then
	cp "$TMP/moe.gguf" "$TMP/noperm.gguf" && chmod 000 "$TMP/noperm.gguf"
	expect_exit 1 "permission denied" -- "$PARTICLE" inspect "$TMP/noperm.gguf"
	expect_one_error_line "permission denied"
fi
mkfifo "$TMP/fifo"
expect_exit 1 "fifo does not hang" -- timeout 10 "$PARTICLE" inspect "$TMP/fifo"
expect_one_error_line "fifo"
expect_exit 2 "unknown flag" -- "$PARTICLE" inspect --frobnicate "$TMP/moe.gguf"
expect_one_error_line "unknown flag"
expect_grep "$TMP/err" "frobnicate" "unknown flag named"
expect_exit 2 "no file" -- "$PARTICLE" inspect
expect_one_error_line "no file"
expect_exit 2 "two files" -- "$PARTICLE" inspect "$TMP/moe.gguf" "$TMP/small.gguf"
expect_exit 0 "help" -- "$PARTICLE" inspect --help
expect_grep "$TMP/out" "--json" "help documents --json"
expect_grep "$TMP/out" "--tensors" "help documents --tensors"
finish
