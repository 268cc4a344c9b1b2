/*
 * binary_math: broadcast elementwise ops of two tensors that binary.c does
 * not have — the logical And, Or, Xor (bool), BitShift (unsigned),
 * BitwiseAnd/Or/Xor (integers), Mod (Python's sign rule by default, C's
 * fmod with fmod=1) and PRelu (slope broadcast onto X; before opset 7 a
 * 1-D slope runs along the channel axis) — and the unary Not and
 * BitwiseNot.  Integers are read as their raw 64-bit patterns.
 */
#include <math.h>
#include <string.h>

#include "math_ops.h"

enum bm_op { B_AND, B_OR, B_XOR, B_BAND, B_BOR, B_BXOR, B_SHL, B_SHR };

static int bm_op(const char *t)
{
	static const char *const names[] = {
		"And", "Or", "Xor", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
	};
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strcmp(t, names[i]) == 0)
			return i;
	return -1;
}

static uint64_t bits_op(int op, uint64_t x, uint64_t y, int bits)
{
	switch (op) {
	case B_AND: case B_BAND: return x & y;
	case B_OR: case B_BOR: return x | y;
	case B_XOR: case B_BXOR: return x ^ y;
	case B_SHL: return y >= (uint64_t)bits ? 0 : x << y;
	default: return y >= (uint64_t)bits ? 0 : x >> y;
	}
}

static int bits_row(void *arg, int64_t n, const int64_t *off, const int64_t *st)
{
	const math_bin *m = arg;
	int32_t dt = m->a->dtype;
	int bits = (int)cpu_dtype_size(dt) * 8;
	if (dt == CPU_BOOL) {
		const uint8_t *a = m->a->data, *b = m->b->data;
		uint8_t *y = (uint8_t *)m->y->data + off[2];
		for (int64_t i = 0; i < n; i++)
			y[i] = (uint8_t)(bits_op(m->op, a[off[0] + i * st[0]] != 0,
						 b[off[1] + i * st[1]] != 0, 1) != 0);
		return 0;
	}
	for (int64_t i = 0; i < n; i++) {
		uint64_t x = math_get_u64(dt, m->a->data, off[0] + i * st[0]);
		uint64_t v = math_get_u64(dt, m->b->data, off[1] + i * st[1]);
		cpu_set_i64(dt, m->y->data, off[2] + i, (int64_t)bits_op(m->op, x, v, bits));
	}
	return 0;
}

/* Both inputs present, of one dtype inside mask. */
static int two_inputs(cpu_ctx *ctx, uint32_t mask, math_bin *m)
{
	int rc = 0;
	memset(m, 0, sizeof(*m));
	if (!(m->a = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, m->a, 0, mask)))
		return rc;
	if (!(m->b = cpu_require(ctx, 1, &rc)) || (rc = cpu_check_dtype(ctx, m->b, 1, mask)))
		return rc;
	if (m->a->dtype != m->b->dtype)
		return cpu_fail(ctx, CPU_E_INVALID, "operands are %s and %s",
				cpu_dtype_name(m->a->dtype), cpu_dtype_name(m->b->dtype));
	return 0;
}

static int logic_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			  char *why, size_t n)
{
	int op = bm_op(p->op_type);
	(void)opset;
	return math_supports_all(dt, n_in, op <= B_XOR ? CPU_BIT(CPU_BOOL) : MATH_TYPES_INT,
				 why, n);
}

static int logic_compute(cpu_ctx *ctx)
{
	int op = bm_op(ctx->node->proto->op_type), rc;
	math_bin m;
	if (op < 0)
		return cpu_fail(ctx, CPU_E_INTERNAL, "unknown logical op");
	if ((rc = two_inputs(ctx, op <= B_XOR ? CPU_BIT(CPU_BOOL) : MATH_TYPES_INT, &m)) != 0)
		return rc;
	m.op = op;
	return math_bin_run(ctx, &m, m.a->dtype, op <= B_XOR, bits_row);
}

static int shift_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			  int n_in, char *why, size_t n)
{
	(void)p;
	(void)opset;
	return math_supports_all(dt, n_in, MATH_TYPES_UINT, why, n);
}

static int shift_compute(cpu_ctx *ctx)
{
	char dir[16];
	math_bin m;
	int rc;
	if ((rc = two_inputs(ctx, MATH_TYPES_UINT, &m)) != 0)
		return rc;
	if (!cpu_attr_str(ctx->node->proto, "direction", dir, sizeof(dir)))
		return cpu_fail(ctx, CPU_E_INVALID, "BitShift needs the direction attribute");
	if (!strcmp(dir, "LEFT"))
		m.op = B_SHL;
	else if (!strcmp(dir, "RIGHT"))
		m.op = B_SHR;
	else
		return cpu_fail(ctx, CPU_E_INVALID, "direction '%s' is not LEFT or RIGHT", dir);
	return math_bin_run(ctx, &m, m.a->dtype, 0, bits_row);
}

/* ---- Mod ---- */

static double mod_f64(double x, double y, int c_fmod)
{
	double r = fmod(x, y);
	if (!c_fmod && r != 0.0 && ((r < 0.0) != (y < 0.0)))
		r += y;
	return r;
}

static int64_t mod_i64(int64_t x, int64_t y, int c_fmod)
{
	int64_t r = y == -1 ? 0 : x % y;
	if (!c_fmod && r != 0 && ((r < 0) != (y < 0)))
		r += y;
	return r;
}

static int mod_row(void *arg, int64_t n, const int64_t *off, const int64_t *st)
{
	const math_bin *m = arg;
	int32_t dt = m->a->dtype;
	for (int64_t i = 0; i < n; i++) {
		int64_t ia = off[0] + i * st[0], ib = off[1] + i * st[1], iy = off[2] + i;
		if (cpu_dtype_is_float(dt)) {
			cpu_set_f64(dt, m->y->data, iy, mod_f64(cpu_get_f64(dt, m->a->data, ia),
				    cpu_get_f64(dt, m->b->data, ib), (int)m->iparam));
		} else if (math_dtype_is_unsigned(dt)) {
			uint64_t v = math_get_u64(dt, m->b->data, ib);
			if (v == 0)
				return CPU_E_INVALID;
			cpu_set_i64(dt, m->y->data, iy,
				    (int64_t)(math_get_u64(dt, m->a->data, ia) % v));
		} else {
			int64_t v = cpu_get_i64(dt, m->b->data, ib);
			if (v == 0)
				return CPU_E_INVALID;
			cpu_set_i64(dt, m->y->data, iy,
				    mod_i64(cpu_get_i64(dt, m->a->data, ia), v, (int)m->iparam));
		}
	}
	return 0;
}

static int num_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return math_supports_all(dt, n_in, MATH_TYPES_NUM, why, n);
}

static int mod_compute(cpu_ctx *ctx)
{
	math_bin m;
	int rc;
	if ((rc = two_inputs(ctx, MATH_TYPES_NUM, &m)) != 0)
		return rc;
	m.iparam = cpu_attr_int(ctx->node->proto, "fmod", 0);
	if (m.iparam != 0 && m.iparam != 1)
		return cpu_fail(ctx, CPU_E_INVALID, "fmod must be 0 or 1, not %lld",
				(long long)m.iparam);
	rc = math_bin_run(ctx, &m, m.a->dtype, 0, mod_row);
	if (rc == CPU_E_INVALID && m.y)
		return cpu_fail(ctx, rc, "integer modulo by zero");
	return rc;
}

/* ---- PRelu ---- */

static int prelu_row(void *arg, int64_t n, const int64_t *off, const int64_t *st)
{
	const math_bin *m = arg;
	int32_t dt = m->a->dtype;
	if (dt == CPU_FLOAT) {
		const float *x = (const float *)m->a->data + off[0];
		const float *s = (const float *)m->b->data + off[1];
		float *y = (float *)m->y->data + off[2];
		for (int64_t i = 0; i < n; i++)
			y[i] = x[i * st[0]] < 0.0f ? x[i * st[0]] * s[i * st[1]] : x[i * st[0]];
		return 0;
	}
	for (int64_t i = 0; i < n; i++) {
		int64_t ia = off[0] + i * st[0], ib = off[1] + i * st[1];
		if (cpu_dtype_is_float(dt)) {
			double x = cpu_get_f64(dt, m->a->data, ia);
			cpu_set_f64(dt, m->y->data, off[2] + i,
				    x < 0.0 ? x * cpu_get_f64(dt, m->b->data, ib) : x);
		} else {
			int64_t x = cpu_get_i64(dt, m->a->data, ia);
			uint64_t s = (uint64_t)cpu_get_i64(dt, m->b->data, ib);
			if (x < 0)
				x = (int64_t)((uint64_t)x * s);
			cpu_set_i64(dt, m->y->data, off[2] + i, x);
		}
	}
	return 0;
}

static int prelu_compute(cpu_ctx *ctx)
{
	cpu_tensor slope;
	math_bin m;
	int rc;
	if ((rc = two_inputs(ctx, MATH_TYPES_NUM, &m)) != 0)
		return rc;
	slope = *m.b;
	/* PRelu-6 and older: one slope per channel (axis 1) */
	if (ctx->node->opset < 7 && slope.rank == 1 && m.a->rank >= 2 &&
	    slope.dims[0] == m.a->dims[1] && slope.dims[0] != 1) {
		slope.rank = m.a->rank - 1;
		for (int d = 1; d < slope.rank; d++)
			slope.dims[d] = 1;
	}
	if (slope.rank > m.a->rank)
		return cpu_fail(ctx, CPU_E_INVALID, "slope has rank %d > X's %d", slope.rank,
				m.a->rank);
	for (int d = 0; d < slope.rank; d++) {
		int64_t sd = slope.dims[d], xd = m.a->dims[m.a->rank - slope.rank + d];
		if (sd != 1 && sd != xd)
			return cpu_fail(ctx, CPU_E_INVALID, "slope dim %d (%lld) does not "
					"broadcast onto X (%lld)", d, (long long)sd, (long long)xd);
	}
	m.b = &slope;
	return math_bin_run(ctx, &m, m.a->dtype, 0, prelu_row);
}

/* ---- Not, BitwiseNot ---- */

static int not_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, !strcmp(p->op_type, "Not") ? CPU_BIT(CPU_BOOL)
					      : MATH_TYPES_INT, why, n);
}

static int not_compute(cpu_ctx *ctx)
{
	int is_bool = !strcmp(ctx->node->proto->op_type, "Not"), rc = 0;
	const cpu_tensor *X = cpu_require(ctx, 0, &rc);
	cpu_tensor *Y;
	int64_t n;
	if (!X || (rc = cpu_check_dtype(ctx, X, 0, is_bool ? CPU_BIT(CPU_BOOL) : MATH_TYPES_INT)))
		return rc;
	if (!(Y = cpu_output(ctx, 0, X->dtype, X->rank, X->dims)))
		return CPU_E_NOMEM;
	n = cpu_numel(X);
	for (int64_t i = 0; i < n; i++) {
		if (is_bool)
			((uint8_t *)Y->data)[i] = !((const uint8_t *)X->data)[i];
		else
			cpu_set_i64(X->dtype, Y->data, i,
				    (int64_t)~math_get_u64(X->dtype, X->data, i));
	}
	return 0;
}

const cpu_op cpu_op_and = { "And", "", 1, CPU_OPSET_MAX, logic_supports, NULL, logic_compute, NULL };
const cpu_op cpu_op_or = { "Or", "", 1, CPU_OPSET_MAX, logic_supports, NULL, logic_compute, NULL };
const cpu_op cpu_op_xor = { "Xor", "", 1, CPU_OPSET_MAX, logic_supports, NULL, logic_compute, NULL };
const cpu_op cpu_op_bitwiseand = { "BitwiseAnd", "", 18, CPU_OPSET_MAX, logic_supports, NULL, logic_compute, NULL };
const cpu_op cpu_op_bitwiseor = { "BitwiseOr", "", 18, CPU_OPSET_MAX, logic_supports, NULL, logic_compute, NULL };
const cpu_op cpu_op_bitwisexor = { "BitwiseXor", "", 18, CPU_OPSET_MAX, logic_supports, NULL, logic_compute, NULL };
const cpu_op cpu_op_bitshift = { "BitShift", "", 11, CPU_OPSET_MAX, shift_supports, NULL, shift_compute, NULL };
const cpu_op cpu_op_mod = { "Mod", "", 10, CPU_OPSET_MAX, num_supports, NULL, mod_compute, NULL };
const cpu_op cpu_op_prelu = { "PRelu", "", 1, CPU_OPSET_MAX, num_supports, NULL, prelu_compute, NULL };
const cpu_op cpu_op_not = { "Not", "", 1, CPU_OPSET_MAX, not_supports, NULL, not_compute, NULL };
const cpu_op cpu_op_bitwisenot = { "BitwiseNot", "", 18, CPU_OPSET_MAX, not_supports, NULL, not_compute, NULL };
