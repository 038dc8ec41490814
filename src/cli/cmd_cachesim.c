/* cmd_cachesim.c - `particle cachesim TRACE --slots N`: replays a routing trace (written by
 * --trace-experts) against per-layer caches of N slots under LRU, LFU and the offline optimum
 * (Belady) and prints hit rates per layer and in total. */
#include "cli/cli.h"

#include <string.h>

#include "expert/cachesim.h"
#include "expert/trace.h"

static void help(FILE *f)
{
	fprintf(f,
		"usage: particle cachesim TRACE --slots N [--per-layer]\n\n"
		"Replays a routing trace (text 'TOKEN LAYER E1 .. EK' lines, or the binary form;\n"
		"see src/expert/trace.h) against a cache of N expert slots per layer and prints\n"
		"the hit rate of LRU, LFU (whole-run counts, LRU tie-break: the runtime's policy)\n"
		"and Belady's offline optimum.\n\n"
		"options:\n"
		"  --slots N     slots per layer (required; >= the experts one token uses)\n"
		"  --per-layer   also print one line per layer (default: total only)\n"
		"  -h, --help    this text\n");
}

static void line(const char *name, uint64_t req, const uint64_t *hits)
{
	printf("%-8s %10llu", name, (unsigned long long)req);
	for (int p = 0; p < PT_SIM_COUNT; p++)
		printf("  %6.2f%%", req ? 100.0 * (double)hits[p] / (double)req : 0.0);
	putchar('\n');
}

int pt_cmd_cachesim(int argc, char **argv)
{
	const char *path = NULL;
	uint64_t slots = 0;
	bool per_layer = false;
	struct pt_error err = { 0 };
	struct pt_trace t;
	struct pt_sim_result r;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			help(stdout);
			return PT_EXIT_OK;
		} else if (strcmp(argv[i], "--slots") == 0) {
			if (!pt_cli_parse_u64("--slots", i + 1 < argc ? argv[++i] : NULL, 1, 65536,
					      &slots))
				return PT_EXIT_USAGE;
		} else if (strcmp(argv[i], "--per-layer") == 0) {
			per_layer = true;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			pt_cli_error("cachesim: unknown option '%s' (see 'particle cachesim --help')",
				     argv[i]);
			return PT_EXIT_USAGE;
		} else if (!path) {
			path = argv[i];
		} else {
			pt_cli_error("cachesim: unexpected argument '%s'", argv[i]);
			return PT_EXIT_USAGE;
		}
	}
	if (!path || !slots) {
		pt_cli_error("cachesim: needs TRACE and --slots N (see 'particle cachesim --help')");
		return PT_EXIT_USAGE;
	}
	if (pt_trace_read(path, &t, &err) != PT_OK)
		return pt_cli_fail(&err);
	if (pt_cachesim_run(&t, (uint32_t)slots, &r, &err) != PT_OK) {
		pt_trace_free(&t);
		return pt_cli_fail(&err);
	}
	printf("trace %s: %u records, %u layers, %llu slots/layer\n", path, t.n_rec, r.n_layers,
	       (unsigned long long)slots);
	printf("%-8s %10s  %7s  %7s  %7s\n", "layer", "requests", "LRU", "LFU", "Belady");
	for (uint32_t l = 0; per_layer && l < r.n_layers; l++) {
		char name[16];
		snprintf(name, sizeof name, "%u", r.layers[l].layer);
		line(name, r.layers[l].requests, r.layers[l].hits);
	}
	line("total", r.requests, r.hits);
	pt_cachesim_free(&r);
	pt_trace_free(&t);
	return PT_EXIT_OK;
}
