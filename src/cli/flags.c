/* flags.c - what run and serve parse alike: the argument loop (--help, switches, flags with a
 * value, the usage errors) and the sampling flags.  Each command keeps its own flag tables
 * and defaults; the loop reaches them through struct pt_cli_flags. */
#include "cli/cli.h"

#include <stddef.h>
#include <string.h>

#include "gen/sample.h"

int pt_cli_parse_flags(const struct pt_cli_flags *f, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			f->help();
			return -1;
		}
		if (f->switch_flag(f->opts, a))
			continue;
		const char *next = i + 1 < argc ? argv[i + 1] : NULL;
		const int g = f->own_flag ? f->own_flag(f->opts, a, next) : 0;
		if (g < 0)
			return PT_EXIT_USAGE;
		if (g) {
			i += g - 1;
			continue;
		}
		if (a[0] != '-' || i + 1 >= argc) {
			if (a[0] == '-')
				pt_cli_error("%s: %s needs a value", f->cmd, a);
			else
				pt_cli_error("%s: unexpected argument '%.60s' (see 'particle %s "
					     "--help')", f->cmd, a, f->cmd);
			return PT_EXIT_USAGE;
		}
		const int r = f->value_flag(f->opts, a, argv[i + 1]);
		if (r == 0) {
			pt_cli_error("%s: unknown option '%.60s' (see 'particle %s --help')",
				     f->cmd, a, f->cmd);
			return PT_EXIT_USAGE;
		}
		if (r < 0)
			return PT_EXIT_USAGE;
		i++;
	}
	return 0;
}

int pt_cli_sampler_flag(const char *a, const char *v, struct pt_sampler_opts *so)
{
	static const struct { const char *name, *alias; double lo, hi; size_t off; } real[] = {
		{ "--temperature", "--temp", 0, 100,
		  offsetof(struct pt_sampler_opts, temperature) },
		{ "--top-p", NULL, 0, 1, offsetof(struct pt_sampler_opts, top_p) },
		{ "--min-p", NULL, 0, 1, offsetof(struct pt_sampler_opts, min_p) },
		{ "--repetition-penalty", "--repeat-penalty", 0.01, 100,
		  offsetof(struct pt_sampler_opts, repeat_penalty) },
	};
	static const struct { const char *name; uint64_t hi; size_t off; } whole[] = {
		{ "--top-k", UINT32_MAX, offsetof(struct pt_sampler_opts, top_k) },
		{ "--repeat-last-n", 1u << 20, offsetof(struct pt_sampler_opts, repeat_last_n) },
	};
	for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
		uint64_t x;
		if (strcmp(a, whole[i].name) != 0)
			continue;
		if (!pt_cli_parse_u64(a, v, 0, whole[i].hi, &x))
			return -1;
		*(uint32_t *)((char *)so + whole[i].off) = (uint32_t)x;
		return 1;
	}
	for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
		double d;
		const char *alias = real[i].alias;
		if (strcmp(a, real[i].name) != 0 && !(alias && strcmp(a, alias) == 0))
			continue;
		if (!pt_cli_parse_f64(a, v, real[i].lo, real[i].hi, &d))
			return -1;
		*(float *)((char *)so + real[i].off) = (float)d;
		return 1;
	}
	return 0;
}
