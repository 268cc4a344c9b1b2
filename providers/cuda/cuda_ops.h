/*
 * cuda_ops: what ort-ep-cuda's operators (cuda_ops_*.c) share beyond the
 * device kit's contract (providers/devkit/dk_exec.h: dk_op, dk_ctx).
 *
 * An operator answers `supports` at capability-query time from the node
 * alone (op, opset, attributes, input dtypes) and must refuse what it does
 * not compute exactly, so those nodes fall to the next provider.
 * `prepare` (optional) parses attributes once at load into node->state;
 * `fini` (optional) releases what the op keeps there beyond plain memory.
 * `run` is called once per node per RUN, in order, on the host: it checks
 * its inputs' shapes (and reads shape-like int64 inputs' host bytes),
 * computes the output shapes, gets the outputs (dk_out: device memory from
 * the caching heap; dk_out_alias: a view, nothing copied) and enqueues its
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
#include "dk_exec.h"
#include "dk_ops.h"
#include "dk_shape.h"
#include "onnx.pb-c.h"

enum { CU_FLOAT = 1, CU_INT32 = 6, CU_INT64 = 7, CU_FLOAT16 = 10 };

/* ---- what an op's run calls beyond dk_exec.h (cuda_exec.c) -------------- */

/* A launch's result: 0, or a failure naming `what`. */
int cu_check(dk_ctx *c, cudaError_t e, const char *what);
/* The device's handles and settings. */
struct cuda_dev *cu_dev(const dk_ctx *c);

/* ---- helpers (cuda_util.c) --------------------------------------------- */

/* Attributes: proto/node_attr.h; axes, broadcasting, view dims:
 * onnxrules/dims.h; numel, the float dtype check and the rest:
 * providers/devkit/dk_shape.h and dk_ops.h. */


const dk_op *cu_op_find(const char *op_type, const char *domain, int64_t opset);

extern const dk_op cu_ops_elem[];
extern const dk_op cu_ops_linalg[];
extern const dk_op cu_ops_conv[];
extern const dk_op cu_ops_pool[];
extern const dk_op cu_ops_norm[];
extern const dk_op cu_ops_shape[];
extern const dk_op cu_ops_reduce[];

#endif
