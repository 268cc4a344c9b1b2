/*
 * fuzz_prepack: the pre-pack cache reader (onnxrules/prepack_file.c) on the
 * input as a cache file, then a lookup of a key a provider would ask for.
 */
#define ORTMK_FUZZ_PACK
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pack_ident id = fuzz_pack_ident();
	pack_entry want = fuzz_pack_entry();
	const void *blob;
	pack_file *f;
	int fd = fuzz_memfd(data, size);

	if (fd < 0)
		return 0;
	f = pack_file_open(&id, fd, size);
	if (f && pack_file_lookup(f, &want, &blob) == PACK_HIT)
		(void)((const volatile uint8_t *)blob)[want.size - 1];
	pack_file_close(f);
	close(fd);
	return 0;
}
