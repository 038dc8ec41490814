#!/bin/sh
# test_bench.sh - `particle bench` flags and the --json shape on a tiny model (speed figures
# are not checked: they are benchmarks, see tools/bench/run.sh).
. "$(dirname "$0")/lib.sh"
expect_exit 0 "bench --help" -- "$PARTICLE" bench --help
for flag in --model --prompt-tokens --gen --threads --batch --memory --expert-slots --io \
	--cache-policy --disk-bw --probe-mib --probe-depth --no-lock --json; do
	expect_grep "$TMP/out" -- "$flag" "help documents $flag"
done
expect_exit 2 "no model" -- "$PARTICLE" bench --gen 2
expect_one_error_line "no model"
expect_exit 2 "unknown flag" -- "$PARTICLE" bench -m x.gguf --frob 3
expect_grep "$TMP/err" "frob" "unknown flag named"
expect_exit 2 "flag without value" -- "$PARTICLE" bench -m x.gguf --gen
expect_one_error_line "flag without value"
expect_exit 2 "bad gen" -- "$PARTICLE" bench -m x.gguf --gen 0
expect_exit 2 "bad threads" -- "$PARTICLE" bench -m x.gguf --threads x
expect_exit 2 "bad io" -- "$PARTICLE" bench -m x.gguf --io fast
expect_grep "$TMP/err" "io" "bad io named"
expect_exit 2 "bad disk-bw" -- "$PARTICLE" bench -m x.gguf --disk-bw -3
expect_exit 2 "bad probe-depth" -- "$PARTICLE" bench -m x.gguf --probe-depth 0
expect_exit 2 "bad probe-mib" -- "$PARTICLE" bench -m x.gguf --probe-mib x
expect_exit 2 "bad memory" -- "$PARTICLE" bench -m x.gguf --memory lots
expect_exit 1 "missing model file" -- "$PARTICLE" bench -m "$TMP/none.gguf" --disk-bw 100
expect_one_error_line "missing model file"

M="$TMP/m.gguf"
expect_exit 0 "mkmodel" -- "$PARTICLE" mkmodel --arch qwen3moe --preset tiny --quant q8_0 -o "$M"
expect_exit 0 "bench text" -- "$PARTICLE" bench -m "$M" --prompt-tokens 8 --gen 4 --threads 1
for w in prefill decode open experts io disk probe memory; do expect_grep "$TMP/out" "^$w " "text line $w"; done
expect_exit 0 "bench json" -- "$PARTICLE" bench -m "$M" --prompt-tokens 8 --gen 4 --threads 2 \
	--disk-bw 100 --json
cp "$TMP/out" "$TMP/a.json"
if [ "$(wc -l <"$TMP/a.json")" -eq 1 ]; then ok; else bad "--json is one line"; fi
# Shape and values through python's JSON parser: required keys, types, consistent sums.
if python3 - "$TMP/a.json" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
need = ["prefill_tps", "decode_tps", "ttft_s", "peak_rss_bytes", "hit_rate",
        "bytes_read_per_token", "io_floor_s_per_token", "threads", "memory_budget_bytes"]
missing = [k for k in need if k not in o]
assert not missing, missing
assert o["threads"] == 2 and o["prompt_tokens"] == 8 and o["gen_tokens"] == 4, o
assert o["prefill_tps"] > 0 and o["decode_tps"] > 0 and o["ttft_s"] > 0, o
assert 0 <= o["hit_rate"] <= 1 and o["peak_rss_bytes"] > 1 << 20, o
assert o["disk_bw_bytes_per_s"] == 100e6 and o["disk_bw_source"] == "--disk-bw", o
assert abs(o["io_floor_s_per_token"] - o["bytes_read_per_token"] / 100e6) < 1e-6, o
# decode time = blocked on reads + computing; reads in flight never exceed the decode time
spt = o["s_per_token"]
assert abs(o["decode_read_wait_s_per_token"] + o["decode_compute_s_per_token"] - spt) < 1e-5, o
assert 0 <= o["decode_io_busy_s_per_token"] <= spt + 1e-6, o
# the output head runs once per decoded token, inside the computing time
assert 0 < o["decode_head_s_per_token"] <= o["decode_compute_s_per_token"] + 1e-6, o
assert o["read_ahead_dropped"] >= 0, o
assert o["disk_probe_trials_bytes_per_s"] == [] and o["disk_probe"] == "", o
assert o["read_ahead_used"] + o["read_ahead_wasted"] <= o["read_ahead"], o
# the decode split by part of the pass: each part >= 0, together within the computing time,
# the head part equal to the head figure; a 2-thread pool dispatches to its worker
ph = o["decode_phase_s_per_token"]
assert sorted(ph) == ["attention", "experts", "ffn_rest", "head", "router"], ph
assert all(v >= 0 for v in ph.values()) and ph["attention"] > 0 and ph["experts"] > 0, ph
assert sum(ph.values()) <= o["decode_compute_s_per_token"] + 1e-5, o
assert abs(ph["head"] - o["decode_head_s_per_token"]) < 1e-6, o
assert o["decode_pool_runs_per_token"] >= 1, o
assert 0 <= o["decode_pool_wait_s_per_token"] <= spt + 1e-6, o
# the prefill's split the same way, in seconds: within the prefill's time, the head ran
# once (the last row), blocked-on-reads time inside the experts part
pp = o["prefill_phase_s"]
assert sorted(pp) == sorted(ph), pp
assert all(v >= 0 for v in pp.values()) and pp["attention"] > 0 and pp["experts"] > 0, pp
assert sum(pp.values()) <= o["ttft_s"] + 1e-3, o
assert 0 <= o["prefill_read_wait_s"] <= pp["experts"] + 1e-3, o
# slots a prompt lends to its chunk (issue 21): never more than the plan lets it
assert 0 <= o["slots_lent_peak"] <= o["slots_lend_max"] < o["slots_per_layer"], o
# the open's time, its slot faulting inside it (none here: every expert mapped)
assert o["open_s"] > 0 and o["slots_populate_s"] == 0, o
assert o["io_engine"].startswith("mmap"), o
PY
then ok; else bad "json shape"; fi
# Greedy decode is deterministic and independent of the thread count and memory budget.
expect_exit 0 "bench json 1 thread, small budget" -- "$PARTICLE" bench -m "$M" --prompt-tokens 8 \
	--gen 4 --threads 1 --disk-bw 100 --json --expert-slots 8 --io direct
# streamed experts: the slots were faulted in at open, inside the open's time
if python3 -c 'import json,sys; o=json.load(open(sys.argv[1]))
assert 0 < o["slots_populate_s"] < o["open_s"], o' "$TMP/out"; then ok; else bad "slots faulted in at open"; fi
tok() { python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); print(o["first_token"], o["last_token"])' "$1"; }
if [ "$(tok "$TMP/a.json")" = "$(tok "$TMP/out")" ]; then ok; else bad "greedy tokens differ across threads/slots"; fi
# a prompt whose chunk needs more experts than the slots hold: waves of half the slots, each
# next wave read ahead while one computes (and used); PARTICLE_READ_AHEAD=0 reads none early;
# the same tokens either way
for ra in 1 0; do
	expect_exit 0 "bench prefill waves, read-ahead $ra" -- env PARTICLE_READ_AHEAD=$ra \
		"$PARTICLE" bench -m "$M" --prompt-tokens 32 --gen 4 --threads 2 --disk-bw 100 \
		--expert-slots 8 --io direct --no-profile --json
	cp "$TMP/out" "$TMP/ra$ra.json"
done
if python3 - "$TMP/ra1.json" "$TMP/ra0.json" <<'PY'
import json, sys
on, off = (json.load(open(f)) for f in sys.argv[1:3])
assert on["prefill_read_ahead"] > 0, on
assert on["prefill_read_ahead_used"] == on["prefill_read_ahead"], on
assert on["read_ahead"] > 0 and off["read_ahead"] == 0, (on, off)
assert off["prefill_read_ahead"] == 0 and off["prefill_read_ahead_used"] == 0, off
assert (on["first_token"], on["last_token"]) == (off["first_token"], off["last_token"])
PY
then ok; else bad "prefill next-wave read-ahead"; fi
expect_exit 0 "bench measures the disk" -- "$PARTICLE" bench -m "$M" --prompt-tokens 4 --gen 2 --json
expect_grep "$TMP/out" '"disk_bw_source": "\(O_DIRECT\|buffered\)"' "disk probe source"
# the probe: 4 trials before and 4 after the run, the floor uses the best, the median lies
# within them
if python3 - "$TMP/out" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
t = o["disk_probe_trials_bytes_per_s"]
assert len(t) == 8 and min(t) > 0, o
assert o["disk_bw_bytes_per_s"] == max(t), o
assert min(t) <= o["disk_bw_median_bytes_per_s"] <= max(t), o
assert "random reads" in o["disk_probe"], o
PY
then ok; else bad "probe json"; fi
expect_exit 0 "bench probe flags" -- "$PARTICLE" bench -m "$M" --prompt-tokens 4 --gen 2 --json \
	--probe-mib 1 --probe-depth 2
expect_grep "$TMP/out" '"disk_probe": "[^"]*2 x [0-9]* KiB random reads, 4 x [0-9.]* MiB' "probe flags used"
# Issue 21: the memory-bandwidth probe alone, and a run's bytes per token against it
expect_exit 0 "bench --membw" -- "$PARTICLE" bench --membw --membw-mib 8 --threads 2 --json
if python3 - "$TMP/out" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
assert o["membw_buffer_bytes"] == 8 << 20, o
assert o["membw_1t_bytes_per_s"] > 0 and o["membw_2t_bytes_per_s"] > 0, o
assert o["membw_1t_median_bytes_per_s"] <= o["membw_1t_bytes_per_s"], o
PY
then ok; else bad "membw json"; fi
expect_exit 0 "bench --membw-bps --no-profile" -- "$PARTICLE" bench -m "$M" --prompt-tokens 4 \
	--gen 2 --disk-bw 100 --membw-bps 1e10 --no-profile --json
if python3 - "$TMP/out" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
d = o["decode_bytes"]
assert o["decode_bytes_per_token"] == d["weights"] + d["head"] + d["embd_row"] + d["experts"] + d["kv"], o
assert min(d.values()) > 0 and o["membw_bytes_per_s"] == 1e10, o
f = o["decode_tps"] * o["decode_bytes_per_token"] / 1e10
assert abs(o["decode_fraction_of_membw"] - f) <= 1e-3 * f + 1e-4, o
PY
then ok; else bad "decode bytes json"; fi
expect_exit 2 "bench --membw-bps 0" -- "$PARTICLE" bench -m "$M" --membw-bps 0

# make bench's summary (tools/bench/summarize.py): llama.cpp's best empty-context and
# same-context (llama-bench "-d512") runs are separate baselines; prefill ignores the depth runs
cat >"$TMP/recs.jsonl" <<'EOF'
{"section": "A", "model": "/m/full.gguf", "engine": "particle", "rc": 0, "result": {"prefill_tps": 60.0, "decode_tps": 12.0, "decode_bytes_per_token": 2e9, "membw_bytes_per_s": 4e10}}
{"section": "A", "model": "/m/full.gguf", "engine": "llama-bench-repack-2t", "rc": 0, "result": {"prefill_tps": 30.0, "decode_tps": 15.0}}
{"section": "A", "model": "/m/full.gguf", "engine": "llama-bench-norepack-1t", "rc": 0, "result": {"prefill_tps": 20.0, "decode_tps": 11.0}}
{"section": "A", "model": "/m/full.gguf", "engine": "llama-bench-repack-2t-d512", "rc": 0, "result": {"prefill_tps": null, "decode_tps": 10.0}}
{"section": "A", "model": "/m/full.gguf", "engine": "llama-bench-norepack-2t-d512", "rc": 0, "result": {"prefill_tps": null, "decode_tps": 8.0}}
{"section": "A", "model": "/m/full.gguf", "engine": "llama-bench-norepack-2t-d512", "rc": 0, "result": {"prefill_tps": null, "decode_tps": 9.6}}
EOF
echo '{}' >"$TMP/facts.json"
if python3 "$(dirname "$0")/../../tools/bench/summarize.py" "$TMP/recs.jsonl" "$TMP/facts.json" "$TMP/sum.json" \
	>"$TMP/sum.md" && python3 - "$TMP/sum.json" <<'PY'
import json, sys
rows = {s["engine"]: s for s in json.load(open(sys.argv[1]))["summary"]}
p = rows["particle"]
assert abs(p["decode_ratio_vs_llama_best"] - 0.8) < 1e-9, p
assert p["decode_baseline_best"] == "llama-bench-repack-2t", p
assert abs(p["decode_ratio_vs_llama_best_same_ctx"] - 1.2) < 1e-9, p
assert p["decode_baseline_best_same_ctx"] == "llama-bench-repack-2t-d512", p
assert abs(p["prefill_ratio_vs_llama_best"] - 2.0) < 1e-9, p
assert abs(rows["llama-bench-norepack-2t-d512"]["decode_tps"] - 8.8) < 1e-9  # median of two
PY
then ok; else bad "summarize: empty- and same-context baselines"; fi
expect_grep "$TMP/sum.md" "1.20x | llama-bench-repack-2t-d512" "summary table: same-context column"
finish
