/*
 * cuda_window: the window geometry of Conv and the pools for the CUDA
 * kernels: onnxrules/window.c's (auto_pad, pads, strides, dilations,
 * ceil_mode; shared with the core and the other providers) as a cuk_window, its
 * failures reported through the op context.
 */
#ifndef ORTMK_CUDA_WINDOW_H
#define ORTMK_CUDA_WINDOW_H

#include "cuda_ops.h"

/* The geometry of X (N, C, 1 to 3 spatial dims) with kernel dims `kern`;
 * slot 3 - nsp + i holds spatial dim i, unused leading slots are 1.  The
 * capability check of the attributes is dk_window_supports. */
int cu_window_geometry(dk_ctx *c, const dk_val *x, const int64_t *kern, cuk_window *w, int *nsp);
/* The kit's geometry (dk_pool_out's) as a cuk_window. */
void cu_window_of(const dk_window *g, cuk_window *w);

#endif
