/*
 * trace_record: the message records of the tap (trace.c).  What a record
 * says of a message's body: the tensors it names (RUN bindings, RESULT
 * outputs, LOAD_SUBGRAPH weights), the value table of a LOAD_SUBGRAPH,
 * ERROR's status and message, a one-line note for the control messages;
 * and a direct encoder for the record, the tap's hot path.  Internal to
 * ipc/trace*.c.
 */
#ifndef ORTMK_TRACE_RECORD_H
#define ORTMK_TRACE_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "ortmk_ipc.pb-c.h"
#include "ortmk_trace.pb-c.h"

#define IPC_TRACE_MAX_TENSORS 256       /* per record; the rest are counted */
#define IPC_TRACE_MAX_VALUE_NAMES 65536
#define IPC_TRACE_STACK_TENSORS 16

/* What a record points into while it is packed: tensors on the stack for
 * small messages, on the heap beyond. */
typedef struct ipc_trace_scratch {
	Ortmk__Trace__Tensor st[IPC_TRACE_STACK_TENSORS], *t;
	Ortmk__Trace__Tensor *sp[IPC_TRACE_STACK_TENSORS], **p;
	Ortmk__Trace__Fence fence, *pfence;   /* COPY's signal */
	char note[256];
} ipc_trace_scratch;

/* Fills m's summary fields from e (which m then points into). */
void ipc_trace_summarize(ipc_trace_scratch *s, Ortmk__Trace__Message *m, const Ortmk__Envelope *e);
/* Frees what ipc_trace_summarize allocated, once m is written. */
void ipc_trace_scratch_free(ipc_trace_scratch *s, Ortmk__Trace__Message *m);

/* Serializes m exactly as protobuf-c would (same bytes), into buf: the
 * length, or 0 when cap is too small (then use protobuf-c).  protobuf-c's
 * reflective packer sizes every nested message twice and costs ~20k
 * instructions for a 13-tensor RUN; this is the same record in far fewer. */
size_t ipc_trace_encode_message(const Ortmk__Trace__Message *m, uint8_t *buf, size_t cap);

#endif
