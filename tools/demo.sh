#!/bin/sh
# demo.sh MODEL - describes MODEL, then generates with `particle run`: a raw completion and two
# chat replies (with a mild repetition penalty: greedy decoding of so small a model loops).
# The default MODEL is the committed demo model (models-demo/: a 6 M-parameter qwen3moe
# trained here on WordNet definitions and fortunes, `make demo-model`; MANIFEST.md), so the
# replies are English of that scale.  Any other missing MODEL path is created as a
# synthetic qwen3moe `small` checkpoint (random weights: noise, but the real tensor shapes).
set -eu
model=$1
if [ ! -f "$model" ]; then
	case $model in
	models-demo/*)
		echo "particle: error: $model is missing (it is committed: git checkout it, or retrain with make demo-model)" >&2
		exit 1 ;;
	esac
	mkdir -p "$(dirname "$model")"
	./build/particle mkmodel --arch qwen3moe --preset small --quant q4_k_m -o "$model"
fi
./build/particle inspect "$model"
echo
echo "\$ particle run -m $model --prompt 'The old man' -n 40 --seed 1 --repetition-penalty 1.3"
./build/particle run -m "$model" --prompt "The old man" -n 40 --seed 1 --repetition-penalty 1.3
# mktemp, not a fixed name in a shared /tmp another user could plant a link at (SECURITY.md)
msgs=$(mktemp)
trap 'rm -f "$msgs"' EXIT
for q in "What is a volcano?" "Tell me a fortune."; do
	printf '[{"role":"user","content":"%s"}]\n' "$q" >"$msgs"
	echo
	echo "\$ particle run -m $model --messages messages.json -n 64 --temperature 0 --repetition-penalty 1.3   # user: $q"
	./build/particle run -m "$model" --messages "$msgs" -n 64 --temperature 0 --repetition-penalty 1.3
done
