#!/bin/sh
# run.sh - `make bench`: particle against llama.cpp (tools/oracle/oracle.mjs bench, the same
# GGUF, the same thread count), alternating runs, medians in tools/bench/summarize.py.
#   A. in RAM: `small` Q4_K_M of each arch (prompt 512, gen 128), then the `full` checkpoints
#      that fit MemAvailable (plus a 4,096-token prompt); against node-llama-cpp and against
#      llama.cpp's own llama-bench built from source (tools/bench/llama_bench.sh: repack and
#      no-repack builds, 1 and 2 threads; the best is the "llama.cpp best" baseline); each
#      round starts with the memory-bandwidth probe (particle bench --membw) whose figure
#      gives particle's decode_fraction_of_membw;
#   B. memory-capped: `full` Q4_K_M models, each process in its own cgroup-v1 memory cgroup
#      (page cache counts) at $CAP, page cache dropped before every run; llama.cpp with its
#      default mmap vs particle with --memory just under the cap; then llama.cpp's smallest
#      surviving cap from $LLAMA_CAPS.  Each model runs at every level of $FULL_SKEWS
#      (uniform routing and the calibrated `real` locality), switched in place with
#      `particle mkmodel --reroute` and restored to uniform (skew 0) afterwards, also on
#      exit or interrupt; its routing report (`particle routing --json`) is recorded per level;
#   C. routing: `small` qwen3moe at several --router-skew levels (one file, rerouted in
#      place), routing report (text + generated) and a run with the expert cache at ~40 %.
#   D. issue 17's full shapes that do not fit RAM at all (gpt-oss-120b ~61 GB, GLM-4.5-Air
#      ~60-70 GB at Q4_K_M): particle under $CAP, llama.cpp under the same cap and with all
#      the RAM, with a timeout; the disk space is checked first (tools/bench/big_moe.sh);
#   L. issue 21's cap goal: a 4,096-token prompt under $CAP, cold, against the same prompt in
#      RAM (--repack), alternating (tools/bench/capped_prompt.sh): from the plain GGUF (as
#      stored, and with the resident weights copied: serve's default), and
#      from MODEL.xpack when it is an interleaved pack (`particle pack MODEL --repack`, ~17 GB
#      beside each `full` file; not written here); $LONG_REPS rounds (2) each `full` shape;
#   S. `particle serve` (tools/bench/server_bench.mjs): aggregate decode tok/s with 1, 2, 4, 8
#      concurrent streams, --parallel 1 vs $SERVER_PARALLEL, expert bytes read per generated
#      token, TTFT of a ~4000-token follow-up turn with and without prefix reuse; on the
#      `full` qwen3moe under $CAP (in its cgroup) and in RAM on the `small` one.
# Needs root (cgroups, drop_caches).  Every record goes to $OUT/results.jsonl with the load
# average at its start; exit 2 without root.
# Environment: REPS (3), THREADS (2), CAP (6G), FULL_DIR (/work/models-full), SMALL_DIR
# (models), PROFILE (0: particle runs with --no-profile; 1: the expert profile warms them),
# FULL_PROMPTS ("512,4096": llama-bench prompt sizes on full models), LLAMA_SRC (llama.cpp
# source for llama-bench: git dir / bundle; default node-llama-cpp's bundle),
# SERVER_PARALLEL (4: section S compares --parallel 1 with it), SECTIONS ("A B C S D Q L"), FULL_ARCHS ("bailingmoe2 qwen3moe gemma4"), CAP_PROMPT (32),
# CAP_GEN (32), LLAMA_CAPS ("12G 16G"), SKEWS ("0 2 5 real 16"), FULL_SKEWS ("0 real"),
# ROUTING_TOKENS (64: text tokens of each routing report), ROUTING_GEN (64: generated after),
# LB_SAME_DEPTH (1: llama-bench also decodes at a 512-token depth, section A's same-context
# baseline; 0: only its empty-context tg128), LB_DEPTH_THREADS ($THREADS: thread counts of those runs),
# ENGINES_B ("particle llama.cpp": who runs at the cap in section B; llama.cpp's result does not
# depend on particle's code, so it can be measured once and left out of later runs),
# OUT (build/bench), BASELINE (another particle binary, e.g. an older build, run beside
# particle in section A), DISK_BPS (unset: no limit; else section B's processes read the
# model's disk at most this many bytes/s through a cgroup-v1 blkio throttle, e.g.
# 1400000000 for a 1.4 GB/s laptop NVMe: a steady disk instead of this VM's swinging one).  Full models: $FULL_DIR/full-ARCH-q4_k_m.gguf (or ARCH-full-...).
set -u
if [ "$(id -u)" -ne 0 ]; then
	echo "bench: needs root (memory cgroups and /proc/sys/vm/drop_caches); run as root" >&2
	exit 2
fi
CG=/sys/fs/cgroup/memory
if [ ! -w "$CG" ]; then
	echo "bench: cgroup v1 memory controller not writable at $CG" >&2
	exit 2
fi
if [ -n "${DISK_BPS:-}" ] && [ ! -w /sys/fs/cgroup/blkio ]; then
	echo "bench: DISK_BPS needs the cgroup v1 blkio controller at /sys/fs/cgroup/blkio" >&2
	exit 2
fi
BLK_FILE=
: "${REPS:=3}" "${THREADS:=2}" "${CAP:=6G}" "${FULL_DIR:=/work/models-full}"
: "${SMALL_DIR:=models}" "${SECTIONS:=A B C S D Q L}" "${FULL_ARCHS:=bailingmoe2 qwen3moe gemma4}"
: "${CAP_PROMPT:=32}" "${CAP_GEN:=32}" "${LLAMA_CAPS:=12G 16G}"
: "${SKEWS:=0 2 5 real 16}" "${FULL_SKEWS:=0 real}" "${OUT:=build/bench}" "${BASELINE:=}"
: "${ROUTING_TOKENS:=64}" "${ROUTING_GEN:=64}" "${ENGINES_B:=particle llama.cpp}"
: "${LB_SAME_DEPTH:=1}" "${LB_DEPTH_THREADS:=$THREADS}"
: "${FULL_PROMPTS:=512,4096}"
P=build/particle
# The expert-popularity profile (issue 21) warms the cache from earlier runs: off here so
# that every rep is as cold as the first (PROFILE=1 keeps it on, to measure the warm-up).
NOPROF=--no-profile
[ "${PROFILE:-0}" = 1 ] && NOPROF=
ORACLE="node tools/oracle/oracle.mjs"
mkdir -p "$OUT" "$SMALL_DIR"
RES="$OUT/results.jsonl"
: >"$RES"

bytes() { # 6G -> bytes
	python3 -c 'import sys; s=sys.argv[1]; m={"K":1<<10,"M":1<<20,"G":1<<30,"T":1<<40}
print(int(float(s[:-1])*m[s[-1]]) if s[-1] in m else int(s))' "$1"
}
loadavg() { cut -d' ' -f1 /proc/loadavg; }
# record SECTION ENGINE MODEL EXTRA-JSON-FIELDS RESULT-FILE RC
record() {
	python3 - "$@" >>"$RES" <<'PY'
import json, sys
sec, eng, model, extra, path, rc = sys.argv[1:7]
o = {"section": sec, "engine": eng, "model": model, "rc": int(rc)}
o.update(json.loads(extra))
try:
    line = [l for l in open(path).read().splitlines() if l.startswith("{")][-1]
    o["result"] = json.loads(line)
except Exception:
    o["result"] = None
print(json.dumps(o))
PY
}
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# disk_of FILE: major:minor of the whole disk holding FILE (blkio throttles whole disks).
disk_of() {
	dd_dev=$(stat -c '%Hd:%Ld' "$1") || return 1
	if [ -e "/sys/dev/block/$dd_dev/partition" ]; then
		cat "/sys/dev/block/$dd_dev/../dev"
	else
		echo "$dd_dev"
	fi
}

# in_cgroup NAME LIMIT-BYTES OUTFILE CMD...: runs CMD in a fresh child memory cgroup (and,
# with DISK_BPS, a blkio cgroup throttling reads of the disk holding $BLK_FILE); prints
# '"cg_max_usage":N,"cg_oom_kills":N' for the record.
in_cgroup() {
	cg_name=$1 cg_lim=$2 cg_out=$3; shift 3
	d="$CG/$cg_name" bd=
	[ -d "$d" ] && rmdir "$d" 2>/dev/null
	mkdir -p "$d"
	echo "$cg_lim" >"$d/memory.limit_in_bytes"
	if [ -n "${DISK_BPS:-}" ]; then
		bd=/sys/fs/cgroup/blkio/$cg_name
		mkdir -p "$bd" && echo "$(disk_of "$BLK_FILE") $DISK_BPS" \
			>"$bd/blkio.throttle.read_bps_device" ||
			{ echo "bench: cannot throttle reads of $BLK_FILE's disk" >&2; exit 2; }
	fi
	sh -c 'echo $$ >"$1/cgroup.procs"; [ -z "$2" ] || echo $$ >"$2/cgroup.procs"; shift 2
		exec "$@"' sh "$d" "$bd" "$@" >"$cg_out" 2>"$cg_out.err"
	rc=$?
	[ -n "$bd" ] && rmdir "$bd" 2>/dev/null
	kills=$(sed -n 's/^oom_kill //p' "$d/memory.oom_control")
	CGX="\"cg_max_usage\": $(cat "$d/memory.max_usage_in_bytes"), \"cg_oom_kills\": ${kills:-0}"
	# move nothing back: the process is gone; the empty cgroup can be removed
	rmdir "$d" 2>/dev/null
	return $rc
}

facts() {
	python3 - "$OUT/facts.json" <<'PY'
import json, os, re, sys
cpu = open("/proc/cpuinfo").read()
model = re.search(r"model name\s*:\s*(.*)", cpu).group(1)
flags = re.search(r"flags\s*:\s*(.*)", cpu).group(1).split()
keep = [f for f in flags if re.match(r"(avx|fma|f16c|bmi|sse4|amx)", f)]
mem = int(re.search(r"MemTotal:\s*(\d+)", open("/proc/meminfo").read()).group(1)) * 1024
json.dump({"cpu": model, "cores": os.cpu_count(), "isa_flags": keep, "mem_total_bytes": mem,
           "kernel": os.uname().release}, open(sys.argv[1], "w"))
PY
	echo "bench: facts $(cat "$OUT/facts.json")"
}

# a_run ENGINE MODEL REP CMD...: one section-A record.
. tools/bench/resident.sh # resident MODEL before every in-RAM run; HUGE recorded with it

a_run() {
	eng=$1 am=$2 ar=$3; shift 3
	resident "$am"
	la=$(loadavg)
	"$@" >"$OUT/a.out" 2>"$OUT/a.err"
	record A "$eng" "$am" "{\"rep\": $ar, \"load\": $la, \"file_huge_pages_bytes\": $HUGE}" \
		"$OUT/a.out" $?
}

# In RAM: particle with --io mmap (the file fits, as llama.cpp's default mmap), particle with
# the engine's streaming store ("particle-direct"; the default maps a model that fits), $BASELINE, llama.cpp; then both
# at one thread ("-1t": no barrier spinning, the fair figure on a loaded host).
# llama.cpp's own llama-bench (tools/bench/llama_bench.sh: built from source in $OUT), both
# builds (repack / no repack; the repack build also without mmap, which fits where its mapping
# beside the copy does not) at 1 and 2 threads: summarize.py takes the best of the six as
# the "llama.cpp-best" baseline; the node-llama-cpp rows stay beside it ("llama.cpp").
# With LB_SAME_DEPTH=1 each build also decodes after 512 tokens of context (at
# $LB_DEPTH_THREADS threads): the "same context" baseline, particle's own decode context.
LB_OK=
lb_runs() { # MODEL REP PROMPTS
	[ -n "$LB_OK" ] || return 0
	for v in repack norepack repack-nommap; do
		for t in 1 2; do
			resident "$1"
			la=$(loadavg)
			sh tools/bench/llama_bench.sh run "$OUT" "$v" "$1" "$t" "$3" 128 \
				>"$OUT/a.out" 2>"$OUT/a.err"
			record A "llama-bench-$v-${t}t" "$1" \
				"{\"rep\": $2, \"load\": $la, \"file_huge_pages_bytes\": $HUGE}" "$OUT/a.out" $?
		done
		# decode at particle's context: llama-bench's tg128 above starts from an empty
		# cache, particle's decode follows its 512-token prompt (-p 0 -n 128 -d 512, flash
		# attention off and on, the better kept); summarize.py's same-context baseline
		[ "$LB_SAME_DEPTH" = 1 ] || continue
		for t in $LB_DEPTH_THREADS; do
			resident "$1"
			la=$(loadavg)
			sh tools/bench/llama_bench.sh run "$OUT" "$v" "$1" "$t" 0 128 512 0,1 \
				>"$OUT/a.out" 2>"$OUT/a.err"
			record A "llama-bench-$v-${t}t-d512" "$1" \
				"{\"rep\": $2, \"load\": $la, \"file_huge_pages_bytes\": $HUGE}" "$OUT/a.out" $?
		done
	done
}

# a_model MODEL PROMPTS: one in-RAM model, $REPS alternating rounds.
a_model() {
	m=$1 lpp=$2
	r=1
	while [ "$r" -le "$REPS" ]; do
		# the physical limit in the same round: memory read bandwidth at 1, 2 and $THREADS
		# threads; particle's decode_fraction_of_membw uses the $THREADS figure
		la=$(loadavg)
		$P bench --membw --json --threads "$THREADS" >"$OUT/a.out" 2>"$OUT/a.err"
		record A membw "$m" "{\"rep\": $r, \"load\": $la}" "$OUT/a.out" $?
		bw=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["membw_%st_bytes_per_s" % sys.argv[2]]))' \
			"$OUT/a.out" "$THREADS" 2>/dev/null) || bw=
		pb="bench -m $m --prompt-tokens 512 --gen 128 --json --no-lock $NOPROF ${bw:+--membw-bps $bw}"
		a_run particle "$m" $r $P $pb --threads "$THREADS" --io mmap
		a_run particle-direct "$m" $r $P $pb --threads "$THREADS" --io direct
		[ -n "$BASELINE" ] &&
			a_run particle-baseline "$m" $r $BASELINE $pb --threads "$THREADS" --io mmap
		a_run llama.cpp "$m" $r $ORACLE bench "$m" --threads "$THREADS" --prompt 512 --gen 128
		a_run particle-1t "$m" $r $P $pb --threads 1 --io mmap
		a_run llama.cpp-1t "$m" $r $ORACLE bench "$m" --threads 1 --prompt 512 --gen 128
		case ",$lpp," in *,4096,*) # the long prompt (llama-bench's pp4096 beside it)
			a_run particle-pp4096 "$m" $r $P bench -m "$m" --prompt-tokens 4096 --gen 1 \
				--json --no-lock $NOPROF --threads "$THREADS" --io mmap ;;
		esac
		lb_runs "$m" $r "$lpp"
		echo "bench: A $m rep $r done (load $la)"
		r=$((r + 1))
	done
}

section_a() {
	if sh tools/bench/llama_bench.sh build "$OUT"; then LB_OK=1; else
		echo "bench: llama-bench unavailable; section A compares with node-llama-cpp only" >&2
	fi
	for arch in qwen3moe gemma4 bailingmoe2; do
		m="$SMALL_DIR/small-$arch-q4_k_m.gguf"
		[ -f "$m" ] || $P mkmodel --arch "$arch" --preset small --quant q4_k_m -o "$m" || return 1
		a_model "$m" 512
	done
	# the `full` checkpoints in RAM too (experts mapped): only when the file fits in
	# MemAvailable with 2 GiB to spare (llama.cpp's repack build copies the repacked weights)
	for arch in $FULL_ARCHS; do
		m="$FULL_DIR/full-$arch-q4_k_m.gguf"
		[ -f "$m" ] || m="$FULL_DIR/$arch-full-q4_k_m.gguf"
		if [ ! -f "$m" ]; then
			echo "bench: A: no full $arch checkpoint in $FULL_DIR; skipped (make it with: $P" \
				"mkmodel --arch $arch --preset full --quant q4_k_m -o $m, needs ~20 GB disk)" >&2
			continue
		fi
		avail=$(sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo)
		size=$(stat -c %s "$m")
		if [ $((avail * 1024)) -lt $((size + (2 << 30))) ]; then
			echo "bench: A: $m ($size bytes) does not fit MemAvailable $((avail * 1024)) with" \
				"2 GiB to spare; in-RAM run skipped" >&2
			continue
		fi
		a_model "$m" "$FULL_PROMPTS"
	done
}

# cap_pair MODEL CAP-BYTES REP: one cold particle run and one cold llama.cpp run at the cap.
cap_pair() {
	cm=$1 clim=$2 cr=$3 csk=$4 crc=- BLK_FILE=$1
	budget=$((clim - clim / 20)) # just under the cap: 95 %
	case " $ENGINES_B " in *" particle "*)
		drop_caches
		la=$(loadavg)
		# a throttled disk's rate is known: the floor uses it (the probe's short trials
		# burst above a blkio limit)
		in_cgroup pt_bench_particle "$clim" "$OUT/b.out" $P bench -m "$cm" --threads "$THREADS" \
			--prompt-tokens "$CAP_PROMPT" --gen "$CAP_GEN" --memory "$budget" --json --no-lock $NOPROF \
			${DISK_BPS:+--disk-bw $((DISK_BPS / 1000000))}
		rc=$?
		record B particle "$cm" "{\"rep\": $cr, \"load\": $la, \"cap\": $clim, \"skew\": \"$csk\", \"disk_bps\": ${DISK_BPS:-0}, $CGX}" \
			"$OUT/b.out" $rc ;;
	esac
	case " $ENGINES_B " in *" llama.cpp "*)
		drop_caches
		la=$(loadavg)
		in_cgroup pt_bench_llama "$clim" "$OUT/b.out" $ORACLE bench "$cm" --threads "$THREADS" \
			--prompt "$CAP_PROMPT" --gen "$CAP_GEN"
		crc=$?
		record B llama.cpp "$cm" "{\"rep\": $cr, \"load\": $la, \"cap\": $clim, \"skew\": \"$csk\", \"disk_bps\": ${DISK_BPS:-0}, $CGX}" \
			"$OUT/b.out" $crc ;;
	esac
	echo "bench: B $cm skew $csk rep $cr done (llama.cpp rc $crc, load $(loadavg))"
}

# reroute MODEL LEVEL: switches MODEL's routing in place (only the tensors the level changes).
reroute() {
	$P mkmodel --reroute "$1" --router-skew "$2" --threads "$THREADS" ||
		{ echo "bench: reroute $1 to $2 failed" >&2; return 1; }
}

# A file this script rerouted, restored to uniform routing when done, on exit or interrupt.
REROUTED=
restore() {
	if [ -n "$REROUTED" ]; then
		echo "bench: restoring $REROUTED to uniform routing" >&2
		reroute "$REROUTED" 0
		REROUTED=
	fi
}
trap 'restore' EXIT
trap 'restore; exit 130' INT TERM

# routing_report SECTION MODEL SKEW: `particle routing` (text and generated tokens) recorded.
routing_report() {
	la=$(loadavg)
	$P routing -m "$2" --tokens "$ROUTING_TOKENS" --gen "$ROUTING_GEN" --json \
		>"$OUT/r.out" 2>"$OUT/r.err"
	record "$1" routing "$2" "{\"skew\": \"$3\", \"load\": $la}" "$OUT/r.out" $?
	echo "bench: $1 routing report $2 skew $3 done"
}

section_b() {
	lim=$(bytes "$CAP")
	for arch in $FULL_ARCHS; do
		m="$FULL_DIR/full-$arch-q4_k_m.gguf"
		[ -f "$m" ] || m="$FULL_DIR/$arch-full-q4_k_m.gguf"
		if [ ! -f "$m" ]; then
			echo "bench: $FULL_DIR/full-$arch-q4_k_m.gguf missing: make it with: $P mkmodel" \
				"--arch $arch --preset full --quant q4_k_m -o $m (needs ~20 GB of disk); skipped" >&2
			continue
		fi
		for sk in $FULL_SKEWS; do
			# every level, 0 too: the file may have been left rerouted by hand
			[ "$sk" != 0 ] && REROUTED=$m
			reroute "$m" "$sk" || { restore; continue; }
			routing_report B "$m" "$sk"
			r=1
			while [ "$r" -le "$REPS" ]; do
				cap_pair "$m" "$lim" "$r" "$sk"
				r=$((r + 1))
			done
			# llama.cpp's smallest surviving cap (one try per size, cold)
			for c in $LLAMA_CAPS; do
				cl=$(bytes "$c") BLK_FILE=$m
				drop_caches
				la=$(loadavg)
				in_cgroup pt_bench_llama "$cl" "$OUT/b.out" $ORACLE bench "$m" \
					--threads "$THREADS" --prompt "$CAP_PROMPT" --gen "$CAP_GEN"
				rc=$?
				record B-llama-cap llama.cpp "$m" \
					"{\"load\": $la, \"cap\": $cl, \"skew\": \"$sk\", $CGX}" "$OUT/b.out" $rc
				echo "bench: llama.cpp at $c (skew $sk): rc $rc"
				[ "$rc" -eq 0 ] && break
			done
			restore
		done
	done
}

# Routing locality on `small` qwen3moe (32 experts, top-4): one file rerouted in place per
# level of $SKEWS (restored to 0 after); per level the routing report (next-token repeat,
# repeat within 8, LRU hits at 10/25/40 % residency; text and generated tokens) and a bench
# run with the expert cache at ~40 % residency (13 of 32 slots), against the published
# Qwen3-30B-A3B figures (PRIOR-ART-PEERS section 4: 45 % next-token repeat, 80 % within 8,
# LRU hit 90-95 % at 40 % residency).
section_c() {
	m="$SMALL_DIR/small-qwen3moe-q4_k_m-sweep.gguf"
	[ -f "$m" ] || $P mkmodel --arch qwen3moe --preset small --quant q4_k_m -o "$m" || return 1
	for s in $SKEWS; do
		REROUTED=$m
		reroute "$m" "$s" || return 1
		routing_report C "$m" "$s"
		la=$(loadavg)
		drop_caches
		$P bench -m "$m" --threads "$THREADS" --prompt-tokens 64 --gen 128 --expert-slots 13 \
			--io direct --json $NOPROF >"$OUT/c.out" 2>"$OUT/c.err"
		record C particle "$m" "{\"skew\": \"$s\", \"load\": $la, \"expert_slots\": 13}" \
			"$OUT/c.out" $?
		echo "bench: C skew $s done"
	done
	restore
}

# section_s: the server under concurrent load.  Records carry "kind" (streams | followup).
# Streams at --parallel 1 and $SERVER_PARALLEL (context 1024: every sequence's KV is in the
# plan); then the follow-up TTFT at --parallel 1 with a ~4000-token history.
s_run() { # s_run WHERE LABEL PARALLEL BENCH-ARGS...
	where=$1 label=$2 par=$3; shift 3
	if [ "$where" = ram ]; then
		m="$SMALL_DIR/small-qwen3moe-q4_k_m.gguf"
		[ -f "$m" ] || $P mkmodel --arch qwen3moe --preset small --quant q4_k_m -o "$m" || return 1
		set -- node tools/bench/server_bench.mjs --particle "$P" --model "$m" --label "$label" "$@" \
			-- --parallel "$par" -t "$THREADS"
	else
		m="$FULL_DIR/full-qwen3moe-q4_k_m.gguf"
		[ -f "$m" ] || m="$FULL_DIR/qwen3moe-full-q4_k_m.gguf"
		[ -f "$m" ] || { echo "bench: S: no full qwen3moe in $FULL_DIR" >&2; return 0; }
		BLK_FILE=$m
		set -- node tools/bench/server_bench.mjs --particle "$P" --model "$m" --label "$label" "$@" \
			-- --parallel "$par" -t "$THREADS" --memory $(( $(bytes "$CAP") - 256 * 1048576 ))
	fi
	la=$(loadavg)
	drop_caches
	if [ "$where" = cap ]; then
		in_cgroup "srv$par" "$(bytes "$CAP")" "$OUT/s.out" "$@" >/dev/null
	else
		"$@" >"$OUT/s.out" 2>"$OUT/s.out.err"
	fi
	rc=$?
	while IFS= read -r line; do
		echo "$line" >"$OUT/s.one"
		record S particle "$m" "{\"load\": $la, \"parallel\": $par, \"where\": \"$where\"}" \
			"$OUT/s.one" "$rc"
	done <"$OUT/s.out"
	echo "bench: S $label: rc $rc"
}
section_s() {
	for where in ram cap; do
		gen=64
		[ "$where" = cap ] && gen=32
		for par in 1 ${SERVER_PARALLEL:-4}; do
			s_run "$where" "$where-p$par" "$par" --history 0 --gen "$gen"
		done
		s_run "$where" "$where-followup" 1 --streams "" --history 4000
	done
}

# L. the capped long prompt against in RAM, each full shape (capped_prompt.sh's records, as
# section L: engine particle-ram / -gguf / -gguf-repack / -pack, the result its line).
section_l() {
	for arch in $FULL_ARCHS; do
		m="$FULL_DIR/full-$arch-q4_k_m.gguf"
		[ -f "$m" ] || m="$FULL_DIR/$arch-full-q4_k_m.gguf"
		[ -f "$m" ] || { echo "bench: L: no full $arch in $FULL_DIR; skipped" >&2; continue; }
		ROUNDS=${LONG_REPS:-2} CAP=$CAP THREADS=$THREADS \
			bash tools/bench/capped_prompt.sh "$OUT/L-$arch" "$m" "$P" || continue
		python3 - "$OUT/L-$arch/results.jsonl" "$m" >>"$RES" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(json.dumps({"section": "L", "engine": "particle-" + r["variant"], "model": sys.argv[2],
                      "rc": r["rc"], "load": r["load"], "result": r}))
PY
	done
}

# Q. qwen35moe at the Qwen3.5-35B-A3B shape under $CAP (tools/bench/qwen35.sh, issue 18).
. tools/bench/qwen35.sh

[ -x "$P" ] || { echo "bench: build $P first (make)" >&2; exit 1; }
facts
for s in $SECTIONS; do
	case $s in
	A) section_a ;; B) section_b ;; C) section_c ;; S) section_s ;; Q) section_q ;;
	L) section_l ;;
	D) . tools/bench/big_moe.sh && section_d ;;
	*) echo "bench: unknown section $s" >&2; exit 2 ;;
	esac
done
python3 tools/bench/summarize.py "$RES" "$OUT/facts.json" "$OUT/summary.json"
