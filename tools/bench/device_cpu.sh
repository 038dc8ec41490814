#!/bin/sh
# device_cpu.sh - particle against llama.cpp's llama-bench on the CPUs of the lent device's
# host (16 cores; issue 21, BENCHMARKS 0.28), in RAM, at several thread counts.  The device
# reaches nothing outside, so everything travels in one carried folder (under 64 MiB).
#
#   sh tools/bench/device_cpu.sh prepare SCRATCH        (here, after `make`)
#       Writes .dev-cpu/ in the repository root (git-ignored): build/particle, the shared
#       libraries it needs that a bare machine lacks (everything ldd lists except the C
#       runtime), this script, and llama.cpp's source trimmed to what llama-bench's CPU build
#       needs (~3.4 MB compressed) from SCRATCH/llama.cpp-src, the checkout
#       `sh tools/bench/llama_bench.sh build SCRATCH` made (its commit: SCRATCH/llama.cpp.commit).
#   run(command="sh .dev-cpu/device_cpu.sh run", carry=[".dev-cpu"], timeout_s=600)
#       On the device: makes the `full` checkpoint of ARCH there (mkmodel, uniform routing)
#       while llama-bench builds (-DGGML_NATIVE=ON: llama.cpp's best for that CPU, repacking
#       on by default, static), probes memory bandwidth at 4, 8 and 16 threads, then for each
#       of THREADS: `particle bench --prompt-tokens PROMPT --gen GEN --io mmap --repack
#       --memory 100G` (the host's MemTotal grows as memory is used, so the budget is given),
#       then `llama-bench -p PROMPT -n GEN -r 2` (each under LB_LIMIT seconds).  Writes
#       $OUT/host.txt (CPU flags, cores, memory), $OUT/results.txt (each line a JSON result,
#       after a "particle t=N" / "llama t=N" marker) and the build / error logs; stops
#       starting runs after DEADLINE seconds.
# Environment (run): ARCH (qwen3moe), THREADS ("2 4 8 16"), PROMPT (512), GEN (64),
# LB_LIMIT (120), DEADLINE (480).
#   run(command="sh .dev-cpu/device_cpu.sh capped", carry=[".dev-cpu"], timeout_s=600)
#       Issue 21's capped prompt there (ARCH gemma4): in RAM against capped and cold,
#       alternating; see the capped branch below for its steps, files and environment.
set -u
cmd=${1:-}
D=.dev-cpu
if [ "$cmd" = prepare ]; then
	S=${2:?usage: device_cpu.sh prepare SCRATCH}
	[ -x build/particle ] || { echo "device_cpu: build first (make)" >&2; exit 2; }
	[ -d "$S/llama.cpp-src/ggml" ] || {
		echo "device_cpu: no $S/llama.cpp-src (sh tools/bench/llama_bench.sh build $S)" >&2
		exit 2
	}
	rm -rf "$D" && mkdir -p "$D/lib" || exit 1
	cp build/particle tools/bench/device_cpu.sh "$D/" || exit 1
	ldd build/particle | awk '$3 ~ /^\// { print $3 }' | while read -r lib; do
		case $(basename "$lib") in
		libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|ld-linux*) ;;
		*) cp -L "$lib" "$D/lib/" ;;
		esac
	done
	x=""
	for b in cuda vulkan sycl metal cann musa opencl hip webgpu zdnn; do
		x="$x --exclude=ggml/src/ggml-$b"
	done
	# shellcheck disable=SC2086
	(cd "$S/llama.cpp-src" && tar czf - $x CMakeLists.txt cmake ggml src include common \
		vendor tools/llama-bench tools/CMakeLists.txt LICENSE) >"$D/llama.tgz" || exit 1
	cp "$S/llama.cpp.commit" "$D/" 2>/dev/null
	du -sh "$D"
	exit 0
fi
[ "$cmd" = run ] || [ "$cmd" = capped ] || {
	echo "usage: device_cpu.sh prepare SCRATCH | run | capped" >&2
	exit 2
}
# both commands: the output and work folders, the carried binary and its libraries, a clock
O=${OUT:-/tmp/device_cpu_out}
W=/tmp/device_cpu
mkdir -p "$O" "$W"
export LD_LIBRARY_PATH="$D/lib"
P="$D/particle"
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
if [ "$cmd" = capped ]; then
	# Issue 21's capped-prompt goal on a host of many cores (PERFORMANCE round 44): the
	# `full` checkpoint of ARCH made there, then alternating the in-RAM run (`--io mmap
	# --repack`, the file in the page cache) and the capped cold one (page cache dropped, a
	# memory cgroup of CAP, `--memory CAP - 256 MiB --repack`, experts read from the plain
	# GGUF), both at THREADS threads on an otherwise idle 16-core host, so the reads' and the
	# kernel's work lands beside the engine's threads rather than on them as on a 2-vCPU VM.
	# Order: ram, capped, capped, ram, ... (ABBA) until DEADLINE.  Writes $OUT/host.txt
	# (CPU, memory, disk, cgroup), $OUT/capped.jsonl (bench --json lines with the variant
	# and the cgroup's peak), $OUT/*.err.  Environment: ARCH (gemma4), THREADS (2), PROMPT
	# (4096), GEN (4), CAP (6G), RUNS (4), RUN_LIMIT (170), DEADLINE (380: no run starts after),
	# PRESET (full; small for a dry run here).
	: "${ARCH:=gemma4}" "${THREADS:=2}" "${PROMPT:=4096}" "${GEN:=4}" "${CAP:=6G}" \
		"${RUNS:=4}" "${RUN_LIMIT:=170}" "${DEADLINE:=380}" "${PRESET:=full}"
	cap=$(numfmt --from=iec "$CAP") || exit 2
	budget=$((cap - 256 * 1048576))
	{
		echo "nproc $(nproc)"
		lscpu | grep -E "Model name|Socket|Core|Thread|NUMA|L3|L2|MHz"
		free -g
		df -h /tmp
		lsblk -d -o NAME,ROTA,SIZE,MODEL 2>&1
		for q in /sys/block/*/queue; do echo "$q $(cat "$q/scheduler" 2>/dev/null)"; done
		mount | grep cgroup
	} >"$O/host.txt" 2>&1
	# the cap: cgroup v2 (a child of the root with the memory controller on), else v1
	CG=""
	if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
		echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>>"$O/host.txt"
		mkdir -p /sys/fs/cgroup/pt_cap && echo "$cap" >/sys/fs/cgroup/pt_cap/memory.max &&
			echo 0 >/sys/fs/cgroup/pt_cap/memory.swap.max 2>/dev/null
		[ -f /sys/fs/cgroup/pt_cap/memory.max ] && CG=/sys/fs/cgroup/pt_cap
	elif [ -w /sys/fs/cgroup/memory ]; then
		mkdir -p /sys/fs/cgroup/memory/pt_cap &&
			echo "$cap" >/sys/fs/cgroup/memory/pt_cap/memory.limit_in_bytes &&
			CG=/sys/fs/cgroup/memory/pt_cap
	fi
	echo "cgroup: ${CG:-none (the engine's --memory plan alone)}" >>"$O/host.txt"
	M=$W/$ARCH-$PRESET-q4_k_m.gguf
	"$P" mkmodel --arch "$ARCH" --preset "$PRESET" --quant q4_k_m --threads 14 -o "$M" \
		>"$W/mk.log" 2>&1
	echo "mkmodel rc $? at $(el) s, $(stat -c %s "$M") bytes" >>"$O/host.txt"
	R=$O/capped.jsonl
	: >"$R"
	one() { # VARIANT
		local f=$W/b.json v=$1 rc peak=0
		if [ "$v" = ram ]; then
			[ "$(fincore -b -n -o RES "$M" | tr -d ' ')" -ge "$(stat -c %s "$M")" ] ||
				cat "$M" >/dev/null
			timeout "$RUN_LIMIT" "$P" bench -m "$M" --prompt-tokens "$PROMPT" --gen "$GEN" \
				--threads "$THREADS" --io mmap --repack --memory 100G --json --no-lock \
				--no-profile >"$f" 2>>"$O/ram.err"
			rc=$?
		else
			sync
			echo 3 >/proc/sys/vm/drop_caches
			[ -n "$CG" ] && [ -f "$CG/memory.peak" ] && echo 0 >"$CG/memory.peak" 2>/dev/null
			sh -c '[ -n "$1" ] && echo $$ >"$1/cgroup.procs"; shift; exec "$@"' sh "$CG" \
				timeout "$RUN_LIMIT" "$P" bench -m "$M" --prompt-tokens "$PROMPT" \
				--gen "$GEN" --threads "$THREADS" --memory "$budget" --repack --json \
				--no-lock --no-profile >"$f" 2>>"$O/capped.err"
			rc=$?
			peak=$(cat "$CG/memory.peak" "$CG/memory.max_usage_in_bytes" 2>/dev/null | head -1)
		fi
		printf '{"variant": "%s", "rc": %d, "at_s": %d, "cg_peak": %s, "result": %s}\n' \
			"$v" "$rc" "$(el)" "${peak:-0}" "$(tail -1 "$f" | grep '^{' || echo null)" >>"$R"
	}
	n=0
	for v in ram capped capped ram ram capped capped ram; do
		[ "$n" -lt "$RUNS" ] && [ "$(el)" -lt "$DEADLINE" ] || break
		one "$v"
		n=$((n + 1))
	done
	echo "end at $(el) s, $n runs" >>"$O/host.txt"
	[ -n "$CG" ] && rmdir "$CG" 2>/dev/null
	exit 0
fi
: "${ARCH:=qwen3moe}" "${THREADS:=2 4 8 16}" "${PROMPT:=512}" "${GEN:=64}" "${LB_LIMIT:=120}" \
	"${DEADLINE:=480}"
{
	echo "nproc $(nproc)"
	lscpu | grep -E "Model name|Socket|Core|Thread|NUMA|L3|L2"
	grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E "avx|amx|vnni|bf16|fma" | tr '\n' ' '
	echo
	free -g
	cat "$D/llama.cpp.commit" 2>/dev/null
} >"$O/host.txt" 2>&1
M=$W/$ARCH-full-q4_k_m.gguf
(mkdir -p "$W/lc" && cd "$W/lc" && tar xzf "$OLDPWD/$D/llama.tgz" &&
	echo 'add_subdirectory(llama-bench)' >tools/CMakeLists.txt &&
	cmake -S . -B b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
		-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
		-DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_OPENSSL=OFF >cm.log 2>&1 &&
	nice cmake --build b --target llama-bench -j 6 >build.log 2>&1
	echo "llama-bench build rc $?") >"$O/lcbuild.txt" 2>&1 &
BP=$!
"$P" mkmodel --arch "$ARCH" --preset full --quant q4_k_m --threads 10 -o "$M" >"$W/mk.log" 2>&1
echo "mkmodel rc $? at $(el) s" >>"$O/host.txt"
wait $BP
LB=$W/lc/b/bin/llama-bench
R=$O/results.txt
: >"$R"
for t in 16 8 4; do
	"$P" bench --membw --threads $t --json 2>/dev/null | tail -1 >>"$R"
done
for t in $THREADS; do
	[ "$(el)" -lt "$DEADLINE" ] || { echo "stopped at $(el) s before t=$t" >>"$R"; break; }
	echo "particle t=$t at $(el) s" >>"$R"
	"$P" bench -m "$M" --prompt-tokens "$PROMPT" --gen "$GEN" --threads "$t" --io mmap \
		--repack --memory 100G --json --no-lock --no-profile 2>>"$O/particle.err" |
		tail -1 >>"$R"
	echo "llama t=$t at $(el) s" >>"$R"
	[ -x "$LB" ] && timeout "$LB_LIMIT" "$LB" -m "$M" -t "$t" -p "$PROMPT" -n "$GEN" -r 2 \
		-o jsonl 2>>"$O/llama.err" >>"$R"
done
echo "end at $(el) s" >>"$R"
