/*
 * einsum: ONNX Einsum in general form — explicit ("ij,jk->ik") or implicit
 * output (the labels seen once, alphabetically, after the ellipsis dims),
 * repeated labels within an operand (diagonals), and "..." broadcasting
 * (right-aligned across operands, size-1 dims stretch).  Every label gets
 * one size and, per operand, one stride (the sum of its axes' strides, so
 * a repeated label walks the diagonal; 0 where the operand lacks it or
 * broadcasts it).  The output is then a plain loop over the output labels
 * with an inner loop over the summed ones.  Floats accumulate in double,
 * integers in wrapping 64-bit arithmetic.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "math_ops.h"

#define EIN_LETTERS 52
#define EIN_MAXLAB (EIN_LETTERS + CPU_MAX_RANK)
#define EIN_MAX_IN 16

typedef struct ein {
	int n_in, n_out, n_sum, ints;
	int64_t size[EIN_MAXLAB];
	int64_t stride[EIN_MAX_IN][EIN_MAXLAB];
	int out[CPU_MAX_RANK], sum[EIN_MAXLAB];
	const cpu_tensor *x[EIN_MAX_IN];
} ein;

/* One side's term, parsed: label per axis (-1 marks where "..." sits). */
typedef struct ein_term {
	int n, ell;       /* labels before expansion; ell: 1 when "..." present */
	int lab[CPU_MAX_RANK + 1];
} ein_term;

static int letter_id(char c)
{
	return c >= 'a' && c <= 'z' ? c - 'a' : c >= 'A' && c <= 'Z' ? 26 + c - 'A' : -1;
}

/* Parses s[0..len) into t; -1 on a bad character, a second "..." or too
 * many labels. */
static int parse_term(const char *s, size_t len, ein_term *t)
{
	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < len; i++) {
		if (isspace((unsigned char)s[i]))
			continue;
		if (t->n > CPU_MAX_RANK)
			return -1;
		if (s[i] == '.') {
			if (t->ell || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.')
				return -1;
			t->ell = 1;
			t->lab[t->n++] = -1;
			i += 2;
			continue;
		}
		if (letter_id(s[i]) < 0)
			return -1;
		t->lab[t->n++] = letter_id(s[i]);
	}
	return 0;
}

/* Expands t for an operand of rank r (E = widest ellipsis) into labels. */
static int expand_term(const ein_term *t, int r, int E, int *labs)
{
	int k = 0, e = r - (t->n - t->ell);
	if (e < 0 || (!t->ell && e != 0) || e > E)
		return -1;
	for (int i = 0; i < t->n; i++) {
		if (t->lab[i] >= 0) {
			labs[k++] = t->lab[i];
			continue;
		}
		for (int j = 0; j < e; j++)
			labs[k++] = EIN_LETTERS + (E - e) + j;
	}
	return k == r ? 0 : -1;
}

/* Sizes and strides of every label from the operands' expanded labels. */
static int ein_bind(cpu_ctx *ctx, ein *e, int labs[][CPU_MAX_RANK])
{
	for (int l = 0; l < EIN_MAXLAB; l++)
		e->size[l] = -1;
	for (int i = 0; i < e->n_in; i++)
		for (int d = 0; d < e->x[i]->rank; d++) {
			int64_t dim = e->x[i]->dims[d], *sz = &e->size[labs[i][d]];
			if (*sz < 0 || *sz == 1)
				*sz = dim;
			else if (dim != 1 && dim != *sz)
				return cpu_fail(ctx, CPU_E_INVALID, "input %d dim %d is %lld, "
						"the label's size elsewhere %lld", i, d,
						(long long)dim, (long long)*sz);
		}
	for (int i = 0; i < e->n_in; i++) {
		int64_t st = 1;
		memset(e->stride[i], 0, sizeof(e->stride[i]));
		for (int d = e->x[i]->rank - 1; d >= 0; d--) {
			if (e->x[i]->dims[d] != 1)
				e->stride[i][labs[i][d]] += st;
			st *= e->x[i]->dims[d];
		}
	}
	return 0;
}

/* The output labels: explicit after "->", else implicit. */
static int ein_output(cpu_ctx *ctx, ein *e, const char *rhs, int E, const int *count)
{
	ein_term t;
	int r;
	e->n_out = 0;
	if (!rhs) {
		for (int j = 0; j < E; j++)
			e->out[e->n_out++] = EIN_LETTERS + j;
		for (int l = 26; l < EIN_LETTERS + 26; l++) {   /* 'A'..'Z' sort before 'a' */
			if (count[l % EIN_LETTERS] != 1)
				continue;
			if (e->n_out == CPU_MAX_RANK)
				return cpu_fail(ctx, CPU_E_UNSUPPORTED, "output rank > %d",
						CPU_MAX_RANK);
			e->out[e->n_out++] = l % EIN_LETTERS;
		}
		return 0;
	}
	if (parse_term(rhs, strlen(rhs), &t) != 0)
		return cpu_fail(ctx, CPU_E_INVALID, "bad output subscripts '%s'", rhs);
	r = t.n - t.ell + (t.ell ? E : 0);
	if (r > CPU_MAX_RANK || expand_term(&t, r, E, e->out) != 0)
		return cpu_fail(ctx, CPU_E_INVALID, "bad output subscripts '%s'", rhs);
	e->n_out = r;
	for (int k = 0; k < e->n_out; k++) {
		if (e->size[e->out[k]] < 0)
			return cpu_fail(ctx, CPU_E_INVALID, "output label %d is not in the inputs",
					k);
		for (int j = 0; j < k; j++)
			if (e->out[j] == e->out[k])
				return cpu_fail(ctx, CPU_E_INVALID, "output label repeated");
	}
	return 0;
}

static int ein_parse(cpu_ctx *ctx, ein *e, const char *eq)
{
	const char *arrow = strstr(eq, "->"), *s = eq, *end = arrow ? arrow : eq + strlen(eq);
	int labs[EIN_MAX_IN][CPU_MAX_RANK], count[EIN_LETTERS] = {0}, E = 0, rc;
	ein_term terms[EIN_MAX_IN];

	for (int i = 0; i < e->n_in; i++) {
		const char *comma = memchr(s, ',', (size_t)(end - s));
		const char *te = comma && i + 1 < e->n_in ? comma : end;
		if (parse_term(s, (size_t)(te - s), &terms[i]) != 0 || (i + 1 < e->n_in && !comma))
			return cpu_fail(ctx, CPU_E_INVALID, "equation '%s' does not match "
					"%d inputs", eq, e->n_in);
		if (e->x[i]->rank - (terms[i].n - terms[i].ell) > E)
			E = e->x[i]->rank - (terms[i].n - terms[i].ell);
		for (int k = 0; k < terms[i].n; k++)
			if (terms[i].lab[k] >= 0)
				count[terms[i].lab[k]]++;
		s = te + 1;
	}
	for (int i = 0; i < e->n_in; i++)
		if (expand_term(&terms[i], e->x[i]->rank, E, labs[i]) != 0)
			return cpu_fail(ctx, CPU_E_INVALID, "term %d of '%s' does not fit input "
					"rank %d", i, eq, e->x[i]->rank);
	if ((rc = ein_bind(ctx, e, labs)) != 0)
		return rc;
	return ein_output(ctx, e, arrow ? arrow + 2 : NULL, E, count);
}

/* The summed labels: every bound label not in the output. */
static void ein_sum_labels(ein *e)
{
	unsigned char in_out[EIN_MAXLAB] = {0};
	for (int k = 0; k < e->n_out; k++)
		in_out[e->out[k]] = 1;
	e->n_sum = 0;
	for (int l = 0; l < EIN_MAXLAB; l++)
		if (e->size[l] >= 0 && !in_out[l])
			e->sum[e->n_sum++] = l;
}

/* Sum over the summed labels of the product of the operands, starting
 * from offsets base[]; the result as double or as raw 64-bit integer. */
static void ein_inner(const ein *e, const int64_t *base, double *rf, uint64_t *ri)
{
	int64_t idx[EIN_MAXLAB] = {0}, off[EIN_MAX_IN];
	double af = 0.0;
	uint64_t ai = 0;
	memcpy(off, base, sizeof(int64_t) * (size_t)e->n_in);
	for (int l = 0; l < e->n_sum; l++)
		if (e->size[e->sum[l]] == 0)
			goto done;
	for (;;) {
		double pf = 1.0;
		uint64_t pi = 1;
		int d;
		for (int i = 0; i < e->n_in; i++) {
			if (e->ints)
				pi *= math_get_u64(e->x[i]->dtype, e->x[i]->data, off[i]);
			else
				pf *= cpu_get_f64(e->x[i]->dtype, e->x[i]->data, off[i]);
		}
		af += pf;
		ai += pi;
		for (d = e->n_sum - 1; d >= 0; d--) {
			int l = e->sum[d];
			for (int i = 0; i < e->n_in; i++)
				off[i] += e->stride[i][l];
			if (++idx[d] < e->size[l])
				break;
			for (int i = 0; i < e->n_in; i++)
				off[i] -= e->stride[i][l] * e->size[l];
			idx[d] = 0;
		}
		if (d < 0)
			break;
	}
done:
	*rf = af;
	*ri = ai;
}

static void ein_run(const ein *e, cpu_tensor *Y)
{
	int64_t idx[CPU_MAX_RANK] = {0}, base[EIN_MAX_IN] = {0}, n = cpu_numel(Y);
	for (int64_t o = 0; o < n; o++) {
		double f;
		uint64_t u;
		ein_inner(e, base, &f, &u);
		if (e->ints)
			cpu_set_i64(Y->dtype, Y->data, o, (int64_t)u);
		else
			cpu_set_f64(Y->dtype, Y->data, o, f);
		for (int d = e->n_out - 1; d >= 0; d--) {
			int l = e->out[d];
			for (int i = 0; i < e->n_in; i++)
				base[i] += e->stride[i][l];
			if (++idx[d] < e->size[l])
				break;
			for (int i = 0; i < e->n_in; i++)
				base[i] -= e->stride[i][l] * e->size[l];
			idx[d] = 0;
		}
	}
}

static int einsum_compute(cpu_ctx *ctx)
{
	const Onnx__AttributeProto *a = cpu_attr(ctx->node->proto, "equation");
	int64_t od[CPU_MAX_RANK];
	char *eq;
	cpu_tensor *Y;
	ein *e;
	int rc = 0;

	if (ctx->n_in < 1 || ctx->n_in > EIN_MAX_IN)
		return cpu_fail(ctx, CPU_E_UNSUPPORTED, "Einsum takes 1 to %d inputs", EIN_MAX_IN);
	if (!a || !a->has_s)
		return cpu_fail(ctx, CPU_E_INVALID, "equation attribute is required");
	if (!(eq = cpu_scratch(ctx, a->s.len + 1)))
		return CPU_E_NOMEM;
	cpu_attr_str(ctx->node->proto, "equation", eq, a->s.len + 1);
	if (!(e = cpu_scratch(ctx, sizeof(*e))))
		return CPU_E_NOMEM;
	memset(e, 0, sizeof(*e));
	e->n_in = ctx->n_in;
	for (int i = 0; i < e->n_in; i++) {
		if (!(e->x[i] = cpu_require(ctx, i, &rc)) ||
		    (rc = cpu_check_dtype(ctx, e->x[i], i, MATH_TYPES_NUM)) != 0)
			return rc;
		if (e->x[i]->dtype != e->x[0]->dtype)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d is %s, input 0 %s", i,
					cpu_dtype_name(e->x[i]->dtype),
					cpu_dtype_name(e->x[0]->dtype));
	}
	if ((rc = ein_parse(ctx, e, eq)) != 0)
		return rc;
	ein_sum_labels(e);
	e->ints = !cpu_dtype_is_float(e->x[0]->dtype);
	for (int k = 0; k < e->n_out; k++)
		od[k] = e->size[e->out[k]];
	if (!(Y = cpu_output(ctx, 0, e->x[0]->dtype, e->n_out, od)))
		return CPU_E_NOMEM;
	ein_run(e, Y);
	return 0;
}

static int einsum_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			   int n_in, char *why, size_t n)
{
	(void)p;
	(void)opset;
	if (n_in < 1 || n_in > EIN_MAX_IN) {
		snprintf(why, n, "Einsum takes 1 to %d inputs, not %d", EIN_MAX_IN, n_in);
		return 0;
	}
	return math_supports_all(dt, n_in, MATH_TYPES_NUM, why, n);
}

const cpu_op cpu_op_einsum = { "Einsum", "", 12, CPU_OPSET_MAX, einsum_supports, NULL, einsum_compute, NULL };
