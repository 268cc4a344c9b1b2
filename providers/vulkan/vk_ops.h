/*
 * vk_ops: what the Vulkan provider's operators (vk_ops_*.c) share beyond
 * the device kit's contract (providers/devkit/dk_exec.h: dk_op, dk_ctx).
 *
 * An operator answers `supports` at capability-query time from the node
 * alone (op, opset, attributes, input dtypes): it must refuse everything it
 * does not compute exactly, so those nodes fall to the next provider.
 * `prepare` (optional) parses attributes once at load into node->state.
 * `run` (dk_op, providers/devkit/dk_exec.h) runs on the host once per
 * node per run, before anything is recorded: it reads its inputs' shapes
 * (and, for shape-like int64 inputs, their host bytes), computes the output
 * shapes, asks the executor for the outputs (dk_out allocates device
 * memory, dk_out_alias makes a view of an input: Reshape and friends copy
 * nothing) and appends its dispatches (vk_emit).  The executor then has
 * every node's dispatches recorded into one command buffer.
 *
 * Tensors on the device are float32 or float16 (float16 storage where the
 * device has it, else float32; shaders compute in float32), dense,
 * row-major.
 */
#ifndef ORTMK_VK_OPS_H
#define ORTMK_VK_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "ep_host.h"
#include "dk_exec.h"
#include "dk_ops.h"
#include "dk_shape.h"
#include "onnx.pb-c.h"
#include "vk_mem.h"
#include "vk_pipe.h"

enum { VKX_FLOAT = 1, VKX_INT32 = 6, VKX_INT64 = 7, VKX_FLOAT16 = 10 };

/* 1 when tensors of this dtype live in device memory: float32 and
 * float16; the others (int64 shapes, axes, indices) are read on the host. */
static inline int vk_dev_dtype(int32_t dt)
{
	return dt == VKX_FLOAT || dt == VKX_FLOAT16;
}

/* Bytes per element of a float dtype on the host. */
static inline uint64_t vk_esz(int32_t dt)
{
	return dt == VKX_FLOAT16 ? 2 : 4;
}

/* Bytes per element on the device: float16 stays float16 with 16-bit
 * storage (d->f16), else it is kept as float32. */
static inline uint64_t vk_dev_esz(const vk_dev *d, int32_t dt)
{
	return dt == VKX_FLOAT16 && d->f16 ? 2 : 4;
}

/* 1 when a float16 tensor is float32 on this device (no 16-bit storage):
 * its transfers widen and narrow (vk_f16.c). */
static inline int vk_f16_as_f32(const vk_dev *d, int32_t dt)
{
	return dt == VKX_FLOAT16 && !d->f16;
}

/* float16 (host bytes) <-> float32, n elements (vk_f16.c). */
void vk_f16_widen(float *dst, const void *src, size_t n);
void vk_f16_narrow(void *dst, const float *src, size_t n);

/* Largest element count a shader indexes (32-bit indices). */
#define VKX_MAX_ELEMS ((int64_t)1 << 31)

/* ---- what an op's plan calls ------------------------------------------ */

/* The float type the node computes on: its input 0's (float32 or
 * float16); its outputs get it and its dispatches use the float16 shader
 * variants (VKP_F16) for float16.  Outputs: dk_out(c, i,
 * vk_node_dtype(c), ...) or dk_out_alias; inputs dk_in (dk_exec.h). */
int32_t vk_node_dtype(const dk_ctx *c);
/* Appends a dispatch of pipeline `pipe` over `bufs` (bit k of `writes`
 * set for those it writes) with `push` as push constants. */
int vk_emit(dk_ctx *c, int pipe, const vk_buf *bufs, int n_bufs, uint32_t writes,
	    const void *push, size_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz);
/* The same over `threads` invocations of a 64-wide 1-D shader (the groups
 * spread over x and y; see shaders/common.glsl). */
int vk_emit_1d(dk_ctx *c, int pipe, const vk_buf *bufs, int n_bufs, uint32_t writes,
	       const void *push, size_t push_bytes, uint64_t threads);
/* 1 when the device is a CPU implementation (lavapipe, SwiftShader):
 * kernels that trade index arithmetic for memory traffic choose by it. */
int vk_device_is_cpu(const dk_ctx *c);

/* ---- helpers (vk_util.c) ---------------------------------------------- */

/* Attributes: proto/node_attr.h; axes, broadcasting, view dims:
 * onnxrules/dims.h; numel, the float dtype check and the rest:
 * providers/devkit/dk_shape.h and dk_ops.h. */

/* 1 when every float tensor of the capability query whose shape the core
 * inferred fits in `max_bytes` (maxStorageBufferRange) and 32-bit
 * indexing, float16 taking 2 bytes with 16-bit storage (f16) and 4
 * without; else 0 with the reason. */
int vk_shapes_fit(const Ortmk__NodeQuery *q, uint64_t max_bytes, int f16, char *why, size_t n);

/* The registry: every op the provider runs, by type and opset. */
const dk_op *vk_op_find(const char *op_type, const char *domain, int64_t opset);

/* The op tables of each family. */
extern const dk_op vk_ops_elem[];
extern const dk_op vk_ops_linalg[];
extern const dk_op vk_ops_nn[];
extern const dk_op vk_ops_norm[];
extern const dk_op vk_ops_shape[];
extern const dk_op vk_ops_reduce[];

/* Codes of the unary and binary shaders (shaders/unary.comp, binary.comp). */
enum vk_unary {
	VKX_U_RELU, VKX_U_SIGMOID, VKX_U_TANH, VKX_U_SQRT, VKX_U_ERF, VKX_U_GELU, VKX_U_GELU_TANH,
	VKX_U_ABS, VKX_U_NEG, VKX_U_LEAKY_RELU,
};
enum vk_binary { VKX_B_ADD, VKX_B_SUB, VKX_B_MUL, VKX_B_DIV, VKX_B_POW };

#define VKX_PIPE(id) (1u << (id))

/* shaders/reduce.comp's parameters (GlobalAveragePool uses it too). */
#define VKX_REDUCE_GROUPS 6
typedef struct vk_reduce_push {
	uint32_t n, count, op, nk, nr;
	uint32_t kdims[VKX_REDUCE_GROUPS], kstr[VKX_REDUCE_GROUPS];
	uint32_t rdims[VKX_REDUCE_GROUPS], rstr[VKX_REDUCE_GROUPS];
} vk_reduce_push;

#endif
