/*
 * tfidf: TfIdfVectorizer (opset 9) for int32/int64 token ids.  The pool of
 * n-grams (pool_int64s, grouped by length as ngram_counts says) is hashed
 * once at prepare; compute slides over each row of X, looks every n-gram of
 * length min_gram_length..max_gram_length and every skip 0..max_skip_count
 * up in the table and counts it in the output column ngram_indexes gives it,
 * then weighs the counts (TF, IDF or TFIDF; weights by output column).
 * Unigrams are counted in the first (no skip) pass only, as ONNX Runtime
 * and the ONNX reference do.  String pools are refused in supports().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h"

enum { TF_TF, TF_IDF, TF_TFIDF };

/* One pool n-gram: tokens pool[start .. start + len), output column out. */
typedef struct tf_entry {
	int64_t start, out;
	int64_t len;                  /* 0: empty slot */
} tf_entry;

typedef struct tf_state {
	int mode;
	int64_t min_gram, max_gram, max_skip;
	int64_t n_out;                /* C: max(ngram_indexes) + 1 */
	int64_t *pool;                /* copy of pool_int64s */
	tf_entry *table;              /* open addressing, mask + 1 slots */
	uint64_t mask;
	float *w;                     /* n_out weights, NULL for all 1 */
} tf_state;

static uint64_t gram_hash(const int64_t *t, int64_t n)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)n;
	for (int64_t i = 0; i < n; i++) {
		h = (h ^ (uint64_t)t[i]) * 1099511628211ull;
		h ^= h >> 29;
	}
	return h;
}

/* The slot holding gram t[0..n), or the empty slot where it would go. */
static tf_entry *gram_slot(const tf_state *st, const int64_t *t, int64_t n)
{
	uint64_t i = gram_hash(t, n) & st->mask;
	for (;; i = (i + 1) & st->mask) {
		tf_entry *e = &st->table[i];
		if (!e->len || (e->len == n &&
		    !memcmp(st->pool + e->start, t, (size_t)n * sizeof(int64_t))))
			return e;
	}
}

static int tf_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)opset;
	if (cpu_attr(p, "pool_strings")) {
		snprintf(why, n, "pool_strings (string input) is not supported");
		return 0;
	}
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_INDEX, why, n);
}

static void tf_release(cpu_node *node)
{
	tf_state *st = node->state;
	if (st) {
		free(st->pool);
		free(st->table);
		free(st->w);
		free(st);
	}
	node->state = NULL;
}

static int tf_parse_scalars(const Onnx__NodeProto *p, tf_state *st, char *err, size_t n)
{
	char mode[16] = "";
	if (!cpu_attr_str(p, "mode", mode, sizeof(mode))) {
		snprintf(err, n, "TfIdfVectorizer needs the mode attribute");
		return CPU_E_INVALID;
	}
	if (!strcmp(mode, "TF")) {
		st->mode = TF_TF;
	} else if (!strcmp(mode, "IDF")) {
		st->mode = TF_IDF;
	} else if (!strcmp(mode, "TFIDF")) {
		st->mode = TF_TFIDF;
	} else {
		snprintf(err, n, "unknown mode '%s'", mode);
		return CPU_E_INVALID;
	}
	st->min_gram = cpu_attr_int(p, "min_gram_length", 0);
	st->max_gram = cpu_attr_int(p, "max_gram_length", 0);
	st->max_skip = cpu_attr_int(p, "max_skip_count", 0);
	if (st->min_gram < 1 || st->max_gram < st->min_gram || st->max_skip < 0) {
		snprintf(err, n, "bad gram lengths [%lld, %lld] or max_skip_count %lld",
			 (long long)st->min_gram, (long long)st->max_gram,
			 (long long)st->max_skip);
		return CPU_E_INVALID;
	}
	return 0;
}

/* Hashes the pool's n-grams: level k of ngram_counts holds (k+1)-grams from
 * pool index counts[k] up to the next level's start. */
static int tf_build_table(tf_state *st, const int64_t *counts, size_t n_levels,
			  int64_t pool_len, const int64_t *idx, size_t n_idx, char *err,
			  size_t n)
{
	size_t g = 0, slots = 2;
	while (slots < 2 * n_idx)
		slots *= 2;
	if (!(st->table = calloc(slots, sizeof(*st->table))))
		return CPU_E_NOMEM;
	st->mask = slots - 1;
	for (size_t k = 0; k < n_levels; k++) {
		int64_t len = (int64_t)k + 1;
		int64_t end = k + 1 < n_levels ? counts[k + 1] : pool_len;
		if (counts[k] < 0 || end < counts[k] || end > pool_len ||
		    (end - counts[k]) % len != 0) {
			snprintf(err, n, "ngram_counts[%zu] does not delimit %lld-grams in the "
				 "pool", k, (long long)len);
			return CPU_E_INVALID;
		}
		for (int64_t s = counts[k]; s < end; s += len, g++) {
			tf_entry *e;
			if (g >= n_idx || idx[g] < 0) {
				snprintf(err, n, "ngram_indexes is short or negative at %zu", g);
				return CPU_E_INVALID;
			}
			e = gram_slot(st, st->pool + s, len);
			if (!e->len)   /* a repeated n-gram keeps its first column */
				*e = (tf_entry){s, idx[g], len};
		}
	}
	if (g != n_idx) {
		snprintf(err, n, "ngram_indexes has %zu entries for %zu n-grams", n_idx, g);
		return CPU_E_INVALID;
	}
	return 0;
}

static int tf_parse_pool(const Onnx__NodeProto *p, tf_state *st, char *err, size_t n)
{
	const int64_t *counts, *idx, *pool;
	const float *w;
	size_t n_counts = cpu_attr_ints(p, "ngram_counts", &counts);
	size_t n_idx = cpu_attr_ints(p, "ngram_indexes", &idx);
	size_t n_pool = cpu_attr_ints(p, "pool_int64s", &pool);
	size_t n_w = cpu_attr_floats(p, "weights", &w);
	int rc;

	for (size_t i = 0; i < n_idx; i++)
		st->n_out = idx[i] + 1 > st->n_out ? idx[i] + 1 : st->n_out;
	if (!(st->pool = malloc(n_pool * sizeof(int64_t) + 1)))
		return CPU_E_NOMEM;
	if (n_pool)
		memcpy(st->pool, pool, n_pool * sizeof(int64_t));
	rc = tf_build_table(st, counts, n_counts, (int64_t)n_pool, idx, n_idx, err, n);
	/* no pool n-gram is longer than the levels of ngram_counts */
	if (st->max_gram > (int64_t)n_counts)
		st->max_gram = (int64_t)n_counts;
	if (rc || !n_w)
		return rc;
	if (n_w < (size_t)st->n_out) {
		snprintf(err, n, "weights has %zu values for %lld outputs", n_w,
			 (long long)st->n_out);
		return CPU_E_INVALID;
	}
	if (!(st->w = malloc(n_w * sizeof(float))))
		return CPU_E_NOMEM;
	memcpy(st->w, w, n_w * sizeof(float));
	return 0;
}

static int tf_prepare(cpu_node *node, char *err, size_t n)
{
	tf_state *st = calloc(1, sizeof(*st));
	int rc;
	if (!st)
		return CPU_E_NOMEM;
	node->state = st;
	if (cpu_attr(node->proto, "pool_strings")) {
		snprintf(err, n, "pool_strings (string input) is not supported");
		rc = CPU_E_UNSUPPORTED;
	} else if ((rc = tf_parse_scalars(node->proto, st, err, n)) == 0) {
		rc = tf_parse_pool(node->proto, st, err, n);
	}
	if (rc)
		tf_release(node);
	return rc;
}

/* Counts the pool n-grams of one row x[0..len) into y[0..n_out). */
static void tf_row(const tf_state *st, int32_t dt, const void *x, int64_t base, int64_t len,
		   int64_t *gram, float *y)
{
	for (int64_t dist = 1; dist <= st->max_skip + 1; dist++) {
		/* a unigram is the same whatever the skip: count it once */
		int64_t lo = dist > 1 && st->min_gram == 1 ? 2 : st->min_gram;
		for (int64_t g = lo; g <= st->max_gram; g++) {
			for (int64_t s = 0; s + (g - 1) * dist < len; s++) {
				const tf_entry *e;
				for (int64_t k = 0; k < g; k++)
					gram[k] = cpu_get_i64(dt, x, base + s + k * dist);
				e = gram_slot(st, gram, g);
				if (e->len)
					y[e->out] += 1.0f;
			}
		}
	}
}

static void tf_weigh(const tf_state *st, float *y)
{
	for (int64_t i = 0; i < st->n_out; i++) {
		float w = st->w ? st->w[i] : 1.0f;
		if (st->mode == TF_IDF)
			y[i] = y[i] > 0.0f ? w : 0.0f;
		else if (st->mode == TF_TFIDF)
			y[i] *= w;
	}
}

static int tf_compute(cpu_ctx *ctx)
{
	const tf_state *st = ctx->node->state;
	const cpu_tensor *X;
	cpu_tensor *Y;
	int64_t dims[2], rows, len, *gram;
	int rc = 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_INDEX)))
		return rc;
	if (X->rank != 1 && X->rank != 2)
		return cpu_fail(ctx, CPU_E_INVALID, "X has rank %d (need [len] or [batch, len])",
				X->rank);
	rows = X->rank == 2 ? X->dims[0] : 1;
	len = X->dims[X->rank - 1];
	dims[0] = rows;
	dims[X->rank - 1] = st->n_out;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank, dims)))
		return CPU_E_NOMEM;
	if (!(gram = cpu_scratch(ctx, (size_t)st->max_gram * sizeof(int64_t) + 1)))
		return CPU_E_NOMEM;
	if (rows * st->n_out > 0)
		memset(Y->data, 0, (size_t)(rows * st->n_out) * sizeof(float));
	for (int64_t r = 0; r < rows; r++) {
		float *y = (float *)Y->data + r * st->n_out;
		tf_row(st, X->dtype, X->data, r * len, len, gram, y);
		tf_weigh(st, y);
	}
	return 0;
}

const cpu_op cpu_op_tfidfvectorizer = {
	"TfIdfVectorizer", "", 9, CPU_OPSET_MAX, tf_supports, tf_prepare, tf_compute, tf_release,
};
