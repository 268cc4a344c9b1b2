/*
 * vk_util: the Vulkan ops' size checks (storage buffer limits) and the op
 * registry (one table per family file).  Dtype checks, attribute and
 * shape math are the device kit's (providers/devkit/dk_ops.c,
 * dk_shape.c).
 */
#include <stdio.h>
#include <string.h>

#include "vk_ops.h"

/* The tensors of one side of a NodeQuery: refuses a float tensor whose
 * known size exceeds what one storage-buffer binding reaches. */
static int side_fits(const char *side, size_t n_t, const int32_t *dt, size_t n_dt,
		     const int32_t *ranks, const int64_t *dims, size_t n_dims,
		     uint64_t max_bytes, uint64_t f16_size, char *why, size_t n)
{
	size_t at = 0;

	for (size_t i = 0; i < n_t; i++) {
		int64_t numel = 1;
		int known = 1;
		uint64_t esz;

		if (ranks[i] < 0)
			continue;
		if ((size_t)ranks[i] > n_dims - at)
			return snprintf(why, n, "malformed shapes in the capability query"), 0;
		for (int d = 0; d < ranks[i]; d++, at++) {
			if (dims[at] < 0)
				known = 0;
			else if (numel <= VKX_MAX_ELEMS)
				numel *= dims[at];
		}
		esz = i < n_dt && dt[i] == VKX_FLOAT16 ? f16_size : i < n_dt && dt[i] == VKX_FLOAT ? 4 : 0;
		if (!known || !esz)
			continue;
		if (numel >= VKX_MAX_ELEMS || (uint64_t)numel * esz > max_bytes)
			return snprintf(why, n, "%s %zu has %lld elements: more than a storage buffer "
					"reaches (%llu bytes)", side, i, (long long)numel,
					(unsigned long long)max_bytes), 0;
	}
	return 1;
}

int vk_shapes_fit(const Ortmk__NodeQuery *q, uint64_t max_bytes, int f16, char *why, size_t n)
{
	uint64_t f16_size = f16 ? 2 : 4;

	return side_fits("input", q->n_input_ranks, q->input_dtypes, q->n_input_dtypes,
			 q->input_ranks, q->input_dims, q->n_input_dims, max_bytes, f16_size, why,
			 n) &&
	       side_fits("output", q->n_output_ranks, q->output_dtypes, q->n_output_dtypes,
			 q->output_ranks, q->output_dims, q->n_output_dims, max_bytes, f16_size, why,
			 n);
}

const dk_op *vk_op_find(const char *op_type, const char *domain, int64_t opset)
{
	static const dk_op *const tables[] = {vk_ops_elem, vk_ops_linalg, vk_ops_nn, vk_ops_norm,
					      vk_ops_shape, vk_ops_reduce};

	return dk_op_in(tables, sizeof(tables) / sizeof(tables[0]), op_type, domain, opset);
}
