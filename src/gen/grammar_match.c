/* grammar_match.c - the byte-level pushdown matcher: a state is a set of stacks of frames
 * (grammar_int.h); each byte advances every stack, expanding unions and popping finished
 * values into their parents.  Every stack kept in a set can still be completed (the node
 * analysis in grammar.c guarantees it), so a non-empty set is never a dead end. */
#include <string.h>

#include "gen/grammar_int.h"
#include "util/alloc.h"

/* Phases.  Every fresh frame has phase 0, and no fresh frame is finishable, so a child
 * always consumes at least one byte before it can be popped. */
enum { L_FRESH, L_MATCH };
enum { S_FRESH, S_BODY, S_ESC, S_HEX, S_LOW_BSL, S_LOW_U, S_LOW_HEX, S_DONE };
enum { N_FRESH, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };
enum { O_FRESH, O_FIRST, O_KEY, O_AKEY, O_COLON, O_VALWS, O_VALUE, O_AFTER, O_COMMA, O_DONE };
enum { A_FRESH, A_FIRST, A_ITEM, A_AFTER, A_COMMA, A_DONE };
enum { Q_FRESH, Q_PART, Q_CHILD };

#define NUM_INT_DIGITS 16
#define NUM_FRAC_DIGITS 16
#define NUM_EXP_DIGITS 2

/* ---- sets of stacks ------------------------------------------------------------------- */

void gr_set_init(struct gr_set *s)
{
	memset(s, 0, sizeof *s);
}

void gr_set_free(struct gr_set *s)
{
	pt_free(s->htab);
	pt_free(s->off);
	pt_free(s->len);
	pt_free(s->fr);
	gr_set_init(s);
}

void gr_set_clear(struct gr_set *s)
{
	if (s->hashed && ++s->gen >= (1u << 21)) {
		memset(s->htab, 0, GR_HASH_CAP * sizeof *s->htab);
		s->gen = 1;
	}
	s->hashed = false;
	s->n = 0;
	s->n_fr = 0;
	s->nomem = false;
}

static uint32_t hash_frames(const struct gr_frame *fr, uint32_t n)
{
	const unsigned char *p = (const unsigned char *)fr;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n * sizeof *fr; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return (uint32_t)(h ^ (h >> 32));
}

static bool same(const struct gr_set *s, uint32_t i, const struct gr_frame *fr, uint32_t n)
{
	return s->len[i] == n && memcmp(s->fr + s->off[i], fr, n * sizeof *fr) == 0;
}

#define HIDX_BITS 11 /* > log2(GR_MAX_STACKS) */
#define HIDX_MASK ((1u << HIDX_BITS) - 1)
_Static_assert(GR_MAX_STACKS <= (1 << HIDX_BITS), "stack index fits the hash entry");

/* Slot of stack fr in the hash table: where it is, or the empty slot to put it. */
static uint32_t *hslot(const struct gr_set *s, const struct gr_frame *fr, uint32_t n)
{
	uint32_t h = hash_frames(fr, n) & (GR_HASH_CAP - 1);
	while ((s->htab[h] >> HIDX_BITS) == s->gen && !same(s, s->htab[h] & HIDX_MASK, fr, n))
		h = (h + 1) & (GR_HASH_CAP - 1);
	return &s->htab[h];
}

static inline bool slot_used(const struct gr_set *s, const uint32_t *slot)
{
	return (*slot >> HIDX_BITS) == s->gen;
}

/* Small sets dedupe by scanning; from GR_HASH_FROM stacks on, through a hash table, so a
 * set stays linear in its size up to GR_MAX_STACKS. */
static bool set_push(struct gr_set *s, const struct gr_frame *fr, uint32_t n)
{
	uint32_t *slot = NULL;
	if (s->hashed) {
		slot = hslot(s, fr, n);
		if (slot_used(s, slot))
			return true;
	} else {
		for (uint32_t i = 0; i < s->n; i++)
			if (same(s, i, fr, n))
				return true;
	}
	if (s->n >= GR_MAX_STACKS)
		return true; /* dropping a stack keeps the set sound: each one is completable */
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 8;
		uint32_t *off = pt_reallocn(s->off, cap, sizeof *off);
		if (!off) {
			s->nomem = true;
			return false;
		}
		s->off = off;
		uint32_t *len = pt_reallocn(s->len, cap, sizeof *len);
		if (!len) {
			s->nomem = true;
			return false;
		}
		s->len = len;
		s->cap = cap;
	}
	if (s->n_fr + n > s->cap_fr) {
		uint32_t cap = s->cap_fr ? s->cap_fr : 32;
		while (cap < s->n_fr + n)
			cap *= 2;
		struct gr_frame *f = pt_reallocn(s->fr, cap, sizeof *f);
		if (!f) {
			s->nomem = true;
			return false;
		}
		s->fr = f;
		s->cap_fr = cap;
	}
	memcpy(s->fr + s->n_fr, fr, n * sizeof *fr);
	s->off[s->n] = s->n_fr;
	s->len[s->n] = n;
	if (slot)
		*slot = s->gen << HIDX_BITS | s->n;
	s->n++;
	s->n_fr += n;
	if (!s->hashed && s->n >= GR_HASH_FROM) {
		if (!s->htab) {
			s->htab = pt_calloc(GR_HASH_CAP, sizeof *s->htab);
			if (!s->htab)
				return true; /* stay linear */
			s->gen = 1;
		}
		s->hashed = true;
		for (uint32_t i = 0; i < s->n; i++)
			*hslot(s, s->fr + s->off[i], s->len[i]) = s->gen << HIDX_BITS | i;
	}
	return true;
}

bool gr_set_copy(struct gr_set *dst, const struct gr_set *src)
{
	gr_set_clear(dst);
	for (uint32_t i = 0; i < src->n; i++)
		if (!set_push(dst, src->fr + src->off[i], src->len[i]))
			return false;
	return true;
}

static struct gr_frame fresh(const pt_grammar *g, uint32_t node)
{
	struct gr_frame f;
	const struct gr_node *nd = &g->nodes[node];
	memset(&f, 0, sizeof f);
	f.node = node;
	if (nd->kind == GR_LIT) {
		f.a = nd->lo;
		f.b = nd->lo + nd->n;
	} else if (nd->kind == GR_STR && nd->excl_n) {
		f.d = nd->excl_lo;
		f.e = nd->excl_lo + nd->excl_n;
	} else if (nd->kind == GR_STR && nd->format == GR_FMT_TIME) {
		f.g = 20;
	} else if (nd->kind == GR_STR && nd->format == GR_FMT_UUID) {
		f.g = 40;
	}
	return f;
}

bool gr_set_start(struct gr_set *s, const pt_grammar *g)
{
	struct gr_frame f = fresh(g, g->root);
	gr_set_clear(s);
	return set_push(s, &f, 1);
}

/* ---- one byte ------------------------------------------------------------------------- */

struct fctx {
	const pt_grammar *g;
	struct gr_set *out;
	struct gr_frame w[PT_GRAMMAR_MAX_DEPTH + 2];
};

static void feed(struct fctx *x, uint32_t n, uint8_t c);

static inline bool is_ws(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static inline bool fits(const pt_grammar *g, uint32_t n_below, uint32_t node)
{
	return node != GR_NONE && n_below + g->nodes[node].min_depth <= PT_GRAMMAR_MAX_DEPTH;
}

static inline void emit(struct fctx *x, uint32_t n)
{
	set_push(x->out, x->w, n);
}

/* Push a fresh frame for node above w[0..n) and feed it c. */
static inline void push_feed(struct fctx *x, uint32_t n, uint32_t node, uint8_t c)
{
	x->w[n] = fresh(x->g, node);
	feed(x, n + 1, c);
}

static const struct gr_bytes *lit_at(const pt_grammar *g, uint32_t sorted_idx)
{
	return &g->lits[g->lsorted[sorted_idx]];
}

/* Narrows the sorted range [*lo, *hi) whose members share their first pos bytes to those
 * with byte c at pos.  Returns false when none is left. */
static bool narrow(const pt_grammar *g, uint32_t *lo, uint32_t *hi, uint32_t pos, uint8_t c)
{
	uint32_t i = *lo, end = *hi;
	while (i < end && (lit_at(g, i)->n <= pos || (uint8_t)lit_at(g, i)->p[pos] < c))
		i++;
	uint32_t j = i;
	while (j < end && (uint8_t)lit_at(g, j)->p[pos] == c)
		j++;
	*lo = i;
	*hi = j;
	return i < j;
}

/* A decoded byte of an extra key: track which declared names it could still equal. */
static void excl_adv(const pt_grammar *g, struct gr_frame *f, uint8_t c)
{
	if (f->d == f->e)
		return;
	if (!narrow(g, &f->d, &f->e, f->f, c))
		f->d = f->e = 0;
	else
		f->f++;
}

static void excl_cp(const pt_grammar *g, struct gr_frame *f, uint32_t cp)
{
	uint8_t u[4];
	int k;
	if (cp < 0x80) {
		u[0] = (uint8_t)cp;
		k = 1;
	} else if (cp < 0x800) {
		u[0] = (uint8_t)(0xc0 | (cp >> 6));
		u[1] = (uint8_t)(0x80 | (cp & 0x3f));
		k = 2;
	} else if (cp < 0x10000) {
		u[0] = (uint8_t)(0xe0 | (cp >> 12));
		u[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (uint8_t)(0x80 | (cp & 0x3f));
		k = 3;
	} else {
		u[0] = (uint8_t)(0xf0 | (cp >> 18));
		u[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (uint8_t)(0x80 | (cp & 0x3f));
		k = 4;
	}
	for (int i = 0; i < k; i++)
		excl_adv(g, f, u[i]);
}

static inline int hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static inline bool dig(uint8_t c, char lo, char hi)
{
	return c >= (uint8_t)lo && c <= (uint8_t)hi;
}

static bool has31(uint32_t month)
{
	return month == 1 || month == 3 || month == 5 || month == 7 || month == 8 ||
	       month == 10 || month == 12;
}

/* A UTF-8 lead byte c: how many continuation bytes follow, and the first one's range (it
 * rules out overlong forms, surrogates and code points above U+10FFFF); false when c cannot
 * lead a character. */
static bool utf8_lead(struct gr_frame *f, uint8_t c)
{
	if (c >= 0xc2 && c <= 0xdf) {
		f->u8need = 1;
		f->u8lo = 0x80, f->u8hi = 0xbf;
	} else if (c >= 0xe0 && c <= 0xef) {
		f->u8need = 2;
		f->u8lo = c == 0xe0 ? 0xa0 : 0x80;
		f->u8hi = c == 0xed ? 0x9f : 0xbf;
	} else if (c >= 0xf0 && c <= 0xf4) {
		f->u8need = 3;
		f->u8lo = c == 0xf0 ? 0x90 : 0x80;
		f->u8hi = c == 0xf4 ? 0x8f : 0xbf;
	} else {
		return false;
	}
	return true;
}

/* Formats as small state machines over f->g (see grammar.h for the shapes).  February
 * stops at day 28 so every generated date is valid whatever the year. */
static bool fmt_step(struct gr_frame *f, uint8_t fmt, uint8_t c)
{
	uint32_t g = f->g;
	if (g < 10) { /* date YYYY-MM-DD */
		switch (g) {
		case 4: case 7:
			if (c != '-')
				return false;
			break;
		case 5:
			if (!dig(c, '0', '1'))
				return false;
			f->d = (uint32_t)(c - '0') * 10;
			break;
		case 6:
			if (f->d == 0 ? !dig(c, '1', '9') : !dig(c, '0', '2'))
				return false;
			f->d += (uint32_t)(c - '0');
			break;
		case 8:
			if (!dig(c, '0', f->d == 2 ? '2' : '3'))
				return false;
			f->e = (uint32_t)(c - '0');
			break;
		case 9: {
			char lo = '0', hi = '9';
			if (f->e == 0)
				lo = '1';
			else if (f->e == 2 && f->d == 2)
				hi = '8';
			else if (f->e == 3)
				hi = has31(f->d) ? '1' : '0';
			if (!dig(c, lo, hi))
				return false;
			break;
		}
		default:
			if (!dig(c, '0', '9'))
				return false;
		}
		f->g = g + 1;
		return true;
	}
	if (g == 10) {
		if (fmt != GR_FMT_DATETIME || c != 'T')
			return false;
		f->g = 20;
		f->d = f->e = 0;
		return true;
	}
	if (g >= 20 && g < 28) { /* HH:MM:SS */
		uint32_t p = g - 20;
		bool ok;
		if (p == 0) {
			ok = dig(c, '0', '2');
			f->e = (uint32_t)(c - '0');
		} else if (p == 1) {
			ok = f->e == 2 ? dig(c, '0', '3') : dig(c, '0', '9');
		} else if (p == 2 || p == 5) {
			ok = c == ':';
		} else if (p == 3 || p == 6) {
			ok = dig(c, '0', '5');
		} else {
			ok = dig(c, '0', '9');
		}
		if (!ok)
			return false;
		f->g = g + 1;
		return true;
	}
	if (g == 28 || g == 30) { /* after seconds / inside the fraction */
		if (g == 30 && dig(c, '0', '9')) {
			if (f->e >= 9)
				return false;
			f->e++;
			return true;
		}
		if (g == 28 && c == '.') {
			f->g = 29;
			return true;
		}
		if (c == 'Z') {
			f->g = 36;
			return true;
		}
		if (c == '+' || c == '-') {
			f->g = 31;
			return true;
		}
		return false;
	}
	if (g == 29) {
		if (!dig(c, '0', '9'))
			return false;
		f->g = 30;
		f->e = 1;
		return true;
	}
	if (g >= 31 && g < 36) { /* offset HH:MM */
		uint32_t p = g - 31;
		bool ok;
		if (p == 0) {
			ok = dig(c, '0', '2');
			f->d = (uint32_t)(c - '0');
		} else if (p == 1) {
			ok = f->d == 2 ? dig(c, '0', '3') : dig(c, '0', '9');
		} else if (p == 2) {
			ok = c == ':';
		} else if (p == 3) {
			ok = dig(c, '0', '5');
		} else {
			ok = dig(c, '0', '9');
		}
		if (!ok)
			return false;
		f->g = g + 1;
		return true;
	}
	if (g >= 40 && g < 76) { /* uuid 8-4-4-4-12 */
		uint32_t p = g - 40;
		bool dash = p == 8 || p == 13 || p == 18 || p == 23;
		if (dash ? c != '-' : hexval(c) < 0)
			return false;
		f->g = g + 1;
		return true;
	}
	return false;
}

static bool fmt_final(uint8_t fmt, uint32_t g)
{
	switch (fmt) {
	case GR_FMT_DATE:
		return g == 10;
	case GR_FMT_TIME:
	case GR_FMT_DATETIME:
		return g == 36;
	case GR_FMT_UUID:
		return g == 76;
	default:
		return false;
	}
}

static void own_str(struct fctx *x, uint32_t n, uint8_t c)
{
	const pt_grammar *g = x->g;
	struct gr_frame *f = &x->w[n - 1];
	const struct gr_node *nd = &g->nodes[f->node];
	switch (f->phase) {
	case S_FRESH:
		if (c == '"') {
			f->phase = S_BODY;
			emit(x, n);
		}
		return;
	case S_BODY:
		if (nd->format != GR_FMT_NONE) {
			if (c == '"') {
				if (fmt_final(nd->format, f->g)) {
					f->phase = S_DONE;
					emit(x, n);
				}
			} else if (fmt_step(f, nd->format, c)) {
				emit(x, n);
			}
			return;
		}
		if (f->u8need) {
			if (c < f->u8lo || c > f->u8hi)
				return;
			f->u8need--;
			f->u8lo = 0x80;
			f->u8hi = 0xbf;
			excl_adv(g, f, c);
			emit(x, n);
			return;
		}
		if (c == '"') {
			if (f->a < nd->min)
				return;
			if (f->d < f->e && lit_at(g, f->d)->n == f->f)
				return; /* an extra key equal to a declared name */
			f->phase = S_DONE;
			emit(x, n);
			return;
		}
		if (c < 0x20 || (nd->max != GR_NONE && f->a >= nd->max))
			return;
		if (c == '\\') {
			f->a++;
			f->phase = S_ESC;
			emit(x, n);
			return;
		}
		if (c < 0x80) {
			f->a++;
			excl_adv(g, f, c);
			emit(x, n);
			return;
		}
		if (!utf8_lead(f, c)) /* a UTF-8 lead byte */
			return;
		f->a++;
		excl_adv(g, f, c);
		emit(x, n);
		return;
	case S_ESC: {
		static const char from[] = "\"\\/bfnrt";
		static const char to[] = "\"\\/\b\f\n\r\t";
		const char *p = c ? strchr(from, c) : NULL;
		if (p) {
			excl_adv(g, f, (uint8_t)to[p - from]);
			f->phase = S_BODY;
			emit(x, n);
		} else if (c == 'u') {
			f->phase = S_HEX;
			f->ws = 0;
			f->b = 0;
			emit(x, n);
		}
		return;
	}
	case S_HEX:
	case S_LOW_HEX: {
		int h = hexval(c);
		if (h < 0)
			return;
		uint32_t v = f->b * 16 + (uint32_t)h;
		uint32_t k = f->ws; /* digits so far */
		if (f->phase == S_HEX) {
			/* no lone low surrogate, no U+0000 */
			if (k == 1 && f->b == 0xd && h >= 0xc)
				return;
			if (k == 3 && v == 0)
				return;
		} else {
			if ((k == 0 && h != 0xd) || (k == 1 && h < 0xc))
				return;
		}
		f->b = v;
		f->ws = (uint8_t)(k + 1);
		if (k + 1 < 4) {
			emit(x, n);
			return;
		}
		f->ws = 0;
		if (f->phase == S_HEX && v >= 0xd800 && v <= 0xdbff) {
			f->c = v;
			f->b = 0;
			f->phase = S_LOW_BSL;
		} else {
			uint32_t cp = f->phase == S_HEX ? v
				      : 0x10000 + ((f->c - 0xd800) << 10) + (v - 0xdc00);
			excl_cp(g, f, cp);
			f->b = f->c = 0;
			f->phase = S_BODY;
		}
		emit(x, n);
		return;
	}
	case S_LOW_BSL:
		if (c == '\\') {
			f->phase = S_LOW_U;
			emit(x, n);
		}
		return;
	case S_LOW_U:
		if (c == 'u') {
			f->phase = S_LOW_HEX;
			f->ws = 0;
			f->b = 0;
			emit(x, n);
		}
		return;
	default:
		return;
	}
}

static const int64_t pow10s[] = { 1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
				   100000000, 1000000000, 10000000000, 100000000000,
				   1000000000000, 10000000000000, 100000000000000,
				   1000000000000000, 10000000000000000 };

/* Can an integer whose digits so far are p (k of them, sign neg) still end inside
 * [ilo, ihi]?  Its completions with j more digits span [p*10^j, p*10^j + 10^j - 1]. */
static bool int_feasible(const struct gr_node *nd, bool neg, int64_t p, uint32_t k)
{
	uint32_t jmax = p == 0 ? 0 : NUM_INT_DIGITS - k;
	for (uint32_t j = 0; j <= jmax; j++) {
		int64_t lo = p * pow10s[j], hi = lo + pow10s[j] - 1;
		if (neg) {
			int64_t t = -hi;
			hi = -lo;
			lo = t;
		}
		if (lo <= nd->ihi && hi >= nd->ilo)
			return true;
	}
	return false;
}

static int64_t frame_int(const struct gr_frame *f)
{
	return (int64_t)(((uint64_t)f->c << 32) | f->b);
}

static void set_frame_int(struct gr_frame *f, int64_t v)
{
	f->b = (uint32_t)((uint64_t)v & 0xffffffffu);
	f->c = (uint32_t)((uint64_t)v >> 32);
}

/* Bounded integers: the digit c may follow only if some completion stays in range. */
static bool bounded_digit(const struct gr_node *nd, struct gr_frame *f, uint8_t c)
{
	int64_t p = frame_int(f) * 10 + (c - '0');
	if (!int_feasible(nd, f->d != 0, p, f->a + 1))
		return false;
	set_frame_int(f, p);
	return true;
}

static bool int_in_range(const struct gr_node *nd, const struct gr_frame *f)
{
	int64_t v = f->d ? -frame_int(f) : frame_int(f);
	return v >= nd->ilo && v <= nd->ihi;
}

/* A bounded number whose integer part sits on the bound its fraction would cross. */
static bool frac_at_edge(const struct gr_node *nd, const struct gr_frame *f)
{
	return f->d ? -frame_int(f) == nd->ilo : frame_int(f) == nd->ihi;
}

static bool bounded_minus_ok(const struct gr_node *nd)
{
	for (int dd = 0; dd < 10; dd++)
		if (int_feasible(nd, true, dd, 1))
			return true;
	return false;
}

static void own_num(struct fctx *x, uint32_t n, uint8_t c)
{
	struct gr_frame *f = &x->w[n - 1];
	const struct gr_node *nd = &x->g->nodes[f->node];
	bool is_int = nd->is_int;
	bool d = c >= '0' && c <= '9';
	uint8_t p = f->phase;
	switch (p) {
	case N_FRESH:
		if (c == '-') {
			if (nd->bounded && !bounded_minus_ok(nd))
				return;
			f->phase = N_MINUS;
			f->d = 1;
			break;
		}
		/* fall through */
	case N_MINUS:
		if (d && nd->bounded && !bounded_digit(nd, f, c))
			return;
		if (c == '0')
			f->phase = N_ZERO;
		else if (d)
			f->phase = N_INT, f->a = 1;
		else
			return;
		break;
	case N_ZERO:
	case N_INT:
		if (p == N_INT && d && f->a < NUM_INT_DIGITS) {
			if (nd->bounded && !bounded_digit(nd, f, c))
				return;
			f->a++;
		} else if (!is_int && c == '.' && (!nd->bounded || int_in_range(nd, f))) {
			f->phase = N_DOT, f->a = 0;
		} else if (!is_int && !nd->bounded && (c == 'e' || c == 'E')) {
			f->phase = N_E, f->a = 0;
		} else {
			return;
		}
		break;
	case N_DOT:
	case N_FRAC:
		/* bounded: at the range's edge (the integer part equals the bound the value
		 * grows toward) only zeros may follow */
		if (d && (p == N_DOT || f->a < NUM_FRAC_DIGITS)) {
			if (nd->bounded && c != '0' && frac_at_edge(nd, f))
				return;
			f->a = p == N_DOT ? 1 : f->a + 1;
			f->phase = N_FRAC;
		} else if (p == N_FRAC && !nd->bounded && (c == 'e' || c == 'E')) {
			f->phase = N_E, f->a = 0;
		} else {
			return;
		}
		break;
	case N_E:
		if (c == '+' || c == '-')
			f->phase = N_ESIGN;
		else if (d)
			f->phase = N_EXP, f->a = 1;
		else
			return;
		break;
	case N_ESIGN:
		if (!d)
			return;
		f->phase = N_EXP, f->a = 1;
		break;
	case N_EXP:
		if (!d || f->a >= NUM_EXP_DIGITS)
			return;
		f->a++;
		break;
	default:
		return;
	}
	emit(x, n);
}

static bool obj_can_close(const pt_grammar *g, const struct gr_frame *f)
{
	const struct gr_node *nd = &g->nodes[f->node];
	for (uint32_t j = f->a; j < nd->n; j++)
		if (g->props[nd->lo + j].required)
			return false;
	return true;
}

static bool obj_can_more(const pt_grammar *g, const struct gr_frame *f, uint32_t n)
{
	const struct gr_node *nd = &g->nodes[f->node];
	for (uint32_t j = f->a; j < nd->n; j++)
		if (fits(g, n, g->props[nd->lo + j].node))
			return true;
	return fits(g, n, nd->addl);
}

/* Index of the last declared key that may come next: the first required one from a on
 * (keys before it may be skipped, keys after it may not come before it). */
static uint32_t obj_last_key(const pt_grammar *g, const struct gr_node *nd, uint32_t a)
{
	for (uint32_t j = a; j < nd->n; j++)
		if (g->props[nd->lo + j].required)
			return j;
	return nd->n ? nd->n - 1 : 0;
}

/* Some key in the byte-ordered range [lo, hi) of object f may come next and its value
 * fits below the depth limit. */
static bool obj_key_candidate(const pt_grammar *g, const struct gr_frame *f, uint32_t n,
			      uint32_t lo, uint32_t hi)
{
	const struct gr_node *nd = &g->nodes[f->node];
	uint32_t last = obj_last_key(g, nd, f->a);
	for (uint32_t i = lo; i < hi; i++) {
		uint32_t j = g->korder[nd->korder + i];
		if (j >= f->a && j <= last && fits(g, n, g->props[nd->lo + j].node))
			return true;
	}
	return false;
}

static const struct gr_bytes *key_at(const pt_grammar *g, const struct gr_node *nd, uint32_t i)
{
	return &g->lits[g->props[nd->lo + g->korder[nd->korder + i]].key];
}

/* '"' where a key may start: one stack matching every declared key that may come next
 * (a range of the byte-ordered keys), and one for an extra key when no required key is
 * left. */
static void obj_keys(struct fctx *x, uint32_t n, uint8_t c)
{
	const pt_grammar *g = x->g;
	struct gr_frame *f = &x->w[n - 1];
	const struct gr_node *nd = &g->nodes[f->node];
	struct gr_frame save = *f;
	if (obj_key_candidate(g, f, n, 0, nd->n)) {
		f->phase = O_KEY;
		f->c = 1;
		f->d = 0;
		f->e = nd->n;
		f->ws = 0;
		emit(x, n);
		*f = save;
	}
	if (obj_can_close(g, f) && fits(g, n, nd->addl)) {
		f->phase = O_AKEY;
		f->a = nd->n;
		f->b = GR_NONE;
		f->ws = 0;
		push_feed(x, n, nd->keystr, c);
		*f = save;
	}
}

static void own_obj(struct fctx *x, uint32_t n, uint8_t c)
{
	const pt_grammar *g = x->g;
	struct gr_frame *f = &x->w[n - 1];
	const struct gr_node *nd = &g->nodes[f->node];
	uint8_t p = f->phase;
	bool gap = p == O_FIRST || p == O_COLON || p == O_VALWS || p == O_AFTER || p == O_COMMA;
	if (gap && is_ws(c)) {
		if (f->ws < PT_GRAMMAR_MAX_WS) {
			f->ws++;
			emit(x, n);
		}
		return;
	}
	switch (p) {
	case O_FRESH:
		if (c == '{') {
			f->phase = O_FIRST;
			emit(x, n);
		}
		return;
	case O_FIRST:
	case O_COMMA:
		if (c == '"')
			obj_keys(x, n, c);
		else if (c == '}' && p == O_FIRST && obj_can_close(g, f))
			f->phase = O_DONE, f->ws = 0, emit(x, n);
		return;
	case O_KEY: {
		/* narrow the key range by byte c at position f->c (quoted keys are prefix-free,
		 * so a key that ends here is the only one left) */
		uint32_t lo = f->d, hi = f->e, pos = f->c;
		while (lo < hi && (key_at(g, nd, lo)->n <= pos ||
				   (uint8_t)key_at(g, nd, lo)->p[pos] < c))
			lo++;
		uint32_t hi2 = lo;
		while (hi2 < hi && key_at(g, nd, hi2)->n > pos &&
		       (uint8_t)key_at(g, nd, hi2)->p[pos] == c)
			hi2++;
		if (!obj_key_candidate(g, f, n, lo, hi2))
			return;
		f->c = pos + 1;
		f->d = lo;
		f->e = hi2;
		if (key_at(g, nd, lo)->n == pos + 1) {
			f->b = g->korder[nd->korder + lo];
			f->a = f->b + 1;
			f->phase = O_COLON;
			f->c = f->d = f->e = 0;
		}
		emit(x, n);
		return;
	}
	case O_COLON:
		if (c == ':')
			f->phase = O_VALWS, f->ws = 0, emit(x, n);
		return;
	case O_VALWS: {
		uint32_t v = f->b == GR_NONE ? nd->addl : g->props[nd->lo + f->b].node;
		f->phase = O_VALUE;
		f->ws = 0;
		push_feed(x, n, v, c);
		return;
	}
	case O_AFTER:
		if (c == ',' && obj_can_more(g, f, n))
			f->phase = O_COMMA, f->ws = 0, emit(x, n);
		else if (c == '}' && obj_can_close(g, f))
			f->phase = O_DONE, f->ws = 0, emit(x, n);
		return;
	default:
		return;
	}
}

static uint32_t arr_item(const pt_grammar *g, const struct gr_node *nd, uint32_t i)
{
	return i < nd->pfx_n ? g->kids[nd->pfx_lo + i] : nd->items;
}

static bool arr_can_item(const pt_grammar *g, const struct gr_frame *f, uint32_t n)
{
	const struct gr_node *nd = &g->nodes[f->node];
	return f->a < nd->max && fits(g, n, arr_item(g, nd, f->a));
}

static void own_arr(struct fctx *x, uint32_t n, uint8_t c)
{
	const pt_grammar *g = x->g;
	struct gr_frame *f = &x->w[n - 1];
	const struct gr_node *nd = &g->nodes[f->node];
	uint8_t p = f->phase;
	if ((p == A_FIRST || p == A_AFTER || p == A_COMMA) && is_ws(c)) {
		if (f->ws < PT_GRAMMAR_MAX_WS) {
			f->ws++;
			emit(x, n);
		}
		return;
	}
	switch (p) {
	case A_FRESH:
		if (c == '[')
			f->phase = A_FIRST, emit(x, n);
		return;
	case A_FIRST:
	case A_AFTER:
		if (c == ']' && f->a >= nd->min) {
			f->phase = A_DONE, f->ws = 0, emit(x, n);
			return;
		}
		if (p == A_AFTER) {
			if (c == ',' && arr_can_item(g, f, n))
				f->phase = A_COMMA, f->ws = 0, emit(x, n);
			return;
		}
		if (!arr_can_item(g, f, n))
			return;
		/* the first item starts with c */
		/* fall through */
	case A_COMMA: {
		uint32_t item = arr_item(g, nd, f->a);
		f->phase = A_ITEM;
		f->ws = 0;
		f->a++;
		push_feed(x, n, item, c);
		return;
	}
	default:
		return;
	}
}

static void own_seq(struct fctx *x, uint32_t n, uint8_t c)
{
	const pt_grammar *g = x->g;
	struct gr_frame *f = &x->w[n - 1];
	const struct gr_node *nd = &g->nodes[f->node];
	if (f->phase == Q_CHILD || f->a >= nd->n)
		return;
	const struct gr_part *pt = &g->parts[nd->lo + f->a];
	if (pt->node == GR_NONE) {
		const struct gr_bytes *l = &g->lits[pt->lit];
		if ((uint8_t)l->p[f->b] != c)
			return;
		f->phase = Q_PART;
		if (++f->b == l->n)
			f->a++, f->b = 0;
		emit(x, n);
		return;
	}
	f->phase = Q_CHILD;
	push_feed(x, n, pt->node, c);
}

/* GR_TEXT: raw UTF-8 (validated as in own_str), no '<', no control byte but tab, LF, CR.
 * It can end after any whole character: feed() then hands the byte to the parent. */
static void own_text(struct fctx *x, uint32_t n, uint8_t c)
{
	struct gr_frame *f = &x->w[n - 1];
	if (f->u8need) {
		if (c < f->u8lo || c > f->u8hi)
			return;
		f->u8need--;
		f->u8lo = 0x80;
		f->u8hi = 0xbf;
	} else if (c == '<' || (c < 0x20 && c != '\t' && c != '\n' && c != '\r')) {
		return;
	} else if (c >= 0x80) {
		if (!utf8_lead(f, c))
			return;
	}
	f->phase = 1;
	emit(x, n);
}

static void own_lit(struct fctx *x, uint32_t n, uint8_t c)
{
	struct gr_frame *f = &x->w[n - 1];
	if (!narrow(x->g, &f->a, &f->b, f->c, c))
		return;
	f->phase = L_MATCH;
	f->c++;
	emit(x, n);
}

static void own_union(struct fctx *x, uint32_t n, uint8_t c)
{
	const pt_grammar *g = x->g;
	const struct gr_node *nd = &g->nodes[x->w[n - 1].node];
	for (uint32_t i = 0; i < nd->n; i++) {
		uint32_t k = g->kids[nd->lo + i];
		if (fits(g, n - 1, k)) {
			x->w[n - 1] = fresh(g, k);
			feed(x, n, c);
		}
	}
}

static bool finishable(const pt_grammar *g, const struct gr_frame *f)
{
	const struct gr_node *nd = &g->nodes[f->node];
	switch (nd->kind) {
	case GR_LIT:
		return f->phase == L_MATCH && lit_at(g, f->a)->n == f->c;
	case GR_STR:
		return f->phase == S_DONE;
	case GR_NUM:
		if (nd->bounded && (f->phase == N_ZERO || f->phase == N_INT || f->phase == N_FRAC))
			return int_in_range(nd, f);
		return f->phase == N_ZERO || f->phase == N_INT || f->phase == N_FRAC ||
		       f->phase == N_EXP;
	case GR_OBJ:
		return f->phase == O_DONE;
	case GR_ARR:
		return f->phase == A_DONE;
	case GR_SEQ:
		return f->phase != Q_FRESH && f->phase != Q_CHILD && f->a >= nd->n;
	case GR_TEXT:
		return !f->u8need;
	default:
		return false;
	}
}

/* The child on top of parent finished: move the parent past it. */
static void child_done(const pt_grammar *g, struct gr_frame *parent)
{
	switch (g->nodes[parent->node].kind) {
	case GR_OBJ:
		parent->phase = parent->phase == O_AKEY ? O_COLON : O_AFTER;
		parent->ws = 0;
		break;
	case GR_ARR:
		parent->phase = A_AFTER;
		parent->ws = 0;
		break;
	case GR_SEQ:
		parent->phase = Q_PART;
		parent->a++;
		parent->b = 0;
		break;
	default:
		break;
	}
}

static void feed(struct fctx *x, uint32_t n, uint8_t c)
{
	const pt_grammar *g = x->g;
	struct gr_frame save = x->w[n - 1];
	switch (g->nodes[save.node].kind) {
	case GR_LIT: own_lit(x, n, c); break;
	case GR_STR: own_str(x, n, c); break;
	case GR_NUM: own_num(x, n, c); break;
	case GR_OBJ: own_obj(x, n, c); break;
	case GR_ARR: own_arr(x, n, c); break;
	case GR_SEQ: own_seq(x, n, c); break;
	case GR_UNION: own_union(x, n, c); break;
	case GR_TEXT: own_text(x, n, c); break;
	default: break;
	}
	x->w[n - 1] = save;
	if (n >= 2 && finishable(g, &save)) {
		struct gr_frame psave = x->w[n - 2];
		child_done(g, &x->w[n - 2]);
		feed(x, n - 1, c);
		x->w[n - 2] = psave;
	}
}

void gr_set_step(const pt_grammar *g, const struct gr_set *src, uint8_t c, struct gr_set *dst)
{
	struct fctx x;
	x.g = g;
	x.out = dst;
	gr_set_clear(dst);
	for (uint32_t i = 0; i < src->n; i++) {
		uint32_t n = src->len[i];
		memcpy(x.w, src->fr + src->off[i], n * sizeof *x.w);
		feed(&x, n, c);
	}
}

bool gr_set_complete(const pt_grammar *g, const struct gr_set *s)
{
	struct gr_frame w[PT_GRAMMAR_MAX_DEPTH + 2];
	for (uint32_t i = 0; i < s->n; i++) {
		uint32_t n = s->len[i];
		memcpy(w, s->fr + s->off[i], n * sizeof *w);
		while (n && finishable(g, &w[n - 1])) {
			if (n == 1)
				return true;
			child_done(g, &w[n - 2]);
			n--;
		}
	}
	return false;
}

uint32_t gr_set_depth(const pt_grammar *g, const struct gr_set *s)
{
	struct gr_frame w[PT_GRAMMAR_MAX_DEPTH + 2];
	uint32_t best = UINT32_MAX;
	for (uint32_t i = 0; i < s->n; i++) {
		uint32_t n = s->len[i];
		memcpy(w, s->fr + s->off[i], n * sizeof *w);
		while (n && finishable(g, &w[n - 1])) {
			if (n >= 2)
				child_done(g, &w[n - 2]);
			n--;
		}
		if (n < best)
			best = n;
	}
	return best == UINT32_MAX ? 0 : best;
}

static bool top_is_plain_string(const pt_grammar *g, const struct gr_frame *f)
{
	const struct gr_node *nd = &g->nodes[f->node];
	return nd->kind == GR_STR && nd->format == GR_FMT_NONE && f->phase == S_BODY &&
	       !f->u8need;
}

/* room < UINT32_MAX always: UINT32_MAX marks tokens that are not plain text. */
void gr_set_split_plain(const pt_grammar *g, const struct gr_set *s, struct gr_set *plain,
			struct gr_set *rest, uint32_t *room)
{
	uint32_t best = 0;
	gr_set_clear(plain);
	gr_set_clear(rest);
	for (uint32_t i = 0; i < s->n; i++) {
		const struct gr_frame *st = s->fr + s->off[i];
		const struct gr_frame *f = &st[s->len[i] - 1];
		if (!top_is_plain_string(g, f)) {
			set_push(rest, st, s->len[i]);
			continue;
		}
		const struct gr_node *nd = &g->nodes[f->node];
		uint32_t r = nd->max == GR_NONE ? UINT32_MAX - 1 : nd->max - f->a;
		if (r > best)
			best = r;
		set_push(plain, st, s->len[i]);
	}
	*room = best;
}
