/* ort-serve: its own HTTP/1.1 server (keep-alive, Content-Length bodies,
 * no pipelining needed), in place of nng's: nng's HTTP server alone cost
 * about 114 us of wrk p50 per request on the 2-core VM, over twice the
 * issue's 50 us budget for the whole server (docs/SERVING.md, "Measured").
 *
 * Shape: a few I/O threads wait on one epoll set; every connection is armed
 * EPOLLONESHOT, so one thread at a time owns it.  The owner reads until a
 * request is complete (serve_hparse.c parses the head), then calls
 * srv_handle (serve_http.c) on its own thread: health, metadata and
 * repository requests are answered there; an infer request goes to its
 * model's queue and the connection travels with the job, so the worker that
 * ran it writes the answer straight to the socket (no hand-back to an I/O
 * thread, no extra wakeup) and re-arms the connection for the next request.
 * An answer the socket cannot take at once is finished by the I/O threads
 * (EPOLLOUT).
 *
 * Limits: --max-connections (past it a new connection is answered 503 and
 * closed), the idle keep-alive timeout and the header timeout (slowloris),
 * enforced by srv_conn_sweep, which the main thread calls a few times a
 * second: it only shuts sockets down (after a best-effort 408 when a
 * request was under way); the owner sees the EOF and closes.  A client
 * that left while its request waits is seen by srv_conn_gone (a peeking
 * read: EOF or an error), which --drop-disconnected uses.
 * Called by serve_main.c (start, sweep, stop) and serve_http.c (answers). */
#include "serve.h"
#include "serve_hparse.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_IO_THREADS 64
#define IN_FIRST 4096             /* first read buffer of a connection */
#define IN_KEEP (64 << 10)        /* a bigger one is freed between requests */

/* PH_LINGER: answered with Connection: close, our side shut down; what the
 * client still sends is read and dropped until its EOF (or the header
 * timeout), so that closing with unread bytes does not reset the
 * connection before the client reads the answer (a 413 sent while the body
 * still comes, say). */
enum phase { PH_IDLE, PH_HEAD, PH_BODY, PH_BUSY, PH_WRITE, PH_LINGER };

struct srv_conn {
	int fd;
	int slot;                 /* in io.tab */
	int phase;                /* enum phase, atomic: the sweeper reads it */
	int64_t mark_ms;          /* atomic: idle since / head since / last body byte */
	char *in;
	size_t in_len, in_cap;
	size_t req_len;           /* head + body of the request in hand */
	srv_hhead head;
	srv_hreq req;
	int close_after;          /* close once the answer is out */
	int continued;            /* 100 Continue sent */
	char *out;                /* what the socket did not take at once */
	size_t out_len, out_off;
};

static struct {
	int ep, lfd, evfd;
	int listen_paused;        /* accept failed (EMFILE): the sweeper re-arms */
	pthread_t thr[MAX_IO_THREADS];
	int n_thr;
	pthread_mutex_t mu;       /* the table, the stop flag, releases of busy conns */
	srv_conn **tab;
	int *free_slots, n_free;
	int stopping;
	unsigned long refused;
} io = { .ep = -1, .lfd = -1, .evfd = -1, .mu = PTHREAD_MUTEX_INITIALIZER };

static int lfd_tag, evfd_tag;     /* epoll data of the listener and the wake fd */

static int64_t now_ms(void)
{
	return (int64_t)(srv_now() * 1e3);
}

static void set_phase(srv_conn *c, int ph)
{
	__atomic_store_n(&c->phase, ph, __ATOMIC_RELEASE);
	__atomic_store_n(&c->mark_ms, now_ms(), __ATOMIC_RELEASE);
}

static void arm(int fd, void *tag, uint32_t events)
{
	struct epoll_event ev = { .events = events | EPOLLONESHOT, .data.ptr = tag };
	epoll_ctl(io.ep, EPOLL_CTL_MOD, fd, &ev);
}

/* Closes and frees c; the caller holds io.mu. */
static void close_locked(srv_conn *c)
{
	io.tab[c->slot] = NULL;
	io.free_slots[io.n_free++] = c->slot;
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c);
}

static void conn_close(srv_conn *c)
{
	pthread_mutex_lock(&io.mu);
	close_locked(c);
	pthread_mutex_unlock(&io.mu);
}

static const char *reason(int status)
{
	static const struct { int s; const char *r; } t[] = {
		{ 200, "OK" }, { 400, "Bad Request" }, { 404, "Not Found" },
		{ 405, "Method Not Allowed" }, { 408, "Request Timeout" },
		{ 413, "Content Too Large" }, { 414, "URI Too Long" },
		{ 417, "Expectation Failed" }, { 431, "Request Header Fields Too Large" },
		{ 500, "Internal Server Error" }, { 501, "Not Implemented" },
		{ 503, "Service Unavailable" }, { 505, "HTTP Version Not Supported" },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].s == status)
			return t[i].r;
	return "Unknown";
}

/* A complete answer with its own error body, for refusals made before a
 * request reaches serve_http.c (and for the sweeper's 408). */
static int error_text(char *buf, size_t cap, int status, const char *msg)
{
	char body[300];
	int n = snprintf(body, sizeof(body), "{\"error\":\"%s\"}", msg);
	return snprintf(buf, cap, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
			"Content-Length: %d\r\nConnection: close\r\n\r\n%s", status, reason(status),
			n, body);
}

/* The request is answered: the connection goes back to reading, or is
 * closed.  Called by its owner (an I/O thread or the worker). */
static void after_answer(srv_conn *c)
{
	if (c->close_after) {
		shutdown(c->fd, SHUT_WR);
		pthread_mutex_lock(&io.mu);
		if (io.stopping) {
			close_locked(c);
		} else {
			set_phase(c, PH_LINGER);
			arm(c->fd, c, EPOLLIN | EPOLLRDHUP);
		}
		pthread_mutex_unlock(&io.mu);
		return;
	}
	c->in_len -= c->req_len;
	memmove(c->in, c->in + c->req_len, c->in_len);
	c->req_len = 0;
	c->continued = 0;
	if (c->in_cap > IN_KEEP && c->in_len <= IN_FIRST) {
		char *p = malloc(IN_FIRST);
		if (p) {
			memcpy(p, c->in, c->in_len);
			free(c->in);
			c->in = p;
			c->in_cap = IN_FIRST;
		}
	}
	pthread_mutex_lock(&io.mu);
	if (io.stopping) {
		close_locked(c);
	} else {
		set_phase(c, c->in_len ? PH_HEAD : PH_IDLE);
		/* bytes already here (a pipelined request): EPOLLOUT fires at once */
		arm(c->fd, c, EPOLLIN | EPOLLRDHUP | (c->in_len ? EPOLLOUT : 0));
	}
	pthread_mutex_unlock(&io.mu);
}

/* Writes iov (n parts) without blocking; what the socket does not take is
 * kept and finished by the I/O threads. */
static void send_answer(srv_conn *c, struct iovec *iov, int n)
{
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	ssize_t w;
	do
		w = writev(c->fd, iov, n);
	while (w < 0 && errno == EINTR);
	if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
		conn_close(c);
		return;
	}
	size_t done = w < 0 ? 0 : (size_t)w;
	if (done == total) {
		after_answer(c);
		return;
	}
	if (!(c->out = malloc(total - done))) {
		conn_close(c);
		return;
	}
	c->out_len = 0;
	c->out_off = 0;
	for (int i = 0; i < n; i++) {
		size_t skip = done < iov[i].iov_len ? done : iov[i].iov_len;
		done -= skip;
		memcpy(c->out + c->out_len, (char *)iov[i].iov_base + skip, iov[i].iov_len - skip);
		c->out_len += iov[i].iov_len - skip;
	}
	pthread_mutex_lock(&io.mu);
	if (io.stopping) {
		close_locked(c);
	} else {
		set_phase(c, PH_WRITE);
		arm(c->fd, c, EPOLLOUT);
	}
	pthread_mutex_unlock(&io.mu);
}

void srv_conn_answer(srv_conn *c, int status, const char *ctype, size_t infer_hlen,
		     const void *a, size_t na, const void *b, size_t nb)
{
	char head[512], hl[64] = "";
	if (!c->head.keep_alive || srv_draining())
		c->close_after = 1;
	if (infer_hlen != SIZE_MAX)
		snprintf(hl, sizeof(hl), "Inference-Header-Content-Length: %zu\r\n", infer_hlen);
	int n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
			 "Content-Length: %zu\r\n%s%s\r\n", status, reason(status), ctype, na + nb,
			 hl, c->close_after ? "Connection: close\r\n" : "");
	int head_only = strcmp(c->head.method, "HEAD") == 0;
	struct iovec iov[3] = { { head, (size_t)n }, { (void *)a, head_only ? 0 : na },
				{ (void *)b, head_only ? 0 : nb } };
	send_answer(c, iov, 3);
}

/* A refusal before the request reaches serve_http.c: status, then close. */
static void refuse(srv_conn *c, int status, const char *msg)
{
	char buf[600];
	int n = error_text(buf, sizeof(buf), status, msg);
	if (srv_cfg.access_log)
		fprintf(stderr, "ort-serve: %s %s %d: %s\n", c->head.method[0] ? c->head.method : "-",
			c->head.uri[0] ? c->head.uri : "-", status, msg);
	c->close_after = 1;
	set_phase(c, PH_BUSY);
	struct iovec iov = { buf, (size_t)n };
	send_answer(c, &iov, 1);
}

/* The head is in: checks the body's size and makes room for it.
 * 0: go on reading; 1: refused (c is no longer ours). */
static int head_done(srv_conn *c)
{
	size_t body = c->head.content_length > 0 ? (size_t)c->head.content_length : 0;
	if (body > srv_cfg.max_body) {
		char msg[120];
		snprintf(msg, sizeof(msg), "the body (%zu bytes) is over the server's limit "
			 "(--max-body-mb %zu)", body, srv_cfg.max_body >> 20);
		refuse(c, 413, msg);
		return 1;
	}
	c->req_len = c->head.head_len + body;
	if (c->req_len > c->in_cap) {
		char *p = realloc(c->in, c->req_len);
		if (!p) {
			refuse(c, 503, "out of memory for the request body");
			return 1;
		}
		c->in = p;
		c->in_cap = c->req_len;
	}
	set_phase(c, PH_BODY);
	return 0;
}

static void dispatch(srv_conn *c)
{
	set_phase(c, PH_BUSY);
	c->req = (srv_hreq){ .conn = c, .method = c->head.method, .uri = c->head.uri,
			     .body = c->in + c->head.head_len,
			     .body_len = c->req_len - c->head.head_len,
			     .infer_hlen = c->head.infer_hlen, .t0 = srv_now() };
	srv_handle(&c->req);
}

/* Acts on the bytes read so far.  0: more are needed; 1: the request went
 * on (answered or queued: c is no longer ours). */
static int conn_input(srv_conn *c)
{
	int ph = __atomic_load_n(&c->phase, __ATOMIC_ACQUIRE);
	if (ph == PH_IDLE || ph == PH_HEAD) {
		if (c->in_len == 0)
			return 0;
		if (ph == PH_IDLE)
			set_phase(c, PH_HEAD);
		int rc = srv_hparse(c->in, c->in_len, &c->head);
		if (rc < 0) {
			refuse(c, -rc, c->head.err);
			return 1;
		}
		if (rc == 0 || head_done(c))
			return rc != 0;
	}
	if (c->in_len >= c->req_len) {
		dispatch(c);
		return 1;
	}
	if (c->head.expect_continue && !c->continued) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
		c->continued = 1;
		if (send(c->fd, cont, sizeof(cont) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
		    errno != EAGAIN)
			return conn_close(c), 1;
	}
	return 0;
}

/* Reads what is there.  >0: bytes; 0: EOF; -1: would block; -2: error. */
static ssize_t read_some(srv_conn *c)
{
	int ph = __atomic_load_n(&c->phase, __ATOMIC_ACQUIRE);
	size_t want = ph == PH_BODY ? c->req_len : SRV_HEAD_MAX;
	if (c->in_len == c->in_cap) {
		size_t cap = c->in_cap ? c->in_cap * 2 : IN_FIRST;
		if (cap > want)
			cap = want;
		if (cap <= c->in_cap)
			return -2;        /* cannot happen: the parser refuses first */
		char *p = realloc(c->in, cap);
		if (!p)
			return -2;
		c->in = p;
		c->in_cap = cap;
	}
	ssize_t r;
	do
		r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2;
	c->in_len += (size_t)r;
	if (r > 0 && ph == PH_BODY)
		__atomic_store_n(&c->mark_ms, now_ms(), __ATOMIC_RELEASE);
	return r;
}

static void conn_readable(srv_conn *c)
{
	for (;;) {
		if (conn_input(c))
			return;
		ssize_t r = read_some(c);
		if (r == -1) {
			arm(c->fd, c, EPOLLIN | EPOLLRDHUP);
			return;
		}
		if (r <= 0) {
			conn_close(c);    /* EOF before a complete request, or an error */
			return;
		}
	}
}

static void conn_linger(srv_conn *c)
{
	char sink[4096];
	for (;;) {
		ssize_t r = recv(c->fd, sink, sizeof(sink), 0);
		if (r > 0 || (r < 0 && errno == EINTR))
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			arm(c->fd, c, EPOLLIN | EPOLLRDHUP);
		else
			conn_close(c);
		return;
	}
}

static void conn_writable(srv_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			arm(c->fd, c, EPOLLOUT);
			return;
		}
		if (w < 0) {
			conn_close(c);
			return;
		}
		c->out_off += (size_t)w;
		__atomic_store_n(&c->mark_ms, now_ms(), __ATOMIC_RELEASE);
	}
	free(c->out);
	c->out = NULL;
	after_answer(c);
}

/* A new connection, or a 503 and close when at --max-connections. */
static void conn_new(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	srv_conn *c = calloc(1, sizeof(*c));
	pthread_mutex_lock(&io.mu);
	if (!c || io.n_free == 0) {
		io.refused++;
		pthread_mutex_unlock(&io.mu);
		free(c);
		char buf[600], msg[120];
		snprintf(msg, sizeof(msg), "too many connections (--max-connections %d)",
			 srv_cfg.max_connections);
		int n = error_text(buf, sizeof(buf), 503, msg);
		if (send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
			shutdown(fd, SHUT_WR);
		close(fd);
		return;
	}
	c->fd = fd;
	c->slot = io.free_slots[--io.n_free];
	io.tab[c->slot] = c;
	set_phase(c, PH_IDLE);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = c };
	if (epoll_ctl(io.ep, EPOLL_CTL_ADD, fd, &ev) != 0)
		close_locked(c);
	pthread_mutex_unlock(&io.mu);
}

static void accept_all(void)
{
	for (;;) {
		int fd = accept4(io.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			conn_new(fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			fprintf(stderr, "ort-serve: accept: %s (pausing accepts)\n", strerror(errno));
			__atomic_store_n(&io.listen_paused, 1, __ATOMIC_RELEASE);
			return;
		}
		break;
	}
	arm(io.lfd, &lfd_tag, EPOLLIN);
}

static void *io_thread(void *arg)
{
	(void)arg;
	for (;;) {
		struct epoll_event ev;
		int n = epoll_wait(io.ep, &ev, 1, -1);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		if (ev.data.ptr == &evfd_tag)
			break;
		if (ev.data.ptr == &lfd_tag) {
			accept_all();
			continue;
		}
		srv_conn *c = ev.data.ptr;
		int ph = __atomic_load_n(&c->phase, __ATOMIC_ACQUIRE);
		if (ph == PH_WRITE)
			conn_writable(c);
		else if (ph == PH_LINGER)
			conn_linger(c);
		else
			conn_readable(c);
	}
	return NULL;
}

int srv_conn_gone(srv_conn *c)
{
	char b;
	ssize_t r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void srv_conn_drop(srv_conn *c)
{
	conn_close(c);
}

void srv_conn_counts(int *open, unsigned long *refused)
{
	pthread_mutex_lock(&io.mu);
	*open = io.tab ? srv_cfg.max_connections - io.n_free : 0;
	*refused = io.refused;
	pthread_mutex_unlock(&io.mu);
}

/* Shuts down connections past their timeout: idle keep-alive ones, and
 * those whose client stopped reading an answer, after
 * --idle-timeout-s, those whose head (or body) stalls after
 * --header-timeout-s (answered 408 first), lingering ones after
 * --header-timeout-s.  The owner sees the EOF. */
void srv_conn_sweep(void)
{
	int64_t now = now_ms(), idle = (int64_t)srv_cfg.idle_timeout_s * 1000,
		head = (int64_t)srv_cfg.header_timeout_s * 1000;
	char buf[400];
	int n = error_text(buf, sizeof(buf), 408, "the request did not arrive in time "
			   "(--header-timeout-s)");
	pthread_mutex_lock(&io.mu);
	for (int i = 0; i < srv_cfg.max_connections; i++) {
		srv_conn *c = io.tab[i];
		if (!c)
			continue;
		int ph = __atomic_load_n(&c->phase, __ATOMIC_ACQUIRE);
		int64_t age = now - __atomic_load_n(&c->mark_ms, __ATOMIC_ACQUIRE);
		if (((ph == PH_IDLE || ph == PH_WRITE) && age > idle) ||
		    (ph == PH_LINGER && age > head)) {
			shutdown(c->fd, SHUT_RDWR);
		} else if ((ph == PH_HEAD || ph == PH_BODY) && age > head) {
			if (send(c->fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
				(void)0;  /* best effort: the connection goes anyway */
			shutdown(c->fd, SHUT_RDWR);
		}
	}
	pthread_mutex_unlock(&io.mu);
	if (__atomic_exchange_n(&io.listen_paused, 0, __ATOMIC_ACQ_REL))
		arm(io.lfd, &lfd_tag, EPOLLIN);
}

/* The listening socket on host:port. */
static int listen_on(const char *host, int port, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *ai = NULL;
	char ps[16];
	int one = 1, fd = -1;
	snprintf(ps, sizeof(ps), "%d", port);
	int rv = getaddrinfo(host, ps, &hints, &ai);
	if (rv)
		return snprintf(err, errlen, "%s: %s", host, gai_strerror(rv)), -1;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 1024)) {
		snprintf(err, errlen, "%s port %d: %s", host, port, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

/* Room for --max-connections descriptors besides the provider pipes. */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)srv_cfg.max_connections + 256;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < want)
		fprintf(stderr, "ort-serve: warning: the descriptor limit (%lu) is under "
			"--max-connections + 256\n", (unsigned long)rl.rlim_cur);
}

int srv_conn_start(const char *host, int port, int threads, char *err, size_t errlen)
{
	struct sockaddr_storage sa;
	socklen_t sl = sizeof(sa);
	int n = srv_cfg.max_connections;
	raise_fd_limit();
	io.tab = calloc((size_t)n, sizeof(*io.tab));
	io.free_slots = malloc((size_t)n * sizeof(int));
	if (!io.tab || !io.free_slots)
		return snprintf(err, errlen, "out of memory"), -1;
	for (int i = 0; i < n; i++)
		io.free_slots[i] = n - 1 - i;
	io.n_free = n;
	if ((io.lfd = listen_on(host, port, err, errlen)) < 0)
		return -1;
	io.ep = epoll_create1(EPOLL_CLOEXEC);
	io.evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event lev = { .events = EPOLLIN | EPOLLONESHOT, .data.ptr = &lfd_tag },
			   wev = { .events = EPOLLIN, .data.ptr = &evfd_tag };
	if (io.ep < 0 || io.evfd < 0 || epoll_ctl(io.ep, EPOLL_CTL_ADD, io.lfd, &lev) ||
	    epoll_ctl(io.ep, EPOLL_CTL_ADD, io.evfd, &wev))
		return snprintf(err, errlen, "epoll: %s", strerror(errno)), -1;
	if (threads > MAX_IO_THREADS)
		threads = MAX_IO_THREADS;
	for (io.n_thr = 0; io.n_thr < threads; io.n_thr++)
		if (pthread_create(&io.thr[io.n_thr], NULL, io_thread, NULL) != 0)
			return snprintf(err, errlen, "cannot start the I/O threads"), -1;
	if (getsockname(io.lfd, (struct sockaddr *)&sa, &sl) != 0)
		return snprintf(err, errlen, "getsockname: %s", strerror(errno)), -1;
	return ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port :
						 ((struct sockaddr_in *)&sa)->sin_port);
}

/* Stops the I/O threads and closes every connection but those whose
 * request a worker holds: their answer closes them (io.stopping). */
void srv_conn_stop(void)
{
	uint64_t one = 1;
	pthread_mutex_lock(&io.mu);
	io.stopping = 1;
	pthread_mutex_unlock(&io.mu);
	if (io.evfd >= 0 && write(io.evfd, &one, sizeof(one)) < 0)
		fprintf(stderr, "ort-serve: cannot wake the I/O threads: %s\n", strerror(errno));
	for (int i = 0; i < io.n_thr; i++)
		pthread_join(io.thr[i], NULL);
	io.n_thr = 0;
	pthread_mutex_lock(&io.mu);
	for (int i = 0; io.tab && i < srv_cfg.max_connections; i++)
		if (io.tab[i] && __atomic_load_n(&io.tab[i]->phase, __ATOMIC_ACQUIRE) != PH_BUSY)
			close_locked(io.tab[i]);
	pthread_mutex_unlock(&io.mu);
}

/* After the models closed (no worker holds a connection): frees the rest. */
void srv_conn_free(void)
{
	for (int i = 0; io.tab && i < srv_cfg.max_connections; i++)
		if (io.tab[i])
			close_locked(io.tab[i]);
	free(io.tab);
	free(io.free_slots);
	io.tab = NULL;
	if (io.lfd >= 0)
		close(io.lfd);
	if (io.evfd >= 0)
		close(io.evfd);
	if (io.ep >= 0)
		close(io.ep);
}
