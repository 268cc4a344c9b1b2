/*
 * fuzz_envelope: the IPC choke point's decoder and every message validator
 * (ipc_envelope_decode: unpack + ipc_envelope_check), both directions, with
 * a segment table holding two segments so tensor references are checked
 * against real bounds.
 */
#include <stdlib.h>
#include <string.h>

#include "envelope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t seg_a[4096], seg_b[65536];
	static ipc_segtab segs;
	static int ready;
	Ortmk__Envelope *e = NULL;
	char err[256];

	if (!ready) {
		shm_segment a = {.base = seg_a, .size = sizeof(seg_a), .id = 1, .fd = -1};
		shm_segment b = {.base = seg_b, .size = sizeof(seg_b), .id = 2, .fd = -1};

		ipc_segtab_add(&segs, &a);
		ipc_segtab_add(&segs, &b);
		ready = 1;
	}
	if (ipc_envelope_decode(data, size, &segs, &e, err, sizeof(err)) == 0)
		ipc_envelope_free(e);
	if (ipc_envelope_decode(data, size, NULL, &e, err, sizeof(err)) == 0)
		ipc_envelope_free(e);
	return 0;
}
