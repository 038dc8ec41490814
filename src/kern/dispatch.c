/* dispatch.c - CPU feature detection and the per-level ops tables.
 *
 * Detection runs once: CPUID for the instruction sets and XGETBV for the OS's promise to save
 * YMM (XCR0 bits 1-2) and opmask/ZMM state (bits 5-7).  A level is usable only when every
 * extension its files are compiled with (see Makefile ISA_AVX2 / ISA_AVX512) is present.
 * The tables are built once for every level; a type without a kernel at some level uses the
 * next lower level's, down to the scalar reference, which exists for every supported type.
 * aarch64 (issue 19): getauxval(AT_HWCAP / AT_HWCAP2) instead of CPUID: ASIMD for neon,
 * ASIMDDP for dotprod, I8MM for i8mm (the kernel reports only what it saves state for).
 */
#include "kern/kern_internal.h"

#if defined(PT_KERN_X86)
#include <cpuid.h>
#elif defined(PT_KERN_ARM64)
#include <sys/auxv.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/status.h"

struct cpu_info {
	int avx2_ok;   /* AVX2 FMA F16C BMI2 + OS YMM state */
	int avx512_ok; /* the above + AVX-512 F BW VL DQ VNNI + OS ZMM state */
	int has_vnni;
	int has_bf16;
	int max_level; /* highest usable level */
	char brand[49];
	char name[PT_KERN_LEVEL_COUNT][200]; /* pt_kern_cpu_name() per selected level */
};

static struct cpu_info cpu;
static struct pt_kern_ops ops_table[PT_KERN_LEVEL_COUNT][PT_TYPE_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Atomic int current_level = -1;
static _Atomic int level_cap = PT_KERN_LEVEL_COUNT; /* test hook, see kern_internal.h */

#if defined(PT_KERN_X86)
static uint64_t xgetbv0(void)
{
	uint32_t lo, hi;
	__asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

static void detect_brand(void)
{
	uint32_t r[12] = { 0 };
	unsigned max_ext = __get_cpuid_max(0x80000000u, NULL);
	if (max_ext >= 0x80000004u) {
		for (unsigned i = 0; i < 3; i++)
			__get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2],
				    &r[4 * i + 3]);
	}
	memcpy(cpu.brand, r, 48);
	cpu.brand[48] = 0;
	/* trim the padding spaces some vendors put around the brand string */
	char *s = cpu.brand;
	while (*s == ' ')
		s++;
	memmove(cpu.brand, s, strlen(s) + 1);
	size_t n = strlen(cpu.brand);
	while (n > 0 && cpu.brand[n - 1] == ' ')
		cpu.brand[--n] = 0;
}

static void detect_cpu(void)
{
	unsigned a, b, c, d;
	detect_brand();
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return;
	int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
	int f16c = (c >> 29) & 1;
	if (!osxsave || !avx)
		return;
	uint64_t xcr0 = xgetbv0();
	int ymm_os = (xcr0 & 0x6) == 0x6, zmm_os = (xcr0 & 0xe6) == 0xe6;
	if (__get_cpuid_max(0, NULL) < 7)
		return;
	__cpuid_count(7, 0, a, b, c, d);
	int avx2 = (b >> 5) & 1, bmi2 = (b >> 8) & 1;
	int f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
	cpu.has_vnni = (c >> 11) & 1;
	unsigned a1, b1, c1, d1;
	__cpuid_count(7, 1, a1, b1, c1, d1);
	cpu.has_bf16 = (a1 >> 5) & 1;
	(void)b1, (void)c1, (void)d1;
	cpu.avx2_ok = ymm_os && avx2 && fma && f16c && bmi2;
	cpu.avx512_ok = cpu.avx2_ok && zmm_os && f && dq && bw && vl && cpu.has_vnni;
	cpu.max_level = cpu.avx512_ok ? PT_KERN_LEVEL_AVX512
				      : cpu.avx2_ok ? PT_KERN_LEVEL_AVX2 : PT_KERN_LEVEL_SCALAR;
}

static void describe_cpu(void)
{
	for (int lv = 0; lv < PT_KERN_LEVEL_COUNT; lv++)
		snprintf(cpu.name[lv], sizeof cpu.name[lv], "%s (%s%s%s%s)",
			 pt_kern_level_name((enum pt_kern_level)lv),
			 cpu.brand[0] ? cpu.brand : "unknown CPU",
			 cpu.avx2_ok ? "; avx2 fma f16c" : "; no avx2",
			 cpu.avx512_ok ? " avx512f/bw/vl/dq vnni" : "",
			 cpu.has_bf16 ? " avx512_bf16" : "");
}

static const pt_kern_dot_fn *level_fns(int level)
{
	switch (level) {
	case PT_KERN_LEVEL_AVX2: return pt_kern_dot_avx2;
	case PT_KERN_LEVEL_AVX512: return pt_kern_dot_avx512;
	default: return pt_kern_dot_scalar;
	}
}

/* dot4 and tile only from the same level as dot: they must be bit-identical to it */
static void level_extras(int lv, int use, struct pt_kern_ops *o, int t)
{
	(void)lv;
	if (use == PT_KERN_LEVEL_AVX2) {
		o->dot4 = pt_kern_dot4_avx2[t];
		o->tile = pt_kern_tile_avx2[t];
	} else if (use == PT_KERN_LEVEL_AVX512) {
		o->dot4 = pt_kern_dot4_avx512[t];
		o->tile = pt_kern_tile_avx512[t];
	}
}

#elif defined(PT_KERN_ARM64)

#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif

static int has_asimd, has_dotprod, has_i8mm;

static void detect_cpu(void)
{
	unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
	has_asimd = (hw & HWCAP_ASIMD) != 0;
	has_dotprod = has_asimd && (hw & HWCAP_ASIMDDP) != 0;
	has_i8mm = has_dotprod && (hw2 & HWCAP2_I8MM) != 0;
	cpu.max_level = has_i8mm      ? PT_KERN_LEVEL_I8MM
			: has_dotprod ? PT_KERN_LEVEL_DOTPROD
			: has_asimd   ? PT_KERN_LEVEL_NEON : PT_KERN_LEVEL_SCALAR;
}

static void describe_cpu(void)
{
	for (int lv = 0; lv < PT_KERN_LEVEL_COUNT; lv++)
		snprintf(cpu.name[lv], sizeof cpu.name[lv], "%s (aarch64%s%s%s)",
			 pt_kern_level_name((enum pt_kern_level)lv), has_asimd ? "; asimd" : "; no asimd",
			 has_dotprod ? " dotprod" : "", has_i8mm ? " i8mm" : "");
}

static const pt_kern_dot_fn *level_fns(int level)
{
	switch (level) {
	case PT_KERN_LEVEL_NEON: return pt_kern_dot_neon;
	case PT_KERN_LEVEL_DOTPROD: return pt_kern_dot_dotprod;
	case PT_KERN_LEVEL_I8MM: return pt_kern_dot_i8mm;
	default: return pt_kern_dot_scalar;
	}
}

/* dot4 and tile from the dot's own level; the i8mm level runs the dotprod dots and dot4, and
 * its SMMLA tiles (or, for a type without one, the dotprod tile) are bit-identical to them. */
static void level_extras(int lv, int use, struct pt_kern_ops *o, int t)
{
	if (use == PT_KERN_LEVEL_NEON) {
		o->dot4 = pt_kern_dot4_neon[t];
		o->tile = pt_kern_tile_neon[t];
	} else if (use == PT_KERN_LEVEL_DOTPROD) {
		o->dot4 = pt_kern_dot4_dotprod[t];
		o->tile = pt_kern_tile_dotprod[t];
		if (lv == PT_KERN_LEVEL_I8MM && pt_kern_tile_i8mm[t].fn)
			o->tile = pt_kern_tile_i8mm[t];
	}
}

#else /* any other architecture: the scalar reference only */

static void detect_cpu(void)
{
	cpu.max_level = PT_KERN_LEVEL_SCALAR;
}

static void describe_cpu(void)
{
	snprintf(cpu.name[0], sizeof cpu.name[0], "scalar (no SIMD level for this architecture)");
}

static const pt_kern_dot_fn *level_fns(int level)
{
	(void)level;
	return pt_kern_dot_scalar;
}

static void level_extras(int lv, int use, struct pt_kern_ops *o, int t)
{
	(void)lv, (void)use, (void)o, (void)t;
}
#endif

/* The X16 kernel of a level (none of its own: the next lower level's, down to scalar). */
static void x16_of(int lv, int t, struct pt_kern_ops *o)
{
	for (int use = lv; use >= 0; use--) {
		const pt_kern_x16_fn *tab = pt_kern_x16_scalar;
#if defined(PT_KERN_X86)
		if (use == PT_KERN_LEVEL_AVX512)
			tab = pt_kern_x16_avx512;
		else if (use == PT_KERN_LEVEL_AVX2)
			tab = pt_kern_x16_avx2;
#else
		if (use > 0)
			continue;
#endif
		if (tab[t]) {
			o->x16 = tab[t];
			o->x16_level = (enum pt_kern_level)use;
			break;
		}
	}
	/* the row kernels of PT_KERN_LAYOUT_X16_ROWS, only where the type has the layout; the
	 * sixteen-row one is the level's own or none (a lower level's would be slower than
	 * sixteen calls of this level's one-row kernel) */
#if defined(PT_KERN_X86)
	if (o->x16 && o->x16_level == PT_KERN_LEVEL_AVX512)
		o->x16_pair = pt_kern_x16_pair_avx512[t];
	if (o->x16 && lv == PT_KERN_LEVEL_AVX512)
		o->x16_dot16 = pt_kern_x16_dot16_avx512[t];
	else if (o->x16 && lv == PT_KERN_LEVEL_AVX2)
		o->x16_dot16 = pt_kern_x16_dot16_avx2[t];
#endif
	for (int use = lv; o->x16 && use >= 0; use--) {
		const pt_kern_dot_fn *tab = pt_kern_x16_dot_scalar;
#if defined(PT_KERN_X86)
		if (use == PT_KERN_LEVEL_AVX512)
			tab = pt_kern_x16_dot_avx512;
		else if (use == PT_KERN_LEVEL_AVX2)
			tab = pt_kern_x16_dot_avx2;
#else
		if (use > 0)
			continue;
#endif
		if (tab[t]) {
			o->x16_dot = tab[t];
			o->x16_dot_level = (enum pt_kern_level)use;
#if defined(PT_KERN_X86)
			if (use == PT_KERN_LEVEL_AVX512)
				o->x16_dot4 = pt_kern_x16_dot4_avx512[t];
			else if (use == PT_KERN_LEVEL_AVX2)
				o->x16_dot4 = pt_kern_x16_dot4_avx2[t];
#endif
			return;
		}
	}
}

static void build_tables(void)
{
	for (int lv = 0; lv < PT_KERN_LEVEL_COUNT; lv++) {
		for (int t = 0; t < PT_TYPE_COUNT; t++) {
			const struct pt_type_traits *tr = pt_type_traits((uint32_t)t);
			int use = lv;
			while (use > 0 && !level_fns(use)[t])
				use--;
			if (!tr || !level_fns(use)[t])
				continue;
			ops_table[lv][t] = (struct pt_kern_ops){ (enum pt_type)t, tr->vec_dot,
								 level_fns(use)[t], NULL,
								 (enum pt_kern_level)use, { .fn = NULL },
								 NULL, PT_KERN_LEVEL_SCALAR, NULL,
								 PT_KERN_LEVEL_SCALAR, NULL, NULL, NULL };
			level_extras(lv, use, &ops_table[lv][t], t);
			x16_of(lv, t, &ops_table[lv][t]);
		}
	}
}

static void init_once(void)
{
	detect_cpu();
	build_tables();
	describe_cpu();
}

enum pt_kern_level pt_kern_level_max(void)
{
	pthread_once(&once, init_once);
	int lv = cpu.max_level;
	int cap = atomic_load(&level_cap);
	return (enum pt_kern_level)(lv < cap ? lv : cap);
}

void pt_kern_test_cap_level(enum pt_kern_level level)
{
	atomic_store(&level_cap, (int)level);
	if (pt_kern_level() > pt_kern_level_max())
		atomic_store(&current_level, (int)pt_kern_level_max());
}

const char *pt_kern_level_name(enum pt_kern_level level)
{
	switch (level) {
	case PT_KERN_LEVEL_SCALAR: return "scalar";
#if defined(PT_KERN_X86)
	case PT_KERN_LEVEL_AVX2: return "avx2";
	case PT_KERN_LEVEL_AVX512: return "avx512";
#elif defined(PT_KERN_ARM64)
	case PT_KERN_LEVEL_NEON: return "neon";
	case PT_KERN_LEVEL_DOTPROD: return "dotprod";
	case PT_KERN_LEVEL_I8MM: return "i8mm";
#endif
	default: return "?";
	}
}

enum pt_status pt_kern_set_level(enum pt_kern_level level, struct pt_error *err)
{
	if ((int)level < 0 || level >= PT_KERN_LEVEL_COUNT)
		return pt_error_set(err, PT_E_INVALID, "unknown CPU level %d", (int)level);
	if (level > pt_kern_level_max())
		return pt_error_set(err, PT_E_UNSUPPORTED,
				    "CPU level %s is not supported by this CPU (best: %s)",
				    pt_kern_level_name(level), pt_kern_level_name(pt_kern_level_max()));
	atomic_store(&current_level, (int)level);
	return PT_OK;
}

#if defined(PT_KERN_X86)
#define LEVEL_NAMES "scalar, avx2 or avx512"
#elif defined(PT_KERN_ARM64)
#define LEVEL_NAMES "scalar, neon, dotprod or i8mm"
#else
#define LEVEL_NAMES "scalar"
#endif

enum pt_status pt_kern_init(struct pt_error *err)
{
	const char *env = getenv("PARTICLE_CPU");
	enum pt_kern_level want = pt_kern_level_max();
	if (env && *env) {
		int lv;
		for (lv = 0; lv < PT_KERN_LEVEL_COUNT; lv++)
			if (strcmp(env, pt_kern_level_name((enum pt_kern_level)lv)) == 0)
				break;
		if (lv == PT_KERN_LEVEL_COUNT)
			return pt_error_set(err, PT_E_INVALID,
					    "PARTICLE_CPU=%s: expected %s", env, LEVEL_NAMES);
		want = (enum pt_kern_level)lv;
		if (want > pt_kern_level_max())
			return pt_error_set(err, PT_E_UNSUPPORTED,
					    "PARTICLE_CPU=%s: this CPU supports at most %s", env,
					    pt_kern_level_name(pt_kern_level_max()));
	}
	return pt_kern_set_level(want, err);
}

enum pt_kern_level pt_kern_level(void)
{
	int lv = atomic_load(&current_level);
	if (lv < 0) {
		lv = (int)pt_kern_level_max();
		int expect = -1;
		atomic_compare_exchange_strong(&current_level, &expect, lv);
		lv = atomic_load(&current_level);
	}
	return (enum pt_kern_level)lv;
}

const char *pt_kern_cpu_name(void)
{
	pthread_once(&once, init_once);
	return cpu.name[pt_kern_level()];
}

const struct pt_kern_ops *pt_kern_ops_at(enum pt_kern_level level, enum pt_type type)
{
	pthread_once(&once, init_once);
	if ((int)level < 0 || level >= PT_KERN_LEVEL_COUNT || level > pt_kern_level_max())
		return NULL;
	if ((int)type < 0 || type >= PT_TYPE_COUNT || !ops_table[level][type].dot)
		return NULL;
	return &ops_table[level][type];
}

const struct pt_kern_ops *pt_kern_ops(enum pt_type type)
{
	return pt_kern_ops_at(pt_kern_level(), type);
}
