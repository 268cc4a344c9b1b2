/*
 * run internals shared by run.c (plans, steps, RUN/RESULT) and
 * run_device.c (device inputs and outputs of a run: staging through the
 * host, outputs written in place into bound values or device buffers,
 * copies after the run).  Not public.
 */
#ifndef ORTMK_RUN_H
#define ORTMK_RUN_H

#include "core.h"

/* Where a value is for this run.  A device value (dev) is read in place by
 * steps on its provider; seg, when also set, is its host copy for steps
 * elsewhere.  dyn_buffer: an output the provider allocates on its device. */
typedef struct loc {
	shm_segment *seg;
	uint64_t offset, nbytes;
	int kind;                 /* ortmk_value_kind */
	int32_t dtype;
	int rank;
	const int64_t *dims;
	int64_t dyn_dims[GRAPH_MAX_RANK];
	ortmk_value *dev;
	int own_dev;              /* dev was made by this run (free on failure) */
	uint64_t dyn_buffer;
	core_ep *dyn_ep;
	ortmk_value *host_out;    /* a new host output computed in place */
} loc;

typedef struct run_ctx {
	ortmk_session *s;
	core_plan *plan;
	loc *locs;
	uint64_t dyn_used;
	Ortmk__TensorRef *refs;
	Ortmk__TensorRef **prefs;
	size_t n_refs;            /* bindings of the step in flight */
	core_out *outs;
	size_t n_out;
	ortmk_stream *stream;
	ortmk_value **staged;     /* per graph input: its host copy, or NULL */
	ortmk_run_options *ro;    /* NULL: not cancellable, no tag */
	core_slot *slot;          /* the run's arena and dynamic region */
	uint64_t run_id;          /* of the RUN in flight */
	unsigned mask;            /* the providers it touches (env index bits) */
	int exclusive;            /* their locks held across the whole run */
	const uint64_t *in_off;   /* per graph input: where its data starts in its
				   * segment (a chunk's rows); NULL: at 0 */
} run_ctx;

void core_run_set_loc(loc *l, shm_segment *seg, uint64_t off, uint64_t nbytes, int kind,
		      int32_t dtype, int rank, const int64_t *dims);
/* Graph inputs held on a device: in place for steps on that provider,
 * copied to the host (once) when a step elsewhere reads them. */
ortmk_status core_run_device_inputs(run_ctx *c, const ortmk_value **bound);
/* Outputs written in place: into a bound host value when planned with its
 * shape, into a device buffer when every step naming them runs there. */
ortmk_status core_run_bind_outputs(run_ctx *c);
/* Fills r when value v is on a device for step `step`: 1, else 0. */
int core_run_device_ref(run_ctx *c, size_t step, int v, Ortmk__TensorRef *r);
/* A RESULT output in a device buffer. */
ortmk_status core_run_take_buffer(run_ctx *c, size_t step, int v, const Ortmk__TensorRef *t);
/* After the steps: every output to where it was bound. */
ortmk_status core_run_finish_outputs(run_ctx *c);
/* Frees what the run made and did not hand out. */
void core_run_device_cleanup(run_ctx *c);

#endif
