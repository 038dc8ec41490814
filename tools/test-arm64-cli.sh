#!/bin/sh
# test-arm64-cli.sh - the CLI and streaming subset of the emulated aarch64 suite (issue 19;
# docs/TESTING.md "aarch64 under emulation"), called by tools/test-arm64.sh after the
# cross build.  The aarch64 particle runs under qemu-user (tools/particle-qemu.sh), -cpu max
# (dotprod + i8mm) and -cpu cortex-a53 (plain NEON); the x86-64 build/particle makes the tiny
# models and the reference probabilities.  Per architecture (qwen3moe bailingmoe2 gemma4
# glm4moe, tiny): aarch64 eval against the x86-64 probabilities (mean KL, top-1), routed
# experts streamed from disk (--io direct: qemu-user has no io_uring, so the pread pool with
# O_DIRECT) bit-identical to the aarch64 mapping, the scalar level against x86-64's scalar;
# then run / chat / threads / PARTICLE_CPU.
PARTICLE="$(cd "$(dirname "$0")/.." && pwd)/tools/particle-qemu.sh"
. "$(dirname "$0")/../tests/cli/lib.sh"
X86=${PARTICLE_X86:-build/particle}
export QEMU_CPU=max
T=$(seq -s, 3 34)

for arch in qwen3moe bailingmoe2 gemma4 glm4moe; do
	M="$TMP/$arch.gguf"
	if ! "$X86" mkmodel --arch "$arch" --preset tiny -o "$M" >/dev/null 2>"$TMP/mk.err"; then
		bad "$arch: x86-64 mkmodel: $(head -c 300 "$TMP/mk.err")"
		continue
	fi
	PARTICLE_CPU=scalar "$X86" eval -m "$M" --tokens "$T" --top 0 --probs-out "$TMP/x86.bin" \
		--logits-out "$TMP/x86l.bin" >/dev/null 2>&1 || bad "$arch: x86-64 reference eval"
	# The scalar reference is the same code on both architectures: the same logits bit for
	# bit, except gemma4, whose GELU table comes from libm's tanhf (glibc's x86-64 and aarch64
	# builds differ in last bits): there the usual KL bound.
	expect_exit 0 "$arch: scalar eval" -- env PARTICLE_CPU=scalar "$PARTICLE" eval -m "$M" \
		--tokens "$T" --top 0 --compare "$TMP/x86.bin" --logits-out "$TMP/sc.bin"
	if [ "$arch" = gemma4 ] || cmp -s "$TMP/sc.bin" "$TMP/x86l.bin"; then ok; else
		bad "$arch: aarch64 scalar logits differ from x86-64 scalar"; fi
	# SIMD levels: within the bounds x86-64's own AVX2 / AVX-512 levels meet against scalar
	# on these tiny random models (docs/TESTING.md: mean KL <= 1e-3, top-1 >= 0.93)
	for cpu in max cortex-a53; do
		expect_exit 0 "$arch $cpu: eval vs x86-64 scalar" -- env QEMU_CPU=$cpu "$PARTICLE" eval \
			-m "$M" --tokens "$T" --top 0 --io mmap --compare "$TMP/x86.bin" \
			--max-mean-kl 1e-3 --min-top1 0.93 --logits-out "$TMP/map.bin" --verbose
		expect_grep "$TMP/err" "^compare: positions" "$arch $cpu: compare line"
		k=$(sed -n 's/.* experts (top-\([0-9]*\)).*/\1/p' "$TMP/err")
		[ $cpu = max ] || continue # streaming is level-independent: once
		cp "$TMP/map.bin" "$TMP/map-$arch.bin"
		expect_exit 0 "$arch $cpu: streamed experts" -- env QEMU_CPU=$cpu "$PARTICLE" eval \
			-m "$M" --tokens "$T" --top 0 --io direct --expert-slots "${k:-8}" \
			--logits-out "$TMP/str.bin" --verbose
		expect_grep "$TMP/err" "experts: .*pread" "$arch $cpu: the pread pool streams"
		if cmp -s "$TMP/map.bin" "$TMP/str.bin"; then ok; else
			bad "$arch $cpu: streamed logits differ from the mapping"; fi
	done
done

# One architecture further: mkmodel bytes, decode-path streaming, run, chat, threads, levels.
M="$TMP/qwen3moe.gguf"
expect_exit 0 "aarch64 mkmodel" -- "$PARTICLE" mkmodel --arch qwen3moe --preset tiny -o "$TMP/a.gguf"
if cmp -s "$M" "$TMP/a.gguf"; then ok; else bad "aarch64 mkmodel bytes differ from x86-64"; fi
"$PARTICLE" eval -m "$M" --tokens "$T" --top 0 --batch 1 --io mmap --logits-out "$TMP/b1.bin" >/dev/null 2>&1
expect_exit 0 "decode streaming, buffered" -- "$PARTICLE" eval -m "$M" --tokens "$T" --top 0 \
	--batch 1 --io buffered --expert-slots 8 --cache-policy lru --logits-out "$TMP/l.bin"
if cmp -s "$TMP/b1.bin" "$TMP/l.bin"; then ok; else bad "decode streaming logits differ"; fi
G="-n 12 --temperature 0 --quiet"
# shellcheck disable=SC2086
expect_exit 0 "run, 1 thread" -- "$PARTICLE" run -m "$M" --prompt "The quick brown fox" $G --threads 1
cp "$TMP/out" "$TMP/r1"
# shellcheck disable=SC2086
expect_exit 0 "run, 3 threads, streamed" -- "$PARTICLE" run -m "$M" --prompt "The quick brown fox" \
	$G --threads 3 --io direct --expert-slots 8
if cmp -s "$TMP/out" "$TMP/r1"; then ok; else bad "run: threads / streaming change the text"; fi
printf '[{"role":"user","content":"hi"}]' >"$TMP/hi.json"
# shellcheck disable=SC2086
expect_exit 0 "chat" -- "$PARTICLE" run -m "$M" --messages "$TMP/hi.json" $G --stats-json "$TMP/s.json"
expect_grep "$TMP/s.json" "\"generated_tokens\":[[:space:]]*12," "chat generated 12 tokens"
PARTICLE_CPU=scalar "$X86" eval -m "$M" --tokens "$T" --top 0 --probs-out "$TMP/x86.bin" >/dev/null 2>&1
for lv in scalar neon dotprod i8mm; do
	expect_exit 0 "PARTICLE_CPU=$lv" -- env PARTICLE_CPU=$lv "$PARTICLE" eval -m "$M" --tokens "$T" \
		--top 0 --compare "$TMP/x86.bin" --max-mean-kl 1e-3 --min-top1 0.93 --verbose
	expect_grep "$TMP/err" "$lv" "PARTICLE_CPU=$lv named in --verbose"
done
# the SMMLA prefill tiles (i8mm) equal the dotprod dots bit for bit: the same logits
for q in q8_0 q4_k_m; do
	"$X86" mkmodel --arch qwen3moe --preset tiny --quant $q -o "$TMP/$q.gguf" >/dev/null 2>&1
	for lv in dotprod i8mm; do
		expect_exit 0 "$q $lv prefill" -- env PARTICLE_CPU=$lv "$PARTICLE" eval -m "$TMP/$q.gguf" \
			--tokens "$T" --top 0 --batch 32 --logits-out "$TMP/$lv.bin"
	done
	if cmp -s "$TMP/dotprod.bin" "$TMP/i8mm.bin"; then ok; else bad "$q: i8mm prefill logits differ from dotprod"; fi
done
# 64 KiB pages (arm64 kernels built with them: RHEL / Ampere / Graviton images): qemu-user's
# -p (QEMU_PAGESIZE) gives the guest a 65536-byte page size (AT_PAGESZ, sysconf, every mapping
# 64 KiB aligned; checked by pt_test's test_expert_io_page_size in tools/test-arm64.sh).  The
# model mapping (every run maps the resident core), the expert cache pool and its 4 KiB
# O_DIRECT slots, the pread pool, buffered decode reads, pack writing and pack reads must give
# the 4 KiB run's logits bit for bit.
expect_exit 0 "64K pages: streamed eval" -- env QEMU_PAGESIZE=65536 "$PARTICLE" eval -m "$M" \
	--tokens "$T" --top 0 --io direct --expert-slots 8 --logits-out "$TMP/p64s.bin" --verbose
expect_grep "$TMP/err" "experts: .*pread" "64K pages: the pread pool streams"
if cmp -s "$TMP/p64s.bin" "$TMP/map-qwen3moe.bin"; then ok; else bad "64K pages: streamed logits differ"; fi
expect_exit 0 "64K pages: pack" -- env QEMU_PAGESIZE=65536 "$PARTICLE" pack "$M" -o "$TMP/m.xpack"
expect_exit 0 "64K pages: eval from the pack" -- env QEMU_PAGESIZE=65536 "$PARTICLE" eval -m "$M" \
	--tokens "$T" --top 0 --io direct --expert-slots 8 --pack "$TMP/m.xpack" --logits-out "$TMP/p64p.bin"
if cmp -s "$TMP/p64p.bin" "$TMP/map-qwen3moe.bin"; then ok; else bad "64K pages: pack logits differ"; fi
expect_exit 0 "64K pages: decode streaming" -- env QEMU_PAGESIZE=65536 "$PARTICLE" eval -m "$M" \
	--tokens "$T" --top 0 --batch 1 --io buffered --expert-slots 8 --logits-out "$TMP/p64b.bin"
if cmp -s "$TMP/p64b.bin" "$TMP/b1.bin"; then ok; else bad "64K pages: decode streaming logits differ"; fi
# shellcheck disable=SC2086
expect_exit 0 "64K pages: run, 3 threads, streamed" -- env QEMU_PAGESIZE=65536 "$PARTICLE" run \
	-m "$M" --prompt "The quick brown fox" $G --threads 3 --io direct --expert-slots 8
if cmp -s "$TMP/out" "$TMP/r1"; then ok; else bad "64K pages: run text differs"; fi
expect_exit 2 "i8mm refused on cortex-a53" -- env QEMU_CPU=cortex-a53 PARTICLE_CPU=i8mm \
	"$PARTICLE" eval -m "$M" --tokens 1,2 --top 0
expect_one_error_line "i8mm refused on cortex-a53"
finish
