#!/bin/sh
# llama_bench.sh - llama.cpp's own `llama-bench`, built from llama.cpp's public source in
# `make bench`'s scratch directory (never into the project), as the in-RAM baseline beside
# the node-llama-cpp path (issue 21).
#
#   sh tools/bench/llama_bench.sh build SCRATCH
#       Clones the source into SCRATCH/llama.cpp-src and builds `llama-bench` twice with cmake:
#       SCRATCH/llama.cpp-repack (GGML_CPU_REPACK=ON, llama.cpp's default: Q4_0/IQ4_NL/Q4_K
#       weights repacked at load into interleaved rows, a copy outside the mmap) and
#       SCRATCH/llama.cpp-norepack (GGML_CPU_REPACK=OFF: weights used in place from the mmap).
#       This llama-bench version has no run-time switch for repacking (`-r` is
#       --repetitions; the model parameter use_extra_bufts is not exposed), hence two builds.
#       Writes SCRATCH/llama.cpp.commit (the commit built).  An existing build is reused
#       when its commit matches.  LB_BUILDS picks the builds (default "repack norepack");
#       "avx2" is the repack build for the AVX2 level only (GGML_NATIVE=OFF, AVX2 FMA F16C
#       BMI2, no AVX-512 or AVX-VNNI): what a laptop without AVX-512 runs, to compare with
#       `PARTICLE_CPU=avx2` on an AVX-512 host.
#   sh tools/bench/llama_bench.sh run SCRATCH VARIANT MODEL THREADS PROMPTS GEN [DEPTH [FA]]
#       One llama-bench run (VARIANT repack|norepack|avx2, each optionally -nommap; PROMPTS e.g. 512 or
#       512,4096; DEPTH: tokens already in the context before each test, `-d`, default 0:
#       with PROMPTS 0 the decode of a long conversation; FA: llama-bench's -fa values,
#       default auto, e.g. 0,1 for the better of off and on), jsonl
#       converted to one JSON line {"prefill_tps", "decode_tps", "pp": {N: tok/s}, ...} on
#       stdout (the shape run.sh's record() reads; prefill_tps is the first prompt size).
#       repack-nommap: the repack build with `-mmp 0` (weights read into llama.cpp's own
#       buffers, no mapping).  With the default mmap, the repack build keeps the file mapped
#       beside its repacked copy; on a machine that cannot hold both (an 18.6 GB file in
#       23.5 GiB) the mapped tensors it still reads are evicted and faulted back during the
#       run, and its figures are the disk's (docs/BENCHMARKS.md 0.08).  Without the mapping
#       it holds one copy; llama.cpp's best configuration is the best of the three.
#
# Source: $LLAMA_SRC (a git directory, a bundle or a checkout: e.g. the snapshot the `fetch`
# tool brings under /work/.mirror), else the git bundle node-llama-cpp ships
# (tools/oracle/node_modules/node-llama-cpp/llama/gitRelease.bundle: llama.cpp's public
# source at the release node-llama-cpp runs, so both baselines are the same llama.cpp).
# cmake (Debian `cmake`) is installed here when missing, for the bench only.
set -eu
cmd=$1 S=$2
SRC=$S/llama.cpp-src

default_src() {
	b=tools/oracle/node_modules/node-llama-cpp/llama/gitRelease.bundle
	[ -f "$b" ] && { echo "$b"; return; }
	echo ""
}

need_cmake() {
	command -v cmake >/dev/null 2>&1 && return 0
	echo "llama-bench: cmake missing; installing Debian cmake for the bench" >&2
	if [ "$(id -u)" -eq 0 ]; then
		apt-get install -y cmake >&2 || return 1
	else
		echo "llama-bench: not root: install cmake (apt-get install cmake)" >&2
		return 1
	fi
}

build() {
	src=${LLAMA_SRC:-$(default_src)}
	if [ -z "$src" ]; then
		echo "llama-bench: no llama.cpp source (set LLAMA_SRC, or make oracle for" \
			"node-llama-cpp's bundle); skipped" >&2
		return 1
	fi
	need_cmake || return 1
	mkdir -p "$S"
	if [ ! -d "$SRC/.git" ]; then
		rm -rf "$SRC"
		git -c advice.detachedHead=false clone -q "$src" "$SRC" >&2 || { echo "llama-bench: clone of $src failed" >&2; return 1; }
	fi
	commit=$(git -C "$SRC" rev-parse HEAD)
	for v in ${LB_BUILDS:-repack norepack}; do
		b=$S/llama.cpp-$v
		[ -x "$b/bin/llama-bench" ] && [ "$(cat "$b/commit" 2>/dev/null)" = "$commit" ] && continue
		on=ON isa=-DGGML_NATIVE=ON
		case $v in
		repack) ;;
		norepack) on=OFF ;;
		avx2) isa="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
			-DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF" ;;
		*) echo "llama-bench: unknown build $v" >&2; return 2 ;;
		esac
		echo "llama-bench: building $v (commit $commit) in $b" >&2
		# shellcheck disable=SC2086 # $isa is a list of flags
		nice cmake -S "$SRC" -B "$b" -DCMAKE_BUILD_TYPE=Release $isa \
			-DGGML_CPU_REPACK=$on -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
			-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF \
			>"$b.cmake.log" 2>&1 || { echo "llama-bench: cmake failed ($b.cmake.log)" >&2; return 1; }
		nice cmake --build "$b" --target llama-bench -j "$(nproc)" >"$b.build.log" 2>&1 ||
			{ echo "llama-bench: build failed ($b.build.log)" >&2; return 1; }
		echo "$commit" >"$b/commit"
	done
	echo "$commit" >"$S/llama.cpp.commit"
	echo "llama-bench: built commit $commit from $src" >&2
}

run() {
	v=$1 m=$2 t=$3 pp=$4 tg=$5 depth=${6:-0} fa=${7:-auto}
	build=${v%-nommap} mmp=1
	[ "$build" != "$v" ] && mmp=0
	case $build in repack | norepack | avx2) ;; *) echo "llama-bench: unknown variant $v" >&2; return 2 ;; esac
	bin=$S/llama.cpp-$build/bin/llama-bench
	[ -x "$bin" ] || { echo "llama-bench: $bin not built" >&2; return 1; }
	"$bin" -m "$m" -t "$t" -p "$pp" -n "$tg" -d "$depth" -fa "$fa" -r 1 -o jsonl -ngl 0 \
		-mmp "$mmp" >"$S/lb.jsonl" || return 1
	python3 - "$S/lb.jsonl" "$v" "$t" "$(cat "$S/llama.cpp.commit")" "$pp" "$depth" <<'PY'
import json, sys
path, variant, threads, commit, pps, depth = sys.argv[1:7]
# several -fa values: each figure is the best of them, and which one it was is kept
pp, tg, fa_pp, fa_tg = {}, None, {}, None
for line in open(path):
    line = line.strip()
    if not line.startswith("{"):
        continue
    o = json.loads(line)
    if o.get("n_gen", 0) == 0 and o.get("n_prompt", 0) > 0:
        n = str(o["n_prompt"])
        if o["avg_ts"] > pp.get(n, 0):
            pp[n], fa_pp[n] = o["avg_ts"], o.get("flash_attn")
    elif o.get("n_prompt", 0) == 0 and o.get("n_gen", 0) > 0:
        if tg is None or o["avg_ts"] > tg:
            tg, fa_tg = o["avg_ts"], o.get("flash_attn")
first = pps.split(",")[0]
print(json.dumps({"prefill_tps": pp.get(first), "decode_tps": tg, "pp": pp, "depth": int(depth),
                  "flash_attn": {"pp": fa_pp, "tg": fa_tg},
                  "threads": int(threads), "build": "llama-bench " + variant,
                  "llama_cpp_commit": commit, "api": "llama-bench (llama.cpp C API, -o jsonl)"}))
PY
}

case $cmd in
build) build ;;
run) shift 2; run "$@" ;;
*) echo "usage: llama_bench.sh build|run SCRATCH ..." >&2; exit 2 ;;
esac
