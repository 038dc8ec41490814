#!/bin/sh
# qwen35.sh - `make bench` section Q (issue 18): qwen35moe at the Qwen3.5-35B-A3B shape
# (`mkmodel --preset full`, Q4_K_M, about 21 GB) under $CAP exactly like section B: cold,
# page cache dropped, each engine in its own memory cgroup, particle with --memory just under
# the cap (its bench JSON carries the expert bytes per token and the I/O floor) against
# llama.cpp with its default mmap, $REPS times.  The file is written when missing and only
# when its disk has room for it with 10 % to spare.  The Qwen3.5-397B-A17B shape (preset
# 397b, about 230 GB) is written and run only with Q35_397B=1 and the disk for it.
#
# Sourced by tools/bench/run.sh (section Q: cap_pair, drop_caches and record come from
# there).  Run on its own with Q35_DRY=1 it checks the logic without root or cgroups: it says
# what it would write and run, and runs particle's command once in RAM on Q35_MODEL (e.g. a
# `small` file) instead of the cgroup pairs.
# Environment: Q35_MODEL (default $FULL_DIR/full-qwen35moe-q4_k_m.gguf), Q35_397B (0),
# Q35_DRY (0), plus run.sh's CAP, REPS, FULL_DIR, THREADS, CAP_PROMPT, CAP_GEN.

# q35_need PRESET: bytes the Q4_K_M file takes (model size x 4.9 bits per weight, rounded up).
q35_need() {
	case $1 in
	397b) echo 245000000000 ;;
	*) echo 22500000000 ;;
	esac
}

# q35_room FILE PRESET: 0 when FILE's directory can take the file with 10 % to spare.
q35_room() {
	dir=$(dirname "$1")
	mkdir -p "$dir" || return 1
	free=$(df -P -B1 "$dir" | awk 'NR == 2 { print $4 }')
	need=$(q35_need "$2")
	[ -n "$free" ] && [ "$free" -ge $((need + need / 10)) ]
}

# q35_model FILE PRESET: makes FILE when missing and the disk allows; 1 when it is not there.
q35_model() {
	[ -f "$1" ] && return 0
	if ! q35_room "$1" "$2"; then
		echo "bench: Q: no room for $1 ($(q35_need "$2") bytes + 10 %); skipped" >&2
		return 1
	fi
	if [ "${Q35_DRY:-0}" = 1 ]; then
		echo "bench: Q (dry): would write $P mkmodel --arch qwen35moe --preset $2 --quant q4_k_m -o $1"
		return 1
	fi
	$P mkmodel --arch qwen35moe --preset "$2" --quant q4_k_m --threads "$THREADS" -o "$1"
}

section_q() {
	lim=$(bytes "$CAP")
	m=${Q35_MODEL:-$FULL_DIR/full-qwen35moe-q4_k_m.gguf}
	set -- "$m:full"
	[ "${Q35_397B:-0}" = 1 ] && set -- "$@" "$FULL_DIR/full-qwen35moe-397b-q4_k_m.gguf:397b"
	for mp in "$@"; do
		mf=${mp%:*} pr=${mp##*:}
		q35_model "$mf" "$pr" || continue
		routing_report Q "$mf" 0
		r=1
		while [ "$r" -le "$REPS" ]; do
			cap_pair "$mf" "$lim" "$r" 0
			r=$((r + 1))
		done
	done
}

# ---- standalone dry run -------------------------------------------------------------------
if [ "${Q35_DRY:-0}" = 1 ] && [ -z "${RES:-}" ]; then
	: "${CAP:=6G}" "${REPS:=1}" "${FULL_DIR:=/work/models-full}" "${THREADS:=2}"
	: "${CAP_PROMPT:=32}" "${CAP_GEN:=32}" "${OUT:=build/bench-q35-dry}"
	P=${P:-build/particle}
	mkdir -p "$OUT"
	bytes() { numfmt --from=iec "$1"; }
	routing_report() { echo "bench: Q (dry): routing report of $2 (skew $3)"; }
	cap_pair() { # particle's command in RAM once; llama.cpp's only said
		budget=$(($2 - $2 / 20))
		echo "bench: Q (dry): cgroup $2 bytes, drop caches, then: $P bench -m $1" \
			"--threads $THREADS --prompt-tokens $CAP_PROMPT --gen $CAP_GEN --memory $budget" \
			"--json --no-lock --no-profile; llama.cpp: node tools/oracle/oracle.mjs bench $1"
		$P bench -m "$1" --threads "$THREADS" --prompt-tokens "$CAP_PROMPT" --gen "$CAP_GEN" \
			--memory "$budget" --json --no-lock --no-profile >"$OUT/q.out" 2>"$OUT/q.err" ||
			{ echo "bench: Q (dry): particle bench failed: $(tail -c 300 "$OUT/q.err")" >&2; return 1; }
		tail -n 1 "$OUT/q.out"
	}
	section_q
fi
