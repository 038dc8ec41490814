/* grammar_vocab.c - the per-model token index (each token's bytes, a trie over them) and
 * the grammar state's token-level API: masks, single checks, accepting tokens. */
#include <stdlib.h>
#include <string.h>

#include "gen/grammar_int.h"
#include "util/alloc.h"

enum { TK_NEVER, TK_TEXT, TK_EOG };

/* A trie in preorder: children are linked through next_sibling; the tokens ending at a
 * node are a contiguous run of the trie's token list (tokens are inserted sorted). */
struct tnode {
	uint32_t first_child, next_sibling; /* 0 = none (node 0 is the root) */
	uint32_t tok_lo, tok_n;
	uint8_t byte;
};

struct trie {
	struct tnode *nodes;
	uint32_t n_nodes, cap_nodes;
	int32_t *toks;
	uint32_t n_toks;
	uint32_t max_depth;
};

struct pt_grammar_vocab {
	uint32_t n_vocab;
	uint8_t *kind;        /* TK_* per token */
	uint32_t *off, *len;  /* bytes of TK_TEXT tokens */
	char *bytes;
	uint32_t *plain_cps;  /* code points if every byte is a plain string character */
	int32_t *eog;
	uint32_t n_eog;
	struct trie all;      /* every TK_TEXT token */
	struct trie special;  /* the TK_TEXT tokens that are not plain string text */
};

struct pt_grammar_state {
	const pt_grammar *g;
	const pt_grammar_vocab *v;
	struct gr_set cur;
	struct gr_set tmp[2];
	struct gr_set *depth; /* one set per trie depth for mask walks */
	uint32_t n_depth;
	bool finished;
	uint8_t *out;         /* the mask being written */
};

/* ---- vocabulary ----------------------------------------------------------------------- */

/* Code points in b[0..n) when it is all plain JSON string text (complete valid UTF-8, no
 * quote, backslash or control character), else UINT32_MAX. */
static uint32_t plain_cps(const unsigned char *b, uint32_t n)
{
	uint32_t i = 0, cps = 0;
	while (i < n) {
		unsigned char c = b[i];
		uint32_t k;
		unsigned char lo = 0x80, hi = 0xbf;
		if (c < 0x80) {
			if (c < 0x20 || c == '"' || c == '\\')
				return UINT32_MAX;
			i++;
			cps++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			k = 1;
		else if (c >= 0xe0 && c <= 0xef)
			k = 2, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
		else if (c >= 0xf0 && c <= 0xf4)
			k = 3, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
		else
			return UINT32_MAX;
		if (i + k >= n || b[i + 1] < lo || b[i + 1] > hi)
			return UINT32_MAX;
		for (uint32_t j = 2; j <= k; j++)
			if (b[i + j] < 0x80 || b[i + j] > 0xbf)
				return UINT32_MAX;
		i += k + 1;
		cps++;
	}
	return cps;
}

static int cmp_tok(const void *a, const void *b, void *ctx)
{
	const pt_grammar_vocab *sort_v = ctx;
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	uint32_t nx = sort_v->len[x], ny = sort_v->len[y], n = nx < ny ? nx : ny;
	int r = n ? memcmp(sort_v->bytes + sort_v->off[x], sort_v->bytes + sort_v->off[y], n) : 0;
	if (r)
		return r;
	if (nx != ny)
		return nx < ny ? -1 : 1;
	return x < y ? -1 : x > y;
}

static uint32_t trie_new_node(struct trie *t, uint8_t byte)
{
	if (t->n_nodes == t->cap_nodes) {
		uint32_t cap = t->cap_nodes ? t->cap_nodes * 2 : 1024;
		struct tnode *nn = pt_reallocn(t->nodes, cap, sizeof *nn);
		if (!nn)
			return 0;
		t->nodes = nn;
		t->cap_nodes = cap;
	}
	struct tnode *nd = &t->nodes[t->n_nodes];
	memset(nd, 0, sizeof *nd);
	nd->byte = byte;
	return t->n_nodes++;
}

/* Builds the trie from tokens ids[0..n) sorted by bytes. */
static bool trie_build(struct trie *t, const pt_grammar_vocab *v, const int32_t *ids, uint32_t n)
{
	uint32_t path[PT_GRAMMAR_MAX_TOKEN_BYTES + 1], last[PT_GRAMMAR_MAX_TOKEN_BYTES + 1];
	uint32_t depth = 0;
	const unsigned char *prev = NULL;
	uint32_t prev_n = 0;
	memset(t, 0, sizeof *t);
	t->toks = pt_mallocn((size_t)n + 1, sizeof *t->toks);
	if (!t->toks)
		return false;
	trie_new_node(t, 0);
	if (!t->n_nodes)
		return false;
	path[0] = 0;
	last[0] = 0;
	for (uint32_t i = 0; i < n; i++) {
		const unsigned char *b = (const unsigned char *)v->bytes + v->off[ids[i]];
		uint32_t len = v->len[ids[i]], common = 0;
		while (prev && common < prev_n && common < len && prev[common] == b[common])
			common++;
		depth = common;
		for (uint32_t d = common; d < len; d++) {
			uint32_t nn = trie_new_node(t, b[d]);
			if (!nn)
				return false;
			struct tnode *parent = &t->nodes[path[d]];
			if (!parent->first_child)
				parent->first_child = nn;
			else
				t->nodes[last[d]].next_sibling = nn;
			last[d] = nn;
			path[d + 1] = nn;
			last[d + 1] = 0;
			depth = d + 1;
		}
		struct tnode *end = &t->nodes[path[depth]];
		if (!end->tok_n)
			end->tok_lo = t->n_toks;
		end->tok_n++;
		t->toks[t->n_toks++] = ids[i];
		if (len > t->max_depth)
			t->max_depth = len;
		prev = b;
		prev_n = len;
	}
	return true;
}

static void trie_free(struct trie *t)
{
	pt_free(t->nodes);
	pt_free(t->toks);
}

enum pt_status pt_grammar_vocab_build(const struct pt_tok *tok, pt_grammar_vocab **out,
				      struct pt_error *err)
{
	pt_grammar_vocab *v = pt_calloc(1, sizeof *v);
	uint32_t n = pt_tok_n_vocab(tok), cap = 1 << 16, used = 0, n_text = 0, n_special = 0;
	int32_t *ids = NULL, *sp = NULL;
	char buf[PT_GRAMMAR_MAX_TOKEN_BYTES + 1];
	enum pt_status st = PT_OK;
	*out = NULL;
	if (!v)
		return pt_error_set(err, PT_E_NOMEM, "grammar vocab: out of memory");
	v->n_vocab = n;
	v->kind = pt_calloc(n ? n : 1, 1);
	v->off = pt_calloc(n ? n : 1, sizeof *v->off);
	v->len = pt_calloc(n ? n : 1, sizeof *v->len);
	v->plain_cps = pt_mallocn(n ? n : 1, sizeof *v->plain_cps);
	v->eog = pt_mallocn(n ? n : 1, sizeof *v->eog);
	v->bytes = pt_malloc(cap);
	ids = pt_mallocn(n ? n : 1, sizeof *ids);
	sp = pt_mallocn(n ? n : 1, sizeof *sp);
	if (!v->kind || !v->off || !v->len || !v->plain_cps || !v->eog || !v->bytes || !ids ||
	    !sp) {
		st = pt_error_set(err, PT_E_NOMEM, "grammar vocab: out of memory");
		goto out;
	}
	for (uint32_t t = 0; t < n; t++) {
		uint32_t attr = pt_tok_attr(tok, (int32_t)t);
		size_t len = 0;
		v->plain_cps[t] = UINT32_MAX;
		if (pt_tok_is_eog(tok, (int32_t)t)) {
			v->kind[t] = TK_EOG;
			v->eog[v->n_eog++] = (int32_t)t;
			continue;
		}
		if (attr & (PT_TOKATTR_CONTROL | PT_TOKATTR_UNKNOWN | PT_TOKATTR_UNUSED))
			continue;
		enum pt_status ps = pt_tok_piece(tok, (int32_t)t, false, buf, sizeof buf, &len, NULL);
		if (ps == PT_E_NOMEM) {
			st = pt_error_set(err, PT_E_NOMEM, "grammar vocab: out of memory");
			goto out;
		}
		if (ps != PT_OK || len == 0 || len > PT_GRAMMAR_MAX_TOKEN_BYTES)
			continue; /* too long to ever be needed: never allowed */
		if (used + len > cap) {
			while (used + len > cap)
				cap *= 2;
			char *nb = pt_realloc(v->bytes, cap);
			if (!nb) {
				st = pt_error_set(err, PT_E_NOMEM, "grammar vocab: out of memory");
				goto out;
			}
			v->bytes = nb;
		}
		memcpy(v->bytes + used, buf, len);
		v->off[t] = used;
		v->len[t] = (uint32_t)len;
		used += (uint32_t)len;
		v->kind[t] = TK_TEXT;
		v->plain_cps[t] = plain_cps((const unsigned char *)buf, (uint32_t)len);
		ids[n_text++] = (int32_t)t;
	}
	qsort_r(ids, n_text, sizeof *ids, cmp_tok, v);
	for (uint32_t i = 0; i < n_text; i++)
		if (v->plain_cps[ids[i]] == UINT32_MAX)
			sp[n_special++] = ids[i];
	if (!trie_build(&v->all, v, ids, n_text) || !trie_build(&v->special, v, sp, n_special)) {
		st = pt_error_set(err, PT_E_NOMEM, "grammar vocab: out of memory");
		goto out;
	}
out:
	pt_free(ids);
	pt_free(sp);
	if (st != PT_OK) {
		pt_grammar_vocab_free(v);
		return st;
	}
	*out = v;
	return PT_OK;
}

void pt_grammar_vocab_free(pt_grammar_vocab *v)
{
	if (!v)
		return;
	pt_free(v->kind);
	pt_free(v->off);
	pt_free(v->len);
	pt_free(v->bytes);
	pt_free(v->plain_cps);
	pt_free(v->eog);
	trie_free(&v->all);
	trie_free(&v->special);
	pt_free(v);
}

uint32_t pt_grammar_vocab_n(const pt_grammar_vocab *v)
{
	return v->n_vocab;
}

const char *pt_grammar_vocab_bytes(const pt_grammar_vocab *v, int32_t token, size_t *len)
{
	if (token < 0 || (uint32_t)token >= v->n_vocab || v->kind[token] != TK_TEXT) {
		if (len)
			*len = 0;
		return NULL;
	}
	if (len)
		*len = v->len[token];
	return v->bytes + v->off[token];
}

bool pt_grammar_vocab_is_eog(const pt_grammar_vocab *v, int32_t token)
{
	return token >= 0 && (uint32_t)token < v->n_vocab && v->kind[token] == TK_EOG;
}

/* ---- state ------------------------------------------------------------------------------ */

enum pt_status pt_grammar_state_new(const pt_grammar *g, const pt_grammar_vocab *v,
				    pt_grammar_state **out, struct pt_error *err)
{
	pt_grammar_state *s = pt_calloc(1, sizeof *s);
	*out = NULL;
	if (!s)
		return pt_error_set(err, PT_E_NOMEM, "grammar state: out of memory");
	s->g = g;
	s->v = v;
	gr_set_init(&s->cur);
	gr_set_init(&s->tmp[0]);
	gr_set_init(&s->tmp[1]);
	if (v) {
		uint32_t d = v->all.max_depth + 2;
		s->depth = pt_calloc(d, sizeof *s->depth);
		s->n_depth = s->depth ? d : 0;
	}
	if ((v && !s->depth) || !gr_set_start(&s->cur, g)) {
		pt_grammar_state_free(s);
		return pt_error_set(err, PT_E_NOMEM, "grammar state: out of memory");
	}
	*out = s;
	return PT_OK;
}

void pt_grammar_state_free(pt_grammar_state *s)
{
	if (!s)
		return;
	gr_set_free(&s->cur);
	gr_set_free(&s->tmp[0]);
	gr_set_free(&s->tmp[1]);
	for (uint32_t i = 0; i < s->n_depth; i++)
		gr_set_free(&s->depth[i]);
	pt_free(s->depth);
	pt_free(s);
}

void pt_grammar_state_reset(pt_grammar_state *s)
{
	s->finished = false;
	gr_set_start(&s->cur, s->g);
}

bool pt_grammar_state_complete(const pt_grammar_state *s)
{
	return s->finished || gr_set_complete(s->g, &s->cur);
}

enum pt_status pt_grammar_state_copy(pt_grammar_state *dst, const pt_grammar_state *src,
				     struct pt_error *err)
{
	if (dst->g != src->g || dst->v != src->v)
		return pt_error_set(err, PT_E_INVALID, "grammar: copy between different grammars");
	if (!gr_set_copy(&dst->cur, &src->cur))
		return pt_error_set(err, PT_E_NOMEM, "grammar: out of memory");
	dst->finished = src->finished;
	return PT_OK;
}

uint32_t pt_grammar_state_depth(const pt_grammar_state *s)
{
	return s->finished ? 0 : gr_set_depth(s->g, &s->cur);
}

bool pt_grammar_state_finished(const pt_grammar_state *s)
{
	return s->finished;
}

/* Runs bytes from s->cur; the result is left in s->tmp[k] and its index returned (-1 when
 * no stack survives or memory ran out). */
static int run_bytes(pt_grammar_state *s, const unsigned char *b, size_t n)
{
	const struct gr_set *src = &s->cur;
	int k = 0;
	if (n == 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		gr_set_step(s->g, src, b[i], &s->tmp[k]);
		if (s->tmp[k].n == 0 || s->tmp[k].nomem)
			return -1;
		src = &s->tmp[k];
		k ^= 1;
	}
	return k ^ 1;
}

bool pt_grammar_state_allows(pt_grammar_state *s, int32_t token)
{
	const pt_grammar_vocab *v = s->v;
	if (s->finished || !v || token < 0 || (uint32_t)token >= v->n_vocab)
		return false;
	if (v->kind[token] == TK_EOG)
		return gr_set_complete(s->g, &s->cur);
	if (v->kind[token] != TK_TEXT)
		return false;
	return run_bytes(s, (const unsigned char *)v->bytes + v->off[token], v->len[token]) >= 0;
}

static enum pt_status adopt(pt_grammar_state *s, int k, struct pt_error *err)
{
	struct gr_set t = s->cur;
	s->cur = s->tmp[k];
	s->tmp[k] = t;
	(void)err;
	return PT_OK;
}

enum pt_status pt_grammar_state_accept_bytes(pt_grammar_state *s, const char *bytes,
					     size_t len, struct pt_error *err)
{
	if (len == 0)
		return PT_OK;
	if (s->finished)
		return pt_error_set(err, PT_E_INVALID, "grammar: output already ended");
	int k = run_bytes(s, (const unsigned char *)bytes, len);
	if (k < 0) {
		if (s->tmp[0].nomem || s->tmp[1].nomem)
			return pt_error_set(err, PT_E_NOMEM, "grammar: out of memory");
		return pt_error_set(err, PT_E_INVALID, "grammar: the text does not fit the "
				    "required format");
	}
	return adopt(s, k, err);
}

enum pt_status pt_grammar_state_accept(pt_grammar_state *s, int32_t token, struct pt_error *err)
{
	const pt_grammar_vocab *v = s->v;
	if (!v || token < 0 || (uint32_t)token >= v->n_vocab)
		return pt_error_set(err, PT_E_INVALID, "grammar: token %d out of range", token);
	if (s->finished)
		return pt_error_set(err, PT_E_INVALID, "grammar: output already ended");
	if (v->kind[token] == TK_EOG) {
		if (!gr_set_complete(s->g, &s->cur))
			return pt_error_set(err, PT_E_INVALID, "grammar: end of generation before "
					    "the output is complete");
		s->finished = true;
		return PT_OK;
	}
	if (v->kind[token] != TK_TEXT)
		return pt_error_set(err, PT_E_INVALID, "grammar: token %d is never allowed in "
				    "constrained output", token);
	return pt_grammar_state_accept_bytes(s, v->bytes + v->off[token], v->len[token], err);
}

/* ---- masks --------------------------------------------------------------------------------- */

/* Marks every token under trie node `node` (at depth d) that some stack of the depth-d set
 * accepts; depth 0's set is `root`. */
static void walk(pt_grammar_state *s, const struct trie *t, const struct gr_set *root,
		 uint32_t node, uint32_t d)
{
	const struct gr_set *here = d ? &s->depth[d] : root;
	struct gr_set *next = &s->depth[d + 1];
	for (uint32_t ch = t->nodes[node].first_child; ch; ch = t->nodes[ch].next_sibling) {
		const struct tnode *c = &t->nodes[ch];
		gr_set_step(s->g, here, c->byte, next);
		if (next->n == 0)
			continue;
		for (uint32_t i = 0; i < c->tok_n; i++)
			s->out[t->toks[c->tok_lo + i]] = 1;
		if (c->first_child)
			walk(s, t, root, ch, d + 1);
	}
}

/* A token is allowed when some stack accepts it, so stacks can be decided in groups: those
 * in a free string body take every plain-text token by its code-point count and walk only
 * the trie of the other tokens; the rest walk the whole trie (pruned at their first byte). */
void pt_grammar_state_mask(pt_grammar_state *s, uint8_t *allowed)
{
	const pt_grammar_vocab *v = s->v;
	uint32_t room;
	if (!v)
		return;
	memset(allowed, 0, v->n_vocab);
	if (s->finished)
		return;
	if (gr_set_complete(s->g, &s->cur))
		for (uint32_t i = 0; i < v->n_eog; i++)
			allowed[v->eog[i]] = 1;
	s->out = allowed;
	gr_set_split_plain(s->g, &s->cur, &s->tmp[0], &s->tmp[1], &room);
	if (s->tmp[0].n) {
		for (uint32_t t = 0; t < v->n_vocab; t++)
			if (v->plain_cps[t] <= room)
				allowed[t] = 1;
		walk(s, &v->special, &s->tmp[0], 0, 0);
	}
	if (s->tmp[1].n)
		walk(s, &v->all, &s->tmp[1], 0, 0);
	s->out = NULL;
}

bool pt_grammar_match_bytes(const pt_grammar *g, const char *text, size_t len, bool *complete)
{
	struct gr_set a, b, *src = &a, *dst = &b;
	bool ok = true;
	gr_set_init(&a);
	gr_set_init(&b);
	if (!gr_set_start(&a, g))
		ok = false;
	for (size_t i = 0; ok && i < len; i++) {
		gr_set_step(g, src, (uint8_t)text[i], dst);
		if (dst->n == 0 || dst->nomem)
			ok = false;
		struct gr_set *t = src;
		src = dst;
		dst = t;
	}
	if (complete)
		*complete = ok && gr_set_complete(g, src);
	gr_set_free(&a);
	gr_set_free(&b);
	return ok;
}
