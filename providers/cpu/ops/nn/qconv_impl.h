/*
 * qconv_impl: what the quantized convolution's files share (qconv.c, the
 * GEMM path; qconv_dw.c, the depthwise kernel): the load-time state and
 * one call's geometry and operands.
 */
#ifndef ORTMK_QCONV_IMPL_H
#define ORTMK_QCONV_IMPL_H

#include <stdint.h>

#include "cpu_ops.h"
#include "igemm.h"

typedef struct qconv_state {
	cpu_window win;
	int64_t group;
	/* A constant filter packed as the int8 GEMM's A (igemm_pack_a) from
	 * w_src, or NULL. */
	const void *wpack;
	const void *w_src;
	int direct;                /* wpack is in qconv_direct's k order */
} qconv_state;

/* Input indices of x, x's zero point, w, w's zero point. */
typedef struct qconv_io {
	int x, xz, w, wz;
} qconv_io;

/* One call: N images, G groups of Cg input and Mg output channels (M in
 * all), ksz = Cg x taps, isz input and osz output pixels per plane. */
typedef struct qconv_run {
	cpu_geom g;
	int64_t N, G, Cg, Mg, M, ksz, isz, osz;
	const cpu_tensor *X, *W;
	int32_t zx;                /* x's zero point */
	const int32_t *zw;         /* w's: 1 or M values */
	int64_t nzw;
	igemm_a A;                 /* the filter, M rows (packed) */
	int direct;                /* through qconv_direct (A in its order) */
} qconv_run;

/* Every (image, group) into out (int32 or float [N, M, osz]). */
int qconv_run_all(cpu_ctx *ctx, const qconv_io *io, qconv_run *r, const igemm_out *out);
/* out restricted to the output channels [m0, ...) of image n: where the
 * GEMM of one group writes. */
igemm_out qconv_group_out(const qconv_run *r, const igemm_out *out, int64_t n, int64_t m0);

/* qconv_direct.c: stride-1 2-D convolutions read in place (no im2col). */
int qconv_direct_fits(const qconv_run *r);
/* The M x (Cg x taps) filter w reordered into dst (M x taps x
 * round_up(Cg, 4) bytes) in the (tap, channel) order qconv_direct's A
 * has. */
void qconv_direct_order(const void *w, int is_signed, int64_t M, int64_t Cg, int64_t taps,
			uint8_t *dst);
int qconv_direct(cpu_ctx *ctx, const qconv_run *r, const igemm_a *A, const igemm_out *out);

/* One input and one output channel per group, 2-D: the int32 sliding
 * window over planes padded with the zero point, then out's epilogue. */
int qconv_depthwise(cpu_ctx *ctx, const qconv_run *r, const igemm_out *out);

#endif
