/*
 * cuda_window: the window geometry of Conv and the pools for the CUDA
 * kernels: providers/host/ep_shape.c's (auto_pad, pads, strides,
 * dilations, ceil_mode; the CPU provider's rules) as a cuk_window, its
 * failures reported through the op context.
 */
#ifndef ORTMK_CUDA_WINDOW_H
#define ORTMK_CUDA_WINDOW_H

#include "cuda_ops.h"

/* The geometry of X (N, C, 1 to 3 spatial dims) with kernel dims `kern`;
 * slot 3 - nsp + i holds spatial dim i, unused leading slots are 1.  The
 * capability check of the attributes is ep_window_supports. */
int cu_window_geometry(cu_ctx *c, const cu_val *x, const int64_t *kern, cuk_window *w, int *nsp);

#endif
