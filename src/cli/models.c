/* models.c - the models directory, -m NAME resolution, and `particle list`. */
#include "cli/models.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "expert/pack.h"
#include "gguf/gguf.h"
#include "gguf/gguf_describe.h"
#include "net/source.h"
#include "quant/types.h"
#include "util/alloc.h"
#include "util/safefile.h"

enum pt_status pt_cli_models_dir(char *out, size_t cap, bool create, struct pt_error *err)
{
	const char *env = getenv("PARTICLE_MODELS");
	if (env && env[0]) {
		if ((size_t)snprintf(out, cap, "%s", env) >= cap)
			return pt_error_set(err, PT_E_INVALID, "PARTICLE_MODELS is too long");
		return pt_safe_dir(out, create, err);
	}
	return pt_user_dir("models", out, cap, err);
}

static bool is_file(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

const char *pt_cli_resolve_model(const char *name, char *buf, size_t cap)
{
	char dir[4096];
	if (!name || is_file(name) || strchr(name, '/') || !name[0] || name[0] == '.')
		return name;
	if (pt_cli_models_dir(dir, sizeof dir, false, NULL) != PT_OK)
		return name;
	if ((size_t)snprintf(buf, cap, "%s/%s", dir, name) < cap && is_file(buf))
		return buf;
	if ((size_t)snprintf(buf, cap, "%s/%s.gguf", dir, name) < cap && is_file(buf))
		return buf;
	return name;
}

const char *pt_cli_model_path(const char *name)
{
	static char buf[4400];
	return pt_cli_resolve_model(name, buf, sizeof buf);
}

/* ---- particle list ------------------------------------------------------------------- */

static void help(FILE *f)
{
	fprintf(f,
		"usage: particle list [--dir DIR]\n\n"
		"Lists the models in the models directory ($PARTICLE_MODELS, default\n"
		"~/.cache/particle/models; 'particle pull' puts models there): name, size,\n"
		"architecture, the dominant tensor type of the routed experts (or of all\n"
		"tensors), and whether an expert pack sits beside it.  Unfinished downloads\n"
		"(NAME.partial) are listed as such.  Any name shown works as 'run -m NAME'.\n\n"
		"options:\n"
		"  --dir DIR   list DIR instead\n"
		"  -h, --help  this text\n");
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void describe(const char *dir, const char *name)
{
	char path[4400], pack[4500], man[4600];
	struct pt_gguf_desc d;
	struct stat st;
	pt_gguf *g = NULL;
	const char *arch = "?", *quant = "?";
	int arch_len = 1;
	uint64_t best = 0;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (stat(path, &st) != 0)
		return;
	if (pt_gguf_open(path, &g, NULL) != PT_OK || pt_gguf_describe(g, &d, NULL) != PT_OK) {
		printf("%-48s %10.1f MiB  (not a valid GGUF)\n", name, st.st_size / 1048576.0);
		pt_gguf_close(g);
		return;
	}
	if (d.arch.ptr) {
		arch = d.arch.ptr;
		arch_len = d.arch.len > 24 ? 24 : (int)d.arch.len;
	}
	for (uint32_t t = 0; t < PT_TYPE_COUNT; t++)
		if (d.types[t].bytes > best) {
			best = d.types[t].bytes;
			quant = pt_type_name(t);
		}
	pt_pack_default_path(path, pack, sizeof pack);
	pt_pack_manifest_path(pack, man, sizeof man);
	printf("%-48s %10.1f MiB  %-14.*s %-8s %s\n", name, st.st_size / 1048576.0, arch_len,
	       arch, quant, is_file(pack) && is_file(man) ? "pack" : "-");
	pt_gguf_close(g);
}

int pt_cmd_list(int argc, char **argv)
{
	char dirbuf[4096];
	const char *dir = NULL;
	struct pt_error err = { 0 };
	char **names = NULL;
	size_t n = 0, cap = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			help(stdout);
			return PT_EXIT_OK;
		} else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
			dir = argv[++i];
		} else {
			pt_cli_error("list: unexpected argument '%s' (see 'particle list --help')",
				     argv[i]);
			return PT_EXIT_USAGE;
		}
	}
	if (!dir) {
		if (pt_cli_models_dir(dirbuf, sizeof dirbuf, true, &err) != PT_OK)
			return pt_cli_fail(&err);
		dir = dirbuf;
	}
	DIR *dp = opendir(dir);
	if (!dp) {
		pt_cli_error("cannot open models directory %s", dir);
		return PT_EXIT_FAIL;
	}
	for (struct dirent *e; (e = readdir(dp));) {
		size_t l = strlen(e->d_name);
		bool gguf = l > 5 && !strcmp(e->d_name + l - 5, ".gguf");
		bool partial = l > 13 && !strcmp(e->d_name + l - 13, ".gguf.partial");
		if (e->d_name[0] == '.' || (!gguf && !partial))
			continue;
		if (n == cap) {
			char **nn = pt_reallocn(names, cap ? cap * 2 : 16, sizeof *names);
			if (!nn)
				break;
			names = nn;
			cap = cap ? cap * 2 : 16;
		}
		if (!(names[n] = pt_strdup(e->d_name)))
			break;
		n++;
	}
	closedir(dp);
	if (n)
		qsort(names, n, sizeof *names, cmp_names);
	printf("models in %s:\n", dir);
	if (n == 0)
		printf("  (none; get one with 'particle pull hf:OWNER/REPO/FILE.gguf')\n");
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(names[i]);
		if (l > 8 && !strcmp(names[i] + l - 8, ".partial")) {
			char path[4400];
			struct stat st;
			snprintf(path, sizeof path, "%s/%s", dir, names[i]);
			if (stat(path, &st) == 0)
				printf("%-48.*s %10.1f MiB  (download incomplete: run the same "
				       "'particle pull' again to resume)\n", (int)(l - 8), names[i],
				       st.st_size / 1048576.0);
		} else {
			describe(dir, names[i]);
		}
		pt_free(names[i]);
	}
	pt_free(names);
	return PT_EXIT_OK;
}
