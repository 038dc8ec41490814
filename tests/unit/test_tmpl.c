/* test_tmpl.c - the Jinja2 chat-template engine, feature by feature.  Expected strings were
 * produced by Python jinja2 3.1.6 configured as Hugging Face transformers does (the same
 * setup as tests/oracle/jinja_render.py) with the variables in VARS. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "token/tmpl.h"
#include "util/alloc.h"
#include "util/limits.h"

struct case_ok {
	const char *tmpl, *want;
};

static const char VARS[] =
	"{\"s\": \"Hello World\", \"n\": 7, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 2, \"a\": 1, "
	"\"C\": 3}, \"msgs\": [{\"role\": \"user\", \"content\": \"hi\", \"tool\": true}, {\"role\": "
	"\"assistant\", \"content\": \"yo\"}, {\"role\": \"user\", \"content\": \"bye\"}], \"u8\": "
	"\"\340\244\250\340\244\256\340\244\270\340\245\215\340\244\244\340\245\207 \360\237\214\215 "
	"\344\275\240\345\245\275\", \"e\": \"\", \"z\": null, \"t\": true}";

static const struct case_ok CASES[] = {
	{ "{{ '%s-%d' % ('a', 3) }}|{{ '%05.2f|%-6s|%6s|%x|%+d' % (3.14159, 'ab', '\303\251', 255, 5) }}|{{ '%(a)s=%(b)r' % {'a': 1, 'b': 'x'} }}|{{ '100%%' % () }}|{{ 'x' % {} }}",
	  "a-3|03.14|ab    |     \303\251|ff|+5|1='x'|100%|x" },
	{ "{% if true|reject('odd') %}Y{% endif %}|{{ not nothing|items }}|{% if []|select %}gen-true{% endif %}|{{ l|select('odd')|list }}|{{ msgs|selectattr('tool')|list|length }}|{{ l|map('string')|join('-') }}|{{ {'a': 1}.items() }}|{{ {'a': 1}.keys()|list }}|{{ l|unique|list }}|{{ 3 in l|select }}|{{ (l|reject)[0] }}",
	  "Y|False|gen-true|[3, 1]|1|3-1-2|dict_items([('a', 1)])|['a']|[3, 1, 2]|True|" },
	{ "{% set w = 'd\303\251j\303\240 \303\277 \303\237 \305\211 \304\260 \317\203\316\261\317\202 \316\243\316\221\316\243 \316\206\316\210 \320\226\321\221\320\273\321\202\321\213\320\271 x-ray (ok) 1st \340\244\250\340\244\256\340\244\270\340\245\215\340\244\244\340\245\207' %}{{ w.upper() }}|{{ w.lower() }}|{{ w.title() }}|{{ w|title }}|{{ w|capitalize }}|{{ '\316\243\316\221\316\243'.islower() }}{{ '\303\200\303\211'.isupper() }}",
	  "D\303\211J\303\200 \305\270 SS \312\274N \304\260 \316\243\316\221\316\243 \316\243\316\221\316\243 \316\206\316\210 \320\226\320\201\320\233\320\242\320\253\320\231 X-RAY (OK) 1ST \340\244\250\340\244\256\340\244\270\340\245\215\340\244\244\340\245\207|d\303\251j\303\240 \303\277 \303\237 \305\211 i\314\207 \317\203\316\261\317\202 \317\203\316\261\317\202 \316\254\316\255 \320\266\321\221\320\273\321\202\321\213\320\271 x-ray (ok) 1st \340\244\250\340\244\256\340\244\270\340\245\215\340\244\244\340\245\207|D\303\251j\303\240 \305\270 Ss \312\274N \304\260 \316\243\316\261\317\202 \316\243\316\261\317\202 \316\206\316\255 \320\226\321\221\320\273\321\202\321\213\320\271 X-Ray (Ok) 1St \340\244\250\340\244\256\340\244\270\340\245\215\340\244\244\340\245\207|D\303\251j\303\240 \305\270 SS \312\274N \304\260 \316\243\316\261\317\202 \316\243\316\261\317\202 \316\206\316\255 \320\226\321\221\320\273\321\202\321\213\320\271 X-Ray (Ok) 1st \340\244\250\340\244\256\340\244\270\340\245\215\340\244\244\340\245\207|D\303\251j\303\240 \303\277 \303\237 \305\211 i\314\207 \317\203\316\261\317\202 \317\203\316\261\317\202 \316\254\316\255 \320\266\321\221\320\273\321\202\321\213\320\271 x-ray (ok) 1st \340\244\250\340\244\256\340\244\270\340\245\215\340\244\244\340\245\207|FalseTrue" },
	{ "{% set ns = namespace() %}{% set ns.x = ns %}{% set ns.l = [ns, [ns]] %}{{ ns }}",
	  "<Namespace {'x': <Namespace {...}>, 'l': [<Namespace {...}>, [<Namespace {...}>]]}>" },
	{ "{{ 1 }}|{{ 1.0 }}|{{ -0.5 }}|{{ 1e3 }}|{{ 12345678901234567 }}|{{ 0.1 + 0.2 }}|{{ 1e16 }}|{{ 1e-5 }}",
	  "1|1.0|-0.5|1000.0|12345678901234567|0.30000000000000004|1e+16|1e-05" },
	{ "{{ true }}{{ True }}{{ none }}{{ None }}{{ false }}",
	  "TrueTrueNoneNoneFalse" },
	{ "{{ 'a' 'b' \"c\" }}|{{ 'x\\ty\\n' }}|{{ '\\u00e9\\x41\\101' }}",
	  "abc|x\ty\n|\303\251AA" },
	{ "{{ [1, 'a', none, true, 2.0] }}|{{ (1,) }}|{{ (1, 2) }}|{{ {'k': 'v', 'n': [1]} }}|{{ [] }}|{{ {} }}",
	  "[1, 'a', None, True, 2.0]|(1,)|(1, 2)|{'k': 'v', 'n': [1]}|[]|{}" },
	{ "{{ \"it's\" }}|{{ [\"it's\", 'say \"x\"'] }}",
	  "it's|[\"it's\", 'say \"x\"']" },
	{ "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
	  "3 -4 1 2 3.5 1024 0.5 3.0 0.5" },
	{ "{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ -n }} {{ +n }} {{ n * 1.5 }} {{ true + 1 }}",
	  "3 9 -7 7 10.5 2" },
	{ "{{ 'ab' ~ 1 ~ none ~ undefined_var ~ [1] }}|{{ 'ab' + 'cd' }}|{{ 'ab' * 3 }}|{{ [1] + [2] }}|{{ [0] * 3 }}",
	  "ab1None[1]|abcd|ababab|[1, 2]|[0, 0, 0]" },
	{ "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ [1,2] == [1,2] }} {{ 'a' != 'b' }} {{ 2 >= 2 }}",
	  "True False True True True True True" },
	{ "{{ 'ell' in s }} {{ 3 in l }} {{ 'a' in d }} {{ 'zz' not in d }} {{ 4 not in l }} {{ 'x' in nothing }}",
	  "True True True True True False" },
	{ "{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ '' and 'z' }}|{{ not 0 }}|{{ not l }}|{{ none or [] }}",
	  "x|y||True|False|[]" },
	{ "{{ 'yes' if t else 'no' }}|{{ 'yes' if z else 'no' }}|{{ 'a' if false }}|{{ 1 if 0 else 2 if 0 else 3 }}",
	  "yes|no||3" },
	{ "{{ s[0] }}{{ s[-1] }}|{{ l[1] }}|{{ d.a }}{{ d['b'] }}|{{ msgs[0].role }}|{{ l[10] }}|{{ d.missing }}|{{ msgs[-1]['content'] }}",
	  "Hd|1|12|user|||bye" },
	{ "{{ l[::-1] }}|{{ s[::-1] }}|{{ s[1:3] }}|{{ l[1:] }}|{{ l[:-1] }}|{{ s[::2] }}|{{ l[5:] }}|{{ u8[::-1] }}|{{ u8[2:5] }}|{{ l[-1:0:-1] }}",
	  "[2, 1, 3]|dlroW olleH|el|[1, 2]|[3, 1]|HloWrd|[]|\345\245\275\344\275\240 \360\237\214\215 \340\245\207\340\244\244\340\245\215\340\244\270\340\244\256\340\244\250|\340\244\270\340\245\215\340\244\244|[2, 1]" },
	{ "{{ u8|length }} {{ u8[0] }} {{ s|length }} {{ d|length }} {{ l|count }}",
	  "11 \340\244\250 11 3 3" },
	{ "{% if n > 5 %}big{% elif n > 2 %}mid{% else %}small{% endif %}|{% if false %}x{% elif true %}y{% endif %}",
	  "big|y" },
	{ "{% for x in l %}{{ loop.index }}:{{ x }}{{ ',' if not loop.last }}{% endfor %}|{% for x in [] %}a{% else %}empty{% endfor %}",
	  "1:3,2:1,3:2|empty" },
	{ "{% for x in l %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.length }} {% endfor %}",
	  "032True3 121False3 210False3 " },
	{ "{% for x in l %}{{ loop.previtem }}-{{ loop.nextitem }} {% endfor %}",
	  "-1 3-2 1- " },
	{ "{% for x in l if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
	  "3222|b=2;a=1;C=3;" },
	{ "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}",
	  "0134" },
	{ "{% for x in range(2) %}{% for y in range(2) %}{{ x }}{{ y }}{{ loop.index }} {% endfor %}{% endfor %}|{{ range(3)|list }}|{{ range(1, 10, 3)|list }}|{{ range(5, 0, -2)|list }}",
	  "001 012 101 112 |[0, 1, 2]|[1, 4, 7]|[5, 3, 1]" },
	{ "{% for c in 'ab' %}{{ c }}.{% endfor %}|{% for k in d %}{{ k }}{% endfor %}",
	  "a.b.|baC" },
	{ "{% set x = 1 %}{% set y, z = 2, 3 %}{{ x }}{{ y }}{{ z }}|{% set b %}block {{ n }}{% endset %}{{ b }}|{% set up | upper %}shout{% endset %}{{ up }}",
	  "123|block 7|SHOUT" },
	{ "{% set x = 0 %}{% for i in l %}{% set x = x + i %}{% endfor %}{{ x }}|{% set ns = namespace(total=0, seen=[]) %}{% for i in l %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}",
	  "0|6" },
	{ "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', '?') }} {{ greet(punct='.', name='Cy') }}",
	  "Hi Bob! Hi Al? Hi Cy." },
	{ "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}",
	  "120" },
	{ "{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}inside {{ n }}{% endcall %}",
	  "[inside 7]" },
	{ "{% macro args() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ args(1, 2, k=3) }}",
	  "(1, 2){'k': 3}" },
	{ "{% filter upper %}loud {{ s }}{% endfilter %}",
	  "LOUD HELLO WORLD" },
	{ "{% raw %}{{ not rendered }}{% endraw %}",
	  "{{ not rendered }}" },
	{ "{# comment #}a{# multi\nline #}b",
	  "ab" },
	{ "<ul>\n  {% for x in l %}\n  <li>{{ x }}</li>\n  {% endfor %}\n</ul>\n",
	  "<ul>\n  <li>3</li>\n  <li>1</li>\n  <li>2</li>\n</ul>" },
	{ "a  {%- if true -%}  b  {%- endif -%}  c\n{{- ' d ' -}}\n e",
	  "abc d e" },
	{ "x\n    {%+ if true %}y{% endif +%}\nz",
	  "x\n    y\nz" },
	{ "line1\n{% if true %}\n  indented\n{% endif %}\nline3",
	  "line1\n  indented\nline3" },
	{ "  {{ n }}  \n  {% set q = 1 %}\nend",
	  "  7  \nend" },
	{ "{{ s|upper }} {{ s|lower }} {{ 'hello wORLD-x'|title }} {{ 'hELLO'|capitalize }} {{ '  pad  '|trim }}|{{ 'xxpadxx'|trim('x') }}",
	  "HELLO WORLD hello world Hello World-X Hello pad|pad" },
	{ "{{ missing|default('dflt') }} {{ z|default('dflt') }} {{ ''|default('dflt', true) }} {{ missing|d('d2') }} {{ n|default(0) }}",
	  "dflt None dflt d2 7" },
	{ "{{ l|join(', ') }} {{ l|first }} {{ l|last }} {{ l|sort }} {{ l|sort(reverse=true) }} {{ l|reverse|list }} {{ l|sum }} {{ l|min }} {{ l|max }}",
	  "3, 1, 2 3 2 [1, 2, 3] [3, 2, 1] [2, 1, 3] 6 1 3" },
	{ "{{ msgs|map(attribute='role')|list }} {{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|join('+') }} {{ msgs|rejectattr('tool')|list|length }}",
	  "['user', 'assistant', 'user'] hi+bye 2" },
	{ "{{ msgs|selectattr('tool')|list|length }} {{ [1, 0, 2, none]|select|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ ['a','b']|map('upper')|list }}",
	  "1 [1, 2] [2, 4] ['A', 'B']" },
	{ "{{ d|dictsort }} {{ d|dictsort(by='value', reverse=true) }} {{ d|items|list }} {{ d.keys()|list }} {{ d.values()|list }}",
	  "[('a', 1), ('b', 2), ('C', 3)] [('C', 3), ('b', 2), ('a', 1)] [('b', 2), ('a', 1), ('C', 3)] ['b', 'a', 'C'] [2, 1, 3]" },
	{ "{{ ['b', 'A', 'a', 'B']|unique|list }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }}",
	  "['b', 'A'] ['A', 'b', 'c'] ['A', 'b', 'c']" },
	{ "{{ n|string }}{{ '42'|int + 1 }} {{ '4.7'|int }} {{ 'x'|int }} {{ '3.5'|float }} {{ 2.7|int }} {{ -3|abs }} {{ 2.5|round }} {{ 3.14159|round(2) }} {{ 2.5|round(method='floor') }}",
	  "743 4 0 3.5 2 3 2.0 3.14 2.0" },
	{ "{{ 'a b a'|replace('a', 'X') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ s|wordcount }} {{ '<&>'|e }} {{ 'x'|safe }}",
	  "X b X bba 2 &lt;&amp;&gt; x" },
	{ "{{ 'l1\\nl2\\n\\nl4'|indent }}|{{ 'l1\\nl2'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(1, blank=true) }}",
	  "l1\n    l2\n\n    l4|  l1\n  l2|a\n \n b" },
	{ "{{ d|tojson }}|{{ l|tojson(indent=2) }}|{{ {'u': u8, 'q': 'a\"b\\\\c\\n\\t\\u0001'}|tojson }}|{{ msgs[0]|tojson(separators=(',', ':')) }}|{{ {'b': 1, 'a': [true, none, 1.5]}|tojson(sort_keys=true) }}",
	  "{\"b\": 2, \"a\": 1, \"C\": 3}|[\n  3,\n  1,\n  2\n]|{\"u\": \"\340\244\250\340\244\256\340\244\270\340\245\215\340\244\244\340\245\207 \360\237\214\215 \344\275\240\345\245\275\", \"q\": \"a\\\"b\\\\c\\n\\t\\u0001\"}|{\"role\":\"user\",\"content\":\"hi\",\"tool\":true}|{\"a\": [true, null, 1.5], \"b\": 1}" },
	{ "{{ {'x': {}, 'y': []}|tojson(indent=2) }}|{{ '\303\251'|tojson }}|{{ 1.0|tojson }}|{{ 10000000000000000.0|tojson }}",
	  "{\n  \"x\": {},\n  \"y\": []\n}|\"\303\251\"|1.0|1e+16" },
	{ "{{ n is defined }}{{ nope is defined }}{{ nope is undefined }}{{ z is none }}{{ s is string }}{{ n is number }}{{ f is float }}{{ n is integer }}{{ t is boolean }}",
	  "TrueFalseTrueTrueTrueTrueTrueTrueTrue" },
	{ "{{ d is mapping }}{{ l is mapping }}{{ l is sequence }}{{ s is iterable }}{{ n is iterable }}{{ t is true }}{{ t is false }}{{ 0 is false }}",
	  "TrueFalseTrueTrueFalseTrueFalseFalse" },
	{ "{{ n is odd }}{{ n is even }}{{ 9 is divisibleby 3 }}{{ 'a' is equalto 'a' }}{{ 2 is eq(2) }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 3 is gt 2 }}{{ 3 is lessthan 2 }}{{ 2 is in [1,2] }}{{ n is not none }}",
	  "TrueFalseTrueTrueTrueTrueTrueTrueFalseTrueTrue" },
	{ "{{ '  x y  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '\\n\\nhi\\n'.lstrip('\\n') }}|{{ 'hi!!'.rstrip('!') }}|{{ '\\u3000wide\\u00a0'.strip() }}",
	  "x y|hi|hi\n|hi|wide" },
	{ "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a-b-c'.rsplit('-', 1) }} {{ 'x</think>y'.split('</think>')[-1] }}",
	  "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a-b', 'c'] y" },
	{ "{{ s.startswith('Hel') }}{{ s.endswith('xx') }}{{ s.startswith(('x', 'H')) }} {{ s.upper() }} {{ s.lower() }} {{ s.replace('l', 'L') }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }}",
	  "TrueFalseTrue HELLO WORLD hello world HeLLo WorLd Hello World Hello" },
	{ "{{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('zz') }} {{ s.count('l') }} {{ '-'.join(['a', 'b']) }} {{ u8.find('\360\237\214\215') }}",
	  "4 7 -1 3 a-b 7" },
	{ "{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ d.items()|list }} {{ l.index(1) }} {{ l.count(3) }}",
	  "1 None dflt [('b', 2), ('a', 1), ('C', 3)] 1 1" },
	{ "{{ messages }}{{ nothing }}|{{ nothing|length }}|{{ nothing|list }}|{{ nothing|join }}|{% for x in nothing %}x{% endfor %}|{{ nothing|items|list }}",
	  "|0|[]|||[]" },
	{ "{% if false %}{{ x|nosuchfilter }}{% endif %}ok",
	  "ok" },
	{ "{{ 'a' if true else x|nosuch }}",
	  "a" },
};
static const char *const ERRORS[] = {
	"{{ '%s %s' % (1,) }}",
	"{{ 'a' % 1 }}",
	"{{ '%d' % 'x' }}",
	"{{ true|select|list }}",
	"{{ l|select|length }}",
	"{{ (l|reverse)|last }}",
	"{{ [[1]]|unique|list }}",
	"{{ 1 $ 2 }}",
	"{% if %}x{% endif %}",
	"{% for in l %}{% endfor %}",
	"{{ 'a' ~ }}",
	"{% set %}",
	"{{ nothing.attr }}",
	"{{ nothing + 1 }}",
	"{{ 1 + 'a' }}",
	"{{ 1 / 0 }}",
	"{{ raise_exception('bad thing') }}",
	"{% if true %}unclosed",
	"{% for x in l %}",
	"{{ 1 +  }}",
	"{% endfor %}",
	"{% foo %}",
	"{{ x|nosuchfilter }}",
	"{{ l.append(1) }}",
	"{{ d.pop('a') }}",
	"{{ 'a' < 1 }}",
	"{% break %}",
	"{{ (1 }}",
	"{{ 'abc }}",
	"{# never closed",
	"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}",
	"{% macro m(a) %}{% endmacro %}{{ m(b=2) }}",
	"{{ x is nosuchtest }}",
	"{% set a, b = [1] %}",
	"{{ n() }}",
	"{{ 5|length }}",
	"{{ 1 // 0 }}",
	"{{ l[::0] }}",
};

/* Renders src with VARS (or vars_json) and the given limits; returns the status. */
static enum pt_status run(const char *src, const char *vars_json, const struct pt_tmpl_limits *lim,
			  char **out, struct pt_error *err)
{
	pt_tmpl *t = NULL;
	size_t len = 0;
	*out = NULL;
	enum pt_status st = pt_tmpl_parse(src, strlen(src), &t, err);
	if (st != PT_OK)
		return st;
	cJSON *vars = cJSON_Parse(vars_json ? vars_json : VARS);
	st = pt_tmpl_render(t, vars, lim, 0, out, &len, err);
	cJSON_Delete(vars);
	pt_tmpl_destroy(t);
	return st;
}

PT_TEST(test_tmpl_features_match_jinja2)
{
	for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
		struct pt_error err = { 0 };
		char *out = NULL;
		enum pt_status st = run(CASES[i].tmpl, NULL, NULL, &out, &err);
		if (st != PT_OK) {
			pt_test_fail(__FILE__, __LINE__, "case %zu (%s): %s", i, CASES[i].tmpl, err.msg);
			continue;
		}
		if (strcmp(out, CASES[i].want) != 0)
			pt_test_fail(__FILE__, __LINE__, "case %zu (%s):\n got  \"%s\"\n want \"%s\"", i,
				     CASES[i].tmpl, out, CASES[i].want);
		pt_free(out);
	}
}

PT_TEST(test_tmpl_errors_where_jinja2_errors)
{
	for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++) {
		struct pt_error err = { 0 };
		char *out = NULL;
		enum pt_status st = run(ERRORS[i], NULL, NULL, &out, &err);
		if (st == PT_OK) {
			pt_test_fail(__FILE__, __LINE__, "error case %zu (%s) rendered \"%s\"", i, ERRORS[i], out);
			pt_free(out);
			continue;
		}
		CHECK(out == NULL);
		CHECK(err.code == st);
		CHECK_CONTAINS(err.msg, "template: ");
		if (!strstr(err.msg, "line "))
			pt_test_fail(__FILE__, __LINE__, "error case %zu (%s) has no position: %s", i,
				     ERRORS[i], err.msg);
	}
}

PT_TEST(test_tmpl_error_positions)
{
	struct pt_error err = { 0 };
	char *out = NULL;
	CHECK(run("ok\n{% if true %}\n  {{ 1 + }}\n{% endif %}", NULL, NULL, &out, &err) == PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "line 3, column 10");
	pt_error_clear(&err);
	CHECK(run("a\n\n{% for x in l %}{% endif %}", NULL, NULL, &out, &err) == PT_E_UNSUPPORTED);
	CHECK_CONTAINS(err.msg, "unknown tag 'endif' at line 3, column 20");
	pt_error_clear(&err);
	CHECK(run("{{ 'x' }}\n{{ y|nosuch }}", NULL, NULL, &out, &err) == PT_E_UNSUPPORTED);
	CHECK_CONTAINS(err.msg, "no filter named 'nosuch' at line 2, column 6");
	pt_error_clear(&err);
	CHECK(run("\n  {{ raise_exception('Roles must alternate') }}", NULL, NULL, &out, &err) == PT_E_INVALID);
	CHECK_CONTAINS(err.msg, "raise_exception: Roles must alternate at line 2, column 6");
	pt_error_clear(&err);
	CHECK(run("{% if true %}never closed", NULL, NULL, &out, &err) == PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "expected 'endif'");
	pt_error_clear(&err);
	CHECK(run("{{ missing.attr }}", NULL, NULL, &out, &err) == PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "'missing' is undefined at line 1, column");
	pt_error_clear(&err);
	CHECK(run("{{ d.zz + 1 }}", NULL, NULL, &out, &err) == PT_E_FORMAT);
	CHECK_CONTAINS(err.msg, "'dict object' has no attribute 'zz'");
}

/* jinja2 prints a generator as its memory address; particle refuses instead. */
PT_TEST(test_tmpl_printing_generator_is_refused)
{
	struct pt_error err = { 0 };
	char *out = NULL;
	CHECK(run("{{ l|map('upper') }}", NULL, NULL, &out, &err) == PT_E_UNSUPPORTED);
	CHECK_CONTAINS(err.msg, "cannot print a generator");
	pt_error_clear(&err);
	CHECK(run("{{ l|map('upper')|list }}", NULL, NULL, &out, &err) == PT_OK);
	CHECK_EQ_STR(out, "['3', '1', '2']");
	pt_free(out);
}

/* Unknown filters inside if-blocks fail only when reached (jinja2 "soft" frames). */
PT_TEST(test_tmpl_unknown_filter_soft_in_if)
{
	struct pt_error err = { 0 };
	char *out = NULL;
	CHECK(run("{% if true %}{{ 1|nosuch }}{% endif %}", NULL, NULL, &out, &err) == PT_E_UNSUPPORTED);
	CHECK_CONTAINS(err.msg, "no filter named 'nosuch'");
	pt_error_clear(&err);
	CHECK(run("{% for x in l %}{% if false %}{{ x|nosuch }}{% endif %}{% endfor %}", NULL, NULL,
		  &out, &err) == PT_OK);
	pt_free(out);
	pt_error_clear(&err);
	CHECK(run("{% if false %}{% for x in l %}{{ x|nosuch }}{% endfor %}{% endif %}", NULL, NULL,
		  &out, &err) == PT_E_UNSUPPORTED); /* a loop body is a new, non-soft frame */
}

static char *repeat_str(const char *a, int n, const char *mid, const char *b)
{
	size_t la = strlen(a), lm = strlen(mid), lb = strlen(b);
	char *s = pt_malloc(la * (size_t)n + lm + lb * (size_t)n + 1), *p = s;
	for (int i = 0; i < n; i++, p += la)
		memcpy(p, a, la);
	memcpy(p, mid, lm);
	p += lm;
	for (int i = 0; i < n; i++, p += lb)
		memcpy(p, b, lb);
	*p = 0;
	return s;
}

PT_TEST(test_tmpl_limit_block_depth)
{
	/* The root body is level 1, so PT_TMPL_MAX_DEPTH - 1 nested blocks fit. */
	struct pt_error err = { 0 };
	char *out = NULL;
	char *ok = repeat_str("{% if true %}", PT_TMPL_MAX_DEPTH - 1, "x", "{% endif %}");
	char *bad = repeat_str("{% if true %}", PT_TMPL_MAX_DEPTH, "x", "{% endif %}");
	CHECK(run(ok, NULL, NULL, &out, &err) == PT_OK);
	CHECK_EQ_STR(out, "x");
	pt_free(out);
	CHECK(run(bad, NULL, NULL, &out, &err) == PT_E_LIMIT);
	CHECK_CONTAINS(err.msg, "nested deeper than");
	pt_free(ok);
	pt_free(bad);
	/* expressions too: parentheses, unary minus and filter chains nest */
	pt_error_clear(&err);
	char *parens = repeat_str("(", 5000, "1", ")");
	char *src = repeat_str("{{ ", 1, parens, " }}");
	CHECK(run(src, NULL, NULL, &out, &err) == PT_E_LIMIT);
	pt_free(parens);
	pt_free(src);
	pt_error_clear(&err);
	char *chain = repeat_str("1 + ", 100000, "1", "");
	src = repeat_str("{{ ", 1, chain, " }}");
	CHECK(run(src, NULL, NULL, &out, &err) == PT_E_LIMIT);
	pt_free(chain);
	pt_free(src);
}

PT_TEST(test_tmpl_limit_macro_recursion)
{
	char src[256];
	struct pt_error err = { 0 };
	char *out = NULL;
	/* r(k) makes k + 1 nested calls */
	snprintf(src, sizeof src,
		 "{%% macro r(k) %%}{%% if k > 0 %%}{{ r(k - 1) }}{%% endif %%}.{%% endmacro %%}"
		 "{{ r(%d)|length }}", PT_TMPL_MAX_DEPTH - 1);
	CHECK(run(src, NULL, NULL, &out, &err) == PT_OK);
	CHECK_EQ_INT(atoi(out ? out : "0"), PT_TMPL_MAX_DEPTH);
	pt_free(out);
	snprintf(src, sizeof src,
		 "{%% macro r(k) %%}{%% if k > 0 %%}{{ r(k - 1) }}{%% endif %%}.{%% endmacro %%}"
		 "{{ r(%d) }}", PT_TMPL_MAX_DEPTH);
	CHECK(run(src, NULL, NULL, &out, &err) == PT_E_LIMIT);
	CHECK_CONTAINS(err.msg, "macro calls nested deeper than");
	pt_error_clear(&err);
	CHECK(run("{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}", NULL, NULL, &out, &err) == PT_E_LIMIT);
}

PT_TEST(test_tmpl_limit_iterations)
{
	char src[128];
	struct pt_error err = { 0 };
	char *out = NULL;
	snprintf(src, sizeof src, "{%% for i in range(%u) %%}{%% endfor %%}{{ 1 }}", PT_TMPL_MAX_ITERATIONS);
	CHECK(run(src, NULL, NULL, &out, &err) == PT_OK);
	pt_free(out);
	snprintf(src, sizeof src, "{%% for i in range(%u) %%}{%% endfor %%}", PT_TMPL_MAX_ITERATIONS + 1);
	CHECK(run(src, NULL, NULL, &out, &err) == PT_E_LIMIT);
	pt_error_clear(&err);
	/* nested loops count every iteration: 1000 * 100 inner + 1000 outer > the limit */
	CHECK(run("{% for i in range(1000) %}{% for j in range(100) %}{% endfor %}{% endfor %}", NULL,
		  NULL, &out, &err) == PT_E_LIMIT);
	CHECK_CONTAINS(err.msg, "loop iterations");
	struct pt_tmpl_limits lim = pt_tmpl_default_limits();
	lim.max_iterations = 10;
	pt_error_clear(&err);
	CHECK(run("{% for i in range(10) %}{{ i }}{% endfor %}", NULL, &lim, &out, &err) == PT_OK);
	CHECK_EQ_STR(out, "0123456789");
	pt_free(out);
	CHECK(run("{% for i in l %}{% for j in range(3) %}{% endfor %}{% endfor %}", NULL, &lim, &out,
		  &err) == PT_E_LIMIT); /* 3 + 9 */
}

PT_TEST(test_tmpl_limit_output_and_memory)
{
	struct pt_error err = { 0 };
	char *out = NULL;
	struct pt_tmpl_limits lim = pt_tmpl_default_limits();
	lim.max_output = 16;
	CHECK(run("{{ 'x' * 16 }}", "{}", &lim, &out, &err) == PT_OK);
	CHECK_EQ_STR(out, "xxxxxxxxxxxxxxxx");
	pt_free(out);
	CHECK(run("{{ 'x' * 17 }}", "{}", &lim, &out, &err) == PT_E_LIMIT);
	pt_error_clear(&err);
	CHECK(run("{% for i in range(17) %}x{% endfor %}", "{}", &lim, &out, &err) == PT_E_LIMIT);
	pt_error_clear(&err);
	/* quadratic string growth hits the memory bound, not the machine */
	lim = pt_tmpl_default_limits();
	lim.max_memory = 1 << 20;
	CHECK(run("{% set ns = namespace(s='') %}{% for i in range(5000) %}{% set ns.s = ns.s ~ "
		  "'0123456789' %}{% endfor %}", NULL, &lim, &out, &err) == PT_E_LIMIT);
	CHECK_CONTAINS(err.msg, "memory");
	pt_error_clear(&err);
	char big[64];
	snprintf(big, sizeof big, "{{ 'ab' * %u }}", PT_TMPL_MAX_OUTPUT / 2 + 1);
	CHECK(run(big, NULL, NULL, &out, &err) == PT_E_LIMIT);
}

PT_TEST(test_tmpl_source_limits)
{
	struct pt_error err = { 0 };
	pt_tmpl *t = NULL;
	size_t n = PT_TMPL_MAX_SOURCE + 1;
	char *src = pt_malloc(n);
	memset(src, 'a', n);
	CHECK(pt_tmpl_parse(src, n - 1, &t, &err) == PT_OK);
	pt_tmpl_destroy(t);
	CHECK(pt_tmpl_parse(src, n, &t, &err) == PT_E_LIMIT);
	CHECK(t == NULL);
	pt_free(src);
	pt_error_clear(&err);
	CHECK(pt_tmpl_parse("a\0b", 3, &t, &err) == PT_E_FORMAT);
}

PT_TEST(test_tmpl_newlines_normalized)
{
	struct pt_error err = { 0 };
	char *out = NULL;
	/* CRLF -> LF, one trailing newline dropped, trim_blocks after %} */
	CHECK(run("a\r\n{% if true %}\r\nb\rc{% endif %}\n\n", "{}", NULL, &out, &err) == PT_OK);
	CHECK_EQ_STR(out, "a\nb\nc");
	pt_free(out);
}

PT_TEST(test_tmpl_vars_from_json)
{
	struct pt_error err = { 0 };
	char *out = NULL;
	CHECK(run("{{ a }}|{{ b }}|{{ c }}|{{ d|tojson }}|{{ e is none }}|{{ x.y[1] }}",
		  "{\"a\": 1, \"b\": 1.5, \"c\": \"\xc3\xa9\", \"d\": {\"z\": 1, \"a\": [true]}, \"e\": null,"
		  " \"x\": {\"y\": [0, \"ok\"]}}", NULL, &out, &err) == PT_OK);
	CHECK_EQ_STR(out, "1|1.5|\xc3\xa9|{\"z\": 1, \"a\": [true]}|True|ok");
	pt_free(out);
	CHECK(run("x", "[1]", NULL, &out, &err) == PT_E_INVALID);
}

PT_TEST(test_tmpl_strftime_now_uses_given_time)
{
	pt_tmpl *t = NULL;
	struct pt_error err = { 0 };
	char *out = NULL;
	size_t len;
	const char *src = "{{ strftime_now('%Y') }}";
	REQUIRE(pt_tmpl_parse(src, strlen(src), &t, &err) == PT_OK);
	CHECK(pt_tmpl_render(t, NULL, NULL, 86400 * 400, &out, &len, &err) == PT_OK);
	CHECK_EQ_STR(out, "1971");
	pt_free(out);
	pt_tmpl_destroy(t);
}

PT_TEST(test_tmpl_strip_special)
{
	size_t s, n;
	const char *txt = "<bos>hello<eos>";
	pt_tmpl_strip_special(txt, strlen(txt), "<bos>", 1, "<eos>", 1, &s, &n);
	CHECK_EQ_INT(s, 5);
	CHECK_EQ_INT(n, 5);
	pt_tmpl_strip_special(txt, strlen(txt), "<bos>", 0, "<eos>", 0, &s, &n);
	CHECK_EQ_INT(s, 0);
	CHECK_EQ_INT(n, strlen(txt));
	pt_tmpl_strip_special("hi", 2, "<bos>", 1, "", 1, &s, &n);
	CHECK_EQ_INT(s, 0);
	CHECK_EQ_INT(n, 2);
}

/* Every allocation failure unwinds cleanly (ASan checks for leaks). */
PT_TEST(test_tmpl_alloc_failures)
{
	const char *src = "{% macro m(a, b=2) %}{{ a ~ b }}{% endmacro %}{% for x in l %}{{ m(x) }}"
			  "{{ msgs|map(attribute='role')|join(',') }}{% endfor %}";
	for (uint64_t k = 1; k < 400; k++) {
		struct pt_error err = { 0 };
		char *out = NULL;
		pt_alloc_fail_at(k);
		enum pt_status st = run(src, NULL, NULL, &out, &err);
		pt_alloc_fail_at(0);
		if (st == PT_OK) {
			CHECK_EQ_STR(out, "32user,assistant,user12user,assistant,user22user,assistant,user");
			pt_free(out);
			break;
		}
	}
}
