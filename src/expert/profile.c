/* profile.c - the persisted expert-popularity profile (profile.h). */
#include "expert/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/safefile.h"

#define MAGIC "PTXPROF1"
#define HEAD 32u /* magic, version, n_moe, n_expert, 0, identity */

uint64_t pt_profile_fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static size_t file_size(uint32_t n_moe, uint32_t n_expert)
{
	return HEAD + (size_t)n_moe * n_expert * 4 + 8;
}

enum pt_status pt_profile_identity(int fd, uint64_t *out, struct pt_error *err)
{
	struct stat sb;
	uint8_t buf[4096];
	if (fstat(fd, &sb) != 0)
		return pt_error_set(err, PT_E_IO, "profile: cannot stat the model: %s",
				    strerror(errno));
	uint64_t h = PT_PROFILE_FNV_INIT, v[3] = { (uint64_t)sb.st_size,
						    (uint64_t)sb.st_mtim.tv_sec,
						    (uint64_t)sb.st_mtim.tv_nsec };
	h = pt_profile_fnv(h, v, sizeof v);
	for (off_t off = 0; off < 65536 && off < sb.st_size;) {
		const ssize_t n = pread(fd, buf, sizeof buf, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return pt_error_set(err, PT_E_IO, "profile: cannot read the model header");
		h = pt_profile_fnv(h, buf, (size_t)n);
		off += n;
	}
	*out = h;
	return PT_OK;
}

enum pt_status pt_profile_init(struct pt_profile *p, uint32_t n_moe, uint32_t n_expert,
			       uint64_t identity, struct pt_error *err)
{
	memset(p, 0, sizeof *p);
	if (!n_moe || !n_expert || n_moe > PT_PROFILE_MAX_MOE || n_expert > PT_PROFILE_MAX_EXPERT)
		return pt_error_set(err, PT_E_INVALID, "profile: %u layers x %u experts out of "
				    "range", n_moe, n_expert);
	p->uses = pt_calloc((size_t)n_moe * n_expert, sizeof *p->uses);
	if (!p->uses)
		return pt_error_set(err, PT_E_NOMEM, "profile: cannot allocate the counts");
	p->n_moe = n_moe;
	p->n_expert = n_expert;
	p->identity = identity;
	return PT_OK;
}

void pt_profile_free(struct pt_profile *p)
{
	if (!p)
		return;
	pt_free(p->uses);
	p->uses = NULL;
	p->n_moe = p->n_expert = 0;
}

enum pt_status pt_profile_serialize(const struct pt_profile *p, uint8_t **out, size_t *len,
				    struct pt_error *err)
{
	const size_t n = file_size(p->n_moe, p->n_expert);
	uint8_t *b = pt_malloc(n);
	if (!b)
		return pt_error_set(err, PT_E_NOMEM, "profile: cannot allocate %zu bytes", n);
	memcpy(b, MAGIC, 8);
	put32(b + 8, 1);
	put32(b + 12, p->n_moe);
	put32(b + 16, p->n_expert);
	put32(b + 20, 0);
	put64(b + 24, p->identity);
	const size_t cells = (size_t)p->n_moe * p->n_expert;
	for (size_t i = 0; i < cells; i++)
		put32(b + HEAD + 4 * i, p->uses[i]);
	put64(b + n - 8, pt_profile_fnv(PT_PROFILE_FNV_INIT, b, n - 8));
	*out = b;
	*len = n;
	return PT_OK;
}

enum pt_status pt_profile_parse(const uint8_t *buf, size_t len, uint64_t identity,
				uint32_t n_moe, uint32_t n_expert, struct pt_profile *out,
				struct pt_error *err)
{
	memset(out, 0, sizeof *out);
	if (len < HEAD + 8 || memcmp(buf, MAGIC, 8) != 0)
		return pt_error_set(err, PT_E_FORMAT, "profile: not a particle expert profile");
	if (get32(buf + 8) != 1 || get32(buf + 20) != 0)
		return pt_error_set(err, PT_E_FORMAT, "profile: unknown version %u",
				    get32(buf + 8));
	const uint32_t nm = get32(buf + 12), ne = get32(buf + 16);
	if (!nm || !ne || nm > PT_PROFILE_MAX_MOE || ne > PT_PROFILE_MAX_EXPERT)
		return pt_error_set(err, PT_E_FORMAT, "profile: %u layers x %u experts out of "
				    "range", nm, ne);
	if (len != file_size(nm, ne))
		return pt_error_set(err, PT_E_FORMAT, "profile: %zu bytes, %zu expected", len,
				    file_size(nm, ne));
	if (get64(buf + len - 8) != pt_profile_fnv(PT_PROFILE_FNV_INIT, buf, len - 8))
		return pt_error_set(err, PT_E_FORMAT, "profile: checksum mismatch");
	const uint64_t id = get64(buf + 24);
	if ((identity && id != identity) || (n_moe && nm != n_moe) ||
	    (n_expert && ne != n_expert))
		return pt_error_set(err, PT_E_INVALID, "profile: made for another model");
	enum pt_status st = pt_profile_init(out, nm, ne, id, err);
	if (st != PT_OK)
		return st;
	for (size_t i = 0; i < (size_t)nm * ne; i++)
		out->uses[i] = get32(buf + HEAD + 4 * i);
	return PT_OK;
}

enum pt_status pt_profile_load(const char *path, uint64_t identity, uint32_t n_moe,
			       uint32_t n_expert, struct pt_profile *out, bool *missing,
			       struct pt_error *err)
{
	memset(out, 0, sizeof *out);
	*missing = false;
	if (!n_moe || !n_expert || n_moe > PT_PROFILE_MAX_MOE || n_expert > PT_PROFILE_MAX_EXPERT)
		return pt_error_set(err, PT_E_INVALID, "profile: bad shape");
	const int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		*missing = errno == ENOENT;
		return pt_error_set(err, PT_E_IO, "profile %s: %s", path, strerror(errno));
	}
	/* ours, regular, not writable by others (it steers what we read first) */
	enum pt_status st = pt_safe_check_fd(fd, path, err);
	const size_t want = file_size(n_moe, n_expert);
	uint8_t *buf = st == PT_OK ? pt_malloc(want + 1) : NULL;
	if (st == PT_OK && !buf)
		st = pt_error_set(err, PT_E_NOMEM, "profile: cannot allocate %zu bytes", want);
	size_t got = 0;
	while (st == PT_OK && got < want + 1) { /* one byte more: a longer file is refused */
		const ssize_t n = read(fd, buf + got, want + 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			st = pt_error_set(err, PT_E_IO, "profile %s: %s", path, strerror(errno));
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (st == PT_OK)
		st = pt_profile_parse(buf, got, identity, n_moe, n_expert, out, err);
	pt_free(buf);
	return st;
}

enum pt_status pt_profile_save(const char *path, const struct pt_profile *p,
			       struct pt_error *err)
{
	uint8_t *b = NULL;
	size_t n = 0;
	enum pt_status st = pt_profile_serialize(p, &b, &n, err);
	if (st == PT_OK)
		st = pt_safe_write_file(path, b, n, 0600, err);
	pt_free(b);
	return st;
}

void pt_profile_add(struct pt_profile *p, uint32_t moe, const uint32_t *uses)
{
	if (moe >= p->n_moe)
		return;
	uint32_t *row = p->uses + (size_t)moe * p->n_expert;
	bool halve = false;
	for (uint32_t e = 0; e < p->n_expert; e++) {
		const uint64_t v = (uint64_t)row[e] + uses[e];
		row[e] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
		halve |= row[e] > (1u << 30);
	}
	for (size_t i = 0; halve && i < (size_t)p->n_moe * p->n_expert; i++)
		p->uses[i] /= 2;
}

uint32_t pt_profile_top(const struct pt_profile *p, uint32_t moe, uint32_t *out, uint32_t max)
{
	if (moe >= p->n_moe)
		return 0;
	const uint32_t *row = p->uses + (size_t)moe * p->n_expert;
	uint32_t n = 0;
	/* insertion into a sorted prefix: n_expert is small (<= 4096) and max smaller */
	for (uint32_t e = 0; e < p->n_expert; e++) {
		if (!row[e])
			continue;
		uint32_t i = n < max ? n++ : max;
		while (i > 0 && row[out[i - 1]] < row[e]) {
			if (i < max)
				out[i] = out[i - 1];
			i--;
		}
		if (i < max)
			out[i] = e;
	}
	return n;
}
