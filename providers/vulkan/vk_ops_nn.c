/*
 * vk_ops_nn: Conv (1 to 3 spatial dims, groups, pads, strides, dilations,
 * auto_pad; shaders/conv.comp, an implicit GEMM), MaxPool and AveragePool
 * (shaders/pool.comp), GlobalAveragePool and GlobalMaxPool (as a reduction
 * over the spatial dims, shaders/reduce.comp).
 *
 * The window geometry is ONNX's rules in onnxrules/window.c (shared with
 * the core and the other providers), so every provider produces the same
 * output sizes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_ops.h"
#include "vk_prepack.h"

/* The shared window geometry (dk_window) and its spatial rank. */
typedef struct win {
	int nsp;
	dk_window w;
} win;

typedef struct conv_push {
	uint32_t G, Cig, Cog;
	uint32_t in[3], out[3], k[3], s[3];
	int32_t pb[3];
	uint32_t d[3];
	uint32_t flags;         /* 1: bias; 2: conv_direct reads the packed filter */
	uint32_t n;             /* conv_direct: invocations */
} conv_push;

#define CONV_CB 4               /* output channels per conv_direct invocation */

typedef struct pool_push {
	uint32_t n, flags;
	uint32_t in[3], out[3], k[3], s[3];
	int32_t pb[3], pe[3];
	uint32_t d[3];
} pool_push;

_Static_assert(sizeof(conv_push) <= VKX_PUSH_BYTES, "conv push constants");
_Static_assert(sizeof(pool_push) <= VKX_PUSH_BYTES, "pool push constants");

/* The window geometry of X (N, C, spatial...) with kernel dims `kern`. */
static int geometry(dk_ctx *c, const dk_val *x, const int64_t *kern, win *g)
{
	char err[128];
	int rc = dk_window_geometry(c->node->proto, x->rank, x->dims, kern, &g->w, &g->nsp, err,
				    sizeof(err));

	return rc ? dk_fail(c, rc, "%s", err) : 0;
}

/* ---- Conv ----------------------------------------------------------------- */

static int conv_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			 char *why, size_t n)
{
	(void)opset;
	return dk_conv_node_ok(p, why, n) && dk_need_float(p, dt, n_in, 0, -1, 1, why, n);
}

/* The tiled implicit GEMM (conv.comp) wins on GPUs once its 32x32 tiles
 * are mostly full; on CPU implementations, and for depthwise or small
 * convolutions, the direct kernel does.  ORTMK_VULKAN_CONV=tiled|direct
 * forces one (tests run both). */
static int use_tiled(const dk_ctx *c, const conv_push *p, int64_t O)
{
	const char *e = getenv("ORTMK_VULKAN_CONV");
	int64_t K = (int64_t)p->Cig * p->k[0] * p->k[1] * p->k[2];

	if (e && !strcmp(e, "tiled"))
		return 1;
	if ((e && !strcmp(e, "direct")) || vk_device_is_cpu(c))
		return 0;
	return p->Cog >= 16 && O >= 64 && K >= 32;
}

static int emit_conv(dk_ctx *c, conv_push *p, const vk_buf *bufs, int64_t N, int64_t O)
{
	int64_t G = p->G, threads = N * G * ((p->Cog + 3) / 4) * O;

	if (use_tiled(c, p, O)) {
		if ((O + 31) / 32 > 65535 || (p->Cog + 31) / 32 > 65535 || N * G > 65535)
			return dk_fail(c, EP_E_UNSUPPORTED, "convolution too large for one dispatch");
		return vk_emit(c, VKP_CONV, bufs, 4, 8u, p, sizeof(*p), (uint32_t)((O + 31) / 32),
			       (p->Cog + 31) / 32, (uint32_t)(N * G));
	}
	if (threads >= VKX_MAX_ELEMS)
		return dk_fail(c, EP_E_UNSUPPORTED, "convolution too large for one dispatch");
	p->n = (uint32_t)threads;
	return vk_emit_1d(c, VKP_CONV_DIRECT, bufs, 4, 8u, p, sizeof(*p), (uint64_t)threads);
}

/* conv_direct's filter layout: per group and block of 4 output channels,
 * the K = Cig * kernel taps with the 4 channels' weights side by side
 * ([G][ceil(Cog/4)][K][4], zeros past the last channel), so one tap's 4
 * weights are one contiguous read.  Made once at load through the
 * pre-pack cache, in the device's element type. */
typedef struct conv_pack_arg {
	const dk_val *w;
	int64_t G, Cog, K;
	int widen;              /* float16 source, float32 on the device */
} conv_pack_arg;

static int conv_pack_fill(void *dst, uint64_t size, void *arg)
{
	const conv_pack_arg *a = arg;
	uint64_t esz = a->widen ? 4 : vk_esz(a->w->dtype), src_esz = vk_esz(a->w->dtype);
	int64_t nb = (a->Cog + CONV_CB - 1) / CONV_CB;
	const uint8_t *src = a->w->host;
	uint8_t *d = dst;

	memset(dst, 0, size);
	for (int64_t g = 0; g < a->G; g++)
		for (int64_t cb = 0; cb < nb; cb++)
			for (int64_t j = 0; j < CONV_CB && cb * CONV_CB + j < a->Cog; j++) {
				const uint8_t *row = src + (uint64_t)((g * a->Cog + cb * CONV_CB + j) * a->K) *
							     src_esz;
				uint8_t *col = d + (uint64_t)(((g * nb + cb) * a->K) * CONV_CB + j) * esz;

				for (int64_t k = 0; k < a->K; k++) {
					if (a->widen)
						vk_f16_widen((float *)(col + (uint64_t)k * CONV_CB * esz),
							     row + (uint64_t)k * src_esz, 1);
					else
						memcpy(col + (uint64_t)k * CONV_CB * esz,
						       row + (uint64_t)k * src_esz, esz);
				}
			}
	return 0;
}

static int conv_pack(dk_exec *ex, dk_node *nd, void *load, char *err, size_t n)
{
	const vk_loader *l = load;
	vk_dev *d = &vk_ep_of(ex)->dev;
	const dk_val *w = nd->n_in > 1 && nd->in[1] >= 0 ? &ex->consts[nd->in[1]] : NULL;
	const Onnx__NodeProto *p = nd->proto;
	conv_pack_arg a = {.w = w, .G = proto_attr_int(p, "group", 1)};
	char key[112];
	uint64_t size;

	const char *force = getenv("ORTMK_VULKAN_CONV");

	if (!w || !w->is_const || !w->host || w->rank < 3 || a.G < 1 || w->dims[0] % a.G)
		return 0;       /* W computed at run time: conv_direct reads it as is */
	if (force && strcmp(force, "tiled") == 0)
		return 0;       /* only conv_direct reads the packed form */
	a.Cog = w->dims[0] / a.G;
	a.K = w->numel / (w->dims[0] ? w->dims[0] : 1);
	a.widen = vk_f16_as_f32(d, w->dtype);
	size = (uint64_t)(a.G * ((a.Cog + CONV_CB - 1) / CONV_CB) * a.K * CONV_CB) *
	       vk_dev_esz(d, w->dtype);
	snprintf(key, sizeof(key), "%.90s#1#conv%d-%s",
		 p->name && p->name[0] ? p->name : p->output[0], CONV_CB,
		 vk_dev_esz(d, w->dtype) == 2 ? "f16" : "f32");
	return vk_prepack_keep(ex, l->pk, l->u, nd, key, w, size, conv_pack_fill, &a, err, n);
}

static int conv_plan(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *w = dk_in(c, 1), *b = dk_in(c, 2), *y;
	int64_t G = proto_attr_int(c->node->proto, "group", 1), dims[5], O;
	conv_push p = {0};
	win g;
	int rc;

	if (!x || !w || x->rank < 3 || w->rank != x->rank || x->dtype != vk_node_dtype(c) ||
	    w->dtype != vk_node_dtype(c))
		return dk_fail(c, EP_E_INVALID, "X and W must be float32 of the same rank >= 3");
	if (x->dims[1] != w->dims[1] * G || w->dims[0] % G)
		return dk_fail(c, EP_E_INVALID, "channels: X has %lld, W is [%lld,%lld,...], group %lld",
			       (long long)x->dims[1], (long long)w->dims[0], (long long)w->dims[1],
			       (long long)G);
	if (b && (b->dtype != vk_node_dtype(c) || b->numel != w->dims[0]))
		return dk_fail(c, EP_E_INVALID, "B must hold %lld floats", (long long)w->dims[0]);
	rc = geometry(c, x, w->dims + 2, &g);
	if (rc)
		return rc;
	dims[0] = x->dims[0];
	dims[1] = w->dims[0];
	for (int i = 0; i < g.nsp; i++)
		dims[2 + i] = g.w.out[3 - g.nsp + i];
	y = dk_out(c, 0, vk_node_dtype(c), x->rank, dims);
	if (!y)
		return c->status;
	O = g.w.out[0] * g.w.out[1] * g.w.out[2];
	p.G = (uint32_t)G;
	p.Cig = (uint32_t)w->dims[1];
	p.Cog = (uint32_t)(w->dims[0] / G);
	for (int j = 0; j < 3; j++) {
		p.in[j] = (uint32_t)g.w.in[j];
		p.out[j] = (uint32_t)g.w.out[j];
		p.k[j] = (uint32_t)g.w.k[j];
		p.s[j] = (uint32_t)g.w.s[j];
		p.pb[j] = (int32_t)g.w.pb[j];
		p.d[j] = (uint32_t)g.w.d[j];
	}
	p.flags = b != NULL;
	if (!y->numel)
		return 0;
	/* conv_direct reads the filter packed at load when there is one. */
	if (!use_tiled(c, &p, O) && c->node->keep.ptr && w->is_const) {
		p.flags |= 2;
		return emit_conv(c, &p, (vk_buf[]){x->dev, c->node->keep, b ? b->dev : w->dev, y->dev},
				 x->dims[0], O);
	}
	return emit_conv(c, &p, (vk_buf[]){x->dev, w->dev, b ? b->dev : w->dev, y->dev},
			 x->dims[0], O);
}

/* ---- MaxPool, AveragePool ------------------------------------------------- */

static int pool_plan(dk_ctx *c)
{
	const Onnx__NodeProto *pr = c->node->proto;
	const dk_val *x = dk_in(c, 0), *y;
	pool_push p = {0};
	dk_window w;

	if (dk_pool_out(c, &w, &y))
		return c->status;
	p.n = (uint32_t)y->numel;
	p.flags = (pr->op_type[0] == 'M' ? 1u : 0u) |
		  (proto_attr_int(pr, "count_include_pad", 0) ? 2u : 0u);
	for (int j = 0; j < 3; j++) {
		p.in[j] = (uint32_t)w.in[j];
		p.out[j] = (uint32_t)w.out[j];
		p.k[j] = (uint32_t)w.k[j];
		p.s[j] = (uint32_t)w.s[j];
		p.pb[j] = (int32_t)w.pb[j];
		p.pe[j] = (int32_t)w.pe[j];
		p.d[j] = (uint32_t)w.d[j];
	}
	return vk_emit_1d(c, VKP_POOL, (vk_buf[]){x->dev, y->dev}, 2, 2u, &p, sizeof(p),
			  (uint64_t)y->numel);
}

/* ---- GlobalAveragePool, GlobalMaxPool ------------------------------------- */

static int global_plan(dk_ctx *c)
{
	const dk_val *x = dk_in(c, 0), *y;
	int64_t S = dk_global_pool_out(c, &y);
	vk_reduce_push p = {0};

	if (S < 0)
		return c->status;
	p.n = (uint32_t)y->numel;
	p.count = (uint32_t)S;
	p.op = c->node->proto->op_type[6] == 'M' ? 2 : 1;
	p.nk = 1;
	p.kdims[0] = (uint32_t)y->numel;
	p.kstr[0] = (uint32_t)S;
	p.nr = 1;
	p.rdims[0] = (uint32_t)S;
	p.rstr[0] = 1;
	return vk_emit_1d(c, VKP_REDUCE, (vk_buf[]){x->dev, y->dev}, 2, 2u, &p, sizeof(p),
			  (uint64_t)y->numel);
}

const dk_op vk_ops_nn[] = {
	{"Conv", 1, 22, conv_supports, NULL, conv_plan, NULL,
	 VKX_PIPE(VKP_CONV) | VKX_PIPE(VKP_CONV_DIRECT), conv_pack, NULL},
	{"MaxPool", 1, 22, dk_pool_supports, NULL, pool_plan, NULL, VKX_PIPE(VKP_POOL), NULL, NULL},
	{"AveragePool", 1, 22, dk_pool_supports, NULL, pool_plan, NULL,
	 VKX_PIPE(VKP_POOL), NULL, NULL},
	{"GlobalAveragePool", 1, 22, dk_global_pool_supports, NULL, global_plan, NULL,
	 VKX_PIPE(VKP_REDUCE), NULL, NULL},
	{"GlobalMaxPool", 1, 22, dk_global_pool_supports, NULL, global_plan, NULL,
	 VKX_PIPE(VKP_REDUCE), NULL, NULL},
	{0},
};
