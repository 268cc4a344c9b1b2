/*
 * fuzz_http_head: ort-serve's HTTP/1.1 request head parser
 * (tools/ort-serve/serve_hparse.c), the first code that reads what a client
 * sends.  Every prefix of the input is parsed too, as the server calls the
 * parser again each time more bytes arrive; a head it accepts must lie
 * inside the input and carry the fields the server relies on.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve_hparse.h"

static void parse(const char *p, size_t n)
{
	srv_hhead h;
	int rc = srv_hparse(p, n, &h);
	if (rc > 0 && ((size_t)rc > n || (size_t)rc != h.head_len || !h.method[0] ||
		       !h.uri[0] || strlen(h.uri) >= SRV_URI_MAX || h.minor > 9))
		abort();
	if (rc < 0 && !h.err)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a copy of exactly size bytes, so reads past the end are caught */
	char *p = malloc(size ? size : 1);
	if (!p)
		return 0;
	memcpy(p, data, size);
	for (size_t n = size > 64 ? size - 64 : 0; n <= size; n++)
		parse(p, n);
	free(p);
	return 0;
}
