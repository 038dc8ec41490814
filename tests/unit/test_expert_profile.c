/* test_expert_profile.c - the expert-popularity profile (expert/profile.h): round trip,
 * hostile files refused, the ranking, and through the engine: the warm-up fills the slots
 * with the most used experts, never changes the logits, and raises the first tokens' hit
 * rate on a model with skewed routing. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "expert/profile.h"
#include "gen/engine.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "test.h"
#include "util/alloc.h"
#include "util/safefile.h"

static void fill(struct pt_profile *p)
{
	for (uint32_t i = 0; i < p->n_moe * p->n_expert; i++)
		p->uses[i] = (i * 2654435761u) % 1000;
}

PT_TEST(test_expert_profile_round_trip)
{
	struct pt_profile p, q;
	struct pt_error err = { 0 };
	REQUIRE(pt_profile_init(&p, 3, 16, 0x1234, &err) == PT_OK);
	fill(&p);
	const char *path = pt_test_tmpfile("round.prof");
	REQUIRE(pt_profile_save(path, &p, &err) == PT_OK);
	struct stat sb;
	REQUIRE(stat(path, &sb) == 0);
	CHECK_EQ_INT(sb.st_mode & 0777, 0600);
	bool missing = true;
	REQUIRE(pt_profile_load(path, 0x1234, 3, 16, &q, &missing, &err) == PT_OK);
	CHECK(!missing);
	CHECK_EQ_INT(q.n_moe, 3);
	CHECK_EQ_INT(q.n_expert, 16);
	CHECK(memcmp(p.uses, q.uses, 3 * 16 * 4) == 0);
	pt_profile_free(&q);
	/* another model (identity, shape) is refused as such */
	CHECK(pt_profile_load(path, 0x1235, 3, 16, &q, &missing, &err) == PT_E_INVALID);
	CHECK(pt_profile_load(path, 0x1234, 4, 16, &q, &missing, &err) != PT_OK);
	CHECK(pt_profile_load(pt_test_tmpfile("absent.prof"), 1, 3, 16, &q, &missing, &err) ==
	      PT_E_IO);
	CHECK(missing);
	pt_profile_free(&p);
}

PT_TEST(test_expert_profile_hostile)
{
	struct pt_profile p, q;
	struct pt_error err = { 0 };
	REQUIRE(pt_profile_init(&p, 2, 8, 7, &err) == PT_OK);
	fill(&p);
	uint8_t *b;
	size_t n;
	REQUIRE(pt_profile_serialize(&p, &b, &n, &err) == PT_OK);
	REQUIRE(pt_profile_parse(b, n, 7, 2, 8, &q, &err) == PT_OK);
	pt_profile_free(&q);
	/* every single flipped byte and every truncation is refused */
	for (size_t i = 0; i < n; i++) {
		b[i] ^= 0x5a;
		CHECK(pt_profile_parse(b, n, 0, 0, 0, &q, &err) == PT_E_FORMAT);
		b[i] ^= 0x5a;
	}
	for (size_t len = 0; len < n; len++)
		CHECK(pt_profile_parse(b, len, 0, 0, 0, &q, &err) == PT_E_FORMAT);
	/* a huge declared shape is refused before any allocation */
	b[12] = 0xff, b[13] = 0xff, b[14] = 0xff, b[15] = 0x7f;
	CHECK(pt_profile_parse(b, n, 0, 0, 0, &q, &err) == PT_E_FORMAT);
	pt_free(b);
	/* a file another user could write, or a symlink, is not read */
	const char *path = pt_test_tmpfile("hostile.prof");
	REQUIRE(pt_profile_save(path, &p, &err) == PT_OK);
	REQUIRE(chmod(path, 0666) == 0);
	bool missing;
	CHECK(pt_profile_load(path, 7, 2, 8, &q, &missing, &err) != PT_OK);
	const char *link = pt_test_tmpfile("link.prof");
	unlink(link);
	REQUIRE(chmod(path, 0600) == 0 && symlink(path, link) == 0);
	CHECK(pt_profile_load(link, 7, 2, 8, &q, &missing, &err) != PT_OK);
	pt_profile_free(&p);
}

PT_TEST(test_expert_profile_top_and_add)
{
	struct pt_profile p;
	struct pt_error err = { 0 };
	REQUIRE(pt_profile_init(&p, 1, 6, 1, &err) == PT_OK);
	const uint32_t u[6] = { 5, 0, 9, 5, 1, 7 };
	pt_profile_add(&p, 0, u);
	uint32_t top[6];
	CHECK_EQ_INT(pt_profile_top(&p, 0, top, 3), 3);
	CHECK_EQ_INT(top[0], 2);
	CHECK_EQ_INT(top[1], 5);
	CHECK_EQ_INT(top[2], 0); /* tie 5/5: lower id first */
	CHECK_EQ_INT(pt_profile_top(&p, 0, top, 6), 5); /* zero counts are not listed */
	CHECK_EQ_INT(top[3], 3);
	CHECK_EQ_INT(top[4], 4);
	const uint32_t big[6] = { 1u << 30, 0, 0, 0, 0, 2 };
	pt_profile_add(&p, 0, big); /* passes 2^30: everything halves */
	CHECK_EQ_INT(p.uses[0], ((1u << 30) + 5) / 2);
	CHECK_EQ_INT(p.uses[5], 4);
	pt_profile_free(&p);
}

/* --- through the engine --- */

static const char *skewed_model(void)
{
	static bool made;
	const char *path = pt_test_tmpfile("profile-skew.gguf");
	if (!made) {
		struct pt_mkmodel_opts o = { .arch = PT_ARCH_QWEN3MOE, .preset = "tiny",
					     .mix = PT_MIX_Q8_0, .seed = 3, .out_path = path,
					     .threads = 1, .router_skew = 5 };
		struct pt_error err = { 0 };
		made = pt_mkmodel_write(&o, &err) == PT_OK;
	}
	return made ? path : NULL;
}

#define N_TOK 32

/* Runs N_TOK tokens (8 prefill, then decode) with the cache at `slots`; logits of every
 * step into lg[N_TOK - 7][n_vocab]; returns the hit rate of the whole run. */
static double run(const char *dir, bool profile, uint32_t slots, float *lg, uint32_t nv,
		  uint32_t *warmed)
{
	struct pt_engine_opts o = { .model_path = skewed_model(), .threads = 1, .n_ctx = 64,
				    .n_batch = 8, .memory_budget = 1ull << 30,
				    .expert_slots = slots, .io_mode = "buffered",
				    .no_lock = true, .use_profile = profile, .profile_dir = dir };
	pt_engine *e = NULL;
	struct pt_error err = { 0 };
	if (!o.model_path || pt_engine_open(&o, &e, &err) != PT_OK)
		return -1;
	*warmed = pt_engine_profile_warmed(e);
	uint32_t toks[N_TOK];
	for (uint32_t i = 0; i < N_TOK; i++)
		toks[i] = (i * 37 + 11) % 200 + 3;
	bool ok = pt_engine_eval(e, toks, 8, lg, false, &err) == PT_OK;
	for (uint32_t i = 8; ok && i < N_TOK; i++)
		ok = pt_engine_eval(e, toks + i, 1, lg + (size_t)(i - 7) * nv, false, &err) ==
		     PT_OK;
	struct pt_engine_stats st;
	pt_engine_stats(e, &st);
	pt_engine_close(e);
	return ok ? (double)st.hits / (double)(st.hits + st.misses) : -1;
}

PT_TEST(test_expert_profile_engine_warmup)
{
	char dir[512]; /* pt_test_tmpfile's buffer is reused */
	snprintf(dir, sizeof dir, "%s", pt_test_tmpfile("profiles"));
	mkdir(dir, 0700);
	REQUIRE(skewed_model());
	struct pt_model *m = NULL;
	struct pt_error err = { 0 };
	REQUIRE(pt_model_open(skewed_model(), &m, &err) == PT_OK);
	const uint32_t nv = m->hp.n_vocab, k = m->hp.n_expert_used, ne = m->hp.n_expert;
	pt_model_close(m);
	const uint32_t slots = k + (ne - k) / 3; /* room to warm a third of the rest */
	float *a = pt_mallocn((size_t)(N_TOK - 6) * nv, sizeof(float));
	float *b = pt_mallocn((size_t)(N_TOK - 6) * nv, sizeof(float));
	REQUIRE(a && b);
	uint32_t w0 = 0, w1 = 0, w2 = 0;
	/* 1: no profile yet (none warmed; this run writes it) */
	const double cold = run(dir, true, slots, a, nv, &w0);
	REQUIRE(cold >= 0);
	CHECK_EQ_INT(w0, 0);
	/* 2: the profile warms the cache: same logits, byte for byte; more hits */
	const double warm = run(dir, true, slots, b, nv, &w1);
	REQUIRE(warm >= 0);
	CHECK(w1 > 0);
	CHECK(w1 <= (slots - k) * 48);
	CHECK(memcmp(a, b, (size_t)(N_TOK - 6) * nv * sizeof(float)) == 0);
	CHECK(warm > cold);
	/* 3: --no-profile: nothing warmed, the same logits again */
	const double off = run(dir, false, slots, b, nv, &w2);
	CHECK_EQ_INT(w2, 0);
	CHECK(off >= 0 && off < warm);
	CHECK(memcmp(a, b, (size_t)(N_TOK - 6) * nv * sizeof(float)) == 0);
	pt_free(a);
	pt_free(b);
}
