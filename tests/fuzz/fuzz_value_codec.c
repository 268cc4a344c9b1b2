/*
 * fuzz_value_codec: the blobs string tensors and sequences travel in
 * (ipc/value_codec.c).  The first 4 bytes are the string count a reader
 * would expect; the rest is the blob, checked as strings and as a
 * sequence.
 */
#include <stdlib.h>
#include <string.h>

#include "value_codec.h"

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
	return 0;
}
