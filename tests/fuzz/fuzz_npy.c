/*
 * fuzz_npy: the .npy reader ort-run feeds inputs with (tools/common/npy.c),
 * on the input as a file.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[256];
	npy_array a;
	int fd = fuzz_memfd(data, size);

	if (fd < 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (npy_read(path, &a, err, sizeof(err)) == 0)
		free(a.data);
	close(fd);
	return 0;
}
