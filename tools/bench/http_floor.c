/* http-floor: the floors under ort-serve's per-request cost
 * (docs/SERVING.md, "Measured"), each an HTTP server that answers every
 * request with a fixed 200 and does nothing else:
 *   http-floor epoll PORT   the least a keep-alive HTTP/1.1 server does: one
 *                           thread, epoll, read the head, skip the body
 *                           (Content-Length), write the answer
 *   http-floor nng PORT     nng's HTTP server with a handler that answers at
 *                           once (what ort-serve was built on before)
 * tools/bench/serve_bench.py --floors runs wrk against both, interleaved
 * with ort-serve.  Listens on 127.0.0.1; runs until killed.  Not a server
 * for anything else: no limits, no error handling beyond closing. */
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			     "Content-Length: 13\r\n\r\n{\"live\":true}";

typedef struct conn {
	int fd;
	char buf[65536];
	size_t len;
	size_t skip;              /* body bytes still to discard */
} conn;

/* Answers every complete request in c->buf; -1 when the peer is gone. */
static int serve_buf(conn *c)
{
	for (;;) {
		if (c->skip) {
			size_t k = c->skip < c->len ? c->skip : c->len;
			memmove(c->buf, c->buf + k, c->len - k);
			c->len -= k;
			c->skip -= k;
			if (c->skip)
				return 0;
		}
		c->buf[c->len] = '\0';
		char *end = strstr(c->buf, "\r\n\r\n");
		if (!end)
			return c->len == sizeof(c->buf) - 1 ? -1 : 0;
		*end = '\0';
		char *cl = strcasestr(c->buf, "\r\nContent-Length:");
		size_t head = (size_t)(end + 4 - c->buf);
		c->skip = head + (cl ? strtoull(cl + 17, NULL, 10) : 0);
		if (write(c->fd, answer, sizeof(answer) - 1) != (ssize_t)sizeof(answer) - 1)
			return -1;
	}
}

static int epoll_floor(int port)
{
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), ep = epoll_create1(0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 128))
		return perror("http-floor"), 1;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	for (;;) {
		if (epoll_wait(ep, &ev, 1, -1) != 1)
			continue;
		conn *c = ev.data.ptr;
		if (!c) {
			int fd = accept(lfd, NULL, NULL);
			if (fd < 0 || !(c = calloc(1, sizeof(*c))))
				continue;
			c->fd = fd;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			struct epoll_event cev = { .events = EPOLLIN, .data.ptr = c };
			epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
			continue;
		}
		ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
		if (r > 0)
			c->len += (size_t)r;
		if (r <= 0 || serve_buf(c) < 0) {
			close(c->fd);
			free(c);
		}
	}
}

static void nng_answer(nng_aio *aio)
{
	nng_http_res *res;
	if (nng_http_res_alloc(&res) != 0) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	nng_http_res_set_header(res, "Content-Type", "application/json");
	nng_http_res_copy_data(res, "{\"live\":true}", 13);
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

static int nng_floor(int port)
{
	char url[64];
	nng_url *u;
	nng_http_server *s;
	nng_http_handler *h;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	if (nng_url_parse(&u, url) || nng_http_server_hold(&s, u) ||
	    nng_http_handler_alloc(&h, "/", nng_answer) || nng_http_handler_set_method(h, NULL) ||
	    nng_http_handler_set_tree(h) || nng_http_handler_collect_body(h, true, 1 << 26) ||
	    nng_http_server_add_handler(s, h) || nng_http_server_start(s))
		return fprintf(stderr, "http-floor: nng cannot serve %s\n", url), 1;
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "epoll") && strcmp(argv[1], "nng")))
		return fprintf(stderr, "usage: http-floor epoll|nng PORT\n"), 2;
	int port = atoi(argv[2]);
	return !strcmp(argv[1], "epoll") ? epoll_floor(port) : nng_floor(port);
}
