/*
 * vk_ops: the contract between the Vulkan provider's executor (vk_exec.c)
 * and its operators (vk_ops_*.c).
 *
 * An operator answers `supports` at capability-query time from the node
 * alone (op, opset, attributes, input dtypes): it must refuse everything it
 * does not compute exactly, so those nodes fall to the next provider.
 * `prepare` (optional) parses attributes once at load into node->state.
 * `plan` runs on the host once per node per run, before anything is
 * recorded: it reads its inputs' shapes (and, for shape-like int64 inputs,
 * their host bytes), computes the output shapes, asks the executor for the
 * outputs (vk_out allocates device memory, vk_out_alias makes a view of an
 * input: Reshape and friends copy nothing) and appends its dispatches.
 * The executor then records every node's dispatches into one command
 * buffer.
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
#include "ep_shape.h"
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

typedef struct vk_val {
	int32_t dtype;
	int rank;
	int64_t dims[EP_MAX_RANK];
	int64_t numel;
	uint64_t nbytes;
	vk_buf dev;             /* where it is on the device; block < 0: not there */
	const void *host;       /* its bytes on the host when known, else NULL */
	int is_const;           /* a weight: same bytes in every run */
	int ready;              /* has a value in this run */
} vk_val;

typedef struct vk_node {
	const struct vk_op *op;
	const Onnx__NodeProto *proto;
	int64_t opset;
	int n_in, n_out;
	int *in, *out;          /* value indexes; -1 for an omitted one */
	void *state;            /* the op's, freed with free() */
	vk_buf keep;            /* the op's device buffer kept across runs */
	int keep_fresh;         /* `keep` is uploaded by the run in progress */
} vk_node;

struct vk_exec;
struct vk_prepack;
struct vk_uploader;

typedef struct vk_ctx {
	struct vk_exec *ex;
	vk_node *node;
	const vk_val **in;      /* n_in entries, NULL for an omitted input */
	int n_in;
	char *err;
	size_t errlen;
	int status;             /* the code of the last vk_fail */
} vk_ctx;

typedef struct vk_op {
	const char *op_type;
	int min_opset, max_opset;
	int (*supports)(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n);
	int (*prepare)(vk_node *node, char *err, size_t n);
	int (*plan)(vk_ctx *ctx);
	uint32_t pipes;         /* bit i: needs pipeline i (created at load) */
	/* Optional, at load once the weights are on the device: re-lays out
	 * a constant input into node->keep through the pre-pack cache
	 * (vk_prepack_keep). */
	int (*pack)(struct vk_exec *ex, vk_node *node, struct vk_prepack *pk,
		    struct vk_uploader *u, char *err, size_t n);
} vk_op;

/* ---- what an op's plan calls ------------------------------------------ */

/* The float type the node computes on: its input 0's (float32 or
 * float16); its outputs get it and its dispatches use the float16 shader
 * variants (VKP_F16) for float16. */
int32_t vk_node_dtype(const vk_ctx *c);
/* Input i, or NULL when omitted. */
const vk_val *vk_in(const vk_ctx *c, int i);
/* Output i as a new float32 device tensor of this shape (checked against
 * the core's plan when the core planned it); NULL with the error set and
 * its code in c->status. */
const vk_val *vk_out(vk_ctx *c, int i, int rank, const int64_t *dims);
/* Output i as a view of `src` with another shape (same element count). */
int vk_out_alias(vk_ctx *c, int i, const vk_val *src, int rank, const int64_t *dims);
/* Appends a dispatch of pipeline `pipe` over `bufs` (bit k of `writes`
 * set for those it writes) with `push` as push constants. */
int vk_emit(vk_ctx *c, int pipe, const vk_buf *bufs, int n_bufs, uint32_t writes,
	    const void *push, size_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz);
/* The same over `threads` invocations of a 64-wide 1-D shader (the groups
 * spread over x and y; see shaders/common.glsl). */
int vk_emit_1d(vk_ctx *c, int pipe, const vk_buf *bufs, int n_bufs, uint32_t writes,
	       const void *push, size_t push_bytes, uint64_t threads);
/* Device memory holding a copy of `nbytes` of host data for this run only. */
int vk_upload_temp(vk_ctx *c, const void *data, uint64_t nbytes, vk_buf *out);
/* The same kept in node->keep for every later run (for data derived from
 * weights): uploaded the first time only. */
int vk_upload_keep(vk_ctx *c, const void *data, uint64_t nbytes, vk_buf *out);
/* 1 when the device is a CPU implementation (lavapipe, SwiftShader):
 * kernels that trade index arithmetic for memory traffic choose by it. */
int vk_device_is_cpu(const vk_ctx *c);
/* Formats the error, sets c->status; returns `code`. */
int vk_fail(vk_ctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- helpers (vk_util.c) ---------------------------------------------- */

/* Attributes: proto/node_attr.h; axes, broadcasting, view dims: onnxrules/dims.h;
 * numel and the rest: ep_shape.h. */

/* 1 when inputs [first, first + count) present are all float32 or all
 * float16 (count -1: all); else 0 with the reason. */
int vk_need_float(const Onnx__NodeProto *p, const int32_t *dt, int n_in, int first, int count,
		  char *why, size_t n);
/* The names vk_exec.c and vk_run.c use for ep_numel and ep_shape_str. */
static inline int64_t vk_numel(int rank, const int64_t *dims)
{
	return ep_numel(rank, dims);
}

static inline const char *vk_shape_str(int rank, const int64_t *dims, char *buf, size_t n)
{
	return ep_shape_str(rank, dims, buf, n);
}

/* Reads element i of an int32/int64 host tensor. */
int64_t vk_get_int(const vk_val *v, int64_t i);

/* 1 when every float tensor of the capability query whose shape the core
 * inferred fits in `max_bytes` (maxStorageBufferRange) and 32-bit
 * indexing, float16 taking 2 bytes with 16-bit storage (f16) and 4
 * without; else 0 with the reason. */
int vk_shapes_fit(const Ortmk__NodeQuery *q, uint64_t max_bytes, int f16, char *why, size_t n);

/* The registry: every op the provider runs, by type and opset. */
const vk_op *vk_op_find(const char *op_type, const char *domain, int64_t opset);

/* The op tables of each family. */
extern const vk_op vk_ops_elem[];
extern const vk_op vk_ops_linalg[];
extern const vk_op vk_ops_nn[];
extern const vk_op vk_ops_norm[];
extern const vk_op vk_ops_shape[];
extern const vk_op vk_ops_reduce[];

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
