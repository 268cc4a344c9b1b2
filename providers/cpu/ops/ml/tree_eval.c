/*
 * tree_eval: runs a compiled ensemble (tree.h) over the rows of X and sums
 * what the leaves give each output.
 *
 * Eight walks advance together, one step each per round, so their loads
 * overlap instead of waiting on one another: eight rows through one tree
 * (blocks of rows, tree by tree, so a tree's nodes stay in cache while a
 * block goes through it) or, for fewer than eight rows, one row through
 * eight trees.  Every walk takes its tree's depth in steps (a leaf keeps
 * it where it is), so there is no branch on the data to mispredict.  Per
 * row the trees are summed in model order, in float (double for double
 * X), as ONNX Runtime sums them on one thread, so the results agree bit
 * for bit.
 *
 * Large batches split their rows over the intra-op pool; small batches
 * with many trees split the trees into a fixed number of chunks summed
 * in order afterwards (deterministic, whatever thread ran which chunk).
 * Double X walks one tree at a time with double thresholds.
 */
#include <math.h>
#include <string.h>

#include "par.h"
#include "tree.h"

#define LANES 8
#define ROW_BLOCK 64
#define MAX_CHUNKS 16

static inline int goes_true(int mode, float v, float t)
{
	switch (mode) {
	case TREE_LEQ: return v <= t;
	case TREE_LT: return v < t;
	case TREE_GTE: return v >= t;
	case TREE_GT: return v > t;
	case TREE_EQ: return v == t;
	default: return v != t;
	}
}

static inline int goes_true64(int mode, double v, double t)
{
	switch (mode) {
	case TREE_LEQ: return v <= t;
	case TREE_LT: return v < t;
	case TREE_GTE: return v >= t;
	case TREE_GT: return v > t;
	case TREE_EQ: return v == t;
	default: return v != t;
	}
}

/* LANES walks of `steps` steps; mode and missing are constants where
 * walk() calls it, so each call site compiles to its own tight loop. */
static inline void walk_lanes(const tree_ens *e, int mode, int missing,
			      const float *const *x, int32_t *idx, int steps)
{
	const tree_node *nodes = e->nodes;

	for (int s = 0; s < steps; s++) {
		for (int l = 0; l < LANES; l++) {
			const tree_node *nd = nodes + idx[l];
			float v = x[l][nd->feature];
			int m = mode == TREE_MIXED ? e->flags[idx[l]] & 15 : mode;
			int t = goes_true(m, v, nd->thr);

			if (missing)
				t |= (e->flags[idx[l]] & TREE_MISSING_TRUE) && isnan(v);
			idx[l] += nd->inc[t];
		}
	}
}

static inline void walk(const tree_ens *e, const float *const *x, int32_t *idx, int steps)
{
	if (!e->missing && e->mode == TREE_LEQ)
		walk_lanes(e, TREE_LEQ, 0, x, idx, steps);
	else if (!e->missing && e->mode == TREE_LT)
		walk_lanes(e, TREE_LT, 0, x, idx, steps);
	else if (!e->missing)
		walk_lanes(e, TREE_MIXED, 0, x, idx, steps);
	else if (e->mode == TREE_LEQ)
		walk_lanes(e, TREE_LEQ, 1, x, idx, steps);
	else if (e->mode == TREE_LT)
		walk_lanes(e, TREE_LT, 1, x, idx, steps);
	else
		walk_lanes(e, TREE_MIXED, 1, x, idx, steps);
}

static int32_t walk64(const tree_ens *e, const double *x, int32_t i)
{
	for (;;) {
		const tree_node *nd = &e->nodes[i];
		double v;
		int t;

		if (nd->inc[1] == 0 && nd->inc[0] == 0)
			return i;
		v = x[nd->feature];
		t = goes_true64(e->flags[i] & 15, v, e->thr64[i]) ||
			((e->flags[i] & TREE_MISSING_TRUE) && isnan(v));
		i += nd->inc[t];
	}
}

/* One weight w into one output (score s, has h): in float (X not double,
 * as ONNX Runtime sums there) or in double. */
static inline void apply_f(int agg, float *s, uint8_t *h, float w)
{
	if (agg == TREE_MIN)
		*s = !*h || w < *s ? w : *s;
	else if (agg == TREE_MAX)
		*s = !*h || w > *s ? w : *s;
	else
		*s += w;
	*h = 1;
}

static inline void apply_d(int agg, double *s, uint8_t *h, double w)
{
	if (agg == TREE_MIN)
		*s = !*h || w < *s ? w : *s;
	else if (agg == TREE_MAX)
		*s = !*h || w > *s ? w : *s;
	else
		*s += w;
	*h = 1;
}

/* What leaf gives a row's outputs (score, has: K of each). */
static inline void add_leaf_f(const tree_ens *e, int32_t leaf, float *score, uint8_t *has)
{
	if (e->single) {
		apply_f(e->agg, score, has, e->nodes[leaf].thr);
		return;
	}
	if (e->dense && e->agg == TREE_SUM) {
		/* has is set for every output at the end (tree_eval) */
		const float *w = e->wval + e->wfirst[leaf];

		for (int64_t k = 0; k < e->n_out; k++)
			score[k] += w[k];
		return;
	}
	for (int32_t w = e->wfirst[leaf], end = w + e->wcount[leaf]; w < end; w++)
		apply_f(e->agg, &score[e->wtarget[w]], &has[e->wtarget[w]], e->wval[w]);
}

static inline void add_leaf_d(const tree_ens *e, int32_t leaf, double *score, uint8_t *has)
{
	if (e->single) {
		apply_d(e->agg, score, has, e->thr64[leaf]);
		return;
	}
	for (int32_t w = e->wfirst[leaf], end = w + e->wcount[leaf]; w < end; w++)
		apply_d(e->agg, &score[e->wtarget[w]], &has[e->wtarget[w]], e->wval64[w]);
}

/* Accumulators are float (fs) or double (ds), per x64. */
typedef struct te_job {
	const tree_ens *e;
	const void *x;
	int x64;
	int64_t N, C, K;
	float *fs;
	double *ds;
	uint8_t *has;
	int64_t n_chunks;             /* chunk c's sums at offset c * N * K */
} te_job;

/* Rows [r0, r1) through trees [t0, t1), LANES rows at a time. */
CPU_MULTIVERSION
static void eval_rows(const te_job *j, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
		      float *score, uint8_t *has)
{
	const tree_ens *e = j->e;
	const float *x = j->x;

	for (int64_t b0 = r0; b0 < r1; b0 += ROW_BLOCK) {
		int64_t b1 = b0 + ROW_BLOCK < r1 ? b0 + ROW_BLOCK : r1;

		for (int64_t t = t0; t < t1; t++) {
			for (int64_t g = b0; g < b1; g += LANES) {
				int nl = b1 - g < LANES ? (int)(b1 - g) : LANES;
				const float *xs[LANES];
				int32_t idx[LANES];

				for (int l = 0; l < LANES; l++) {
					xs[l] = x + (g + (l < nl ? l : nl - 1)) * j->C;
					idx[l] = e->roots[t];
				}
				walk(e, xs, idx, e->depth[t]);
				for (int l = 0; l < nl; l++)
					add_leaf_f(e, idx[l], score + (g + l) * j->K,
						   has + (g + l) * j->K);
			}
		}
	}
}

/* One row through trees [t0, t1), LANES trees at a time. */
CPU_MULTIVERSION
static void eval_trees(const te_job *j, const float *xrow, int64_t t0, int64_t t1,
		       float *score, uint8_t *has)
{
	const tree_ens *e = j->e;

	for (int64_t t = t0; t < t1; t += LANES) {
		int nl = t1 - t < LANES ? (int)(t1 - t) : LANES, steps = 0;
		const float *xs[LANES];
		int32_t idx[LANES];

		for (int l = 0; l < LANES; l++) {
			int64_t tt = t + (l < nl ? l : nl - 1);

			xs[l] = xrow;
			idx[l] = e->roots[tt];
			steps = e->depth[tt] > steps ? e->depth[tt] : steps;
		}
		walk(e, xs, idx, steps);
		for (int l = 0; l < nl; l++)
			add_leaf_f(e, idx[l], score, has);
	}
}

/* Rows [r0, r1), trees [t0, t1), into the sums at offset `at` (0, or a
 * tree chunk's). */
static void eval_range(const te_job *j, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
		       int64_t at)
{
	const tree_ens *e = j->e;
	uint8_t *has = j->has + at;

	if (j->x64) {
		const double *x = j->x;
		double *score = j->ds + at;

		for (int64_t r = r0; r < r1; r++)
			for (int64_t t = t0; t < t1; t++)
				add_leaf_d(e, walk64(e, x + r * j->C, e->roots[t]), score + r * j->K,
					   has + r * j->K);
	} else if (r1 - r0 >= LANES) {
		eval_rows(j, r0, r1, t0, t1, j->fs + at, has);
	} else {
		for (int64_t r = r0; r < r1; r++)
			eval_trees(j, (const float *)j->x + r * j->C, t0, t1, j->fs + at + r * j->K,
				   has + r * j->K);
	}
}

static void par_rows(void *arg, int64_t begin, int64_t end, int member)
{
	const te_job *j = arg;

	(void)member;
	eval_range(j, begin, end, 0, j->e->n_trees, 0);
}

static void par_chunks(void *arg, int64_t begin, int64_t end, int member)
{
	const te_job *j = arg;
	int64_t T = j->e->n_trees, nk = j->N * j->K;

	(void)member;
	for (int64_t c = begin; c < end; c++)
		eval_range(j, 0, j->N, T * c / j->n_chunks, T * (c + 1) / j->n_chunks, c * nk);
}

/* Chunk partials into chunk 0's, in tree order. */
static void merge_chunks(const te_job *j)
{
	int64_t nk = j->N * j->K;

	for (int64_t c = 1; c < j->n_chunks; c++) {
		for (int64_t i = 0; i < nk; i++) {
			if (!j->has[c * nk + i] && !(j->e->dense && j->e->agg == TREE_SUM && !j->x64))
				continue;
			if (j->x64)
				apply_d(j->e->agg, &j->ds[i], &j->has[i], j->ds[c * nk + i]);
			else
				apply_f(j->e->agg, &j->fs[i], &j->has[i], j->fs[c * nk + i]);
		}
	}
}

int tree_eval(cpu_ctx *ctx, const tree_ens *e, const void *x, int x64, int64_t N, int64_t C,
	      double *score, uint8_t *has)
{
	te_job j = {e, x, x64, N, C, e->single ? 1 : e->n_out, NULL, NULL, NULL, 1};
	int members = cpu_par_members(ctx);
	double ns_row = (double)e->n_trees * (e->max_depth + 2) * (x64 ? 4.0 : 1.0);
	int64_t nk = N * j.K;
	size_t bytes;

	if (members > 1 && N < (int64_t)LANES * members && e->n_trees >= 2 * members &&
	    N * ns_row >= 30000) {
		/* few rows, many trees: fixed tree chunks, each summed apart */
		j.n_chunks = 2 * members < MAX_CHUNKS ? 2 * members : MAX_CHUNKS;
	}
	bytes = (size_t)(j.n_chunks * nk + 1);
	j.has = cpu_scratch(ctx, bytes);
	if (x64)
		j.ds = j.n_chunks > 1 ? cpu_scratch(ctx, bytes * sizeof(double)) : score;
	else
		j.fs = cpu_scratch(ctx, bytes * sizeof(float));
	if (!j.has || (x64 ? !j.ds : !j.fs))
		return CPU_E_NOMEM;
	memset(j.has, 0, bytes);
	if (x64)
		memset(j.ds, 0, bytes * sizeof(double));
	else
		memset(j.fs, 0, bytes * sizeof(float));
	if (N > 0 && e->n_trees > 0) {
		if (j.n_chunks > 1) {
			cpu_par_for(ctx, j.n_chunks, ns_row * (double)N / (double)j.n_chunks, 1,
				    par_chunks, &j);
			merge_chunks(&j);
		} else {
			cpu_par_for(ctx, N, ns_row, LANES, par_rows, &j);
		}
	}
	for (int64_t i = 0; i < nk; i++)
		score[i] = x64 ? j.ds[i] : (double)j.fs[i];
	if (e->dense && e->agg == TREE_SUM && !x64 && e->n_trees > 0)
		memset(j.has, 1, (size_t)nk);
	memcpy(has, j.has, (size_t)nk);
	return 0;
}
