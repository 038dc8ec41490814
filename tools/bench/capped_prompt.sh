#!/bin/bash
# capped_prompt.sh - issue 21's memory-cap goal for one `full` checkpoint: the time to the
# first token of a long prompt (4,096 tokens) under a memory cap, cold, against the same
# prompt in RAM, alternating rounds.  Each round:
#   ram     the file whole in the page cache (resident.sh), --io mmap --repack: particle's
#           best configuration in RAM (serve's default there);
#   gguf    page cache dropped, the process in its own cgroup-v1 memory cgroup of $CAP (page
#           cache counts), --memory 256 MiB under it, experts read from the plain GGUF
#           and nothing copied (bench's default: a pack written with `pack --repack` is left
#           unused);
#   gguf-repack  as gguf with --repack: the resident weights copied, the experts as stored
#           (serve's and chat's default there); only without an interleaved MODEL.xpack,
#           which --repack would read (that is the pack variant);
#   pack    as gguf with --repack, when MODEL.xpack is an interleaved pack (`particle pack
#           MODEL --repack`): the experts arrive interleaved, the resident weights are copied.
#
#   tools/bench/capped_prompt.sh OUTDIR MODEL PARTICLE
# Writes OUTDIR/results.jsonl (one line per run: variant, rc, load average, end time, the
# cgroup's peak usage and OOM kills, and bench --json's ttft_s, prefill_tps, decode_tps,
# read_wait_s, prefill_phase_s, peak_rss_bytes ...).  Needs root (cgroups, drop_caches).
# Environment: ROUNDS (2), CAP (6G), PROMPT (4096), GEN (16), THREADS (2), VARIANTS ("ram
# gguf gguf-repack pack"; each capped one skipped where the pack says it would not measure it),
# CAPPED_ARGS (more bench flags for the capped variants, e.g. "--batch 4096"; none).
set -u
O=$1 M=$2 P=$3
: "${ROUNDS:=2}" "${CAP:=6G}" "${PROMPT:=4096}" "${GEN:=16}" "${THREADS:=2}" \
	"${VARIANTS:=ram gguf gguf-repack pack}" "${CAPPED_ARGS:=}"
CG=/sys/fs/cgroup/memory
if [ "$(id -u)" -ne 0 ] || [ ! -w "$CG" ]; then
	echo "capped_prompt: needs root and the cgroup v1 memory controller at $CG" >&2
	exit 2
fi
[ -f "$M" ] || { echo "capped_prompt: no model $M" >&2; exit 2; }
[ -x "$P" ] || { echo "capped_prompt: no particle binary $P" >&2; exit 2; }
cap=$(python3 -c 'import sys; s=sys.argv[1]; m={"K":1<<10,"M":1<<20,"G":1<<30}
print(int(float(s[:-1])*m[s[-1]]) if s[-1] in m else int(s))' "$CAP") || exit 2
budget=$((cap - 256 * 1048576))
# the pack variant only where MODEL.xpack's manifest says it is interleaved (layout x16)
has_x16_pack() { [ -f "$M.xpack.json" ] && grep -q '"x16"' "$M.xpack.json"; }
. "$(dirname "$0")/resident.sh" # resident FILE; HUGE
mkdir -p "$O"
R=$O/results.jsonl
: >"$R"
la() { cut -d' ' -f1 /proc/loadavg; }
rec() { # VARIANT RC FILE CGPEAK OOMKILLS CGSTAT
	python3 - "$@" "$(la)" "$(date -u +%T)" >>"$R" <<'PY'
import json, sys
name, rc, f, peak, kills, cgstat, load, t = sys.argv[1:9]
try:
    o = json.loads(open(f).read().strip().splitlines()[-1])
except Exception as e:
    o = {"error": str(e)}
r = {"variant": name, "rc": int(rc), "load": float(load), "end": t,
     "cg_max_usage": int(peak or 0), "cg_oom_kills": int(kills or 0)}
# the cgroup's reclaim: times the limit was hit, major faults, file pages read again after
# reclaim took them (the mapped weights left in the file)
for kv in cgstat.split(","):
    if "=" in kv:
        k, v = kv.split("=", 1)
        r["cg_" + k] = int(v)
for k in ("ttft_s", "prefill_tps", "decode_tps", "read_wait_s", "prefill_read_wait_s",
          "prefill_phase_s", "decode_phase_s_per_token", "peak_rss_bytes", "prompt_tokens",
          "gen_tokens", "bytes_read_total", "hit_rate", "slots_per_layer", "repack_s", "open_s",
          "slots_populate_s", "batch", "io_engine", "repacked_bytes",
          "build"):
    if k in o:
        r[k] = o[k]
print(json.dumps(r))
PY
	tail -1 "$R"
}
run_ram() {
	resident "$M"
	"$P" bench -m "$M" --prompt-tokens "$PROMPT" --gen "$GEN" --threads "$THREADS" --io mmap \
		--repack --json --no-lock --no-profile >"$O/p.json" 2>"$O/p.err"
	rec ram $? "$O/p.json" 0 0 ""
}
run_capped() { # VARIANT EXTRA-FLAGS...
	local v=$1 d=$CG/pt_capped_prompt
	shift
	[ -d "$d" ] && rmdir "$d" 2>/dev/null
	mkdir -p "$d" && echo "$cap" >"$d/memory.limit_in_bytes" || exit 1
	sync
	echo 3 >/proc/sys/vm/drop_caches
	sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' sh "$d" "$P" bench -m "$M" \
		--prompt-tokens "$PROMPT" --gen "$GEN" --threads "$THREADS" --memory "$budget" \
		--json --no-lock --no-profile $CAPPED_ARGS "$@" >"$O/p.json" 2>"$O/p.err"
	local rc=$?
	rec "$v" $rc "$O/p.json" "$(cat "$d/memory.max_usage_in_bytes")" \
		"$(sed -n 's/^oom_kill //p' "$d/memory.oom_control")" \
		"failcnt=$(cat "$d/memory.failcnt"),$(awk '$1 == "pgmajfault" ||
			$1 == "workingset_refault_file" { printf "%s=%s,", $1, $2 }' "$d/memory.stat")"
	rmdir "$d" 2>/dev/null
}
echo "start $(date -u +%T) load $(la): $M, cap $CAP (--memory $budget), prompt $PROMPT"
r=1
while [ $r -le "$ROUNDS" ]; do
	for v in $VARIANTS; do
		case $v in
		ram) run_ram ;;
		gguf) run_capped gguf ;;
		gguf-repack) if has_x16_pack; then echo "capped_prompt: $M.xpack is interleaved:" \
			"gguf-repack would read it; skipped"; else run_capped gguf-repack --repack; fi ;;
		pack) if has_x16_pack; then run_capped pack --repack; else
			echo "capped_prompt: no interleaved $M.xpack: pack variant skipped"; fi ;;
		*) echo "capped_prompt: unknown variant $v" >&2; exit 2 ;;
		esac
	done
	echo "round $r done $(date -u +%T)"
	r=$((r + 1))
done
python3 - "$R" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ttft = {}
for r in rows:
    if r["rc"] == 0 and "ttft_s" in r:
        ttft.setdefault(r["variant"], []).append(r["ttft_s"])
med = {k: statistics.median(v) for k, v in ttft.items()}
for k, v in ttft.items():
    line = "%-5s ttft %s s, median %.1f s" % (k, " / ".join("%.1f" % x for x in v), med[k])
    if k != "ram" and "ram" in med:
        line += ", %.2fx the in-RAM median (goal 1.1x)" % (med[k] / med["ram"])
    print(line)
PY
echo "end $(date -u +%T)"
