#!/bin/sh
# test_nextn.sh - GLM's NextN (multi-token prediction) block is loaded and ignored: the file
# keeps it (llama.cpp's layout, block_count counts it), but the engine neither computes it,
# nor counts it as resident, nor gives it expert slots or budget (issue 17).
#  * the plan line: slots x (MoE layers of the trunk) and a note with the block's bytes;
#  * --stats-json: n_moe_layers = trunk MoE layers, resident = file - trunk experts - NextN;
#  * the smallest budget that works is the one for the trunk only;
#  * logits byte-identical streamed at that budget and mapped; a pack holds trunk experts only.
. "$(dirname "$0")/lib.sh"

M="$TMP/glm.gguf"
T=$(seq -s, 3 40)
expect_exit 0 "mkmodel glm4moe tiny" -- "$PARTICLE" mkmodel --arch glm4moe --preset tiny \
	--quant q8_0 -o "$M"
expect_exit 0 "inspect" -- "$PARTICLE" inspect "$M" --json --tensors
# bytes from the file itself: block_count, the NextN block (the last one) and the trunk's
# routed experts
python3 - "$TMP/out" >"$TMP/sizes" <<'PY' || bad "inspect json: $(cat "$TMP/sizes")"
import json, re, sys
j = json.load(open(sys.argv[1]))
blocks = j["n_layers"]
def blk(name):
    m = re.match(r"blk\.(\d+)\.", name)
    return int(m.group(1)) if m else -1
trunk = blocks - 1  # tiny: one NextN block after the trunk
skipped = sum(t["bytes"] for t in j["tensors"] if blk(t["name"]) >= trunk)
experts = sum(t["bytes"] for t in j["tensors"] if "_exps" in t["name"] and 0 <= blk(t["name"]) < trunk)
nextn_exp = sum(t["bytes"] for t in j["tensors"] if "_exps" in t["name"] and blk(t["name"]) >= trunk)
moe = len({blk(t["name"]) for t in j["tensors"] if "_exps" in t["name"] and 0 <= blk(t["name"]) < trunk})
print(blocks, trunk, moe, j["file_bytes"], skipped, experts, nextn_exp)
PY
read -r blocks trunk moe fbytes skipped experts nextn_exp <"$TMP/sizes"
[ "$blocks" = 4 ] && [ "$trunk" = 3 ] && [ "$moe" = 2 ] && [ "$nextn_exp" -gt 0 ] && ok ||
	bad "tiny glm4moe: $blocks blocks, trunk $trunk, $moe MoE layers, NextN experts $nextn_exp"
# inspect's own split: the NextN block is neither resident nor routed-expert bytes
python3 - "$TMP/out" "$experts" "$skipped" <<'PY' >"$TMP/chk" 2>&1 && ok || bad "inspect: $(cat "$TMP/chk")"
import json, sys
j = json.load(open(sys.argv[1]))
experts, skipped = int(sys.argv[2]), int(sys.argv[3])
assert j["expert_bytes"] == experts, "expert_bytes %d, want %d" % (j["expert_bytes"], experts)
assert j["expert_layers"] == 2, "expert_layers %d" % j["expert_layers"]
assert j["nextn_layers"] == 1 and j["nextn_bytes"] == skipped, \
    "nextn %d / %d B, want 1 / %d" % (j["nextn_layers"], j["nextn_bytes"], skipped)
assert j["resident_bytes"] + experts + skipped == j["tensor_bytes"], "sum"
PY
expect_exit 0 "inspect text" -- "$PARTICLE" inspect "$M"
expect_grep "$TMP/out" "routed-expert bytes: .* over 2 layers" "inspect text: 2 expert layers"
expect_grep "$TMP/out" "next-token-prediction blocks: 1, .* (never loaded)" "inspect text: NextN line"

# streamed: the plan covers the trunk's 2 MoE layers and names the skipped block
expect_exit 0 "streamed run" -- "$PARTICLE" eval -m "$M" --tokens "$T" --top 0 --io direct \
	--expert-slots 4 --verbose --stats-json "$TMP/s.json"
expect_grep "$TMP/err" "plan: .* 4 slots/layer × 2 layers × " "plan: slots for the 2 computed MoE layers"
expect_grep "$TMP/err" "; 1 NextN block ([0-9.]* [KMG]*i*B) not computed, not resident, no slots" \
	"plan: NextN block named"
python3 - "$TMP/s.json" "$fbytes" "$experts" "$skipped" <<'PY' >"$TMP/chk" 2>&1 && ok || bad "stats: $(cat "$TMP/chk")"
import json, sys
s = json.load(open(sys.argv[1]))
fbytes, experts, skipped = (int(x) for x in sys.argv[2:5])
assert s["n_moe_layers"] == 2, "n_moe_layers %s" % s["n_moe_layers"]
assert s["resident_bytes"] == fbytes - experts - skipped, \
    "resident %d, want %d - %d - %d" % (s["resident_bytes"], fbytes, experts, skipped)
PY

# the smallest budget that works: the trunk's, and it runs with the same logits as the mapping
expect_exit 2 "too small a budget" -- "$PARTICLE" eval -m "$M" --tokens "$T" --top 0 --memory 1M
expect_grep "$TMP/err" "slots/layer x 2 layers" "refusal counts the 2 computed MoE layers"
min=$(sed -n 's/.*smallest budget that works: \([0-9]*\) bytes.*/\1/p' "$TMP/err")
expect_exit 0 "reference (mapped)" -- "$PARTICLE" eval -m "$M" --tokens "$T" --top 0 --io mmap \
	--logits-out "$TMP/ref.bin"
for b in 16 1; do
	expect_exit 0 "b$b at the smallest budget" -- "$PARTICLE" eval -m "$M" --tokens "$T" --top 0 \
		--batch "$b" --io direct --memory "$min" --logits-out "$TMP/l.bin"
	if cmp -s "$TMP/ref.bin" "$TMP/l.bin"; then ok; else bad "b$b: logits differ from the mapping"; fi
done

# a pack holds the trunk's experts only
expect_exit 0 "pack" -- "$PARTICLE" pack "$M"
expect_grep "$TMP/out" "2 MoE layers" "pack: the 2 computed MoE layers"
expect_exit 0 "eval with the pack" -- "$PARTICLE" eval -m "$M" --tokens "$T" --top 0 --batch 1 \
	--expert-slots 4 --logits-out "$TMP/l.bin" --verbose
expect_grep "$TMP/err" "experts: .*expert pack" "pack in use"
if cmp -s "$TMP/ref.bin" "$TMP/l.bin"; then ok; else bad "pack: logits differ from the mapping"; fi
finish
