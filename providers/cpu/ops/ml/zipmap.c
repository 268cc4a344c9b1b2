/*
 * zipmap: ai.onnx.ml ZipMap, the last node of a converted classifier
 * (skl2onnx's default): each row of its float X [N, C] (a 1-D X is one
 * row) becomes a map from the C class labels (classlabels_int64s or
 * classlabels_strings) to that row's scores, and the output is the
 * sequence of the N maps.  As in ONNX Runtime, the labels keep the order
 * the attribute gives (repeats are kept), and C must equal their count.
 *
 * The keys are parsed once at prepare and shared by every map of every
 * run (they live as long as the node); the values are copied per map.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_map.h"
#include "ml_ops.h"

typedef struct zipmap_state {
	int32_t key_dtype;           /* CPU_INT64 or CPU_STRING */
	size_t n;
	const int64_t *ints;         /* into the node's attribute */
	char **strs;                 /* ml_attr_strings' block */
} zipmap_state;

static void zipmap_release(cpu_node *node)
{
	zipmap_state *st = node->state;

	if (st) {
		free(st->strs);
		free(st);
	}
	node->state = NULL;
}

static int zipmap_prepare(cpu_node *node, char *err, size_t n)
{
	const Onnx__NodeProto *p = node->proto;
	zipmap_state *st = calloc(1, sizeof(*st));
	size_t ni;
	int64_t ns;

	if (!st)
		return CPU_E_NOMEM;
	node->state = st;
	ni = cpu_attr_ints(p, "classlabels_int64s", &st->ints);
	ns = ml_attr_strings(p, "classlabels_strings", &st->strs);
	if (ns < 0)
		return CPU_E_NOMEM;
	if ((ni > 0) == (ns > 0))
		return snprintf(err, n, "ZipMap needs one of classlabels_int64s and "
			       "classlabels_strings"), CPU_E_INVALID;
	st->key_dtype = ni ? CPU_INT64 : CPU_STRING;
	st->n = ni ? ni : (size_t)ns;
	return 0;
}

static int zipmap_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			   char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_BIT(CPU_FLOAT), why, n);
}

static int zipmap_compute(cpu_ctx *ctx)
{
	const zipmap_state *st = ctx->node->state;
	const void *keys = st->key_dtype == CPU_INT64 ? (const void *)st->ints : (const void *)st->strs;
	int rc = 0;
	const cpu_tensor *X = cpu_require(ctx, 0, &rc);
	int64_t rows, cols;
	cpu_seq *s;

	if (!X || (rc = cpu_check_dtype(ctx, X, 0, CPU_BIT(CPU_FLOAT))))
		return rc;
	if (X->rank < 1 || X->rank > 2)
		return cpu_fail(ctx, CPU_E_INVALID, "ZipMap takes X of rank 1 or 2, not %d", X->rank);
	rows = X->rank == 2 ? X->dims[0] : 1;
	cols = X->dims[X->rank - 1];
	if (cols != (int64_t)st->n)
		return cpu_fail(ctx, CPU_E_INVALID, "ZipMap: X has %lld columns for %zu labels",
				(long long)cols, st->n);
	if (!(s = cpu_output_sequence(ctx, 0, CPU_MAP, (size_t)rows)))
		return CPU_E_NOMEM;
	for (int64_t r = 0; r < rows; r++) {
		cpu_map *m = cpu_seq_map(ctx, s, (size_t)r, st->key_dtype, keys, CPU_FLOAT, st->n);

		if (!m)
			return CPU_E_NOMEM;
		if (st->n)
			memcpy(m->values, (const float *)X->data + r * cols, st->n * sizeof(float));
	}
	return 0;
}

const cpu_op cpu_op_ml_zipmap = {
	"ZipMap", ML_DOMAIN, 1, ML_OPSET_MAX, zipmap_supports, zipmap_prepare, zipmap_compute,
	zipmap_release,
};
