/* grammar_int.h - the compiled grammar and the byte matcher shared by grammar.c (schema
 * compiler), grammar_match.c (pushdown matcher) and grammar_vocab.c (token masks). */
#ifndef PT_GEN_GRAMMAR_INT_H
#define PT_GEN_GRAMMAR_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "gen/grammar.h"

#define GR_INF 0x3fffffffu   /* min_depth of an unsatisfiable node */
#define GR_NONE UINT32_MAX   /* absent node / unbounded length */
#define GR_MAX_STACKS 1024   /* stacks kept per state; extra ones are dropped (still sound) */
#define GR_HASH_FROM 16      /* sets with more stacks dedupe through a hash table */
#define GR_HASH_CAP 4096     /* power of two, > 2 * GR_MAX_STACKS */

enum gr_kind {
	GR_LIT,   /* one of a sorted set of literal byte strings (enum, const, null, booleans) */
	GR_STR,   /* a JSON string: length bounds, format, optional excluded key names */
	GR_NUM,   /* a JSON number (is_int: integer) */
	GR_OBJ,   /* an object with declared properties in order, then extra keys */
	GR_ARR,   /* an array: prefix items, then items */
	GR_UNION, /* one of the kids (never lives on a stack: expanded on its first byte) */
	GR_SEQ,   /* literal text and values in order (tool-call forcing) */
	GR_TEXT,  /* raw UTF-8 text without '<' (an XML tool-call parameter value) */
};

enum gr_format { GR_FMT_NONE, GR_FMT_DATE, GR_FMT_TIME, GR_FMT_DATETIME, GR_FMT_UUID };

struct gr_bytes {
	char *p;
	uint32_t n;
};

struct gr_prop {
	uint32_t key;      /* lits index: the key as a JSON string, quotes included */
	uint32_t name;     /* lits index: the decoded name */
	uint32_t node;
	bool required;
};

struct gr_part {
	uint32_t node;     /* GR_NONE: literal */
	uint32_t lit;      /* lits index */
};

struct gr_node {
	uint8_t kind;
	uint8_t is_int;    /* GR_NUM */
	uint8_t format;    /* GR_STR */
	uint8_t bounded;   /* GR_NUM integer: ilo..ihi applies */
	int64_t ilo, ihi;  /* inclusive integer bounds */
	uint32_t min_depth; /* frames needed to complete from a fresh frame; GR_INF: unsat */
	uint32_t lo, n;     /* GR_LIT: range of g->lsorted; OBJ: props; UNION: kids; SEQ: parts */
	uint32_t min, max;  /* STR: length; ARR: items */
	uint32_t excl_lo, excl_n; /* STR used as an extra key: sorted declared names to avoid */
	uint32_t addl;      /* OBJ: node of extra keys' values or GR_NONE */
	uint32_t keystr;    /* OBJ: the GR_STR node for extra keys */
	uint32_t pfx_lo, pfx_n; /* ARR: prefix items (kids) */
	uint32_t items;     /* ARR: node for items after the prefix or GR_NONE */
	uint32_t korder;    /* OBJ: g->korder offset of its n props sorted by key bytes */
};

struct pt_grammar {
	struct gr_node *nodes;
	uint32_t n_nodes, cap_nodes;
	struct gr_bytes *lits; /* every literal byte string */
	uint32_t n_lits, cap_lits;
	uint32_t *lsorted;     /* lits indexes; GR_LIT nodes and excluded names use ranges */
	uint32_t n_lsorted, cap_lsorted;
	struct gr_prop *props;
	uint32_t n_props, cap_props;
	uint32_t *kids;
	uint32_t n_kids, cap_kids;
	struct gr_part *parts;
	uint32_t n_parts, cap_parts;
	uint32_t *korder;      /* per object: prop offsets in key byte order (key matching) */
	uint32_t n_korder, cap_korder;
	uint32_t root;
	uint32_t any;          /* the any-JSON-value node (GR_NONE until needed) */
};

/* One frame of a stack.  Every field is written on creation so stacks compare by memcmp. */
struct gr_frame {
	uint32_t node;
	uint8_t phase;
	uint8_t ws;       /* whitespace bytes in the current gap */
	uint8_t u8need;   /* UTF-8 continuation bytes still due */
	uint8_t u8lo, u8hi; /* range of the next continuation byte */
	uint8_t pad[3];
	uint32_t a, b, c, d, e, f, g;
};

/* A set of stacks, stored flat. */
struct gr_set {
	uint32_t n;          /* stacks */
	uint32_t cap;
	uint32_t *off, *len; /* per stack: frames offset and count */
	struct gr_frame *fr;
	uint32_t n_fr, cap_fr;
	uint32_t *htab;      /* [GR_HASH_CAP] gen << 11 | stack index, once the set is big */
	uint32_t gen;        /* entries of other generations are empty: clearing is O(1) */
	bool hashed;
	bool nomem;          /* an append failed: the set is incomplete */
};

void gr_set_init(struct gr_set *s);
void gr_set_free(struct gr_set *s);
void gr_set_clear(struct gr_set *s);
bool gr_set_copy(struct gr_set *dst, const struct gr_set *src);
/* The initial state of g: one fresh root frame. */
bool gr_set_start(struct gr_set *s, const pt_grammar *g);
/* dst = every stack of src advanced by byte c (dst is cleared first). */
void gr_set_step(const pt_grammar *g, const struct gr_set *src, uint8_t c, struct gr_set *dst);
/* Some stack of s is a complete document. */
bool gr_set_complete(const pt_grammar *g, const struct gr_set *s);
/* Splits s into the stacks whose top is a free string body (no format, no pending escape
 * or UTF-8 byte) and the rest; *room gets the most code points any plain one may still
 * add (always < UINT32_MAX). */
void gr_set_split_plain(const pt_grammar *g, const struct gr_set *s, struct gr_set *plain,
			struct gr_set *rest, uint32_t *room);
/* Frames left in the shallowest stack once every finished value is popped (0: complete). */
uint32_t gr_set_depth(const pt_grammar *g, const struct gr_set *s);

/* Node compile-time analysis: min_depth fixpoint over the whole graph. */
void gr_analyze(pt_grammar *g);

#endif
