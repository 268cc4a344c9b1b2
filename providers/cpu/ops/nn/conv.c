/*
 * conv: ONNX Conv (all opsets) for float32, 1-D to 3-D, with groups, pads,
 * strides, dilations, auto_pad and an optional bias, on the packed GEMM and
 * the provider's thread pool.  Per (image, group), one of:
 *
 *  - one group whose filter is short (input channels x taps <= 160, not
 *    1x1, stride 1 or 2, rows of at least 8 pixels, an AVX-512 CPU): a
 *    direct kernel, 16 pixels a vector (conv_direct.c): first layers;
 *  - one group of at least 16 input and 16 output channels and more than
 *    one tap, 1-D to 3-D, on an AVX2 + FMA CPU (on AVX-512: not a 3x3 with
 *    many channels on a small image): the input band transposed to
 *    channels-last, six output pixels by sixteen output channels a tile
 *    (AVX-512: eight by thirty-two) (conv_nhwc.c), unless Winograd below
 *    takes it;
 *  - grouped with at most 32 input and output channels a group: a direct
 *    kernel over padded planes, channels in blocks of 8 (conv_grouped.c);
 *  - depthwise (one input and one output channel per group): a direct
 *    sliding window over zero-padded planes, no GEMM (conv_dw.c; 3-D in
 *    conv_im2col.c);
 *  - output channels as rows: Y_g[Mg, P] = W_g[Mg, K] x col[K, P] (P the
 *    output pixels, K = C/g x kernel), the filter read in place as the
 *    GEMM's A, col packed on the fly;
 *  - pixels as rows, for small images with many channels (ResNet's
 *    14x14 and 7x7 stages, where P would be a ragged, narrow GEMM width):
 *    Y_g^T[P, Mg] = col^T x W_g^T with W_g^T packed once at load through
 *    the pre-pack cache; each finished block of Y^T is transposed into Y
 *    while it is still in cache.
 *
 * 3x3 stride-1 convolutions of one group with a constant filter go through
 * Winograd's F(2x2, 3x3) instead (conv_wino.c).  The rows form packs the im2col of the group's channels straight into the
 * GEMM's B blocks (conv_pack_im2col); the pixels form builds it as a
 * matrix (its A).  A 1x1, stride-1, unpadded convolution multiplies the
 * input itself.  Bias, a fused residual Add and
 * a fused Relu (node->fuse, set by cpu_fuse.c) are applied as each block of
 * the result leaves the GEMM.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blk8.h"
#include "conv_impl.h"
#include "fuse_tail.h"
#include "gemm.h"
#include "par.h"
#include "vfloat.h"

/* The pixels-as-rows form is used when there are fewer output pixels than
 * this many times the group's output channels, and fewer than CONV_T_MAX:
 * at ResNet-50's 28x28 (784 pixels, 512 channels) the rows form's GEMM
 * and its output in place beat the transposition back (0.67 -> 0.57 ms
 * for the 128 -> 512 1x1 layer with its residual, 1 thread). */
#define CONV_T_RATIO 2
#define CONV_T_MAX 512
/* On AVX-512 only from this depth: below, the rows form's zmm GEMM beat
 * the transposition (a 1x1 64 -> 384 at 14 x 14: 0.095 ms, 0.12 in the
 * pixels form; 256 -> 1024: 0.78 against 0.81), above it lost (512 ->
 * 2048 at 7 x 7: 1.16 against 0.79; 1024 -> 256 at 14 x 14: 0.83
 * against 0.71). */
#define CONV_T_MIN_K_512 384
/* Filters above this many packed bytes are not packed (the rows form reads
 * them in place). */
#define CONV_PACK_MAX ((size_t)32 << 20)

static int conv_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	(void)p;
	(void)opset;
	return cpu_supports_dtype(dt, n_in, 0, CPU_TYPES_F32, why, n) &&
	       cpu_supports_dtype(dt, n_in, 1, CPU_TYPES_F32, why, n);
}

typedef struct pack_arg {
	const float *w;
	int64_t G, Mg, ksz;
	size_t size;   /* per group */
} pack_arg;

/* Every group's W_g^T, one packed B after the other. */
static int pack_filter(void *dst, size_t size, void *arg)
{
	const pack_arg *a = arg;

	for (int64_t g = 0; g < a->G; g++) {
		int rc = gemm_pack_b(GEMM_ISA_AUTO, a->w + g * a->Mg * a->ksz, a->ksz, 1, a->ksz,
				     a->Mg, (char *)dst + g * a->size, a->size);
		if (rc)
			return rc;
	}
	(void)size;
	return 0;
}

static int pack_const_filter(cpu_node *node, conv_state *st, char *err, size_t n)
{
	const cpu_tensor *W = cpu_node_const(node, 1);
	pack_arg a;
	char fmt[48];

	if (!W || W->dtype != CPU_FLOAT || W->rank < 3 || W->dims[0] % st->group)
		return 0;
	a.w = W->data;
	a.G = st->group;
	a.Mg = W->dims[0] / st->group;
	a.ksz = cpu_numel(W) / (W->dims[0] ? W->dims[0] : 1);
	if (a.Mg <= 1 || a.ksz <= 0)
		return 0;   /* empty, or depthwise: no GEMM */
	a.size = gemm_pack_b_size(GEMM_ISA_AUTO, a.ksz, a.Mg);
	if (!a.size || a.size > CONV_PACK_MAX / (size_t)a.G)
		return 0;
	snprintf(fmt, sizeof(fmt), "conv-wt-g%lld-v%d-%s", (long long)a.G, GEMM_PACK_VERSION,
		 gemm_isa_name(gemm_isa_best()));
	st->packed = cpu_prepack(node, 1, fmt, a.size * (size_t)a.G, pack_filter, &a, err, n);
	if (!st->packed)
		return CPU_E_NOMEM;
	for (int64_t g = 0; g < a.G; g++)
		if (gemm_pack_b_check((const char *)st->packed + g * a.size, a.size, a.ksz, a.Mg)) {
			st->packed = NULL;   /* a blob we cannot use: the rows form */
			return 0;
		}
	st->pk_size = a.size;
	st->w_src = W->data;
	st->ksz = a.ksz;
	st->Mg = a.Mg;
	return 0;
}

typedef struct gpack_arg {
	const float *w;
	int64_t G, Mg, Cg, taps;
} gpack_arg;

static int gpack_fill(void *dst, size_t size, void *arg)
{
	const gpack_arg *a = arg;

	(void)size;
	conv_grouped_pack(a->w, a->G, a->Mg, a->Cg, a->taps, dst);
	return 0;
}

/* A constant filter of a grouped convolution conv_grouped.c takes. */
static int pack_grouped(cpu_node *node, conv_state *st, char *err, size_t n)
{
	const cpu_tensor *W = cpu_node_const(node, 1);
	gpack_arg a;

	if (!W || W->dtype != CPU_FLOAT || (W->rank != 3 && W->rank != 4) ||
	    W->dims[0] % st->group)
		return 0;
	a.w = W->data;
	a.G = st->group;
	a.Mg = W->dims[0] / st->group;
	a.Cg = W->dims[1];
	a.taps = W->dims[2] * (W->rank == 4 ? W->dims[3] : 1);
	if ((a.Mg == 1 && a.Cg == 1) || a.Mg < 1 || a.taps < 1)
		return 0;
	/* one group: for conv_direct.c, when its filter is short enough */
	if (a.G == 1 ? !conv_direct_takes(a.Cg, a.taps, a.Mg) : a.Mg > 32 || a.Cg > 32)
		return 0;
	st->gpacked = cpu_prepack(node, 1, "conv-grouped-v1",
				  conv_grouped_wsize(a.G, a.Mg, a.Cg, a.taps), gpack_fill, &a, err, n);
	if (!st->gpacked)
		return CPU_E_NOMEM;
	st->gw_src = W->data;
	return 0;
}

/* A one-group filter (M x C x taps) laid out by pack (conv_nhwc_pack,
 * conv_taps_pack) into the pre-pack cache. */
typedef struct wpack_arg {
	void (*pack)(const float *w, int64_t M, int64_t C, int64_t taps, float *dst);
	const float *w;
	int64_t M, C, taps;
} wpack_arg;

static int wpack_fill(void *dst, size_t size, void *arg)
{
	const wpack_arg *a = arg;

	(void)size;
	a->pack(a->w, a->M, a->C, a->taps, dst);
	return 0;
}

/* a's filter from W (rank 3 to 5), or 0 when W is not a float32 constant
 * of that rank. */
static int wpack_of(const cpu_tensor *W, void (*pack)(const float *, int64_t, int64_t, int64_t,
						      float *), wpack_arg *a)
{
	if (!W || W->dtype != CPU_FLOAT || W->rank < 3 || W->rank > 5)
		return 0;
	a->pack = pack;
	a->w = W->data;
	a->M = W->dims[0];
	a->C = W->dims[1];
	a->taps = 1;
	for (int i = 2; i < W->rank; i++)
		a->taps *= W->dims[i];
	return 1;
}

/* A dilated one-group layer's filter for conv_taps.c (taken on images
 * small enough that the outer taps read mostly padding). */
static int pack_taps(cpu_node *node, conv_state *st, char *err, size_t n)
{
	const cpu_tensor *W = cpu_node_const(node, 1);
	int dilated = 0;
	wpack_arg a;

	for (int i = 0; i < st->win.n_dilations; i++)
		dilated |= st->win.dilations[i] > 1;
	if (!dilated || st->group != 1 || !wpack_of(W, conv_taps_pack, &a) || W->rank > 4)
		return 0;
	st->taps = cpu_prepack(node, 1, "conv-taps-v1", (size_t)(a.M * a.C * a.taps) * sizeof(float),
			       wpack_fill, &a, err, n);
	if (!st->taps)
		return CPU_E_NOMEM;
	st->taps_src = W->data;
	return 0;
}

typedef struct bpack_arg {
	const float *w;
	int kind;
	int64_t M, Cg, taps;
} bpack_arg;

static int bpack_fill(void *dst, size_t size, void *arg)
{
	const bpack_arg *a = arg;

	(void)size;
	conv_blk_pack(a->kind, a->w, a->M, a->Cg, a->taps, dst);
	return 0;
}

static int pack_nhwc(cpu_node *node, conv_state *st, char *err, size_t n);

/* A layer on channel-blocked values (node->layout, cpu_layout.c): its
 * filter for conv_blk.c. */
static int pack_blk(cpu_node *node, conv_state *st, char *err, size_t n)
{
	const cpu_tensor *W = cpu_node_const(node, 1);
	bpack_arg a;

	if (!node->layout || !(a.kind = conv_blk_kind(node->proto, W)))
		return 0;
	/* Winograd's transforms (CONV_BLK_W3) and conv_nhwc.c's band
	 * transposition and row stores (CONV_BLK_NHWC) read and write the
	 * blocked values; the filter is the plain layer's */
	if (a.kind == CONV_BLK_W3 || a.kind == CONV_BLK_NHWC) {
		int rc = a.kind == CONV_BLK_W3 ? conv_wino_prepare(node, st, err, n) :
						 pack_nhwc(node, st, err, n);
		const void *f = a.kind == CONV_BLK_W3 ? st->wino : (const void *)st->nhwc;

		if (rc || !f)
			return rc;
		st->blk_kind = a.kind;
		st->blk = f;
		st->blk_src = W->data;
		return 0;
	}
	/* A 1x1 layer reading NCHW and writing NCHWc8 blocks its input into
	 * scratch for the blocked tile (conv_blk_run): the GEMM with its
	 * output blocked after took 1.7x the time (ResNet-50's 64 -> 256 at
	 * 56 x 56, Xeon), and 2-3x with a residual, which it unblocked first.
	 * (Reading NCHW in the tile, six pixels of each plane, took 1.1-2.2x
	 * the GEMM's time on Zen 3.) */
	if ((a.kind == CONV_BLK_PW || a.kind == CONV_BLK_PWS) &&
	    !(node->layout & CPU_LAYOUT_IN_BLK8) && !(node->layout & CPU_LAYOUT_OUT_BLK8))
		return 0;
	a.w = W->data;
	a.M = W->dims[0];
	a.Cg = W->dims[1];
	a.taps = W->dims[2] * W->dims[3];
	st->blk = cpu_prepack(node, 1,
			      a.kind == CONV_BLK_PW || a.kind == CONV_BLK_PWS ? "conv-blk-pw-v1" :
			      a.kind == CONV_BLK_DW ? "conv-blk-dw-v1" :
			      a.kind == CONV_BLK_G8 ? "conv-blk-g8-v1" :
			      a.kind == CONV_BLK_KB ? "conv-blk-kb-v1" : "conv-blk-in-v1",
			      conv_blk_wsize(a.kind, a.M, a.Cg, a.taps), bpack_fill, &a, err, n);
	if (!st->blk)
		return CPU_E_NOMEM;
	st->blk_kind = a.kind;
	st->blk_src = W->data;
	return 0;
}

/* A constant one-group filter conv_nhwc.c takes. */
static int pack_nhwc(cpu_node *node, conv_state *st, char *err, size_t n)
{
	const cpu_tensor *W = cpu_node_const(node, 1);
	wpack_arg a;

	if (st->group != 1 || !wpack_of(W, conv_nhwc_pack, &a))
		return 0;
	if (!conv_nhwc_takes(a.C, a.taps, a.M, cpu_window_strided(&st->win)) ||
	    conv_direct_takes(a.C, a.taps, a.M))
		return 0;
	st->nhwc = cpu_prepack(node, 1, "conv-nhwc-v1", conv_nhwc_wsize(a.M, a.C, a.taps),
			       wpack_fill, &a, err, n);
	if (!st->nhwc)
		return CPU_E_NOMEM;
	st->nhwc_src = W->data;
	/* The packed copy holds every value of the filter: a path that reads
	 * the filter itself gets it back from there (filter_values), and the
	 * weight can go (R3D-18's 3-D layers: 132 MB held twice).  A float16
	 * filter's float32 copy stays with the node anyway. */
	if (node->f16_mode != CPU_F16_WIDEN)
		node->packed_only |= 1u << 1;
	return 0;
}

static int conv_prepare(cpu_node *node, char *err, size_t n)
{
	conv_state *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return CPU_E_NOMEM;
	node->state = st;
	rc = cpu_window_parse(node->proto, &st->win, err, n);
	st->group = cpu_attr_int(node->proto, "group", 1);
	if (!rc && st->group < 1) {
		snprintf(err, n, "group must be >= 1 (got %lld)", (long long)st->group);
		rc = CPU_E_INVALID;
	}
	st->win.ceil_mode = 0;   /* a pooling attribute, not Conv's */
	if (!rc)
		rc = pack_taps(node, st, err, n);
	if (!rc)
		rc = pack_blk(node, st, err, n);
	if (!rc && st->blk)
		return 0;   /* conv_blk.c runs it */
	if (!rc)
		rc = pack_grouped(node, st, err, n);
	if (!rc && !st->gpacked)
		rc = conv_wino_prepare(node, st, err, n);
	/* A Winograd layer's image too large for it (conv_wino_fits) lays the
	 * filter out for conv_nhwc.c on each run instead: a few microseconds
	 * against that image's product, where packing both at load cost
	 * ResNet-18 a fifth more session creation time. */
	if (!rc && !st->gpacked && !st->wino)
		rc = pack_nhwc(node, st, err, n);
	if (!rc && !st->wino && !st->gpacked && !st->nhwc)
		rc = pack_const_filter(node, st, err, n);
	return rc;
}

static void conv_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

static int conv_check(cpu_ctx *ctx, const cpu_tensor *X, const cpu_tensor *W,
		      const cpu_tensor *B, int64_t group)
{
	int rc = cpu_check_dtype(ctx, X, 0, CPU_TYPES_F32);
	if (!rc)
		rc = cpu_check_dtype(ctx, W, 1, CPU_TYPES_F32);
	if (!rc && B)
		rc = cpu_check_dtype(ctx, B, 2, CPU_TYPES_F32);
	if (rc)
		return rc;
	if (X->rank < 3 || W->rank != X->rank)
		return cpu_fail(ctx, CPU_E_INVALID, "X has rank %d and W rank %d (need equal, >= 3)",
				X->rank, W->rank);
	if (group > X->dims[1] || X->dims[1] % group != 0 || W->dims[1] != X->dims[1] / group ||
	    W->dims[0] % group != 0)
		return cpu_fail(ctx, CPU_E_INVALID, "X has %lld channels, W is [%lld,%lld,...] "
				"with group %lld", (long long)X->dims[1], (long long)W->dims[0],
				(long long)W->dims[1], (long long)group);
	if (B && (B->rank != 1 || B->dims[0] != W->dims[0]))
		return cpu_fail(ctx, CPU_E_INVALID, "bias must be [%lld]", (long long)W->dims[0]);
	return 0;
}

/* Post-processing of a finished block of Y^T (pixels x channels): written
 * transposed into Y, plus the residual, then the activation. */
typedef struct post_t {
	float *y;               /* the group's first output plane */
	const float *res;       /* the residual at the same place, or NULL */
	int64_t osz;
	int relu;
	const cpu_fusion *act;  /* another activation, or NULL */
} post_t;

/* 8 x 8 blocks through registers (a float at a time, the strided reads of
 * the pixels form cost it as much as its GEMM on ResNet-50's 1x1 layers),
 * the residual and Relu on the way; the edges one by one. */
CPU_MULTIVERSION
void conv_to_planes(const float *c, int64_t ldc, int64_t pixels, int64_t channels, float *y,
		    const float *res, int64_t plane, int relu)
{
	int64_t R = pixels / 8 * 8, C = channels / 8 * 8;
	const vf8 zero = vf_splat(0.0f);

	for (int64_t j = 0; j < C; j += 8)
		for (int64_t i = 0; i < R; i += 8) {
			vf8 v[8];

			for (int k = 0; k < 8; k++)
				v[k] = vf_load(c + (i + k) * ldc + j);
			vf_transpose8(v);
			for (int k = 0; k < 8; k++) {
				int64_t at = (j + k) * plane + i;

				if (res)
					v[k] += vf_load(res + at);
				if (relu)
					v[k] = vf_sel(v[k] < zero, zero, v[k]);
				vf_store(y + at, v[k]);
			}
		}
	for (int64_t j = 0; j < channels; j++)
		for (int64_t i = j < C ? R : 0; i < pixels; i++) {
			float v = c[i * ldc + j] + (res ? res[j * plane + i] : 0.0f);

			y[j * plane + i] = relu && v < 0.0f ? 0.0f : v;
		}
}

/* A finished block of Y^T into Y (conv_to_planes), then the activation. */
static void transpose_out(void *arg, float *c, int64_t ldc, int64_t row0, int64_t rows,
			  int64_t col0, int64_t cols)
{
	const post_t *pt = arg;
	int64_t at = col0 * pt->osz + row0;

	conv_to_planes(c, ldc, rows, cols, pt->y + at, pt->res ? pt->res + at : NULL, pt->osz,
		       pt->relu);
	if (pt->act)
		for (int64_t j = 0; j < cols; j++)
			cpu_fuse_act_apply(pt->act, pt->y + (col0 + j) * pt->osz + row0, rows);
}

/* One (image, group) through the GEMM.  a: col [ksz, osz] or the input
 * itself (1x1); y: the group's output [Mg, osz]; res: the residual at y's
 * place (then y already holds it for the rows form) or NULL; packed: the
 * group's W^T for the pixels-as-rows form (ct its [osz, Mg] result), or
 * NULL for the rows form, which packs the im2col of pk_in (the group's
 * input) itself when pk_in is not NULL. */
static int group_gemm(cpu_ctx *ctx, const conv_job *j, const float *a, const float *pk_in,
		      const float *w, const float *bias, const void *packed, float *y,
		      const float *res, float *ct)
{
	gemm_epilogue ep = GEMM_EPILOGUE_INIT;
	post_t pt;

	if (packed) {
		ep.bias = bias;
		ep.bias_kind = bias ? GEMM_BIAS_COL : GEMM_BIAS_NONE;
		/* With a residual the activation follows the addition. */
		ep.act = j->relu && !res ? GEMM_ACT_RELU : GEMM_ACT_NONE;
		pt.y = y;
		pt.res = res;
		pt.osz = j->osz;
		pt.relu = j->relu && res;
		pt.act = j->act;
		ep.post = transpose_out;
		ep.post_ctx = &pt;
		return gemm_compute(ctx->pool, j->osz, j->Mg, j->ksz, a, j->osz, 1, packed, &ep, ct,
				    j->Mg);
	}
	ep.bias = bias;
	ep.bias_kind = bias ? GEMM_BIAS_ROW : GEMM_BIAS_NONE;
	ep.beta = res ? 1.0f : 0.0f;
	ep.act = j->relu ? GEMM_ACT_RELU : GEMM_ACT_NONE;
	if (j->act && j->act->act == CPU_FUSE_ACT_CLIP) {
		ep.act = GEMM_ACT_CLIP;
		ep.clip_min = j->act->act_a;
		ep.clip_max = j->act->act_b;
	} else if (j->act) {
		ep.post = cpu_fuse_act_block;
		ep.post_ctx = (void *)j->act;
	}
	if (pk_in) {
		/* The im2col goes straight into the GEMM's packed B blocks. */
		conv_packer cp = {pk_in, &j->g};

		return gemm_sgemm_packer(ctx->pool, GEMM_ISA_AUTO, 0, j->Mg, j->osz, j->ksz, w,
					 j->ksz, conv_pack_im2col, &cp, &ep, y, j->osz);
	}
	return gemm_sgemm(ctx->pool, GEMM_ISA_AUTO, 0, 0, j->Mg, j->osz, j->ksz, w, j->ksz, a,
			  j->osz, &ep, y, j->osz);
}

/* cpu_im2col split over the pool by input channels (each channel's taps
 * are a block of rows of col). */
typedef struct im2col_arg {
	const conv_job *j;
	const float *x;
	float *col;
} im2col_arg;

static void im2col_range(void *arg, int64_t c0, int64_t c1, int member)
{
	const im2col_arg *a = arg;
	const cpu_geom *g = &a->j->g;
	int64_t isz = g->in[0] * g->in[1] * g->in[2], taps = g->k[0] * g->k[1] * g->k[2];

	(void)member;
	cpu_im2col(a->x + c0 * isz, c1 - c0, g, a->col + c0 * taps * a->j->osz);
}

static void im2col_par(cpu_ctx *ctx, const conv_job *j, const float *x, float *col)
{
	im2col_arg a = {j, x, col};
	int64_t taps = j->g.k[0] * j->g.k[1] * j->g.k[2];

	/* ~1 ns an element: a strided gather */
	cpu_par_for(ctx, j->Cg, 1.0 * (double)(taps * j->osz), 1, im2col_range, &a);
}

/* Images [b0, b1) of the GEMM forms, every group of each, with member's
 * share of the scratch; ctx runs each GEMM (on its pool, or on none). */
typedef struct conv_images {
	const conv_job *j;
	const conv_state *st;
	const float *x, *w, *b;
	float *y;
	const void *packed;
	int64_t G, M, isz;
	int direct, use_t;
	float *col, *ct;          /* members x col_n, ct_n floats */
	size_t col_n, ct_n;
	int failed;
	cpu_ctx ctx1;             /* the node's context without its pool */
} conv_images;

static void conv_images_run(cpu_ctx *ctx, conv_images *ci, int64_t b0, int64_t b1, int member)
{
	const conv_job *j = ci->j;
	float *col = ci->col ? ci->col + (size_t)member * ci->col_n : NULL;
	float *ct = ci->ct ? ci->ct + (size_t)member * ci->ct_n : NULL;

	for (int64_t b = b0; b < b1; b++)
		for (int64_t grp = 0; grp < ci->G; grp++) {
			const float *x = ci->x + (b * ci->G + grp) * j->Cg * ci->isz;
			int64_t yoff = (b * ci->M + grp * j->Mg) * j->osz;
			float *y = ci->y + yoff;
			const float *res = j->res ? (const float *)j->res->data + yoff : NULL;
			const float *w = ci->w + grp * j->Mg * j->ksz;
			const float *bias = ci->b ? ci->b + grp * j->Mg : NULL;
			const void *pk = ci->use_t ? (const char *)ci->packed + grp * ci->st->pk_size :
				NULL;

			if (!ci->direct && ci->use_t)
				im2col_par(ctx, j, x, col);
			/* The rows form adds the residual as the GEMM's C (beta 1). */
			if (res && !pk && res != y)
				memcpy(y, res, (size_t)(j->Mg * j->osz) * sizeof(float));
			if (group_gemm(ctx, j, ci->direct ? x : col, ci->direct || ci->use_t ? NULL : x,
				       w, bias, pk, y, res, ct))
				__atomic_store_n(&ci->failed, 1, __ATOMIC_RELAXED);
		}
}

static void images_range(void *arg, int64_t b0, int64_t b1, int member)
{
	conv_images *ci = arg;

	/* every member runs its GEMMs with ctx1: only its (absent) pool is
	 * read there */
	conv_images_run(&ci->ctx1, ci, b0, b1, member);
}

/* Whether tap k of spatial slot i reads the image (not only padding) for
 * at least one output. */
static int tap_reads_image(const cpu_geom *g, int i, int64_t k)
{
	int64_t off = k * g->d[i] - g->pb[i];
	int64_t o = off >= 0 ? 0 : (-off + g->s[i] - 1) / g->s[i];

	return o < g->out[i] && o * g->s[i] + off < g->in[i];
}

/* Whether the layer keeps its constant filter only packed (node->
 * packed_only: the weight may have been given back at load): its values
 * then come from the conv_nhwc.c copy. */
static int filter_gone(const cpu_ctx *ctx, const conv_state *st)
{
	return (ctx->node->packed_only >> 1 & 1) && st->nhwc;
}

/* The filter's values where a path reads them as they are: wd, or, when
 * wd is the filter filter_gone says is gone, the filter rebuilt into the
 * call's scratch.  NULL when out of memory. */
static const float *filter_values(cpu_ctx *ctx, const conv_state *st, const cpu_tensor *W,
				  const float *wd)
{
	int64_t taps = 1;
	float *w;

	if (wd != W->data || !filter_gone(ctx, st))
		return wd;
	for (int i = 2; i < W->rank; i++)
		taps *= W->dims[i];
	if (!(w = cpu_scratch(ctx, W->nbytes + 1)))
		return NULL;
	conv_nhwc_unpack(st->nhwc, W->dims[0], W->dims[1], taps, NULL, taps, w);
	return w;
}

/* Drops the kernel's outer taps that read only padding for every output:
 * a dilated layer on a small image (DeepLabV3's atrous pyramid: dilation
 * 24 and 36 on a 20x20 map, where every outer tap lands in the padding)
 * is then the 1x1 or smaller convolution it computes, not nine times its
 * work in zeros.  g is narrowed in place (kernel and leading pad; the
 * outputs are the same); returns the filter of the narrowed kernel (a
 * copy in the node's scratch, or, narrowed to one tap, that tap's slice of
 * the filter conv_taps.c packed at load: the copy gathered one float in
 * nine from DeepLabV3's 8.8 MB filters, 1.6 ms a layer a run), W's own data
 * when nothing is dropped, or NULL without memory.  A slot whose narrowed
 * pads would go negative keeps its taps. */
static const float *conv_prune_taps(cpu_ctx *ctx, const conv_state *st, cpu_geom *g,
				    const cpu_tensor *W)
{
	int64_t k0[3], k1[3], pb[3], pe[3], n = 1;
	int pruned = 0;

	for (int i = 0; i < 3; i++) {
		k0[i] = 0;
		k1[i] = g->k[i];
		while (k0[i] < k1[i] && !tap_reads_image(g, i, k0[i]))
			k0[i]++;
		while (k1[i] > k0[i] && !tap_reads_image(g, i, k1[i] - 1))
			k1[i]--;
		pb[i] = g->pb[i] - k0[i] * g->d[i];
		pe[i] = (g->out[i] - 1) * g->s[i] + (k1[i] - k0[i] - 1) * g->d[i] + 1 - g->in[i] -
			pb[i];
		if (k0[i] == k1[i] || pb[i] < 0 || pe[i] < 0) {
			k0[i] = 0;
			k1[i] = g->k[i];
			pb[i] = g->pb[i];
			pe[i] = g->pe[i];
		}
		pruned |= k1[i] - k0[i] != g->k[i];
		n *= k1[i] - k0[i];
	}
	if (!pruned)
		return W->data;
	int64_t outer = W->dims[0] * W->dims[1];
	const float *src, *out;
	float *w;

	if (n == 1 && st->taps && st->taps_src == W->data && st->group == 1) {
		/* [tap][M][C]: the tap's M x C slice is the 1x1 filter */
		out = st->taps + ((k0[0] * g->k[1] + k0[1]) * g->k[2] + k0[2]) * outer;
	} else if (filter_gone(ctx, st)) {
		/* the weight is gone: the kept taps straight from the packed copy */
		int64_t *kept = cpu_scratch(ctx, (size_t)n * sizeof(int64_t)), t = 0;

		if (!kept || !(w = cpu_scratch(ctx, (size_t)(outer * n) * sizeof(float))))
			return NULL;
		for (int64_t a = k0[0]; a < k1[0]; a++)
			for (int64_t b = k0[1]; b < k1[1]; b++)
				for (int64_t c = k0[2]; c < k1[2]; c++)
					kept[t++] = (a * g->k[1] + b) * g->k[2] + c;
		conv_nhwc_unpack(st->nhwc, W->dims[0], W->dims[1], g->k[0] * g->k[1] * g->k[2], kept,
				 n, w);
		out = w;
	} else {
		if (!(w = cpu_scratch(ctx, (size_t)(outer * n) * sizeof(float))))
			return NULL;
		src = W->data;
		for (int64_t o = 0, t = 0; o < outer; o++)
			for (int64_t a = k0[0]; a < k1[0]; a++)
				for (int64_t b = k0[1]; b < k1[1]; b++)
					for (int64_t c = k0[2]; c < k1[2]; c++)
						w[t++] = src[((o * g->k[0] + a) * g->k[1] + b) *
							     g->k[2] + c];
		out = w;
	}
	for (int i = 0; i < 3; i++) {
		g->k[i] = k1[i] - k0[i];
		g->pb[i] = pb[i];
		g->pe[i] = pe[i];
	}
	return out;
}

/* The filter in conv_grouped_pack's layout (conv_grouped.c and, with one
 * group, conv_direct.c): packed at load when it is the constant filter,
 * else laid out in scratch now; NULL when out of memory. */
static const float *grouped_filter(cpu_ctx *ctx, const conv_state *st, const conv_job *j,
				   const cpu_tensor *W, const float *wd, int64_t G)
{
	int64_t taps = j->ksz / j->Cg;
	float *s;

	if (st->gpacked && wd == st->gw_src)
		return st->gpacked;
	if (!(wd = filter_values(ctx, st, W, wd)) ||
	    !(s = cpu_scratch(ctx, conv_grouped_wsize(G, j->Mg, j->Cg, taps))))
		return NULL;
	conv_grouped_pack(wd, G, j->Mg, j->Cg, taps, s);
	return s;
}

/* Whether Winograd (conv_wino.c) takes this call of a one-group layer
 * whose transformed filter is packed: 3x3 stride 1, or dilated. */
static int wino_fits_call(cpu_ctx *ctx, const conv_job *j)
{
	const cpu_geom *g = &j->g;
	int members = cpu_pool_threads(ctx->pool);

	return g->d[1] > 1 ? conv_wino_dilated_fits(j, members) :
	       g->k[1] == 3 && g->k[2] == 3 && g->s[1] == 1 && g->s[2] == 1 && g->d[2] == 1 &&
	       conv_wino_fits(j, members);
}

/* The N images of x (C x isz floats each) into y by Winograd. */
static int wino_images(cpu_ctx *ctx, const conv_state *st, const conv_job *j, int64_t N,
		       const float *x, int64_t isz, const float *b, float *y)
{
	for (int64_t n = 0; n < N; n++) {
		const float *res = j->res ? (const float *)j->res->data + n * j->Mg * j->osz : NULL;
		int rc = (j->g.d[1] > 1 ? conv_wino_dilated : conv_wino_run)(
			ctx, st, j, x + n * j->Cg * isz, b, res, y + n * j->Mg * j->osz);

		if (rc)
			return rc;
	}
	return 0;
}

/* The filter in conv_nhwc_pack's layout: packed at load when it is the
 * constant filter, else laid out in scratch now; NULL when out of memory. */
static const float *nhwc_filter(cpu_ctx *ctx, const conv_state *st, const conv_job *j,
				const float *wd)
{
	float *s;

	if (st->nhwc && wd == st->nhwc_src)
		return st->nhwc;
	if (!(s = cpu_scratch(ctx, conv_nhwc_wsize(j->Mg, j->Cg, j->ksz / j->Cg))))
		return NULL;
	conv_nhwc_pack(wd, j->Mg, j->Cg, j->ksz / j->Cg, s);
	return s;
}

/* cpu_fuse_end, then the output reordered to NCHWc8 when the node writes
 * it blocked but a plain kernel computed it (conv_blk_fallback). */
static int conv_end(cpu_ctx *ctx, cpu_fuse_run *fr, int done, int block_out)
{
	int rc = cpu_fuse_end(ctx, fr, done);

	return rc || !block_out ? rc : cpu_blk8_block_inplace(ctx, fr->out);
}

/* A layer on channel-blocked values through conv_blk.c: 0 or a status when
 * it ran, 1 when this call's geometry or tail is not one conv_blk.c takes
 * (a padded 1x1, an addend that broadcasts). */
static int conv_blk_try(cpu_ctx *ctx, const conv_state *st, const conv_job *j, int64_t N,
			const cpu_tensor *X, const cpu_tensor *B, int64_t G, int64_t M,
			cpu_fuse_run *fr)
{
	unsigned lay = ctx->node->layout;
	int y_blk = (lay & CPU_LAYOUT_OUT_BLK8) != 0, rc, wino = 0;
	const cpu_geom *g = &j->g;
	int ok = X->rank == 4 && (st->blk_kind == CONV_BLK_W3 || (g->d[1] == 1 && g->d[2] == 1));

	if (st->blk_kind == CONV_BLK_PW || st->blk_kind == CONV_BLK_PWS)
		ok &= G == 1 && g->k[1] == 1 && g->k[2] == 1 && g->pb[1] == 0 && g->pb[2] == 0 &&
		      g->pe[1] == 0 && g->pe[2] == 0 &&
		      (st->blk_kind == CONV_BLK_PWS || (g->s[1] == 1 && g->s[2] == 1));
	else if (st->blk_kind == CONV_BLK_IN)
		ok &= G == 1 && y_blk && !(lay & CPU_LAYOUT_IN_BLK8);
	else if (st->blk_kind == CONV_BLK_G8)
		ok &= G > 1 && j->Cg == 8 && j->Mg == 8;
	else if (st->blk_kind == CONV_BLK_KB)
		ok &= G == 1;
	else if (st->blk_kind == CONV_BLK_W3 || st->blk_kind == CONV_BLK_NHWC)
		ok &= G == 1 && ((wino = st->blk_kind == CONV_BLK_W3 && wino_fits_call(ctx, j)) ||
				 (g->in[0] == 1 && g->d[1] == 1 && g->d[2] == 1 &&
				  conv_nhwc_fits(j, G)));
	else
		ok &= j->Cg == 1 && j->Mg == 1;
	if (!ok || (y_blk && fr->add && !fr->add_inline))
		return 1;
	if ((st->blk_kind == CONV_BLK_PW || st->blk_kind == CONV_BLK_PWS) &&
	    !conv_blk_pw_fits(j->Cg, j->Mg, j->osz))
		return 1;
	if (st->blk_kind == CONV_BLK_W3 || st->blk_kind == CONV_BLK_NHWC) {
		conv_job jb = *j;
		const float *wp;

		jb.xblk = (lay & CPU_LAYOUT_IN_BLK8) != 0;
		jb.yblk = y_blk;
		if (wino)
			rc = wino_images(ctx, st, &jb, N, X->data, X->dims[2] * X->dims[3],
					 B ? B->data : NULL, fr->y->data);
		/* conv_nhwc.c, whose band transposition and row stores read and
		 * write the blocked order too: its layers, and the images
		 * Winograd does not take (a U-Net's large ones; the filter laid
		 * out now: the unblocked fallback's two reorders took a fifth of
		 * unet_1024) */
		else if (!(wp = nhwc_filter(ctx, st, j, st->blk_src)))
			return CPU_E_NOMEM;
		else
			rc = conv_nhwc_run(ctx, &jb, N, X->data, wp, B ? B->data : NULL,
					   fr->y->data);
		return rc ? rc : cpu_fuse_end(ctx, fr, 1);
	}
	rc = conv_blk_run(ctx, st->blk_kind, j, N, j->Cg * G, M, X->data,
			  (lay & CPU_LAYOUT_IN_BLK8) != 0, st->blk, B ? B->data : NULL,
			  fr->y->data, y_blk);
	if (rc)
		return rc;
	/* plain out with a residual: the residual was added as it was
	 * unblocked (it may be y's own bytes), the activation follows */
	if (!conv_blk_activated(j, y_blk) && fr->act_inline != CPU_FUSE_ACT_NONE)
		cpu_fuse_act_apply(ctx->node->fuse, fr->y->data, cpu_numel(fr->y));
	return cpu_fuse_end(ctx, fr, 1);
}

/* The call conv_blk.c does not take: its blocked input and addend in NCHW
 * copies (xt, at), for the plain kernels; conv_end blocks the output. */
static int conv_blk_fallback(cpu_ctx *ctx, const cpu_tensor **X, cpu_tensor *xt, cpu_fuse_run *fr,
			     cpu_tensor *at)
{
	unsigned lay = ctx->node->layout;
	int rc;

	if ((lay & CPU_LAYOUT_IN_BLK8)) {
		if ((rc = cpu_blk8_plain(ctx, *X, xt)) != 0)
			return rc;
		*X = xt;
	}
	if ((lay & CPU_LAYOUT_OUT_BLK8) && fr->add) {
		if ((rc = cpu_blk8_plain(ctx, fr->add, at)) != 0)
			return rc;
		if (fr->add_inline)
			fr->add_inline = at;
		fr->add = at;
	}
	return 0;
}

static int conv_compute(cpu_ctx *ctx)
{
	const conv_state *st = ctx->node->state;
	const cpu_tensor *X, *W, *B = cpu_input(ctx, 2);
	const float *wd;   /* the filter, narrowed by conv_prune_taps */
	int64_t dims[CPU_MAX_RANK], N, M, G = st->group, isz = 1;
	const void *packed = NULL;
	int rc = 0, direct = 1, use_t, bo = (ctx->node->layout & CPU_LAYOUT_OUT_BLK8) != 0;
	cpu_fuse_run fr;
	cpu_tensor xt, at;
	conv_job j;

	if (!(X = cpu_require(ctx, 0, &rc)) || !(W = cpu_require(ctx, 1, &rc)))
		return rc;
	if ((rc = conv_check(ctx, X, W, B, G)) != 0)
		return rc;
	j.xblk = j.yblk = 0;
	rc = cpu_window_geom(&st->win, X->rank - 2, X->dims + 2, W->dims + 2, &j.g, ctx->err,
			     ctx->errlen);
	if (rc)
		return rc;
	if (!(wd = conv_prune_taps(ctx, st, &j.g, W)))
		return CPU_E_NOMEM;
	N = X->dims[0];
	M = W->dims[0];
	j.Cg = W->dims[1];
	j.Mg = M / G;
	dims[0] = N;
	dims[1] = M;
	for (int i = 0; i < X->rank - 2; i++)
		dims[2 + i] = j.g.out[3 - (X->rank - 2) + i];
	j.osz = j.g.out[0] * j.g.out[1] * j.g.out[2];
	j.ksz = 1;
	for (int i = 0; i < 3; i++) {
		j.ksz *= j.g.k[i];
		isz *= j.g.in[i];
		direct &= j.g.k[i] == 1 && j.g.s[i] == 1 && j.g.pb[i] == 0 && j.g.pe[i] == 0;
	}
	j.ksz *= j.Cg;
	/* The fused tail: a residual of Y's own shape is added (and the
	 * activation applied) as Y is produced; anything else after. */
	if ((rc = cpu_fuse_begin(ctx, X->rank, dims, &fr)) != 0)
		return rc;
	j.res = fr.add_inline;
	j.relu = fr.act_inline == CPU_FUSE_ACT_RELU;
	j.act = fr.act_inline != CPU_FUSE_ACT_NONE && !j.relu ? ctx->node->fuse : NULL;
	if (ctx->node->layout) {
		if (st->blk && wd == st->blk_src && cpu_numel(fr.y) > 0 &&
		    (rc = conv_blk_try(ctx, st, &j, N, X, B, G, M, &fr)) != 1)
			return rc;
		if ((rc = conv_blk_fallback(ctx, &X, &xt, &fr, &at)) != 0)
			return rc;
		j.res = fr.add_inline;
	}
	if (st->packed && wd == st->w_src && st->Mg == j.Mg && st->ksz == j.ksz)
		packed = st->packed;
	use_t = packed && j.osz < CONV_T_RATIO * j.Mg && j.osz < CONV_T_MAX &&
		(j.ksz >= CONV_T_MIN_K_512 || gemm_isa_best() != GEMM_ISA_AVX512);
	if (cpu_numel(fr.y) == 0)
		return conv_end(ctx, &fr, 1, bo);
	if (conv_taps_fits(&j, G)) {
		const float *wt = st->taps && wd == st->taps_src ? st->taps : NULL;

		if (!wt && !(wd = filter_values(ctx, st, W, wd)))
			return CPU_E_NOMEM;
		rc = conv_taps_run(ctx, &j, N, X->data, wd, wt, B ? B->data : NULL, fr.y->data);
		return rc ? rc : conv_end(ctx, &fr, 1, bo);
	}
	if (conv_direct_fits(&j, G)) {
		const float *wp = grouped_filter(ctx, st, &j, W, wd, G);

		if (!wp)
			return CPU_E_NOMEM;
		rc = conv_direct_run(ctx, &j, N, X->data, wp, B ? B->data : NULL, fr.y->data);
		return rc ? rc : conv_end(ctx, &fr, 1, bo);
	}
	if (st->wino && wd == st->wino_src && X->rank == 4 && G == 1 && wino_fits_call(ctx, &j)) {
		rc = wino_images(ctx, st, &j, N, X->data, isz, B ? B->data : NULL, fr.y->data);
		return rc ? rc : conv_end(ctx, &fr, 1, bo);
	}
	if (conv_nhwc_fits(&j, G)) {
		const float *wp = nhwc_filter(ctx, st, &j, wd);

		if (!wp)
			return CPU_E_NOMEM;
		rc = conv_nhwc_run(ctx, &j, N, X->data, wp, B ? B->data : NULL, fr.y->data);
		return rc ? rc : conv_end(ctx, &fr, 1, bo);
	}
	if (j.Cg == 1 && j.Mg == 1) {
		if (!(wd = filter_values(ctx, st, W, wd)))
			return CPU_E_NOMEM;
		if (conv_dw_fits(&j))
			rc = conv_dw_run(ctx, &j, X->data, wd, B ? B->data : NULL, fr.y->data,
					 N * G, G);
		else
			conv_depthwise(&j, X->data, wd, B ? B->data : NULL, fr.y->data, N * G, G);
		return rc ? rc : conv_end(ctx, &fr, 1, bo);
	}
	if (conv_grouped_fits(&j, G)) {
		const float *wp = grouped_filter(ctx, st, &j, W, wd, G);

		if (!wp)
			return CPU_E_NOMEM;
		rc = conv_grouped_run(ctx, &j, N, G, X->data, wp, B ? B->data : NULL, fr.y->data);
		return rc ? rc : conv_end(ctx, &fr, 1, bo);
	}
	if (!direct && j.osz && (uint64_t)j.ksz > SIZE_MAX / sizeof(float) / 2 / (uint64_t)j.osz)
		return cpu_fail(ctx, CPU_E_NOMEM, "im2col buffer too large");
	if (!packed && !(wd = filter_values(ctx, st, W, wd)))
		return CPU_E_NOMEM;
	{
		/* A batch of at least one image per pool member: the images split
		 * over the pool, each GEMM on one thread (a per-image GEMM split
		 * over two threads gained 1.2-1.4x at batch 8, images 2x) */
		int members = cpu_par_members(ctx);
		conv_images ci = {.j = &j, .st = st, .x = X->data, .w = wd,
				  .b = B ? B->data : NULL, .y = fr.y->data, .packed = packed,
				  .G = G, .M = M, .isz = isz, .direct = direct, .use_t = use_t};
		int split = members > 1 && N >= members;
		size_t copies = split ? (size_t)members : 1;

		ci.col_n = !direct && use_t ? (size_t)j.ksz * (size_t)j.osz : 0;
		ci.ct_n = use_t ? (size_t)j.osz * (size_t)j.Mg : 0;
		if (ci.col_n && !(ci.col = cpu_scratch(ctx, copies * ci.col_n * sizeof(float))))
			return CPU_E_NOMEM;
		if (ci.ct_n && !(ci.ct = cpu_scratch(ctx, copies * ci.ct_n * sizeof(float))))
			return CPU_E_NOMEM;
		if (split) {
			ci.ctx1 = *ctx;
			ci.ctx1.pool = NULL;
			/* ~0.1 ns a multiply-add of an image's GEMM */
			cpu_par_for(ctx, N, 0.1 * (double)(G * j.Mg * j.ksz * j.osz), 1, images_range,
				    &ci);
		} else {
			conv_images_run(ctx, &ci, 0, N, 0);
		}
		if (ci.failed)
			return cpu_fail(ctx, CPU_E_NOMEM, "GEMM failed (out of memory)");
	}
	return conv_end(ctx, &fr, 1, bo);
}

const cpu_op cpu_op_conv = {
	"Conv", "", 1, CPU_OPSET_MAX, conv_supports, conv_prepare, conv_compute, conv_release,
};
