/* ort-serve: the HTTP/1.1 request head parser (serve_hparse.c), on its own
 * so that the fuzz target (tests/fuzz/fuzz_http_head.c) links it without
 * the rest of the server.  Used by serve_conn.c. */
#ifndef ORT_SERVE_HPARSE_H
#define ORT_SERVE_HPARSE_H

#include <stddef.h>
#include <stdint.h>

#define SRV_HEAD_MAX 16384        /* request line and header fields, bytes */
#define SRV_HEADERS_MAX 64        /* header fields */
#define SRV_URI_MAX 4096          /* request target, bytes */

typedef struct srv_hhead {
	char method[16];
	char uri[SRV_URI_MAX];
	int minor;                /* HTTP/1.minor */
	int64_t content_length;   /* -1: none */
	int64_t infer_hlen;       /* Inference-Header-Content-Length; -1: none */
	int keep_alive;           /* the connection stays open after the answer */
	int expect_continue;      /* Expect: 100-continue */
	int has_host;
	int conn_close, conn_keep;
	int n_fields;
	size_t head_len;          /* bytes of the head, its empty line included */
	const char *err;          /* why, when refused */
} srv_hhead;

/* Parses the request head at the start of buf[0..len).  Returns its length
 * (> 0) when it is complete and accepted, 0 when more bytes are needed, or
 * -status (400, 414, 417, 431, 501, 505) with h->err saying why. */
int srv_hparse(const char *buf, size_t len, srv_hhead *h);

#endif
