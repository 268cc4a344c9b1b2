/*
 * fuzz_value_codec: the blobs string tensors, sequences and maps travel
 * in (ipc/value_codec.c).  The first 4 bytes are the string count a reader
 * would expect; the rest is the blob, checked as strings, as a sequence
 * and (copied to aligned memory, as shared memory is) as a map.
 */
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "value_codec.h"

/* A map the checker accepted: every key and value byte it points at. */
static void touch_map(const ipc_map_view *v)
{
	volatile uint8_t sum = 0;
	const uint8_t *k = v->keys, *x = v->values;

	for (uint64_t i = 0; i < v->keys_nbytes; i++)
		sum += k[i];
	for (uint64_t i = 0; i < v->count * ipc_dtype_size(v->value_dtype); i++)
		sum += x[i];
	(void)sum;
}

static void check_map(const uint8_t *data, size_t size)
{
	uint8_t *copy = aligned_alloc(64, (size + 63) & ~(size_t)63);
	ipc_map_view v;

	if (!copy)
		return;
	memcpy(copy, data, size);
	if (ipc_map_check(copy, size, &v) == 0)
		touch_map(&v);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const ipc_seq_entry *entries;
	const char **strs;
	uint32_t n = 0, count;

	if (size < 4)
		return 0;
	memcpy(&n, data, 4);
	n %= 4096;
	data += 4;
	size -= 4;
	strs = calloc(n + 1, sizeof(*strs));
	if (strs && ipc_strings_decode(data, size, n, strs) == 0)
		for (uint32_t i = 0; i < n; i++)
			(void)strlen(strs[i]);
	free(strs);
	if (ipc_seq_check(data, size, &count, &entries) == 0)
		for (uint32_t i = 0; i < count; i++)
			(void)ipc_numel(entries[i].rank, entries[i].dims);
	check_map(data, size);
	return 0;
}
