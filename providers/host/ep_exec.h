/*
 * ep_exec: the parts of a device provider's executor that do not depend on
 * the device (vulkan: vk_exec.c, vk_run.c; cuda: cuda_exec.c,
 * cuda_run.c).  Both walk a loaded subgraph's nodes in order with one
 * value table per run; what is shared here is the bookkeeping around that
 * walk: growable lists, wiring node inputs/outputs to value indexes, the
 * checks of weights, bindings and planned output shapes, which produced
 * values go back at the end of a RUN, and the capability-query preamble.
 * The device work (buffers, uploads, recording, launches) stays in each
 * provider, reached through the small callbacks below.
 *
 * Functions that can fail return 0 or an EP_E_* code with a one-line
 * message in err.
 */
#ifndef ORTMK_EP_EXEC_H
#define ORTMK_EP_EXEC_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "ep_host.h"
#include "onnx.pb-c.h"
#include "sysio.h"

/* A growable array of elements of `size` bytes (set before the first push). */
typedef struct ep_list {
	void *v;
	size_t n, cap, size;
} ep_list;

/* Appends a zeroed element; NULL when out of memory. */
void *ep_list_push(ep_list *l);

/* The run's debug log times with sys_now_ms (onnxrules/sysio.h). */

/* ---- load --------------------------------------------------------------- */

/* What the executor knows of a loaded subgraph's values, whatever the
 * device: which node produces each and in what order, and in a RUN which
 * binding each has. */
typedef struct ep_wiring {
	const ep_subgraph *sg;
	int *producer;          /* per value: the node producing it, or -1 */
	int *order;             /* the values the step produces, in production order */
	size_t n_order;
	int *bound;             /* per value, in a RUN: its binding's index, or -1 */
} ep_wiring;

/* -1 when out of memory (ep_wiring_fini releases what was made). */
int ep_wiring_init(ep_wiring *w, const ep_subgraph *sg);
void ep_wiring_fini(ep_wiring *w);
/* Before binding a RUN: no value is bound. */
void ep_wiring_reset(ep_wiring *w);

/*
 * Wires node k (proto p) to the subgraph's values: *in and *out get the
 * value index of each input and output (-1 for an omitted one; allocated,
 * the caller frees); each output gets k as its producer and its place in
 * the production order.
 */
int ep_node_wire(ep_wiring *w, const Onnx__NodeProto *p, int k, int **in, int **out, char *err,
		 size_t n);
/* Every weight names a value of the subgraph and has a rank that fits. */
int ep_weights_check(const ep_subgraph *sg, char *err, size_t n);
/* "subgraph 7 loaded: 3 nodes: Conv Relu MaxPool; device memory ..."
 * (debug; tests read it). */
void ep_log_loaded(const ep_subgraph *sg, uint64_t dev_bytes);

/* "node 'name' (Op): " + the message into err; returns code. */
int ep_node_vfail(char *err, size_t n, const Onnx__NodeProto *p, int code, const char *fmt,
		  va_list ap);

/* ---- run ---------------------------------------------------------------- */

/*
 * Binds a RUN's tensors: checks each binding's dtype against the loaded
 * value's, sets w->bound[v] to its index, and calls bind(ctx, binding) for
 * each one the step does not produce (an input; a weight's binding is for
 * the callback to skip).
 */
typedef int (*ep_bind_fn)(void *ctx, const ep_tensor *b, char *err, size_t n);
int ep_bind_inputs(ep_wiring *w, const ep_run *r, ep_bind_fn bind, void *ctx, char *err,
		   size_t n);

/* Checks the shape (and, when dtype is not 0, the dtype) a node produced
 * for value v against the binding the core planned, when it planned one. */
int ep_check_planned(const ep_wiring *w, const ep_run *r, int v, int32_t dtype, int rank,
		     const int64_t *dims, char *err, size_t n);

/* "output 'x': N bytes bound, M produced" (EP_E_SHAPE). */
int ep_bytes_mismatch(const ep_subgraph *sg, int v, uint64_t bound, uint64_t produced, char *err,
		      size_t n);

/*
 * Every bound value the step produced that goes back after the RUN, in
 * production order (the core may place a dead value and a later one at the
 * same offset): those bound to device buffers (and, with `all_dynamic`,
 * dynamic ones) always, host ones only when they leave the step (a later
 * step reads them, or a graph output: LoadSubgraph.exported).  collect()
 * sets *overflow when the run's dynamic region is too small; that is
 * reported (EP_E_DYN_OVERFLOW) once all were tried.
 */
typedef int (*ep_collect_fn)(void *ctx, int v, int *overflow, char *err, size_t n);
int ep_collect_outputs(const ep_wiring *w, const ep_run *r, int all_dynamic,
		       ep_collect_fn collect, void *ctx, char *err, size_t n);

/* ---- capability query ---------------------------------------------------- */

/*
 * What vtable.supported checks before asking the op itself: a device is
 * open (ok; else `dev_why`), the op is implemented (found) and every input
 * dtype is known.  1 to go on to the op's supports(), 0 with the reason.
 * `dev` names the device kind ("CUDA", "Vulkan").
 */
int ep_supported_pre(const char *dev, int ok, const char *dev_why, int found,
		     const Onnx__NodeProto *node, int64_t opset, int n_in, char *why, size_t n);

#endif
