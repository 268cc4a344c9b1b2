/*
 * ml_ops: what the ai.onnx.ml kernels share (ml_common.c): the
 * post_transform functions and the way ONNX Runtime writes a classifier's
 * scores, reading the attributes these ops carry (string lists, the
 * *_as_tensor doubles), the input converted to float rows, and labels
 * written as int64 or strings.
 *
 * ONNX leaves much of these ops loose; where it does, the kernels do what
 * ONNX Runtime does (its providers/cpu/ml), which is what the converters
 * (skl2onnx, onnxmltools) are tested against.  docs/OPERATORS.md, section
 * "ai.onnx.ml", lists those choices.
 */
#ifndef ORTMK_CPU_ML_OPS_H
#define ORTMK_CPU_ML_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_ops.h"

/* The ai.onnx.ml opsets these kernels follow: ONNX 1.12 defines 1 to 3. */
#define ML_OPSET_MAX 3
#define ML_DOMAIN "ai.onnx.ml"

/* Float, double, int32 and int64: what most ml ops take as X. */
#define ML_TYPES_NUM (CPU_BIT(CPU_FLOAT) | CPU_BIT(CPU_DOUBLE) | CPU_BIT(CPU_INT32) | \
		      CPU_BIT(CPU_INT64))

enum ml_post {
	ML_POST_NONE, ML_POST_LOGISTIC, ML_POST_SOFTMAX, ML_POST_SOFTMAX_ZERO, ML_POST_PROBIT,
};

/* post_transform (default NONE) into *post; 0, or -1 with the reason in
 * err for a value ONNX does not define. */
int ml_parse_post(const Onnx__NodeProto *p, int *post, char *err, size_t n);

float ml_logistic(float x);
float ml_probit(float x);
/* Softmax of v[0..n) in place, and SOFTMAX_ZERO (zeros stay zero). */
void ml_softmax(float *v, int64_t n);
void ml_softmax_zero(float *v, int64_t n);

/* post applied to one row of n >= 2 scores, in place.  A row of one score
 * only ever gets PROBIT: ONNX Runtime leaves LOGISTIC and SOFTMAX off a
 * single score (batched_update_scores_inplace). */
void ml_post_row(int post, float *v, int64_t n);

/*
 * A binary classifier's one score s written as two columns z[0], z[1], as
 * ONNX Runtime 1.30 writes them (write_scores, batched_update_scores_inplace):
 *   ML_SECOND_COMPLEMENT  [1 - s, s]                (weights all positive)
 *   ML_SECOND_NEGATE      [-s, s]
 * LOGISTIC first maps s to logistic(s) ([1 - p, p]; NEGATE: [logistic(-s),
 * p]).  PROBIT gives [probit(s), 0]: ONNX Runtime writes the one column
 * and leaves the other (zero for trees; for a linear or SVM model it packs
 * the rows' probits together, which is not reproduced).
 */
enum { ML_SECOND_COMPLEMENT = 0, ML_SECOND_NEGATE = 2 };
void ml_binary_scores(int post, int second, float s, float *z);

/* Attribute helpers. */
/* The STRINGS attribute `name` as NUL-terminated copies in one malloc'ed
 * block (free(*out) releases it); the count, 0 when absent, -1 on ENOMEM. */
int64_t ml_attr_strings(const Onnx__NodeProto *p, const char *name, char ***out);
/* Whether attribute name is present (any type). */
int ml_has_attr(const Onnx__NodeProto *p, const char *name);
/* A numeric list attribute as doubles: `name` (FLOATS) or `name`_as_tensor
 * (a float or double TENSOR).  *out is malloc'ed (NULL when absent).
 * Returns the count, 0 when absent, -1 with err set (both given, wrong
 * tensor type, ENOMEM). */
int64_t ml_attr_reals(const Onnx__NodeProto *p, const char *name, double **out, char *err,
		      size_t n);

/* Inputs. */
/* X as [N, C] (a 1-D X is one row); -1 when X has another rank. */
int ml_rows(const cpu_tensor *X, int64_t *N, int64_t *C);
/* X converted to float, row-major (X's own data when it is float). */
const float *ml_as_float(cpu_ctx *ctx, const cpu_tensor *X);

/* Labels: output 0 of a classifier, [N] of int64 or strings. */
typedef struct ml_labels {
	int64_t n;
	const int64_t *ints;       /* classlabels_int64s / classlabels_ints */
	char **strings;            /* classlabels_strings (owned) */
} ml_labels;
/* Reads the int and string label attributes (either may be absent, not
 * both present); 0 or -1 with err set. */
int ml_labels_parse(const Onnx__NodeProto *p, const char *ints_name, ml_labels *l, char *err,
		    size_t n);
void ml_labels_free(ml_labels *l);
/* Output 0 as [N] int64 or string tensor, per the labels' kind. */
cpu_tensor *ml_labels_output(cpu_ctx *ctx, const ml_labels *l, int64_t N);
/* out[i] = label k (0 <= k < l->n). */
void ml_labels_put(const ml_labels *l, cpu_tensor *out, int64_t i, int64_t k);
/* out[i] = the literal v (0 or 1): the int64 v or the string "0"/"1",
 * what ONNX Runtime answers when a binary model has no two labels. */
void ml_labels_put_literal(const ml_labels *l, cpu_tensor *out, int64_t i, int v);

#endif
