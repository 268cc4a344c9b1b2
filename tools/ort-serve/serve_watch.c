/* ort-serve --drop-disconnected: queued work of a client that left is
 * dropped instead of run.  nng's HTTP server cannot tell that a client
 * disconnected while a handler is pending (docs/SERVING.md), but once the
 * handler takes the connection (nng_http_hijack) a pending 1-byte read on
 * it fails when the peer closes.  The price: the connection is no longer
 * the server's, so the answer is written here and the connection closed
 * (no keep-alive).  serve_http.c starts the watch before queueing a job and
 * ends it when the job is answered; workers skip jobs marked gone. */
#include "serve.h"

#include <stdlib.h>

static void watch_cb(void *arg)
{
	srv_job *job = arg;
	int rv = nng_aio_result(job->watch);
	/* cancelled: we stopped watching; 0: the client sent more bytes */
	if (rv != 0 && rv != NNG_ECANCELED)
		__atomic_store_n(&job->gone, 1, __ATOMIC_SEQ_CST);
}

void srv_watch_begin(srv_job *job)
{
	nng_http_conn *conn = nng_aio_get_input(job->aio, 2);
	nng_iov iov = { &job->watch_byte, 1 };
	if (nng_aio_alloc(&job->watch, watch_cb, job) != 0)
		return;                   /* unwatched: answered the usual way */
	if (nng_http_hijack(conn) != 0) {
		nng_aio_free(job->watch);
		job->watch = NULL;
		return;
	}
	job->conn = conn;
	job->hreq = nng_aio_get_input(job->aio, 0);   /* ours to free now */
	nng_aio_set_output(job->aio, 0, NULL);
	nng_aio_finish(job->aio, 0);
	job->aio = NULL;
	nng_aio_set_iov(job->watch, 1, &iov);
	nng_http_conn_read(conn, job->watch);
}

/* Called by workers only (it waits for aios: never from nng's callbacks).
 * The watching read stays pending while the answer is written: cancelling
 * a read makes nng close the connection. */
void srv_watch_send(srv_job *job, nng_http_res *res)
{
	nng_aio *w = NULL;
	if (res && !__atomic_load_n(&job->gone, __ATOMIC_SEQ_CST) &&
	    nng_aio_alloc(&w, NULL, NULL) == 0) {
		nng_http_res_set_header(res, "Connection", "close");
		nng_aio_set_timeout(w, 10000);
		nng_http_conn_write_res(job->conn, res, w);
		nng_aio_wait(w);
		nng_aio_free(w);
	}
	if (res)
		nng_http_res_free(res);
	nng_http_conn_close(job->conn);
	nng_aio_cancel(job->watch);
	nng_aio_wait(job->watch);
}

void srv_watch_end(srv_job *job)
{
	if (job->watch)
		nng_aio_free(job->watch);
	if (job->hreq)
		nng_http_req_free(job->hreq);
}
