#!/bin/sh
# test_split.sh - split GGUF models (llama.cpp's gguf-split convention, issue 15):
#  * mkmodel --split-max-size writes 3 parts of a `small` model (same seed, same tensors as
#    the single file), byte-identical for a seed (checked on a tiny split);
#  * eval --logits-out through any part is byte-identical to the single file: mapped, --io
#    mmap, streamed under a small --memory with --io direct and buffered, and with a pack;
#    run's greedy text is identical; inspect lists the parts; pack, bench, routing, tokenize,
#    template and serve accept any part;
#  * refusals, one error line naming the part: a missing part (exit 1), a part of another
#    split count, a part of another model, a corrupt part header, a renamed part (exit 2);
#    the model lock is on part 1 whichever part is named; --reroute refuses split models.
. "$(dirname "$0")/lib.sh"
case "$PARTICLE" in *asan*) SAN=1 ;; *) SAN=0 ;; esac

# The ASan run uses the tiny preset (same checks, a fraction of the compute).
if [ "$SAN" = 1 ]; then PRESET=tiny; SIZE=2500000; MEM=30M; else PRESET=small; SIZE=100M; MEM=80M; fi
M="$TMP/m.gguf"
S="$TMP/s"
S1="$S-00001-of-00003.gguf"; S2="$S-00002-of-00003.gguf"; S3="$S-00003-of-00003.gguf"

expect_exit 0 "mkmodel --help" -- "$PARTICLE" mkmodel --help
expect_grep "$TMP/out" "--split-max-size SIZE" "help documents --split-max-size"
expect_grep "$TMP/out" "--split-max-tensors N" "help documents --split-max-tensors"
expect_exit 0 "mkmodel single" -- mkmodel_cached "$M" --arch qwen3moe --preset $PRESET --quant q4_k_m
expect_exit 0 "mkmodel split" -- "$PARTICLE" mkmodel --arch qwen3moe --preset $PRESET \
	--split-max-size $SIZE -o "$S.gguf"
for p in "$S1" "$S2" "$S3"; do
	if [ -f "$p" ]; then ok; else bad "part $p not written"; fi
done
if [ -e "$S.gguf" ] || [ -e "$S-00004-of-00003.gguf" ]; then bad "stray output file"; else ok; fi

# the parts' tensor bytes never exceed SIZE unless a part holds one tensor
expect_exit 0 "inspect part 2" -- "$PARTICLE" inspect "$S2" --json --tensors
python3 - "$TMP/out" "$SIZE" <<'EOF' || bad "part sizes or tensor placement"
import json, sys
d = json.load(open(sys.argv[1]))
size = sys.argv[2]
lim = int(size[:-1]) * (10**6 if size[-1] == 'M' else 10**9) if size[-1] in 'MG' else int(size)
assert [p["part"] for p in d["parts"]] == [1, 2, 3], d["parts"]
per = {1: 0, 2: 0, 3: 0}
cnt = {1: 0, 2: 0, 3: 0}
for t in d["tensors"]:
    per[t["part"]] += (t["bytes"] + 31) // 32 * 32
    cnt[t["part"]] += 1
for p in per:
    assert per[p] <= lim or cnt[p] == 1, (p, per[p], lim)
assert sum(cnt.values()) == d["tensor_count"]
assert [p["tensors"] for p in d["parts"]] == [cnt[1], cnt[2], cnt[3]]
EOF
ok
expect_exit 0 "inspect part 3 (text)" -- "$PARTICLE" inspect "$S3"
expect_grep "$TMP/out" "^split part 1 of 3: $S1" "inspect lists part 1"
expect_grep "$TMP/out" "^split part 3 of 3: $S3" "inspect lists part 3"
expect_grep "$TMP/out" "^architecture: qwen3moe" "inspect shows part 1's metadata"

# same tensors (names, types, shapes) as the single file
"$PARTICLE" inspect "$M" --json --tensors >"$TMP/single.json"
"$PARTICLE" inspect "$S1" --json --tensors >"$TMP/split.json"
python3 - "$TMP/single.json" "$TMP/split.json" <<'EOF' && ok || bad "tensor lists differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
key = lambda d: [(t["name"], t["type"], t["shape"], t["bytes"]) for t in d["tensors"]]
assert key(a) == key(b)
assert a["file_bytes"] < b["file_bytes"] < a["file_bytes"] + 3 * 4096
EOF

# ---- logits: byte-identical to the single file ----
TOK=$(seq -s, 5 69)
ref() { "$PARTICLE" eval -m "$M" --tokens "$TOK" --top 0 --logits-out "$TMP/ref.bin" "$@" >/dev/null 2>"$TMP/err.ref"; }
same() { # DESC MODEL FLAGS...
	desc=$1; model=$2; shift 2
	rm -f "$TMP/got.bin"
	expect_exit 0 "$desc" -- "$PARTICLE" eval -m "$model" --tokens "$TOK" --top 0 \
		--logits-out "$TMP/got.bin" --verbose "$@"
	if cmp -s "$TMP/ref.bin" "$TMP/got.bin"; then ok; else bad "$desc: logits differ"; fi
}
ref
for p in "$S1" "$S2" "$S3"; do
	same "mapped via $(basename "$p")" "$p"
done
expect_grep "$TMP/err" "experts: mmap" "mapped run maps the experts"
same "--io mmap" "$S2" --io mmap
for io in direct buffered; do
	same "streamed --memory $MEM --io $io" "$S3" --memory $MEM --io $io
	expect_grep "$TMP/err" "slots/layer .*GGUF slices" "$io: streamed from the parts"
	expect_grep "$TMP/err" "[1-9][0-9]* misses" "$io: experts were read"
	PARTICLE_IO=pread same "pread pool --io $io" "$S2" --memory $MEM --io $io
done

# ---- pack ----
expect_exit 0 "pack via part 2" -- "$PARTICLE" pack "$S2"
expect_grep "$TMP/out" "wrote $S1.xpack" "pack is named after part 1"
expect_exit 0 "pack the single file" -- "$PARTICLE" pack "$M"
if cmp -s "$M.xpack" "$S1.xpack"; then ok; else bad "pack of the split differs from the single file's"; fi
expect_exit 0 "pack --verify via part 3" -- "$PARTICLE" pack "$S3" --verify
expect_grep "$TMP/out" "made from this model" "pack verified against part 1"
for io in direct buffered; do
	same "with the pack, --io $io" "$S3" --memory $MEM --io $io
	expect_grep "$TMP/err" "expert pack (1 read/expert)" "$io: reads from the pack"
done
same "pack cache" "$S2" --memory $MEM --io direct --pack-cache "$TMP/pc"
rm -f "$S1.xpack" "$S1.xpack.json"

# ---- run, bench, routing, tokenize, template ----
"$PARTICLE" run -m "$M" --prompt "The split model says" -n 12 --temperature 0 --no-lock \
	>"$TMP/run1" 2>/dev/null
expect_exit 0 "run via part 3" -- "$PARTICLE" run -m "$S3" --prompt "The split model says" \
	-n 12 --temperature 0 --expert-slots 4 --io direct
if [ -s "$TMP/run1" ] && cmp -s "$TMP/run1" "$TMP/out"; then ok; else bad "run: greedy text differs"; fi
expect_exit 0 "bench via part 2" -- "$PARTICLE" bench -m "$S2" --prompt-tokens 16 --gen 4 --json
expect_grep "$TMP/out" "decode" "bench reports"
"$PARTICLE" routing -m "$M" --tokens 32 --json | sed 's/"model": "[^"]*"//' >"$TMP/r1" 2>/dev/null
expect_exit 0 "routing via part 2" -- "$PARTICLE" routing -m "$S2" --tokens 32 --json
sed -i 's/"model": "[^"]*"//' "$TMP/out"
if [ -s "$TMP/r1" ] && cmp -s "$TMP/r1" "$TMP/out"; then ok; else bad "routing report differs"; fi
"$PARTICLE" tokenize -m "$M" "Hello split world" >"$TMP/t1"
expect_exit 0 "tokenize via part 3" -- "$PARTICLE" tokenize -m "$S3" "Hello split world"
if cmp -s "$TMP/t1" "$TMP/out"; then ok; else bad "tokenize differs"; fi
echo '[{"role":"user","content":"hi"}]' >"$TMP/msgs.json"
"$PARTICLE" template -m "$M" --messages "$TMP/msgs.json" >"$TMP/tp1"
expect_exit 0 "template via part 2" -- "$PARTICLE" template -m "$S2" --messages "$TMP/msgs.json"
if [ -s "$TMP/tp1" ] && cmp -s "$TMP/tp1" "$TMP/out"; then ok; else bad "template differs"; fi

# serve via part 3: the model id drops the part suffix; a greedy completion answers
"$PARTICLE" serve -m "$S3" --port 0 --expert-slots 4 --io direct >"$TMP/serve.out" 2>"$TMP/serve.err" &
SPID=$!
URL=""
for _ in $(seq 1 600); do # up to 60 s (a loaded machine, ASan): the URL line ends it
	URL=$(grep -o 'http://[0-9.:]*' "$TMP/serve.out" 2>/dev/null | head -1)
	[ -n "$URL" ] && break
	sleep 0.1
done
if [ -n "$URL" ] && curl -s "$URL/v1/models" | grep -q '"id":"s"'; then ok; else bad "serve via part 3: $(head -c 300 "$TMP/serve.err")"; fi
if curl -s "$URL/v1/completions" -H 'content-type: application/json' \
	-d '{"prompt":"The split model says","max_tokens":4,"temperature":0}' | grep -q '"finish_reason"'; then ok; else bad "serve completion"; fi
kill "$SPID" 2>/dev/null
wait "$SPID" 2>/dev/null

# ---- the model lock is part 1's, whichever part is named ----
if command -v flock >/dev/null; then
	expect_exit 1 "lock held on part 1 refuses a run via part 3" -- flock -n "$S1" \
		"$PARTICLE" eval -m "$S3" --tokens 1,2 --top 0
	expect_grep "$TMP/err" "in use\|locked\|running" "lock refusal says why"
	expect_exit 0 "--no-lock" -- flock -n "$S1" "$PARTICLE" eval -m "$S3" --tokens 1,2 --top 0 --no-lock
fi

# ---- mkmodel: byte-identical parts for a seed, flags ----
T1="$TMP/a/t"; T2="$TMP/b/t"
mkdir -p "$TMP/a" "$TMP/b"
for t in "$T1" "$T2"; do
	"$PARTICLE" mkmodel --arch qwen3moe --preset tiny --seed 7 --split-max-tensors 15 \
		-o "$t.gguf" >/dev/null 2>&1
done
for i in 1 2 3; do
	if cmp -s "$T1-0000$i-of-00003.gguf" "$T2-0000$i-of-00003.gguf"; then ok; else bad "tiny part $i not byte-identical"; fi
done
expect_exit 2 "both split flags" -- "$PARTICLE" mkmodel --arch qwen3moe --split-max-size 1M \
	--split-max-tensors 3 -o "$TMP/x.gguf"
expect_one_error_line "both split flags"
for bad_size in 0 1K -5 12X M; do
	expect_exit 2 "--split-max-size $bad_size" -- "$PARTICLE" mkmodel --arch qwen3moe \
		--split-max-size "$bad_size" -o "$TMP/x.gguf"
	expect_one_error_line "--split-max-size $bad_size"
done
expect_exit 2 "--reroute on a split part" -- "$PARTICLE" mkmodel --reroute "$T1-00002-of-00003.gguf" \
	--router-skew 2
expect_one_error_line "--reroute split"
expect_grep "$TMP/err" "split model" "--reroute says why"

# ---- refusals, each naming the part ----
# refuse DESC CODE PATTERN MODEL: eval and inspect both refuse with one line naming the part
refuse() {
	rd=$1; rc=$2; rp=$3; rm_=$4
	expect_exit "$rc" "$rd (eval)" -- "$PARTICLE" eval -m "$rm_" --tokens 1,2 --top 0
	expect_one_error_line "$rd (eval)"
	expect_grep "$TMP/err" "$rp" "$rd (eval) names the part"
	expect_exit "$rc" "$rd (inspect)" -- "$PARTICLE" inspect "$rm_"
	expect_grep "$TMP/err" "$rp" "$rd (inspect) names the part"
}
E="$TMP/e"; mkdir -p "$E"
cp "$T1"-0000?-of-00003.gguf "$E/"
mv "$E/t-00002-of-00003.gguf" "$E/away.gguf"
refuse "missing part 2" 1 "split part 2 of 3 is missing: .*t-00002-of-00003.gguf" "$E/t-00001-of-00003.gguf"
refuse "missing part 2, via part 3" 1 "split part 2 of 3 is missing" "$E/t-00003-of-00003.gguf"
mv "$E/away.gguf" "$E/t-00002-of-00003.gguf"
mv "$E/t-00001-of-00003.gguf" "$E/away.gguf"
refuse "missing part 1, via part 2" 1 "split part 1 of 3 is missing" "$E/t-00002-of-00003.gguf"
mv "$E/away.gguf" "$E/t-00001-of-00003.gguf"
expect_exit 0 "the copy opens again" -- "$PARTICLE" inspect "$E/t-00002-of-00003.gguf"

# part 3 of a 4-part split of the same model in place of part 3
"$PARTICLE" mkmodel --arch qwen3moe --preset tiny --seed 7 --split-max-tensors 10 \
	-o "$TMP/four.gguf" >/dev/null 2>&1
cp "$E/t-00003-of-00003.gguf" "$E/keep3"
cp "$TMP/four-00003-of-00004.gguf" "$E/t-00003-of-00003.gguf"
refuse "wrong split.count in part 3" 2 "split part 3 of 3 .*it says it is part 3 of 4" "$E/t-00001-of-00003.gguf"
refuse "opened via the wrong-count part" 2 "is split part 3 of 4 .*is not named" "$E/t-00003-of-00003.gguf"
cp "$E/keep3" "$E/t-00003-of-00003.gguf"

# part 2 of another model's 3-part split
"$PARTICLE" mkmodel --arch gemma4 --preset tiny --split-max-tensors 30 -o "$TMP/g.gguf" >/dev/null 2>&1
if [ -f "$TMP/g-00002-of-00003.gguf" ]; then ok; else bad "gemma4 3-part split not written"; fi
cp "$E/t-00002-of-00003.gguf" "$E/keep2"
cp "$TMP/g-00002-of-00003.gguf" "$E/t-00002-of-00003.gguf"
refuse "part 2 of another model" 2 "split part 2 of 3 .*not a part of this model" "$E/t-00001-of-00003.gguf"
cp "$E/keep2" "$E/t-00002-of-00003.gguf"

# corrupt part 3 header (the magic)
printf 'XXXX' | dd of="$E/t-00003-of-00003.gguf" conv=notrunc 2>/dev/null
refuse "corrupt part 3 header" 2 "split part 3 of 3 (.*t-00003-of-00003.gguf)" "$E/t-00001-of-00003.gguf"
refuse "corrupt part 3 header, via part 2" 2 "split part 3 of 3" "$E/t-00002-of-00003.gguf"
cp "$E/keep3" "$E/t-00003-of-00003.gguf"

# a part renamed out of the convention cannot find its siblings
cp "$E/t-00002-of-00003.gguf" "$E/renamed.gguf"
refuse "renamed part" 2 "renamed.gguf is split part 2 of 3 .*is not named" "$E/renamed.gguf"
expect_exit 0 "the copy is whole again" -- "$PARTICLE" eval -m "$E/t-00002-of-00003.gguf" --tokens 1,2 --top 0

finish
