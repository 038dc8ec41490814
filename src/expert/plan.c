/* plan.c - the memory planner (slots per layer from the budget) and the default budget
 * (cgroup v1/v2 limit, MemAvailable).  Owns no state. */
#include "expert/plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)
#define MIN_HEADROOM (256ull << 20)

/* fixed = resident + kv + scratch + prompt cache; 1 on overflow. */
static int fixed_bytes(const struct pt_plan_input *in, uint64_t *out)
{
	uint64_t a, b;
	if (pt_add_overflow(in->resident_bytes, in->kv_bytes, &a) ||
	    pt_add_overflow(a, in->scratch_bytes, &b) ||
	    pt_add_overflow(b, in->cache_bytes, &a) || pt_add_overflow(a, in->ckpt_bytes, out))
		return 1;
	return 0;
}

/* " (4 sequences)" after the KV size when there are several, else "". */
static const char *seq_note(const struct pt_plan_input *in, char buf[32])
{
	buf[0] = 0;
	if (in->n_seq > 1)
		snprintf(buf, 32, " (%u sequences)", in->n_seq);
	return buf;
}

/* " + prompt cache X" / ", prompt cache X" when one is set aside, then the same for the
 * recurrent-state checkpoints, else "". */
static const char *cache_note(const struct pt_plan_input *in, const char *sep, char buf[96])
{
	char b[PT_PLAN_SIZE_LEN];
	char c[PT_PLAN_SIZE_LEN];
	int n = 0;
	buf[0] = 0;
	if (in->cache_bytes)
		n = snprintf(buf, 96, "%sprompt cache %s", sep, pt_plan_size(in->cache_bytes, b));
	if (in->ckpt_bytes && n >= 0 && n < 96)
		snprintf(buf + n, 96 - (size_t)n, "%scheckpoints %s", sep,
			 pt_plan_size(in->ckpt_bytes, c));
	return buf;
}

/* bytes of s slots on every MoE layer, 1 on overflow */
static int pool_for(const struct pt_plan_input *in, uint64_t s, uint64_t *out)
{
	uint64_t per;
	return pt_mul_overflow(s, in->slot_bytes, &per) ||
	       pt_mul_overflow(per, in->n_moe_layers, out);
}

const char *pt_plan_size(uint64_t bytes, char buf[PT_PLAN_SIZE_LEN])
{
	if (bytes >= (1ull << 30))
		snprintf(buf, PT_PLAN_SIZE_LEN, "%.2f GiB", bytes / GIB);
	else if (bytes >= (1ull << 20))
		snprintf(buf, PT_PLAN_SIZE_LEN, "%.1f MiB", bytes / MIB);
	else if (bytes >= 1024)
		snprintf(buf, PT_PLAN_SIZE_LEN, "%.1f KiB", bytes / 1024.0);
	else
		snprintf(buf, PT_PLAN_SIZE_LEN, "%" PRIu64 " B", bytes);
	return buf;
}

/* The refusal: every term of the plan (experts: how the experts were counted), the total and
 * the smallest budget that works. */
static enum pt_status refuse(const struct pt_plan_input *in, const char *experts, uint64_t need,
			     struct pt_error *err)
{
	char b[5][PT_PLAN_SIZE_LEN], sq[32], ca[96];
	return pt_error_set(err, PT_E_LIMIT,
			    "memory budget %s too small: resident %s + KV %s%s + scratch %s%s + %s "
			    "needs %s (smallest budget that works: %" PRIu64 " bytes = %.2f GiB)",
			    pt_plan_size(in->budget, b[0]), pt_plan_size(in->resident_bytes, b[1]),
			    pt_plan_size(in->kv_bytes, b[2]), seq_note(in, sq),
			    pt_plan_size(in->scratch_bytes, b[3]), cache_note(in, " + ", ca), experts,
			    pt_plan_size(need, b[4]), need, need / GIB);
}

static enum pt_status too_small(const struct pt_plan_input *in, uint32_t s, uint64_t need,
				struct pt_error *err)
{
	char b[PT_PLAN_SIZE_LEN], experts[96];
	snprintf(experts, sizeof experts, "%u slots/layer x %u layers x %s", s, in->n_moe_layers,
		 pt_plan_size(in->slot_bytes, b));
	return refuse(in, experts, need, err);
}

static enum pt_status too_small_mapped(const struct pt_plan_input *in, uint64_t need,
				       struct pt_error *err)
{
	char b[PT_PLAN_SIZE_LEN], experts[64];
	snprintf(experts, sizeof experts, "routed experts %s mapped",
		 pt_plan_size(in->mapped_bytes, b));
	return refuse(in, experts, need, err);
}

/* Every expert in the mapping: its actual bytes, all or nothing. */
static enum pt_status plan_mapped(const struct pt_plan_input *in, uint64_t fixed,
				  struct pt_plan *out, struct pt_error *err)
{
	uint64_t need;
	if (pt_add_overflow(fixed, in->mapped_bytes, &need))
		return pt_error_set(err, PT_E_LIMIT, "planner: sizes overflow");
	out->min_budget = need;
	if (need > in->budget)
		return too_small_mapped(in, need, err);
	out->slots_per_layer = in->n_expert;
	out->all_experts = true;
	out->pool_bytes = in->mapped_bytes;
	out->total_bytes = need;
	return PT_OK;
}

static enum pt_status check_input(const struct pt_plan_input *in, struct pt_error *err)
{
	if (in->n_expert == 0 || in->top_k == 0 || in->top_k > in->n_expert)
		return pt_error_set(err, PT_E_INVALID, "planner: bad expert counts (top-k %u of %u)",
				    in->top_k, in->n_expert);
	if (in->n_moe_layers > 0 && in->slot_bytes == 0)
		return pt_error_set(err, PT_E_INVALID, "planner: zero expert slot size");
	if (in->slots_override && (in->slots_override < in->top_k ||
				   in->slots_override > in->n_expert))
		return pt_error_set(err, PT_E_INVALID,
				    "--expert-slots %u must be between top-k %u and n_expert %u",
				    in->slots_override, in->top_k, in->n_expert);
	return PT_OK;
}

enum pt_status pt_plan_compute(const struct pt_plan_input *in, struct pt_plan *out,
			       struct pt_error *err)
{
	uint64_t fixed, pool, need, avail, per_slot_all, s;
	enum pt_status st = check_input(in, err);
	if (st != PT_OK)
		return st;
	memset(out, 0, sizeof *out);
	if (fixed_bytes(in, &fixed) || pool_for(in, in->top_k, &pool) ||
	    pt_add_overflow(fixed, pool, &need))
		return pt_error_set(err, PT_E_LIMIT, "planner: sizes overflow");
	if (in->mapped_bytes)
		return plan_mapped(in, fixed, out, err);
	out->min_budget = need;
	if (in->slots_override) {
		if (pool_for(in, in->slots_override, &pool) || pt_add_overflow(fixed, pool, &need))
			return pt_error_set(err, PT_E_LIMIT, "planner: sizes overflow");
		if (need > in->budget)
			return too_small(in, in->slots_override, need, err);
		s = in->slots_override;
	} else {
		if (need > in->budget)
			return too_small(in, in->top_k, need, err);
		avail = in->budget - fixed;
		per_slot_all = in->slot_bytes * (uint64_t)in->n_moe_layers; /* <= pool, no overflow */
		s = per_slot_all ? avail / per_slot_all : in->n_expert;
		if (s > in->n_expert)
			s = in->n_expert;
	}
	out->slots_per_layer = (uint32_t)s;
	out->all_experts = s == in->n_expert;
	pool_for(in, s, &out->pool_bytes);
	out->total_bytes = fixed + out->pool_bytes;
	return PT_OK;
}

int pt_plan_format(const struct pt_plan_input *in, const struct pt_plan *p, char *buf, size_t n)
{
	char b[6][PT_PLAN_SIZE_LEN], sq[32], ca[96];
	if (in->mapped_bytes)
		return snprintf(buf, n, "resident %s, KV %s%s%s, routed experts %s mapped, total %s "
				"\u2264 budget %s", pt_plan_size(in->resident_bytes, b[0]),
				pt_plan_size(in->kv_bytes, b[1]), seq_note(in, sq),
				cache_note(in, ", ", ca), pt_plan_size(p->pool_bytes, b[2]),
				pt_plan_size(p->total_bytes, b[3]), pt_plan_size(in->budget, b[4]));
	return snprintf(buf, n,
			"resident %s, KV %s%s%s, %u slots/layer \u00d7 %u layers \u00d7 %s = %s, "
			"total %s \u2264 budget %s%s",
			pt_plan_size(in->resident_bytes, b[0]), pt_plan_size(in->kv_bytes, b[1]),
			seq_note(in, sq), cache_note(in, ", ", ca), p->slots_per_layer, in->n_moe_layers, pt_plan_size(in->slot_bytes, b[2]),
			pt_plan_size(p->pool_bytes, b[3]), pt_plan_size(p->total_bytes, b[4]),
			pt_plan_size(in->budget, b[5]),
			p->all_experts ? " (every expert cached)" : "");
}

/* Reads the first number in root+path; "max" reads as UINT64_MAX.  0 when absent. */
static int read_num(const char *root, const char *path, uint64_t *out)
{
	char full[1024], buf[64];
	FILE *f;
	size_t got;
	snprintf(full, sizeof full, "%s%s", root, path);
	f = fopen(full, "re");
	if (!f)
		return 0;
	got = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[got] = '\0';
	if (strncmp(buf, "max", 3) == 0) {
		*out = UINT64_MAX;
		return 1;
	}
	return sscanf(buf, "%" SCNu64, out) == 1;
}

/* Min of file `name` over dir and its ancestors under mount (limits can sit on a parent; in
 * a container the path may not exist below the namespaced mount, then only the root counts). */
static uint64_t min_up(const char *root, const char *mount, const char *cgpath,
		       const char *name, uint64_t *usage, const char *usage_name)
{
	char dir[512], file[700];
	uint64_t v, best = UINT64_MAX;
	snprintf(dir, sizeof dir, "%s", cgpath);
	for (;;) {
		size_t len = strlen(dir);
		while (len > 0 && dir[len - 1] == '/')
			dir[--len] = '\0';
		snprintf(file, sizeof file, "%s%s/%s", mount, dir, name);
		if (read_num(root, file, &v) && v < best)
			best = v;
		if (*usage == 0) {
			snprintf(file, sizeof file, "%s%s/%s", mount, dir, usage_name);
			read_num(root, file, usage);
		}
		if (len == 0)
			break;
		char *slash = strrchr(dir, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	return best;
}

void pt_plan_cgroup_limit(const char *root, uint64_t *limit, uint64_t *usage)
{
	char path[1024], line[1024];
	FILE *f;
	*limit = UINT64_MAX;
	*usage = 0;
	if (!root)
		root = "";
	snprintf(path, sizeof path, "%s/proc/self/cgroup", root);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL, *nl;
		uint64_t v;
		if (!c2)
			continue;
		if ((nl = strchr(c2, '\n')))
			*nl = '\0';
		*c1 = '\0';
		*c2 = '\0';
		if (strcmp(line, "0") == 0 && c1[1] == '\0') /* v2: "0::/path" */
			v = min_up(root, "/sys/fs/cgroup", c2 + 1, "memory.max", usage,
				   "memory.current");
		else if (strstr(c1 + 1, "memory")) /* v1: "N:memory:/path" (maybe co-mounted) */
			v = min_up(root, "/sys/fs/cgroup/memory", c2 + 1, "memory.limit_in_bytes",
				   usage, "memory.usage_in_bytes");
		else
			continue;
		/* v1 reports "unlimited" as a page-rounded LONG_MAX */
		if (v < (UINT64_MAX >> 2) && v < *limit)
			*limit = v;
	}
	fclose(f);
}

static uint64_t mem_available(const char *root)
{
	char path[1024], line[256];
	uint64_t kb = 0;
	FILE *f;
	snprintf(path, sizeof path, "%s/proc/meminfo", root);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kb) == 1)
			break;
	fclose(f);
	return kb > (UINT64_MAX >> 10) ? 0 : kb << 10;
}

enum pt_status pt_plan_default_budget(const char *root, uint64_t *out, const char **source,
				      struct pt_error *err)
{
	uint64_t limit, usage, avail, room, headroom;
	const char *src = "MemAvailable";
	if (!root)
		root = "";
	pt_plan_cgroup_limit(root, &limit, &usage);
	avail = mem_available(root);
	room = avail ? avail : UINT64_MAX;
	if (limit != UINT64_MAX) {
		uint64_t cg = limit > usage ? limit - usage : 0;
		if (cg < room) {
			room = cg;
			src = "cgroup memory limit";
		}
	}
	if (room == UINT64_MAX)
		return pt_error_set(err, PT_E_UNSUPPORTED,
				    "cannot determine available memory (no MemAvailable in "
				    "%s/proc/meminfo, no cgroup limit); pass --memory SIZE", root);
	headroom = room / 8 > MIN_HEADROOM ? room / 8 : MIN_HEADROOM;
	*out = room > headroom ? room - headroom : 0;
	if (source)
		*source = src;
	return PT_OK;
}
