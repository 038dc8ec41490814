/* cmd_mkmodel.c - `particle mkmodel`: writes a synthetic real-shape GGUF checkpoint
 * (src/model/mkmodel.h) for one of the supported MoE architectures. */
#include "cli/cli.h"

#include <string.h>
#include <unistd.h>

#include "model/mkmodel.h"

static void help(FILE *f)
{
	fprintf(f,
		"usage: particle mkmodel --arch ARCH [options] -o OUT.gguf\n"
		"       particle mkmodel --reroute FILE --router-skew S [--threads N] [--progress]\n"
		"                        [--routing-report]\n\n"
		"Writes a synthetic checkpoint with the architecture's real tensor set and shapes,\n"
		"deterministic from --seed (same bytes on every machine).\n\n"
		"options:\n"
		"  --arch ARCH        qwen3moe | bailingmoe2 | sarvam_moe | gemma4 | glm4moe |\n"
		"                     qwen35moe | deepseek2 | gpt-oss (required; glm4moe full =\n"
		"                     GLM-4.5-Air, also 'glm-4.5-air'; qwen35moe full =\n"
		"                     Qwen3.5-35B-A3B, preset 397b = Qwen3.5-397B-A17B's\n"
		"                     published shape, ~220 GB; deepseek2 full =\n"
		"                     DeepSeek-V2-Lite, also 'deepseek-v2-lite';\n"
		"                     'deepseek-v3' / 'deepseek-r1' / 'kimi-k2' are the\n"
		"                     true sizes, 350-600 GB, for make bench only; gpt-oss\n"
		"                     full = gpt-oss-120b, also 'gpt-oss-120b', and\n"
		"                     'gpt-oss-20b');\n"
		"                     sarvam_moe writes bailingmoe2's layout under the PR-branch\n"
		"                     name (general.architecture and key prefix sarvam_moe)\n"
		"  --preset NAME      tiny | small | full (default tiny), or the real model's name\n"
		"                     (glm-4.5-air = glm4moe full): tiny = a few MB, every\n"
		"                     feature of the arch; small = 100-500 MB, realistic ratios;\n"
		"                     full = the flagship's real dimensions (~15-20 GB at q4_k_m;\n"
		"                     glm4moe = GLM-4.5-Air, 72 GB)\n"
		"  --layers N         number of layers (default: the preset's)\n"
		"  --quant MIX        f32 | f16 | bf16 | q8_0 | q6_k | q4_k_m | q5_k_m | q4_0 |\n"
		"                     iq4_xs | mxfp4 | q3_k_m | q3_k_l | q2_k (default q4_k_m;\n"
		"                     gpt-oss: mxfp4, its published mixture: MXFP4 experts, other\n"
		"                     matrices Q8_0); llama.cpp's mixture rules\n"
		"  --seed N           weight seed (default 1)\n"
		"  --router-skew S    routing locality, 0..16 or 'real' (default 0 = memoryless,\n"
		"                     uniform routing): > 0 makes consecutive tokens reuse experts\n"
		"                     as trained routers do (n_embd/8 residual dimensions carry\n"
		"                     attention context that the router reads; docs/MODELS.md);\n"
		"                     'real' = the per-arch level matching published routing of\n"
		"                     real models: qwen3moe %.0f, bailingmoe2 %.0f, gemma4 %.1f,\n"
		"                     glm4moe %.1f (families without published routing\n"
		"                     statistics reproduce Qwen3-30B-A3B's; docs/MODELS.md),\n"
		"                     deepseek2 %.0f, gpt-oss %.0f (not calibrated: no published\n"
		"                     per-expert routing statistics)\n"
		"  --reroute FILE     rewrite FILE (written by mkmodel) in place for --router-skew:\n"
		"                     only the tensors and the key the level changes; the result is\n"
		"                     byte-identical to a fresh file at that level.  Refuses other\n"
		"                     files or layouts.  If interrupted, the file's router_skew is\n"
		"                     NaN: run --reroute again to complete it\n"
		"  --vocab DIR        vocabulary from a Hugging Face tokenizer dir (tokenizer.json,\n"
		"                     tokenizer_config.json) instead of the compact synthetic one\n"
		"                     (deepseek2's deepseek-v3, kimi-k2 and full presets write their\n"
		"                     model's pre-tokenizer over the compact one)\n"
		"  --vocab-gguf FILE  every tokenizer.* key of a GGUF (a vocab-only file such as\n"
		"                     llama.cpp's models/ggml-vocab-*.gguf, or a real model), checked\n"
		"                     as a model's tokenizer; the embedding takes its token count;\n"
		"                     its chat template, or the arch's when it has none\n"
		"  --threads N        quantization threads, 1..%d (default 2)\n"
		"  --progress         progress bar on stderr (default: only when stderr is a tty)\n"
		"  --routing-report   after writing, print the routing report of 256 tokens of a\n"
		"                     fixed text (as `particle routing`)\n"
		"  --split-max-size SIZE  write a split model (llama.cpp's gguf-split): OUT-00001-\n"
		"                     of-0000N.gguf ..., a part closed before a tensor would take\n"
		"                     its tensor bytes over SIZE (N, NM = N*10^6, NG = N*10^9\n"
		"                     bytes, as gguf-split), at least one tensor per part\n"
		"  --split-max-tensors N  split every N tensors instead\n"
		"  --size-only        print the tensor data bytes the file would hold (the file is\n"
		"                     that plus a few MiB of metadata) and write nothing; -o not\n"
		"                     needed (what a script checks against free disk space)\n"
		"  -o, --output FILE  output path (required)\n"
		"  -h, --help         this help\n",
		pt_mkmodel_real_skew(PT_ARCH_QWEN3MOE), pt_mkmodel_real_skew(PT_ARCH_BAILINGMOE2),
		pt_mkmodel_real_skew(PT_ARCH_GEMMA4), pt_mkmodel_real_skew(PT_ARCH_GLM4MOE),
		pt_mkmodel_real_skew(PT_ARCH_DEEPSEEK2), pt_mkmodel_real_skew(PT_ARCH_GPTOSS),
		PT_MKMODEL_MAX_THREADS);
}

static int parse_arch(const char *v, struct pt_mkmodel_opts *o)
{
	if (pt_arch_from_name(v, &o->arch) != 0 || strcmp(v, "sarvam-moe") == 0) {
		pt_cli_error("--arch: unknown architecture '%s' (qwen3moe, bailingmoe2, "
			     "sarvam_moe, gemma4, glm4moe, qwen35moe, deepseek2, gpt-oss)", v);
		return -1;
	}
	o->arch_name = strcmp(v, "sarvam_moe") == 0 ? v : NULL;
	return 0;
}

#define PT_GGUF_MAX_TENSORS_CLI (1u << 20)

/* gguf-split's sizes: N bytes, NM (10^6) or NG (10^9); positive. */
static bool parse_split_size(const char *v, uint64_t *out)
{
	uint64_t n = 0, mul = 1;
	size_t i = 0;
	for (; v[i] >= '0' && v[i] <= '9' && n < (1ull << 40); i++)
		n = n * 10 + (uint64_t)(v[i] - '0');
	if (v[i] == 'M' || v[i] == 'G')
		mul = v[i++] == 'M' ? 1000000ull : 1000000000ull;
	if (i == 0 || v[i] != '\0' || n == 0 || n >= (1ull << 40)) {
		pt_cli_error("--split-max-size expects a positive size such as 64M or 2G "
			     "(10^6 / 10^9 bytes, as gguf-split) or a byte count, got '%s'", v);
		return false;
	}
	*out = n * mul;
	return true;
}

struct flags {
	bool have_arch, report, have_quant;
	const char *reroute;
	const char *creation_flag; /* a flag --reroute does not take */
	bool size_only;
};

/* Returns -1 on a bad flag (error printed), 1 for --help, 0 otherwise. */
static int parse(int argc, char **argv, struct pt_mkmodel_opts *o, struct flags *fl)
{
	uint64_t u;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return 1;
		if (!strcmp(a, "--size-only")) {
			fl->size_only = true;
			continue;
		}
		if (!strcmp(a, "--progress") || !strcmp(a, "--routing-report")) {
			*(a[2] == 'p' ? &o->progress : &fl->report) = true;
			continue;
		}
		if (!v) {
			pt_cli_error("%s: unknown flag or missing value", a);
			return -1;
		}
		i++;
		if (strcmp(a, "--router-skew") && strcmp(a, "--threads") && strcmp(a, "--reroute"))
			fl->creation_flag = a;
		if (!strcmp(a, "--arch")) {
			if (parse_arch(v, o) != 0)
				return -1;
			fl->have_arch = true;
		} else if (!strcmp(a, "--reroute")) {
			fl->reroute = v;
		} else if (!strcmp(a, "--preset")) {
			o->preset = v;
		} else if (!strcmp(a, "--layers")) {
			if (!pt_cli_parse_u64(a, v, 1, PT_ARCH_MAX_LAYERS, &u))
				return -1;
			o->n_layer = (uint32_t)u;
		} else if (!strcmp(a, "--quant")) {
			fl->have_quant = true;
			if (pt_mix_from_name(v, &o->mix) != 0) {
				pt_cli_error("--quant: unknown mixture '%s'", v);
				return -1;
			}
		} else if (!strcmp(a, "--seed")) {
			if (!pt_cli_parse_u64(a, v, 0, UINT64_MAX, &o->seed))
				return -1;
		} else if (!strcmp(a, "--router-skew")) {
			o->skew_real = !strcmp(v, "real");
			if (!o->skew_real && !pt_cli_parse_f64(a, v, 0, 16, &o->router_skew))
				return -1;
		} else if (!strcmp(a, "--vocab")) {
			o->vocab_dir = v;
		} else if (!strcmp(a, "--vocab-gguf")) {
			o->vocab_gguf = v;
		} else if (!strcmp(a, "--threads")) {
			if (!pt_cli_parse_u64(a, v, 1, PT_MKMODEL_MAX_THREADS, &u))
				return -1;
			o->threads = (unsigned)u;
		} else if (!strcmp(a, "--split-max-size")) {
			if (!parse_split_size(v, &o->split_max_size))
				return -1;
		} else if (!strcmp(a, "--split-max-tensors")) {
			if (!pt_cli_parse_u64(a, v, 1, PT_GGUF_MAX_TENSORS_CLI, &u))
				return -1;
			o->split_max_tensors = (uint32_t)u;
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			o->out_path = v;
		} else {
			pt_cli_error("unknown flag '%s' (see 'particle mkmodel --help')", a);
			return -1;
		}
	}
	return 0;
}

/* --reroute FILE: only --router-skew, --threads, --progress, --routing-report. */
static int reroute(struct pt_mkmodel_opts *o, const struct flags *fl, bool have_skew)
{
	struct pt_error err = { 0 };
	if (fl->creation_flag || !have_skew) {
		pt_cli_error("--reroute takes --router-skew (required), --threads, --progress and "
			     "--routing-report only%s%s", fl->creation_flag ? ", not " : "",
			     fl->creation_flag ? fl->creation_flag : "");
		return PT_EXIT_USAGE;
	}
	o->out_path = fl->reroute;
	if (pt_mkmodel_reroute(o, &err) != PT_OK)
		return pt_cli_fail(&err);
	return fl->report ? pt_cli_routing_report(o->out_path, 256, 0, false, stdout)
			  : PT_EXIT_OK;
}

int pt_cmd_mkmodel(int argc, char **argv)
{
	struct pt_mkmodel_opts o = { .preset = "tiny", .mix = PT_MIX_Q4_K_M, .seed = 1,
				     .threads = 2, .progress = isatty(2) != 0,
				     .router_skew = -1 };
	struct flags fl = { 0 };
	struct pt_error err = { 0 };
	int r = parse(argc, argv, &o, &fl);
	if (r < 0)
		return PT_EXIT_USAGE;
	if (r > 0) {
		help(stdout);
		return PT_EXIT_OK;
	}
	const bool have_skew = o.router_skew >= 0 || o.skew_real;
	if (o.router_skew < 0)
		o.router_skew = 0;
	if (fl.reroute && fl.size_only) {
		pt_cli_error("--size-only describes a new file; --reroute rewrites one");
		return PT_EXIT_USAGE;
	}
	if (fl.reroute)
		return reroute(&o, &fl, have_skew);
	if (fl.have_arch && !fl.have_quant)
		o.mix = pt_arch_default_mix(o.arch); /* gpt-oss: its published mxfp4 */
	if (fl.size_only && fl.have_arch && !fl.reroute) {
		uint64_t bytes = 0;
		if (pt_mkmodel_size(&o, &bytes, &err) != PT_OK)
			return pt_cli_fail(&err);
		printf("%llu\n", (unsigned long long)bytes);
		return PT_EXIT_OK;
	}
	if (!fl.have_arch || !o.out_path) {
		pt_cli_error("mkmodel needs --arch and -o (see 'particle mkmodel --help')");
		return PT_EXIT_USAGE;
	}
	/* the preset name is the arch's to judge: tiny | small | full, and the real model's
	 * name where the arch has one (glm4moe: glm-4.5-air); unknown ones exit 2 */
	if (o.split_max_size && o.split_max_tensors) {
		pt_cli_error("give --split-max-size or --split-max-tensors, not both");
		return PT_EXIT_USAGE;
	}
	if ((o.split_max_size || o.split_max_tensors) && fl.report) {
		pt_cli_error("--routing-report with a split output: run 'particle routing -m "
			     "OUT-00001-of-0000N.gguf' instead");
		return PT_EXIT_USAGE;
	}
	if (pt_mkmodel_write(&o, &err) != PT_OK)
		return pt_cli_fail(&err);
	return fl.report ? pt_cli_routing_report(o.out_path, 256, 0, false, stdout) : PT_EXIT_OK;
}
