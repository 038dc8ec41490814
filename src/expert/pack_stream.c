/* pack_stream.c - the expert pack written from bytes in arrival order (see pack_stream.h). */
#include "expert/pack_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "expert/pack.h"
#include "kern/kern.h"
#include "util/alloc.h"
#include "util/safefile.h"

struct pt_pack_stream {
	struct pt_expert_layout l; /* own copy */
	struct pt_pack p;
	struct pt_safe_file f;
	char *path;
	int rfd;                    /* the temporary file read back: interleaved parts */
	_Atomic uint64_t *arrived;  /* bytes in of each (layer, part, expert): interleaved parts */
};

/* arrived's index of expert e of part i of MoE layer m */
static size_t arrived_at(const pt_pack_stream *s, uint32_t m, uint32_t i, uint64_t e)
{
	return ((size_t)m * PT_EXPERT_MAX_PARTS + i) * s->l.n_expert + (size_t)e;
}

uint64_t pt_pack_stream_bytes(const struct pt_expert_layout *l, bool x16)
{
	struct pt_pack p;
	uint64_t n = 0;
	if (l->n_moe && pt_pack_plan(l, x16, &p, NULL) == PT_OK)
		n = p.size;
	if (l->n_moe)
		pt_pack_free(&p);
	return n;
}

void pt_pack_stream_abort(pt_pack_stream *s)
{
	if (!s)
		return;
	if (s->rfd >= 0)
		close(s->rfd);
	pt_safe_abort(&s->f);
	pt_free((void *)s->arrived);
	pt_pack_free(&s->p);
	pt_free(s->l.moe);
	pt_free(s->path);
	pt_free(s);
}

enum pt_status pt_pack_stream_begin(const struct pt_expert_layout *l, const char *pack_path,
				    bool x16, pt_pack_stream **out, struct pt_error *err)
{
	pt_pack_stream *s = pt_calloc(1, sizeof *s);
	enum pt_status st;
	*out = NULL;
	if (!s)
		return pt_error_set(err, PT_E_NOMEM, "out of memory (pack)");
	s->f.fd = -1;
	s->rfd = -1;
	if (l->n_moe == 0) {
		pt_free(s);
		return pt_error_set(err, PT_E_FORMAT, "the model has no routed-expert tensors to "
				    "pack");
	}
	s->l = *l;
	s->l.moe = pt_mallocn(l->n_moe, sizeof *l->moe);
	s->path = pt_strdup(pack_path);
	if (!s->l.moe || !s->path) {
		pt_pack_stream_abort(s);
		return pt_error_set(err, PT_E_NOMEM, "out of memory (pack)");
	}
	memcpy(s->l.moe, l->moe, l->n_moe * sizeof *l->moe);
	st = pt_pack_plan(&s->l, x16, &s->p, err);
	bool any_x16 = false;
	for (uint32_t m = 0; st == PT_OK && m < l->n_moe; m++)
		for (uint32_t i = 0; st == PT_OK && i < l->moe[m].n_parts; i++) {
			if (!s->p.layers[m].part_x16[i])
				continue;
			any_x16 = true;
			/* an interleaved part's rows are gathered in its own place first */
			if (pt_pack_part_bytes(&l->moe[m].part[i], true) < l->moe[m].part[i].stride)
				st = pt_error_set(err, PT_E_UNSUPPORTED, "pack: interleaved part "
						  "smaller than its rows (layer %u)", m);
		}
	if (st == PT_OK && any_x16) {
		s->arrived = pt_calloc((size_t)l->n_moe * PT_EXPERT_MAX_PARTS * l->n_expert,
				       sizeof *s->arrived);
		if (!s->arrived)
			st = pt_error_set(err, PT_E_NOMEM, "out of memory (pack)");
	}
	if (st == PT_OK)
		st = pt_safe_create(&s->f, pack_path, 0644, err);
	if (st == PT_OK && ftruncate(s->f.fd, (off_t)s->p.size) != 0)
		st = pt_error_sys(err, PT_E_IO, errno, "cannot size %s", pack_path);
	if (st == PT_OK && any_x16 &&
	    (s->rfd = open(s->f.tmp_path, O_RDONLY | O_CLOEXEC)) < 0)
		st = pt_error_sys(err, PT_E_IO, errno, "cannot read %s", s->f.tmp_path);
	if (st != PT_OK) {
		pt_pack_stream_abort(s);
		return st;
	}
	*out = s;
	return PT_OK;
}

static enum pt_status put(pt_pack_stream *s, const uint8_t *src, uint64_t n, uint64_t at,
			  struct pt_error *err)
{
	while (n) {
		ssize_t w = pwrite(s->f.fd, src, n, (off_t)at);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return pt_error_sys(err, PT_E_IO, w < 0 ? errno : ENOSPC, "cannot write %s",
					    s->path);
		src += w;
		n -= (uint64_t)w;
		at += (uint64_t)w;
	}
	return PT_OK;
}

/* The last byte of an interleaved part of one expert is in: its rows, gathered at the
 * part's place, are read back and written over with the interleaved bytes (as many or
 * more: checked at begin), exactly what pt_pack_write stores there. */
static enum pt_status interleave(pt_pack_stream *s, const struct pt_expert_part *q,
				 uint64_t at, struct pt_error *err)
{
	const uint64_t out_n = pt_pack_part_bytes(q, true);
	uint8_t *rows = pt_malloc(q->stride), *x16 = pt_malloc(out_n);
	enum pt_status st = rows && x16 ? pt_pack_pread_all(s->rfd, rows, q->stride, at,
							    s->f.tmp_path, err)
					: pt_error_set(err, PT_E_NOMEM, "out of memory (pack)");
	if (st == PT_OK) {
		pt_kern_x16_pack((enum pt_type)q->type, rows, (size_t)(q->stride / q->rows), q->cols,
				 0, q->rows / PT_KERN_X16_ROWS, x16);
		st = put(s, x16, out_n, at, err);
	}
	pt_free(rows);
	pt_free(x16);
	return st;
}

enum pt_status pt_pack_stream_feed(pt_pack_stream *s, uint64_t off, const void *buf, size_t n,
				   struct pt_error *err)
{
	const uint8_t *b = buf;
	uint64_t end = off + n;
	for (uint32_t m = 0; m < s->l.n_moe; m++) {
		const struct pt_expert_layer *L = &s->l.moe[m];
		const struct pt_pack_layer *P = &s->p.layers[m];
		for (uint32_t i = 0; i < L->n_parts; i++) {
			uint64_t fo = L->part[i].file_offset, stride = L->part[i].stride;
			uint64_t lo = off > fo ? off : fo;
			uint64_t hi = fo + stride * s->l.n_expert; /* layout checked: no overflow */
			hi = end < hi ? end : hi;
			while (lo < hi) {
				uint64_t e = (lo - fo) / stride, within = (lo - fo) % stride;
				uint64_t take = stride - within < hi - lo ? stride - within : hi - lo;
				const uint64_t at = P->offset + e * P->stride + P->part_off[i];
				enum pt_status st = put(s, b + (lo - off), take, at + within, err);
				if (st == PT_OK && P->part_x16[i]) {
					/* after the write: whoever completes the part sees it all */
					const uint64_t had = atomic_fetch_add(
						&s->arrived[arrived_at(s, m, i, e)], take);
					if (had + take > stride)
						st = pt_error_set(err, PT_E_IO, "pack: bytes of expert "
								  "%llu (layer %u) arrived twice",
								  (unsigned long long)e, m);
					else if (had + take == stride)
						st = interleave(s, &L->part[i], at, err);
				}
				if (st != PT_OK)
					return st;
				lo += take;
			}
		}
	}
	return PT_OK;
}

enum pt_status pt_pack_stream_finish(pt_pack_stream *s, const char *model_path,
				     struct pt_error *err)
{
	char sha[65];
	enum pt_status st = PT_OK;
	/* every interleaved part complete (the download shows each byte once: a gap would
	 * leave rows where interleaved bytes belong) */
	for (uint32_t m = 0; s->arrived && st == PT_OK && m < s->l.n_moe; m++)
		for (uint32_t i = 0; st == PT_OK && i < s->l.moe[m].n_parts; i++)
			for (uint64_t e = 0; s->p.layers[m].part_x16[i] && e < s->l.n_expert; e++)
				if (atomic_load(&s->arrived[arrived_at(s, m, i, e)]) !=
				    s->l.moe[m].part[i].stride) {
					st = pt_error_set(err, PT_E_IO, "pack: expert %llu of layer "
							  "%u incomplete", (unsigned long long)e, m);
					break;
				}
	/* the temporary file is open write-only: hashed through its name */
	if (st == PT_OK)
		st = pt_pack_sha256_file(s->f.tmp_path, s->p.size, sha, err);
	if (st == PT_OK)
		st = pt_safe_commit(&s->f, err);
	if (st == PT_OK)
		st = pt_pack_write_manifest(model_path, &s->l, s->p.x16, s->path, sha, err);
	pt_pack_stream_abort(s);
	return st;
}
