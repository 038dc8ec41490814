/* pack.c - writes, opens and verifies expert packs (format in pack.h). */
#include "expert/pack.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kern/kern.h"
#include "quant/types.h"
#include "util/alloc.h"
#include "util/safefile.h"

#define FORMAT_NAME "particle-expert-pack"
#define PART_ALIGN 64u
#define BLOB_ALIGN 4096u
#define HASH_CHUNK (4u << 20)

void pt_pack_default_path(const char *model, char *buf, size_t n)
{
	snprintf(buf, n, "%s.xpack", model);
}

void pt_pack_manifest_path(const char *pack, char *buf, size_t n)
{
	snprintf(buf, n, "%s.json", pack);
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

bool pt_pack_part_x16(const struct pt_expert_part *p)
{
	uint64_t rb;
	return p->kind != PT_PART_OTHER && p->type < PT_TYPE_COUNT && p->rows &&
	       pt_kern_x16_ok((enum pt_type)p->type, p->rows, p->cols) &&
	       pt_type_row_bytes((enum pt_type)p->type, p->cols, &rb) == 0 &&
	       p->stride / p->rows == rb && p->stride % p->rows == 0;
}

uint64_t pt_pack_part_bytes(const struct pt_expert_part *p, bool x16)
{
	if (!x16 || !pt_pack_part_x16(p))
		return p->stride;
	return p->rows / PT_KERN_X16_ROWS * pt_kern_x16_band((enum pt_type)p->type, p->cols);
}

/* The plan, each part interleaved where x16 asks and it qualifies; with `as` (a manifest
 * read back), only the parts `as` says are: a pack written before a type gained its
 * interleaved kernels keeps that type's parts as stored, and still reads. */
static enum pt_status plan_parts(const struct pt_expert_layout *l, bool x16,
				 const struct pt_pack *as, struct pt_pack *out,
				 struct pt_error *err)
{
	uint64_t at = 0;
	memset(out, 0, sizeof *out);
	out->layers = pt_calloc(l->n_moe ? l->n_moe : 1, sizeof *out->layers);
	if (!out->layers)
		return pt_error_set(err, PT_E_NOMEM, "pack plan");
	out->n_moe = l->n_moe;
	out->x16 = x16;
	for (uint32_t m = 0; m < l->n_moe; m++) {
		struct pt_pack_layer *P = &out->layers[m];
		uint64_t cur = 0, bytes;
		P->layer = l->moe[m].layer;
		for (uint32_t i = 0; i < l->moe[m].n_parts; i++) {
			const struct pt_expert_part *q = &l->moe[m].part[i];
			P->part_off[i] = cur;
			const bool want = as ? m < as->n_moe && as->layers[m].part_x16[i] : x16;
			P->part_x16[i] = want && pt_pack_part_x16(q);
			if (pt_add_overflow(cur, pt_pack_part_bytes(q, P->part_x16[i]), &cur))
				return pt_error_set(err, PT_E_LIMIT, "pack size overflows");
			cur = round_up(cur, PART_ALIGN);
		}
		P->stride = round_up(cur, BLOB_ALIGN);
		P->offset = at;
		if (pt_mul_overflow(P->stride, l->n_expert, &bytes) || pt_add_overflow(at, bytes, &at))
			return pt_error_set(err, PT_E_LIMIT, "pack size overflows");
	}
	out->size = at;
	return PT_OK;
}

enum pt_status pt_pack_plan(const struct pt_expert_layout *l, bool x16, struct pt_pack *out,
			    struct pt_error *err)
{
	return plan_parts(l, x16, NULL, out, err);
}

void pt_pack_free(struct pt_pack *p)
{
	if (!p)
		return;
	pt_free(p->path);
	pt_free(p->layers);
	memset(p, 0, sizeof *p);
}

static void hex(const unsigned char *d, char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

enum pt_status pt_pack_sha256_file(const char *path, uint64_t len, char out[65],
				   struct pt_error *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint8_t *buf = pt_malloc(HASH_CHUNK);
	unsigned char d[32];
	enum pt_status st = PT_OK;
	if (fd < 0)
		st = pt_error_sys(err, PT_E_IO, errno, "cannot open %s", path);
	else if (!ctx || !buf || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))
		st = pt_error_set(err, PT_E_NOMEM, "sha256");
	for (uint64_t at = 0; st == PT_OK && at < len;) {
		size_t want = len - at < HASH_CHUNK ? (size_t)(len - at) : HASH_CHUNK;
		ssize_t got = pread(fd, buf, want, (off_t)at);
		if (got <= 0)
			st = got < 0 ? pt_error_sys(err, PT_E_IO, errno, "cannot read %s", path)
				     : pt_error_at(err, PT_E_FORMAT, at, "%s is shorter than expected",
						   path);
		else if (!EVP_DigestUpdate(ctx, buf, (size_t)got))
			st = pt_error_set(err, PT_E_NOMEM, "sha256");
		else
			at += (uint64_t)got;
	}
	if (st == PT_OK) {
		EVP_DigestFinal_ex(ctx, d, NULL);
		hex(d, out);
	}
	if (fd >= 0)
		close(fd);
	EVP_MD_CTX_free(ctx);
	pt_free(buf);
	return st;
}

struct identity {
	uint64_t size;
	int64_t mtime_ns;
	uint64_t meta_bytes;
	char meta_sha[65];
};

static enum pt_status source_identity(const char *model, uint64_t data_offset,
				      struct identity *id, struct pt_error *err)
{
	struct stat st;
	if (stat(model, &st) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot stat %s", model);
	id->size = (uint64_t)st.st_size;
	id->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	id->meta_bytes = data_offset;
	return pt_pack_sha256_file(model, data_offset, id->meta_sha, err);
}

/* ---- writing ---------------------------------------------------------------------------- */

enum pt_status pt_pack_pread_all(int fd, uint8_t *dst, uint64_t n, uint64_t off,
				 const char *path, struct pt_error *err)
{
	while (n) {
		ssize_t got = pread(fd, dst, n, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? pt_error_sys(err, PT_E_IO, errno, "cannot read %s", path)
				       : pt_error_at(err, PT_E_FORMAT, off, "%s ends early", path);
		dst += got;
		n -= (uint64_t)got;
		off += (uint64_t)got;
	}
	return PT_OK;
}

static enum pt_status write_all(int fd, const uint8_t *src, uint64_t n, const char *path,
				struct pt_error *err)
{
	while (n) {
		ssize_t put = write(fd, src, n);
		if (put < 0 && errno == EINTR)
			continue;
		if (put <= 0)
			return pt_error_sys(err, PT_E_IO, errno, "cannot write %s", path);
		src += put;
		n -= (uint64_t)put;
	}
	return PT_OK;
}

/* Writes every blob of the plan to fd, hashing as it goes. */
static enum pt_status write_blobs(const int *in, const char *const *model, int out,
				  const char *tmp,
				  const struct pt_expert_layout *l, const struct pt_pack *p,
				  EVP_MD_CTX *md, void (*progress)(uint32_t, uint32_t),
				  struct pt_error *err)
{
	uint64_t max = 0, max_part = 0;
	enum pt_status st = PT_OK;
	for (uint32_t m = 0; m < p->n_moe; m++) {
		max = p->layers[m].stride > max ? p->layers[m].stride : max;
		for (uint32_t i = 0; i < l->moe[m].n_parts; i++)
			if (p->layers[m].part_x16[i] && l->moe[m].part[i].stride > max_part)
				max_part = l->moe[m].part[i].stride;
	}
	uint8_t *blob = pt_malloc(max ? max : 1);
	uint8_t *rows = max_part ? pt_malloc(max_part) : NULL; /* an interleaved part as stored */
	if (!blob || (max_part && !rows)) {
		pt_free(blob);
		return pt_error_set(err, PT_E_NOMEM, "pack buffer");
	}
	for (uint32_t m = 0; st == PT_OK && m < p->n_moe; m++) {
		const struct pt_expert_layer *L = &l->moe[m];
		for (uint32_t e = 0; st == PT_OK && e < l->n_expert; e++) {
			memset(blob, 0, p->layers[m].stride);
			for (uint32_t i = 0; st == PT_OK && i < L->n_parts; i++) {
				const struct pt_expert_part *q = &L->part[i];
				uint8_t *dst = blob + p->layers[m].part_off[i];
				const bool x16 = p->layers[m].part_x16[i];
				st = pt_pack_pread_all(in[q->file], x16 ? rows : dst, q->stride,
					       q->file_offset + e * q->stride, model[q->file], err);
				if (st == PT_OK && x16)
					pt_kern_x16_pack((enum pt_type)q->type, rows,
							 (size_t)(q->stride / q->rows), q->cols, 0,
							 q->rows / PT_KERN_X16_ROWS, dst);
			}
			if (st == PT_OK)
				st = write_all(out, blob, p->layers[m].stride, tmp, err);
			if (st == PT_OK && !EVP_DigestUpdate(md, blob, p->layers[m].stride))
				st = pt_error_set(err, PT_E_NOMEM, "sha256");
		}
		if (progress)
			progress(m + 1, p->n_moe);
	}
	pt_free(blob);
	pt_free(rows);
	return st;
}

static cJSON *manifest_json(const struct pt_expert_layout *l, const struct pt_pack *p,
			    const struct identity *id, const char *pack_name, const char *sha)
{
	cJSON *root = cJSON_CreateObject(), *src = cJSON_CreateObject();
	cJSON *layers = cJSON_CreateArray(), *files = cJSON_CreateArray();
	cJSON *f = cJSON_CreateObject();
	char num[32];
	cJSON_AddStringToObject(root, "format", FORMAT_NAME);
	cJSON_AddNumberToObject(root, "version", p->x16 ? PT_PACK_VERSION_X16 : PT_PACK_VERSION);
	/* 64-bit values as decimal strings: JSON numbers are doubles */
	snprintf(num, sizeof num, "%" PRIu64, id->size);
	cJSON_AddStringToObject(src, "size", num);
	snprintf(num, sizeof num, "%" PRId64, id->mtime_ns);
	cJSON_AddStringToObject(src, "mtime_ns", num);
	snprintf(num, sizeof num, "%" PRIu64, id->meta_bytes);
	cJSON_AddStringToObject(src, "header_bytes", num);
	cJSON_AddStringToObject(src, "header_sha256", id->meta_sha);
	cJSON_AddItemToObject(root, "source", src);
	cJSON_AddNumberToObject(root, "n_expert", l->n_expert);
	for (uint32_t m = 0; m < p->n_moe; m++) {
		cJSON *L = cJSON_CreateObject(), *parts = cJSON_CreateArray();
		cJSON_AddNumberToObject(L, "layer", p->layers[m].layer);
		snprintf(num, sizeof num, "%" PRIu64, p->layers[m].offset);
		cJSON_AddStringToObject(L, "offset", num);
		cJSON_AddNumberToObject(L, "stride", (double)p->layers[m].stride);
		for (uint32_t i = 0; i < l->moe[m].n_parts; i++) {
			cJSON *q = cJSON_CreateObject();
			cJSON_AddStringToObject(q, "name", l->moe[m].part[i].name);
			cJSON_AddNumberToObject(q, "type", l->moe[m].part[i].type);
			cJSON_AddNumberToObject(q, "off", (double)p->layers[m].part_off[i]);
			cJSON_AddNumberToObject(q, "bytes",
						(double)pt_pack_part_bytes(&l->moe[m].part[i],
									   p->layers[m].part_x16[i]));
			if (p->layers[m].part_x16[i])
				cJSON_AddStringToObject(q, "layout", "x16");
			cJSON_AddItemToArray(parts, q);
		}
		cJSON_AddItemToObject(L, "parts", parts);
		cJSON_AddItemToArray(layers, L);
	}
	cJSON_AddItemToObject(root, "layers", layers);
	cJSON_AddStringToObject(f, "name", pack_name);
	snprintf(num, sizeof num, "%" PRIu64, p->size);
	cJSON_AddStringToObject(f, "size", num);
	cJSON_AddStringToObject(f, "sha256", sha);
	cJSON_AddItemToArray(files, f);
	cJSON_AddItemToObject(root, "files", files);
	return root;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static enum pt_status write_manifest(const struct pt_expert_layout *l, const struct pt_pack *p,
				     const struct identity *id, const char *pack_path,
				     const char *man, const char *sha, struct pt_error *err)
{
	cJSON *j = manifest_json(l, p, id, base_name(pack_path), sha);
	char *text = j ? cJSON_Print(j) : NULL;
	enum pt_status st = text ? pt_safe_write_file(man, text, strlen(text), 0644, err)
				 : pt_error_set(err, PT_E_NOMEM, "manifest");
	free(text); /* cJSON's allocation */
	cJSON_Delete(j);
	return st;
}

enum pt_status pt_pack_write_manifest(const char *model_path, const struct pt_expert_layout *l,
				      bool x16, const char *pack_path, const char sha[65],
				      struct pt_error *err)
{
	struct pt_pack p = { 0 };
	struct identity id;
	char man[4200];
	pt_pack_manifest_path(pack_path, man, sizeof man);
	enum pt_status st = source_identity(model_path, l->data_offset, &id, err);
	if (st == PT_OK)
		st = pt_pack_plan(l, x16, &p, err);
	if (st == PT_OK)
		st = write_manifest(l, &p, &id, pack_path, man, sha, err);
	pt_pack_free(&p);
	return st;
}

enum pt_status pt_pack_write(const char *model_path, const struct pt_expert_layout *l, bool x16,
			     const char *pack_path, void (*progress)(uint32_t done, uint32_t n),
			     struct pt_error *err)
{
	struct pt_pack p = { 0 };
	struct identity id;
	struct pt_safe_file out = { .fd = -1 };
	char man[4200], sha[65];
	unsigned char d[32];
	/* a split model's parts: slices name their file (the layout's files; else the model) */
	const uint32_t nf = l->n_files > 1 ? l->n_files : 1;
	int *in = pt_mallocn(nf, sizeof *in);
	const char **names = pt_mallocn(nf, sizeof *names);
	uint32_t n_open = 0;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	enum pt_status st = md && in && names ? PT_OK : pt_error_set(err, PT_E_NOMEM, "sha256");
	for (uint32_t i = 0; st == PT_OK && i < nf; i++)
		names[i] = nf > 1 && l->files[i] ? l->files[i] : model_path;
	pt_pack_manifest_path(pack_path, man, sizeof man);
	if (st == PT_OK && l->n_moe == 0)
		st = pt_error_set(err, PT_E_FORMAT, "%s has no routed-expert tensors", model_path);
	if (st == PT_OK)
		st = source_identity(model_path, l->data_offset, &id, err);
	if (st == PT_OK)
		st = pt_pack_plan(l, x16, &p, err);
	for (; st == PT_OK && n_open < nf; n_open++)
		if ((in[n_open] = open(names[n_open], O_RDONLY | O_CLOEXEC)) < 0)
			st = pt_error_sys(err, PT_E_IO, errno, "cannot open %s", names[n_open]);
	/* temp name + rename (safefile.h): a link planted at the pack's name is replaced */
	if (st == PT_OK)
		st = pt_safe_create(&out, pack_path, 0644, err);
	if (st == PT_OK && !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		st = pt_error_set(err, PT_E_NOMEM, "sha256");
	if (st == PT_OK)
		st = write_blobs(in, names, out.fd, out.tmp_path, l, &p, md, progress, err);
	if (st == PT_OK)
		st = pt_safe_commit(&out, err);
	if (st == PT_OK) {
		EVP_DigestFinal_ex(md, d, NULL);
		hex(d, sha);
		st = write_manifest(l, &p, &id, pack_path, man, sha, err);
	}
	for (uint32_t i = 0; i < n_open; i++)
		if (in[i] >= 0)
			close(in[i]);
	pt_free(in);
	pt_free(names);
	pt_safe_abort(&out); /* no-op after commit */
	EVP_MD_CTX_free(md);
	pt_pack_free(&p);
	return st;
}

/* ---- opening and verifying ---------------------------------------------------------------- */

#define MANIFEST_MAX (16u << 20)

static int json_u64(const cJSON *o, const char *key, uint64_t *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	char *end;
	if (cJSON_IsString(v) && v->valuestring[0] >= '0' && v->valuestring[0] <= '9') {
		errno = 0;
		unsigned long long x = strtoull(v->valuestring, &end, 10);
		if (errno || *end)
			return 0;
		*out = x;
		return 1;
	}
	if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 9007199254740992.0 &&
	    v->valuedouble == (double)(uint64_t)v->valuedouble) {
		*out = (uint64_t)v->valuedouble;
		return 1;
	}
	return 0;
}

static const char *json_str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static enum pt_status load_manifest(const char *path, cJSON **out, struct pt_error *err)
{
	FILE *f = fopen(path, "rb");
	char *text;
	size_t n;
	if (!f)
		return pt_error_sys(err, PT_E_IO, errno, "cannot open pack manifest %s", path);
	text = pt_malloc(MANIFEST_MAX + 1);
	n = text ? fread(text, 1, MANIFEST_MAX + 1, f) : 0;
	fclose(f);
	if (!text)
		return pt_error_set(err, PT_E_NOMEM, "manifest");
	text[n > MANIFEST_MAX ? MANIFEST_MAX : n] = '\0';
	*out = n > MANIFEST_MAX ? NULL : cJSON_Parse(text);
	pt_free(text);
	if (!*out)
		return pt_error_set(err, PT_E_FORMAT, "corrupt pack manifest %s (not valid JSON)",
				    path);
	return PT_OK;
}

/* One layer of the manifest, bounds-checked against the pack size. */
static enum pt_status parse_layer(const cJSON *L, uint64_t n_expert, uint64_t size, bool x16,
				  struct pt_pack_layer *P, const char *man, struct pt_error *err)
{
	uint64_t layer, span, end, off, bytes;
	const cJSON *parts = cJSON_GetObjectItemCaseSensitive(L, "parts"), *q;
	uint32_t i = 0;
	if (!json_u64(L, "layer", &layer) || layer > UINT32_MAX || !json_u64(L, "offset",
	    &P->offset) || !json_u64(L, "stride", &P->stride) || !cJSON_IsArray(parts) ||
	    cJSON_GetArraySize(parts) > PT_EXPERT_MAX_PARTS || P->stride % BLOB_ALIGN ||
	    P->offset % BLOB_ALIGN || pt_mul_overflow(P->stride, n_expert, &span) ||
	    pt_add_overflow(P->offset, span, &end) || end > size)
		return pt_error_set(err, PT_E_FORMAT, "corrupt pack manifest %s: bad layer entry",
				    man);
	P->layer = (uint32_t)layer;
	cJSON_ArrayForEach(q, parts) {
		/* absent: rows; in version 2 also "rows" or "x16"; anything else is refused */
		const char *ls = json_str(q, "layout");
		const bool absent = !cJSON_GetObjectItemCaseSensitive(q, "layout");
		const bool rows = absent || (x16 && ls && strcmp(ls, "rows") == 0);
		const bool inter = x16 && ls && strcmp(ls, "x16") == 0;
		if (!json_u64(q, "off", &off) || !json_u64(q, "bytes", &bytes) ||
		    off > P->stride || bytes > P->stride - off || !(rows || inter))
			return pt_error_set(err, PT_E_FORMAT, "corrupt pack manifest %s: bad part "
					    "of layer %u", man, P->layer);
		P->part_x16[i] = inter;
		P->part_off[i++] = off;
	}
	return PT_OK;
}

/* The manifest's layers must be exactly what pt_pack_plan makes for this model's layout,
 * with the parts the manifest interleaves (each one that qualifies). */
static enum pt_status match_layout(const cJSON *layers, const struct pt_expert_layout *l,
				   const struct pt_pack *got, const char *man,
				   struct pt_error *err)
{
	struct pt_pack want;
	enum pt_status st = plan_parts(l, got->x16, got, &want, err);
	for (uint32_t m = 0; st == PT_OK && m < l->n_moe; m++) {
		const cJSON *parts = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetArrayItem(layers, (int)m), "parts");
		const struct pt_pack_layer *a = &want.layers[m], *b = &got->layers[m];
		bool same = a->layer == b->layer && a->stride == b->stride &&
			    a->offset == b->offset &&
			    cJSON_GetArraySize(parts) == (int)l->moe[m].n_parts;
		for (uint32_t i = 0; same && i < l->moe[m].n_parts; i++) {
			const cJSON *q = cJSON_GetArrayItem(parts, (int)i);
			const char *name = json_str(q, "name");
			uint64_t type = 0, bytes = 0;
			same = a->part_off[i] == b->part_off[i] &&
			       a->part_x16[i] == b->part_x16[i] && name &&
			       strcmp(name, l->moe[m].part[i].name) == 0 && json_u64(q, "type", &type) &&
			       type == l->moe[m].part[i].type && json_u64(q, "bytes", &bytes) &&
			       bytes == pt_pack_part_bytes(&l->moe[m].part[i], a->part_x16[i]);
		}
		if (!same)
			st = pt_error_set(err, PT_E_FORMAT, "pack manifest %s does not match the "
					  "model's expert tensors of layer %u; rerun particle pack",
					  man, l->moe[m].layer);
	}
	pt_pack_free(&want);
	return st;
}

static enum pt_status check_source(const cJSON *j, const char *model, const char *pack,
				   struct pt_error *err)
{
	const cJSON *src = cJSON_GetObjectItemCaseSensitive(j, "source");
	const char *sha = json_str(src, "header_sha256");
	uint64_t size, mtime, hb;
	struct identity id;
	if (!json_u64(src, "size", &size) || !json_u64(src, "mtime_ns", &mtime) ||
	    !json_u64(src, "header_bytes", &hb) || !sha)
		return pt_error_set(err, PT_E_FORMAT, "corrupt pack manifest for %s: no source "
				    "identity", pack);
	if (hb > size)
		return pt_error_set(err, PT_E_FORMAT, "corrupt pack manifest for %s", pack);
	enum pt_status st = source_identity(model, hb, &id, err);
	if (st != PT_OK)
		return st;
	if (id.size != size || (uint64_t)id.mtime_ns != mtime || strcmp(id.meta_sha, sha) != 0)
		return pt_error_set(err, PT_E_FORMAT, "pack %s was made from a different version of "
				    "%s (%s differs); rerun particle pack", pack, model,
				    id.size != size ? "size" : strcmp(id.meta_sha, sha) ? "header"
										 : "mtime");
	return PT_OK;
}

static enum pt_status check_files(const cJSON *j, const char *pack, const char *man,
				  bool full_hash, uint64_t *size, struct pt_error *err)
{
	const cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "files"), 0);
	const char *sha = json_str(f, "sha256");
	struct stat st;
	char got[65];
	if (!json_u64(f, "size", size) || !sha || strlen(sha) != 64)
		return pt_error_set(err, PT_E_FORMAT, "corrupt pack manifest %s: no file entry",
				    man);
	if (stat(pack, &st) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot open pack %s", pack);
	if ((uint64_t)st.st_size != *size)
		return pt_error_set(err, PT_E_FORMAT, "pack %s is %llu bytes, its manifest says "
				    "%llu (incomplete or corrupt)", pack,
				    (unsigned long long)st.st_size, (unsigned long long)*size);
	if (!full_hash)
		return PT_OK;
	enum pt_status s = pt_pack_sha256_file(pack, *size, got, err);
	if (s == PT_OK && strcmp(got, sha) != 0)
		s = pt_error_set(err, PT_E_FORMAT, "pack %s is corrupt: SHA-256 %s, manifest says "
				 "%s", pack, got, sha);
	return s;
}

static enum pt_status parse_pack(const cJSON *j, const char *man, struct pt_pack *out,
				 struct pt_error *err)
{
	const cJSON *layers = cJSON_GetObjectItemCaseSensitive(j, "layers"), *L;
	const char *fmt = json_str(j, "format");
	uint64_t ver = 0, n_expert = 0;
	uint32_t m = 0;
	if (!fmt || strcmp(fmt, FORMAT_NAME) != 0 || !json_u64(j, "version", &ver))
		return pt_error_set(err, PT_E_FORMAT, "%s is not an expert pack manifest", man);
	if (ver != PT_PACK_VERSION && ver != PT_PACK_VERSION_X16)
		return pt_error_set(err, PT_E_UNSUPPORTED, "pack manifest %s has version %llu, this "
				    "build reads %d and %d", man, (unsigned long long)ver,
				    PT_PACK_VERSION, PT_PACK_VERSION_X16);
	out->x16 = ver == PT_PACK_VERSION_X16;
	if (!json_u64(j, "n_expert", &n_expert) || n_expert == 0 || n_expert > UINT32_MAX ||
	    !cJSON_IsArray(layers) || cJSON_GetArraySize(layers) > 100000)
		return pt_error_set(err, PT_E_FORMAT, "corrupt pack manifest %s", man);
	out->n_moe = (uint32_t)cJSON_GetArraySize(layers);
	out->layers = pt_calloc(out->n_moe ? out->n_moe : 1, sizeof *out->layers);
	if (!out->layers)
		return pt_error_set(err, PT_E_NOMEM, "pack");
	cJSON_ArrayForEach(L, layers) {
		enum pt_status st = parse_layer(L, n_expert, out->size, out->x16, &out->layers[m++],
						man, err);
		if (st != PT_OK)
			return st;
	}
	return PT_OK;
}

enum pt_status pt_pack_open(const char *pack_path, const char *model_path,
			    const struct pt_expert_layout *l, bool full_hash, struct pt_pack *out,
			    struct pt_error *err)
{
	char man[4200];
	cJSON *j = NULL;
	enum pt_status st;
	memset(out, 0, sizeof *out);
	pt_pack_manifest_path(pack_path, man, sizeof man);
	if ((st = load_manifest(man, &j, err)) != PT_OK)
		return st;
	st = check_files(j, pack_path, man, full_hash, &out->size, err);
	if (st == PT_OK)
		st = parse_pack(j, man, out, err);
	if (st == PT_OK && model_path)
		st = check_source(j, model_path, pack_path, err);
	uint64_t n_expert = 0;
	json_u64(j, "n_expert", &n_expert);
	if (st == PT_OK && l)
		st = l->n_moe != out->n_moe || l->n_expert != n_expert
			     ? pt_error_set(err, PT_E_FORMAT, "pack manifest %s has %u MoE layers of "
					    "%llu experts, the model %u of %u; rerun particle pack",
					    man, out->n_moe, (unsigned long long)n_expert, l->n_moe,
					    l->n_expert)
			     : match_layout(cJSON_GetObjectItemCaseSensitive(j, "layers"), l, out,
					    man, err);
	if (st == PT_OK && !(out->path = pt_strdup(pack_path)))
		st = pt_error_set(err, PT_E_NOMEM, "pack");
	cJSON_Delete(j);
	if (st != PT_OK)
		pt_pack_free(out);
	return st;
}

enum pt_status pt_pack_manifest_parse(const char *text, uint64_t pack_size, struct pt_pack *out,
				      struct pt_error *err)
{
	cJSON *j = cJSON_Parse(text);
	enum pt_status st;
	memset(out, 0, sizeof *out);
	if (!j)
		return pt_error_set(err, PT_E_FORMAT, "corrupt pack manifest (not valid JSON)");
	out->size = pack_size;
	st = parse_pack(j, "manifest", out, err);
	cJSON_Delete(j);
	if (st != PT_OK)
		pt_pack_free(out);
	return st;
}
