/*
 * dk_exec: the executor every device provider runs on (vulkan, cuda).
 *
 * It owns a loaded subgraph's tables (nodes, weights, per-value device
 * memory, a run's values) and the run loop: bind the RUN's tensors (host
 * ones queued for upload, device ones used in place or read to the host
 * when the ops read them there), run every node's op in order (an op reads
 * its inputs' shapes, asks for its outputs and queues or records its device
 * work), collect what goes back (downloads to shared memory or the dynamic
 * region, copies into device buffers), submit and wait, settle the buffers
 * dynamic device outputs got, free the run's scratch.
 *
 * A provider brings a dk_device: its memory and stream operations
 * (dk_dev_ops: alloc, free, buffer ranges by id, begin, fetch, flush,
 * submit, end) and its kernel table (find_op, the dk_op each node runs).
 * Values are dk_val and memory dk_buf whatever the device.
 *
 * Functions that can fail return 0 or an EP_E_* code with a one-line
 * message in err.  Called from the provider's request thread.
 */
#ifndef ORTMK_DK_EXEC_H
#define ORTMK_DK_EXEC_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "dk_buf.h"
#include "ep_host.h"
#include "onnx.pb-c.h"
#include "sysio.h"

enum { DK_FLOAT = 1, DK_INT32 = 6, DK_INT64 = 7, DK_FLOAT16 = 10 };

/* 1 for the dtypes that live in device memory (float32, float16); the
 * others (int64 shapes, axes, indices) are read by the ops on the host. */
int dk_dev_dtype(int32_t dtype);
/* Bytes per element on the host (float16 2, int64 8, else 4). */
size_t dk_esz(int32_t dtype);

/* ---- lists -------------------------------------------------------------- */

/* A growable array of elements of `size` bytes (set before the first push). */
typedef struct dk_list {
	void *v;
	size_t n, cap, size;
} dk_list;

/* Appends a zeroed element; NULL when out of memory. */
void *dk_list_push(dk_list *l);
#define DK_AT(l, type, i) (&((type *)(l)->v)[i])

/* ---- values ------------------------------------------------------------- */

/* 1 when a and b are the same bytes. */
int dk_buf_same(const dk_buf *a, const dk_buf *b);

typedef struct dk_val {
	int32_t dtype;
	int rank;
	int64_t dims[EP_MAX_RANK];
	int64_t numel;
	uint64_t nbytes;        /* on the host */
	dk_buf dev;             /* where it is on the device; ptr NULL: not there */
	const void *host;       /* its bytes on the host when known, else NULL */
	int is_const;           /* a weight: same bytes in every run */
	int ready;              /* has a value in this run */
} dk_val;

struct dk_op;
struct dk_exec;

typedef struct dk_node {
	const struct dk_op *op;
	const Onnx__NodeProto *proto;
	int64_t opset;
	int n_in, n_out;
	int *in, *out;          /* value indexes; -1 for an omitted one */
	void *state;            /* the op's: op->fini (if any), then free() */
	dk_buf keep;            /* device memory the op keeps across runs */
	int keep_fresh;         /* `keep` is filled by the run in progress */
} dk_node;

/* What an op's run gets. */
typedef struct dk_ctx {
	struct dk_exec *ex;
	dk_node *node;
	const dk_val **in;      /* n_in entries, NULL for an omitted input */
	int n_in;
	void *stream;           /* the provider's stream of the run (CUDA: cudaStream_t) */
	char *err;
	size_t errlen;
	int status;             /* the code of the last dk_fail */
} dk_ctx;

/*
 * A kernel: `supports` answers the capability query from the node alone
 * and must refuse what the op does not compute exactly; `prepare`
 * (optional) parses attributes at load into node->state; `run` is called
 * once per node per RUN, in order: it checks its inputs' shapes, gets its
 * outputs (dk_out, dk_out_alias) and queues its device work; `fini`
 * (optional) releases what state holds beyond plain memory.
 */
/* An op type and the opsets an entry serves it for. */
typedef struct dk_opname {
	const char *op_type;
	int min_opset, max_opset;
} dk_opname;

typedef struct dk_op {
	const char *op_type;
	int min_opset, max_opset;
	int (*supports)(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt, int n_in,
			char *why, size_t n);
	int (*prepare)(dk_node *node, char *err, size_t n);
	int (*run)(dk_ctx *c);
	void (*fini)(dk_node *node);
	uint32_t needs;         /* the provider's (Vulkan: the pipelines it uses) */
	/* Optional, at load once the weights are on the device: re-lays out
	 * a constant input into node->keep (`load` is the provider's loader). */
	int (*pack)(struct dk_exec *ex, dk_node *node, void *load, char *err, size_t n);
	/* Optional, instead of op_type and the opsets: one entry for a family
	 * (dk_ops.h: dk_unary_ops...), NULL-terminated. */
	const dk_opname *names;
} dk_op;

/* ---- the device --------------------------------------------------------- */

/* A host<->device transfer of a run: host is the source of an upload and
 * the destination of a download. */
typedef struct dk_xfer {
	dk_buf dev;
	void *host;
	uint64_t nbytes;        /* on the host */
	uint64_t stage_off;     /* the provider's, where it stages it */
	int f16;                /* host float16, device float32 (twice the bytes) */
} dk_xfer;

/* A device-to-device copy after the run's work: a bound device output the
 * step did not write in place (a view). */
typedef struct dk_d2d {
	dk_buf src, dst;
	uint64_t nbytes;
} dk_d2d;

typedef struct dk_dev_ops {
	/* device memory: a buffer of nbytes (EP_E_NOMEM), and back (NULL-safe:
	 * ptr NULL is none; after it b->ptr is NULL) */
	int (*alloc)(void *self, uint64_t nbytes, dk_buf *out, char *err, size_t n);
	void (*free)(void *self, dk_buf *b);
	/* the core's device buffers by id: bytes [off, +nbytes) of buffer id
	 * (EP_E_INVALID when unknown or outside); whether id exists; a run's
	 * allocation added under id (a dynamic device output) */
	int (*range)(void *self, uint64_t id, uint64_t off, uint64_t nbytes, dk_buf *out,
		     char *err, size_t n);
	int (*exists)(void *self, uint64_t id);
	int (*adopt)(void *self, uint64_t id, uint64_t nbytes, const dk_buf *b, char *err,
		     size_t n);
	/* a run: ordered after its stream's earlier work (ex->stream) */
	int (*begin)(struct dk_exec *ex, char *err, size_t n);
	/* binding b's device bytes read to dst now (ops read them on the host) */
	int (*fetch)(struct dk_exec *ex, const ep_tensor *b, void *dst, char *err, size_t n);
	/* optional: the uploads queued since the last flush go ahead of any
	 * work queued after (a device whose ops enqueue at once) */
	int (*flush)(struct dk_exec *ex, char *err, size_t n);
	/* everything queued (uploads, the ops' work, d2d, downloads) done and
	 * the downloads in host memory; !ok (the run failed before): only
	 * what was already enqueued is waited for */
	int (*submit)(struct dk_exec *ex, int ok, char *err, size_t n);
	/* optional: the run is over (ok or not): its staging back */
	void (*end)(struct dk_exec *ex, int ok);
	/* load: the op of a node, or NULL; optional per-node setup (Vulkan's
	 * pipelines); the weights whose dtype lives on the device into
	 * ex->own[value] (consts are filled before); optional unload wait */
	const dk_op *(*find_op)(const char *op_type, const char *domain, int64_t opset);
	int (*load_node)(struct dk_exec *ex, dk_node *node, char *err, size_t n);
	int (*load_weights)(struct dk_exec *ex, char *err, size_t n);
	void (*unload)(struct dk_exec *ex);
} dk_dev_ops;

typedef struct dk_device {
	int ok;                 /* a device is open */
	char why[256];          /* else why not */
	const dk_dev_ops *ops;
	void *self;             /* the provider (vk_ep, cuda_ep) */
	const char *name;       /* "Vulkan", "CUDA" */
	int f16_as_f32;         /* float16 is float32 in device memory */
	int64_t max_elems;      /* a tensor's largest element count */
	size_t work_size;       /* element size of ex->work (Vulkan: dispatches) */
	size_t held_size;       /* element size of ex->held (CUDA: staging) */
	uint64_t (*mem_in_use)(void *self);
} dk_device;

/* ---- the executor -------------------------------------------------------- */

/* What the executor knows of a loaded subgraph's values, whatever the
 * device: which node produces each and in what order, and in a RUN which
 * binding each has. */
typedef struct dk_wiring {
	const ep_subgraph *sg;
	int *producer;          /* per value: the node producing it, or -1 */
	int *order;             /* the values the step produces, in production order */
	size_t n_order;
	int *bound;             /* per value, in a RUN: its binding's index, or -1 */
} dk_wiring;

/* A buffer a run allocated for a dynamic device output: adopted under its
 * id when the run succeeds, freed when it fails. */
typedef struct dk_dynbuf {
	uint64_t id, nbytes;
	dk_buf b;
} dk_dynbuf;

typedef struct dk_exec {
	const dk_device *dev;
	const ep_subgraph *sg;
	size_t n_values, n_nodes;
	dk_node *nodes;
	dk_val *consts;         /* per value: weights, ready */
	dk_buf *own;            /* per value: device memory it owns across runs */
	dk_wiring w;
	/* per run */
	ep_run *run;
	dk_val *vals;
	const dk_val **in;      /* scratch for a node's inputs */
	dk_list up, down;       /* dk_xfer */
	size_t up_flushed;      /* uploads the provider's flush has taken */
	dk_list d2d;            /* dk_d2d */
	dk_list temps;          /* dk_buf: device memory of this run only */
	dk_list htemps;         /* void *: host copies of this run */
	dk_list dynbufs;        /* dk_dynbuf */
	dk_list work;           /* the provider's work items (Vulkan: dispatches) */
	dk_list held;           /* the provider's, held until the run ends */
	void *stream;           /* the provider's handle of the run's stream */
	void *wait;             /* the provider's: what the run waits for first */
	uint64_t wait_value;
} dk_exec;

/* ep_vtable.load / run / unload of a device provider. */
int dk_exec_load(const dk_device *dev, ep_subgraph *sg, char *err, size_t n);
int dk_exec_run(ep_subgraph *sg, ep_run *r, char *err, size_t n);
void dk_exec_unload(ep_subgraph *sg);

/* ep_vtable.supported: a device is open (dev->ok), the op is in the table
 * and every input dtype known, then the op's supports(). */
int dk_supported(const dk_device *dev, const Onnx__NodeProto *node, int64_t opset,
		 const int32_t *in_dtypes, int n_in, char *why, size_t n);
/* "no Vulkan device (why)" into err: EP_E_UNSUPPORTED. */
int dk_unavailable(const dk_device *dev, char *err, size_t n);

/* The op of one of the n NULL-terminated tables (ai.onnx only) for this
 * op_type and opset, or NULL: a provider's find_op. */
const dk_op *dk_op_in(const dk_op *const *tables, size_t n, const char *op_type,
		      const char *domain, int64_t opset);

/* ---- what an op's run calls (dk_ctx.c) ------------------------------------ */

/* Input i, or NULL when omitted. */
const dk_val *dk_in(const dk_ctx *c, int i);
/* Output i as a new device tensor of this dtype and shape (checked against
 * the core's plan when it planned one; a binding to a device buffer is
 * written in place); NULL with the error set and its code in c->status. */
const dk_val *dk_out(dk_ctx *c, int i, int32_t dtype, int rank, const int64_t *dims);
/* Output i as a view of `src` with another shape (same element count). */
int dk_out_alias(dk_ctx *c, int i, const dk_val *src, int rank, const int64_t *dims);
/* Device scratch memory for this run only. */
int dk_temp(dk_ctx *c, uint64_t nbytes, dk_buf *out);
/* A device copy of host bytes for this run only / kept in node->keep for
 * every later run (data derived from weights: uploaded the first time). */
int dk_upload_temp(dk_ctx *c, const void *data, uint64_t nbytes, dk_buf *out);
int dk_upload_keep(dk_ctx *c, const void *data, uint64_t nbytes, dk_buf *out);
/* Reads element i of an int32/int64 host tensor. */
int64_t dk_get_int(const dk_val *v, int64_t i);
/* "node 'name' (Op): " + the message, sets c->status; returns `code`. */
int dk_fail(dk_ctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- inside the kit (dk_load.c, dk_run.c, dk_ctx.c) ------------------------ */

int dk_wiring_init(dk_wiring *w, const ep_subgraph *sg);
void dk_wiring_fini(dk_wiring *w);
void dk_wiring_reset(dk_wiring *w);
/* "node 'name' (Op): " + the message into err; returns code. */
int dk_node_vfail(char *err, size_t n, const Onnx__NodeProto *p, int code, const char *fmt,
		  va_list ap);
/* The device buffer a device-bound output binding b gets for a value of
 * this shape: its range of buffer_id, or for a dynamic binding a new
 * allocation (dims and nbytes set in b) kept in ex->dynbufs. */
int dk_device_output(dk_exec *ex, ep_tensor *b, int rank, const int64_t *dims, uint64_t nbytes,
		     dk_buf *out, char *err, size_t n);
/* Bytes a tensor of this dtype and count takes in device memory. */
uint64_t dk_dev_bytes(const dk_exec *ex, int32_t dtype, int64_t numel);
/* Queues an upload of host bytes (copied now) to dst. */
int dk_queue_upload(dk_exec *ex, const void *data, uint64_t nbytes, const dk_buf *dst, char *err,
		    size_t n);

#endif
