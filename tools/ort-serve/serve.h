/* ort-serve: the Open Inference Protocol (KServe v2 REST) over its own
 * HTTP/1.1 server, on top of libortmk's public API.  This header is what
 * the files of tools/ort-serve/ share:
 *   serve_main.c     arguments, the timeouts' sweep, SIGTERM drain
 *   serve_conn.c     connections: epoll, keep-alive, limits, timeouts
 *   serve_hparse.c   the HTTP/1.1 request head parser (serve_hparse.h)
 *   serve_http.c     routing, endpoints, error bodies, the access log
 *   serve_tensor.c   request tensors in (JSON or binary), outputs out
 *   serve_repo.c     the model repository: names, config.json, load/unload
 *   serve_sched.c    per-model queue, instances, dynamic batching
 *   serve_metrics.c  counters and the Prometheus text of GET /metrics
 * Internal names carry the prefix srv_. */
#ifndef ORT_SERVE_H
#define ORT_SERVE_H

#include <ortmk/ortmk.h>

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

#define SRV_MAX_RANK 8
#define SRV_NAME_MAX 128

/* A growing byte buffer (response bodies). */
typedef struct srv_buf {
	char *p;
	size_t len, cap;
	int oom;
} srv_buf;
void srv_buf_put(srv_buf *b, const void *data, size_t n);
void srv_buf_printf(srv_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (quoted, escaped). */
void srv_buf_json_str(srv_buf *b, const char *s);

/* One HTTP request (serve_conn.c fills it): valid until it is answered. */
typedef struct srv_conn srv_conn;
typedef struct srv_hreq {
	srv_conn *conn;
	const char *method, *uri;
	const void *body;
	size_t body_len;
	int64_t infer_hlen;       /* Inference-Header-Content-Length; -1: none */
	double t0;                /* when it was complete */
} srv_hreq;

/* ---- tensors (serve_tensor.c) ---- */

/* One input of a request, decoded.  data points into the request body
 * (binary) or into owned (JSON); strings (BYTES) are in strs. */
typedef struct srv_tensor {
	char name[SRV_NAME_MAX];
	ortmk_dtype dtype;
	int64_t dims[SRV_MAX_RANK];
	size_t rank;
	size_t numel;
	const void *data;
	size_t nbytes;
	void *owned;
	char **strs;
} srv_tensor;

/* A requested output. */
typedef struct srv_outreq {
	char name[SRV_NAME_MAX];
	int binary;
} srv_outreq;

typedef struct srv_request {
	char id[SRV_NAME_MAX];
	int has_id;
	srv_tensor *in;
	size_t n_in;
	srv_outreq *out;          /* NULL with n_out 0: every output */
	size_t n_out;
	int binary_all;           /* parameters.binary_data_output */
} srv_request;

const char *srv_dtype_wire(ortmk_dtype t);        /* "FP32"; NULL if none */
ortmk_dtype srv_dtype_parse(const char *wire);    /* ORTMK_UNDEFINED if none */
/* Decodes an infer body (header_len: Inference-Header-Content-Length, 0
 * when absent).  0 or -1 with err filled (a 400). */
int srv_request_parse(const void *body, size_t len, size_t header_len,
		      srv_request *r, char *err, size_t errlen);
void srv_request_free(srv_request *r);

/* A view of one output for a response: rows [row0, row0+dims[0]) of a
 * value when batched, else the whole value. */
typedef struct srv_outview {
	const char *name;
	const ortmk_value *v;
	int64_t dims[SRV_MAX_RANK];
	size_t rank;
	size_t first;             /* first element of the view */
	size_t numel;
	int binary;
} srv_outview;
/* Writes the response: JSON header into hdr, binary chunks into bin. */
void srv_response_encode(const char *model, const char *version, const srv_request *r,
			 const srv_outview *outs, size_t n, srv_buf *hdr, srv_buf *bin);

/* ---- metrics (serve_metrics.c) ---- */

typedef struct srv_stats srv_stats;
/* The statistics of model `name` (created on first use, kept across
 * reloads).  NULL when out of memory. */
srv_stats *srv_stats_get(const char *name);
void srv_stats_request(srv_stats *st, int ok, double seconds);
void srv_stats_queue(srv_stats *st, double seconds);
void srv_stats_batch(srv_stats *st, size_t size);
void srv_stats_dropped(srv_stats *st);
void srv_stats_retired(srv_stats *st, unsigned restarts, unsigned failed_runs);
/* The Prometheus text of every model's statistics. */
void srv_metrics_text(srv_buf *b);

/* ---- repository and models (serve_repo.c, serve_sched.c) ---- */

typedef struct srv_config {
	char providers[64];
	int threads;
	int instances;
	int max_batch_size;       /* <= 1: no dynamic batching */
	int batch_delay_us;
	int timeout_ms;           /* 0: none */
	int max_queue;
} srv_config;

typedef struct srv_model srv_model;
typedef struct srv_job srv_job;

typedef struct srv_instance {
	srv_model *m;
	int index;
	char path[4096];
	ortmk_env *env;
	ortmk_session *s;         /* replaced by its worker only (srv_instance_heal) */
	pthread_mutex_t s_mu;     /* held to replace s and to read it elsewhere */
	pthread_t thread;
	int started;
	int claimed;              /* a run holds it (its worker or an I/O thread); under m->mu */
} srv_instance;

/* An input or output of the model's signature, copied at load so that
 * requests are checked without touching a session. */
typedef struct srv_io {
	char name[SRV_NAME_MAX];
	ortmk_dtype dtype;
	int rank_known;
	size_t rank;
	int64_t dims[SRV_MAX_RANK];
} srv_io;

struct srv_model {
	char name[SRV_NAME_MAX];
	char version[32];
	srv_config cfg;
	int refs;                 /* repository + queued jobs; under the repo lock */
	srv_stats *stats;
	srv_instance *inst;
	int n_inst;
	srv_io *ins, *outs;
	size_t n_ins, n_outs;
	int healing;              /* instances replacing their session */
	pthread_mutex_t mu;       /* the queue */
	pthread_cond_t cv;
	srv_job *head, *tail;
	int queued;
	int stopping;
};

/* One infer request on its way through a model's queue. */
struct srv_job {
	srv_job *next;
	srv_model *m;
	srv_hreq *hreq;           /* its HTTP request; the connection goes with it */
	int gone;                 /* its client left (--drop-disconnected) */
	srv_request req;
	int64_t batch;            /* dim 0 of every input; -1: not batchable */
	double t_start, t_enqueued;
};

/* Server-wide settings (serve_main.c fills them). */
typedef struct srv_settings {
	const char *repo_dir;
	srv_config defaults;
	size_t max_body;
	int access_log;
	int drop_disconnected;
	int max_connections;      /* open at once; past it: 503 and close */
	int idle_timeout_s;       /* a keep-alive connection with no request */
	int header_timeout_s;     /* a request's head, or a pause in its body */
	int http_threads;         /* I/O threads */
} srv_settings;
extern srv_settings srv_cfg;

int srv_repo_init(void);                         /* loads every model */
void srv_repo_shutdown(void);                    /* unloads, waits */
/* The model serving `name` (and `version` when not NULL), with a
 * reference the caller drops with srv_model_put; NULL when none. */
srv_model *srv_model_get(const char *name, const char *version);
void srv_model_put(srv_model *m);
/* Load (or reload) / unload; 0, or an HTTP status with err filled. */
int srv_repo_load(const char *name, char *err, size_t errlen);
int srv_repo_unload(const char *name, char *err, size_t errlen);
void srv_repo_index(srv_buf *b);                 /* the index JSON */
int srv_repo_ready(void);    /* no model that serves nothing yet is loading */
int srv_name_ok(const char *name);
int srv_config_read(const char *path, srv_config *c, char *err, size_t errlen);

int srv_model_start(srv_model *m, const char *model_path, char *err, size_t errlen);
void srv_model_stop(srv_model *m);
/* A place in the queue: 0, or 503 (err filled) when it is full. */
int srv_model_reserve(srv_model *m, char *err, size_t errlen);
/* Queues job in the place reserved (it takes the job); or, when the queue
 * is empty and an instance idle, runs it at once on the calling thread. */
void srv_model_enqueue(srv_model *m, srv_job *job);
void srv_model_provider_counts(srv_model *m, unsigned *restarts, unsigned *failed);
/* Answers job (status 200 with body, or an error; SRV_GONE: its client
 * left, nothing to send) and frees it. */
#define SRV_GONE (-1)
void srv_job_finish(srv_job *job, int status, srv_buf *hdr, srv_buf *bin, const char *err);

/* ---- connections (serve_conn.c) ---- */
/* Listens on host:port and starts `threads` I/O threads: the port bound,
 * or -1 with err filled. */
int srv_conn_start(const char *host, int port, int threads, char *err, size_t errlen);
void srv_conn_sweep(void);        /* timeouts; a few times a second */
void srv_conn_stop(void);         /* no more I/O; busy connections stay */
void srv_conn_free(void);         /* once no worker holds a connection */
/* Writes the answer: status, Content-Type, the body a then b;
 * infer_hlen is the Inference-Header-Content-Length (SIZE_MAX: none).
 * The connection then reads the next request, or closes. */
void srv_conn_answer(srv_conn *c, int status, const char *ctype, size_t infer_hlen,
		     const void *a, size_t na, const void *b, size_t nb);
/* Whether the client closed its connection (or it failed). */
int srv_conn_gone(srv_conn *c);
void srv_conn_drop(srv_conn *c);  /* closes without an answer */
void srv_conn_counts(int *open, unsigned long *refused);

/* ---- http (serve_http.c) ---- */
double srv_now(void);
/* Routes and answers r (at once, or later from a worker); called on the
 * I/O thread that read it. */
void srv_handle(srv_hreq *r);
/* Requests accepted and not answered yet (the drain waits for 0). */
int srv_inflight(void);
void srv_set_draining(void);
int srv_draining(void);
/* The answer of r, with its access log line: a JSON header (hdr) and
 * binary chunks (bin) after it; header_len for Inference-Header-Content-
 * Length when bin holds any. */
void srv_respond(srv_hreq *r, int status, const char *ctype, srv_buf *hdr, srv_buf *bin,
		 size_t header_len);

#endif
