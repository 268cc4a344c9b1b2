/*
 * cuda_util: the CUDA provider's op registry (one table per family file).
 * Dtype checks, attribute and shape math are the device kit's
 * (providers/devkit/dk_ops.c, dk_shape.c).
 */
#include <stdio.h>
#include <string.h>

#include "cuda_ops.h"

const dk_op *cu_op_find(const char *op_type, const char *domain, int64_t opset)
{
	static const dk_op *const tables[] = {cu_ops_elem, cu_ops_linalg, cu_ops_conv, cu_ops_pool,
					      cu_ops_norm, cu_ops_shape, cu_ops_reduce};

	return dk_op_in(tables, sizeof(tables) / sizeof(tables[0]), op_type, domain, opset);
}
