#!/bin/sh
# bench_stream.sh - the docs/BENCHMARKS.md streaming table: decode-shaped evaluation
# (--batch 1: one token per forward step) of N tokens of a fixed text through the engine at
# three memory budgets (planner minimum = top-k slots, minimum + 1/3 of the experts, every
# expert), cold (page cache dropped; needs root) and warm, plus the mmap baseline.
# usage: sh tools/bench/bench_stream.sh MODEL.gguf [TOKENS]
set -eu
P=${PARTICLE:-build/particle}
M=$1
N=${2:-128}
text="The old lighthouse keeper climbed the spiral stairs every evening at dusk, counting the steps as his father had done. Below, the harbour filled with fishing boats returning from the grey sea, their holds heavy with cod and mackerel. In the village square children chased pigeons between market stalls selling apples, bread, copper pots and wool. A teacher explained photosynthesis with a potted geranium while the radio reported rising interest rates, a strike on Thursday and a comet after midnight."
ids=$("$P" tokenize -m "$M" --ids-only "$text $text $text" | tr ' ' '\n' | head -n "$N" | tr '\n' ',')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$P" eval -m "$M" --tokens "$ids" --top 0 --batch 1 --memory 1M >/dev/null 2>"$tmp/err" || true
min=$(sed -n 's/.*smallest budget that works: \([0-9]*\) bytes.*/\1/p' "$tmp/err")
"$P" eval -m "$M" --tokens 1 --top 0 --io mmap --stats-json "$tmp/s.json" >/dev/null
slot=$(sed -n 's/.*"slot_bytes": \([0-9]*\).*/\1/p' "$tmp/s.json")
nl=$(sed -n 's/.*"n_moe_layers": \([0-9]*\).*/\1/p' "$tmp/s.json")
ne=$(sed -n 's/.*"slots_per_layer": \([0-9]*\).*/\1/p' "$tmp/s.json")
mid=$((min + ne / 3 * nl * slot))
all=$((min + ne * nl * slot))
echo "model $M: $(wc -c <"$M") bytes, $ne experts x $nl MoE layers, slot $slot bytes, $N tokens"
echo "| budget | io | cache | slots/layer | decode tok/s | hit rate | MiB read/token | peak RSS MiB |"
echo "|---|---|---|---:|---:|---:|---:|---:|"
run() { # label budget-flags io cold|warm: best decode tok/s of REPS runs
	best=0
	if [ "$4" = warm ]; then
		"$P" eval -m "$M" --tokens "$ids" --top 0 $2 --io "$3" --batch 1 >/dev/null; fi
	for r in $(seq "${REPS:-3}"); do
		[ "$4" = cold ] && { sync; echo 3 >/proc/sys/vm/drop_caches; }
		"$P" eval -m "$M" --tokens "$ids" --top 0 $2 --io "$3" --batch 1 \
			--stats-json "$tmp/s$r.json" >/dev/null
		t=$(sed -n 's/.*"prefill_tok_s": \([0-9.]*\).*/\1/p' "$tmp/s$r.json")
		if awk -v a="$t" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$t; cp "$tmp/s$r.json" "$tmp/s.json"; fi
	done
	awk -v lab="$1" -v io="$3" -v c="$4" -v n="$N" -F'[:,]' '
		/"layer":/ { next }  # per-layer rows repeat the keys
		{ for (i = 1; i < NF; i++) { gsub(/[ "{]/, "", $i); v[$i] = $(i + 1) + 0 } }
		END { h = v["hits"]; m = v["misses"]; r = (h + m) ? 100 * h / (h + m) : 0
		      printf "| %s | %s | %s | %d | %.1f | %.1f%% | %.2f | %.1f |\n", lab, io, c,
		      v["slots_per_layer"], v["prefill_tok_s"], r, v["bytes_read"] / n / 1048576,
		      v["peak_rss_bytes"] / 1048576 }' "$tmp/s.json"
}
for c in cold warm; do
	run "min $((min >> 20)) MiB" "--memory $min" direct $c
	run "mid $((mid >> 20)) MiB" "--memory $mid" direct $c
	run "all $((all >> 20)) MiB" "--memory $all" direct $c
	run "(mmap baseline)" "" mmap $c
done
