/*
 * encode: the lookup ops, OneHotEncoder, LabelEncoder (opset 1's
 * classes_strings and opset 2's keys_* / values_* of any of string, int64
 * and float) and CategoryMapper.  Each builds a sorted key table at
 * prepare and binary-searches it per element.
 *
 * Repeated keys resolve as ONNX Runtime's maps do: the last wins in
 * OneHotEncoder and CategoryMapper (map[key] = ...), the first in
 * LabelEncoder (emplace).  A NaN key never matches; 0.0 and -0.0 are one
 * key.  Numbers given to OneHotEncoder are truncated to int64 first.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ml_ops.h"

enum { KEY_I64, KEY_F32, KEY_STR };

/* A lookup table: entry e has key keys*[order[e]]'s and value index
 * order[e]; sorted by key. */
typedef struct ml_map {
	int kind;
	int64_t n;
	const int64_t *ki;
	const float *kf;
	char **ks;                   /* owned */
	int64_t *order;              /* owned */
} ml_map;

static int key_cmp(const ml_map *m, int64_t a, int64_t b)
{
	switch (m->kind) {
	case KEY_I64: return (m->ki[a] > m->ki[b]) - (m->ki[a] < m->ki[b]);
	case KEY_F32: return (m->kf[a] > m->kf[b]) - (m->kf[a] < m->kf[b]);
	default: return strcmp(m->ks[a], m->ks[b]);
	}
}

/* Sorts order[lo, hi) by key: a merge sort, stable, so that equal keys
 * keep their attribute order. */
static void map_sort(ml_map *m, int64_t *tmp, int64_t lo, int64_t hi)
{
	int64_t mid = lo + (hi - lo) / 2, i = lo, j = mid, k = lo;

	if (hi - lo < 2)
		return;
	map_sort(m, tmp, lo, mid);
	map_sort(m, tmp, mid, hi);
	while (i < mid || j < hi)
		tmp[k++] = j >= hi || (i < mid && key_cmp(m, m->order[i], m->order[j]) <= 0) ?
			m->order[i++] : m->order[j++];
	memcpy(m->order + lo, tmp + lo, (size_t)(hi - lo) * sizeof(int64_t));
}

/* Sorts the table and keeps one entry per key, the first or the last
 * listed. */
static int map_build(ml_map *m, int last_wins)
{
	int64_t *tmp, w = 0;

	m->order = malloc((size_t)(m->n + 1) * sizeof(int64_t));
	tmp = malloc((size_t)(m->n + 1) * sizeof(int64_t));
	if (!m->order || !tmp) {
		free(tmp);
		return CPU_E_NOMEM;
	}
	for (int64_t i = 0; i < m->n; i++)
		m->order[i] = i;
	map_sort(m, tmp, 0, m->n);   /* stable: equal keys keep index order */
	free(tmp);
	for (int64_t i = 0; i < m->n; i++) {
		int64_t e = m->order[i];

		if (m->kind == KEY_F32 && isnan(m->kf[e]))
			continue;
		if (w > 0 && key_cmp(m, m->order[w - 1], e) == 0) {
			if (last_wins)
				m->order[w - 1] = e;
			continue;
		}
		m->order[w++] = e;
	}
	m->n = w;
	return 0;
}

static void map_free(ml_map *m)
{
	free(m->ks);
	free(m->order);
}

/* The value index of a key, or -1.  Exactly one of the key arguments is
 * used, per m->kind. */
static int64_t map_find(const ml_map *m, int64_t ki, float kf, const char *ks)
{
	int64_t lo = 0, hi = m->n;

	if (m->kind == KEY_F32 && isnan(kf))
		return -1;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2, e = m->order[mid];
		int c;

		switch (m->kind) {
		case KEY_I64: c = (m->ki[e] > ki) - (m->ki[e] < ki); break;
		case KEY_F32: c = (m->kf[e] > kf) - (m->kf[e] < kf); break;
		default: c = strcmp(m->ks[e], ks); break;
		}
		if (c == 0)
			return e;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Keys from attribute `name`, of `kind`; 0 when absent. */
static int64_t map_keys(ml_map *m, const Onnx__NodeProto *p, int kind, const char *name)
{
	size_t k = 0;

	m->kind = kind;
	if (kind == KEY_STR)
		return m->n = ml_attr_strings(p, name, &m->ks);
	k = kind == KEY_I64 ? cpu_attr_ints(p, name, &m->ki) : cpu_attr_floats(p, name, &m->kf);
	return m->n = (int64_t)k;
}

/* ---- OneHotEncoder ---- */

typedef struct ohe_state {
	ml_map cats;
	int64_t width;               /* categories listed, repeats included */
	int zeros;
} ohe_state;

static void ohe_release(cpu_node *node)
{
	ohe_state *st = node->state;

	if (st) {
		map_free(&st->cats);
		free(st);
	}
	node->state = NULL;
}

static int ohe_prepare(cpu_node *node, char *err, size_t n)
{
	const Onnx__NodeProto *p = node->proto;
	ohe_state *st = calloc(1, sizeof(*st));
	const int64_t *ci;
	int64_t ns;

	if (!st)
		return CPU_E_NOMEM;
	node->state = st;
	st->zeros = cpu_attr_int(p, "zeros", 1) != 0;
	if (cpu_attr_ints(p, "cats_int64s", &ci) > 0) {
		if (ml_has_attr(p, "cats_strings"))
			return snprintf(err, n, "cats_int64s and cats_strings are both given"),
				CPU_E_INVALID;
		map_keys(&st->cats, p, KEY_I64, "cats_int64s");
	} else if ((ns = map_keys(&st->cats, p, KEY_STR, "cats_strings")) <= 0) {
		return ns < 0 ? CPU_E_NOMEM : (snprintf(err, n, "cats_int64s or cats_strings is "
							"required"), CPU_E_INVALID);
	}
	st->width = st->cats.n;
	return map_build(&st->cats, 1);
}

static int ohe_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, ML_TYPES_NUM | CPU_BIT(CPU_STRING), why, n);
}

/* The category index of X[i], or -1. */
static int64_t ohe_find(const ohe_state *st, const cpu_tensor *X, int64_t i)
{
	double v;

	if (X->dtype == CPU_STRING)
		return st->cats.kind == KEY_STR ?
			map_find(&st->cats, 0, 0, ((const char *const *)X->data)[i]) : -1;
	if (st->cats.kind != KEY_I64)
		return -1;
	if (X->dtype == CPU_INT64 || X->dtype == CPU_INT32)
		return map_find(&st->cats, cpu_get_i64(X->dtype, X->data, i), 0, NULL);
	v = cpu_get_f64(X->dtype, X->data, i);
	if (!(v > -9.2e18 && v < 9.2e18))   /* NaN and what int64 cannot hold */
		return -1;
	return map_find(&st->cats, (int64_t)v, 0, NULL);
}

static int ohe_compute(cpu_ctx *ctx)
{
	const ohe_state *st = ctx->node->state;
	int rc = 0;
	const cpu_tensor *X = cpu_require(ctx, 0, &rc);
	int64_t dims[CPU_MAX_RANK], nc = st->width, k;
	cpu_tensor *Y;

	if (!X || (rc = cpu_check_dtype(ctx, X, 0, ML_TYPES_NUM | CPU_BIT(CPU_STRING))))
		return rc;
	if (X->rank + 1 > CPU_MAX_RANK)
		return cpu_fail(ctx, CPU_E_INVALID, "X has too many dimensions");
	memcpy(dims, X->dims, sizeof(int64_t) * (size_t)X->rank);
	dims[X->rank] = nc;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank + 1, dims)))
		return CPU_E_NOMEM;
	k = cpu_numel(X);
	memset(Y->data, 0, (size_t)(k * nc) * sizeof(float));
	for (int64_t i = 0; i < k; i++) {
		int64_t c = ohe_find(st, X, i);

		if (c >= 0)
			((float *)Y->data)[i * nc + c] = 1.0f;
		else if (!st->zeros)
			return cpu_fail(ctx, CPU_E_INVALID, "X[%lld] is not a known category and "
					"zeros is 0", (long long)i);
	}
	return 0;
}

/* ---- LabelEncoder (opset 2+): keys_* -> values_* ---- */

typedef struct le_state {
	ml_map keys;
	int vkind;                   /* KEY_I64, KEY_F32 or KEY_STR */
	const int64_t *vi;
	const float *vf;
	char **vs;                   /* owned */
	int64_t def_i;
	float def_f;
	char *def_s;                 /* owned */
} le_state;

static void le_release(cpu_node *node)
{
	le_state *st = node->state;

	if (st) {
		map_free(&st->keys);
		free(st->vs);
		free(st->def_s);
		free(st);
	}
	node->state = NULL;
}

static const char *const le_key_names[] = {"keys_int64s", "keys_floats", "keys_strings"};
static const char *const le_value_names[] = {"values_int64s", "values_floats", "values_strings"};
static const int32_t le_dtypes[] = {CPU_INT64, CPU_FLOAT, CPU_STRING};

/* Which of the three attributes is present: its kind, -1 for none, -2
 * for several. */
static int le_which(const Onnx__NodeProto *p, const char *const *names)
{
	int k = -1;

	for (int i = 0; i < 3; i++)
		if (ml_has_attr(p, names[i]))
			k = k == -1 ? i : -2;
	return k;
}

static int le_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	int kk = le_which(p, le_key_names), vk = le_which(p, le_value_names);

	(void)opset;
	if (cpu_attr(p, "keys_tensor") || cpu_attr(p, "values_tensor")) {
		snprintf(why, n, "keys_tensor / values_tensor (opset 4) are not supported");
		return 0;
	}
	if (kk < 0 || vk < 0) {
		snprintf(why, n, "exactly one keys_* and one values_* attribute must be given");
		return 0;
	}
	return cpu_supports_dtype(dt, n_in, 0, CPU_BIT(le_dtypes[kk]), why, n);
}

static int le_prepare(cpu_node *node, char *err, size_t n)
{
	const Onnx__NodeProto *p = node->proto;
	le_state *st = calloc(1, sizeof(*st));
	int kk = le_which(p, le_key_names), vk = le_which(p, le_value_names);
	int64_t nk, nv;
	char buf[4096];

	if (!st)
		return CPU_E_NOMEM;
	node->state = st;
	if (kk < 0 || vk < 0)
		return snprintf(err, n, "exactly one keys_* and one values_* attribute must be "
				"given"), CPU_E_INVALID;
	nk = map_keys(&st->keys, p, kk, le_key_names[kk]);
	st->vkind = vk;
	if (vk == KEY_STR)
		nv = ml_attr_strings(p, le_value_names[vk], &st->vs);
	else
		nv = vk == KEY_I64 ? (int64_t)cpu_attr_ints(p, le_value_names[vk], &st->vi) :
			(int64_t)cpu_attr_floats(p, le_value_names[vk], &st->vf);
	if (nk < 0 || nv < 0)
		return CPU_E_NOMEM;
	if (nk != nv)
		return snprintf(err, n, "%s has %lld entries, %s %lld", le_key_names[kk],
				(long long)nk, le_value_names[vk], (long long)nv), CPU_E_INVALID;
	st->def_i = cpu_attr_int(p, "default_int64", -1);
	st->def_f = cpu_attr_float(p, "default_float", -0.0f);
	if (!cpu_attr_str(p, "default_string", buf, sizeof(buf)))
		snprintf(buf, sizeof(buf), "_Unused");
	if (!(st->def_s = strdup(buf)))
		return CPU_E_NOMEM;
	return map_build(&st->keys, 0);
}

static int le_compute(cpu_ctx *ctx)
{
	const le_state *st = ctx->node->state;
	int rc = 0;
	const cpu_tensor *X = cpu_require(ctx, 0, &rc);
	cpu_tensor *Y;
	int64_t k;

	if (!X || (rc = cpu_check_dtype(ctx, X, 0, CPU_BIT(le_dtypes[st->keys.kind]))))
		return rc;
	if (!(Y = cpu_output(ctx, 0, le_dtypes[st->vkind], X->rank, X->dims)))
		return CPU_E_NOMEM;
	k = cpu_numel(X);
	for (int64_t i = 0; i < k; i++) {
		int64_t e = map_find(&st->keys,
				     X->dtype == CPU_INT64 ? ((const int64_t *)X->data)[i] : 0,
				     X->dtype == CPU_FLOAT ? ((const float *)X->data)[i] : 0,
				     X->dtype == CPU_STRING ? ((const char *const *)X->data)[i] : NULL);

		if (st->vkind == KEY_I64)
			((int64_t *)Y->data)[i] = e < 0 ? st->def_i : st->vi[e];
		else if (st->vkind == KEY_F32)
			((float *)Y->data)[i] = e < 0 ? st->def_f : st->vf[e];
		else
			((const char **)Y->data)[i] = e < 0 ? st->def_s : st->vs[e];
	}
	return 0;
}

/* ---- strings <-> int64s: LabelEncoder opset 1 and CategoryMapper ---- */

/* to_int: string -> int64 by (strings[i] -> ints[i], or i without ints);
 * to_str: int64 -> string the other way. */
typedef struct s2i_state {
	ml_map to_int, to_str;
	char **strings;              /* owned */
	int64_t *ints;               /* owned */
	int64_t def_i;
	char *def_s;                 /* owned */
} s2i_state;

static void s2i_release(cpu_node *node)
{
	s2i_state *st = node->state;

	if (st) {
		st->to_int.ks = NULL;    /* shared with st->strings */
		map_free(&st->to_int);
		map_free(&st->to_str);
		free(st->strings);
		free(st->ints);
		free(st->def_s);
		free(st);
	}
	node->state = NULL;
}

/* Reads `strings_name` (and `ints_name`, or the indices when NULL) and
 * builds both tables; last repeat wins both ways. */
static int s2i_prepare(cpu_node *node, const char *strings_name, const char *ints_name, char *err,
		       size_t n)
{
	const Onnx__NodeProto *p = node->proto;
	s2i_state *st = calloc(1, sizeof(*st));
	const int64_t *iv = NULL;
	int64_t ns;
	size_t ni = 0;
	char buf[4096];
	int rc;

	if (!st)
		return CPU_E_NOMEM;
	node->state = st;
	if ((ns = ml_attr_strings(p, strings_name, &st->strings)) < 0)
		return CPU_E_NOMEM;
	if (ints_name && (ni = cpu_attr_ints(p, ints_name, &iv)) != (size_t)ns)
		return snprintf(err, n, "%s has %lld entries, %s %zu", strings_name, (long long)ns,
				ints_name, ni), CPU_E_INVALID;
	if (!(st->ints = malloc((size_t)(ns + 1) * sizeof(int64_t))))
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < ns; i++)
		st->ints[i] = iv ? iv[i] : i;
	st->to_int = (ml_map){KEY_STR, ns, NULL, NULL, st->strings, NULL};
	st->to_str = (ml_map){KEY_I64, ns, st->ints, NULL, NULL, NULL};
	st->def_i = cpu_attr_int(p, "default_int64", -1);
	if (!cpu_attr_str(p, "default_string", buf, sizeof(buf)))
		snprintf(buf, sizeof(buf), "_Unused");
	if (!(st->def_s = strdup(buf)))
		return CPU_E_NOMEM;
	if ((rc = map_build(&st->to_int, 1)))
		return rc;
	return map_build(&st->to_str, 1);
}

static int s2i_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_BIT(CPU_STRING) | CPU_BIT(CPU_INT64), why, n);
}

static int s2i_compute(cpu_ctx *ctx)
{
	const s2i_state *st = ctx->node->state;
	int rc = 0;
	const cpu_tensor *X = cpu_require(ctx, 0, &rc);
	cpu_tensor *Y;
	int64_t k;

	if (!X || (rc = cpu_check_dtype(ctx, X, 0, CPU_BIT(CPU_STRING) | CPU_BIT(CPU_INT64))))
		return rc;
	if (!(Y = cpu_output(ctx, 0, X->dtype == CPU_STRING ? CPU_INT64 : CPU_STRING, X->rank,
			     X->dims)))
		return CPU_E_NOMEM;
	k = cpu_numel(X);
	for (int64_t i = 0; i < k; i++) {
		int64_t e;

		if (X->dtype == CPU_STRING) {
			e = map_find(&st->to_int, 0, 0, ((const char *const *)X->data)[i]);
			((int64_t *)Y->data)[i] = e < 0 ? st->def_i : st->ints[e];
		} else {
			e = map_find(&st->to_str, ((const int64_t *)X->data)[i], 0, NULL);
			((const char **)Y->data)[i] = e < 0 ? st->def_s : st->strings[e];
		}
	}
	return 0;
}

static int le1_prepare(cpu_node *node, char *err, size_t n)
{
	return s2i_prepare(node, "classes_strings", NULL, err, n);
}

static int catmap_prepare(cpu_node *node, char *err, size_t n)
{
	return s2i_prepare(node, "cats_strings", "cats_int64s", err, n);
}

const cpu_op cpu_op_ml_one_hot_encoder = {
	"OneHotEncoder", ML_DOMAIN, 1, ML_OPSET_MAX, ohe_supports, ohe_prepare, ohe_compute,
	ohe_release,
};
const cpu_op cpu_op_ml_label_encoder_1 = {
	"LabelEncoder", ML_DOMAIN, 1, 1, s2i_supports, le1_prepare, s2i_compute, s2i_release,
};
const cpu_op cpu_op_ml_label_encoder = {
	"LabelEncoder", ML_DOMAIN, 2, ML_OPSET_MAX, le_supports, le_prepare, le_compute,
	le_release,
};
const cpu_op cpu_op_ml_category_mapper = {
	"CategoryMapper", ML_DOMAIN, 1, ML_OPSET_MAX, s2i_supports, catmap_prepare, s2i_compute,
	s2i_release,
};
