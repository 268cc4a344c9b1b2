/*
 * conformance_compare: feeding test-case values through the public API and
 * comparing what a run returns with the expected values (see
 * conformance_value.h).  Numbers compare as the ONNX backend test runner
 * does by default: floating values within |got - exp| <= 1e-7 + 1e-3 *
 * |exp| (NaN equals NaN, an infinity only itself; float16 and bfloat16
 * converted to float first), integers and bools exactly; strings exactly;
 * sequences item by item; an empty optional only an empty one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance_value.h"

#define ABS_TOL 1e-7
#define REL_TOL 1e-3

static float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff, bits;
	float f;

	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13);
	} else if (exp != 0) {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	} else {
		/* Zero or subnormal: man * 2^-24, exact in float. */
		f = ldexpf((float)man, -24);
		return sign ? -f : f;
	}
	memcpy(&f, &bits, sizeof f);
	return f;
}

static float bf16_to_float(uint16_t b)
{
	uint32_t bits = (uint32_t)b << 16;
	float f;

	memcpy(&f, &bits, sizeof f);
	return f;
}

static double elem_float(const void *data, int t, size_t i)
{
	uint16_t h;

	switch (t) {
	case ORTMK_FLOAT: return ((const float *)data)[i];
	case ORTMK_DOUBLE: return ((const double *)data)[i];
	case ORTMK_FLOAT16:
		memcpy(&h, (const char *)data + 2 * i, 2);
		return half_to_float(h);
	default:
		memcpy(&h, (const char *)data + 2 * i, 2);
		return bf16_to_float(h);
	}
}

/* An integer or bool element, sign- or zero-extended to 64 bits. */
static uint64_t elem_bits(const void *data, int t, size_t i)
{
	int kind = conf_dtype_kind(t), size = conf_dtype_size(t);
	const char *p = (const char *)data + (size_t)size * i;
	int8_t s8; int16_t s16; int32_t s32; uint64_t u = 0;

	if (kind == K_SIGNED && size < 8) {
		if (size == 1) { memcpy(&s8, p, 1); return (uint64_t)(int64_t)s8; }
		if (size == 2) { memcpy(&s16, p, 2); return (uint64_t)(int64_t)s16; }
		memcpy(&s32, p, 4);
		return (uint64_t)(int64_t)s32;
	}
	memcpy(&u, p, (size_t)size);   /* little-endian host */
	if (kind == K_BOOL)
		return u != 0;
	return u;
}

/* ---- feeding ------------------------------------------------------------ */

static bool make_tensor(ortmk_env *env, const conf_value *v, ortmk_value **out)
{
	if (v->dtype == ORTMK_STRING)
		return ortmk_value_create_strings(env, v->dims, v->rank,
						  (const char *const *)v->data, out) == ORTMK_OK;
	return ortmk_value_create_copy(env, (ortmk_dtype)v->dtype, v->dims, v->rank, v->data,
				       v->nbytes, out) == ORTMK_OK;
}

bool conf_value_make(ortmk_env *env, const conf_value *v, ortmk_value **out, char *err,
		     size_t cap)
{
	ortmk_value **items;
	bool ok = true;

	*out = NULL;
	if (v->kind == CONF_NONE)
		ok = ortmk_value_create_none(env, out) == ORTMK_OK;
	else if (v->kind == CONF_TENSOR)
		ok = make_tensor(env, v, out);
	if (v->kind != CONF_SEQUENCE) {
		if (!ok)
			snprintf(err, cap, "%s", ortmk_last_error());
		return ok;
	}
	items = calloc(v->n + 1, sizeof(*items));
	ok = items != NULL;
	for (size_t i = 0; ok && i < v->n; i++)
		ok = make_tensor(env, &v->items[i], &items[i]);
	if (ok)
		ok = ortmk_value_create_sequence(env, (ortmk_dtype)v->elem_dtype,
						 (const ortmk_value *const *)items, v->n, out) == ORTMK_OK;
	if (!ok)
		snprintf(err, cap, "%s", items ? ortmk_last_error() : "out of memory");
	for (size_t i = 0; items && i < v->n; i++)
		ortmk_value_destroy(items[i]);
	free(items);
	return ok;
}

/* ---- comparing ---------------------------------------------------------- */

static void format_elem(char *buf, size_t cap, const void *data, int t, size_t i)
{
	int kind = conf_dtype_kind(t);

	if (kind == K_STRING)
		snprintf(buf, cap, "\"%.100s\"", ((const char *const *)data)[i]);
	else if (kind == K_FLOAT)
		snprintf(buf, cap, "%.9g", elem_float(data, t, i));
	else if (kind == K_SIGNED)
		snprintf(buf, cap, "%lld", (long long)elem_bits(data, t, i));
	else
		snprintf(buf, cap, "%llu", (unsigned long long)elem_bits(data, t, i));
}

static void format_shape(char *buf, size_t cap, const int64_t *dims, size_t rank)
{
	size_t len = 0;

	buf[len++] = '[';
	for (size_t i = 0; i < rank && len + 24 < cap; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "," : "",
					(long long)dims[i]);
	snprintf(buf + len, cap - len, "]");
}

static bool float_close(double got, double exp)
{
	if (isnan(exp))
		return isnan(got);
	if (isinf(exp))
		return got == exp;
	return fabs(got - exp) <= ABS_TOL + REL_TOL * fabs(exp);   /* false for NaN */
}

static bool elem_equal(const void *got, const void *exp, int t, size_t i)
{
	int kind = conf_dtype_kind(t);

	if (kind == K_STRING)
		return strcmp(((const char *const *)got)[i], ((const char *const *)exp)[i]) == 0;
	if (kind == K_FLOAT)
		return float_close(elem_float(got, t, i), elem_float(exp, t, i));
	return elem_bits(got, t, i) == elem_bits(exp, t, i);
}

/* The strings of a string tensor value, as an array of pointers. */
static const char **got_strings(const ortmk_value *got, size_t count)
{
	const char **s = calloc(count + 1, sizeof(*s));

	for (size_t i = 0; s && i < count; i++)
		s[i] = ortmk_value_string(got, i) ? ortmk_value_string(got, i) : "";
	return s;
}

static bool compare_tensor(const char *what, const ortmk_value *got, conf_value *exp,
			   char *reason, size_t cap)
{
	int t = (int)ortmk_value_dtype(got);
	size_t rank = ortmk_value_rank(got), bad = 0, first = 0;
	const int64_t *dims = ortmk_value_dims(got);
	const void *data = ortmk_value_data_const(got);
	const char **strs = NULL;
	char a[128], b[128];

	conf_retag_bfloat16(exp, t);
	if (t != exp->dtype) {
		snprintf(reason, cap, "%s: dtype %s, expected %s", what, conf_dtype_name(t),
			 conf_dtype_name(exp->dtype));
		return false;
	}
	if (rank != exp->rank || (rank && memcmp(dims, exp->dims, rank * sizeof *dims))) {
		format_shape(a, sizeof a, dims, rank);
		format_shape(b, sizeof b, exp->dims, exp->rank);
		snprintf(reason, cap, "%s: shape %s, expected %s", what, a, b);
		return false;
	}
	if (t == ORTMK_STRING && !(data = strs = got_strings(got, exp->count))) {
		snprintf(reason, cap, "%s: out of memory", what);
		return false;
	}
	for (size_t i = exp->count; i-- > 0;) {
		if (!elem_equal(data, exp->data, t, i)) {
			bad++;
			first = i;
		}
	}
	if (bad) {
		format_elem(a, sizeof a, data, t, first);
		format_elem(b, sizeof b, exp->data, t, first);
		snprintf(reason, cap, "%s: %zu of %zu elements differ, first at %zu: got %s, expected %s",
			 what, bad, exp->count, first, a, b);
	}
	free(strs);
	return bad == 0;
}

static bool compare_sequence(const char *what, const ortmk_value *got, conf_value *exp,
			     char *reason, size_t cap)
{
	size_t n = ortmk_value_sequence_length(got);
	char item_what[300];
	bool ok = true;

	if (n != exp->n) {
		snprintf(reason, cap, "%s: a sequence of %zu, expected %zu", what, n, exp->n);
		return false;
	}
	for (size_t i = 0; ok && i < n; i++) {
		ortmk_value *item = NULL;

		snprintf(item_what, sizeof item_what, "%s item %zu", what, i);
		if (ortmk_value_sequence_get(got, i, &item)) {
			snprintf(reason, cap, "%s: %s", item_what, ortmk_last_error());
			return false;
		}
		ok = compare_tensor(item_what, item, &exp->items[i], reason, cap);
		ortmk_value_destroy(item);
	}
	return ok;
}

bool conf_value_compare(size_t k, const char *name, const ortmk_value *got, conf_value *exp,
			char *reason, size_t cap)
{
	static const char *const kinds[] = {"a tensor", "a sequence", "an empty optional"};
	int want = exp->kind == CONF_TENSOR ? ORTMK_VALUE_TENSOR :
		exp->kind == CONF_SEQUENCE ? ORTMK_VALUE_SEQUENCE : ORTMK_VALUE_NONE;
	int kind = (int)ortmk_value_kind_of(got);
	char what[256];

	snprintf(what, sizeof what, "output %zu '%s'", k, name);
	if (kind != want) {
		snprintf(reason, cap, "%s: %s, expected %s", what, kind >= 0 && kind < 3 ?
			 kinds[kind] : "unknown", kinds[want]);
		return false;
	}
	if (exp->kind == CONF_SEQUENCE)
		return compare_sequence(what, got, exp, reason, cap);
	if (exp->kind == CONF_NONE)
		return true;
	return compare_tensor(what, got, exp, reason, cap);
}

const char *conf_type_unsupported(const Onnx__TypeProto *ty, char *buf, size_t cap)
{
	if (!ty)
		return NULL;   /* untyped: let the library judge */
	switch (ty->value_case) {
	case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
		if (!ty->tensor_type || !ty->tensor_type->has_elem_type)
			return NULL;
		if (conf_dtype_kind(ty->tensor_type->elem_type) != K_NONE)
			return NULL;
		snprintf(buf, cap, "tensor(%s)", conf_dtype_name(ty->tensor_type->elem_type));
		return buf;
	case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
		return ty->sequence_type && ty->sequence_type->elem_type &&
		       ty->sequence_type->elem_type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ?
		       conf_type_unsupported(ty->sequence_type->elem_type, buf, cap) :
		       "sequence of non-tensors";
	case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
		return ty->optional_type && ty->optional_type->elem_type &&
		       ty->optional_type->elem_type->value_case != ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE ?
		       conf_type_unsupported(ty->optional_type->elem_type, buf, cap) : "optional";
	case ONNX__TYPE_PROTO__VALUE_MAP_TYPE: return "map";
	case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE: return "sparse tensor";
	default: return NULL;
	}
}
