/*
 * shape_ops_ml.c: type and shape inference for the ai.onnx.ml domain (the
 * traditional-ML ops of the scikit-learn and XGBoost converters), and its
 * table.  The contract is shape_ops.h's; an op missing here takes what the
 * model declares (SHAPE_DECLARED), and its outputs are sized at run time.
 *
 * The shapes are the CPU kernels' (providers/cpu/ops/ml), which follow
 * ONNX Runtime: N is X's dim 0 (1 for a 1-D X), a classifier's labels are
 * [N] int64 or strings (classlabels_strings), its scores [N, columns] with
 * the column count its attributes give.  ZipMap's sequence of maps has no
 * shape to infer; its X is checked against its labels.
 */
#include <string.h>

#include "shape_ops.h"
#include "shape_ops_fn.h"

/* Count of a list attribute of any kind (0 when absent). */
static int64_t list_len(const shape_ctx *c, const char *name)
{
	const Onnx__AttributeProto *a = shape_attr(c, name);

	if (!a)
		return 0;
	return (int64_t)(a->n_ints + a->n_floats + a->n_strings);
}

/* N of X: dim 0 of a 2-D X, 1 for a 1-D X, unknown otherwise. */
static int64_t rows_of(const graph_tinfo *x)
{
	if (x->rank == 1)
		return 1;
	return x->rank == 2 ? x->dims[0] : SHAPE_NEW;
}

static int set2(shape_ctx *c, int i, int32_t et, int64_t d0, int64_t d1)
{
	graph_tinfo *o = shape_out(c, i);

	if (shape_set_rank(c, o, et, 2))
		return -1;
	o->dims[0] = d0;
	o->dims[1] = d1 >= 0 ? d1 : SHAPE_NEW;
	return 0;
}

/* Output 0, the labels: [N] of int64 or strings. */
static int labels_out(shape_ctx *c, int64_t n)
{
	graph_tinfo *o = shape_out(c, 0);
	int strings = list_len(c, "classlabels_strings") > 0;

	if (shape_set_rank(c, o, strings ? DT(STRING) : DT(INT64), 1))
		return -1;
	o->dims[0] = n;
	return 0;
}

/* The score columns of each classifier (see linear.c, svm.c, tree_ops.c). */
static int64_t linear_columns(const shape_ctx *c, int64_t labels)
{
	int64_t t = list_len(c, "intercepts");

	t = t ? t : labels;
	return t == 1 && labels == 2 ? 2 : t;
}

static int64_t svm_columns(const shape_ctx *c, int64_t cc)
{
	if (!shape_attr(c, "vectors_per_class") || list_len(c, "prob_a"))
		return cc;
	return cc > 2 ? cc * (cc - 1) / 2 : 2;
}

enum { ML_LINEAR, ML_SVM, ML_TREE };

static int shape_fn_ml_classifier(shape_ctx *c)
{
	int64_t n = rows_of(shape_in(c, 0)), labels, cols;

	labels = c->arg == ML_TREE ? list_len(c, "classlabels_int64s") :
		list_len(c, "classlabels_ints");
	labels = labels ? labels : list_len(c, "classlabels_strings");
	cols = c->arg == ML_LINEAR ? linear_columns(c, labels) :
		c->arg == ML_SVM ? svm_columns(c, labels) : labels;
	if (labels_out(c, n))
		return -1;
	return set2(c, 1, DT(FLOAT), n, cols > 0 ? cols : SHAPE_NEW);
}

/* TreeEnsembleRegressor's n_targets, or the largest target id + 1. */
static int64_t tree_targets(const shape_ctx *c)
{
	int64_t t = shape_attr_int(c, "n_targets", 0), m = 0;
	const int64_t *ids;
	int k = shape_attr_ints(c, "target_ids", &ids);

	for (int i = 0; i < k; i++)
		m = ids[i] + 1 > m ? ids[i] + 1 : m;
	return t > 0 ? t : m > 0 ? m : 1;
}

static int shape_fn_ml_regressor(shape_ctx *c)
{
	int64_t n = rows_of(shape_in(c, 0)), t;

	t = c->arg == ML_LINEAR ? shape_attr_int(c, "targets", 1) :
		c->arg == ML_SVM ? 1 : tree_targets(c);
	return set2(c, 0, DT(FLOAT), n, t);
}

/* Same shape as X; arg: the output type, or 0 for X's own. */
static int shape_fn_ml_elementwise(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);

	shape_copy(o, x, 0);
	if (c->arg)
		o->elem_type = c->arg;
	return 0;
}

static int shape_fn_ml_one_hot(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);
	int64_t k = list_len(c, "cats_int64s") + list_len(c, "cats_strings");

	if (x->rank < 0)
		return shape_set_rank(c, o, DT(FLOAT), -1);
	if (shape_set_rank(c, o, DT(FLOAT), x->rank + 1))
		return -1;
	memcpy(o->dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
	o->dims[x->rank] = k;
	return 0;
}

/* LabelEncoder (opset 1: strings <-> int64s; 2+: values_*) and
 * CategoryMapper (strings <-> int64s): X's shape. */
static int shape_fn_ml_encoder(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	graph_tinfo *o = shape_out(c, 0);

	shape_copy(o, x, 0);
	if (c->arg && c->n->opset >= 2) {
		o->elem_type = shape_attr(c, "values_strings") ? DT(STRING) :
			shape_attr(c, "values_int64s") ? DT(INT64) :
			shape_attr(c, "values_floats") ? DT(FLOAT) : 0;
		return 0;
	}
	o->elem_type = x->elem_type == DT(STRING) ? DT(INT64) :
		x->elem_type == DT(INT64) ? DT(STRING) : 0;
	return 0;
}

static int shape_fn_ml_extract(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0), *idx = shape_in(c, 1);
	graph_tinfo *o = shape_out(c, 0);
	int64_t k = idx->rank >= 0 ? 1 : SHAPE_NEW;

	for (int i = 0; i < idx->rank && k >= 0; i++)
		k = idx->dims[i] >= 0 ? k * idx->dims[i] : SHAPE_NEW;
	if (x->rank == 1)
		return set2(c, 0, x->elem_type, 1, k);
	shape_copy(o, x, 0);
	if (x->rank > 1)
		o->dims[x->rank - 1] = k;
	return 0;
}

static int shape_fn_ml_vectorize(shape_ctx *c)
{
	const int64_t *d;
	int k = shape_attr_ints(c, "inputdimensions", &d);
	int64_t total = 0;

	for (int i = 0; i < k; i++)
		total += d[i] > 0 ? d[i] : 0;
	return set2(c, 0, DT(FLOAT), rows_of(shape_in(c, 0)), k > 0 ? total : SHAPE_NEW);
}

/* ZipMap: its output is a sequence of maps, which inference tracks no
 * shape through; what it checks at load is what the kernel would refuse
 * on every run: one label list, a float X of rank 1 or 2 whose last dim
 * is the label count. */
static int shape_fn_ml_zipmap(shape_ctx *c)
{
	const graph_tinfo *x = shape_in(c, 0);
	int64_t ni = list_len(c, "classlabels_int64s"), ns = list_len(c, "classlabels_strings");

	if ((ni > 0) == (ns > 0))
		return shape_fail(c, "ZipMap needs one of classlabels_int64s and classlabels_strings");
	if (x->elem_type && x->elem_type != DT(FLOAT))
		return shape_fail(c, "ZipMap takes float X, not %s", graph_dtype_name(x->elem_type));
	if (x->rank == 0 || x->rank > 2)
		return shape_fail(c, "ZipMap takes X of rank 1 or 2, not %d", x->rank);
	if (x->rank > 0 && x->dims[x->rank - 1] >= 0 && x->dims[x->rank - 1] != ni + ns)
		return shape_fail(c, "ZipMap: X has %lld columns for %lld labels",
				  (long long)x->dims[x->rank - 1], (long long)(ni + ns));
	return SHAPE_DECLARED;
}

static const shape_op_entry op_table[] = {
	{ "LinearClassifier", shape_fn_ml_classifier, ML_LINEAR },
	{ "SVMClassifier", shape_fn_ml_classifier, ML_SVM },
	{ "TreeEnsembleClassifier", shape_fn_ml_classifier, ML_TREE },
	{ "LinearRegressor", shape_fn_ml_regressor, ML_LINEAR },
	{ "SVMRegressor", shape_fn_ml_regressor, ML_SVM },
	{ "TreeEnsembleRegressor", shape_fn_ml_regressor, ML_TREE },
	{ "Scaler", shape_fn_ml_elementwise, DT(FLOAT) },
	{ "Normalizer", shape_fn_ml_elementwise, DT(FLOAT) },
	{ "Binarizer", shape_fn_ml_elementwise, 0 },
	{ "Imputer", shape_fn_ml_elementwise, 0 },
	{ "OneHotEncoder", shape_fn_ml_one_hot, 0 },
	{ "LabelEncoder", shape_fn_ml_encoder, 1 },
	{ "CategoryMapper", shape_fn_ml_encoder, 0 },
	{ "ArrayFeatureExtractor", shape_fn_ml_extract, 0 },
	{ "FeatureVectorizer", shape_fn_ml_vectorize, 0 },
	{ "ZipMap", shape_fn_ml_zipmap, 0 },
	{ NULL, NULL, 0 },
};

shape_fn shape_op_find_ml(const char *op_type, int *arg)
{
	return shape_table_find(op_table, sizeof(op_table) / sizeof(op_table[0]), op_type, arg);
}
