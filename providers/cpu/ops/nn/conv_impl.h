/*
 * conv_impl: what the Conv kernel's files share: its load-time state, the
 * geometry of one call, the im2col and the depthwise kernel
 * (conv_im2col.c).  Callers: conv.c, tests/unit/test_cpu_conv_fused.c.
 */
#ifndef ORTMK_CONV_IMPL_H
#define ORTMK_CONV_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_ops.h"
#include "fuse_tail.h"

typedef struct conv_state {
	cpu_window win;
	int64_t group;
	/* Every group's W_g^T packed for the GEMM (pixels-as-rows form),
	 * pk_size bytes each, made from w_src; NULL when not packed. */
	const void *packed;
	size_t pk_size;
	const float *w_src;
	int64_t Mg, ksz;
	/* 3x3 stride 1: the 16 Winograd-transformed filters (conv_wino.c),
	 * wino_size bytes each, made from wino_src; NULL when not used. */
	const void *wino;
	size_t wino_size;
	const float *wino_src;
	/* Grouped with few channels a group: the filter laid out for
	 * conv_grouped.c, made from gw_src; NULL when not. */
	const float *gpacked;
	const float *gw_src;
	/* One group for conv_nhwc.c: the filter in its layout, made from
	 * nhwc_src; NULL when not. */
	const float *nhwc;
	const float *nhwc_src;
	/* Dilated, one group: every tap's Mg x Cg slice for conv_taps.c
	 * ([tap][Mg][Cg]), made from taps_src; NULL when not. */
	const float *taps;
	const float *taps_src;
	/* A layer on channel-blocked values (node->layout): its kind and its
	 * filter (conv_blk.c's layout; Winograd's for CONV_BLK_W3,
	 * conv_nhwc.c's for CONV_BLK_NHWC), made from blk_src. */
	int blk_kind;
	const void *blk;
	const float *blk_src;
} conv_state;

/* One call's geometry: per group Cg input and Mg output channels, ksz =
 * Cg x kernel taps, osz output pixels. */
typedef struct conv_job {
	cpu_geom g;
	int64_t Cg, Mg, ksz, osz;
	const cpu_tensor *res;   /* residual of Y's shape added in place, or NULL */
	int relu;                /* apply Relu after bias and residual */
	/* another fused activation to apply (cpu_fuse_act_apply) to each
	 * finished block of Y after bias and residual, or NULL */
	const cpu_fusion *act;
	/* x, and y with res, channel-blocked (NCHWc8): conv_wino.c's blocked
	 * transforms (CONV_BLK_W3); 0 for every other kernel */
	int xblk, yblk;
} conv_job;

/* Whether j's activation is a clamp a kernel applies as it stores each
 * result (Relu, or a Clip with lo <= hi): then its bounds [*lo, *hi]. */
static inline int conv_job_clamp(const conv_job *j, float *lo, float *hi)
{
	if (!j->relu &&
	    !(j->act && j->act->act == CPU_FUSE_ACT_CLIP && j->act->act_a <= j->act->act_b))
		return 0;
	*lo = j->relu ? 0.0f : j->act->act_a;
	*hi = j->relu ? INFINITY : j->act->act_b;
	return 1;
}

/* col[(c, kd, kh, kw), (od, oh, ow)] for the C channels at x. */
void cpu_im2col(const float *x, int64_t C, const cpu_geom *g, float *col);

/* gemm_pack_fn (gemm.h) for the rows form: op(B) = im2col of the Cg
 * channels at x, packed block by block without the matrix. */
typedef struct conv_packer {
	const float *x;
	const cpu_geom *g;
} conv_packer;
void conv_pack_im2col(void *arg, int64_t k0, int64_t rows, int64_t p0, int64_t p1, int64_t nr,
		      float *dst);

/* Depthwise (one input and one output channel per group): planes planes
 * of x (each g.in) into y (each g.out), plane p with filter w + p * taps
 * and bias b[p % (bias planes)], then the residual and Relu of j. */
void conv_depthwise(const conv_job *j, const float *x, const float *w, const float *b,
		    float *y, int64_t planes, int64_t channels);

/* conv_dw.c: the same for 1-D and 2-D images (conv_dw_fits) on padded
 * planes, split over the pool; 0 or CPU_E_NOMEM. */
int conv_dw_fits(const conv_job *j);
int conv_dw_run(cpu_ctx *ctx, const conv_job *j, const float *x, const float *w,
		const float *b, float *y, int64_t planes, int64_t channels);

/* conv_grouped.c: groups of at most 32 input and output channels
 * (not depthwise) on 1-D and 2-D images.  The filter [G*Mg, Cg, taps] is
 * first laid out by conv_grouped_pack into conv_grouped_wsize bytes. */
int conv_grouped_fits(const conv_job *j, int64_t group);
size_t conv_grouped_wsize(int64_t G, int64_t Mg, int64_t Cg, int64_t taps);
void conv_grouped_pack(const float *w, int64_t G, int64_t Mg, int64_t Cg, int64_t taps,
		       float *dst);
int conv_grouped_run(cpu_ctx *ctx, const conv_job *j, int64_t N, int64_t G, const float *x,
		     const float *wpacked, const float *b, float *y);

/* conv_direct.c: one group whose filter has at most CONV_DIRECT_KMAX
 * input channels x taps (on AVX2 also up to CONV_DIRECT_FEW_KMAX with at
 * most CONV_DIRECT_FEW_M output channels; on AVX2 none that conv_nhwc.c
 * takes), 1-D and 2-D, stride 1 or 2, no
 * dilation, on an AVX-512 or AVX2 + FMA CPU (ORTMK_CPU_CONV_DIRECT=0
 * turns it off).  The filter is laid out by conv_grouped_pack with G = 1. */
#define CONV_DIRECT_KMAX 160
#define CONV_DIRECT_FEW_M 16
#define CONV_DIRECT_FEW_KMAX 1152
/* conv.c: a pixels x channels block c (row stride ldc) into planes,
 * y[ch * plane + px] = c[px * ldc + ch], plus the residual res at y's
 * place (or NULL), then Relu. */
void conv_to_planes(const float *c, int64_t ldc, int64_t pixels, int64_t channels, float *y,
		    const float *res, int64_t plane, int relu);

int conv_direct_takes(int64_t Cg, int64_t taps, int64_t Mg);
int conv_direct_fits(const conv_job *j, int64_t group);
int conv_direct_run(cpu_ctx *ctx, const conv_job *j, int64_t N, const float *x,
		    const float *wpacked, const float *b, float *y);

/* conv_nhwc.c: one group, 1-D to 3-D, a filter of more than one tap,
 * at least CONV_NHWC_MIN_C input and CONV_NHWC_MIN_M output channels, on
 * a CPU whose best ISA is AVX2 + FMA (ORTMK_CPU_CONV_NHWC=0 turns it
 * off; on AVX-512 a 3x3 filter only with few channels, a large image or a
 * stride: `strided`, any stride above 1).  The filter is laid out by
 * conv_nhwc_pack into conv_nhwc_wsize bytes.  x and y (with its residual)
 * may be channel-blocked (j->xblk, j->yblk; 2-D, multiples of 8
 * channels): the large images of CONV_BLK_W3 layers. */
#define CONV_NHWC_MIN_C 16
#define CONV_NHWC_MIN_M 16
int conv_nhwc_takes(int64_t Cg, int64_t taps, int64_t Mg, int strided);
int conv_nhwc_fits(const conv_job *j, int64_t group);
size_t conv_nhwc_wsize(int64_t Mg, int64_t Cg, int64_t taps);
void conv_nhwc_pack(const float *w, int64_t Mg, int64_t Cg, int64_t taps, float *dst);
/* The filter (Mg x Cg x taps) back from conv_nhwc_pack's layout, with its
 * n taps kept[0..n) (all of them in order when kept is NULL): w is
 * Mg x Cg x n. */
void conv_nhwc_unpack(const float *packed, int64_t Mg, int64_t Cg, int64_t taps,
		      const int64_t *kept, int64_t n, float *w);
int conv_nhwc_run(cpu_ctx *ctx, const conv_job *j, int64_t N, const float *x,
		  const float *wpacked, const float *b, float *y);

/* conv_blk.c: 1x1 (one group, any stride, no padding) and depthwise layers
 * (no dilation) of a multiple of 8 channels, and first layers writing
 * them (CONV_BLK_IN), on channel-blocked values
 * (NCHWc8, cpu_kernel.h's CPU_LAYOUT_*), on a CPU whose best ISA is AVX2 +
 * FMA (ORTMK_CPU_CONV_BLOCKED=0 turns them off).  conv_blk_kind says from
 * the node's attributes and its constant filter which kind a Conv is (0:
 * neither); cpu_layout.c asks it at load.  The filter is laid out by
 * conv_blk_pack into conv_blk_wsize bytes.  conv_blk_run: x (C channels,
 * blocked or not) to y (M channels; blocked: with j's residual, blocked
 * too, and activation; plain: with the residual (plain, possibly y's own
 * bytes), and the activation unless there is a residual: then the
 * activation is left to the caller, conv_blk_activated 0); 0 or
 * CPU_E_NOMEM. */
/* CONV_BLK_G8: groups of 8 input and 8 output channels (RegNet's 3x3
 * layers), each group one block. */
/* CONV_BLK_PWS: a 1x1 one-group layer with a stride (no padding): ResNet's
 * and RegNet's projections. */
/* CONV_BLK_W3: a 3x3 stride-1 layer Winograd takes (conv_wino_takes), its
 * transforms reading and writing blocked values (no filter of its own:
 * the Winograd one).  CONV_BLK_NHWC: another 2-D one-group layer of more
 * than one tap that conv_nhwc.c takes (its filter: conv_nhwc_pack's). */
/* CONV_BLK_KB: a 2-D one-group layer of more than one tap that
 * conv_direct.c takes plain (few input or output channels: SqueezeNet's
 * 16 -> 64 3x3), the first layers' tile over blocked input planes. */
enum {
	CONV_BLK_PW = 1, CONV_BLK_DW = 2, CONV_BLK_IN = 3, CONV_BLK_G8 = 4, CONV_BLK_PWS = 5,
	CONV_BLK_W3 = 6, CONV_BLK_NHWC = 7, CONV_BLK_KB = 8,
};
/* CONV_BLK_IN: a one-group layer of at most this many input channels and
 * more than one tap (a first layer: RGB in), NCHW in, blocked out. */
#define CONV_BLK_IN_MAX_C 4
#define CONV_BLK_IN_MAX_K 3   /* ... and a window of at most this a side */
int conv_blk_enabled(void);
int conv_blk_kind(const Onnx__NodeProto *p, const cpu_tensor *W);
size_t conv_blk_wsize(int kind, int64_t M, int64_t Cg, int64_t taps);
void conv_blk_pack(int kind, const float *w, int64_t M, int64_t Cg, int64_t taps, float *dst);
int conv_blk_run(cpu_ctx *ctx, int kind, const conv_job *j, int64_t N, int64_t C, int64_t M,
		 const float *x, int x_blocked, const float *wpacked, const float *b, float *y,
		 int y_blocked);
int conv_blk_activated(const conv_job *j, int y_blocked);
/* Whether conv_blk_run's 1x1 tile pays for C -> M channels over this many
 * pixels an image (else conv.c runs the layer on plain copies). */
int conv_blk_pw_fits(int64_t C, int64_t M, int64_t pixels);
/* conv_taps.c: a dilated one-group convolution whose taps' in-image
 * outputs cover at most 60% of taps x outputs, as one product per tap
 * over the outputs it reads the image for (bias, residual and the fused
 * activation applied); 0 or CPU_E_NOMEM.  w: the Mg x Cg x KH x KW
 * filter; wt: its slices laid out by conv_taps_pack (at load), or NULL
 * (laid out now). */
int conv_taps_fits(const conv_job *j, int64_t group);
void conv_taps_pack(const float *w, int64_t M, int64_t C, int64_t taps, float *dst);
int conv_taps_run(cpu_ctx *ctx, const conv_job *j, int64_t N, const float *x, const float *w,
		  const float *wt, const float *b, float *y);

/* conv_wino.c: packs the transformed filter when the node qualifies
 * (3x3, stride 1, no dilation or conv_wino_dilated's, one group, constant
 * W); 0 or a status. */
int conv_wino_prepare(cpu_node *node, conv_state *st, char *err, size_t n);
/* Whether a filter W (float32, or float16 run widened) of a layer of this
 * window and group count qualifies (conv_wino_prepare's test, also
 * conv_blk_kind's). */
int conv_wino_takes(const cpu_tensor *W, const cpu_window *w, int64_t group);
/* The L2 cache of a core in bytes, 0 when unknown (glibc reads it from
 * cpuid on x86: no file, so also in the sandbox); conv_wino.c. */
int64_t conv_l2_bytes(void);
/* One image: y = act(conv(x) + bias + res) by F(2x2, 3x3), x and y (with
 * res) in planes or channel-blocked (j->xblk, j->yblk; conv_wino_dilated
 * too). */
/* Whether Winograd pays on this image: its transformed input (16 floats
 * per tile and channel) must stay near the caches; on large images the
 * direct forms win (a U-Net's 3x3 layers at 256x256 to 1024x1024: 2 to 5x). */
int conv_wino_fits(const conv_job *j, int members);
int conv_wino_run(cpu_ctx *ctx, const conv_state *st, const conv_job *j, const float *x,
		  const float *bias, const float *res, float *y);
/* A 3x3 layer of dilation D (2 to WINO_MAX_DILATION) in both dims with
 * pads D, stride 1: whether Winograd over its D x D phase sub-images side
 * by side pays (conv_wino_fits on that image), and the run (one image). */
int conv_wino_dilated_fits(const conv_job *j, int members);
int conv_wino_dilated(cpu_ctx *ctx, const conv_state *st, const conv_job *j, const float *x,
		      const float *bias, const float *res, float *y);

#endif
