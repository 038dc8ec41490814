/* bench_expert_io.c - one read per expert (pack) versus one per tensor slice (GGUF), on a
 * real file, with the page cache dropped before each run.  Not part of the build:
 *
 *   make -j2 && cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc tools/bench/bench_expert_io.c \
 *      build/libparticle.a -luring -lcrypto -lcjson -lpthread -lm -o build/bench_expert_io
 *   build/bench_expert_io DIR [LAYERS] [TOKENS]        (as root, for drop_caches)
 *
 * Model shape: Qwen3-30B-A3B Q4_K experts (gate/up 768x2048, down 2048x768, 884,736 bytes
 * each, slices at 32-byte-aligned, not 4 KiB-aligned, offsets like a GGUF), 128 experts,
 * top-8 routing drawn uniformly, 8 slots/layer (a cold cache: nearly every use is a miss).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "expert/pack.h"
#include "expert/store.h"
#include "util/alloc.h"
#include "util/safefile.h"

#define N_EXPERT 128
#define TOP_K 8
#define SLICE 884736ull

static void drop_caches(void)
{
	sync();
	FILE *f = fopen("/proc/sys/vm/drop_caches", "w");
	if (f) {
		fputs("3\n", f);
		fclose(f);
	} else {
		fprintf(stderr, "warning: cannot drop caches (not root)\n");
	}
}

static int make_model(const char *path, uint32_t layers, struct pt_expert_layout *l)
{
	uint64_t off = 4096 + 96; /* GGUF data is 32-aligned: slices straddle 4 KiB pages */
	static uint8_t buf[1 << 20];
	memset(l, 0, sizeof *l);
	l->n_expert = N_EXPERT;
	l->n_moe = layers;
	l->data_offset = 4096;
	l->moe = pt_calloc(layers, sizeof *l->moe);
	for (uint32_t m = 0; m < layers; m++) {
		l->moe[m].layer = m;
		l->moe[m].n_parts = 3;
		for (uint32_t p = 0; p < 3; p++) {
			struct pt_expert_part *q = &l->moe[m].part[p];
			q->kind = p == 0 ? PT_PART_GATE : p == 1 ? PT_PART_UP : PT_PART_DOWN;
			snprintf(q->name, sizeof q->name, "blk.%u.ffn_%s_exps.weight", m,
				 p == 0 ? "gate" : p == 1 ? "up" : "down");
			q->type = 12;
			q->file_offset = off;
			q->stride = SLICE;
			off += SLICE * N_EXPERT + 32;
		}
		l->moe[m].expert_bytes = 3 * SLICE;
	}
	l->file_size = off;
	struct stat st;
	if (stat(path, &st) == 0 && (uint64_t)st.st_size == off)
		return 0; /* reuse the file of an earlier run */
	/* temp + rename (safefile.h): DIR may be shared; a link at the name is replaced */
	struct pt_safe_file out;
	FILE *f = pt_safe_create(&out, path, 0644, NULL) == PT_OK ? pt_safe_stdio(&out, NULL)
								     : NULL;
	if (!f) {
		pt_safe_abort(&out);
		return -1;
	}
	uint32_t x = 1;
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 16);
	for (uint64_t done = 0; done < off; done += sizeof buf) {
		buf[done % 997] ^= 1; /* no two MiB alike */
		fwrite(buf, 1, off - done < sizeof buf ? off - done : sizeof buf, f);
	}
	return pt_safe_commit(&out, NULL) == PT_OK ? 0 : -1;
}

static void run(const char *name, const char *model, struct pt_expert_layout *l,
		const struct pt_pack *pack, enum pt_io_mode mode, uint32_t tokens)
{
	struct pt_expert_store_config cfg = { .model_path = model, .layout = l, .pack = pack,
					      .mode = mode, .slots_per_layer = TOP_K };
	pt_expert_store *s = NULL;
	struct pt_error err = { 0 };
	uint8_t *map = NULL;
	int fd = -1;
	volatile uint64_t sink = 0;
	if (mode == PT_IO_MMAP) {
		fd = open(model, O_RDONLY);
		map = mmap(NULL, l->file_size, PROT_READ, MAP_SHARED, fd, 0);
		cfg.map_base = map;
		cfg.map_size = l->file_size;
	}
	if (pt_expert_store_open(&cfg, &s, &err) != PT_OK) {
		fprintf(stderr, "%s: %s\n", name, err.msg);
		exit(1);
	}
	drop_caches();
	uint32_t x = 42, uses = 0;
	uint64_t t0 = pt_io_now_ns();
	for (uint32_t t = 0; t < tokens; t++)
		for (uint32_t m = 0; m < l->n_moe; m++) {
			uint32_t ex[TOP_K];
			for (uint32_t k = 0; k < TOP_K; k++) {
				uint32_t e, dup;
				do {
					e = (x = x * 1103515245u + 12345u) >> 16 & (N_EXPERT - 1);
					dup = 0;
					for (uint32_t q = 0; q < k; q++)
						dup |= ex[q] == e;
				} while (dup);
				ex[k] = e;
			}
			if (pt_expert_store_prefetch(s, m, ex, TOP_K, &err) != PT_OK) {
				fprintf(stderr, "%s: %s\n", name, err.msg);
				exit(1);
			}
			for (uint32_t k = 0; k < TOP_K; k++) {
				struct pt_expert_view v;
				if (pt_expert_store_get(s, m, ex[k], &v, &err) != PT_OK) {
					fprintf(stderr, "%s: %s\n", name, err.msg);
					exit(1);
				}
				for (uint32_t p = 0; p < v.n_parts; p++) /* touch every page */
					for (uint64_t b = 0; b < SLICE; b += 4096)
						sink += v.part[p][b];
				pt_expert_store_release(s, m, ex[k]);
				uses++;
			}
			pt_expert_store_end_layer(s, m);
		}
	double sec = (double)(pt_io_now_ns() - t0) / 1e9;
	struct pt_cache_stats st;
	pt_expert_store_stats(s, UINT32_MAX, &st);
	uint64_t payload = (uint64_t)uses * 3 * SLICE;
	printf("| %-31s | %5u | %6.1f%% | %8.2f | %7.0f | %6.1f |\n", name, uses,
	       st.requests ? 100.0 * (double)st.hits / (double)st.requests : 0.0,
	       1e3 * sec / uses, payload / sec / 1e6,
	       mode == PT_IO_MMAP ? 0.0 : (double)st.bytes_read / (double)(st.misses ? st.misses : 1)
							/ 1e6);
	fprintf(stderr, "  (%s; %s)\n", name, pt_expert_store_describe(s));
	pt_expert_store_close(s);
	if (map)
		munmap(map, l->file_size);
	if (fd >= 0)
		close(fd);
	(void)sink;
}

int main(int argc, char **argv)
{
	char model[4096], pack[4200];
	struct pt_expert_layout l;
	struct pt_pack p;
	struct pt_error err = { 0 };
	uint32_t layers = argc > 2 ? (uint32_t)atoi(argv[2]) : 8;
	uint32_t tokens = argc > 3 ? (uint32_t)atoi(argv[3]) : 16;
	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR [LAYERS] [TOKENS]\n", argv[0]);
		return 2;
	}
	snprintf(model, sizeof model, "%s/bench-experts.gguf", argv[1]);
	pt_pack_default_path(model, pack, sizeof pack);
	if (make_model(model, layers, &l) != 0 ||
	    (pt_pack_open(pack, model, &l, false, &p, NULL) != PT_OK &&
	     (pt_pack_write(model, &l, pack, NULL, &err) != PT_OK ||
	      pt_pack_open(pack, model, &l, false, &p, &err) != PT_OK))) {
		fprintf(stderr, "setup: %s\n", err.msg);
		return 1;
	}
	printf("%u layers x %d experts x 3 x %llu B (%.2f GB model); %u tokens, top-%d, %d "
	       "slots/layer\n\n", layers, N_EXPERT, SLICE, l.file_size / 1e9, tokens, TOP_K, TOP_K);
	printf("| %-31s | %5s | %7s | %8s | %7s | %6s |\n", "mode", "uses", "hits",
	       "ms/use", "MB/s", "MB/miss");
	printf("|---|---:|---:|---:|---:|---:|\n");
	for (int rep = 0; rep < 3; rep++) { /* interleaved: the disk's speed drifts */
		run("GGUF, 3 reads/expert, O_DIRECT", model, &l, NULL, PT_IO_DIRECT, tokens);
		run("pack, 1 read/expert, O_DIRECT", model, &l, &p, PT_IO_DIRECT, tokens);
	}
	run("GGUF, 3 reads/expert, buffered", model, &l, NULL, PT_IO_BUFFERED, tokens);
	run("pack, 1 read/expert, buffered", model, &l, &p, PT_IO_BUFFERED, tokens);
	run("mmap (llama.cpp-like)", model, &l, NULL, PT_IO_MMAP, tokens);
	pt_pack_free(&p);
	return 0;
}
