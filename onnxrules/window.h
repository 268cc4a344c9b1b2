/*
 * window.h: ONNX's sliding-window geometry, the one copy the core's shape
 * inference (core/shape_ops_nn.c) and every provider's Conv and pooling
 * (providers/cpu/ops/window.c, providers/host/ep_shape.c) use: the
 * attributes (kernel_shape, strides, dilations, pads, auto_pad,
 * ceil_mode), and each spatial dim's output size and padding.
 *
 * The rules, as the ONNX reference and PyTorch apply them:
 *   - SAME_UPPER / SAME_LOWER: out = ceil(in / stride); the padding that
 *     takes is split in two, the odd element at the end (UPPER) or at the
 *     start (LOWER); explicit pads are ignored.
 *   - VALID: no padding; out = floor((in - window) / stride) + 1.
 *   - NOTSET: explicit pads; the same formula over the padded input, and
 *     with ceil_mode rounded up, except that a last window that would
 *     start in the end padding is dropped.  ceil_mode applies to NOTSET
 *     only.
 * window = (kernel - 1) * dilation + 1.
 */
#ifndef ORTMK_ONNXRULES_WINDOW_H
#define ORTMK_ONNXRULES_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"
#include "rules.h"

enum { ONNX_PAD_NOTSET, ONNX_PAD_SAME_UPPER, ONNX_PAD_SAME_LOWER, ONNX_PAD_VALID };

/* auto_pad of node p: ONNX_PAD_* (absent, "" and "NOTSET" are NOTSET), or
 * -1 for a value ONNX does not define. */
int onnx_auto_pad(const Onnx__NodeProto *p);

/* One spatial dim: in, k (>= 1), s (>= 1), d (>= 1) and, for NOTSET, the
 * explicit pads pb / pe are given; onnx_window_span sets out, pb and pe. */
typedef struct onnx_span {
	int64_t in, k, s, d, pb, pe, out;
} onnx_span;

enum { ONNX_SPAN_OVERFLOW = -1, ONNX_SPAN_EXCEEDS = -2 };

/* 0, ONNX_SPAN_OVERFLOW (the sizes overflow int64) or ONNX_SPAN_EXCEEDS
 * (the window is larger than the padded input). */
int onnx_window_span(int auto_pad, int ceil_mode, onnx_span *sp);
/* The message of onnx_window_span's failure rc at spatial dim i; returns
 * ONNX_E_INVALID. */
int onnx_span_error(int rc, const onnx_span *sp, int i, char *err, size_t n);

/* A node's window attributes as given (0 counts: absent). */
typedef struct onnx_window {
	int n_kernel, n_strides, n_dilations, n_pads;
	int64_t kernel[ONNX_MAX_RANK], strides[ONNX_MAX_RANK], dilations[ONNX_MAX_RANK];
	int64_t pads[2 * ONNX_MAX_RANK];
	int auto_pad, ceil_mode;
} onnx_window;

/* Resolved geometry of nsp spatial dims, padded to 3 for the 1-D..3-D
 * loops: slot 3 - nsp + i is spatial dim i, the leading unused slots have
 * size, kernel, stride and dilation 1. */
typedef struct onnx_geom {
	int nsp;
	int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
} onnx_geom;

/* Reads and checks the attributes: counts within ONNX_MAX_RANK, values in
 * [1 (pads: 0), INT32_MAX] (far from overflowing the size arithmetic), an
 * even pads count, a known auto_pad.  An attribute whose `type` says
 * otherwise is absent (an unset type: the field that is set decides). */
int onnx_window_parse(const Onnx__NodeProto *p, onnx_window *w, char *err, size_t n);
/* The geometry over the nsp (1 to 3) spatial dims in_sp with kernel dims
 * `kernel` (Conv passes W's, which must match kernel_shape when given;
 * NULL uses kernel_shape).  Fails on counts that do not match nsp, a
 * kernel dim < 1, or a window larger than the padded input. */
int onnx_window_geom(const onnx_window *w, int nsp, const int64_t *in_sp,
		     const int64_t *kernel, onnx_geom *g, char *err, size_t n);

#endif
