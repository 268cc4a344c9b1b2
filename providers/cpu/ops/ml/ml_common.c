/*
 * ml_common: the helpers every ai.onnx.ml kernel uses (ml_ops.h): the
 * score transforms with ONNX Runtime's arithmetic (float exp, its ErfInv
 * approximation for PROBIT, softmax over max-shifted floats), attribute
 * readers and label output.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ml_ops.h"

int ml_parse_post(const Onnx__NodeProto *p, int *post, char *err, size_t n)
{
	static const char *const names[] = {"NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"};
	char s[32];

	*post = ML_POST_NONE;
	if (!cpu_attr_str(p, "post_transform", s, sizeof(s)))
		return 0;
	for (int i = 0; i < 5; i++) {
		if (strcmp(s, names[i]) == 0) {
			*post = i;
			return 0;
		}
	}
	snprintf(err, n, "post_transform '%s' is not one of NONE, LOGISTIC, SOFTMAX, "
		 "SOFTMAX_ZERO, PROBIT", s);
	return -1;
}

float ml_logistic(float x)
{
	float v = 1.0f / (1.0f + expf(-fabsf(x)));

	return x < 0 ? 1.0f - v : v;
}

/* ONNX Runtime's closed-form approximation (Winitzki, a = 0.147), kept so
 * that PROBIT scores match its own. */
static float erf_inv(float x)
{
	float sgn = x < 0 ? -1.0f : 1.0f, l, v, v2;

	x = (1 - x) * (1 + x);
	l = logf(x);
	v = 2 / ((float)M_PI * 0.147f) + 0.5f * l;
	v2 = 1 / 0.147f * l;
	return sgn * sqrtf(-v + sqrtf(v * v - v2));
}

float ml_probit(float x)
{
	return (float)M_SQRT2 * erf_inv(2 * x - 1);
}

void ml_softmax(float *v, int64_t n)
{
	float m = -3.402823466e38f, sum = 0;

	for (int64_t i = 0; i < n; i++)
		m = v[i] > m ? v[i] : m;
	for (int64_t i = 0; i < n; i++) {
		v[i] = expf(v[i] - m);
		sum += v[i];
	}
	for (int64_t i = 0; i < n; i++)
		v[i] /= sum;
}

void ml_softmax_zero(float *v, int64_t n)
{
	float m = -3.402823466e38f, sum = 0, e;

	for (int64_t i = 0; i < n; i++)
		m = v[i] > m ? v[i] : m;
	e = expf(-m);
	for (int64_t i = 0; i < n; i++) {
		if (v[i] > 0.0000001f || v[i] < -0.0000001f) {
			v[i] = expf(v[i] - m);
			sum += v[i];
		} else {
			v[i] *= e;
		}
	}
	for (int64_t i = 0; i < n; i++)
		v[i] /= sum;
}

void ml_post_row(int post, float *v, int64_t n)
{
	if (n < 2) {
		if (n == 1 && post == ML_POST_PROBIT)
			v[0] = ml_probit(v[0]);
		return;
	}
	switch (post) {
	case ML_POST_LOGISTIC:
		for (int64_t i = 0; i < n; i++)
			v[i] = ml_logistic(v[i]);
		break;
	case ML_POST_SOFTMAX:
		ml_softmax(v, n);
		break;
	case ML_POST_SOFTMAX_ZERO:
		ml_softmax_zero(v, n);
		break;
	case ML_POST_PROBIT:
		for (int64_t i = 0; i < n; i++)
			v[i] = ml_probit(v[i]);
		break;
	default:
		break;
	}
}

void ml_binary_scores(int post, int second, float s, float *z)
{
	if (post == ML_POST_PROBIT) {
		z[0] = ml_probit(s);
		z[1] = 0;
	} else if (post == ML_POST_LOGISTIC) {
		z[0] = second == ML_SECOND_COMPLEMENT ? 1 - ml_logistic(s) : ml_logistic(-s);
		z[1] = ml_logistic(s);
	} else if (second == ML_SECOND_COMPLEMENT) {
		z[0] = 1 - s;
		z[1] = s;
	} else {
		z[0] = -s;
		z[1] = s;
	}
}

int64_t ml_attr_strings(const Onnx__NodeProto *p, const char *name, char ***out)
{
	const Onnx__AttributeProto *a = cpu_attr(p, name);
	size_t bytes, n;
	char **v, *s;

	*out = NULL;
	if (!a || a->n_strings == 0)
		return 0;
	n = a->n_strings;
	bytes = n * sizeof(char *);
	for (size_t i = 0; i < n; i++)
		bytes += a->strings[i].len + 1;
	if (!(v = malloc(bytes)))
		return -1;
	s = (char *)(v + n);
	for (size_t i = 0; i < n; i++) {
		v[i] = s;
		if (a->strings[i].len)
			memcpy(s, a->strings[i].data, a->strings[i].len);
		s[a->strings[i].len] = 0;
		s += a->strings[i].len + 1;
	}
	*out = v;
	return (int64_t)n;
}

int ml_has_attr(const Onnx__NodeProto *p, const char *name)
{
	return cpu_attr(p, name) != NULL;
}

static int64_t reals_from_tensor(const Onnx__TensorProto *tp, const char *name, double **out,
				 char *err, size_t n)
{
	cpu_tensor *t = cpu_tensor_from_proto(tp, err, n);
	int64_t k;

	if (!t)
		return -1;
	if (t->dtype != CPU_FLOAT && t->dtype != CPU_DOUBLE) {
		snprintf(err, n, "%s_as_tensor must be float or double, not %s", name,
			 cpu_dtype_name(t->dtype));
		free(t);
		return -1;
	}
	k = cpu_numel(t);
	if (k > 0 && !(*out = malloc((size_t)k * sizeof(double)))) {
		free(t);
		return -1;
	}
	for (int64_t i = 0; i < k; i++)
		(*out)[i] = t->dtype == CPU_FLOAT ? ((const float *)t->data)[i] :
			((const double *)t->data)[i];
	free(t);
	return k;
}

int64_t ml_attr_reals(const Onnx__NodeProto *p, const char *name, double **out, char *err,
		      size_t n)
{
	char tname[64];
	const Onnx__TensorProto *tp;
	const float *f;
	size_t k = cpu_attr_floats(p, name, &f);

	*out = NULL;
	snprintf(tname, sizeof(tname), "%s_as_tensor", name);
	tp = cpu_attr_tensor(p, tname);
	if (tp && k) {
		snprintf(err, n, "%s and %s are both given", name, tname);
		return -1;
	}
	if (tp)
		return reals_from_tensor(tp, name, out, err, n);
	if (k == 0)
		return 0;
	if (!(*out = malloc(k * sizeof(double)))) {
		snprintf(err, n, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < k; i++)
		(*out)[i] = f[i];
	return (int64_t)k;
}

int ml_rows(const cpu_tensor *X, int64_t *N, int64_t *C)
{
	if (X->rank == 1) {
		*N = 1;
		*C = X->dims[0];
	} else if (X->rank == 2) {
		*N = X->dims[0];
		*C = X->dims[1];
	} else {
		return -1;
	}
	return 0;
}

const float *ml_as_float(cpu_ctx *ctx, const cpu_tensor *X)
{
	int64_t k = cpu_numel(X);
	float *y;

	if (X->dtype == CPU_FLOAT)
		return X->data;
	if (!(y = cpu_scratch(ctx, (size_t)(k > 0 ? k : 1) * sizeof(float))))
		return NULL;
	/* C conversions, as ONNX Runtime's static_cast: int64 rounds once. */
	for (int64_t i = 0; i < k; i++) {
		switch (X->dtype) {
		case CPU_DOUBLE: y[i] = (float)((const double *)X->data)[i]; break;
		case CPU_INT32: y[i] = (float)((const int32_t *)X->data)[i]; break;
		case CPU_INT64: y[i] = (float)((const int64_t *)X->data)[i]; break;
		default: y[i] = (float)cpu_get_f64(X->dtype, X->data, i); break;
		}
	}
	return y;
}

int ml_labels_parse(const Onnx__NodeProto *p, const char *ints_name, ml_labels *l, char *err,
		    size_t n)
{
	size_t ni = cpu_attr_ints(p, ints_name, &l->ints);
	int64_t ns = ml_attr_strings(p, "classlabels_strings", &l->strings);

	if (ns < 0) {
		snprintf(err, n, "out of memory");
		return -1;
	}
	if (ni && ns) {
		snprintf(err, n, "%s and classlabels_strings are both given", ints_name);
		ml_labels_free(l);
		return -1;
	}
	l->n = ns ? ns : (int64_t)ni;
	return 0;
}

void ml_labels_free(ml_labels *l)
{
	free(l->strings);
	l->strings = NULL;
}

cpu_tensor *ml_labels_output(cpu_ctx *ctx, const ml_labels *l, int64_t N)
{
	return cpu_output(ctx, 0, l->strings ? CPU_STRING : CPU_INT64, 1, &N);
}

void ml_labels_put(const ml_labels *l, cpu_tensor *out, int64_t i, int64_t k)
{
	if (l->strings)
		((const char **)out->data)[i] = l->strings[k];
	else
		((int64_t *)out->data)[i] = l->ints[k];
}

void ml_labels_put_literal(const ml_labels *l, cpu_tensor *out, int64_t i, int v)
{
	if (l->strings)
		((const char **)out->data)[i] = v ? "1" : "0";
	else
		((int64_t *)out->data)[i] = v;
}
