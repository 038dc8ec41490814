/* mkmodel.c - writes synthetic GGUF checkpoints (see mkmodel.h).
 *
 * Values: every tensor has its own stream seeded from (seed, tensor name) and every row its
 * own sub-stream, so bytes do not depend on chunking or threads.  Weights are uniform,
 * zero-mean per row, with standard deviation gain/sqrt(fan_in) so activations keep their
 * scale through all layers; the gains (below) keep the models well-conditioned and their
 * next-token distributions peaked but not one-hot.  Router rows are centred across both axes so no expert wins for every
 * token.  --router-skew S > 0 adds temporal routing locality (see struct locality). */
#include "model/mkmodel.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/vocab.h"
#include "token/hf_import.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "util/alloc.h"
#include "util/lock.h"
#include "util/safefile.h"

#include <sys/statvfs.h>

/* Conditioning (docs/MODELS.md): the gains below keep the synthetic models from being
 * chaotic, i.e. from turning a last-bit difference (an activation's Q8 rounding step, a
 * GELU-table F16 step, a near-tied router choice) into a different prediction, so two correct
 * implementations agree as closely as they do on real checkpoints.  Each value was chosen by
 * measuring llama.cpp's own one-batch vs token-by-token agreement on the tiny/small files. */

/* Residual-branch output projections (attn_output, ffn_down*) are scaled by
 * RESID_GAIN / sqrt(2 n_layer) so no branch dominates the stream and a perturbation does
 * not grow layer over layer. */
#define RESID_GAIN 0.5
/* Router logits' spread (gemma4's router input is scaled by 1/sqrt(n_embd), so its gain is
 * applied without the 1/sqrt(fan_in)). */
#define ROUTER_GAIN 2.0
#define ROUTER_GAIN_GEMMA4 3.0
/* Gemma 4 scores attention with scale 1 after Q/K RMS-norm: with gains near 1 the scores
 * have sd sqrt(head_dim) (8-16), a near-argmax over keys.  Q/K norm gains
 * QK_GAIN * head_dim^-1/4 give scores of sd ~0.25. */
#define QK_GAIN 0.5
/* Gemma 4 post-norms.  Tied embeddings echo the input token (logit of t ~ |embd[t]|^2)
 * unless layer outputs dominate the residual: the first layer's post-FFN norm has gain
 * 12, later layers' 12/4 so their perturbations stay small next to it.  The attention
 * post-norm is small (attention output is a context average; when it dominates,
 * consecutive tokens look alike to the router), and the routed branch of the FFN block
 * (post_ffw_norm_2) weighs 0.3 against the dense branch's 1, so a near-tied expert choice
 * moves the block output little. */
#define POST_NORM_GAIN 12.0
#define POST_NORM_LATER 0.25
#define POST_ATTN_NORM_GAIN 0.53
#define MOE_BRANCH_NORM_GAIN 0.3

/* Per-arch output head: lm-head gain, and the heavy tail of the head rows' norms (factor
 * exp(tail sqrt(3) u - tail^2), u uniform in [-1, 1)) that puts the top token clear of the
 * runner-up instead of Gaussian near-ties, bounded so no row is one-hot.  Tied embeddings
 * (gemma4) use a final-norm gain: the embedding is that much smaller, and so is its echo in
 * the logits, while the logits keep their scale. */
struct head_gains {
	double logit, tail, final_norm;
};

static struct head_gains head_gains(const struct pt_hparams *hp)
{
	switch (hp->arch) {
	case PT_ARCH_GEMMA4:
		return (struct head_gains){ 4.0, 0.2, hp->tied_embeddings ? 5.0 : 1.0 };
	case PT_ARCH_QWEN3MOE:
		return (struct head_gains){ 2.5, 0.4, 1.0 };
	default:
		return (struct head_gains){ 3.0, 0.5, 1.0 };
	}
}

uint64_t pt_mkmodel_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [-1, 1) with 24 bits. */
static float unit(uint64_t *s)
{
	return (float)((double)(pt_mkmodel_splitmix64(s) >> 40) * (1.0 / 8388608.0) - 1.0);
}

static uint64_t tensor_seed(uint64_t seed, const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	uint64_t s = seed ^ h;
	return pt_mkmodel_splitmix64(&s);
}

static void uniform_row(uint64_t ts, uint64_t row, double sd, bool center, float *out,
			uint64_t n)
{
	uint64_t s = ts ^ (row * 0xd1b54a32d192ed03ull);
	double a = sd * sqrt(3.0), mean = 0;
	for (uint64_t i = 0; i < n; i++) {
		out[i] = (float)(unit(&s) * a);
		mean += out[i];
	}
	if (!center)
		return;
	mean /= (double)n;
	for (uint64_t i = 0; i < n; i++)
		out[i] = (float)(out[i] - mean);
}

/* Rank of expert e in a seeded permutation (0 = most popular under --router-skew). */
static double popularity(uint64_t ts, uint64_t e, uint64_t n)
{
	uint64_t s = ts ^ 0x5eed;
	uint64_t rank = 0, key_e = 0;
	for (uint64_t i = 0; i <= e; i++)
		key_e = pt_mkmodel_splitmix64(&s);
	s = ts ^ 0x5eed;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t k = pt_mkmodel_splitmix64(&s);
		rank += k < key_e || (k == key_e && i < e);
	}
	return n > 1 ? 0.5 - (double)rank / (double)(n - 1) : 0.0; /* in [-0.5, 0.5] */
}

/* Routing locality (--router-skew S > 0; docs/MODELS.md "Routing locality").  A trained
 * router's choices repeat across consecutive tokens because it reads slowly varying context;
 * a synthetic model's hidden state is dominated by the current token's embedding, so its
 * routing is memoryless.  S reserves the first n_embd/8 residual dimensions for context:
 * the token embedding is scaled by 1/(1+S) there, attention output rows writing there by
 * 1 + 2.4 S / sqrt(layer+1) (attention outputs are averages over the context; the
 * 1/sqrt(layer+1) keeps later layers from compounding into frozen routing), and router
 * weights reading there by 1 + 0.375 S (gemma4, which RMS-normalises the attention output
 * before adding it, also scales its post-attention norm there by the attention gain).  The router then sees a drifting context plus the
 * token; S sets their ratio.  S = 0 leaves every value as without the option. */
#define BIAS_PER_SKEW 0.02 /* exp_probs_b spans 0.02 S (selection is on sigmoid scores) */

struct locality {
	uint64_t reserved;      /* dimensions [0, reserved) */
	double embd, router;
};

static struct locality locality(const struct pt_hparams *hp, double skew)
{
	if (skew <= 0)
		return (struct locality){ 0, 1.0, 1.0 };
	return (struct locality){ hp->n_embd / 8, 1.0 / (1.0 + skew), 1.0 + 0.375 * skew };
}

static double attn_out_gain(double skew, const char *name)
{
	unsigned layer = 0;
	if (sscanf(name, "blk.%u.", &layer) != 1)
		layer = 0;
	return 1.0 + 2.4 * skew / sqrt((double)layer + 1.0);
}

/* Calibrated on `small` files with `particle routing --gen 128` against Qwen3-30B-A3B's
 * published next-token repeat 0.45, within-8 repeat 0.80 and LRU hit 0.90-0.95 at 40 %
 * residency (docs/MODELS.md has the measured table).  Those are the only complete published
 * figures: Sarvam, GLM, DeepSeek and gpt-oss have none, so their levels reproduce Qwen3's. */
double pt_mkmodel_real_skew(enum pt_arch arch)
{
	switch (arch) {
	case PT_ARCH_QWEN3MOE:
		return 10.0;
	case PT_ARCH_GEMMA4:
		return 1.5;
	case PT_ARCH_GLM4MOE:
		return 7.5; /* no published GLM routing statistics: the Qwen3 figures' level */
	default:
		return 8.0;
	}
}

bool pt_mkmodel_skew_dependent(const struct pt_tensor_desc *d)
{
	return d->init == PT_INIT_ROUTER || d->init == PT_INIT_ROUTER_BIAS ||
	       d->init == PT_INIT_EMBED || d->cat == PT_CAT_ATTN_OUTPUT ||
	       (d->init == PT_INIT_POST_NORM && strstr(d->name, "post_attention_norm"));
}

static void router_rows(const struct pt_hparams *hp, const struct pt_tensor_desc *d,
			uint64_t ts, double skew, float *out)
{
	const uint64_t n_in = d->ne[0], n_exp = d->ne[1];
	double sd = ROUTER_GAIN / sqrt((double)n_in);
	if (hp->arch == PT_ARCH_GEMMA4)
		sd = ROUTER_GAIN_GEMMA4;
	for (uint64_t e = 0; e < n_exp; e++)
		uniform_row(ts, e, sd, true, out + e * n_in, n_in);
	for (uint64_t i = 0; i < n_in; i++) { /* centre each column across experts */
		double m = 0;
		for (uint64_t e = 0; e < n_exp; e++)
			m += out[e * n_in + i];
		m /= (double)n_exp;
		for (uint64_t e = 0; e < n_exp; e++)
			out[e * n_in + i] = (float)(out[e * n_in + i] - m);
	}
	const struct locality loc = locality(hp, skew);
	for (uint64_t e = 0; e < n_exp && loc.reserved; e++)
		for (uint64_t i = 0; i < loc.reserved && i < n_in; i++)
			out[e * n_in + i] = (float)(out[e * n_in + i] * loc.router);
}

static void small_rows(const struct pt_hparams *hp, const struct pt_tensor_desc *d,
		       uint64_t ts, double skew, uint64_t n, float *out)
{
	uint64_t s = ts;
	switch (d->init) {
	case PT_INIT_NORM: {
		double g = strstr(d->name, "post_ffw_norm_2") ? MOE_BRANCH_NORM_GAIN : 1.0;
		if (strcmp(d->name, "output_norm.weight") == 0)
			g = head_gains(hp).final_norm;
		if (hp->arch == PT_ARCH_GEMMA4 &&
		    (strstr(d->name, "attn_q_norm") || strstr(d->name, "attn_k_norm")))
			g = QK_GAIN * pow((double)n, -0.25);
		for (uint64_t i = 0; i < n; i++)
			out[i] = (float)g * (1.0f + 0.1f * unit(&s));
	}
		break;
	case PT_INIT_POST_NORM: {
		double g = strstr(d->name, "post_attention_norm") ? POST_ATTN_NORM_GAIN
								   : POST_NORM_GAIN;
		if (!strstr(d->name, "post_attention_norm") && strncmp(d->name, "blk.0.", 6) != 0)
			g *= POST_NORM_LATER;
		for (uint64_t i = 0; i < n; i++)
			out[i] = (float)g * (1.0f + 0.1f * unit(&s));
	}
		break;
	case PT_INIT_ONES:
	case PT_INIT_LAYER_SCALE:
		for (uint64_t i = 0; i < n; i++)
			out[i] = 1.0f + 0.05f * unit(&s);
		break;
	case PT_INIT_BIAS:
		for (uint64_t i = 0; i < n; i++)
			out[i] = 0.05f * unit(&s);
		break;
	case PT_INIT_SSM_A: /* per-token decay exp(softplus(.) * a) ~ 0.5 .. 0.95 */
		for (uint64_t i = 0; i < n; i++)
			out[i] = -0.55f + 0.45f * unit(&s);
		break;
	case PT_INIT_ROUTER_BIAS: /* a mild static popularity (real exp_probs_b are not 0) */
		for (uint64_t i = 0; i < n; i++)
			out[i] = (float)(BIAS_PER_SKEW * skew * popularity(ts, i, n));
		break;
	case PT_INIT_ROPE_FREQS: {
		uint64_t rotated = (uint64_t)(hp->rope_partial_full * (float)hp->n_rot / 2.0f);
		for (uint64_t i = 0; i < n; i++)
			out[i] = i < rotated ? 1.0f : 1e30f;
		break;
	}
	default:
		memset(out, 0, n * sizeof *out);
	}
}

/* Embedding rows: reserved columns scaled down; attention output: reserved rows up. */
static void apply_locality(const struct pt_hparams *hp, const struct pt_tensor_desc *d,
			   double skew, uint64_t row0, uint64_t nrows, float *out)
{
	const struct locality loc = locality(hp, skew);
	const uint64_t n0 = d->ne[0];
	if (d->init == PT_INIT_EMBED) {
		for (uint64_t r = 0; r < nrows; r++)
			for (uint64_t i = 0; i < loc.reserved && i < n0; i++)
				out[r * n0 + i] = (float)(out[r * n0 + i] * loc.embd);
	} else if (d->init == PT_INIT_POST_NORM && strstr(d->name, "post_attention_norm")) {
		/* gemma4 renormalises the attention output: scale after the norm as well */
		const double g = attn_out_gain(skew, d->name);
		for (uint64_t i = 0; i < loc.reserved && i < n0; i++)
			out[i] = (float)(out[i] * g);
	} else if (d->cat == PT_CAT_ATTN_OUTPUT) {
		const double g = attn_out_gain(skew, d->name);
		for (uint64_t r = 0; r < nrows && row0 + r < loc.reserved; r++)
			for (uint64_t i = 0; i < n0; i++)
				out[r * n0 + i] = (float)(out[r * n0 + i] * g);
	}
}

void pt_mkmodel_gen_rows(const struct pt_hparams *hp, const struct pt_tensor_desc *d,
			 uint64_t seed, double skew, uint64_t row0, uint64_t nrows, float *out)
{
	const uint64_t ts = tensor_seed(seed, d->name), n0 = d->ne[0];
	if (d->init == PT_INIT_ROUTER) { /* always generated whole (small) */
		router_rows(hp, d, ts, skew, out);
		return;
	}
	if (d->init != PT_INIT_WEIGHT && d->init != PT_INIT_EMBED && d->n_dims > 1 &&
	    d->init == PT_INIT_BIAS) {
		/* 2-D biases (gpt-oss per-expert biases): a stream per row, so the bytes do not
		 * depend on how rows are cut into chunks; row 0 keeps the tensor's own stream */
		for (uint64_t r = 0; r < nrows; r++) {
			const uint64_t row = row0 + r;
			small_rows(hp, d, row ? ts ^ (row * 0xd1b54a32d192ed03ull) : ts, skew, n0,
				   out + r * n0);
		}
		return;
	}
	if (d->init != PT_INIT_WEIGHT && d->init != PT_INIT_EMBED) {
		small_rows(hp, d, ts, skew, n0 * nrows, out);
		if (skew > 0)
			apply_locality(hp, d, skew, row0, nrows, out);
		return;
	}
	const struct head_gains hg = head_gains(hp);
	double sd = 1.0 / sqrt((double)d->fan_in);
	if (d->cat == PT_CAT_OUTPUT)
		sd *= hg.logit;
	if (d->cat == PT_CAT_ATTN_OUTPUT || d->cat == PT_CAT_FFN_DOWN)
		sd *= RESID_GAIN / sqrt(2.0 * hp->n_layer);
	/* MLA's k_b is applied transposed (the absorbed query sums over its rows, the latent
	 * width): scaled by that width so the decompressed keys k_b c have unit elements and
	 * the scores the spread of ordinary attention (1/sqrt(fan_in) made them sqrt(latent /
	 * nope) times sharper: small Q4_K_M self-KL 6e-3) */
	if (hp->kv_lora_rank && strstr(d->name, ".attn_k_b."))
		sd = 1.0 / sqrt((double)hp->kv_lora_rank);
	/* routed weights scaled by expert_weights_scale (DeepSeek-V3 2.5): the experts' down
	 * projections carry 1/scale so the routed branch keeps every arch's size and a flipped
	 * expert moves the residual as little (bailingmoe2's files keep their measured gains) */
	if (hp->arch == PT_ARCH_DEEPSEEK2 && d->role == PT_ROLE_EXPERT &&
	    d->cat == PT_CAT_FFN_DOWN && hp->expert_weights_scale > 1.0f)
		sd /= hp->expert_weights_scale;
	if (d->init == PT_INIT_EMBED)
		sd = hp->tied_embeddings ? hg.logit / hg.final_norm / sqrt((double)n0) : 1.0;
	const bool head = d->cat == PT_CAT_OUTPUT ||
			  (d->init == PT_INIT_EMBED && hp->tied_embeddings);
	const double tail = hg.tail;
	for (uint64_t r = 0; r < nrows; r++) {
		double f = 1.0;
		if (head && tail > 0) {
			uint64_t s = ts ^ 0x7a11 ^ ((row0 + r) * 0x9e3779b97f4a7c15ull);
			f = exp(tail * sqrt(3.0) * unit(&s) - tail * tail);
		}
		uniform_row(ts, row0 + r, sd * f, true, out + r * n0, n0);
	}
	if (skew > 0)
		apply_locality(hp, d, skew, row0, nrows, out);
}

/* ---- streaming writer ------------------------------------------------------------------ */

struct job {
	const struct pt_hparams *hp;
	const struct pt_tensor_desc *d;
	const struct pt_mkmodel_opts *o;
	uint32_t type;
	uint64_t row_bytes;
	uint64_t row0, nrows;   /* this worker's rows */
	float *scratch;         /* nrows * ne0 floats (whole chunk for routers) */
	uint8_t *dst;           /* first byte of row0 */
	enum pt_status st;
	struct pt_error err;
};

static void *run_job(void *arg)
{
	struct job *j = arg;
	const uint64_t n0 = j->d->ne[0];
	pt_mkmodel_gen_rows(j->hp, j->d, j->o->seed, j->o->router_skew, j->row0, j->nrows,
			    j->scratch);
	j->st = pt_quant_quantize_row(j->type, j->scratch, j->dst, n0 * j->nrows, &j->err);
	return NULL;
}

struct writer {
	const struct pt_mkmodel_opts *o;
	const struct pt_hparams *hp;
	pt_gguf_writer *w;
	float *scratch[PT_MKMODEL_MAX_THREADS];
	/* Double-buffered output: chunk k is written by a writer thread while chunk k+1 is
	 * generated and quantized. */
	uint8_t *outbuf[2];
	uint8_t *out;           /* the buffer being filled */
	int cur;
	pthread_t writer;
	bool writing;
	const uint8_t *wbytes;
	size_t wlen;
	enum pt_status wst;
	struct pt_error werr;
	uint64_t chunk_rows_cap;
	uint64_t done, total;   /* bytes, for the progress bar */
	int last_pct;
};

static void progress(struct writer *wr)
{
	if (!wr->o->progress || wr->total == 0)
		return;
	int pct = (int)(wr->done * 100 / wr->total);
	if (pct == wr->last_pct)
		return;
	wr->last_pct = pct;
	fprintf(stderr, "\rmkmodel: %3d%% (%.2f / %.2f GB)", pct, (double)wr->done / 1e9,
		(double)wr->total / 1e9);
	if (pct == 100)
		fputc('\n', stderr);
}

static void *run_write(void *arg)
{
	struct writer *wr = arg;
	wr->wst = pt_gguf_writer_write_data(wr->w, wr->wbytes, wr->wlen, &wr->werr);
	return NULL;
}

/* Waits for the pending write, if any, and reports its result. */
static enum pt_status drain(struct writer *wr, struct pt_error *err)
{
	if (!wr->writing)
		return PT_OK;
	pthread_join(wr->writer, NULL);
	wr->writing = false;
	if (wr->wst != PT_OK)
		return pt_error_set(err, wr->wst, "%s", wr->werr.msg);
	return PT_OK;
}

/* Hands the filled buffer to the writer thread and switches to the other one. */
static enum pt_status submit(struct writer *wr, size_t len, struct pt_error *err)
{
	enum pt_status st = drain(wr, err);
	if (st != PT_OK)
		return st;
	wr->wbytes = wr->out;
	wr->wlen = len;
	wr->wst = PT_OK;
	if (pthread_create(&wr->writer, NULL, run_write, wr) == 0)
		wr->writing = true;
	else
		run_write(wr); /* no thread: write synchronously */
	if (!wr->writing && wr->wst != PT_OK)
		return pt_error_set(err, wr->wst, "%s", wr->werr.msg);
	wr->cur ^= 1;
	wr->out = wr->outbuf[wr->cur];
	return PT_OK;
}

/* Generates and quantizes rows [r0, r0+n) into dst, threads in parallel over rows. */
static enum pt_status fill_chunk(struct writer *wr, const struct pt_tensor_desc *d,
				 uint32_t type, uint64_t row_bytes, uint64_t r0, uint64_t n,
				 uint8_t *dst, struct pt_error *err)
{
	struct job jobs[PT_MKMODEL_MAX_THREADS];
	pthread_t tid[PT_MKMODEL_MAX_THREADS];
	unsigned nt = wr->o->threads;
	if (nt > n || d->init == PT_INIT_ROUTER || d->n_dims == 1)
		nt = 1;
	uint64_t per = (n + nt - 1) / nt;
	unsigned started = 0;
	for (unsigned t = 0; t < nt; t++) {
		uint64_t a = r0 + t * per, b = a + per < r0 + n ? a + per : r0 + n;
		jobs[t] = (struct job){ .hp = wr->hp, .d = d, .o = wr->o, .type = type,
					.row_bytes = row_bytes, .row0 = a, .nrows = b - a,
					.scratch = wr->scratch[t], .dst = dst + (a - r0) * row_bytes };
		if (t + 1 == nt || pthread_create(&tid[t], NULL, run_job, &jobs[t]) != 0)
			run_job(&jobs[t]); /* the last share (or a failed spawn) runs here */
		else
			started |= 1u << t;
	}
	for (unsigned t = 0; t < nt; t++)
		if (started & (1u << t))
			pthread_join(tid[t], NULL);
	for (unsigned t = 0; t < nt; t++)
		if (jobs[t].st != PT_OK)
			return pt_error_set(err, jobs[t].st, "%s: %s", d->name, jobs[t].err.msg);
	wr->done += n * row_bytes;
	progress(wr);
	return PT_OK;
}

/* Generates, quantizes and writes rows [r0, r0+n). */
static enum pt_status write_chunk(struct writer *wr, const struct pt_tensor_desc *d,
				  uint32_t type, uint64_t row_bytes, uint64_t r0, uint64_t n,
				  struct pt_error *err)
{
	enum pt_status st = fill_chunk(wr, d, type, row_bytes, r0, n, wr->out, err);
	return st != PT_OK ? st : submit(wr, n * row_bytes, err);
}

/* Rows per chunk of d (routers and vectors whole: routers are centred over the matrix). */
static uint64_t chunk_rows(const struct writer *wr, const struct pt_tensor_desc *d)
{
	uint64_t step = wr->chunk_rows_cap / d->ne[0] * wr->o->threads;
	if (d->init == PT_INIT_ROUTER || d->n_dims == 1)
		step = d->ne[1] * d->ne[2] * d->ne[3];
	return step ? step : 1;
}

static enum pt_status write_tensor(struct writer *wr, const struct pt_tensor_desc *d,
				   uint32_t type, struct pt_error *err)
{
	uint64_t row_bytes, rows = d->ne[1] * d->ne[2] * d->ne[3];
	enum pt_status st = PT_OK;
	if (pt_type_row_bytes(type, d->ne[0], &row_bytes) != 0)
		return pt_error_set(err, PT_E_INVALID, "%s: row of %llu does not fit %s", d->name,
				    (unsigned long long)d->ne[0], pt_type_name(type));
	const uint64_t step = chunk_rows(wr, d);
	for (uint64_t r = 0; r < rows && st == PT_OK; r += step)
		st = write_chunk(wr, d, type, row_bytes, r, rows - r < step ? rows - r : step, err);
	return st;
}

/* The vocabulary: the compact synthetic one, or one imported with --vocab or --vocab-gguf
 * (from_gguf: imported views that file, kept open; its template or the arch's). */
struct vocab {
	struct pt_vocab compact;
	struct pt_vocab_spec *imported;
	pt_gguf *from_gguf;
};

static void vocab_free(struct vocab *v)
{
	pt_vocab_free(&v->compact);
	if (v->from_gguf)
		pt_vocab_spec_gguf_free(v->imported);
	else
		pt_vocab_spec_destroy(v->imported);
	pt_gguf_close(v->from_gguf);
	memset(v, 0, sizeof *v);
}

/* --vocab-gguf: every tokenizer.* key of the file (validated as a model's tokenizer), the
 * embedding sized to its token count. */
static enum pt_status vocab_from_gguf(const char *path, enum pt_arch arch, struct vocab *v,
				      struct pt_error *err)
{
	enum pt_status st = pt_gguf_open_one(path, &v->from_gguf, err);
	if (st == PT_OK)
		st = pt_vocab_spec_from_gguf(v->from_gguf, &v->imported, err);
	if (st == PT_OK && !v->imported->chat_template) {
		/* the arch's own template (compact vocabulary built only for it) */
		st = pt_vocab_compact(arch, 0, &v->compact, err);
		if (st == PT_OK)
			v->imported->chat_template = v->compact.chat_template;
	}
	return st; /* the reader's message names the key (first error wins) */
}

static enum pt_status write_meta(const struct pt_mkmodel_opts *o, const struct pt_hparams *hp,
				 const struct vocab *v, pt_gguf_writer *w,
				 struct pt_error *err)
{
	enum pt_status st;
	char name[96];
	snprintf(name, sizeof name, "particle synthetic %s %s %s", hp->arch_name, o->preset,
		 pt_mix_name(o->mix));
#define TRY(x)                                                                             \
	do {                                                                               \
		if ((st = (x)) != PT_OK)                                                   \
			return st;                                                         \
	} while (0)
	TRY(pt_gguf_writer_set_str(w, "general.architecture", hp->arch_name, err));
	TRY(pt_gguf_writer_set_str(w, "general.type", "model", err));
	TRY(pt_gguf_writer_set_str(w, "general.name", name, err));
	TRY(pt_gguf_writer_set_str(w, "particle.mkmodel.preset", o->preset, err));
	TRY(pt_gguf_writer_set_u64(w, "particle.mkmodel.seed", o->seed, err));
	TRY(pt_gguf_writer_set_f32(w, "particle.mkmodel.router_skew", (float)o->router_skew, err));
	TRY(pt_arch_write_hparams(hp, w, err));
	if (v->imported)
		TRY(pt_vocab_write_gguf(w, v->imported, err));
	else
		TRY(pt_vocab_write(&v->compact, w, err));
	TRY(pt_gguf_writer_set_u32(w, "general.quantization_version", 2, err));
	TRY(pt_gguf_writer_set_u32(w, "general.file_type", pt_mix_file_type(o->mix), err));
#undef TRY
	return PT_OK;
}

/* Part of each tensor (gguf-split's rule, see mkmodel.h); returns the number of parts. */
static uint32_t plan_parts(const struct pt_mkmodel_opts *o, const struct pt_tensor_list *l,
			   const uint32_t *types, uint32_t *part)
{
	uint32_t cur = 0, in_part = 0;
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < l->n; i++) {
		uint64_t rb = 0;
		pt_type_row_bytes(types[i], l->t[i].ne[0], &rb); /* checked by the caller */
		const uint64_t n = (rb * l->t[i].ne[1] * l->t[i].ne[2] * l->t[i].ne[3] + 31) / 32 * 32;
		bool cut = false;
		if (o->split_max_size)
			cut = in_part > 0 && bytes + n > o->split_max_size;
		else if (o->split_max_tensors)
			cut = i > 0 && i % o->split_max_tensors == 0;
		if (cut) {
			cur++;
			in_part = 0;
			bytes = 0;
		}
		part[i] = cur;
		in_part++;
		bytes += n;
	}
	return cur + 1;
}

static enum pt_status set_u16(pt_gguf_writer *w, const char *key, uint32_t v,
			      struct pt_error *err)
{
	const uint8_t le[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
	return pt_gguf_writer_set_raw(w, key, PT_GGUF_U16, le, 2, err);
}

/* One output file: the whole model, or part p of n (tensors with part[i] == p). */
static enum pt_status write_part(const struct pt_mkmodel_opts *o, const struct pt_hparams *hp,
				 const struct vocab *v, const struct pt_tensor_list *l,
				 const uint32_t *types, const uint32_t *part, uint32_t p,
				 uint32_t n, const char *path, struct writer *wr,
				 struct pt_error *err)
{
	/* parts after the first carry only the split keys (no general.alignment), as gguf-split */
	enum pt_status st = pt_gguf_writer_create(path, p == 0 ? 32 : 0, &wr->w, err);
	if (st == PT_OK && p == 0)
		st = write_meta(o, hp, v, wr->w, err);
	if (st == PT_OK && part) {
		st = set_u16(wr->w, "split.no", p, err);
		if (st == PT_OK)
			st = set_u16(wr->w, "split.count", n, err);
		if (st == PT_OK)
			st = pt_gguf_writer_set_i32(wr->w, "split.tensors.count", (int32_t)l->n, err);
	}
	for (uint32_t i = 0; st == PT_OK && i < l->n; i++)
		if (!part || part[i] == p)
			st = pt_gguf_writer_add_tensor(wr->w, l->t[i].name, l->t[i].n_dims,
						       l->t[i].ne, types[i], err);
	if (st == PT_OK)
		st = pt_gguf_writer_begin_data(wr->w, err);
	for (uint32_t i = 0; st == PT_OK && i < l->n; i++)
		if (!part || part[i] == p)
			st = write_tensor(wr, &l->t[i], types[i], err);
	enum pt_status dst = drain(wr, err);
	st = st != PT_OK ? st : dst;
	if (st == PT_OK)
		st = pt_gguf_writer_finish(wr->w, err);
	return st;
}

/* The output's filesystem must hold the tensor bytes plus 64 MiB (metadata, vocabulary,
 * margin) before anything is written: the true-size presets (deepseek-v3, kimi-k2: hundreds
 * of GB) are refused up front, not after hours at a full disk. */
static enum pt_status check_space(const char *out_path, uint64_t bytes, struct pt_error *err)
{
	char dir[4096];
	const char *slash = strrchr(out_path, '/');
	struct statvfs vfs;
	if (slash)
		snprintf(dir, sizeof dir, "%.*s", (int)(slash == out_path ? 1 : slash - out_path),
			 out_path);
	else
		snprintf(dir, sizeof dir, ".");
	if (statvfs(dir, &vfs) != 0)
		return PT_OK; /* the writer reports a bad directory itself */
	const uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize, need = bytes + (64u << 20);
	if (need > avail)
		return pt_error_set(err, PT_E_IO, "not enough free space in %s for the model: need "
				    "%.1f GiB, %.1f GiB available", dir, need / 1073741824.0,
				    avail / 1073741824.0);
	return PT_OK;
}

/* Tensor data bytes of the file (unpadded). */
static enum pt_status tensor_bytes(const struct pt_tensor_list *l, const uint32_t *types,
				   uint64_t *total, struct pt_error *err)
{
	*total = 0;
	for (uint32_t i = 0; i < l->n; i++) {
		uint64_t rb;
		if (pt_type_row_bytes(types[i], l->t[i].ne[0], &rb) != 0)
			return pt_error_set(err, PT_E_INVALID, "%s: bad row for %s", l->t[i].name,
					    pt_type_name(types[i]));
		*total += rb * l->t[i].ne[1] * l->t[i].ne[2];
	}
	return PT_OK;
}

static enum pt_status write_file(const struct pt_mkmodel_opts *o, const struct pt_hparams *hp,
				 const struct vocab *v, const struct pt_tensor_list *l,
				 const uint32_t *types, struct writer *wr, struct pt_error *err)
{
	enum pt_status tst = tensor_bytes(l, types, &wr->total, err);
	if (tst != PT_OK)
		return tst;
	enum pt_status sst = check_space(o->out_path, wr->total, err);
	if (sst != PT_OK)
		return sst;
	if (!o->split_max_size && !o->split_max_tensors)
		return write_part(o, hp, v, l, types, NULL, 0, 1, o->out_path, wr, err);
	uint32_t *part = pt_mallocn(l->n ? l->n : 1, sizeof *part);
	if (!part)
		return pt_error_set(err, PT_E_NOMEM, "out of memory");
	const uint32_t n = plan_parts(o, l, types, part);
	size_t plen = strlen(o->out_path);
	if (plen >= 5 && !strcmp(o->out_path + plen - 5, ".gguf"))
		plen -= 5;
	char *path = pt_malloc(plen + 24);
	enum pt_status st = path ? PT_OK : pt_error_set(err, PT_E_NOMEM, "out of memory");
	if (st == PT_OK && n > PT_GGUF_MAX_PARTS)
		st = pt_error_set(err, PT_E_INVALID, "the split would make %u parts, at most %d", n,
				  PT_GGUF_MAX_PARTS);
	uint32_t done = 0;
	for (uint32_t p = 0; st == PT_OK && p < n; p++) {
		snprintf(path, plen + 24, "%.*s-%05u-of-%05u.gguf", (int)plen, o->out_path, p + 1, n);
		st = write_part(o, hp, v, l, types, part, p, n, path, wr, err);
		pt_gguf_writer_destroy(wr->w); /* removes the file unless finished */
		wr->w = NULL;
		done += st == PT_OK;
	}
	/* a failed split leaves no parts behind that could pass for a whole model */
	for (uint32_t p = 0; st != PT_OK && path && p < done; p++) {
		snprintf(path, plen + 24, "%.*s-%05u-of-%05u.gguf", (int)plen, o->out_path, p + 1, n);
		unlink(path);
	}
	pt_free(path);
	pt_free(part);
	return st;
}

static enum pt_status prepare(const struct pt_mkmodel_opts *o, struct pt_hparams *hp,
			      struct vocab *v, struct pt_error *err)
{
	enum pt_status st = pt_arch_preset(o->arch, o->preset, o->n_layer, hp, err);
	if (st != PT_OK)
		return st;
	if (o->arch_name) {
		enum pt_arch a;
		if (pt_arch_from_name(o->arch_name, &a) != 0 || a != o->arch)
			return pt_error_set(err, PT_E_INVALID, "'%s' is not a name of %s",
					    o->arch_name, pt_arch_name(o->arch));
		snprintf(hp->arch_name, sizeof hp->arch_name, "%s", o->arch_name);
	}
	if (o->vocab_dir && o->vocab_gguf)
		return pt_error_set(err, PT_E_INVALID, "--vocab and --vocab-gguf exclude each other");
	if (o->vocab_gguf) {
		if ((st = vocab_from_gguf(o->vocab_gguf, o->arch, v, err)) != PT_OK)
			return st;
		hp->n_vocab = v->imported->n_tokens;
	} else if (o->vocab_dir) {
		/* full presets keep the real vocabulary size (padded with [PADi]) */
		struct pt_vocab_import_opts io = { .arch = hp->arch_name,
						   .vocab_size = hp->n_vocab };
		if ((st = pt_vocab_import_hf(o->vocab_dir, &io, &v->imported, err)) != PT_OK)
			return st;
		hp->n_vocab = v->imported->n_tokens;
	} else {
		if ((st = pt_vocab_compact(o->arch, hp->n_vocab, &v->compact, err)) != PT_OK)
			return st;
		if (hp->preset_tok_pre) /* the real model's pre-tokenizer over the compact vocab */
			v->compact.pre = hp->preset_tok_pre;
		hp->n_vocab = v->compact.n;
	}
	return pt_hparams_validate(hp, err);
}

/* Per-thread generation scratch and nbuf output buffers of a chunk each. */
static enum pt_status buffers_alloc(struct writer *wr, int nbuf, struct pt_error *err)
{
	for (unsigned t = 0; t < wr->o->threads; t++)
		if (!(wr->scratch[t] = pt_mallocn(PT_MKMODEL_CHUNK_ELEMS, sizeof(float))))
			return pt_error_set(err, PT_E_NOMEM, "out of memory for chunk buffers");
	for (int b = 0; b < nbuf; b++)
		if (!(wr->outbuf[b] = pt_mallocn((size_t)PT_MKMODEL_CHUNK_ELEMS * wr->o->threads,
						 sizeof(float))))
			return pt_error_set(err, PT_E_NOMEM, "out of memory for chunk buffers");
	wr->out = wr->outbuf[0];
	return PT_OK;
}

static void buffers_free(struct writer *wr)
{
	for (unsigned t = 0; t < PT_MKMODEL_MAX_THREADS; t++)
		pt_free(wr->scratch[t]);
	pt_free(wr->outbuf[0]);
	pt_free(wr->outbuf[1]);
}

enum pt_status pt_mkmodel_write(const struct pt_mkmodel_opts *o, struct pt_error *err)
{
	struct pt_hparams hp;
	struct vocab v = { 0 };
	struct pt_tensor_list l = { 0 };
	struct writer wr = { .o = o, .hp = &hp, .chunk_rows_cap = PT_MKMODEL_CHUNK_ELEMS,
			     .last_pct = -1 };
	uint32_t *types = NULL;
	if (o->threads == 0 || o->threads > PT_MKMODEL_MAX_THREADS)
		return pt_error_set(err, PT_E_INVALID, "threads must be 1..%d",
				    PT_MKMODEL_MAX_THREADS);
	struct pt_mkmodel_opts ro = *o;
	if (o->skew_real) {
		ro.router_skew = pt_mkmodel_real_skew(o->arch);
		o = &ro;
		wr.o = o;
	}
	enum pt_status st = prepare(o, &hp, &v, err);
	if (st == PT_OK)
		st = pt_arch_tensors(&hp, &l, err);
	if (st == PT_OK && !(types = pt_mallocn(l.n, sizeof *types)))
		st = pt_error_set(err, PT_E_NOMEM, "out of memory");
	if (st == PT_OK)
		st = buffers_alloc(&wr, 2, err);
	if (st == PT_OK) {
		pt_mix_assign(o->mix, &hp, &l, types);
		st = write_file(o, &hp, &v, &l, types, &wr, err);
	}
	pt_gguf_writer_destroy(wr.w); /* removes the file unless finished */
	buffers_free(&wr);
	pt_free(types);
	pt_tensor_list_free(&l);
	vocab_free(&v);
	return st;
}

enum pt_status pt_mkmodel_size(const struct pt_mkmodel_opts *o, uint64_t *bytes,
				struct pt_error *err)
{
	struct pt_hparams hp;
	struct vocab v = { 0 };
	struct pt_tensor_list l = { 0 };
	uint32_t *types = NULL;
	*bytes = 0;
	enum pt_status st = prepare(o, &hp, &v, err);
	if (st == PT_OK)
		st = pt_arch_tensors(&hp, &l, err);
	if (st == PT_OK && !(types = pt_mallocn(l.n ? l.n : 1, sizeof *types)))
		st = pt_error_set(err, PT_E_NOMEM, "out of memory");
	if (st == PT_OK) {
		pt_mix_assign(o->mix, &hp, &l, types);
		st = tensor_bytes(&l, types, bytes, err);
	}
	pt_free(types);
	pt_tensor_list_free(&l);
	vocab_free(&v);
	return st;
}

/* ---- in-place rerouting ------------------------------------------------------------------ */

/* What a file says about how it was generated: general.name "particle synthetic ARCH PRESET
 * MIX" and the particle.mkmodel.* keys.  *skew_off: file offset of the router_skew f32. */
static enum pt_status identify(const pt_gguf *g, struct pt_mkmodel_opts *o, char *preset,
			       struct pt_hparams *hp, uint64_t *skew_off, struct pt_error *err)
{
	struct pt_str name = { 0 }, pre = { 0 };
	char arch[32] = "", mix[16] = "", pre_name[16] = "", buf[128];
	const struct pt_gguf_kv *kv = pt_gguf_find_kv(g, "particle.mkmodel.router_skew");
	bool f1 = false, f2 = false, f3 = false;
	if (pt_gguf_get_str(g, "general.name", &name, &f1, err) != PT_OK || !f1 ||
	    name.len >= sizeof buf ||
	    pt_gguf_get_str(g, "particle.mkmodel.preset", &pre, &f2, err) != PT_OK || !f2 ||
	    !kv || kv->type != PT_GGUF_F32 ||
	    pt_gguf_get_u64(g, "particle.mkmodel.seed", 0, &o->seed, &f3, err) != PT_OK || !f3)
		return pt_error_set(err, PT_E_INVALID, "not a file written by particle mkmodel");
	memcpy(buf, name.ptr, name.len);
	buf[name.len] = 0;
	if (sscanf(buf, "particle synthetic %31s %15s %15s", arch, pre_name, mix) != 3 ||
	    !pt_str_eq(pre, pre_name) || pt_mix_from_name(mix, &o->mix) != 0 ||
	    pt_arch_from_name(arch, &o->arch) != 0)
		return pt_error_set(err, PT_E_INVALID, "not a file written by particle mkmodel "
				    "(general.name '%s')", buf);
	snprintf(preset, 16, "%s", pre_name);
	o->preset = preset;
	*skew_off = kv->value_offset;
	return pt_arch_read_hparams(g, hp, err);
}

/* The file's tensors must be exactly those mkmodel writes for its arch, preset, layers and
 * mixture: same names, order, shapes and types (so every rewritten byte lands where a
 * fresh file has it). */
static enum pt_status check_layout(const pt_gguf *g, const struct pt_tensor_list *l,
				   const uint32_t *types, struct pt_error *err)
{
	if (pt_gguf_tensor_count(g) != l->n || pt_gguf_alignment(g) != 32)
		return pt_error_set(err, PT_E_INVALID, "layout differs from mkmodel's: %llu "
				    "tensors, expected %u", (unsigned long long)pt_gguf_tensor_count(g),
				    l->n);
	for (uint32_t i = 0; i < l->n; i++) {
		const struct pt_gguf_tensor *t = pt_gguf_tensor_at(g, i);
		const struct pt_tensor_desc *d = &l->t[i];
		bool same = pt_str_eq(t->name, d->name) && t->type == types[i] &&
			    t->n_dims == d->n_dims;
		for (int k = 0; k < 4 && same; k++)
			same = t->ne[k] == (d->ne[k] ? d->ne[k] : 1);
		if (!same)
			return pt_error_set(err, PT_E_INVALID, "layout differs from mkmodel's at "
					    "tensor %u (%s)", i, d->name);
	}
	return PT_OK;
}

static enum pt_status put(int fd, const void *p, size_t n, uint64_t off, bool sync,
			  struct pt_error *err)
{
	for (size_t done = 0; done < n;) {
		ssize_t w = pwrite(fd, (const uint8_t *)p + done, n - done, (off_t)(off + done));
		if (w <= 0)
			return pt_error_sys(err, PT_E_IO, errno, "reroute: write");
		done += (size_t)w;
	}
	if (sync && fdatasync(fd) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "reroute: fdatasync");
	return PT_OK;
}

/* Regenerates every skew-dependent tensor at its offset. */
static enum pt_status rewrite_tensors(struct writer *wr, const pt_gguf *g, int fd,
				      const struct pt_tensor_list *l, const uint32_t *types,
				      struct pt_error *err)
{
	enum pt_status st = PT_OK;
	for (uint32_t i = 0; i < l->n; i++)
		if (pt_mkmodel_skew_dependent(&l->t[i]))
			wr->total += pt_gguf_tensor_at(g, i)->nbytes;
	for (uint32_t i = 0; st == PT_OK && i < l->n; i++) {
		const struct pt_tensor_desc *d = &l->t[i];
		const uint64_t off = pt_gguf_tensor_at(g, i)->file_offset;
		uint64_t rb, rows = d->ne[1] * d->ne[2] * d->ne[3];
		if (!pt_mkmodel_skew_dependent(d))
			continue;
		if (pt_type_row_bytes(types[i], d->ne[0], &rb) != 0)
			return pt_error_set(err, PT_E_INVALID, "%s: bad row", d->name);
		const uint64_t step = chunk_rows(wr, d);
		for (uint64_t r = 0; st == PT_OK && r < rows; r += step) {
			const uint64_t n = rows - r < step ? rows - r : step;
			st = fill_chunk(wr, d, types[i], rb, r, n, wr->out, err);
			if (st == PT_OK)
				st = put(fd, wr->out, n * rb, off + r * rb, false, err);
		}
	}
	return st;
}

/* Marks the file (skew = NaN), rewrites, then writes the new skew, syncing between. */
static enum pt_status reroute_file(struct writer *wr, const pt_gguf *g, const char *path,
				   uint64_t skew_off, const struct pt_tensor_list *l,
				   const uint32_t *types, int locked_fd, struct pt_error *err)
{
	const float nan_mark = NAN, skew = (float)wr->o->router_skew;
	struct stat a, b;
	int fd;
	/* In place, so never through a link (safefile.h), and only the very file we locked
	 * and read: the name could have been replaced since. */
	enum pt_status st = pt_safe_open_named_rw(path, &fd, err);
	if (st != PT_OK)
		return st;
	if (locked_fd >= 0 && (fstat(fd, &a) != 0 || fstat(locked_fd, &b) != 0 ||
			       a.st_dev != b.st_dev || a.st_ino != b.st_ino)) {
		close(fd);
		return pt_error_set(err, PT_E_IO, "reroute: %s was replaced while we read it", path);
	}
	st = put(fd, &nan_mark, sizeof nan_mark, skew_off, true, err);
	if (st == PT_OK)
		st = rewrite_tensors(wr, g, fd, l, types, err);
	if (st == PT_OK && fdatasync(fd) != 0)
		st = pt_error_sys(err, PT_E_IO, errno, "reroute: fdatasync");
	if (st == PT_OK)
		st = put(fd, &skew, sizeof skew, skew_off, true, err);
	/* synced: out of the page cache, as every file the GGUF writer commits (its written
	 * pages sit there in small folios and slow every run mapping them: safefile.h) */
	if (st == PT_OK)
		pt_drop_page_cache(fd);
	if (close(fd) != 0 && st == PT_OK)
		st = pt_error_sys(err, PT_E_IO, errno, "reroute: close");
	return st;
}

enum pt_status pt_mkmodel_reroute(const struct pt_mkmodel_opts *o, struct pt_error *err)
{
	struct pt_mkmodel_opts fo = *o;
	struct pt_hparams hp, hpf;
	struct pt_tensor_list l = { 0 };
	struct writer wr = { .o = &fo, .hp = &hp, .chunk_rows_cap = PT_MKMODEL_CHUNK_ELEMS,
			     .last_pct = -1 };
	uint32_t *types = NULL;
	uint64_t skew_off = 0;
	char preset[16];
	pt_gguf *g = NULL;
	struct pt_model_lock lk = { .fd = -1 };
	if (o->threads == 0 || o->threads > PT_MKMODEL_MAX_THREADS)
		return pt_error_set(err, PT_E_INVALID, "threads must be 1..%d",
				    PT_MKMODEL_MAX_THREADS);
	/* not under a running particle (it would read weights as they change) */
	enum pt_status st = pt_model_lock_acquire(&lk, o->out_path, NULL, err);
	if (st == PT_OK)
		st = pt_gguf_open(o->out_path, &g, err);
	/* the tensors it rewrites could sit in any part: split models are refused, not handled */
	if (st == PT_OK && pt_gguf_part_count(g) > 1)
		st = pt_error_set(err, PT_E_UNSUPPORTED,
				  "--reroute: %s is part of a %u-part split model; reroute the "
				  "single file (mkmodel without --split-max-size) instead",
				  o->out_path, pt_gguf_part_count(g));
	if (st == PT_OK)
		st = identify(g, &fo, preset, &hpf, &skew_off, err);
	if (st == PT_OK && o->skew_real)
		fo.router_skew = pt_mkmodel_real_skew(fo.arch);
	const struct pt_gguf_tensor *emb = g ? pt_gguf_find_tensor(g, "token_embd.weight") : NULL;
	if (st == PT_OK && !emb)
		st = pt_error_set(err, PT_E_INVALID, "not a file written by particle mkmodel");
	if (st == PT_OK)
		st = pt_arch_preset(fo.arch, fo.preset, hpf.n_layer, &hp, err);
	if (st == PT_OK) {
		memcpy(hp.arch_name, hpf.arch_name, sizeof hp.arch_name);
		hp.n_vocab = (uint32_t)emb->ne[1];
		st = pt_hparams_validate(&hp, err);
	}
	if (st == PT_OK)
		st = pt_arch_tensors(&hp, &l, err);
	if (st == PT_OK && !(types = pt_mallocn(l.n, sizeof *types)))
		st = pt_error_set(err, PT_E_NOMEM, "out of memory");
	if (st == PT_OK) {
		pt_mix_assign(fo.mix, &hp, &l, types);
		st = check_layout(g, &l, types, err);
	}
	if (st == PT_OK)
		st = buffers_alloc(&wr, 1, err);
	if (st == PT_OK)
		st = reroute_file(&wr, g, o->out_path, skew_off, &l, types, lk.fd, err);
	buffers_free(&wr);
	pt_free(types);
	pt_tensor_list_free(&l);
	pt_gguf_close(g);
	pt_model_lock_release(&lk);
	return st;
}
