/* gguf_meta.c - typed metadata getters and array element access over a validated GGUF.
 * Values are read unaligned and little-endian straight from the mapping; the reader has
 * already bounds-checked every payload, so nothing here re-checks offsets. */
#include "gguf/gguf.h"

#include <string.h>

#include "gguf/gguf_internal.h"

static uint64_t le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = n; i-- > 0;)
		v = (v << 8) | p[i];
	return v;
}

static bool is_int(enum pt_gguf_vtype t)
{
	return t <= PT_GGUF_I32 || t == PT_GGUF_U64 || t == PT_GGUF_I64;
}

static bool is_signed(enum pt_gguf_vtype t)
{
	return t == PT_GGUF_I8 || t == PT_GGUF_I16 || t == PT_GGUF_I32 || t == PT_GGUF_I64;
}

/* An integer payload widened: *neg set when a signed value is negative, *mag its value as
 * two's complement int64 when negative, unsigned magnitude otherwise. */
static void read_int(enum pt_gguf_vtype t, const uint8_t *p, bool *neg, uint64_t *v)
{
	unsigned n = (unsigned)pt_gguf_scalar_size(t);
	uint64_t raw = le(p, n);
	*neg = false;
	if (is_signed(t) && n < 8 && (raw >> (8 * n - 1)) & 1)
		raw |= ~0ull << (8 * n);
	if (is_signed(t) && (int64_t)raw < 0)
		*neg = true;
	*v = raw;
}

static enum pt_status wrong_type(const struct pt_gguf_kv *kv, const char *want,
				 struct pt_error *err)
{
	return pt_error_at(err, PT_E_FORMAT, kv->value_offset, "key '%.*s' has type %s, expected %s",
			   kv->key.len > 200 ? 200 : (int)kv->key.len, kv->key.ptr,
			   pt_gguf_vtype_name(kv->type), want);
}

static enum pt_status out_of_range(const struct pt_gguf_kv *kv, const char *want,
				   struct pt_error *err)
{
	return pt_error_at(err, PT_E_FORMAT, kv->value_offset, "key '%.*s' value does not fit %s",
			   kv->key.len > 200 ? 200 : (int)kv->key.len, kv->key.ptr, want);
}

/* Finds key as an integer within [lo, hi] (signed view when lo < 0). */
static enum pt_status get_int(const pt_gguf *g, const char *key, const char *want, int64_t lo,
			      uint64_t hi, uint64_t *out, bool *present, struct pt_error *err)
{
	const struct pt_gguf_kv *kv = pt_gguf_find_kv(g, key);
	bool neg;
	uint64_t v;
	*present = kv != NULL;
	if (!kv)
		return PT_OK;
	if (!is_int(kv->type))
		return wrong_type(kv, want, err);
	read_int(kv->type, kv->value, &neg, &v);
	if (neg ? (int64_t)v < lo : v > hi)
		return out_of_range(kv, want, err);
	*out = v;
	return PT_OK;
}

static void set_found(bool *found, bool v)
{
	if (found)
		*found = v;
}

enum pt_status pt_gguf_get_u32(const pt_gguf *g, const char *key, uint32_t def, uint32_t *out,
			       bool *found, struct pt_error *err)
{
	uint64_t v = def;
	bool present;
	enum pt_status st = get_int(g, key, "u32", 0, UINT32_MAX, &v, &present, err);
	if (st != PT_OK)
		return st;
	*out = (uint32_t)v;
	set_found(found, present);
	return PT_OK;
}

enum pt_status pt_gguf_get_u64(const pt_gguf *g, const char *key, uint64_t def, uint64_t *out,
			       bool *found, struct pt_error *err)
{
	uint64_t v = def;
	bool present;
	enum pt_status st = get_int(g, key, "u64", 0, UINT64_MAX, &v, &present, err);
	if (st != PT_OK)
		return st;
	*out = v;
	set_found(found, present);
	return PT_OK;
}

enum pt_status pt_gguf_get_i32(const pt_gguf *g, const char *key, int32_t def, int32_t *out,
			       bool *found, struct pt_error *err)
{
	uint64_t v = (uint64_t)(int64_t)def;
	bool present;
	enum pt_status st = get_int(g, key, "i32", INT32_MIN, INT32_MAX, &v, &present, err);
	if (st != PT_OK)
		return st;
	*out = (int32_t)(int64_t)v;
	set_found(found, present);
	return PT_OK;
}

enum pt_status pt_gguf_get_f32(const pt_gguf *g, const char *key, float def, float *out,
			       bool *found, struct pt_error *err)
{
	const struct pt_gguf_kv *kv = pt_gguf_find_kv(g, key);
	set_found(found, kv != NULL);
	if (!kv) {
		*out = def;
		return PT_OK;
	}
	if (kv->type == PT_GGUF_F32) {
		uint32_t b = (uint32_t)le(kv->value, 4);
		memcpy(out, &b, 4);
	} else if (kv->type == PT_GGUF_F64) {
		uint64_t b = le(kv->value, 8);
		double d;
		memcpy(&d, &b, 8);
		*out = (float)d;
	} else {
		set_found(found, false);
		return wrong_type(kv, "f32", err);
	}
	return PT_OK;
}

enum pt_status pt_gguf_get_bool(const pt_gguf *g, const char *key, bool def, bool *out,
				bool *found, struct pt_error *err)
{
	const struct pt_gguf_kv *kv = pt_gguf_find_kv(g, key);
	set_found(found, kv != NULL);
	if (!kv) {
		*out = def;
		return PT_OK;
	}
	if (kv->type != PT_GGUF_BOOL) {
		set_found(found, false);
		return wrong_type(kv, "bool", err);
	}
	*out = kv->value[0] != 0;
	return PT_OK;
}

enum pt_status pt_gguf_get_str(const pt_gguf *g, const char *key, struct pt_str *out,
			       bool *found, struct pt_error *err)
{
	const struct pt_gguf_kv *kv = pt_gguf_find_kv(g, key);
	out->ptr = NULL;
	out->len = 0;
	set_found(found, kv != NULL);
	if (!kv)
		return PT_OK;
	if (kv->type != PT_GGUF_STRING) {
		set_found(found, false);
		return wrong_type(kv, "string", err);
	}
	out->len = le(kv->value, 8);
	out->ptr = (const char *)kv->value + 8;
	return PT_OK;
}

enum pt_status pt_gguf_get_arr(const pt_gguf *g, const char *key, enum pt_gguf_vtype elem,
			       const struct pt_gguf_kv **out, bool *found, struct pt_error *err)
{
	const struct pt_gguf_kv *kv = pt_gguf_find_kv(g, key);
	*out = NULL;
	set_found(found, kv != NULL);
	if (!kv)
		return PT_OK;
	if (kv->type != PT_GGUF_ARRAY || kv->arr_type != elem) {
		set_found(found, false);
		return pt_error_at(err, PT_E_FORMAT, kv->value_offset,
				   "key '%.*s' has type %s%s, expected array of %s",
				   kv->key.len > 200 ? 200 : (int)kv->key.len, kv->key.ptr,
				   kv->type == PT_GGUF_ARRAY ? "array of " : "",
				   pt_gguf_vtype_name(kv->type == PT_GGUF_ARRAY ? kv->arr_type
										 : kv->type),
				   pt_gguf_vtype_name(elem));
	}
	*out = kv;
	return PT_OK;
}

/* A numeric payload of type t as double (exact for every 32-bit type). */
static double num_at(enum pt_gguf_vtype t, const uint8_t *p)
{
	if (t == PT_GGUF_F32) {
		uint32_t b = (uint32_t)le(p, 4);
		float f;
		memcpy(&f, &b, 4);
		return f;
	}
	if (t == PT_GGUF_F64) {
		uint64_t b = le(p, 8);
		double d;
		memcpy(&d, &b, 8);
		return d;
	}
	if (t == PT_GGUF_BOOL)
		return p[0] ? 1.0 : 0.0;
	{
		bool neg;
		uint64_t v;
		read_int(t, p, &neg, &v);
		return neg ? (double)(int64_t)v : (double)v;
	}
}

static double arr_num(const struct pt_gguf_kv *kv, uint64_t i)
{
	return num_at(kv->arr_type, kv->value + i * pt_gguf_scalar_size(kv->arr_type));
}

double pt_gguf_arr_num(const struct pt_gguf_kv *kv, uint64_t i)
{
	return arr_num(kv, i);
}

double pt_gguf_kv_num(const struct pt_gguf_kv *kv)
{
	return num_at(kv->type, kv->value);
}

bool pt_gguf_kv_int(const struct pt_gguf_kv *kv, int64_t *out)
{
	bool neg;
	uint64_t v;
	if (!is_int(kv->type))
		return false;
	read_int(kv->type, kv->value, &neg, &v);
	if (!neg && v > (uint64_t)INT64_MAX)
		return false;
	*out = (int64_t)v;
	return true;
}

uint32_t pt_gguf_arr_u32(const struct pt_gguf_kv *kv, uint64_t i)
{
	if (is_int(kv->arr_type) || kv->arr_type == PT_GGUF_BOOL) {
		bool neg;
		uint64_t v;
		enum pt_gguf_vtype t = kv->arr_type == PT_GGUF_BOOL ? PT_GGUF_U8 : kv->arr_type;
		read_int(t, kv->value + i * pt_gguf_scalar_size(t), &neg, &v);
		return (uint32_t)v;
	}
	{
		double d = arr_num(kv, i);
		if (!(d > 0)) /* also NaN */
			return 0;
		return d >= 4294967295.0 ? UINT32_MAX : (uint32_t)d;
	}
}

int32_t pt_gguf_arr_i32(const struct pt_gguf_kv *kv, uint64_t i)
{
	if (is_int(kv->arr_type) || kv->arr_type == PT_GGUF_BOOL) {
		bool neg;
		uint64_t v;
		enum pt_gguf_vtype t = kv->arr_type == PT_GGUF_BOOL ? PT_GGUF_U8 : kv->arr_type;
		read_int(t, kv->value + i * pt_gguf_scalar_size(t), &neg, &v);
		return (int32_t)(uint32_t)v;
	}
	{
		double d = arr_num(kv, i);
		if (d != d)
			return 0;
		return d <= -2147483648.0 ? INT32_MIN : d >= 2147483647.0 ? INT32_MAX : (int32_t)d;
	}
}

float pt_gguf_arr_f32(const struct pt_gguf_kv *kv, uint64_t i)
{
	if (kv->arr_type == PT_GGUF_BOOL)
		return kv->value[i] ? 1.0f : 0.0f;
	return (float)arr_num(kv, i);
}

void pt_gguf_arr_strs(const struct pt_gguf_kv *kv, struct pt_str *out)
{
	const uint8_t *p = kv->value;
	for (uint64_t i = 0; i < kv->arr_count; i++) {
		out[i].len = le(p, 8);
		out[i].ptr = (const char *)p + 8;
		p += 8 + out[i].len;
	}
}
