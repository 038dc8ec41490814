/* pack_stream.c - the expert pack written from bytes in arrival order (see pack_stream.h). */
#include "expert/pack_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "expert/pack.h"
#include "util/alloc.h"
#include "util/safefile.h"

#define HASH_PIECE (4u << 20)

struct pt_pack_stream {
	struct pt_expert_layout l; /* own copy */
	struct pt_pack p;
	struct pt_safe_file f;
	char *path;
};

uint64_t pt_pack_stream_bytes(const struct pt_expert_layout *l)
{
	struct pt_pack p;
	uint64_t n = 0;
	if (l->n_moe && pt_pack_plan(l, false, &p, NULL) == PT_OK)
		n = p.size;
	if (l->n_moe)
		pt_pack_free(&p);
	return n;
}

void pt_pack_stream_abort(pt_pack_stream *s)
{
	if (!s)
		return;
	pt_safe_abort(&s->f);
	pt_pack_free(&s->p);
	pt_free(s->l.moe);
	pt_free(s->path);
	pt_free(s);
}

enum pt_status pt_pack_stream_begin(const struct pt_expert_layout *l, const char *pack_path,
				    pt_pack_stream **out, struct pt_error *err)
{
	pt_pack_stream *s = pt_calloc(1, sizeof *s);
	enum pt_status st;
	*out = NULL;
	if (!s)
		return pt_error_set(err, PT_E_NOMEM, "out of memory (pack)");
	s->f.fd = -1;
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
	st = pt_pack_plan(&s->l, false, &s->p, err);
	if (st == PT_OK)
		st = pt_safe_create(&s->f, pack_path, 0644, err);
	if (st == PT_OK && ftruncate(s->f.fd, (off_t)s->p.size) != 0)
		st = pt_error_sys(err, PT_E_IO, errno, "cannot size %s", pack_path);
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
				enum pt_status st = put(s, b + (lo - off), take, P->offset +
							e * P->stride + P->part_off[i] + within, err);
				if (st != PT_OK)
					return st;
				lo += take;
			}
		}
	}
	return PT_OK;
}

static enum pt_status hash_fd(int fd, uint64_t len, const char *path, char out[65],
			      struct pt_error *err)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint8_t *buf = pt_malloc(HASH_PIECE);
	unsigned char d[32];
	enum pt_status st = PT_OK;
	if (!md || !buf || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		st = pt_error_set(err, PT_E_NOMEM, "sha256");
	for (uint64_t at = 0; st == PT_OK && at < len;) {
		size_t want = len - at < HASH_PIECE ? (size_t)(len - at) : HASH_PIECE;
		ssize_t got = pread(fd, buf, want, (off_t)at);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			st = pt_error_sys(err, PT_E_IO, got < 0 ? errno : EIO, "cannot read %s",
					  path);
		else if (!EVP_DigestUpdate(md, buf, (size_t)got))
			st = pt_error_set(err, PT_E_NOMEM, "sha256");
		else
			at += (uint64_t)got;
	}
	if (st == PT_OK) {
		EVP_DigestFinal_ex(md, d, NULL);
		for (int i = 0; i < 32; i++)
			snprintf(out + 2 * i, 3, "%02x", d[i]);
	}
	EVP_MD_CTX_free(md);
	pt_free(buf);
	return st;
}

enum pt_status pt_pack_stream_finish(pt_pack_stream *s, const char *model_path,
				     struct pt_error *err)
{
	char sha[65];
	/* the temporary file is open write-only: hash through a read descriptor */
	int rfd = open(s->f.tmp_path, O_RDONLY | O_CLOEXEC);
	enum pt_status st = rfd < 0 ? pt_error_sys(err, PT_E_IO, errno, "cannot read %s",
						   s->f.tmp_path)
				    : hash_fd(rfd, s->p.size, s->path, sha, err);
	if (rfd >= 0)
		close(rfd);
	if (st == PT_OK)
		st = pt_safe_commit(&s->f, err);
	if (st == PT_OK)
		st = pt_pack_write_manifest(model_path, &s->l, s->path, sha, err);
	pt_pack_stream_abort(s);
	return st;
}
