/* ort-serve: the Open Inference Protocol (KServe v2 REST) in front of
 * libortmk, so KServe, or anything else that speaks the protocol, can run
 * ortmk as its model runtime (docs/SERVING.md).  This file: arguments, the
 * HTTP server's start (serve_conn.c) and its timeouts' sweep, and the drain
 * on SIGTERM or SIGINT (stop taking infer requests, answer those in flight,
 * close the models, exit 0). */
#include "serve.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

srv_settings srv_cfg = {
	.repo_dir = "/mnt/models",
	.defaults = { .providers = "cpu", .threads = 0, .instances = 1, .max_batch_size = 0,
		      .batch_delay_us = 500, .timeout_ms = 0, .max_queue = 64 },
	.max_body = (size_t)64 << 20,
	.access_log = 1,
	.max_connections = 1024,
	.idle_timeout_s = 60,
	.header_timeout_s = 10,
	.http_threads = 4,
};

static const char usage[] =
	"usage: ort-serve [--model-repository DIR] [--http-port PORT] [--host ADDR]\n"
	"                 [--threads N] [--providers LIST] [--instances N]\n"
	"                 [--max-batch-size N] [--batch-delay-us US] [--timeout-ms MS]\n"
	"                 [--max-queue N] [--max-body-mb MB] [--drain-timeout-s S]\n"
	"                 [--max-connections N] [--idle-timeout-s S]\n"
	"                 [--header-timeout-s S] [--http-threads N]\n"
	"                 [--no-access-log] [--drop-disconnected]\n"
	"Serves DIR/<model>/<version>/model.onnx over the Open Inference Protocol\n"
	"(defaults: /mnt/models, port 8080, 0.0.0.0).  DIR/<model>/config.json\n"
	"overrides the model defaults given here (docs/SERVING.md).\n";

typedef struct opts {
	const char *host;
	int port;
	int drain_s;
} opts;

static int num(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int int_opt(const char *a, const char *v, opts *o)
{
	static const struct { const char *name; long lo, hi; } t[] = {
		{ "--http-port", 0, 65535 }, { "--threads", 0, 1024 }, { "--instances", 1, 64 },
		{ "--max-batch-size", 0, 1 << 20 }, { "--batch-delay-us", 0, 10000000 },
		{ "--timeout-ms", 0, 3600000 }, { "--max-queue", 1, 1 << 20 },
		{ "--max-body-mb", 1, 1 << 16 }, { "--drain-timeout-s", 0, 3600 },
		{ "--max-connections", 1, 1 << 20 }, { "--idle-timeout-s", 1, 86400 },
		{ "--header-timeout-s", 1, 3600 }, { "--http-threads", 1, 64 },
	};
	int *dst[] = { &o->port, &srv_cfg.defaults.threads, &srv_cfg.defaults.instances,
		       &srv_cfg.defaults.max_batch_size, &srv_cfg.defaults.batch_delay_us,
		       &srv_cfg.defaults.timeout_ms, &srv_cfg.defaults.max_queue, NULL,
		       &o->drain_s, &srv_cfg.max_connections, &srv_cfg.idle_timeout_s,
		       &srv_cfg.header_timeout_s, &srv_cfg.http_threads };
	long n;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (strcmp(a, t[i].name) != 0)
			continue;
		if (!v || num(v, t[i].lo, t[i].hi, &n))
			return fprintf(stderr, "ort-serve: %s needs a number in [%ld, %ld]\n", a,
				       t[i].lo, t[i].hi), -1;
		if (dst[i])
			*dst[i] = (int)n;
		else
			srv_cfg.max_body = (size_t)n << 20;
		return 1;
	}
	return 0;
}

static int parse_args(int argc, char **argv, opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int r = int_opt(a, v, o);
		if (r < 0)
			return -1;
		if (r > 0 || ((!strcmp(a, "--model-repository") || !strcmp(a, "--host") ||
			       !strcmp(a, "--providers")) && v)) {
			if (!strcmp(a, "--model-repository"))
				srv_cfg.repo_dir = v;
			else if (!strcmp(a, "--host"))
				o->host = v;
			else if (!strcmp(a, "--providers") &&
				 strlen(v) < sizeof(srv_cfg.defaults.providers))
				strcpy(srv_cfg.defaults.providers, v);
			i++;
		} else if (!strcmp(a, "--no-access-log")) {
			srv_cfg.access_log = 0;
		} else if (!strcmp(a, "--drop-disconnected")) {
			srv_cfg.drop_disconnected = 1;
		} else {
			fprintf(stderr, "%s", usage);
			return !strcmp(a, "--help") ? 1 : -1;
		}
	}
	return 0;
}

/* Sweeps the connections' timeouts until SIGTERM/SIGINT, then waits for
 * the requests in flight (at most drain_s seconds). */
static void wait_and_drain(const sigset_t *set, int drain_s)
{
	const struct timespec tick = { 0, 250 * 1000 * 1000 };
	int sig;
	do {
		srv_conn_sweep();
		sig = sigtimedwait(set, NULL, &tick);
	} while (sig < 0);
	fprintf(stderr, "ort-serve: %s: draining %d requests in flight\n",
		sig == SIGTERM ? "SIGTERM" : "SIGINT", srv_inflight());
	srv_set_draining();
	for (int ms = 0; srv_inflight() > 0 && ms < drain_s * 1000; ms += 10) {
		if (ms % 250 == 0)
			srv_conn_sweep();
		usleep(10000);
	}
}

static int serve(const opts *o, const sigset_t *set)
{
	char err[300];
	int port = srv_conn_start(o->host, o->port, srv_cfg.http_threads, err, sizeof(err));
	if (port < 0) {
		fprintf(stderr, "ort-serve: cannot serve on %s port %d: %s\n", o->host, o->port, err);
		srv_conn_stop();
		return 1;
	}
	fprintf(stderr, "ort-serve: listening on %s port %d\n", o->host, port);
	wait_and_drain(set, o->drain_s);
	srv_conn_stop();
	return 0;
}

int main(int argc, char **argv)
{
	opts o = { .host = "0.0.0.0", .port = 8080, .drain_s = 30 };
	sigset_t set;
	int r = parse_args(argc, argv, &o);
	if (r)
		return r > 0 ? 0 : 2;
	/* blocked in every thread (they inherit it), taken by sigwait */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (srv_repo_init()) {
		srv_repo_shutdown();
		return 1;
	}
	int rc = serve(&o, &set);
	srv_repo_shutdown();
	srv_conn_free();
	fprintf(stderr, "ort-serve: stopped\n");
	return rc;
}
