/* ort-serve: the HTTP side.  srv_handle receives every request that
 * serve_conn.c read (so unknown paths get the protocol's {"error": ...}
 * body too), routes it, answers health, metadata, repository and metrics
 * requests at once, and hands infer requests to their model's queue: the
 * worker that runs one answers it on its connection (srv_job_finish), so
 * an I/O thread never waits for a run.  Every answer goes through
 * srv_respond, which also writes the access log line. */
#include "serve.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SEGS 8
#define SRV_URI_MAX_ROUTE 4096

static atomic_int inflight;
static atomic_int draining;

int srv_inflight(void) { return atomic_load(&inflight); }
void srv_set_draining(void) { atomic_store(&draining, 1); }
int srv_draining(void) { return atomic_load(&draining); }

double srv_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void srv_buf_put(srv_buf *b, const void *data, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void srv_buf_printf(srv_buf *b, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(small)) {
		srv_buf_put(b, small, (size_t)n);
		return;
	}
	char *big = malloc((size_t)n + 1);
	if (!big) {
		b->oom = 1;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	srv_buf_put(b, big, (size_t)n);
	free(big);
}

void srv_buf_json_str(srv_buf *b, const char *s)
{
	srv_buf_put(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			srv_buf_printf(b, "\\%c", c);
		else if (c < 0x20)
			srv_buf_printf(b, "\\u%04x", c);
		else
			srv_buf_put(b, s, 1);
	}
	srv_buf_put(b, "\"", 1);
}

void srv_respond(srv_hreq *r, int status, const char *ctype, srv_buf *hdr, srv_buf *bin,
		 size_t header_len)
{
	size_t na = hdr ? hdr->len : 0, nb = bin ? bin->len : 0;
	if (srv_cfg.access_log)
		fprintf(stderr, "ort-serve: %s %s %d %zu %.3fms\n", r->method, r->uri, status,
			na + nb, (srv_now() - r->t0) * 1e3);
	srv_conn_answer(r->conn, status, ctype, nb ? header_len : SIZE_MAX, na ? hdr->p : NULL,
			na, nb ? bin->p : NULL, nb);
}

/* A reply whose body is {"error": msg}. */
static void respond_error(srv_hreq *r, int status, const char *msg)
{
	srv_buf b = { 0 };
	srv_buf_put(&b, "{\"error\":", 9);
	srv_buf_json_str(&b, msg);
	srv_buf_put(&b, "}", 1);
	if (b.oom)
		srv_respond(r, status, "application/json", NULL, NULL, 0);
	else
		srv_respond(r, status, "application/json", &b, NULL, 0);
	free(b.p);
}

static void respond_json(srv_hreq *r, int status, srv_buf *b)
{
	if (b->oom)
		respond_error(r, 500, "out of memory");
	else
		srv_respond(r, status, "application/json", b, NULL, 0);
	free(b->p);
}

void srv_job_finish(srv_job *job, int status, srv_buf *hdr, srv_buf *bin, const char *err)
{
	srv_hreq *r = job->hreq;
	srv_stats_request(job->m->stats, status == 200, srv_now() - job->t_start);
	if (status == SRV_GONE) {
		srv_stats_dropped(job->m->stats);
		if (srv_cfg.access_log)
			fprintf(stderr, "ort-serve: %s %s dropped: the client disconnected\n",
				r->method, r->uri);
		srv_conn_drop(r->conn);
	} else if (status != 200 || hdr->oom || (bin && bin->oom)) {
		respond_error(r, status == 200 ? 500 : status, err ? err : "out of memory");
	} else {
		srv_respond(r, 200, bin->len ? "application/octet-stream" : "application/json", hdr,
			    bin, hdr->len);
	}
	if (hdr)
		free(hdr->p);
	if (bin)
		free(bin->p);
	srv_request_free(&job->req);
	srv_model_put(job->m);
	free(job);
	atomic_fetch_sub(&inflight, 1);
}

/* ---- metadata ---- */

static void io_json(srv_buf *b, const srv_io *io)
{
	const char *wire = srv_dtype_wire(io->dtype);
	srv_buf_put(b, "{\"name\":", 8);
	srv_buf_json_str(b, io->name);
	srv_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":[", wire ? wire : "UNKNOWN");
	for (size_t d = 0; io->rank_known && d < io->rank; d++)
		srv_buf_printf(b, "%s%" PRId64, d ? "," : "", io->dims[d]);
	srv_buf_put(b, "]}", 2);
}

static void model_metadata(srv_model *m, srv_buf *b)
{
	srv_buf_put(b, "{\"name\":", 8);
	srv_buf_json_str(b, m->name);
	srv_buf_printf(b, ",\"versions\":[\"%s\"],\"platform\":\"ortmk_onnx\",\"inputs\":[",
		       m->version);
	for (size_t i = 0; i < m->n_ins; i++) {
		if (i)
			srv_buf_put(b, ",", 1);
		io_json(b, &m->ins[i]);
	}
	srv_buf_put(b, "],\"outputs\":[", 13);
	for (size_t i = 0; i < m->n_outs; i++) {
		if (i)
			srv_buf_put(b, ",", 1);
		io_json(b, &m->outs[i]);
	}
	srv_buf_put(b, "]}", 2);
}

/* Whether the model takes requests: not draining, no instance replacing
 * its session. */
static int model_ready(srv_model *m)
{
	return !srv_draining() && __atomic_load_n(&m->healing, __ATOMIC_SEQ_CST) == 0;
}

/* ---- infer ---- */

/* The request against the model's signature: a 400 message, or NULL. */
static const char *check_inputs(srv_model *m, const srv_request *r, char *err, size_t errlen)
{
	size_t found = 0;
	for (size_t k = 0; k < r->n_in; k++) {
		const srv_tensor *t = &r->in[k];
		const srv_io *io = NULL;
		for (size_t i = 0; i < m->n_ins && !io; i++)
			if (!strcmp(m->ins[i].name, t->name))
				io = &m->ins[i];
		if (!io)
			return snprintf(err, errlen, "unknown input '%s'", t->name), err;
		found++;
		if (io->dtype != ORTMK_UNDEFINED && io->dtype != t->dtype)
			return snprintf(err, errlen, "input '%s': datatype %s, the model expects %s",
					t->name, srv_dtype_wire(t->dtype),
					srv_dtype_wire(io->dtype) ? srv_dtype_wire(io->dtype) : "?"), err;
		if (io->rank_known && io->rank != t->rank)
			return snprintf(err, errlen, "input '%s': rank %zu, the model expects %zu",
					t->name, t->rank, io->rank), err;
		for (size_t d = 0; io->rank_known && d < io->rank; d++)
			if (io->dims[d] >= 0 && io->dims[d] != t->dims[d])
				return snprintf(err, errlen, "input '%s': dim %zu is %" PRId64
						", the model expects %" PRId64, t->name, d,
						t->dims[d], io->dims[d]), err;
	}
	if (found != m->n_ins)
		return snprintf(err, errlen, "%zu inputs given, the model has %zu", found, m->n_ins),
		       err;
	for (size_t k = 0; k < r->n_out; k++) {
		size_t i = 0;
		while (i < m->n_outs && strcmp(m->outs[i].name, r->out[k].name) != 0)
			i++;
		if (i == m->n_outs)
			return snprintf(err, errlen, "unknown output '%s'", r->out[k].name), err;
	}
	return NULL;
}

static void do_infer(srv_hreq *h, srv_model *m)
{
	char err[600];
	srv_job *job = calloc(1, sizeof(*job));
	atomic_fetch_add(&inflight, 1);
	if (!job) {
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	job->m = m;
	job->hreq = h;
	job->t_start = h->t0;
	int status = 400;
	if (srv_request_parse(h->body, h->body_len, h->infer_hlen > 0 ? (size_t)h->infer_hlen : 0,
			      &job->req, err, sizeof(err)) ||
	    check_inputs(m, &job->req, err, sizeof(err)))
		goto fail;
	if ((status = srv_model_reserve(m, err, sizeof(err))) != 0) {
		srv_job_finish(job, status, NULL, NULL, err);
		return;
	}
	srv_model_enqueue(m, job);        /* a worker answers */
	return;
fail:
	srv_stats_request(m->stats, 0, srv_now() - h->t0);
	if (job)
		srv_request_free(&job->req);
	free(job);
	srv_model_put(m);
	atomic_fetch_sub(&inflight, 1);
	respond_error(h, 400, err);
}

/* ---- routing ---- */

typedef struct route {
	srv_hreq *h;
	const char *method, *uri;
	char *seg[MAX_SEGS];
	int n;
	double t0;
} route;

static int split_path(char *path, route *r)
{
	char *q = strchr(path, '?'), *save = NULL;
	if (q)
		*q = '\0';
	r->n = 0;
	for (char *s = strtok_r(path, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
		if (r->n == MAX_SEGS)
			return -1;
		r->seg[r->n++] = s;
	}
	return 0;
}

static int is(const route *r, int i, const char *s)
{
	return i < r->n && strcmp(r->seg[i], s) == 0;
}

/* /v2/models/{m}[/versions/{v}][/ready|/infer] */
static void models_route(route *r)
{
	int tail = 3;
	const char *version = NULL;
	char err[256];
	if (r->n < 3 || !srv_name_ok(r->seg[2]))
		return respond_error(r->h, 400, "invalid model name");
	if (is(r, 3, "versions")) {
		if (r->n < 5)
			return respond_error(r->h, 404, "no version given");
		version = r->seg[4];
		tail = 5;
	}
	const char *op = tail < r->n ? r->seg[tail] : "";
	int post = strcmp(r->method, "POST") == 0;
	if (r->n > tail + 1 || (op[0] && strcmp(op, "ready") && strcmp(op, "infer")) ||
	    post != !strcmp(op, "infer"))
		return respond_error(r->h, 404, "no such endpoint");
	srv_model *m = srv_model_get(r->seg[2], version);
	if (!m) {
		snprintf(err, sizeof(err), "model '%s'%s%s is not loaded", r->seg[2],
			 version ? " version " : "", version ? version : "");
		return respond_error(r->h, 404, err);
	}
	if (!strcmp(op, "infer") && srv_draining()) {
		srv_model_put(m);
		return respond_error(r->h, 503, "the server is shutting down");
	}
	if (!strcmp(op, "infer"))
		return do_infer(r->h, m);
	srv_buf b = { 0 };
	int ready = model_ready(m);
	if (!strcmp(op, "ready"))
		srv_buf_printf(&b, "{\"name\":\"%s\",\"ready\":%s}", m->name,
			       ready ? "true" : "false");
	else
		model_metadata(m, &b);
	int status = !strcmp(op, "ready") && !ready ? 503 : 200;
	srv_model_put(m);
	respond_json(r->h, status, &b);
}

/* /v2/repository/index, /v2/repository/models/{m}/load|unload */
static void repo_route(route *r)
{
	char err[600];
	srv_buf b = { 0 };
	if (strcmp(r->method, "POST") != 0)
		return respond_error(r->h, 405, "use POST");
	if (r->n == 3 && is(r, 2, "index")) {
		srv_repo_index(&b);
		return respond_json(r->h, 200, &b);
	}
	if (r->n != 5 || !is(r, 2, "models") || (!is(r, 4, "load") && !is(r, 4, "unload")))
		return respond_error(r->h, 404, "no such endpoint");
	int rc = is(r, 4, "load") ? srv_repo_load(r->seg[3], err, sizeof(err)) :
				    srv_repo_unload(r->seg[3], err, sizeof(err));
	if (rc)
		return respond_error(r->h, rc, err);
	srv_buf_put(&b, "{}", 2);
	respond_json(r->h, 200, &b);
}

static void get_route(route *r)
{
	srv_buf b = { 0 };
	int status = 200;
	if (r->n == 1) {
		srv_buf_printf(&b, "{\"name\":\"ort-serve\",\"version\":\"%s\",\"extensions\":"
			       "[\"binary_tensor_data\",\"model_repository\",\"metrics\"]}",
			       ortmk_version());
	} else if (r->n == 3 && is(r, 1, "health") && is(r, 2, "live")) {
		srv_buf_printf(&b, "{\"live\":true}");
	} else if (r->n == 3 && is(r, 1, "health") && is(r, 2, "ready")) {
		int ready = !srv_draining() && srv_repo_ready();
		srv_buf_printf(&b, "{\"ready\":%s}", ready ? "true" : "false");
		status = ready ? 200 : 503;
	} else {
		return respond_error(r->h, 404, "no such endpoint");
	}
	respond_json(r->h, status, &b);
}

void srv_handle(srv_hreq *h)
{
	char path[SRV_URI_MAX_ROUTE];
	route r = { .h = h, .method = h->method, .uri = h->uri, .t0 = h->t0 };
	snprintf(path, sizeof(path), "%s", r.uri);
	if (split_path(path, &r) || (r.n > 0 && strcmp(r.seg[0], "v2") && strcmp(r.seg[0], "metrics")))
		return respond_error(h, 404, "no such endpoint");
	if (r.n == 1 && is(&r, 0, "metrics")) {
		srv_buf b = { 0 };
		srv_metrics_text(&b);
		srv_respond(h, 200, "text/plain; version=0.0.4", &b, NULL, 0);
		free(b.p);
		return;
	}
	if (is(&r, 1, "models"))
		return models_route(&r);
	if (is(&r, 1, "repository"))
		return repo_route(&r);
	int known = r.n == 1 || (r.n == 3 && is(&r, 1, "health") &&
				 (is(&r, 2, "live") || is(&r, 2, "ready")));
	if (known && strcmp(r.method, "GET") != 0 && strcmp(r.method, "HEAD") != 0)
		return respond_error(h, 405, "use GET");
	get_route(&r);
}
