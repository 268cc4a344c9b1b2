/*
 * ep_host: the process side shared by every execution provider.  It owns
 * the message loop (handshake, segments, files, capability queries, loads,
 * runs, release, shutdown), maps shared memory and external-data files, and
 * validates what the core asks before a provider sees it.  A provider is one
 * ep_vtable (ggml-backend style): ort-ep-cpu, ort-ep-vulkan and ort-ep-cuda
 * each fill the table and call ep_host_main().
 */
#ifndef ORTMK_EP_HOST_H
#define ORTMK_EP_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"
#include "ortmk_ipc.pb-c.h"

#define EP_MAX_RANK 16

/* A constant input, already mapped: inline weights point into a shm
 * segment, external ones into a read-only mapping of their file. */
typedef struct ep_weight {
	uint32_t value;
	int32_t dtype;
	int rank;
	int64_t dims[EP_MAX_RANK];
	const void *data;
	uint64_t nbytes;
	int fd;                 /* external: the file (not owned), else -1 */
	uint64_t file_offset;
} ep_weight;

typedef struct ep_value {
	const char *name;
	int32_t dtype;
} ep_value;

typedef struct ep_subgraph {
	uint32_t id;
	Onnx__GraphProto *graph;        /* nodes to run, in order */
	const Ortmk__LoadSubgraph *msg; /* opsets and the rest, as received */
	ep_value *values;
	size_t n_values;
	ep_weight *weights;
	size_t n_weights;
	int threads;
	/* pre-pack cache files (-1 when none): read in place / write fresh */
	int prepack_in_fd, prepack_out_fd;
	uint64_t prepack_in_size;
	/* filled by load */
	unsigned prepack_hits, prepack_misses;
	uint64_t prepack_ns;
	int prepack_written;
	void *impl;                     /* the provider's compiled form */
	/* host-private */
	void *priv;
} ep_subgraph;

int64_t ep_subgraph_opset(const ep_subgraph *sg, const char *domain);

/* A tensor bound for one run.  `dynamic` ones have no data yet: the
 * provider sets dims and data (from ep_run_dyn_alloc) before returning. */
typedef struct ep_tensor {
	uint32_t value;
	int32_t dtype;
	int rank;
	int64_t dims[EP_MAX_RANK];
	void *data;
	uint64_t nbytes;
	int dynamic;
	int kind;               /* Ortmk__ValueKind: tensor, sequence, none */
} ep_tensor;

typedef struct ep_run {
	uint64_t run_id;
	ep_tensor *bindings;
	size_t n_bindings;
	uint8_t *dyn_base;
	uint64_t dyn_size, dyn_used;
	uint64_t dyn_needed;    /* bytes the dynamic outputs needed in all */
} ep_run;

/* 64-byte aligned space in the run's dynamic region; NULL when it does not
 * fit (dyn_needed still grows, so the core can retry with enough). */
void *ep_run_dyn_alloc(ep_run *r, uint64_t nbytes);

/* Errors a provider returns: negative, with a message. */
enum ep_status {
	EP_OK = 0,
	EP_E_INVALID = -1,
	EP_E_UNSUPPORTED = -2,
	EP_E_SHAPE = -3,
	EP_E_NOMEM = -4,
	EP_E_INTERNAL = -5,
	EP_E_DYN_OVERFLOW = -6,
};

typedef struct ep_vtable {
	const char *name;        /* "cpu" */
	/* Once at start; writes a description (ISA, device) into detail. */
	int (*init)(void **self, char *detail, size_t n);
	/* 1 when the provider runs this node, else 0 with the reason. */
	int (*supported)(void *self, const Onnx__NodeProto *node, int64_t opset,
			 const int32_t *in_dtypes, int n_in, char *why, size_t n);
	int (*load)(void *self, ep_subgraph *sg, char *err, size_t n);
	int (*run)(void *self, ep_subgraph *sg, ep_run *run, char *err, size_t n);
	void (*unload)(void *self, ep_subgraph *sg);
	void (*fini)(void *self);
} ep_vtable;

/* The provider process's main(): handshake with the core named in the
 * environment (ORTMK_EP_URL, ORTMK_EP_FD), then serve until SHUTDOWN or the
 * core goes away.  Returns the process exit status. */
int ep_host_main(const ep_vtable *vt, int argc, char **argv);

#endif
