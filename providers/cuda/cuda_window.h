/*
 * cuda_window: the window geometry of Conv and the pools (auto_pad, pads,
 * strides, dilations, ceil_mode), the CPU provider's rules
 * (providers/cpu/ops/window.c) so every provider gives the same output
 * sizes: SAME pads split with the odd one at the end (SAME_UPPER) or the
 * start (SAME_LOWER); in ceil_mode a last window that would start in the
 * end padding is dropped.
 */
#ifndef ORTMK_CUDA_WINDOW_H
#define ORTMK_CUDA_WINDOW_H

#include "cuda_ops.h"

/* What the capability query can check of a windowed op's attributes. */
int cu_window_supports(const Onnx__NodeProto *p, char *why, size_t n);
/* The geometry of X (N, C, 1 to 3 spatial dims) with kernel dims `kern`;
 * slot 3 - nsp + i holds spatial dim i, unused leading slots are 1. */
int cu_window_geometry(cu_ctx *c, const cu_val *x, const int64_t *kern, cuk_window *w, int *nsp);

#endif
