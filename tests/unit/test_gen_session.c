/* test_gen_session.c - the generation loop over a real engine (tiny synthetic model): stop
 * reasons, determinism, KV prefix reuse, stop strings, cancellation, dropping a reply. */
#include <string.h>

#include "gen/engine.h"
#include "gen/session.h"
#include "model/mkmodel.h"
#include "test.h"
#include "util/alloc.h"

struct sink {
	char buf[4096];
	size_t n;
};

static bool collect(void *ctx, const char *text, size_t len)
{
	struct sink *s = ctx;
	if (s->n + len < sizeof s->buf) {
		memcpy(s->buf + s->n, text, len);
		s->n += len;
		s->buf[s->n] = 0;
	}
	return true;
}

static pt_engine *tiny_engine(const char *name)
{
	const char *path = pt_test_tmpfile(name);
	struct pt_mkmodel_opts mo = { .arch = PT_ARCH_QWEN3MOE, .preset = "tiny",
				      .mix = PT_MIX_Q8_0, .seed = 3, .out_path = path,
				      .threads = 1 };
	struct pt_error err = { 0 };
	if (pt_mkmodel_write(&mo, &err) != PT_OK)
		return NULL;
	struct pt_engine_opts o = { .model_path = path, .threads = 2, .n_ctx = 64, .n_batch = 8,
				    .no_lock = true };
	pt_engine *e = NULL;
	return pt_engine_open(&o, &e, &err) == PT_OK ? e : NULL;
}

static pt_session *greedy(pt_engine *e, uint32_t max_new, const char *stop, struct sink *out,
			  volatile sig_atomic_t *cancel)
{
	struct pt_session_opts o = { .max_new = max_new, .emit = collect, .emit_ctx = out,
				     .cancel = cancel };
	pt_sampler_opts_default(&o.sampler);
	o.sampler.temperature = 0;
	o.stops = stop ? &stop : NULL;
	o.n_stops = stop ? 1 : 0;
	pt_session *s = NULL;
	struct pt_error err = { 0 };
	return pt_session_create(e, &o, &s, &err) == PT_OK ? s : NULL;
}

static const int32_t prompt[] = { 72, 101, 108, 108, 111, 32, 119, 111, 114 };
#define NP (sizeof prompt / sizeof prompt[0])

PT_TEST(test_gen_session_common_prefix)
{
	const int32_t a[] = { 1, 2, 3, 4 };
	const uint32_t b[] = { 1, 2, 9 };
	CHECK(pt_session_common_prefix(a, 4, b, 3) == 2);
	CHECK(pt_session_common_prefix(a, 2, b, 3) == 2);
	CHECK(pt_session_common_prefix(a, 4, b, 0) == 0);
	CHECK(strcmp(pt_stop_reason_name(PT_STOP_CANCELLED), "cancelled") == 0);
	CHECK(strcmp(pt_stop_reason_name(PT_STOP_MAX_NEW), "max-new") == 0);
}

PT_TEST(test_gen_session_reuse_and_determinism)
{
	pt_engine *e = tiny_engine("sess_det.gguf");
	CHECK(e != NULL);
	if (!e)
		return;
	struct sink out1 = { .n = 0 }, out2 = { .n = 0 };
	pt_session *s = greedy(e, 8, NULL, &out1, NULL);
	CHECK(s != NULL);
	struct pt_gen_stats st;
	struct pt_error err = { 0 };
	CHECK(pt_session_generate(s, prompt, NP, &st, &err) == PT_OK);
	CHECK(st.stop == PT_STOP_MAX_NEW && st.gen_tokens == 8 && st.reused_tokens == 0);
	CHECK(st.prompt_tokens == NP && st.prefill_tokens == NP && st.reply_pos == (int64_t)NP);
	int32_t ids[8];
	memcpy(ids, pt_session_ids(s), sizeof ids);
	size_t len;
	CHECK(strcmp(pt_session_text(s, &len), out1.buf) == 0 && len == out1.n);
	/* the engine holds prompt + 7 evaluated replies; the same prompt reuses all but its last
	 * id (whose logits start the reply) and gives the same reply */
	CHECK(pt_engine_pos(e) == (int64_t)NP + 7);
	pt_session_destroy(s);
	s = greedy(e, 8, NULL, &out2, NULL);
	CHECK(pt_session_generate(s, prompt, NP, &st, &err) == PT_OK);
	CHECK(st.reused_tokens == NP - 1 && st.prefill_tokens == 1);
	CHECK(memcmp(ids, pt_session_ids(s), sizeof ids) == 0);
	CHECK(out1.n == out2.n && memcmp(out1.buf, out2.buf, out1.n) == 0);
	/* the prompt extended by the reply reuses every row the engine has */
	int32_t longer[NP + 8];
	memcpy(longer, prompt, sizeof prompt);
	memcpy(longer + NP, ids, sizeof ids);
	CHECK(pt_session_generate(s, longer, NP + 8, &st, &err) == PT_OK);
	CHECK(st.reused_tokens == NP + 7 && st.prefill_tokens == 1);
	CHECK(pt_session_drop_reply(s, &st, &err) == PT_OK);
	CHECK(pt_engine_pos(e) == (int64_t)NP + 8);
	pt_session_destroy(s);
	pt_engine_close(e);
}

PT_TEST(test_gen_session_stops)
{
	pt_engine *e = tiny_engine("sess_stop.gguf");
	CHECK(e != NULL);
	if (!e)
		return;
	struct sink full = { .n = 0 }, cut = { .n = 0 }, none = { .n = 0 };
	struct pt_gen_stats st;
	struct pt_error err = { 0 };
	pt_session *s = greedy(e, 24, NULL, &full, NULL);
	CHECK(pt_session_generate(s, prompt, NP, &st, &err) == PT_OK);
	pt_session_destroy(s);
	CHECK(full.n >= 8);
	if (full.n < 8) {
		pt_engine_close(e);
		return;
	}
	char stop[4];
	size_t at = full.n / 2;
	memcpy(stop, full.buf + at, 3);
	stop[3] = 0;
	size_t first = (size_t)(strstr(full.buf, stop) - full.buf);
	s = greedy(e, 24, stop, &cut, NULL);
	CHECK(pt_session_generate(s, prompt, NP, &st, &err) == PT_OK);
	CHECK(st.stop == PT_STOP_STRING);
	CHECK(cut.n == first && memcmp(cut.buf, full.buf, first) == 0);
	pt_session_destroy(s);
	/* a set cancel flag stops before the first token; the context end stops too */
	volatile sig_atomic_t cancel = 1;
	s = greedy(e, 24, NULL, &none, &cancel);
	CHECK(pt_session_generate(s, prompt, NP, &st, &err) == PT_OK);
	CHECK(st.stop == PT_STOP_CANCELLED && st.gen_tokens == 0 && none.n == 0);
	cancel = 0;
	int32_t many[60];
	for (int i = 0; i < 60; i++)
		many[i] = 65 + i % 26;
	CHECK(pt_session_generate(s, many, 60, &st, &err) == PT_OK);
	CHECK(st.stop == PT_STOP_CONTEXT || st.stop == PT_STOP_EOS);
	if (st.stop == PT_STOP_CONTEXT)
		CHECK(st.gen_tokens == 5 && pt_engine_pos(e) == 64);
	CHECK(pt_session_generate(s, many, 0, &st, &err) == PT_E_INVALID);
	int32_t huge[65] = { 0 };
	CHECK(pt_session_generate(s, huge, 65, &st, &err) == PT_E_LIMIT);
	pt_session_destroy(s);
	pt_engine_close(e);
}
