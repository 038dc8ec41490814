/* gpu_opts.c - the GPU flags shared by run, eval and bench (issue 16): --gpu,
 * --gpu-layers N|all, --vram SIZE, --gpu-device I.  Any of them asks for the CUDA backend.
 *
 * A CPU-only build (the default `make`) refuses them with how to get a CUDA build.  A
 * `make CUDA=1` build opens the device and reports a missing driver, a missing device or an
 * out-of-range --gpu-device as one line with the numbers; the model path on the GPU does not
 * exist yet (this is the kernel slice of issue 16), so it then fails with a line saying so
 * instead of silently running on the CPU. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#ifdef PT_CUDA
#include "cuda/gpu.h"
#endif

int pt_cli_gpu_flag(const char *f, const char *v, struct pt_cli_gpu *g)
{
	if (!strcmp(f, "--gpu")) {
		g->on = true;
		return 1;
	}
	if (strcmp(f, "--gpu-layers") && strcmp(f, "--vram") && strcmp(f, "--gpu-device"))
		return 0;
	if (!v) {
		pt_cli_error("%s needs a value", f);
		return -1;
	}
	g->on = true;
	uint64_t x;
	if (!strcmp(f, "--gpu-layers")) {
		g->layers_set = true;
		if (!strcmp(v, "all")) {
			g->layers = -1;
			return 2;
		}
		if (!pt_cli_parse_u64(f, v, 0, 65535, &x))
			return -1;
		g->layers = (int64_t)x;
		return 2;
	}
	if (!strcmp(f, "--vram")) {
		if (!pt_cli_parse_size(f, v, &g->vram))
			return -1;
		if (g->vram == 0) {
			pt_cli_error("--vram must be above 0");
			return -1;
		}
		return 2;
	}
	if (!pt_cli_parse_u64(f, v, 0, 255, &x))
		return -1;
	g->device = (int)x;
	return 2;
}

int pt_cli_gpu_check(const struct pt_cli_gpu *g)
{
	if (!g->on)
		return PT_EXIT_OK;
#ifndef PT_CUDA
	pt_cli_error("this build has no CUDA backend; rebuild with make CUDA=1");
	return PT_EXIT_USAGE;
#else
	struct pt_error err = { 0 };
	struct pt_gpu_info info;
	enum pt_status st = pt_gpu_open(g->device, &info, &err);
	if (st != PT_OK) {
		pt_cli_error("--gpu: %s", err.msg);
		return PT_EXIT_FAIL;
	}
	const double gib = 1073741824.0;
	if (g->vram > info.free_bytes) {
		pt_cli_error("--vram %.2f GiB exceeds the %.2f GiB free on CUDA device %d (%s)",
			     g->vram / gib, info.free_bytes / gib, info.device, info.name);
		return PT_EXIT_FAIL;
	}
	pt_cli_error("--gpu: CUDA device %d (%s, %.1f GiB free) is usable, but particle cannot "
		     "run a model on the GPU yet (issue 16: only the kernels exist); run without "
		     "--gpu", info.device, info.name, info.free_bytes / gib);
	return PT_EXIT_FAIL;
#endif
}
