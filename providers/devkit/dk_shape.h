/*
 * dk_shape: the host-side shape and attribute math every device provider
 * shares (vulkan, cuda) beyond ONNX's own rules (onnxrules/: window
 * geometry, broadcasting, the view ops' dims): numel, shape strings, the
 * output dims of Transpose and Gather, the node checks of the windowed
 * ops, and the reduced-axes mask of the Reduce ops.  Everything works on plain dims; functions that can fail
 * return 0 or an EP_E_* code with a one-line message in err, which each
 * provider reports through its own context.
 */
#ifndef ORTMK_DK_SHAPE_H
#define ORTMK_DK_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "dims.h"
#include "ep_host.h"
#include "node_attr.h"
#include "onnx.pb-c.h"
#include "window.h"

/* ---- attributes: proto/node_attr.h (proto_attr_int, proto_attr_ints...) ---- */

/* Outputs that are present (non-empty names). */
int dk_n_outputs(const Onnx__NodeProto *p);

/* ---- dims ------------------------------------------------------------------ */

int64_t dk_numel(int rank, const int64_t *dims);
/* "[d0,d1,...]" into buf; returns buf. */
const char *dk_shape_str(int rank, const int64_t *dims, char *buf, size_t n);
/* Axes and broadcasting: onnxrules/dims.h (onnx_axis, onnx_broadcast). */

/* ---- view ops: output dims of X (rank, dims, numel) ------------------------- */

/* Reshape, Flatten, Squeeze, Unsqueeze: onnxrules/dims.h through
 * dk_view_dims (ep_ops.h). */

/* The node checks of Reshape, Flatten, Squeeze, Unsqueeze and Identity
 * that need no dtype (inputs, outputs, attributes): 1, or 0 with the reason. */
int dk_view_node_ok(const Onnx__NodeProto *p, int64_t opset, char *why, size_t n);
/* Transpose by the np values pv (np < 0: reversed): perm[] and od[]. */
int dk_transpose_dims(int rank, const int64_t *dims, const int64_t *pv, int np, int *perm,
		      int64_t *od, char *err, size_t n);
/* Output dims and the input stride each walks, size-1 dims dropped and
 * neighbours that stay neighbours merged; returns the folded rank. */
int dk_fold_perm(int rank, const int64_t *dims, const int *perm, int64_t *fd, int64_t *fs);
/* Gather along axis a (valid) with indices of rank irank: od, the product
 * of the dims before a (*outer) and after it (*inner); returns the rank. */
int dk_gather_dims(int rank, const int64_t *dims, int a, int irank, const int64_t *idims,
		   int64_t *od, int64_t *outer, int64_t *inner);

/* ---- Conv and pool windows -------------------------------------------------- */

/*
 * The window geometry is ONNX's rules in onnxrules/window.h, the ones the
 * core and the CPU provider apply, so every provider gives the same output
 * sizes.  Slots 0..2 = D, H, W: spatial dim i of the tensor is slot
 * 3 - nsp + i, unused leading slots are 1.
 */
typedef onnx_geom dk_window;

/* What the capability query can check of a windowed op's attributes. */
int dk_window_supports(const Onnx__NodeProto *p, char *why, size_t n);
/* The node checks of Conv (inputs, outputs, attributes, group) and of
 * MaxPool/AveragePool (one input, only the Y output, attributes, a
 * kernel_shape) that need no dtype: 1, or 0 with the reason. */
int dk_conv_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
int dk_pool_node_ok(const Onnx__NodeProto *p, char *why, size_t n);
/* The geometry of X (N, C, 1 to 3 spatial dims) with kernel dims kern;
 * the spatial rank in *nsp. */
int dk_window_geometry(const Onnx__NodeProto *p, int rank, const int64_t *dims,
		       const int64_t *kern, dk_window *g, int *nsp, char *err, size_t n);

/* ---- LayerNormalization ------------------------------------------------------ */

/* The node checks of LayerNormalization that need no kernel (inputs,
 * outputs, attributes; float16 X only without the Mean/InvStdDev outputs,
 * which are float32 whatever X is; x_dtype 0 when unknown): 1, or 0 with
 * the reason. */
int dk_layernorm_node_ok(const Onnx__NodeProto *p, int32_t x_dtype, char *why, size_t n);
/* 1 when a tensor of dims s[0..sr) broadcasts over x's normalised dims
 * x[a..xr) as a suffix (leading 1s aside), so that element j of a row uses
 * element j % numel(s). */
int dk_suffix_broadcasts(int sr, const int64_t *s, int xr, const int64_t *x, int a);

/* ---- Reduce ops --------------------------------------------------------------- */

/*
 * Marks the reduced dims of a rank-`rank` input in red[]: the axes come
 * from the attribute when opset < since, else the cnt values in ax (cnt < 0:
 * no axes input).  Returns 1 when the op is a no-op (no axes and
 * noop_with_empty_axes), 0, or an EP_E_* code.  dk_reduce_node_ok: the
 * node checks that need no dtype (inputs, outputs, attributes).
 */
int dk_reduce_node_ok(const Onnx__NodeProto *p, int64_t opset, int64_t since, char *why,
		      size_t n);
int dk_reduce_axes(const Onnx__NodeProto *p, int64_t opset, int64_t since, const int64_t *ax,
		   int cnt, int rank, int *red, char *err, size_t n);

#endif
