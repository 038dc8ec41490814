/* compare.c - KL divergence, top-1 agreement and top-10 log-probability error between an
 * oracle's and particle's next-token distributions (see compare.h).  Rows are processed one
 * at a time, so dumps of any length use O(n_vocab) memory. */
#include "model/compare.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "util/alloc.h"

struct acc {
	struct pt_compare_stats s;
	double kl_sum;
	uint64_t agree;
};

static double lg(double p)
{
	return log(p > PT_COMPARE_FLOOR ? p : PT_COMPARE_FLOOR);
}

static enum pt_status check_row(const float *r, uint64_t n, uint64_t pos, const char *who,
				struct pt_error *err)
{
	for (uint64_t i = 0; i < n; i++)
		if (!(r[i] >= 0.0f) || !isfinite(r[i]))
			return pt_error_set(err, PT_E_FORMAT,
					    "%s distribution: bad probability %g at position %llu, "
					    "token %llu",
					    who, (double)r[i], (unsigned long long)pos,
					    (unsigned long long)i);
	return PT_OK;
}

static uint64_t argmax(const float *r, uint64_t n)
{
	uint64_t best = 0;
	for (uint64_t i = 1; i < n; i++)
		if (r[i] > r[best])
			best = i;
	return best;
}

/* Indices of the k largest entries (ties: lower index first), k <= PT_COMPARE_TOPK. */
static unsigned topk(const float *r, uint64_t n, uint64_t *idx)
{
	unsigned k = 0, j;
	for (uint64_t i = 0; i < n; i++) {
		if (k < PT_COMPARE_TOPK)
			j = k++;
		else if (r[i] > r[idx[PT_COMPARE_TOPK - 1]])
			j = PT_COMPARE_TOPK - 1;
		else
			continue;
		while (j > 0 && r[i] > r[idx[j - 1]]) {
			idx[j] = idx[j - 1];
			j--;
		}
		idx[j] = i;
	}
	return k;
}

static enum pt_status add_row(struct acc *a, const float *o, const float *p, uint64_t pos,
			      struct pt_error *err)
{
	const uint64_t n = a->s.n_vocab;
	uint64_t idx[PT_COMPARE_TOPK];
	enum pt_status st = check_row(o, n, pos, "oracle", err);
	if (st == PT_OK)
		st = check_row(p, n, pos, "particle", err);
	if (st != PT_OK)
		return st;
	double kl = 0;
	for (uint64_t i = 0; i < n; i++)
		if (o[i] > 0)
			kl += (double)o[i] * (lg(o[i]) - lg(p[i]));
	kl = kl > 0 ? kl : 0; /* rounding of rows that do not sum to exactly 1 */
	a->kl_sum += kl;
	if (pos == 0 || kl > a->s.kl_max) {
		a->s.kl_max = kl;
		a->s.kl_max_pos = pos;
	}
	a->agree += argmax(o, n) == argmax(p, n);
	unsigned k = topk(o, n, idx);
	for (unsigned j = 0; j < k; j++) {
		double d = fabs(lg(o[idx[j]]) - lg(p[idx[j]]));
		if (d > a->s.max_dlogp_top10) {
			a->s.max_dlogp_top10 = d;
			a->s.dlogp_pos = pos;
		}
	}
	a->s.positions++;
	return PT_OK;
}

static void finish(struct acc *a, struct pt_compare_stats *out)
{
	if (a->s.positions) {
		a->s.kl_mean = a->kl_sum / (double)a->s.positions;
		a->s.top1_agree = (double)a->agree / (double)a->s.positions;
	}
	*out = a->s;
}

enum pt_status pt_compare_dists(const float *oracle, const float *particle,
				uint64_t positions, uint64_t n_vocab,
				struct pt_compare_stats *out, struct pt_error *err)
{
	struct acc a = { .s = { .n_vocab = n_vocab } };
	if (positions == 0 || n_vocab == 0)
		return pt_error_set(err, PT_E_INVALID, "nothing to compare (%llu x %llu)",
				    (unsigned long long)positions, (unsigned long long)n_vocab);
	for (uint64_t i = 0; i < positions; i++) {
		enum pt_status st = add_row(&a, oracle + i * n_vocab, particle + i * n_vocab, i, err);
		if (st != PT_OK)
			return st;
	}
	finish(&a, out);
	return PT_OK;
}

static enum pt_status file_rows(FILE *f, const char *path, uint64_t n_vocab, uint64_t *rows,
				struct pt_error *err)
{
	if (fseeko(f, 0, SEEK_END) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot seek %s", path);
	off_t size = ftello(f);
	if (size < 0 || fseeko(f, 0, SEEK_SET) != 0)
		return pt_error_sys(err, PT_E_IO, errno, "cannot seek %s", path);
	uint64_t row_bytes;
	if (pt_mul_overflow(n_vocab, 4, &row_bytes) || row_bytes == 0 ||
	    (uint64_t)size % row_bytes != 0 || size == 0)
		return pt_error_set(err, PT_E_FORMAT,
				    "%s: %lld bytes is not a whole number of %llu-token float32 rows",
				    path, (long long)size, (unsigned long long)n_vocab);
	*rows = (uint64_t)size / row_bytes;
	return PT_OK;
}

static enum pt_status compare_streams(FILE *fo, FILE *fp, uint64_t rows, struct acc *a,
				      float *o, float *p, struct pt_error *err)
{
	for (uint64_t i = 0; i < rows; i++) {
		if (fread(o, sizeof *o, a->s.n_vocab, fo) != a->s.n_vocab ||
		    fread(p, sizeof *p, a->s.n_vocab, fp) != a->s.n_vocab)
			return pt_error_set(err, PT_E_IO, "short read at position %llu",
					    (unsigned long long)i);
		enum pt_status st = add_row(a, o, p, i, err);
		if (st != PT_OK)
			return st;
	}
	return PT_OK;
}

enum pt_status pt_compare_files(const char *oracle_path, const char *particle_path,
				uint64_t n_vocab, struct pt_compare_stats *out,
				struct pt_error *err)
{
	struct acc a = { .s = { .n_vocab = n_vocab } };
	uint64_t ro = 0, rp = 0;
	float *o = NULL, *p = NULL;
	enum pt_status st = PT_OK;
	FILE *fo = fopen(oracle_path, "rb"), *fp = fopen(particle_path, "rb");
	if (!fo || !fp)
		st = pt_error_sys(err, PT_E_IO, errno, "cannot open %s",
				  !fo ? oracle_path : particle_path);
	if (st == PT_OK)
		st = file_rows(fo, oracle_path, n_vocab, &ro, err);
	if (st == PT_OK)
		st = file_rows(fp, particle_path, n_vocab, &rp, err);
	if (st == PT_OK && ro != rp)
		st = pt_error_set(err, PT_E_FORMAT, "%s has %llu positions, %s has %llu",
				  oracle_path, (unsigned long long)ro, particle_path,
				  (unsigned long long)rp);
	if (st == PT_OK && (!(o = pt_mallocn(n_vocab, sizeof *o)) ||
			    !(p = pt_mallocn(n_vocab, sizeof *p))))
		st = pt_error_set(err, PT_E_NOMEM, "out of memory for a %llu-token row",
				  (unsigned long long)n_vocab);
	if (st == PT_OK)
		st = compare_streams(fo, fp, ro, &a, o, p, err);
	if (st == PT_OK)
		finish(&a, out);
	pt_free(o);
	pt_free(p);
	if (fo)
		fclose(fo);
	if (fp)
		fclose(fp);
	return st;
}

void pt_compare_print(FILE *f, const struct pt_compare_stats *s)
{
	fprintf(f, "positions        %llu\n", (unsigned long long)s->positions);
	fprintf(f, "n_vocab          %llu\n", (unsigned long long)s->n_vocab);
	fprintf(f, "kl_mean          %.6g\n", s->kl_mean);
	fprintf(f, "kl_max           %.6g (position %llu)\n", s->kl_max,
		(unsigned long long)s->kl_max_pos);
	fprintf(f, "top1_agreement   %.4f\n", s->top1_agree);
	fprintf(f, "max_dlogp_top10  %.6g (position %llu)\n", s->max_dlogp_top10,
		(unsigned long long)s->dlogp_pos);
}
