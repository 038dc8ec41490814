/* cmd_pack.c - `particle pack MODEL.gguf [-o PACK] [--repack] [--verify]`: writes the expert
 * pack (each expert's tensors in one 4 KiB-aligned blob, one read per miss; with --repack its
 * matrices interleaved) and its SHA-256 manifest, or verifies an existing pack against its
 * manifest and the model's identity. */
#include "cli/cli.h"

#include <string.h>
#include <sys/stat.h>

#include "expert/layout.h"
#include "expert/pack.h"
#include "gguf/gguf.h"
#include "model/model.h"

static void help(FILE *f)
{
	fprintf(f,
		"usage: particle pack MODEL.gguf [-o PACK] [--repack] [--verify]\n\n"
		"Writes an expert pack beside the model: every routed expert's tensors (gate, up,\n"
		"down, per-expert scales) contiguous and 4 KiB aligned, so a cache miss is one\n"
		"read, plus PACK.json holding sizes and SHA-256 of the model's identity (size,\n"
		"mtime, header+metadata+tensor infos) and of the pack.  The runtime uses a pack\n"
		"only when its manifest matches the model.  A split model is named by any part;\n"
		"its pack is NAME-00001-of-0000N.gguf.xpack (the identity is part 1's).\n\n"
		"options:\n"
		"  -o PACK     pack file (default: MODEL.gguf.xpack; manifest PACK.json)\n"
		"  --repack    store the Q4_K, Q6_K, Q8_0 and Q5_0 expert matrices with rows\n"
		"              interleaved 16 at a time, as run/serve --repack lays them out in\n"
		"              memory: runs with --repack then read experts ready for the\n"
		"              interleaved kernels (faster prompts under a memory cap); runs\n"
		"              without --repack do not use such a pack (default: off, matrices\n"
		"              as stored)\n"
		"  --verify    check an existing pack: recompute its SHA-256 and compare the\n"
		"              model's identity, without loading the model (default: off)\n"
		"  -h, --help  this text\n");
}

static void progress(uint32_t done, uint32_t n)
{
	fprintf(stderr, "\rpack: layer %u/%u", done, n);
	if (done == n)
		fputc('\n', stderr);
}

static int write_pack(const char *model, const char *pack, bool x16)
{
	struct pt_error err = { 0 };
	struct pt_expert_layout lay;
	pt_gguf *g = NULL;
	struct pt_pack p;
	enum pt_status st = pt_gguf_open(model, &g, &err);
	if (st != PT_OK)
		return pt_cli_fail(&err);
	/* the computed blocks only: the engine never reads a NextN block's experts */
	st = pt_expert_layout_from_gguf_layers(g, pt_model_computed_layers(g), &lay, &err);
	pt_gguf_close(g);
	if (st != PT_OK)
		return pt_cli_fail(&err);
	st = pt_pack_write(model, &lay, x16, pack, progress, &err);
	if (st == PT_OK)
		st = pt_pack_plan(&lay, x16, &p, &err);
	if (st == PT_OK) {
		uint32_t n_x16 = 0, n_parts = 0;
		for (uint32_t m = 0; m < p.n_moe; m++)
			for (uint32_t i = 0; i < lay.moe[m].n_parts; i++, n_parts++)
				n_x16 += p.layers[m].part_x16[i];
		printf("wrote %s: %u MoE layers x %u experts, %.1f MiB, one read per expert",
		       pack, lay.n_moe, lay.n_expert, p.size / (1024.0 * 1024.0));
		if (x16)
			printf(", %u of %u expert tensors interleaved (--repack)", n_x16, n_parts);
		printf(" (manifest %s.json)\n", pack);
		pt_pack_free(&p);
	}
	pt_expert_layout_free(&lay);
	return st == PT_OK ? PT_EXIT_OK : pt_cli_fail(&err);
}

static int verify_pack(const char *model, const char *pack)
{
	struct pt_error err = { 0 };
	struct pt_pack p;
	struct stat st;
	bool have_model = stat(model, &st) == 0;
	if (pt_pack_open(pack, have_model ? model : NULL, NULL, true, &p, &err) != PT_OK)
		return pt_cli_fail(&err);
	printf("%s: OK (%u MoE layers, %llu bytes%s, SHA-256 matches the manifest%s)\n", pack,
	       p.n_moe, (unsigned long long)p.size, p.x16 ? ", interleaved (--repack)" : "",
	       have_model ? ", made from this model" : "; model not found, identity not checked");
	pt_pack_free(&p);
	return PT_EXIT_OK;
}

int pt_cmd_pack(int argc, char **argv)
{
	const char *model = NULL, *out = NULL;
	bool verify = false, x16 = false;
	char def[4200];
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			help(stdout);
			return PT_EXIT_OK;
		} else if (strcmp(argv[i], "--verify") == 0) {
			verify = true;
		} else if (strcmp(argv[i], "--repack") == 0) {
			x16 = true;
		} else if (strcmp(argv[i], "-o") == 0) {
			if (++i == argc) {
				pt_cli_error("-o needs a file name");
				return PT_EXIT_USAGE;
			}
			out = argv[i];
		} else if (argv[i][0] == '-' && argv[i][1]) {
			pt_cli_error("pack: unknown option '%s' (see 'particle pack --help')", argv[i]);
			return PT_EXIT_USAGE;
		} else if (!model) {
			model = argv[i];
		} else {
			pt_cli_error("pack: unexpected argument '%s'", argv[i]);
			return PT_EXIT_USAGE;
		}
	}
	if (!model) {
		help(stderr);
		return PT_EXIT_USAGE;
	}
	/* a split model goes by its first part, whichever part was named */
	char first[4096];
	if (!pt_gguf_split_first_path(model, first, sizeof first)) {
		pt_cli_error("pack: model path too long");
		return PT_EXIT_USAGE;
	}
	model = first;
	if (!out) {
		pt_pack_default_path(model, def, sizeof def);
		out = def;
	}
	if (verify && x16) {
		pt_cli_error("pack: --repack writes a pack; --verify checks one (not both)");
		return PT_EXIT_USAGE;
	}
	return verify ? verify_pack(model, out) : write_pack(model, out, x16);
}
