/*
 * resize: what resize.c (attributes, output geometry, the op entries) and
 * resize_apply.c (the interpolation) share.  Private to ops/tensor/.
 */
#ifndef ORTMK_CPU_RESIZE_H
#define ORTMK_CPU_RESIZE_H

#include "tensor_ops.h"

enum { RS_NEAREST, RS_LINEAR, RS_CUBIC };
enum {
	CT_HALF_PIXEL, CT_HALF_PIXEL_SYMMETRIC, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS,
	CT_ASYMMETRIC, CT_TF_HALF_PIXEL_FOR_NN, CT_TF_CROP_AND_RESIZE,
};
/* NM_SIMPLE is what Upsample and Resize-10 (no nearest_mode attribute) do,
 * as ONNX Runtime does: ceil when downsampling, truncate otherwise. */
enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL, NM_SIMPLE };
enum { KA_STRETCH, KA_NOT_LARGER, KA_NOT_SMALLER };

/* Attributes, parsed once at prepare. */
typedef struct resize_params {
	int mode, ctm, nearest, policy, antialias, exclude_outside;
	double cubic_a, extrapolation;
	int n_axes;                       /* 0: every axis */
	int64_t axes[CPU_MAX_RANK];
	int legacy;                       /* Upsample, Resize-10: X and scales only */
	int n_attr_scales;                /* Upsample-7: scales is an attribute */
	double attr_scales[CPU_MAX_RANK];
} resize_params;

/* Geometry of one run, every axis filled (1.0 / same size where not
 * resized). len is length_resized as the coordinate formulas use it: the
 * requested size, or scale * input size (not rounded) for scales. */
typedef struct resize_geom {
	int rank;
	int64_t in[CPU_MAX_RANK], out[CPU_MAX_RANK];
	double scale[CPU_MAX_RANK], len[CPU_MAX_RANK];
	double roi_start[CPU_MAX_RANK], roi_end[CPU_MAX_RANK];
} resize_geom;

/* Fills Y (shape g->out) from X. */
int resize_run(cpu_ctx *ctx, const resize_params *p, const resize_geom *g,
	       const cpu_tensor *X, cpu_tensor *Y);

#endif
