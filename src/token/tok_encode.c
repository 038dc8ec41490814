/* tok_encode.c - text -> ids: special-token partition, whitespace escaping, the BPE
 * session (rank-ordered merges through a binary heap, byte fallback) and the SentencePiece
 * session (score-ordered merges), following llama.cpp's llama-vocab.cpp step by step
 * (TOKENIZERS.md 1.3-1.4). */
#include "token/tok_internal.h"

#include <stdio.h>
#include <string.h>

#include "token/tok_unicode.h"
#include "util/alloc.h"

struct frag {
	int32_t id; /* -1: raw text [off, off+len) */
	size_t off, len;
};

struct frags {
	struct frag *v;
	size_t n, cap;
};

static enum pt_status frag_push(struct frags *f, int32_t id, size_t off, size_t len,
				struct pt_error *err)
{
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 16;
		struct frag *v = pt_reallocn(f->v, cap, sizeof *v);
		if (!v)
			return pt_error_set(err, PT_E_NOMEM, "out of memory partitioning text");
		f->v = v;
		f->cap = cap;
	}
	f->v[f->n++] = (struct frag){ id, off, len };
	return PT_OK;
}

/* Splits every raw fragment at each byte-exact occurrence of token id. */
static enum pt_status split_on(const struct pt_tok *t, const char *text, uint32_t id,
			       struct frags *cur, struct frags *nx, struct pt_error *err)
{
	const char *tt = tok_str(t, id);
	size_t tl = t->tok_len[id];
	nx->n = 0;
	for (size_t i = 0; i < cur->n; i++) {
		struct frag f = cur->v[i];
		enum pt_status st;
		if (f.id >= 0) {
			if ((st = frag_push(nx, f.id, 0, 0, err)))
				return st;
			continue;
		}
		size_t off = f.off, end = f.off + f.len;
		for (;;) {
			const char *m = memmem(text + off, end - off, tt, tl);
			if (!m)
				break;
			size_t at = (size_t)(m - text);
			if (at > off && (st = frag_push(nx, -1, off, at - off, err)))
				return st;
			if ((st = frag_push(nx, (int32_t)id, 0, 0, err)))
				return st;
			off = at + tl;
		}
		if (off < end && (st = frag_push(nx, -1, off, end - off, err)))
			return st;
	}
	return PT_OK;
}

static bool any_match(const char *text, const struct frags *cur, const char *tt, size_t tl)
{
	for (size_t i = 0; i < cur->n; i++)
		if (cur->v[i].id < 0 && memmem(text + cur->v[i].off, cur->v[i].len, tt, tl))
			return true;
	return false;
}

/* tokenizer_st_partition: for each candidate, longest first, split all raw fragments. */
static enum pt_status partition(const struct pt_tok *t, const char *text, size_t len,
				bool parse_special, struct frags *out, struct pt_error *err)
{
	struct frags nx = { 0 };
	enum pt_status st = PT_OK;
	out->n = 0;
	if (len && (st = frag_push(out, -1, 0, len, err)))
		return st;
	for (uint32_t k = 0; k < t->n_special && out->n && !st; k++) {
		uint32_t id = t->special[k];
		if (!parse_special && (t->attr[id] & (PT_TOKATTR_CONTROL | PT_TOKATTR_UNKNOWN)))
			continue;
		if (!t->tok_len[id] || !any_match(text, out, tok_str(t, id), t->tok_len[id]))
			continue;
		st = split_on(t, text, id, out, &nx, err);
		struct frags tmp = *out;
		*out = nx;
		nx = tmp;
	}
	pt_free(nx.v);
	return st;
}

/* ---- shared scratch ------------------------------------------------------------------ */

struct sym {
	uint32_t off, n;
	int32_t prev, next;
};

struct bigram {
	float score;     /* SPM: higher first */
	int32_t rank;    /* BPE: lower first */
	int32_t left, right;
	uint32_t ln, rn; /* lengths when queued (staleness check) */
};

struct scratch {
	struct sym *sym;
	size_t nsym, capsym;
	struct bigram *heap;
	size_t nheap, capheap;
	uint8_t *buf;
	size_t nbuf, capbuf;
	bool spm;
};

static enum pt_status grow(void **p, size_t *cap, size_t need, size_t elem,
			   struct pt_error *err)
{
	if (need <= *cap)
		return PT_OK;
	size_t c = *cap ? *cap : 64;
	while (c < need)
		c *= 2;
	void *v = pt_reallocn(*p, c, elem);
	if (!v)
		return pt_error_set(err, PT_E_NOMEM, "out of memory tokenizing");
	*p = v;
	*cap = c;
	return PT_OK;
}

static enum pt_status buf_put(struct scratch *sc, const void *b, size_t n, struct pt_error *err)
{
	enum pt_status st = grow((void **)&sc->buf, &sc->capbuf, sc->nbuf + n, 1, err);
	if (st)
		return st;
	memcpy(sc->buf + sc->nbuf, b, n);
	sc->nbuf += n;
	return PT_OK;
}

/* a before b in pop order? */
static bool heap_less(const struct scratch *sc, const struct bigram *a, const struct bigram *b)
{
	if (sc->spm) {
		if (a->score != b->score)
			return a->score > b->score;
	} else if (a->rank != b->rank) {
		return a->rank < b->rank;
	}
	return a->left < b->left;
}

static enum pt_status heap_push(struct scratch *sc, struct bigram b, struct pt_error *err)
{
	enum pt_status st = grow((void **)&sc->heap, &sc->capheap, sc->nheap + 1, sizeof b, err);
	if (st)
		return st;
	size_t i = sc->nheap++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!heap_less(sc, &b, &sc->heap[p]))
			break;
		sc->heap[i] = sc->heap[p];
		i = p;
	}
	sc->heap[i] = b;
	return PT_OK;
}

static struct bigram heap_pop(struct scratch *sc)
{
	struct bigram top = sc->heap[0], last = sc->heap[--sc->nheap];
	size_t i = 0, n = sc->nheap;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && heap_less(sc, &sc->heap[c + 1], &sc->heap[c]))
			c++;
		if (!heap_less(sc, &sc->heap[c], &last))
			break;
		sc->heap[i] = sc->heap[c];
		i = c;
	}
	if (n)
		sc->heap[i] = last;
	return top;
}

/* Symbols = UTF-8 characters of buf[off, off+n) (lead-byte length, clamped). */
static enum pt_status make_symbols(struct scratch *sc, size_t off, size_t n,
				   struct pt_error *err)
{
	sc->nsym = 0;
	for (size_t p = off; p < off + n;) {
		size_t l = pt_tok_utf8_len(sc->buf[p]);
		if (l > off + n - p)
			l = off + n - p;
		enum pt_status st = grow((void **)&sc->sym, &sc->capsym, sc->nsym + 1,
					 sizeof *sc->sym, err);
		if (st)
			return st;
		int32_t i = (int32_t)sc->nsym;
		sc->sym[sc->nsym++] = (struct sym){ (uint32_t)p, (uint32_t)l, i - 1,
						    p + l == off + n ? -1 : i + 1 };
		p += l;
	}
	return PT_OK;
}

static enum pt_status add_bigram(const struct pt_tok *t, struct scratch *sc, int32_t l,
				 int32_t r, struct pt_error *err)
{
	if (l < 0 || r < 0)
		return PT_OK;
	const struct sym *a = &sc->sym[l], *b = &sc->sym[r];
	struct bigram bg = { 0, 0, l, r, a->n, b->n };
	if (sc->spm) {
		int32_t id = tok_lookup(t, (const char *)sc->buf + a->off, a->n + b->n);
		if (id < 0)
			return PT_OK;
		bg.score = t->score[id];
	} else {
		bg.rank = tok_merge_rank(t, (const char *)sc->buf + a->off, a->n,
					 (const char *)sc->buf + b->off, b->n);
		if (bg.rank < 0)
			return PT_OK;
	}
	return heap_push(sc, bg, err);
}

static enum pt_status merge_all(const struct pt_tok *t, struct scratch *sc,
				struct pt_error *err)
{
	enum pt_status st = PT_OK;
	sc->nheap = 0;
	for (size_t i = 1; i < sc->nsym && !st; i++)
		st = add_bigram(t, sc, (int32_t)i - 1, (int32_t)i, err);
	while (sc->nheap && !st) {
		struct bigram bg = heap_pop(sc);
		struct sym *l = &sc->sym[bg.left], *r = &sc->sym[bg.right];
		if (!l->n || !r->n || l->n != bg.ln || r->n != bg.rn || l->next != bg.right)
			continue; /* stale */
		l->n += r->n;
		r->n = 0;
		l->next = r->next;
		if (r->next >= 0)
			sc->sym[r->next].prev = bg.left;
		st = add_bigram(t, sc, l->prev, bg.left, err);
		if (!st)
			st = add_bigram(t, sc, bg.left, l->next, err);
	}
	return st;
}

static int32_t byte_token(const struct pt_tok *t, uint8_t b)
{
	char hex[7];
	snprintf(hex, sizeof hex, "<0x%02X>", b);
	return tok_lookup(t, hex, 6);
}

/* Emits the surviving symbols of one word, with llama.cpp's per-model fallbacks. */
static enum pt_status emit_symbols(const struct pt_tok *t, struct scratch *sc,
				   struct tok_ids *out, struct pt_error *err)
{
	enum pt_status st = PT_OK;
	for (int32_t i = sc->nsym ? 0 : -1; i >= 0 && !st; i = sc->sym[i].next) {
		const struct sym *s = &sc->sym[i];
		if (!s->n)
			continue;
		const char *p = (const char *)sc->buf + s->off;
		int32_t id = tok_lookup(t, p, s->n);
		if (id >= 0) {
			st = tok_ids_push(out, id, err);
			continue;
		}
		for (uint32_t j = 0; j < s->n && !st; j++) {
			uint8_t b = (uint8_t)p[j];
			if (sc->spm) {
				id = byte_token(t, b);
				if (id < 0)
					id = tok_lookup(t, (const char *)&b, 1);
				if (id < 0)
					return pt_error_set(err, PT_E_UNSUPPORTED,
							    "vocabulary has no token for byte 0x%02X", b);
			} else {
				id = t->byte_encode ? tok_lookup(t, (const char *)&b, 1)
						    : byte_token(t, b);
			}
			if (id >= 0) /* BPE: llama.cpp drops a byte it cannot represent */
				st = tok_ids_push(out, id, err);
		}
	}
	return st;
}

/* ---- BPE ------------------------------------------------------------------------------ */

static bool all_newlines(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != '\n')
			return false;
	return n > 0;
}

static enum pt_status bpe_word(const struct pt_tok *t, struct scratch *sc, size_t off,
			       size_t n, struct tok_ids *out, struct pt_error *err)
{
	const char *w = (const char *)sc->buf + off;
	bool whole = (t->ignore_merges || (t->newline_words && all_newlines(sc->buf + off, n))) &&
		     tok_lookup(t, w, n) >= 0;
	enum pt_status st;
	if (whole) {
		if ((st = grow((void **)&sc->sym, &sc->capsym, 1, sizeof *sc->sym, err)))
			return st;
		sc->sym[0] = (struct sym){ (uint32_t)off, (uint32_t)n, -1, -1 };
		sc->nsym = 1;
	} else if ((st = make_symbols(sc, off, n, err)) || (st = merge_all(t, sc, err))) {
		return st;
	}
	return emit_symbols(t, sc, out, err);
}

/* One raw fragment through pre-tokenization and BPE. */
static enum pt_status bpe_fragment(const struct pt_tok *t, const char *text, size_t len,
				   struct scratch *sc, struct tok_ids *out, struct pt_error *err)
{
	uint32_t *cps = pt_mallocn(len ? len : 1, sizeof *cps);
	uint32_t *lens = NULL;
	size_t n = 0, nw = 0;
	if (!cps)
		return pt_error_set(err, PT_E_NOMEM, "out of memory tokenizing");
	for (size_t off = 0; off < len;) {
		if (t->escape_ws && text[off] == ' ') {
			cps[n++] = 0x2581;
			off++;
		} else {
			cps[n++] = pt_tok_utf8_next((const uint8_t *)text, len, &off);
		}
	}
	enum pt_status st = tok_split_words(t, cps, n, &lens, &nw, err);
	size_t at = 0;
	for (size_t w = 0; w < nw && !st; w++) {
		sc->nbuf = 0;
		for (size_t i = at; i < at + lens[w] && !st; i++) {
			uint8_t u[4];
			size_t k = pt_tok_utf8_put(cps[i], u);
			for (size_t j = 0; j < k && !st; j++)
				st = t->byte_encode ? buf_put(sc, t->b2u[u[j]], t->b2u_len[u[j]], err)
						    : buf_put(sc, &u[j], 1, err);
		}
		at += lens[w];
		if (!st)
			st = bpe_word(t, sc, 0, sc->nbuf, out, err);
	}
	pt_free(lens);
	pt_free(cps);
	return st;
}

/* ---- SentencePiece ---------------------------------------------------------------------- */

static enum pt_status spm_fragment(const struct pt_tok *t, const char *text, size_t len,
				   bool prefix, struct scratch *sc, struct tok_ids *out,
				   struct pt_error *err)
{
	static const uint8_t lower_one_eighth[3] = { 0xE2, 0x96, 0x81 };
	enum pt_status st = PT_OK;
	sc->nbuf = 0;
	if (prefix)
		st = t->escape_ws ? buf_put(sc, lower_one_eighth, 3, err) : buf_put(sc, " ", 1, err);
	for (size_t i = 0; i < len && !st; i++)
		st = (t->escape_ws && text[i] == ' ') ? buf_put(sc, lower_one_eighth, 3, err)
						      : buf_put(sc, text + i, 1, err);
	if (!st)
		st = make_symbols(sc, 0, sc->nbuf, err);
	if (!st)
		st = merge_all(t, sc, err);
	if (!st)
		st = emit_symbols(t, sc, out, err);
	return st;
}

static enum pt_status encode_frags(const struct pt_tok *t, const char *text,
				   const struct frags *fr, bool add_special, struct tok_ids *out,
				   struct pt_error *err)
{
	struct scratch sc = { .spm = t->kind == TOK_SPM };
	enum pt_status st = PT_OK;
	bool prev_special = true; /* SPM: prefix a space to the first text fragment */
	if (add_special && t->add_bos)
		st = tok_ids_push(out, t->bos, err);
	for (size_t i = 0; i < fr->n && !st; i++) {
		const struct frag *f = &fr->v[i];
		if (f->id >= 0) {
			st = tok_ids_push(out, f->id, err);
			prev_special = true;
		} else if (sc.spm) {
			st = spm_fragment(t, text + f->off, f->len,
					  t->add_space_prefix && prev_special, &sc, out, err);
			prev_special = false;
		} else {
			st = bpe_fragment(t, text + f->off, f->len, &sc, out, err);
		}
	}
	if (!st && add_special && t->add_eos)
		st = t->eos >= 0 ? tok_ids_push(out, t->eos, err)
				 : pt_error_set(err, PT_E_FORMAT, "tokenizer adds EOS but has none");
	pt_free(sc.sym);
	pt_free(sc.heap);
	pt_free(sc.buf);
	return st;
}

enum pt_status pt_tok_encode_alloc(const pt_tok *t, const char *text, size_t len,
				   bool add_special, bool parse_special, int32_t **ids,
				   size_t *n, struct pt_error *err)
{
	struct frags fr = { 0 };
	struct tok_ids out = { 0 };
	*ids = NULL;
	*n = 0;
	enum pt_status st = partition(t, text, len, parse_special, &fr, err);
	if (!st)
		st = encode_frags(t, text, &fr, add_special, &out, err);
	pt_free(fr.v);
	if (st) {
		pt_free(out.v);
		return st;
	}
	if (!out.v && !(out.v = pt_malloc(sizeof *out.v)))
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	*ids = out.v;
	*n = out.n;
	return PT_OK;
}

enum pt_status pt_tok_encode(const pt_tok *t, const char *text, size_t len, bool add_special,
			     bool parse_special, int32_t *ids, size_t cap, size_t *n,
			     struct pt_error *err)
{
	int32_t *v;
	enum pt_status st = pt_tok_encode_alloc(t, text, len, add_special, parse_special, &v, n,
						err);
	if (st)
		return st;
	if (ids && cap && *n)
		memcpy(ids, v, (*n < cap ? *n : cap) * sizeof *v);
	pt_free(v);
	if (*n > cap)
		return pt_error_set(err, PT_E_LIMIT, "%zu tokens do not fit in %zu", *n, cap);
	return PT_OK;
}
