/*
 * cuda_util: attribute and shape helpers of the CUDA ops, and the op
 * registry (one table per family file).
 */
#include <stdio.h>
#include <string.h>

#include "cuda_ops.h"

const Onnx__AttributeProto *cu_attr(const Onnx__NodeProto *p, const char *name)
{
	for (size_t i = 0; i < p->n_attribute; i++)
		if (p->attribute[i]->name && strcmp(p->attribute[i]->name, name) == 0)
			return p->attribute[i];
	return NULL;
}

int64_t cu_attr_int(const Onnx__NodeProto *p, const char *name, int64_t dflt)
{
	const Onnx__AttributeProto *a = cu_attr(p, name);

	return a && a->has_i ? a->i : dflt;
}

float cu_attr_float(const Onnx__NodeProto *p, const char *name, float dflt)
{
	const Onnx__AttributeProto *a = cu_attr(p, name);

	return a && a->has_f ? a->f : dflt;
}

int cu_attr_ints(const Onnx__NodeProto *p, const char *name, const int64_t **v)
{
	const Onnx__AttributeProto *a = cu_attr(p, name);

	if (!a)
		return -1;
	*v = a->ints;
	return (int)a->n_ints;
}

int cu_attr_is(const Onnx__NodeProto *p, const char *name, const char *want)
{
	const Onnx__AttributeProto *a = cu_attr(p, name);
	size_t n = strlen(want);

	return a && a->has_s && a->s.len == n && memcmp(a->s.data, want, n) == 0;
}

int cu_attr_unknown(const Onnx__NodeProto *p, const char *const *known, char *why, size_t n)
{
	for (size_t i = 0; i < p->n_attribute; i++) {
		const char *name = p->attribute[i]->name ? p->attribute[i]->name : "";
		int ok = 0;

		for (int k = 0; known[k] && !ok; k++)
			ok = strcmp(known[k], name) == 0;
		if (!ok) {
			snprintf(why, n, "attribute '%s' is not supported", name);
			return 1;
		}
	}
	return 0;
}

int cu_is_float(int32_t dtype)
{
	return dtype == CU_FLOAT || dtype == CU_FLOAT16;
}

size_t cu_elem_size(int32_t dtype)
{
	switch (dtype) {
	case CU_FLOAT16: return 2;
	case CU_INT64: return 8;
	default: return 4;
	}
}

int cu_need_float(const Onnx__NodeProto *p, const int32_t *dt, int n_in, int first, int count,
		  int f16, char *why, size_t n)
{
	int end = count < 0 ? n_in : first + count;
	int32_t seen = 0;

	for (int i = first; i < end && i < n_in; i++) {
		if (i < (int)p->n_input && !p->input[i][0])
			continue;
		if (dt[i] != CU_FLOAT && !(f16 && dt[i] == CU_FLOAT16)) {
			snprintf(why, n, "input %d is dtype %d (%s)", i, dt[i],
				 f16 ? "float32 or float16 only" : "float32 only");
			return 0;
		}
		if (seen && dt[i] != seen) {
			snprintf(why, n, "inputs mix float32 and float16");
			return 0;
		}
		seen = dt[i];
	}
	return 1;
}

int cu_n_outputs(const Onnx__NodeProto *p)
{
	int n = 0;

	for (size_t i = 0; i < p->n_output; i++)
		n += p->output[i][0] != 0;
	return n;
}

int64_t cu_numel(int rank, const int64_t *dims)
{
	int64_t n = 1;

	for (int i = 0; i < rank; i++)
		n *= dims[i];
	return n;
}

const char *cu_shape_str(int rank, const int64_t *dims, char *buf, size_t n)
{
	size_t at = 0;

	at += (size_t)snprintf(buf, n, "[");
	for (int i = 0; i < rank && at < n; i++)
		at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? "," : "", (long long)dims[i]);
	if (at < n)
		snprintf(buf + at, n - at, "]");
	return buf;
}

int64_t cu_get_int(const cu_val *v, int64_t i)
{
	if (v->dtype == CU_INT32)
		return ((const int32_t *)v->host)[i];
	return ((const int64_t *)v->host)[i];
}

int cu_axis(int64_t axis, int rank)
{
	if (axis < -rank || axis >= rank)
		return -1;
	return (int)(axis < 0 ? axis + rank : axis);
}

int cu_broadcast(int ra, const int64_t *a, int rb, const int64_t *b, int *ro, int64_t *out)
{
	int r = ra > rb ? ra : rb;

	if (r > EP_MAX_RANK)
		return -1;
	for (int i = 0; i < r; i++) {
		int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
		int64_t db = i < r - rb ? 1 : b[i - (r - rb)];

		if (da != db && da != 1 && db != 1)
			return -1;
		out[i] = da == 1 ? db : da;
	}
	*ro = r;
	return 0;
}

void cu_bcast_strides(const cu_val *x, int r, int64_t *st)
{
	int64_t s = 1;

	for (int i = r - 1; i >= 0; i--) {
		int xi = i - (r - x->rank);
		int64_t d = xi >= 0 ? x->dims[xi] : 1;

		st[i] = d == 1 ? 0 : s;
		s *= d;
	}
}

const cu_op *cu_op_find(const char *op_type, const char *domain, int64_t opset)
{
	static const cu_op *const tables[] = {cu_ops_elem, cu_ops_linalg, cu_ops_conv, cu_ops_pool,
					      cu_ops_norm, cu_ops_shape, cu_ops_reduce};

	if (domain && domain[0] && strcmp(domain, "ai.onnx") != 0)
		return NULL;
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		for (const cu_op *op = tables[t]; op->op_type; op++)
			if (strcmp(op->op_type, op_type) == 0 && opset >= op->min_opset &&
			    opset <= op->max_opset)
				return op;
	return NULL;
}
