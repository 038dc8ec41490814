/* alloc.c - checked allocation with a fault-injection hook (see alloc.h).
 * The counters are process-wide test instrumentation, not model state. */
#include "util/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static _Atomic uint64_t alloc_calls;
static _Atomic uint64_t alloc_fail_target; /* absolute call number that fails; 0 = never */

void pt_alloc_fail_at(uint64_t k)
{
	alloc_fail_target = k ? atomic_load(&alloc_calls) + k : 0;
}

uint64_t pt_alloc_calls(void)
{
	return atomic_load(&alloc_calls);
}

static int should_fail(void)
{
	uint64_t n = atomic_fetch_add(&alloc_calls, 1) + 1;
	uint64_t t = atomic_load(&alloc_fail_target);
	return t != 0 && n == t;
}

void *pt_malloc(size_t size)
{
	if (should_fail())
		return NULL;
	return malloc(size ? size : 1);
}

void *pt_mallocn(size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total))
		return NULL;
	return pt_malloc(total);
}

void *pt_calloc(size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total))
		return NULL;
	if (should_fail())
		return NULL;
	return calloc(total ? total : 1, 1);
}

void *pt_realloc(void *p, size_t size)
{
	if (should_fail())
		return NULL;
	return realloc(p, size ? size : 1);
}

void *pt_reallocn(void *p, size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total))
		return NULL;
	return pt_realloc(p, total);
}

char *pt_strndup(const char *s, size_t n)
{
	char *d = pt_malloc(n + 1);
	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

char *pt_strdup(const char *s)
{
	return pt_strndup(s, strlen(s));
}

void pt_free(void *p)
{
	free(p);
}

void *pt_alloc_pages(size_t bytes)
{
	if (bytes == 0 || should_fail())
		return NULL;
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	(void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint: 4 KiB pages work too */
	return p;
}

void pt_free_pages(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes);
}
