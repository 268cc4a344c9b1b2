/*
 * envelope: decoding and validation of every message that crosses the
 * process boundary.  Nothing else in ortmk looks at a received message
 * before ipc_envelope_decode() has accepted it: version, kind, body case,
 * sizes, dims, and (given a segment table) that every tensor reference, copy
 * range and fence lies inside a mapped segment.  Device-buffer ranges are
 * only bounded here; the provider checks them against its buffers.  A provider is not trusted; neither is the core,
 * from the provider's side.
 */
#ifndef ORTMK_ENVELOPE_H
#define ORTMK_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#include "ortmk_ipc.pb-c.h"
#include "shm.h"

#define IPC_PROTOCOL_VERSION 2u
#define IPC_MAX_MESSAGE (256u << 20)  /* the largest message accepted */
#define IPC_MAX_RANK 16
#define IPC_MAX_DEVICE_BYTES (UINT64_C(1) << 44)  /* one device buffer at most */
#define IPC_MAX_COPY_OPS 65536
#define IPC_MAX_SPANS 4096                /* RESULT's node spans (Run.profile) */
#define IPC_FENCE_ALIGN 16                /* FenceRef.offset alignment */

/* Segments one side has mapped, by id (the validator's view of memory).
 * The table holds copies of the descriptors (base, size, fd, id): whoever
 * owns a mapping keeps it alive while it is in a table, and a pointer from
 * find() is valid until the next add or remove. */
typedef struct ipc_segtab {
	shm_segment *segs;
	size_t n, cap;
} ipc_segtab;

int ipc_segtab_add(ipc_segtab *t, const shm_segment *s);
shm_segment *ipc_segtab_find(const ipc_segtab *t, uint64_t id);
/* Removes the entry with this id, copying it to *out (may be NULL);
 * 1 if it was there.  Nothing is unmapped. */
int ipc_segtab_remove(ipc_segtab *t, uint64_t id, shm_segment *out);
void ipc_segtab_fini(ipc_segtab *t);

const char *ipc_kind_name(int kind);

/* Unpacks and validates.  0 on success (free with ipc_envelope_free);
 * -EPROTO with a one-line reason otherwise.  `segs` may be NULL (then
 * tensor references are only checked for internal consistency). */
int ipc_envelope_decode(const void *buf, size_t n, const ipc_segtab *segs,
			Ortmk__Envelope **out, char *err, size_t errlen);
/* The structural checks alone, on an unpacked envelope. */
int ipc_envelope_check(const Ortmk__Envelope *e, const ipc_segtab *segs,
		       char *err, size_t errlen);
void ipc_envelope_free(Ortmk__Envelope *e);

/* Checks one tensor reference: rank, non-negative dims, nbytes equal to
 * numel × element size (when the dtype has a fixed size), and the byte range
 * inside its segment.  Dynamic references only need their region checked
 * later, when resolved. */
int ipc_tensor_ref_check(const Ortmk__TensorRef *t, const ipc_segtab *segs,
			 char *err, size_t errlen);
size_t ipc_dtype_size(int32_t dtype);
/* A fence word: 16-byte aligned, inside a known segment (when segs is
 * given), value neither 0 nor carrying the failed bit. */
int ipc_fence_ref_check(const Ortmk__FenceRef *f, const ipc_segtab *segs,
			char *err, size_t errlen);

#endif
