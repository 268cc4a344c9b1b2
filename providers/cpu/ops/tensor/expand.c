/*
 * expand: broadcasting data movement for any dtype — Expand (the input
 * broadcast against a shape input) and Where (select between X and Y by a
 * bool condition, all three broadcast together).
 */
#include <string.h>

#include "cpu_ops.h"

static int expand_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *S;
	int64_t shape[CPU_MAX_RANK], n;
	int ranks[2], rc = 0;
	const int64_t *dims[2];
	cpu_bcast bc;
	cpu_tensor *Y;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(S = cpu_require(ctx, 1, &rc)))
		return rc;
	n = cpu_read_ints(S, shape, CPU_MAX_RANK);
	if (n < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "shape must be a 1-D int64 tensor of at most %d "
				"values", CPU_MAX_RANK);
	for (int64_t i = 0; i < n; i++)
		if (shape[i] < 0)
			return cpu_fail(ctx, CPU_E_INVALID, "shape[%lld] = %lld", (long long)i,
					(long long)shape[i]);
	ranks[0] = X->rank;
	ranks[1] = (int)n;
	dims[0] = X->dims;
	dims[1] = shape;
	if (cpu_bcast_init(&bc, 2, ranks, dims) != 0) {
		char xs[160], ss[160];
		return cpu_fail(ctx, CPU_E_INVALID, "%s does not broadcast with shape %s",
				cpu_shape_str(X->rank, X->dims, xs, sizeof(xs)),
				cpu_shape_str((int)n, shape, ss, sizeof(ss)));
	}
	if (!(Y = cpu_output(ctx, 0, X->dtype, bc.out_rank, bc.out_dims)))
		return CPU_E_NOMEM;
	cpu_copy_strided_par(ctx, Y->data, X->data, cpu_dtype_size(X->dtype), bc.rank, bc.dims,
			 bc.strides[0]);
	return 0;
}

typedef struct where_run {
	const uint8_t *c;
	const char *x, *y;
	char *out;
	size_t es;
} where_run;

#define WHERE_LOOP(T)                                                                      \
	do {                                                                               \
		const T *x = (const T *)r->x + off[1], *y = (const T *)r->y + off[2];      \
		T *o = (T *)r->out + off[3];                                               \
		for (int64_t i = 0; i < n; i++)                                            \
			o[i] = c[i * st[0]] ? x[i * st[1]] : y[i * st[2]];                 \
	} while (0)

static int where_row(void *arg, int64_t n, const int64_t *off, const int64_t *st)
{
	const where_run *r = arg;
	const uint8_t *c = r->c + off[0];

	/* by element type: a memcpy an element took 4 ns (a GPT export's
	 * causal mask) */
	if (r->es == 4) {
		WHERE_LOOP(uint32_t);
		return 0;
	}
	if (r->es == 8) {
		WHERE_LOOP(uint64_t);
		return 0;
	}
	for (int64_t i = 0; i < n; i++) {
		int pick = r->c[off[0] + i * st[0]] != 0;
		int64_t src = pick ? off[1] + i * st[1] : off[2] + i * st[2];
		const char *from = pick ? r->x : r->y;
		char *to = r->out + (size_t)(off[3] + i) * r->es;
		switch (r->es) {
		case 4: memcpy(to, from + (size_t)src * 4, 4); break;
		case 8: memcpy(to, from + (size_t)src * 8, 8); break;
		default: memcpy(to, from + (size_t)src * r->es, r->es); break;
		}
	}
	return 0;
}
#undef WHERE_LOOP

static int where_compute(cpu_ctx *ctx)
{
	const cpu_tensor *t[3];
	int ranks[3], rc = 0;
	const int64_t *dims[3];
	cpu_bcast bc;
	cpu_tensor *Y;
	where_run r;

	for (int i = 0; i < 3; i++) {
		if (!(t[i] = cpu_require(ctx, i, &rc)))
			return rc;
		ranks[i] = t[i]->rank;
		dims[i] = t[i]->dims;
	}
	if ((rc = cpu_check_dtype(ctx, t[0], 0, CPU_BIT(CPU_BOOL))) != 0)
		return rc;
	if (t[1]->dtype != t[2]->dtype)
		return cpu_fail(ctx, CPU_E_INVALID, "X is %s but Y is %s", cpu_dtype_name(t[1]->dtype),
				cpu_dtype_name(t[2]->dtype));
	if (cpu_bcast_init(&bc, 3, ranks, dims) != 0) {
		cpu_bcast_error(ctx, 3, t);
		return CPU_E_INVALID;
	}
	if (!(Y = cpu_output(ctx, 0, t[1]->dtype, bc.out_rank, bc.out_dims)))
		return CPU_E_NOMEM;
	r.c = t[0]->data;
	r.x = t[1]->data;
	r.y = t[2]->data;
	r.out = Y->data;
	r.es = cpu_dtype_size(t[1]->dtype);
	return cpu_bcast_each(&bc, where_row, &r);
}

static int expand_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			   int n_in, char *why, size_t n)
{
	(void)opset;
	if (p->op_type[0] == 'W')
		return cpu_supports_dtype(dt, n_in, 0, CPU_BIT(CPU_BOOL), why, n);
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_ALL, why, n);
}

const cpu_op cpu_op_expand = {
	"Expand", "", 8, CPU_OPSET_MAX, expand_supports, NULL, expand_compute, NULL,
};
const cpu_op cpu_op_where = {
	"Where", "", 9, CPU_OPSET_MAX, expand_supports, NULL, where_compute, NULL,
};
