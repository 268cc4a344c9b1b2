/*
 * seq_util: helpers of the sequence ops (seq_ops.h).
 */
#include "seq_ops.h"

const cpu_seq *seq_input(cpu_ctx *ctx, int i, int *rc)
{
	const cpu_tensor *t = cpu_input(ctx, i);

	if (!t || t->dtype != CPU_SEQUENCE || !t->data) {
		*rc = cpu_fail(ctx, CPU_E_INVALID, "input %d must be a sequence", i);
		return NULL;
	}
	return t->data;
}

int seq_position(cpu_ctx *ctx, int i, size_t n, int extra, int64_t dflt, int64_t *pos)
{
	const cpu_tensor *t = cpu_input(ctx, i);
	int64_t p = dflt, hi = (int64_t)n - 1 + extra;

	if (t) {
		if ((t->dtype != CPU_INT32 && t->dtype != CPU_INT64) || cpu_numel(t) != 1)
			return cpu_fail(ctx, CPU_E_INVALID, "position must be one int32 or int64");
		p = cpu_get_i64(t->dtype, t->data, 0);
	}
	if (p < -(int64_t)n || p > hi)
		return cpu_fail(ctx, CPU_E_INVALID, "position %lld is out of range for %zu elements",
				(long long)p, n);
	*pos = p < 0 ? p + (int64_t)n : p;
	return 0;
}

void seq_split_dims(int rank, const int64_t *dims, int axis, int64_t *outer, int64_t *inner)
{
	*outer = 1;
	*inner = 1;
	for (int d = 0; d < axis; d++)
		*outer *= dims[d];
	for (int d = axis + 1; d < rank; d++)
		*inner *= dims[d];
}
