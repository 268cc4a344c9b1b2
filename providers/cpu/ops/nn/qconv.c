/*
 * qconv: ONNX ConvInteger (opset 10) and QLinearConv (opsets 10 and 21) on
 * uint8/int8, 1-D to 3-D, with groups, pads, strides, dilations and
 * auto_pad (window.c's geometry, as Conv), on the int8 GEMM
 * (gemm/igemm.h).  Per (image, group):
 *
 *   Y_g[Mg, P] = (W_g - zw) x (im2col(X_g) - zx)       int32, P pixels
 *
 * The filter is the GEMM's A, packed once at load through the pre-pack
 * cache when it is constant (with its row sums); the im2col is packed
 * straight into the GEMM's B panels by im2col_pack, block by block in
 * the pool's tasks, with pads holding the input zero point (as ONNX
 * says: they contribute nothing).  A 1x1, stride-1, unpadded convolution
 * is the same code on the flattened plane.  Depthwise convolutions (one
 * input and one output channel per group) go through a direct int32
 * sliding window instead (qconv_dw.c), which a GEMM of one row would
 * waste.  The weight zero point is per tensor or per output channel.
 *
 * ConvInteger writes int32, or float32 when the provider fused the Cast,
 * Mul by the scales and Add of a bias after it (node->fuse->quant, set by
 * cpu_fuse.c: see qconv_fused_out).  QLinearConv adds its int32 bias and
 * requantizes with x_scale * w_scale[m] / y_scale.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "fuse_tail.h"
#include "igemm.h"
#include "nn_ops.h"
#include "qconv_impl.h"

/* Filters above this many packed bytes are packed per call. */
#define QCONV_PACK_MAX ((size_t)64 << 20)

/* Where a quantized conv finds its inputs: ConvInteger has x, w, x_zp,
 * w_zp; QLinearConv x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B. */
static const qconv_io io_integer = {0, 2, 1, 3}, io_qlinear = {0, 2, 3, 5};

typedef struct pack_arg {
	const cpu_tensor *W;
	int direct;
} pack_arg;

/* The GEMM's A for W: rows of Cg x taps in W's order (im2col), or
 * reordered for qconv_direct. */
static int pack_filter_to(const cpu_tensor *W, int direct, void *dst, size_t size)
{
	int64_t M = W->dims[0], K = M ? cpu_numel(W) / M : 0, taps = 1, Kd;
	int s = W->dtype == CPU_INT8, rc;
	uint8_t *tmp;

	if (!direct)
		return igemm_pack_a(W->data, K, s, M, K, dst, size) ? CPU_E_INTERNAL : 0;
	for (int i = 2; i < W->rank; i++)
		taps *= W->dims[i];
	Kd = taps * ((W->dims[1] + 3) / 4) * 4;
	if (!(tmp = malloc((size_t)(M * Kd) + 1)))
		return CPU_E_NOMEM;
	qconv_direct_order(W->data, s, M, W->dims[1], taps, tmp);
	rc = igemm_pack_a(tmp, Kd, s, M, Kd, dst, size) ? CPU_E_INTERNAL : 0;
	free(tmp);
	return rc;
}

static int pack_filter(void *dst, size_t size, void *arg)
{
	const pack_arg *a = arg;

	return pack_filter_to(a->W, a->direct, dst, size);
}

/* The k length of W's packed rows for either order. */
static int64_t packed_k(const cpu_tensor *W, int direct)
{
	int64_t taps = 1;

	if (!direct)
		return W->dims[0] ? cpu_numel(W) / W->dims[0] : 0;
	for (int i = 2; i < W->rank; i++)
		taps *= W->dims[i];
	return taps * ((W->dims[1] + 3) / 4) * 4;
}

/* Whether a node's convolution goes through qconv_direct, as far as the
 * attributes tell (qconv_direct_fits decides with the shapes). */
static int direct_attrs(const qconv_state *st, const cpu_tensor *W)
{
	if (W->rank != 4 || (W->dims[1] == 1 && W->dims[0] == st->group))
		return 0;
	return !cpu_window_strided(&st->win);
}

static int qconv_prepare(cpu_node *node, char *err, size_t n, const qconv_io *io)
{
	qconv_state *st = calloc(1, sizeof(*st));
	const cpu_tensor *W = node->n_in > io->w ? cpu_node_const(node, io->w) : NULL;
	int rc;

	if (!st)
		return CPU_E_NOMEM;
	rc = cpu_window_parse(node->proto, &st->win, err, n);
	st->win.ceil_mode = 0;
	st->group = cpu_attr_int(node->proto, "group", 1);
	if (!rc && (st->group < 1 || st->group > INT32_MAX)) {
		snprintf(err, n, "group must be >= 1 (got %lld)", (long long)st->group);
		rc = CPU_E_INVALID;
	}
	if (rc) {
		free(st);
		return rc;
	}
	node->state = st;
	if (W && (W->dtype == CPU_UINT8 || W->dtype == CPU_INT8) && W->rank >= 3 && W->dims[0] > 0 &&
	    W->dims[1] > 0) {
		int direct = direct_attrs(st, W);
		int64_t M = W->dims[0], K = packed_k(W, direct);
		size_t size = igemm_pack_a_size(M, K);
		pack_arg a = {W, direct};
		char fmt[48];

		st->direct = direct;
		if (size && size <= QCONV_PACK_MAX) {
			snprintf(fmt, sizeof(fmt), "igemm-a%s-v%d", direct ? "4" : "", IGEMM_PACK_VERSION);
			st->wpack = cpu_prepack(node, io->w, fmt, size, pack_filter, &a, err, n);
			if (!st->wpack)
				return CPU_E_NOMEM;
			if (igemm_pack_a_check(st->wpack, size, M, K))
				st->wpack = NULL;
			st->w_src = W->data;
		}
	}
	return 0;
}

static int ci_prepare(cpu_node *node, char *err, size_t n)
{
	return qconv_prepare(node, err, n, &io_integer);
}

static int qlc_prepare(cpu_node *node, char *err, size_t n)
{
	return qconv_prepare(node, err, n, &io_qlinear);
}

static void qconv_release(cpu_node *node)
{
	free(node->state);
	node->state = NULL;
}

/* ---- im2col into the GEMM's B panels ---- */

/* One tap of the im2col (row k of B): where its channel starts and the
 * offsets its kernel position adds to an output pixel's window origin. */
typedef struct tap {
	int64_t coff;
	int32_t dd, dh, dw;
	int32_t valid;
} tap;

typedef struct im2col_ctx {
	const uint8_t *x;           /* the group's first channel */
	const cpu_geom *g;
	const tap *taps;            /* K4 entries */
	int64_t P;                  /* output pixels */
	uint8_t flip, pad;          /* B_s = x ^ flip; pads hold zx ^ flip */
} im2col_ctx;

/* A run of a panel's pixels in one output row: pixels [j0, j1) read the
 * input at (id, ih, iw + (j - j0) * stride) plus the tap's offsets. */
typedef struct seg {
	int j0, j1;
	int64_t id, ih, iw;
} seg;

static int panel_segs(const im2col_ctx *c, int64_t n0, seg *s)
{
	const cpu_geom *g = c->g;
	int64_t ow = n0 % g->out[2], t = n0 / g->out[2], oh = t % g->out[1], od = t / g->out[1];
	int ns = 0, j = 0, end = c->P - n0 < 16 ? (int)(c->P - n0) : 16;

	while (j < end) {
		int len = g->out[2] - ow < end - j ? (int)(g->out[2] - ow) : end - j;
		s[ns].j0 = j;
		s[ns].j1 = j + len;
		s[ns].id = od * g->s[0] - g->pb[0];
		s[ns].ih = oh * g->s[1] - g->pb[1];
		s[ns].iw = ow * g->s[2] - g->pb[2];
		ns++;
		j += len;
		ow = 0;
		if (++oh == g->out[1]) {
			oh = 0;
			od++;
		}
	}
	return ns;
}

/* Bytes j = 0..15 of src at stride 2 (src[2 j]), flipped: the even bytes
 * of 32 (all readable). */
static void evens16(const uint8_t *src, uint8_t flip, uint8_t *row)
{
#ifdef __SSE2__
	__m128i m = _mm_set1_epi16(0x00ff);
	__m128i a = _mm_and_si128(_mm_loadu_si128((const __m128i *)src), m);
	__m128i b = _mm_and_si128(_mm_loadu_si128((const __m128i *)(src + 16)), m);

	_mm_storeu_si128((__m128i *)row,
			 _mm_xor_si128(_mm_packus_epi16(a, b), _mm_set1_epi8((char)flip)));
#else
	for (int j = 0; j < 16; j++)
		row[j] = src[2 * j] ^ flip;
#endif
}

/* Row k of B at the panel's 16 pixels (segments s), as stored bytes. */
static void tap_row(const im2col_ctx *c, const tap *tp, const seg *s, int ns, uint8_t *row)
{
	const cpu_geom *g = c->g;
	int64_t sw = g->s[2], W = g->in[2];

	memset(row, c->pad, 16);
	if (!tp->valid) {
		memset(row, 0, 16);
		return;
	}
	for (int q = 0; q < ns; q++) {
		int64_t id = s[q].id + tp->dd, ih = s[q].ih + tp->dh, iw = s[q].iw + tp->dw;
		int64_t len = s[q].j1 - s[q].j0, lo, hi;
		const uint8_t *src;
		uint8_t *r = row + s[q].j0;

		if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1] || iw >= W)
			continue;
		src = c->x + tp->coff + (id * g->in[1] + ih) * W;
		/* the pixels j whose column iw + j sw is inside: [lo, hi) */
		lo = iw < 0 ? (-iw + sw - 1) / sw : 0;
		hi = (W - 1 - iw) / sw + 1;
		hi = hi < len ? hi : len;
		for (int64_t j = lo; j < hi; j++)
			r[j] = src[iw + j * sw] ^ c->flip;
	}
}

/* Four rows of 16 bytes into the panel's group layout: byte j * 4 + t of
 * the 64 is row t's byte j. */
static void interleave4(const uint8_t r[4][16], int8_t *dst)
{
#ifdef __SSE2__
	__m128i r0 = _mm_loadu_si128((const __m128i *)r[0]), r1 = _mm_loadu_si128((const __m128i *)r[1]);
	__m128i r2 = _mm_loadu_si128((const __m128i *)r[2]), r3 = _mm_loadu_si128((const __m128i *)r[3]);
	__m128i a = _mm_unpacklo_epi8(r0, r1), b = _mm_unpackhi_epi8(r0, r1);
	__m128i e = _mm_unpacklo_epi8(r2, r3), f = _mm_unpackhi_epi8(r2, r3);

	_mm_storeu_si128((__m128i *)dst, _mm_unpacklo_epi16(a, e));
	_mm_storeu_si128((__m128i *)(dst + 16), _mm_unpackhi_epi16(a, e));
	_mm_storeu_si128((__m128i *)(dst + 32), _mm_unpacklo_epi16(b, f));
	_mm_storeu_si128((__m128i *)(dst + 48), _mm_unpackhi_epi16(b, f));
#else
	for (int j = 0; j < 16; j++)
		for (int t = 0; t < 4; t++)
			dst[j * 4 + t] = (int8_t)r[t][j];
#endif
}

/* igemm_pack_fn: rows [4 g0, 4 (g0 + gs)) x panels [p0, p1) of B_s. */
static void im2col_pack(void *arg, int64_t g0, int64_t gs, int64_t p0, int64_t p1, int8_t *dst)
{
	const im2col_ctx *c = arg;
	const cpu_geom *g = c->g;
	uint8_t rows[4][16];
	seg s[18];

	for (int64_t p = p0; p < p1; p++, dst += gs * 64) {
		int ns = panel_segs(c, p * 16, s);
		/* the common case: 16 pixels of one row, stride 1 or 2, all
		 * inside (stride 2: the 32 bytes it reads) */
		int one = ns == 1 && s[0].j1 == 16 && (g->s[2] == 1 || g->s[2] == 2);
		int64_t span = g->s[2] == 1 ? 16 : 32;

		for (int64_t q = 0; q < gs; q++) {
			for (int t = 0; t < 4; t++) {
				const tap *tp = &c->taps[(g0 + q) * 4 + t];
				int64_t id = s[0].id + tp->dd, ih = s[0].ih + tp->dh, iw = s[0].iw + tp->dw;
				if (one && tp->valid && id >= 0 && id < g->in[0] && ih >= 0 &&
				    ih < g->in[1] && iw >= 0 && iw + span <= g->in[2]) {
					const uint8_t *src = c->x + tp->coff + (id * g->in[1] + ih) * g->in[2] + iw;
					if (span == 32)
						evens16(src, c->flip, rows[t]);
					else
						for (int j = 0; j < 16; j++)
							rows[t][j] = src[j] ^ c->flip;
				} else {
					tap_row(c, tp, s, ns, rows[t]);
				}
			}
			interleave4((const uint8_t (*)[16])rows, dst + q * 64);
		}
	}
}

/* The taps of a group's im2col rows (K4 entries, those past K invalid). */
static tap *make_taps(cpu_ctx *ctx, const qconv_run *r)
{
	const cpu_geom *g = &r->g;
	int64_t K4 = igemm_k4(r->ksz), k = 0;
	tap *t = cpu_scratch(ctx, (size_t)(K4 + 1) * sizeof(tap));

	if (!t)
		return NULL;
	memset(t, 0, (size_t)(K4 + 1) * sizeof(tap));
	for (int64_t c = 0; c < r->Cg; c++)
		for (int64_t kd = 0; kd < g->k[0]; kd++)
			for (int64_t kh = 0; kh < g->k[1]; kh++)
				for (int64_t kw = 0; kw < g->k[2]; kw++, k++) {
					t[k].coff = c * r->isz;
					t[k].dd = (int32_t)(kd * g->d[0]);
					t[k].dh = (int32_t)(kh * g->d[1]);
					t[k].dw = (int32_t)(kw * g->d[2]);
					t[k].valid = 1;
				}
	return t;
}

/* ---- shapes, zero points, the products ---- */

/* Checks shapes and dtypes and resolves the geometry; Y's shape into
 * dims (rank: X's). */
static int qconv_setup(cpu_ctx *ctx, const qconv_io *io, qconv_run *r, int64_t *dims)
{
	const qconv_state *st = ctx->node->state;
	const cpu_tensor *X, *W;
	int rc = 0;

	if (!(X = cpu_require(ctx, io->x, &rc)) || !(W = cpu_require(ctx, io->w, &rc)))
		return rc;
	if ((rc = cpu_check_dtype(ctx, X, io->x, NN_Q8_TYPES)) ||
	    (rc = cpu_check_dtype(ctx, W, io->w, NN_Q8_TYPES)))
		return rc;
	r->X = X;
	r->W = W;
	r->G = st->group;
	if (X->rank < 3 || W->rank != X->rank || X->dims[1] % r->G || W->dims[0] % r->G ||
	    W->dims[1] != X->dims[1] / r->G)
		return cpu_fail(ctx, CPU_E_INVALID, "x (rank %d, %lld channels) and w (rank %d, "
				"[%lld,%lld,...]) do not match with group %lld", X->rank,
				(long long)X->dims[1], W->rank, (long long)W->dims[0],
				(long long)W->dims[1], (long long)r->G);
	rc = cpu_window_geom(&st->win, X->rank - 2, X->dims + 2, W->dims + 2, &r->g, ctx->err,
			     ctx->errlen);
	if (rc)
		return rc;
	r->N = X->dims[0];
	r->Cg = W->dims[1];
	r->M = W->dims[0];
	r->Mg = r->M / r->G;
	r->ksz = r->Cg * r->g.k[0] * r->g.k[1] * r->g.k[2];
	r->isz = r->g.in[0] * r->g.in[1] * r->g.in[2];
	r->osz = r->g.out[0] * r->g.out[1] * r->g.out[2];
	if (r->ksz > ((int64_t)1 << 30) || r->osz > ((int64_t)1 << 40))
		return cpu_fail(ctx, CPU_E_INVALID, "convolution too large");
	dims[0] = r->N;
	dims[1] = r->M;
	for (int i = 0; i < X->rank - 2; i++)
		dims[2 + i] = r->g.out[3 - (X->rank - 2) + i];
	return 0;
}

/* The zero points and the filter as the GEMM's A (packed at load, or
 * now). */
static int qconv_operands(cpu_ctx *ctx, const qconv_io *io, qconv_run *r)
{
	const qconv_state *st = ctx->node->state;
	const int32_t *zx;
	int64_t nx;
	int rc;

	if ((rc = nn_load_zp(ctx, cpu_input(ctx, io->xz), io->xz, r->X->dtype, &zx, &nx)) ||
	    (rc = nn_load_zp(ctx, cpu_input(ctx, io->wz), io->wz, r->W->dtype, &r->zw, &r->nzw)))
		return rc;
	if (nx != 1)
		return cpu_fail(ctx, CPU_E_INVALID, "x's zero point must be a scalar");
	if (r->nzw != 1 && r->nzw != r->M)
		return cpu_fail(ctx, CPU_E_INVALID, "w's zero point has %lld values (1 or %lld)",
				(long long)r->nzw, (long long)r->M);
	r->zx = zx[0];
	r->direct = qconv_direct_fits(r);
	if (st->wpack && r->W->data == st->w_src && r->W->dims[0] == r->M && st->direct == r->direct) {
		igemm_pack_a_view(st->wpack, &r->A);
	} else {
		size_t size = igemm_pack_a_size(r->M, packed_k(r->W, r->direct));
		void *buf = size ? cpu_scratch(ctx, size) : NULL;
		if (!buf)
			return size ? CPU_E_NOMEM : cpu_fail(ctx, CPU_E_INVALID, "filter too large");
		if ((rc = pack_filter_to(r->W, r->direct, buf, size)))
			return rc == CPU_E_NOMEM ? rc : cpu_fail(ctx, rc, "packing the filter failed");
		igemm_pack_a_view(buf, &r->A);
	}
	return 0;
}

/* 1x1, stride 1, no pads: the im2col is the input, read as one long row. */
static void flatten_pointwise(qconv_run *r)
{
	cpu_geom *g = &r->g;

	for (int i = 0; i < 3; i++)
		if (g->k[i] != 1 || g->s[i] != 1 || g->pb[i] || g->pe[i])
			return;
	g->in[0] = g->in[1] = g->out[0] = g->out[1] = 1;
	g->in[2] = r->isz;
	g->out[2] = r->osz;
}

/* Every (image, group) through the GEMM (or the depthwise kernel) into
 * y, with out's epilogue (its c, scale_row and bias_row at channel 0). */
igemm_out qconv_group_out(const qconv_run *r, const igemm_out *out, int64_t n, int64_t m0)
{
	igemm_out o = *out;

	o.c = (int32_t *)out->c + (n * r->M + m0) * r->osz;
	o.ldc = r->osz;
	o.scale_row = out->scale_row ? out->scale_row + m0 : NULL;
	o.bias_row = out->bias_row ? out->bias_row + m0 : NULL;
	o.add = out->add ? out->add + (n * r->M + m0) * r->osz : NULL;
	return o;
}

int qconv_run_all(cpu_ctx *ctx, const qconv_io *io, qconv_run *r, const igemm_out *out)
{
	int xs = r->X->dtype == CPU_INT8, rc;
	im2col_ctx c;
	tap *taps;

	if ((rc = qconv_operands(ctx, io, r)))
		return rc;
	if (r->Cg == 1 && r->Mg == 1 && r->X->rank == 4)
		return qconv_depthwise(ctx, r, out);
	if (r->direct)
		return qconv_direct(ctx, r, &r->A, out);
	flatten_pointwise(r);
	if (!(taps = make_taps(ctx, r)))
		return CPU_E_NOMEM;
	c.g = &r->g;
	c.taps = taps;
	c.P = r->osz;
	c.flip = xs ? 0 : 0x80;
	c.pad = (uint8_t)r->zx ^ c.flip;
	for (int64_t n = 0; n < r->N; n++)
		for (int64_t grp = 0; grp < r->G; grp++) {
			igemm_problem p;
			int64_t m0 = grp * r->Mg;

			memset(&p, 0, sizeof(p));
			c.x = (const uint8_t *)r->X->data + (n * r->G + grp) * r->Cg * r->isz;
			p.M = r->Mg;
			p.N = r->osz;
			p.K = r->ksz;
			p.A = r->A;
			p.A.a += m0 * r->A.lda;
			p.A.rowsum += m0;
			p.za = r->zw[0];
			p.za_row = r->nzw > 1 ? r->zw + m0 : NULL;
			p.b_pack = im2col_pack;
			p.b_pack_ctx = &c;
			p.b_signed = xs;
			p.zb = r->zx;
			p.out = qconv_group_out(r, out, n, m0);
			if ((rc = igemm_compute(ctx->pool, IGEMM_ISA_AUTO, &p)))
				return nn_igemm_fail(ctx, rc, "int8 GEMM");
		}
	return 0;
}

static int ci_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
		       char *why, size_t n)
{
	(void)p;
	(void)opset;
	for (int i = 0; i < n_in; i++)
		if (!cpu_supports_dtype(dt, n_in, i, NN_Q8_TYPES, why, n))
			return 0;
	return 1;
}

/* The scale of a fused dequantizing tail (node->fuse->quant): the
 * product of its two scalar inputs, rounded as the Mul node rounds it. */
int nn_quant_scale(cpu_ctx *ctx, float *s)
{
	const cpu_fusion *fu = ctx->node->fuse;
	const cpu_tensor *a = cpu_input(ctx, fu->quant_s0);
	const cpu_tensor *b = fu->quant_s1 >= 0 ? cpu_input(ctx, fu->quant_s1) : NULL;

	if (!a || a->dtype != CPU_FLOAT || cpu_numel(a) != 1 || (fu->quant_s1 >= 0 &&
	    (!b || b->dtype != CPU_FLOAT || cpu_numel(b) != 1)))
		return cpu_fail(ctx, CPU_E_INVALID, "fused dequantization: the scales must be "
				"float32 scalars");
	*s = *(const float *)a->data;
	if (b)
		*s = *s * *(const float *)b->data;
	return 0;
}

/* Where the fused tail's pieces go (fr from cpu_fuse_begin): the
 * addend and Relu or Clip into the GEMM's epilogue when fuse_tail allows
 * it inline, else into the tail (any other activation always).  An addend that is the output's own memory
 * cannot stay there while partial sums of K blocks do (K over
 * IGEMM_KBLOCK): then the result goes to scratch (tmp) and the tail adds. */
int nn_quant_out(cpu_ctx *ctx, cpu_fuse_run *fr, igemm_out *out, int64_t K, cpu_tensor *tmp)
{
	const cpu_fusion *fu = ctx->node->fuse;

	out->c = fr->y->data;
	out->add = fr->add_inline ? fr->add_inline->data : NULL;
	/* the int8 epilogue clamps: Relu, and a Clip whose bounds are in
	 * order (torch's ReLU6 after MobileNet's convolutions: one pass over
	 * the output less); cpu_fuse_end does the others */
	out->clamp = 1;
	out->lo = 0.0f;
	out->hi = INFINITY;
	if (fr->act_inline == CPU_FUSE_ACT_CLIP && fu && fu->act_a <= fu->act_b) {
		out->lo = fu->act_a;
		out->hi = fu->act_b;
	} else if (fr->act_inline != CPU_FUSE_ACT_RELU) {
		out->clamp = 0;
		fr->act_inline = CPU_FUSE_ACT_NONE;
	}
	if (!out->add || K <= IGEMM_KBLOCK)
		return 0;
	*tmp = *fr->y;
	if (!(tmp->data = cpu_scratch(ctx, tmp->nbytes + 1)))
		return CPU_E_NOMEM;
	fr->y = tmp;
	fr->add_inline = NULL;
	fr->act_inline = CPU_FUSE_ACT_NONE;
	out->c = tmp->data;
	out->add = NULL;
	out->clamp = 0;
	return 0;
}

/* ConvInteger with its dequantizing tail fused: float32 out, the bias per
 * output channel, then the tail's Add and activation (fuse_tail.c). */
static int ci_compute_fused(cpu_ctx *ctx, qconv_run *r, int rank, const int64_t *dims)
{
	const cpu_fusion *fu = ctx->node->fuse;
	const cpu_tensor *b = fu->bias_input >= 0 ? cpu_input(ctx, fu->bias_input) : NULL;
	igemm_out out = {0};
	cpu_fuse_run fr;
	cpu_tensor tmp;
	int rc;

	out.is_float = 1;
	if ((rc = nn_quant_scale(ctx, &out.scale)))
		return rc;
	if (b && (b->dtype != CPU_FLOAT || cpu_numel(b) != r->M))
		return cpu_fail(ctx, CPU_E_INVALID, "fused bias must be float32 [%lld]",
				(long long)r->M);
	out.bias_row = b ? b->data : NULL;
	if ((rc = cpu_fuse_begin(ctx, rank, dims, &fr)) ||
	    (rc = nn_quant_out(ctx, &fr, &out, r->ksz, &tmp)))
		return rc;
	if ((rc = qconv_run_all(ctx, &io_integer, r, &out)))
		return rc;
	return cpu_fuse_end(ctx, &fr, 1);
}

static int ci_compute(cpu_ctx *ctx)
{
	int64_t dims[CPU_MAX_RANK];
	qconv_run r;
	cpu_tensor *Y;
	igemm_out out = {0};
	int rc;

	memset(&r, 0, sizeof(r));
	if ((rc = qconv_setup(ctx, &io_integer, &r, dims)))
		return rc;
	if (ctx->node->fuse && ctx->node->fuse->quant)
		return ci_compute_fused(ctx, &r, r.X->rank, dims);
	if (!(Y = cpu_output(ctx, 0, CPU_INT32, r.X->rank, dims)))
		return CPU_E_NOMEM;
	out.c = Y->data;
	return qconv_run_all(ctx, &io_integer, &r, &out);
}

static int qlc_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n)
{
	(void)p;
	(void)opset;
	for (int i = 0; i < n_in && i < 8; i++)
		if (!cpu_supports_dtype(dt, n_in, i, i == 1 || i == 4 || i == 6 ? CPU_TYPES_F32 :
					NN_Q8_TYPES, why, n))
			return 0;
	return cpu_supports_dtype(dt, n_in, 8, CPU_BIT(CPU_INT32), why, n);
}

/* y = saturate(round((acc + B[m]) * x_scale * w_scale[m] / y_scale) + y_zp) */
static int qlc_compute(cpu_ctx *ctx)
{
	const cpu_tensor *yz = cpu_input(ctx, 7), *B = cpu_input(ctx, 8);
	const float *xs, *ws, *ys;
	const int32_t *zy;
	int64_t nxs, nws, nys, nzy, M;
	int32_t odt = yz ? yz->dtype : CPU_UINT8, *acc;
	int64_t dims[CPU_MAX_RANK];
	qconv_run r;
	cpu_tensor *Y = NULL;
	igemm_out out = {0};
	int rc;

	memset(&r, 0, sizeof(r));
	if (yz && (rc = cpu_check_dtype(ctx, yz, 7, NN_Q8_TYPES)))
		return rc;
	if ((rc = qconv_setup(ctx, &io_qlinear, &r, dims)) ||
	    (rc = nn_load_scale(ctx, 1, &xs, &nxs)) || (rc = nn_load_scale(ctx, 4, &ws, &nws)) ||
	    (rc = nn_load_scale(ctx, 6, &ys, &nys)) || (rc = nn_load_zp(ctx, yz, 7, odt, &zy, &nzy)))
		return rc;
	M = r.M;
	if (nxs != 1 || nys != 1 || nzy != 1 || (nws != 1 && nws != M))
		return cpu_fail(ctx, CPU_E_INVALID, "x_scale, y_scale and y_zero_point must be "
				"scalars and w_scale a scalar or [%lld]", (long long)M);
	if (B && (B->dtype != CPU_INT32 || B->rank != 1 || B->dims[0] != M))
		return cpu_fail(ctx, CPU_E_INVALID, "B must be int32 [%lld]", (long long)M);
	if (!(Y = cpu_output(ctx, 0, odt, r.X->rank, dims)))
		return CPU_E_NOMEM;
	if (!(acc = cpu_scratch(ctx, (size_t)(cpu_numel(Y) + 1) * sizeof(int32_t))))
		return CPU_E_NOMEM;
	out.c = acc;
	if ((rc = qconv_run_all(ctx, &io_qlinear, &r, &out)))
		return rc;
	for (int64_t b = 0, e = 0; b < r.N; b++)
		for (int64_t m = 0; m < M; m++) {
			float mult = xs[0] * ws[nws > 1 ? m : 0] / ys[0];
			int32_t bias = B ? ((const int32_t *)B->data)[m] : 0;
			for (int64_t j = 0; j < r.osz; j++, e++)
				nn_requant(odt, Y->data, e, (int32_t)((uint32_t)acc[e] + (uint32_t)bias),
					   mult, zy[0]);
		}
	return 0;
}

const cpu_op cpu_op_convinteger = {
	"ConvInteger", "", 10, CPU_OPSET_MAX, ci_supports, ci_prepare, ci_compute,
	qconv_release,
};
const cpu_op cpu_op_qlinearconv = {
	"QLinearConv", "", 10, CPU_OPSET_MAX, qlc_supports, qlc_prepare, qlc_compute,
	qconv_release,
};
