/*
 * norm: LayerNormalization (opset 17; Scale and B broadcast onto the
 * normalised dims, optional Mean and InvStdDev outputs) and
 * BatchNormalization: inference mode (all opsets: per-channel statistics,
 * or the per-activation ones of spatial=0 before opset 9) and, from opset
 * 14, training_mode=1, which normalises with the batch's own statistics
 * and returns the updated running ones.  float32.  LayerNormalization
 * runs each row on 8-lane vectors (float accumulators; two passes for mean
 * and variance over a row held in L1), rows split over the intra-op pool;
 * BatchNormalization accumulates its batch statistics in double.
 */
#include <math.h>
#include <string.h>

#include "cpu_ops.h"
#include "fuse_tail.h"
#include "par.h"
#include "vfloat.h"

static int f32_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_F32, why, n);
}

/* Spreads t (broadcastable onto dims) into a dense float block of their
 * shape; returns t's data itself when it already has that many elements. */
static const float *spread(cpu_ctx *ctx, const cpu_tensor *t, int idx, int rank,
			   const int64_t *dims, int *rc)
{
	int ranks[2] = {t->rank, rank};
	const int64_t *ds[2] = {t->dims, dims};
	cpu_bcast bc;
	float *out;
	if ((*rc = cpu_check_dtype(ctx, t, idx, CPU_TYPES_F32)) != 0)
		return NULL;
	if (cpu_bcast_init(&bc, 2, ranks, ds) != 0 || bc.out_rank != rank ||
	    memcmp(bc.out_dims, dims, sizeof(int64_t) * (size_t)rank) != 0) {
		*rc = cpu_fail(ctx, CPU_E_INVALID, "input %d does not broadcast onto the "
			       "normalized dims", idx);
		return NULL;
	}
	if (cpu_numel(t) == cpu_shape_numel(rank, dims))
		return t->data;
	out = cpu_scratch(ctx, (size_t)cpu_shape_numel(rank, dims) * sizeof(float) + 1);
	if (!out) {
		*rc = CPU_E_NOMEM;
		return NULL;
	}
	cpu_copy_strided(out, t->data, sizeof(float), bc.rank, bc.dims, bc.strides[0]);
	return out;
}

/* One row: mean, then the variance around it (two passes over a row that
 * sits in L1, which keeps the precision of a large mean), then
 * y = (x - mean) * inv * scale + bias; 8-lane vectors, float lanes. */
CPU_MULTIVERSION
static void ln_row(const float *x, float *y, int64_t n, const float *scale, const float *bias,
		   float eps, float *mean_out, float *inv_out)
{
	float mean = n ? vf_row_sum(x, n) / (float)n : 0.0f, inv;
	int64_t i;
	inv = 1.0f / sqrtf((n ? vf_row_sqdev(x, n, mean) / (float)n : 0.0f) + eps);
	for (i = 0; i + 8 <= n; i += 8) {
		vf8 v = (vf_load(x + i) - mean) * inv * vf_load(scale + i);
		vf_store(y + i, bias ? v + vf_load(bias + i) : v);
	}
	for (; i < n; i++)
		y[i] = (x[i] - mean) * inv * scale[i] + (bias ? bias[i] : 0.0f);
	*mean_out = mean;
	*inv_out = inv;
}

typedef struct ln_job {
	const float *x, *scale, *bias;
	float *y, *mean, *inv;      /* mean, inv: NULL when not requested */
	int64_t inner;
	float eps;
} ln_job;

static void ln_range(void *arg, int64_t o0, int64_t o1, int member)
{
	const ln_job *j = arg;
	float m, v;
	(void)member;
	for (int64_t o = o0; o < o1; o++) {
		ln_row(j->x + o * j->inner, j->y + o * j->inner, j->inner, j->scale, j->bias,
		       j->eps, &m, &v);
		if (j->mean)
			j->mean[o] = m;
		if (j->inv)
			j->inv[o] = v;
	}
}

static int layernorm_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const cpu_tensor *X, *S, *B = cpu_input(ctx, 2);
	const float *scale, *bias = NULL;
	cpu_tensor *Y, *M = NULL, *I = NULL;
	int64_t sdims[CPU_MAX_RANK], outer = 1, inner = 1;
	float eps = cpu_attr_float(p, "epsilon", 1e-5f);
	int axis, rc = 0;
	ln_job j;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(S = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_F32)) != 0)
		return rc;
	axis = cpu_norm_axis(cpu_attr_int(p, "axis", -1), X->rank);
	if (axis < 0)
		return cpu_fail(ctx, CPU_E_INVALID, "axis %lld out of range for rank %d",
				(long long)cpu_attr_int(p, "axis", -1), X->rank);
	for (int d = 0; d < X->rank; d++) {
		sdims[d] = d < axis ? X->dims[d] : 1;
		if (d < axis)
			outer *= X->dims[d];
		else
			inner *= X->dims[d];
	}
	if (!(scale = spread(ctx, S, 1, X->rank - axis, X->dims + axis, &rc)))
		return rc;
	if (B && !(bias = spread(ctx, B, 2, X->rank - axis, X->dims + axis, &rc)))
		return rc;
	if (!(Y = cpu_output(ctx, 0, CPU_FLOAT, X->rank, X->dims)))
		return CPU_E_NOMEM;
	if (ctx->n_out > 1 && !(M = cpu_output(ctx, 1, CPU_FLOAT, X->rank, sdims)))
		return CPU_E_NOMEM;
	if (ctx->n_out > 2 && !(I = cpu_output(ctx, 2, CPU_FLOAT, X->rank, sdims)))
		return CPU_E_NOMEM;
	j.x = X->data;
	j.scale = scale;
	j.bias = bias;
	j.y = Y->data;
	j.mean = M ? M->data : NULL;
	j.inv = I ? I->data : NULL;
	j.inner = inner;
	j.eps = eps;
	cpu_par_for(ctx, outer, (double)inner * 0.15 + 10.0, 1, ln_range, &j);
	return 0;
}

/* Parameter t at channel c, spatial position i (per channel or per activation). */
static float bn_param(const cpu_tensor *t, int64_t C, int64_t c, int64_t sp, int64_t i)
{
	return ((const float *)t->data)[cpu_numel(t) == C ? c : c * sp + i];
}

/* Channel c's per-channel constants as y = x * g + h. */
static void bn_affine(const cpu_tensor *const *t, int64_t C, int64_t c, float eps, float *g,
		      float *h)
{
	*g = bn_param(t[0], C, c, 1, 0) / sqrtf(bn_param(t[3], C, c, 1, 0) + eps);
	*h = bn_param(t[1], C, c, 1, 0) - bn_param(t[2], C, c, 1, 0) * *g;
}

/* relu: a fused Relu in the same pass (NaN kept, as the op keeps it). */
CPU_MULTIVERSION
static void bn_plane(const float *x, float *y, const cpu_tensor *const *t, int64_t C,
		     int64_t c, int64_t sp, float eps, int per_channel, int relu)
{
	if (per_channel) {
		float g, h;

		bn_affine(t, C, c, eps, &g, &h);
		if (relu)
			for (int64_t i = 0; i < sp; i++) {
				float v = x[i] * g + h;

				y[i] = v < 0.0f ? 0.0f : v;
			}
		else
			for (int64_t i = 0; i < sp; i++)
				y[i] = x[i] * g + h;
		return;
	}
	for (int64_t i = 0; i < sp; i++) {
		float g = bn_param(t[0], C, c, sp, i) / sqrtf(bn_param(t[3], C, c, sp, i) + eps);
		float v = (x[i] - bn_param(t[2], C, c, sp, i)) * g + bn_param(t[1], C, c, sp, i);

		y[i] = relu && v < 0.0f ? 0.0f : v;
	}
}

/* Per-channel mean and population variance of X over N and the spatial
 * dims, into mean[C] and var[C]. */
static void bn_batch_stats(const float *x, int64_t N, int64_t C, int64_t sp, float *mean,
			   float *var)
{
	int64_t cnt = N * sp;
	for (int64_t c = 0; c < C; c++) {
		double s = 0.0, v = 0.0, m;
		for (int64_t b = 0; b < N; b++)
			for (int64_t i = 0; i < sp; i++)
				s += x[(b * C + c) * sp + i];
		m = cnt ? s / (double)cnt : 0.0;
		for (int64_t b = 0; b < N; b++)
			for (int64_t i = 0; i < sp; i++) {
				double d = x[(b * C + c) * sp + i] - m;
				v += d * d;
			}
		mean[c] = (float)m;
		var[c] = cnt ? (float)(v / (double)cnt) : 0.0f;
	}
}

/* training_mode=1: t[2] and t[3] (the running mean and variance) are
 * replaced by the batch's statistics for normalising, and outputs 1 and 2
 * get running * momentum + batch * (1 - momentum). */
static int bn_training(cpu_ctx *ctx, const cpu_tensor *X, int64_t sp, const cpu_tensor **t,
		       cpu_tensor *stats)
{
	float mom = cpu_attr_float(ctx->node->proto, "momentum", 0.9f);
	int64_t C = X->dims[1];
	cpu_tensor *R[2] = {NULL, NULL};

	if (cpu_numel(t[2]) != C || cpu_numel(t[3]) != C)
		return cpu_fail(ctx, CPU_E_INVALID, "training_mode needs per-channel mean and var");
	for (int k = 0; k < 2; k++) {
		stats[k] = *t[2 + k];
		stats[k].data = cpu_scratch(ctx, (size_t)C * sizeof(float) + 1);
		if (!stats[k].data)
			return CPU_E_NOMEM;
		if (ctx->n_out > 1 + k &&
		    !(R[k] = cpu_output(ctx, 1 + k, CPU_FLOAT, t[2 + k]->rank, t[2 + k]->dims)))
			return CPU_E_NOMEM;
	}
	bn_batch_stats(X->data, X->dims[0], C, sp, stats[0].data, stats[1].data);
	for (int k = 0; k < 2; k++) {
		const float *run = t[2 + k]->data, *cur = stats[k].data;
		for (int64_t c = 0; R[k] && c < C; c++)
			((float *)R[k]->data)[c] = run[c] * mom + cur[c] * (1.0f - mom);
		t[2 + k] = &stats[k];
	}
	return 0;
}

/* Planes [p0, p1) of BatchNormalization's (N, C) planes, for cpu_par_for. */
typedef struct bn_job {
	const float *x;
	float *y;
	const cpu_tensor *const *t;
	int64_t C, sp;
	float eps;
	int per_channel;
	const cpu_fusion *act;   /* a fused activation, or NULL */
} bn_job;

static void bn_range(void *arg, int64_t p0, int64_t p1, int member)
{
	const bn_job *j = arg;
	int relu = j->act && j->act->act == CPU_FUSE_ACT_RELU;

	(void)member;
	for (int64_t p = p0; p < p1; p++) {
		bn_plane(j->x + p * j->sp, j->y + p * j->sp, j->t, j->C, p % j->C, j->sp, j->eps,
			 j->per_channel, relu);
		if (j->act && !relu)
			cpu_fuse_act_apply(j->act, j->y + p * j->sp, j->sp);
	}
}

/* Planes [p0, p1) of a channel-blocked X (cpu_layout.c): N x C / 8 planes
 * of sp pixels of eight channels, per-channel constants; a pixel's eight
 * a vector (the same multiply-add as bn_plane's). */
CPU_MULTIVERSION
static void bn_blk_range(void *arg, int64_t p0, int64_t p1, int member)
{
	const bn_job *j = arg;
	int relu = j->act && j->act->act == CPU_FUSE_ACT_RELU;
	int64_t blocks = j->C / 8;

	(void)member;
	for (int64_t p = p0; p < p1; p++) {
		const float *x = j->x + p * j->sp * 8;
		float *y = j->y + p * j->sp * 8, g[8], h[8];
		vf8 gv, hv, zero = vf_splat(0.0f);

		for (int i = 0; i < 8; i++)
			bn_affine(j->t, j->C, p % blocks * 8 + i, j->eps, &g[i], &h[i]);
		gv = vf_load(g);
		hv = vf_load(h);
		for (int64_t q = 0; q < j->sp; q++) {
			vf8 v = vf_load(x + q * 8) * gv + hv;

			/* (NaN compares false: kept, as bn_plane keeps it) */
			vf_store(y + q * 8, relu ? vf_sel(v < zero, zero, v) : v);
		}
		if (j->act && !relu)
			cpu_fuse_act_apply(j->act, y, j->sp * 8);
	}
}

static int batchnorm_compute(cpu_ctx *ctx)
{
	const cpu_tensor *X, *t[4];
	cpu_tensor stats[2];
	cpu_fuse_run fr;
	float eps = cpu_attr_float(ctx->node->proto, "epsilon", 1e-5f);
	int64_t C, sp = 1;
	int rc = 0, per_channel = 1;
	int training = ctx->node->opset >= 14 &&
		       cpu_attr_int(ctx->node->proto, "training_mode", 0) != 0;

	if (!(X = cpu_require(ctx, 0, &rc)) || (rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_F32)))
		return rc;
	if (X->rank < 2)
		return cpu_fail(ctx, CPU_E_INVALID, "X has rank %d (need N, C, ...)", X->rank);
	C = X->dims[1];
	for (int d = 2; d < X->rank; d++)
		sp *= X->dims[d];
	for (int i = 0; i < 4; i++) {
		if (!(t[i] = cpu_require(ctx, i + 1, &rc)) ||
		    (rc = cpu_check_dtype(ctx, t[i], i + 1, CPU_TYPES_F32)))
			return rc;
		/* per channel, or per activation (spatial=0 before opset 9) */
		if (cpu_numel(t[i]) != C && cpu_numel(t[i]) != C * sp)
			return cpu_fail(ctx, CPU_E_INVALID, "input %d has %lld elements for %lld "
					"channels", i + 1, (long long)cpu_numel(t[i]), (long long)C);
		per_channel &= cpu_numel(t[i]) == C;
	}
	/* a fused activation (cpu_fuse.c: a Relu after it) goes over each
	 * plane as it is written */
	if ((rc = cpu_fuse_begin(ctx, X->rank, X->dims, &fr)) != 0)
		return rc;
	/* The output planned over X itself (X dead after this node) is no
	 * hazard here: each float is read before it is written, at the same
	 * place.  Any other overlap keeps cpu_fuse_begin's scratch. */
	if (fr.y != fr.out && fr.out->data == X->data && fr.out->nbytes == X->nbytes)
		fr.y = fr.out;
	if (training && (rc = bn_training(ctx, X, sp, t, stats)) != 0)
		return rc;
	bn_job j = {X->data, fr.y->data, t, C, sp, eps, per_channel,
		    fr.act_inline != CPU_FUSE_ACT_NONE ? fr.fu : NULL};

	if (ctx->node->layout & CPU_LAYOUT_IN_BLK8) {
		/* (cpu_layout.c: inference, per-channel constants; a blocked
		 * value is 4-D of a multiple of 8 channels) */
		if (training || !per_channel || X->rank != 4 || C % 8)
			return cpu_fail(ctx, CPU_E_INTERNAL, "blocked BatchNormalization: X %d-D of "
					"%lld channels", X->rank, (long long)C);
		cpu_par_for(ctx, X->dims[0] * C / 8, 8.0 * (double)sp + 5.0, 1, bn_blk_range, &j);
		return cpu_fuse_end(ctx, &fr, 1);
	}

	/* ~1 ns a float: a multiply-add on its way through memory, which the
	 * layers before wrote split over the pool (read on one thread, half
	 * of it from the other core: DenseNet's pre-activation layers at 2
	 * threads 2330 us a run under the 0.1 this had, 1680 split; the
	 * model 24.5 -> 23.8 ms) */
	cpu_par_for(ctx, X->dims[0] * C, 1.0 * (double)sp + 5.0, 1, bn_range, &j);
	return cpu_fuse_end(ctx, &fr, 1);
}

const cpu_op cpu_op_layernorm = {
	"LayerNormalization", "", 17, CPU_OPSET_MAX, f32_supports, NULL, layernorm_compute, NULL,
};
const cpu_op cpu_op_batchnorm = {
	"BatchNormalization", "", 1, CPU_OPSET_MAX, f32_supports, NULL, batchnorm_compute, NULL,
};
