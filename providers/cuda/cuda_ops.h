/*
 * cuda_ops: the contract between ort-ep-cuda's executor (cuda_exec.c,
 * cuda_run.c) and its operators (cuda_ops_*.c), after the Vulkan
 * provider's (providers/vulkan/vk_ops.h).
 *
 * An operator answers `supports` at capability-query time from the node
 * alone (op, opset, attributes, input dtypes) and must refuse what it does
 * not compute exactly, so those nodes fall to the next provider.
 * `prepare` (optional) parses attributes once at load into node->state;
 * `fini` (optional) releases what the op keeps there beyond plain memory.
 * `run` is called once per node per RUN, in order, on the host: it checks
 * its inputs' shapes (and reads shape-like int64 inputs' host bytes),
 * computes the output shapes, gets the outputs (cu_out: device memory from
 * the caching heap; cu_out_alias: a view, nothing copied) and enqueues its
 * kernels / cuBLAS / cuDNN calls on c->stream.  Nothing waits until the
 * run's downloads are enqueued.
 *
 * Tensors on the device are float32 or float16, dense, row-major.
 */
#ifndef ORTMK_CUDA_OPS_H
#define ORTMK_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "cuda_kernels.h"
#include "cuda_mem.h"
#include "ep_host.h"
#include "ep_shape.h"
#include "onnx.pb-c.h"

enum { CU_FLOAT = 1, CU_INT32 = 6, CU_INT64 = 7, CU_FLOAT16 = 10 };

typedef struct cu_val {
	int32_t dtype;
	int rank;
	int64_t dims[EP_MAX_RANK];
	int64_t numel;
	uint64_t nbytes;
	void *dev;              /* on the device, or NULL */
	const void *host;       /* its bytes on the host when known, else NULL */
	int is_const;           /* a weight: same bytes in every run */
	int ready;              /* has a value in this run */
} cu_val;

typedef struct cu_node {
	const struct cu_op *op;
	const Onnx__NodeProto *proto;
	int64_t opset;
	int n_in, n_out;
	int *in, *out;          /* value indexes; -1 for an omitted one */
	void *state;            /* the op's; op->fini (if any), then free() */
	cuda_block keep;        /* device memory the op keeps across runs */
	int keep_fresh;         /* `keep` is filled by the run in progress */
} cu_node;

struct cu_exec;

typedef struct cu_ctx {
	struct cu_exec *ex;
	cu_node *node;
	const cu_val **in;      /* n_in entries, NULL for an omitted input */
	int n_in;
	cudaStream_t stream;
	char *err;
	size_t errlen;
	int status;             /* the code of the last cu_fail */
} cu_ctx;

typedef struct cu_op {
	const char *op_type;
	int min_opset, max_opset;
	int (*supports)(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n);
	int (*prepare)(cu_node *node, char *err, size_t n);
	int (*run)(cu_ctx *c);
	void (*fini)(cu_node *node);
} cu_op;

/* ---- what an op's run calls (cuda_exec.c) ------------------------------ */

const cu_val *cu_in(const cu_ctx *c, int i);
/* Output i as a new device tensor of this dtype and shape (checked against
 * the core's plan when the core planned it); NULL with the error set and
 * its code in c->status. */
const cu_val *cu_out(cu_ctx *c, int i, int32_t dtype, int rank, const int64_t *dims);
/* Output i as a view of `src` with another shape (same element count). */
int cu_out_alias(cu_ctx *c, int i, const cu_val *src, int rank, const int64_t *dims);
/* Device scratch memory for this run only. */
int cu_temp(cu_ctx *c, uint64_t nbytes, void **ptr);
/* Device copy of host bytes, for this run only / kept in node->keep for
 * every later run (data derived from weights: uploaded the first time). */
int cu_upload_temp(cu_ctx *c, const void *data, uint64_t nbytes, void **ptr);
int cu_upload_keep(cu_ctx *c, const void *data, uint64_t nbytes, void **ptr);
/* A launch's result: 0, or a failure naming `what`. */
int cu_check(cu_ctx *c, cudaError_t e, const char *what);
/* The device's handles and settings. */
struct cuda_dev *cu_dev(const cu_ctx *c);
/* Formats the error, sets c->status; returns `code`. */
int cu_fail(cu_ctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- helpers (cuda_util.c) --------------------------------------------- */

/* Attributes: proto/node_attr.h; axes, broadcasting, view dims: onnxrules/dims.h;
 * numel and the rest: ep_shape.h. */

/* 1 when inputs [first, first + count) present (count -1: all) are all of
 * one float dtype: float32, or float16 when `f16` allows it; else 0 with
 * the reason. */
int cu_need_float(const Onnx__NodeProto *p, const int32_t *dt, int n_in, int first, int count,
		  int f16, char *why, size_t n);
int cu_is_float(int32_t dtype);
size_t cu_elem_size(int32_t dtype);

int64_t cu_get_int(const cu_val *v, int64_t i);

const cu_op *cu_op_find(const char *op_type, const char *domain, int64_t opset);

extern const cu_op cu_ops_elem[];
extern const cu_op cu_ops_linalg[];
extern const cu_op cu_ops_conv[];
extern const cu_op cu_ops_pool[];
extern const cu_op cu_ops_norm[];
extern const cu_op cu_ops_shape[];
extern const cu_op cu_ops_reduce[];

#endif
