/* alloc.h - the one allocator.  Checked n*size, byte accounting, and a fail-at-Nth hook so
 * tests can sweep every allocation failure path.  Raw malloc is not used elsewhere. */
#ifndef PT_ALLOC_H
#define PT_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *pt_malloc(size_t size);
void *pt_calloc(size_t n, size_t size);           /* NULL on n*size overflow */
void *pt_mallocn(size_t n, size_t size);          /* malloc(n*size), NULL on overflow */
void *pt_realloc(void *p, size_t size);
void *pt_reallocn(void *p, size_t n, size_t size);
char *pt_strndup(const char *s, size_t n);        /* always NUL-terminated copy */
char *pt_strdup(const char *s);
void pt_free(void *p);

/* Zeroed anonymous memory for a large buffer read as a stream (model copies, the expert
 * pool, the KV cache): page aligned, never the malloc heap, in 2 MiB pages where the kernel
 * gives them (MADV_HUGEPAGE: fewer translation misses; PERFORMANCE rounds 41 and 42).  NULL
 * when bytes is 0 or the mapping fails (or the fail-at hook fires: it counts these calls
 * too).  pt_free_pages takes the same bytes; NULL is a no-op. */
void *pt_alloc_pages(size_t bytes);
void pt_free_pages(void *p, size_t bytes);

/* Checked arithmetic: return 0 and store the result, or 1 on overflow. */
static inline int pt_mul_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_mul_overflow(a, b, out);
}
static inline int pt_add_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_add_overflow(a, b, out);
}

/* Test hook: make the k-th allocation from now fail (k >= 1); 0 disables.  Counts only
 * pt_malloc/pt_calloc/pt_mallocn/pt_realloc and pt_strdup calls. */
void pt_alloc_fail_at(uint64_t k);
/* Number of allocation calls since start (for sweeps). */
uint64_t pt_alloc_calls(void);

#endif
