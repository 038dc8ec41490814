/* test_vstore.c - the device expert store (expert/vstore.h) on a fake device in host memory:
 * where every expert lands, that the slot bytes are the model's expert bytes, hits-first
 * ordering with each top-k rank once, the counters, the LFU/LRU cache underneath, and the
 * refusals.  Runs in make test without a GPU (issue 16's CPU-side test of the store). */
#include <string.h>

#include "expert/vstore.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "test.h"
#include "util/alloc.h"

struct fake_dev {
	uint8_t *mem;
	uint64_t size, copies, bytes;
	bool fail;
};

static enum pt_status fake_copy(void *ctx, uint64_t off, const void *src, uint64_t bytes,
				struct pt_error *err)
{
	struct fake_dev *d = ctx;
	if (d->fail)
		return pt_error_set(err, PT_E_IO, "fake device: copy refused");
	if (off > d->size || bytes > d->size - off)
		return pt_error_set(err, PT_E_INVALID, "fake device: copy past the pool");
	memcpy(d->mem + off, src, bytes);
	d->copies++;
	d->bytes += bytes;
	return PT_OK;
}

static struct pt_model *tiny(enum pt_arch arch, const char *name)
{
	const char *path = pt_test_tmpfile(name);
	struct pt_mkmodel_opts o = { .arch = arch, .preset = "tiny", .mix = PT_MIX_Q8_0,
				     .seed = 5, .out_path = path, .threads = 1 };
	struct pt_error err = { 0 };
	struct pt_model *m = NULL;
	if (pt_mkmodel_write(&o, &err) != PT_OK || pt_model_open(path, &m, &err) != PT_OK)
		return NULL;
	return m;
}

/* The bytes at off[] in the fake pool are expert e's matrices of layer il. */
static bool holds(const struct fake_dev *d, const struct pt_model *m, uint32_t il, uint32_t e,
		  const uint64_t off[3])
{
	const struct pt_layer_weights *L = &m->layers[il];
	const bool fused = L->gate_up_exps.data != NULL;
	const struct pt_expert_mat *mats[3] = { fused ? &L->gate_up_exps : &L->gate_exps,
						fused ? NULL : &L->up_exps, &L->down_exps };
	for (int i = 0; i < 3; i++) {
		if (!mats[i]) {
			if (off[i] != UINT64_MAX)
				return false;
			continue;
		}
		if (off[i] % 256 || off[i] + mats[i]->expert_bytes > d->size ||
		    memcmp(d->mem + off[i], mats[i]->data + (uint64_t)e * mats[i]->expert_bytes,
			   mats[i]->expert_bytes))
			return false;
	}
	return true;
}

static pt_vstore *open_store(const struct pt_model *m, uint32_t spl, enum pt_cache_policy pol,
			     struct fake_dev *d)
{
	const uint64_t pool = (uint64_t)pt_vstore_moe_layers(m) * spl * pt_vstore_slot_bytes(m);
	memset(d, 0, sizeof *d);
	d->size = pool;
	d->mem = pt_calloc(pool ? pool : 1, 1);
	struct pt_vstore_cfg c = { m, spl, pol, { d, fake_copy } };
	pt_vstore *v = NULL;
	struct pt_error err = { 0 };
	if (!d->mem || pt_vstore_create(&c, &v, &err) != PT_OK)
		return NULL;
	return v;
}

/* Deterministic top-k rows with locality: a few popular experts and a random tail. */
static void route_row(uint32_t t, uint32_t il, uint32_t E, uint32_t k, int32_t *ids)
{
	uint64_t s = t * 7919u + il * 104729u + 1;
	for (uint32_t j = 0; j < k; j++) {
		int32_t e;
		bool dup;
		do {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			e = (s >> 33) % 4 == 0 ? (int32_t)((s >> 40) % E) : (int32_t)((s >> 40) % 3);
			dup = false;
			for (uint32_t i = 0; i < j; i++)
				dup |= ids[i] == e;
		} while (dup);
		ids[j] = e;
	}
}

static void check_store(enum pt_arch arch, const char *name, uint32_t spl_div,
			enum pt_cache_policy pol)
{
	struct pt_model *m = tiny(arch, name);
	REQUIRE(m);
	const uint32_t E = m->hp.n_expert, k = m->hp.n_expert_used;
	const uint32_t spl = spl_div ? (E / spl_div > k ? E / spl_div : k) : E;
	struct fake_dev d;
	pt_vstore *v = open_store(m, spl, pol, &d);
	REQUIRE(v);
	CHECK(pt_vstore_all_resident(v) == (spl == E));
	CHECK(pt_vstore_pool_bytes(v) == d.size);
	struct pt_cache_stats st0;
	pt_vstore_stats(v, &st0);
	const uint32_t nm = pt_vstore_moe_layers(m);
	if (spl == E) { /* filled at create: every expert found where its bytes are */
		CHECK(st0.misses == (uint64_t)nm * E);
		for (uint32_t il = 0; il < m->hp.n_layer; il++)
			for (uint32_t e = 0; m->layers[il].is_moe && e < E; e++) {
				uint64_t off[3];
				CHECK(pt_vstore_find(v, il, e, off));
				CHECK(holds(&d, m, il, e, off));
			}
	} else {
		CHECK(st0.requests == 0 && d.copies == 0);
	}
	struct pt_vstore_entry ent[64];
	int32_t ids[64];
	uint64_t hits = 0, miss = 0;
	const uint64_t copies0 = d.copies;
	for (uint32_t t = 0; t < 40; t++) {
		for (uint32_t il = 0; il < m->hp.n_layer; il++) {
			if (!m->layers[il].is_moe)
				continue;
			route_row(t % 25, il, E, k, ids); /* rows repeat: hits */
			uint32_t nh = 99;
			struct pt_error err = { 0 };
			REQUIRE(pt_vstore_acquire(v, il, ids, k, ent, &nh, &err) == PT_OK);
			uint32_t rank_seen = 0;
			for (uint32_t j = 0; j < k; j++) {
				CHECK(ent[j].hit == (j < nh));
				CHECK(ent[j].rank < k && ids[ent[j].rank] == (int32_t)ent[j].expert);
				rank_seen |= 1u << ent[j].rank;
				CHECK(holds(&d, m, il, ent[j].expert, ent[j].off));
				if (j > 0 && ent[j].hit == ent[j - 1].hit)
					CHECK(ent[j].rank > ent[j - 1].rank);
			}
			CHECK(rank_seen == (k >= 32 ? 0xffffffffu : (1u << k) - 1));
			hits += nh;
			miss += k - nh;
			pt_vstore_release(v, il);
		}
	}
	struct pt_cache_stats st;
	pt_vstore_stats(v, &st);
	CHECK(st.hits - st0.hits == hits && st.misses - st0.misses == miss);
	CHECK(st.requests - st0.requests == hits + miss);
	CHECK(hits > 0);
	if (spl == E)
		CHECK(miss == 0 && d.copies == copies0);
	else
		CHECK(miss > 0 && d.copies > copies0);
	pt_vstore_destroy(v);
	pt_free(d.mem);
	pt_model_close(m);
}

PT_TEST(test_vstore_all_resident)
{
	check_store(PT_ARCH_QWEN3MOE, "vs-q-all.gguf", 0, PT_CACHE_LFU);
	check_store(PT_ARCH_GEMMA4, "vs-g-all.gguf", 0, PT_CACHE_LFU);
}

PT_TEST(test_vstore_half_and_minimum)
{
	check_store(PT_ARCH_QWEN3MOE, "vs-q-half.gguf", 2, PT_CACHE_LFU);
	check_store(PT_ARCH_BAILINGMOE2, "vs-b-min.gguf", 1000, PT_CACHE_LRU);
	check_store(PT_ARCH_GEMMA4, "vs-g-min.gguf", 1000, PT_CACHE_LFU);
}

PT_TEST(test_vstore_refusals)
{
	struct pt_model *m = tiny(PT_ARCH_BAILINGMOE2, "vs-bad.gguf");
	REQUIRE(m);
	const uint32_t k = m->hp.n_expert_used;
	struct fake_dev d;
	struct pt_error err = { 0 };
	struct pt_vstore_cfg c = { m, k - 1, PT_CACHE_LFU, { &d, fake_copy } };
	pt_vstore *v = NULL;
	CHECK(pt_vstore_create(&c, &v, &err) == PT_E_INVALID && !v);
	c.slots_per_layer = m->hp.n_expert + 1;
	CHECK(pt_vstore_create(&c, &v, &err) == PT_E_INVALID && !v);
	v = open_store(m, k, PT_CACHE_LFU, &d);
	REQUIRE(v);
	int32_t ids[64];
	struct pt_vstore_entry ent[64];
	uint32_t nh;
	for (uint32_t j = 0; j < k; j++)
		ids[j] = (int32_t)j;
	uint32_t dense = UINT32_MAX, moe = UINT32_MAX;
	for (uint32_t il = 0; il < m->hp.n_layer; il++)
		*(m->layers[il].is_moe ? &moe : &dense) = il;
	REQUIRE(moe != UINT32_MAX);
	if (dense != UINT32_MAX) /* bailing's leading dense layer has no experts */
		CHECK(pt_vstore_acquire(v, dense, ids, k, ent, &nh, &err) == PT_E_INVALID);
	ids[1] = ids[0];
	CHECK(pt_vstore_acquire(v, moe, ids, k, ent, &nh, &err) == PT_E_INVALID);
	ids[1] = (int32_t)m->hp.n_expert;
	CHECK(pt_vstore_acquire(v, moe, ids, k, ent, &nh, &err) == PT_E_INVALID);
	ids[1] = 1;
	d.fail = true; /* a failed copy: an error, the slot stays empty, nothing stays pinned */
	CHECK(pt_vstore_acquire(v, moe, ids, k, ent, &nh, &err) == PT_E_IO);
	d.fail = false;
	CHECK(pt_vstore_acquire(v, moe, ids, k, ent, &nh, &err) == PT_OK && nh == 0);
	pt_vstore_release(v, moe);
	CHECK(pt_vstore_acquire(v, moe, ids, k, ent, &nh, &err) == PT_OK && nh == k);
	pt_vstore_release(v, moe);
	pt_vstore_destroy(v);
	pt_free(d.mem);
	pt_model_close(m);
}
