# particle - plain GNU make.  `make` builds ./build/particle and build/libparticle.a.
# `make demo` and `make test` also install missing Debian packages (as root) first.
#
# Layout: every src/<component>/*.c goes into libparticle.a except src/cli (the binary) and
# src/cuda (optional, later).  Files named *_avx2.c / *_avx512.c get their ISA flags here and
# nowhere else: the rest of the binary runs on any x86-64 (runtime dispatch).

# A bare `make` builds `all`, whichever rule comes first below.
.DEFAULT_GOAL := all

# Target architecture (issue 19): the host's by default; `make ARCH=aarch64` on an x86-64
# host cross-builds into build/aarch64 with Debian's aarch64-linux-gnu-gcc (and the arm64
# multiarch libraries of tools/deps-arm64.sh).  Each architecture compiles only its own
# kernel files: *_avx2.c / *_avx512.c on x86_64, *_neon.c / *_dotprod.c on aarch64.
HOST_ARCH := $(shell uname -m)
ARCH    ?= $(HOST_ARCH)
HOSTCC  := $(CC)
ifneq ($(ARCH),$(HOST_ARCH))
ifeq ($(origin CC),default)
CC      := $(ARCH)-linux-gnu-gcc
endif
BUILD   ?= build/$(ARCH)
endif
# CUDA=1 (issue 16): the CUDA backend (src/cuda, nvcc) in its own build folder, so CPU-only
# and CUDA objects never mix.
CUDA    ?=
ifeq ($(CUDA),1)
BUILD   ?= build/cuda
endif
BUILD   ?= build
SAN     ?=
NPROC   := $(shell nproc 2>/dev/null || echo 2)

WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CFLAGS  ?= -O2 -g
# -ffp-contract=off everywhere: the reference quantizers only reproduce ggml's bytes without
# FMA contraction, and it keeps scalar kernels deterministic across compilers.
BASEFLAGS := -std=c11 -D_GNU_SOURCE -ffp-contract=off -fno-math-errno -pthread \
             -Iinclude -Isrc -MMD -MP $(WARN)
LDLIBS  := -lpcre2-8 -lpcre2-32 -luring -lcrypto -lcjson -ledit -lmicrohttpd -lcurl -lpthread -lm

ifeq ($(SAN),1)
BASEFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS   += -fsanitize=address,undefined
endif
ifeq ($(SAN),thread)
BASEFLAGS += -fsanitize=thread
LDFLAGS   += -fsanitize=thread
endif

ISA_AVX2   := -mavx2 -mfma -mf16c -mbmi2
ISA_AVX512 := $(ISA_AVX2) -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni
ISA_DOTPROD := -march=armv8.2-a+dotprod
ISA_I8MM   := -march=armv8.2-a+dotprod+i8mm

ifeq ($(ARCH),aarch64)
ARCH_SKIP := %_avx2.c %_avx512.c
else ifeq ($(ARCH),x86_64)
ARCH_SKIP := %_neon.c %_dotprod.c %_i8mm.c
else
ARCH_SKIP := %_avx2.c %_avx512.c %_neon.c %_dotprod.c %_i8mm.c
endif

LIB_SRC  := $(sort $(shell find src -name '*.c' ! -path 'src/cli/*' ! -path 'src/cuda/*'))
LIB_SRC  := $(filter-out $(ARCH_SKIP),$(LIB_SRC))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/unit/*.c))
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
LIB_OBJ  += $(BUILD)/obj/$(BUILD)/gen/webui_assets.o
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)

LIB      := $(BUILD)/libparticle.a
BIN      := $(BUILD)/particle
TESTBIN  := $(BUILD)/pt_test

# ---- CUDA backend (make CUDA=1): src/cuda/*.cu through nvcc, sm_90 code + compute_90 PTX ----
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
NVFLAGS   := -std=c++17 -O2 -g -Iinclude -Isrc -MMD -MP \
             -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90 \
             -Xcompiler -Wall,-Wextra,-Wno-unused-parameter -Werror all-warnings
CUDA_LDLIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -lstdc++ -ldl -lrt -lpthread -lm
CUDA_TEST := $(BUILD)/cuda_test_kern
ifeq ($(CUDA),1)
LIB_OBJ   += $(patsubst %.cu,$(BUILD)/obj/%.o,$(sort $(wildcard src/cuda/*.cu)))
BASEFLAGS += -DPT_CUDA=1
LDLIBS    += $(CUDA_LDLIBS)
endif
$(BUILD)/obj/%.o: %.cu
	@mkdir -p $(dir $@)
	@echo "  NVCC $<"
	@$(NVCC) $(NVFLAGS) -c $< -o $@
# The kernel test (tests/cuda): only libparticle's quant/kern/model objects and cudart, so the
# binary runs on a GPU machine without this host's other libraries.  Run it where a GPU is.
.PHONY: cuda-test
cuda-test: $(CUDA_TEST)
$(CUDA_TEST): $(BUILD)/obj/tests/cuda/test_cuda_kern.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(CUDA_LDLIBS)

.PHONY: all deps oracle test test-bin demo fuzz clean bench bench-kern bench-batch models soak
all: $(BIN) $(LIB)

$(BUILD)/obj/%_avx2.o: ISA = $(ISA_AVX2)
$(BUILD)/obj/%_avx512.o: ISA = $(ISA_AVX512)
$(BUILD)/obj/%_dotprod.o: ISA = $(ISA_DOTPROD)
$(BUILD)/obj/%_i8mm.o: ISA = $(ISA_I8MM)
ifeq ($(ARCH),aarch64)
# Debian's aarch64 gcc 12 stops with an internal compiler error (vect_transform_reduction)
# vectorizing double reductions in test_kv.c and test_model.c: tests are not vectorized.
$(BUILD)/obj/tests/%.o: ISA = -fno-tree-vectorize
endif

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(BASEFLAGS) $(CFLAGS) $(ISA) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(TESTBIN): $(TEST_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(TEST_OBJ) $(LIB) $(LDLIBS)

test-bin: $(TESTBIN) $(BIN)

# Web UI (issue 14): webui/* and `gzip -9n` copies compiled into libparticle by a small
# generator (tools/embed_assets.c, built with the host compiler, no sanitizers).
WEBUI_FILES := $(sort $(wildcard webui/*.html webui/*.js webui/*.css))
$(BUILD)/embed_assets: tools/embed_assets.c
	@mkdir -p $(dir $@)
	$(HOSTCC) -std=c11 -O2 $(WARN) -o $@ $<
# The README's picture of the UI: the browser test's chat screenshot (needs chromium).
.PHONY: screenshots
screenshots: all
	WEBUI_SHOTS=build/webui WEBUI_MODEL=$(DEMO_MODEL) PARTICLE=$(BIN) sh tests/cli/test_webui.sh
	cp build/webui/overview.png docs/webui.png
$(BUILD)/gen/webui_assets.c: $(WEBUI_FILES) $(BUILD)/embed_assets
	@mkdir -p $(BUILD)/gen/gz
	@for f in $(WEBUI_FILES); do gzip -9nc "$$f" >"$(BUILD)/gen/gz/$${f##*/}.gz" || exit 1; done
	$(BUILD)/embed_assets $@ $(BUILD)/gen/gz $(WEBUI_FILES)

# Side-by-side with llama.cpp (tools/bench/run.sh; root: cgroups, drop_caches); not part of
# `make test`.  Kernel throughput figures (docs/PERFORMANCE.md): `make bench-kern`.
bench: all oracle
	sh tools/bench/run.sh

bench-kern: $(BUILD)/bench_kern
$(BUILD)/bench_kern: tools/bench/bench_kern.c $(LIB)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# Aggregate decode tok/s of N sequences batched (engine n_seq; a quick measurement).
bench-batch: $(BUILD)/bench_batch
$(BUILD)/bench_batch: tools/bench/bench_batch.c $(LIB)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# ---- fuzzing (clang + libFuzzer): one binary per tests/fuzz/fuzz_<name>.c ----------------
FUZZ_BUILD := build/fuzz
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -ffp-contract=off -Iinclude -Isrc -g -O1 \
              -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all $(WARN)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_LIB_OBJ += $(FUZZ_BUILD)/obj/build/gen/webui_assets.o
FUZZ_BINS := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_BUILD)/%)

$(FUZZ_BUILD)/obj/%_avx2.o: ISA = $(ISA_AVX2)
$(FUZZ_BUILD)/obj/%_avx512.o: ISA = $(ISA_AVX512)
$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC  $< (fuzz)"
	@clang $(FUZZ_FLAGS) $(ISA) -MMD -MP -c $< -o $@
$(FUZZ_BUILD)/libparticle.a: $(FUZZ_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^
$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_BUILD)/libparticle.a
	clang $(FUZZ_FLAGS) -fsanitize=fuzzer $< $(FUZZ_BUILD)/libparticle.a $(LDLIBS) -o $@
fuzz: $(FUZZ_BINS)

# ---- set-up, tests, demo ------------------------------------------------------------------
deps:
	@sh tools/deps.sh

# The oracle harness: llama.cpp through node-llama-cpp (prebuilt linux-x64 binary only) and
# Hugging Face tokenizers, pinned by tools/oracle/package-lock.json.  A failed install fails.
ORACLE_STAMP := tools/oracle/node_modules/.particle-installed
oracle: $(ORACLE_STAMP)
$(ORACLE_STAMP): tools/oracle/package.json tools/oracle/package-lock.json
	cd tools/oracle && npm ci --omit=optional --no-audit --no-fund --loglevel=error
	@touch $@

# The aarch64 oracle (issue 19): node-llama-cpp's linux-arm64 llama.cpp and the official arm64
# node from npm, pinned by tools/oracle-arm64/package-lock.json, run under qemu-user.
ORACLE_ARM64_STAMP := tools/oracle-arm64/node_modules/.particle-installed
.PHONY: oracle-arm64 test-arm64-oracle
oracle-arm64: $(ORACLE_ARM64_STAMP)
$(ORACLE_ARM64_STAMP): tools/oracle-arm64/package.json tools/oracle-arm64/package-lock.json
	cd tools/oracle-arm64 && npm ci --force --os=linux --cpu=arm64 --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@
test-arm64-oracle: oracle-arm64 all
	sh tools/deps-arm64.sh
	nice $(MAKE) ARCH=aarch64 all
	sh tools/test-arm64-oracle.sh

test: deps oracle
	$(MAKE) -j$(NPROC) test-bin
	$(MAKE) -j$(NPROC) BUILD=build/asan CC=clang SAN=1 CFLAGS="-O1 -g" test-bin
	$(MAKE) -j$(NPROC) BUILD=build/tsan CC=clang SAN=thread CFLAGS="-O1 -g" test-bin
	$(MAKE) -j$(NPROC) fuzz
	@sh tools/run-tests.sh

# `particle serve` under load: 8 clients for 10 minutes (streaming, cancellation, errors;
# every answer checked; RSS and fds back to their warm-up level).  make test runs 20 s of it.
soak: all
	SERVER_SUITES=test_soak SOAK_SECONDS=$${SOAK_SECONDS:-600} PARTICLE=build/particle sh tests/cli/test_server.sh

DEMO_MODEL ?= models-demo/demo-qwen3moe-q8_0.gguf
demo: deps
	$(MAKE) -j$(NPROC) all
	@sh tools/demo.sh "$(DEMO_MODEL)"

# Retrains the committed demo model (tools/train/, ~1 hour on 2 cores; models-demo/MANIFEST.md).
.PHONY: demo-model
demo-model:
	@sh tools/deps.sh train
	$(MAKE) -j$(NPROC) all
	sh tools/train/make-demo-model.sh

clean:
	rm -rf build

-include $(shell find $(BUILD) build/fuzz -name '*.d' 2>/dev/null)
