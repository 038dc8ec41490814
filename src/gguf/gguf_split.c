/* gguf_split.c - split models (llama.cpp's gguf-split convention): PREFIX-00001-of-00003.gguf
 * ... PREFIX-00003-of-00003.gguf.  Every part is a complete GGUF file of its own carrying
 * split.no (u16, 0-based), split.count (u16) and split.tensors.count (i32, the model's total);
 * part 1 also holds all the metadata, the other parts only those three keys.  Tensors sit in
 * any part, each part with its own data section and alignment.
 *
 * pt_gguf_open accepts any part: it reads that part's keys, derives the prefix from its name,
 * opens every part through the single-file reader (so each is fully bounds-checked), checks
 * they agree and merges the tensor tables into part 1's handle.  Nothing is trusted from a
 * name alone: the name must match the part's own keys.
 */
#include "gguf/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf_internal.h"
#include "util/alloc.h"

#define SUFFIX_LEN 20 /* "-NNNNN-of-MMMMM.gguf" */

static enum pt_status get_int(const pt_gguf *g, const char *key, bool *found, int64_t *v,
			      struct pt_error *err)
{
	const struct pt_gguf_kv *kv = pt_gguf_find_kv(g, key);
	*found = kv != NULL;
	if (!kv)
		return PT_OK;
	if (!pt_gguf_kv_int(kv, v) || kv->type == PT_GGUF_BOOL)
		return pt_error_at(err, PT_E_FORMAT, kv->value_offset,
				   "%s has type %s, expected an integer", key,
				   pt_gguf_vtype_name(kv->type));
	return PT_OK;
}

enum pt_status pt_gguf_split_info(const pt_gguf *g, struct pt_gguf_split_info *out,
				  struct pt_error *err)
{
	bool has_no, has_count;
	int64_t no = 0, count = 1, tc = 0;
	memset(out, 0, sizeof *out);
	enum pt_status st = get_int(g, "split.no", &has_no, &no, err);
	if (st == PT_OK)
		st = get_int(g, "split.count", &has_count, &count, err);
	if (st == PT_OK)
		st = get_int(g, "split.tensors.count", &out->has_tensors_count, &tc, err);
	if (st != PT_OK)
		return st;
	if (has_count && (count < 1 || count > PT_GGUF_MAX_PARTS))
		return pt_error_set(err, PT_E_FORMAT, "split.count %lld is not in 1..%d",
				    (long long)count, PT_GGUF_MAX_PARTS);
	if (no < 0 || no >= count)
		return pt_error_set(err, PT_E_FORMAT, "split.no %lld but split.count %lld",
				    (long long)no, (long long)count);
	out->is_split = count > 1;
	out->no = (uint32_t)no;
	out->count = (uint32_t)count;
	out->tensors_count = tc;
	return PT_OK;
}

static bool digits5(const char *p, uint32_t *v)
{
	*v = 0;
	for (int i = 0; i < 5; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		*v = *v * 10 + (uint32_t)(p[i] - '0');
	}
	return true;
}

bool pt_gguf_split_name(const char *path, uint32_t *no1, uint32_t *count, size_t *prefix_len)
{
	size_t n = strlen(path);
	if (n < SUFFIX_LEN)
		return false;
	const char *s = path + n - SUFFIX_LEN;
	if (s[0] != '-' || memcmp(s + 6, "-of-", 4) != 0 || memcmp(s + 15, ".gguf", 5) != 0 ||
	    !digits5(s + 1, no1) || !digits5(s + 10, count))
		return false;
	*prefix_len = n - SUFFIX_LEN;
	return true;
}

enum pt_status pt_gguf_join(pt_gguf **parts, uint32_t n, const char *const *names,
			    pt_gguf **out, struct pt_error *err)
{
	struct pt_gguf_split_info first = { 0 };
	enum pt_status st = PT_OK;
	uint64_t total = 0;
	*out = NULL;
	for (uint32_t i = 0; st == PT_OK && i < n; i++) {
		struct pt_gguf_split_info in;
		struct pt_error e = { 0 };
		if (pt_gguf_split_info(parts[i], &in, &e) != PT_OK)
			st = pt_error_set(err, PT_E_FORMAT, "%s: %s", names[i], e.msg);
		else if (!in.is_split || in.count != n || in.no != i)
			st = pt_error_set(err, PT_E_FORMAT,
					  "%s: not a part of this model (it says it is part %u of %u: "
					  "split.no %u, split.count %u)", names[i], in.no + 1, in.count,
					  in.no, in.count);
		else if (i == 0)
			first = in;
		else if (in.has_tensors_count != first.has_tensors_count ||
			 in.tensors_count != first.tensors_count)
			st = pt_error_set(err, PT_E_FORMAT,
					  "%s: not a part of this model (split.tensors.count %lld, "
					  "part 1 says %lld)", names[i], (long long)in.tensors_count,
					  (long long)first.tensors_count);
		if (st == PT_OK)
			total += pt_gguf_tensor_count(parts[i]);
	}
	if (st == PT_OK && first.has_tensors_count && (uint64_t)first.tensors_count != total)
		st = pt_error_set(err, PT_E_FORMAT,
				  "split model: split.tensors.count is %lld but the %u parts hold "
				  "%llu tensors (a part is from another model?)",
				  (long long)first.tensors_count, n, (unsigned long long)total);
	if (st == PT_OK)
		st = pt_gguf_merge_parts(parts, n, names, err);
	if (st != PT_OK) {
		for (uint32_t i = 0; i < n; i++)
			pt_gguf_close(parts[i]);
		return st;
	}
	*out = parts[0];
	return PT_OK;
}

/* Opens parts 0..count-1 of the model whose part `have` (index) is already open. */
static enum pt_status open_parts(pt_gguf *have, uint32_t no, uint32_t count, const char *path,
				 size_t prefix_len, pt_gguf **out, struct pt_error *err)
{
	pt_gguf **parts = pt_calloc(count, sizeof *parts);
	char **paths = pt_calloc(count, sizeof *paths);
	char **names = pt_calloc(count, sizeof *names);
	enum pt_status st = PT_OK;
	if (!parts || !paths || !names)
		st = pt_error_set(err, PT_E_NOMEM, "out of memory opening a split model");
	for (uint32_t i = 0; st == PT_OK && i < count; i++) {
		size_t len = prefix_len + SUFFIX_LEN + 1;
		paths[i] = pt_malloc(len);
		names[i] = pt_malloc(len + 40);
		if (!paths[i] || !names[i]) {
			st = pt_error_set(err, PT_E_NOMEM, "out of memory opening a split model");
			break;
		}
		snprintf(paths[i], len, "%.*s-%05u-of-%05u.gguf", (int)prefix_len, path, i + 1,
			 count);
		snprintf(names[i], len + 40, "split part %u of %u (%s)", i + 1, count, paths[i]);
	}
	for (uint32_t i = 0; st == PT_OK && i < count; i++) {
		struct pt_error e = { 0 };
		if (i == no) {
			parts[i] = have;
			have = NULL;
			continue;
		}
		st = pt_gguf_open_file(paths[i], &parts[i], &e);
		if (st == PT_OK)
			continue;
		if (e.sys_errno == ENOENT)
			pt_error_set(err, st, "split part %u of %u is missing: %s does not exist",
				     i + 1, count, paths[i]);
		else
			pt_error_at(err, st, e.offset, "split part %u of %u (%s): %s", i + 1,
				    count, paths[i], e.msg);
		if (err)
			err->sys_errno = e.sys_errno;
	}
	if (st == PT_OK) {
		st = pt_gguf_join(parts, count, (const char *const *)names, out, err);
	} else {
		for (uint32_t i = 0; parts && i < count; i++)
			pt_gguf_close(parts[i]);
	}
	pt_gguf_close(have); /* still ours only when allocation failed before the hand-over */
	for (uint32_t i = 0; i < count; i++) {
		if (paths)
			pt_free(paths[i]);
		if (names)
			pt_free(names[i]);
	}
	pt_free(parts);
	pt_free(paths);
	pt_free(names);
	return st;
}

enum pt_status pt_gguf_open_one(const char *path, pt_gguf **out, struct pt_error *err)
{
	return pt_gguf_open_file(path, out, err);
}

enum pt_status pt_gguf_open(const char *path, pt_gguf **out, struct pt_error *err)
{
	pt_gguf *g;
	struct pt_gguf_split_info in;
	uint32_t no1, count;
	size_t prefix_len;
	*out = NULL;
	enum pt_status st = pt_gguf_open_file(path, &g, err);
	if (st != PT_OK)
		return st;
	struct pt_error e = { 0 };
	if ((st = pt_gguf_split_info(g, &in, &e)) != PT_OK) {
		pt_gguf_close(g);
		return pt_error_set(err, st, "%s: %s", path, e.msg);
	}
	if (!in.is_split) {
		*out = g;
		return PT_OK;
	}
	if (!pt_gguf_split_name(path, &no1, &count, &prefix_len) || no1 != in.no + 1 ||
	    count != in.count) {
		pt_gguf_close(g);
		return pt_error_set(err, PT_E_FORMAT,
				    "%s is split part %u of %u (split.no %u) but is not named "
				    "PREFIX-%05u-of-%05u.gguf, so the other parts cannot be found",
				    path, in.no + 1, in.count, in.no, in.no + 1, in.count);
	}
	return open_parts(g, in.no, in.count, path, prefix_len, out, err);
}

bool pt_gguf_split_first_path(const char *path, char *out, size_t n)
{
	uint32_t no1, count;
	size_t pl;
	const bool split = pt_gguf_split_name(path, &no1, &count, &pl) && count > 1 && no1 >= 1 &&
			   no1 <= count;
	int w = split ? snprintf(out, n, "%.*s-%05u-of-%05u.gguf", (int)pl, path, 1u, count)
		      : snprintf(out, n, "%s", path);
	if (w < 0 || (size_t)w >= n) {
		if (n)
			out[0] = '\0';
		return false;
	}
	return true;
}
