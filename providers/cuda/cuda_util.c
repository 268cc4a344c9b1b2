/*
 * cuda_util: the CUDA ops' dtype helpers (float checks, element sizes,
 * host int reads, broadcast strides) and the op registry (one table per
 * family file).  Attribute and shape math is shared: providers/host/
 * ep_shape.c.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_ops.h"

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

int64_t cu_get_int(const cu_val *v, int64_t i)
{
	if (v->dtype == CU_INT32)
		return ((const int32_t *)v->host)[i];
	return ((const int64_t *)v->host)[i];
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
