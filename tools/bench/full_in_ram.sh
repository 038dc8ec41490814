#!/bin/bash
# full_in_ram.sh - the short in-RAM comparison of one `full` checkpoint (issue 21) that fits a
# quiet half hour: particle against llama.cpp's own llama-bench (both builds of
# tools/bench/llama_bench.sh: repack / norepack, and the repack build without mmap), 2 threads, alternating rounds; then one
# 4,096-token prompt each; the memory-bandwidth probe before and after.  Section A of
# `make bench` is the complete version (1 and 2 threads, node-llama-cpp, --io direct, every
# full shape); this one is what was measured in session 6 (docs/BENCHMARKS.md section 0.0).
#
#   tools/bench/full_in_ram.sh OUTDIR MODEL SCRATCH PARTICLE [PARTICLE2]
# SCRATCH holds the llama-bench builds (`sh tools/bench/llama_bench.sh build SCRATCH`);
# PARTICLE2 (optional) is a second particle binary run beside the first in every round.
# Writes OUTDIR/results.jsonl (one line per run: engine, rc, load average, end time, tok/s).
# Environment: ROUNDS (3), LONG_ROUNDS (1), THREADS (2), DEPTH_ROUNDS (0): rounds of decode
# after 4,096 tokens of context (particle: a 4,096-token prompt then 32 tokens; llama-bench
# -p 0 -n 32 -d 4096 -fa 0,1, its repack-nommap build: flash attention off decodes 1.6-1.7x
# faster there than on, which its default "auto" picks; ~12 minutes a round).
# PROBE_EACH=1: the bandwidth probe again right before every particle run (recorded as
# "membw-NAME"), and that run's fraction of the probe taken against it: this host's memory
# bandwidth swings 2x within minutes, so a probe minutes away says little about one run.
# LB_SAME_DEPTH=1: each round also runs llama-bench's decode after as many tokens of context
# as particle's prompt (LB_DEPTH_VARIANT, -p 0 -n 128 -d 512, flash attention off and on, the
# better kept; recorded as "llama-bench-VARIANT-Nt-d512"): particle decodes after its
# 512-token prompt, llama-bench's tg128 from an empty context, so the plain rows are not like
# for like (Gemma 4 attends over ~124 MB of KV a token at 576 positions; BENCHMARKS 0.17).
# LB_DEPTH_VARIANT: the llama-bench variant of those runs and of DEPTH_ROUNDS (default
# repack-nommap; avx2-nommap beside PARTICLE_CPU=avx2).
# PARTICLE_ARGS: extra flags for every particle run (e.g. --repack, particle's best
# configuration in RAM); LB_VARIANTS: the llama-bench variants of each round (default
# "norepack repack repack-nommap"; on the Zen 5 host repack-nommap was the best in every
# round of sessions 18-19).
set -u
O=$1 M=$2 S=$3 P=$4 P2=${5:-}
: "${ROUNDS:=3}" "${LONG_ROUNDS:=1}" "${THREADS:=2}" "${DEPTH_ROUNDS:=0}"
# LB_VARIANTS set but empty means none (particle alone): only an unset one takes the default
: "${PROBE_EACH:=0}" "${LB_SAME_DEPTH:=0}" "${PARTICLE_ARGS:=}" "${LB_VARIANTS=norepack repack repack-nommap}" \
	"${LB_DEPTH_VARIANT:=repack-nommap}"
LB="sh $(dirname "$0")/llama_bench.sh run $S"
R=$O/results.jsonl
. "$(dirname "$0")/resident.sh" # resident FILE; HUGE: FileHugePages after it
mkdir -p "$O"
: >"$R"
la() { cut -d' ' -f1 /proc/loadavg; }
rec() { # NAME RC FILE
	python3 - "$@" "$(la)" "$(date -u +%T)" "$HUGE" >>"$R" <<'PY'
import json, sys
name, rc, f, load, t, huge = sys.argv[1:7]
try:
    o = json.loads(open(f).read().strip().splitlines()[-1])
except Exception as e:
    o = {"error": str(e)}
r = {"engine": name, "rc": int(rc), "load": float(load), "end": t,
     "file_huge_pages_bytes": int(float(huge))}
for k in ("prefill_tps", "decode_tps", "pp", "decode_bytes_per_token", "decode_fraction_of_membw",
          "membw_1t_bytes_per_s", "membw_2t_bytes_per_s", "peak_rss_bytes", "prompt_tokens",
          "build", "threads", "decode_phase_s_per_token", "decode_head_s_per_token", "depth",
          "gen_tokens", "flash_attn", "repacked_bytes", "batch", "memory_budget_bytes"):
    if k in o:
        r[k] = o[k]
print(json.dumps(r))
PY
	tail -1 "$R"
}
echo "start $(date -u +%T) load $(la)"
# into the page cache (both engines map the file): other files' pages out first, then check
# it is all resident - a partly cached model is re-read from disk during the run and its
# figures are the disk's (session 7 lost two runs to a 10 GB file still cached)
[ "$(id -u)" = 0 ] && { sync; echo 3 >/proc/sys/vm/drop_caches; }
cat "$M" >/dev/null
cat "$M" >/dev/null
if command -v fincore >/dev/null; then
	res=$(fincore -b -n -o RES "$M" | tr -d ' ')
	size=$(stat -c %s "$M")
	echo "page cache holds $res of $size bytes of $M"
	[ "$res" -ge $((size - size / 100)) ] ||
		echo "warning: $M is not fully cached: in-RAM figures will include disk reads" >&2
fi
"$P" bench --membw --json --threads "$THREADS" >"$O/bw.json" 2>"$O/bw.err"
rec membw $? "$O/bw.json"
probe_bps() { # FILE: the THREADS-thread figure of a `bench --membw --json` line
	python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["membw_%st_bytes_per_s" % sys.argv[2]]))' "$1" "$THREADS"
}
BW=$(probe_bps "$O/bw.json")
# Before every run: the file whole in the page cache, in large folios (resident.sh).
warm() { resident "$M"; }
pt() { # NAME BIN PROMPT GEN
	warm
	local bw=$BW
	if [ "$PROBE_EACH" = 1 ]; then
		"$P" bench --membw --json --threads "$THREADS" >"$O/bw1.json" 2>"$O/bw.err"
		rec "membw-$1" $? "$O/bw1.json"
		bw=$(probe_bps "$O/bw1.json")
	fi
	"$2" bench -m "$M" --prompt-tokens "$3" --gen "$4" --json --no-lock --no-profile \
		--membw-bps "$bw" --threads "$THREADS" --io mmap $PARTICLE_ARGS >"$O/p.json" 2>"$O/p.err"
	rec "$1" $? "$O/p.json"
}
lb() { # VARIANT PROMPTS GEN [DEPTH FA]
	warm
	$LB "$1" "$M" "$THREADS" "$2" "$3" "${4:-0}" "${5:-auto}" >"$O/l.json" 2>"$O/l.err"
	rec "llama-bench-$1-${THREADS}t${4:+-d$4}" $? "$O/l.json"
}
r=1
while [ $r -le "$ROUNDS" ]; do
	pt particle "$P" 512 128
	[ -n "$P2" ] && pt particle2 "$P2" 512 128
	for v in $LB_VARIANTS; do lb "$v" 512 128; done
	[ "$LB_SAME_DEPTH" = 1 ] && lb "$LB_DEPTH_VARIANT" 0 128 512 0,1
	echo "round $r done $(date -u +%T)"
	r=$((r + 1))
done
r=1
while [ $r -le "$LONG_ROUNDS" ]; do
	pt particle-pp4096 "$P" 4096 1
	[ -n "$P2" ] && pt particle2-pp4096 "$P2" 4096 1
	for v in $LB_VARIANTS; do lb "$v" 4096 0; done
	echo "pp4096 round $r done $(date -u +%T)"
	r=$((r + 1))
done
r=1
while [ $r -le "$DEPTH_ROUNDS" ]; do
	pt particle-d4096 "$P" 4096 32
	[ -n "$P2" ] && pt particle2-d4096 "$P2" 4096 32
	lb "$LB_DEPTH_VARIANT" 0 32 4096 0,1
	echo "depth round $r done $(date -u +%T)"
	r=$((r + 1))
done
"$P" bench --membw --json --threads "$THREADS" >"$O/bw.json" 2>"$O/bw.err"
rec membw $? "$O/bw.json"
echo "end $(date -u +%T)"
