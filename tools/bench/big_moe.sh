# big_moe.sh - section D of `make bench` (sourced by tools/bench/run.sh, which provides $P,
# $ORACLE, $OUT, $CAP, $THREADS, $NOPROF, $FULL_DIR and record / in_cgroup / drop_caches /
# bytes / loadavg): issue 17's full shapes, which do not fit this machine's RAM at all:
# gpt-oss-120b (~61 GB, MXFP4 experts) and GLM-4.5-Air (~60-70 GB at Q4_K_M).
#
# Per model of $BIG_MODELS (ARCH:PRESET:MIX, default "glm4moe:full:q4_k_m gpt-oss:full:mxfp4"):
#  1. the arch and preset must be known to this build (`particle mkmodel --size-only`: a model
#     whose slice is not merged yet is skipped with a message naming it);
#  2. the file ($FULL_DIR/full-ARCH-MIX.gguf) is made unless present; the disk space it needs
#     (its tensor bytes + 256 MiB) is checked first and the model skipped with a message
#     when $FULL_DIR's file system does not have it;
#  3. $BIG_REPS cold runs at the cap $CAP (own memory cgroup, page cache dropped): particle with
#     --memory just under it (decode tok/s, the I/O floor = bytes read per token / disk
#     bandwidth, time over it: goal <= 1.25x), then llama.cpp under the same cap; then one
#     llama.cpp run with all the RAM the machine has (no cgroup).  llama.cpp runs are cut at
#     $BIG_TIMEOUT seconds (a 60 GB mmap'd model pages through a 6 GiB cap or 24 GiB of RAM
#     once per token: it may not finish); a cut run is recorded with rc 124.
# Every skip is recorded too (engine "skip", result.reason), so summarize.py lists it.
# The file runs at routing level $BIG_SKEW (default `real`, switched in place by `mkmodel
# --reroute` and restored to 0 afterwards, as section B does).
# Environment: BIG_MODELS, BIG_REPS (2), BIG_TIMEOUT (1800), BIG_PROMPT (32), BIG_GEN (32),
# BIG_SKEW (real).

# d_skip MODEL-LABEL REASON: message and record.
d_skip() {
	echo "bench: D: $1: $2; skipped" >&2
	printf '{"reason": "%s"}\n' "$(printf '%s' "$2" | sed 's/["\\]/ /g')" >"$OUT/d.skip"
	record D skip "$1" "{\"load\": $(loadavg)}" "$OUT/d.skip" 0
}

# d_model ARCH PRESET MIX
d_model() {
	da=$1 dp=$2 dq=$3 label="$1 $2 $3"
	if ! $P mkmodel --arch "$da" --preset "$dp" --quant "$dq" --size-only \
		>"$OUT/d.size" 2>"$OUT/d.err"; then
		if grep -q "unknown architecture" "$OUT/d.err"; then
			d_skip "$label" "particle mkmodel does not know --arch $da in this build (its issue 17 slice is not merged)"
		else
			d_skip "$label" "particle mkmodel --size-only failed: $(head -c 200 "$OUT/d.err")"
		fi
		return 0
	fi
	m="$FULL_DIR/full-$da-$dq.gguf"
	[ "$dp" = full ] || m="$FULL_DIR/$dp-$da-$dq.gguf"
	if [ ! -f "$m" ]; then
		need=$(($(cat "$OUT/d.size") + (256 << 20)))
		mkdir -p "$FULL_DIR"
		free=$(df -B1 --output=avail "$FULL_DIR" | tail -n 1 | tr -d ' ')
		if [ "${free:-0}" -lt "$need" ]; then
			d_skip "$label" "$m needs $((need / 1000000000)) GB of disk, $FULL_DIR has $((${free:-0} / 1000000000)) GB free"
			return 0
		fi
		echo "bench: D: writing $m ($((need / 1000000000)) GB; bound by the disk's write rate)"
		if ! $P mkmodel --arch "$da" --preset "$dp" --quant "$dq" --threads "$THREADS" \
			-o "$m" 2>"$OUT/d.err"; then
			d_skip "$label" "mkmodel failed: $(head -c 200 "$OUT/d.err")"
			return 0
		fi
	fi
	# routing at $BIG_SKEW (default the calibrated `real` level), restored to 0 afterwards
	# (run.sh's restore, also on exit or interrupt)
	sk=${BIG_SKEW:-real}
	[ "$sk" != 0 ] && REROUTED=$m
	reroute "$m" "$sk" || { restore; d_skip "$label" "reroute to skew $sk failed"; return 0; }
	lim=$(bytes "$CAP") BLK_FILE=$m
	budget=$((lim - lim / 20)) # just under the cap: 95 %
	r=1
	while [ "$r" -le "${BIG_REPS:-2}" ]; do
		drop_caches
		la=$(loadavg)
		in_cgroup pt_bench_particle "$lim" "$OUT/d.out" $P bench -m "$m" --threads "$THREADS" \
			--prompt-tokens "${BIG_PROMPT:-32}" --gen "${BIG_GEN:-32}" --memory "$budget" --json \
			--no-lock $NOPROF
		rc=$?
		record D particle "$m" "{\"rep\": $r, \"load\": $la, \"cap\": $lim, \"skew\": \"$sk\", $CGX}" "$OUT/d.out" $rc
		drop_caches
		la=$(loadavg)
		in_cgroup pt_bench_llama "$lim" "$OUT/d.out" timeout "${BIG_TIMEOUT:-1800}" $ORACLE bench \
			"$m" --threads "$THREADS" --prompt "${BIG_PROMPT:-32}" --gen "${BIG_GEN:-32}"
		rc=$?
		record D llama.cpp "$m" "{\"rep\": $r, \"load\": $la, \"cap\": $lim, \"skew\": \"$sk\", \"timeout_s\": ${BIG_TIMEOUT:-1800}, $CGX}" \
			"$OUT/d.out" $rc
		echo "bench: D $m rep $r done (llama.cpp at the cap: rc $rc)"
		r=$((r + 1))
	done
	# llama.cpp with all the RAM the machine has (no cgroup; still far below the file)
	drop_caches
	la=$(loadavg)
	timeout "${BIG_TIMEOUT:-1800}" $ORACLE bench "$m" --threads "$THREADS" \
		--prompt "${BIG_PROMPT:-32}" --gen "${BIG_GEN:-32}" >"$OUT/d.out" 2>"$OUT/d.out.err"
	rc=$?
	record D llama.cpp-all-ram "$m" "{\"load\": $la, \"skew\": \"$sk\", \"timeout_s\": ${BIG_TIMEOUT:-1800}}" \
		"$OUT/d.out" $rc
	echo "bench: D $m llama.cpp with all RAM: rc $rc"
	restore
}

section_d() {
	for spec in ${BIG_MODELS:-glm4moe:full:q4_k_m gpt-oss:full:mxfp4}; do
		IFS=: read -r da dp dq <<EOF
$spec
EOF
		d_model "$da" "$dp" "$dq"
	done
}
