/*
 * ep_fault: fault injection for the supervision and sandbox tests (the
 * actions are listed in ep_host_int.h; docs/SUPERVISION.md).  Inert unless
 * ORTMK_EP_FAULT is set in the provider's environment, which it inherits
 * from the application.  ep_host's dispatch asks ep_fault_fire before
 * handling each request.
 */
#include "ep_host_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"

/* An optional "PROVIDER/" prefix aims the fault at one provider only
 * (ORTMK_EP_FAULT=vulkan/crash-after:run:1); without it every provider
 * process fires. */
void ep_fault_parse(fault *f, const char *provider)
{
	static const char *actions[] = {"", "crash-after", "hang-after", "exit-after", "garbage-after",
					"badseq-after", "badref-after", "nosignal-after", "open-after",
					"socket-after", "exec-after", "affinity-after"};
	const char *spec = getenv("ORTMK_EP_FAULT"), *slash;
	char act[32], kind[32];
	long n;

	memset(f, 0, sizeof(*f));
	slash = spec ? strchr(spec, '/') : NULL;
	if (slash) {
		if ((size_t)(slash - spec) != strlen(provider) ||
		    strncmp(spec, provider, (size_t)(slash - spec)) != 0)
			return;
		spec = slash + 1;
	}
	if (!spec || sscanf(spec, "%31[a-z-]:%31[a-z_]:%ld", act, kind, &n) != 3)
		return;
	for (int a = 1; a <= (int)FAULT_AFFINITY; a++)
		if (strcmp(act, actions[a]) == 0)
			f->action = (enum fault_action)a;
	for (int k = 1; strcmp(ipc_kind_name(k), "UNKNOWN") != 0; k++) {
		char lower[32];
		const char *name = ipc_kind_name(k);
		size_t i;

		for (i = 0; name[i] && i < sizeof(lower) - 1; i++)
			lower[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
		lower[i] = 0;
		if (strcmp(lower, kind) == 0)
			f->kind = k;
	}
	f->after = n;
	if (!f->kind)
		f->action = FAULT_NONE;
}

static void fault_badref(host *h, host_lane *lane, const Ortmk__Envelope *req)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Result body = ORTMK__RESULT__INIT;
	Ortmk__TensorRef t = ORTMK__TENSOR_REF__INIT, *pt = &t;
	int64_t dims[1] = {4};

	t.dtype = 1;
	t.n_dims = 1;
	t.dims = dims;
	t.nbytes = 16;
	t.segment_id = h->segs.n ? h->segs.segs[0].id : 1;
	t.offset = UINT64_C(1) << 40;
	body.run_id = req->kind == ORTMK__KIND__RUN ? req->run->run_id : 0;
	body.n_outputs = 1;
	body.outputs = &pt;
	e.kind = ORTMK__KIND__RESULT;
	e.body_case = ORTMK__ENVELOPE__BODY_RESULT;
	e.result = &body;
	ep_host_reply_lane(h, lane, req, &e);
}

/* What the sandbox must stop (docs/SECURITY.md): a file opened by path, a
 * network socket, a program run, the CPUs of another process (the
 * application's) set.  Confined, the call kills the process (SIGSYS)
 * before it does anything; without the filter it returns, and the
 * request is served normally after an error line. */
static void fault_forbidden(enum fault_action a)
{
	static const char *what[] = {"open(\"/etc/passwd\")", "socket(AF_INET)", "execve",
				     "sched_setaffinity(the application)"};
	char *argv[] = {"ortmk-sandbox-probe", NULL}, *envp[] = {NULL};
	int fd = -1, i = a == FAULT_OPEN ? 0 : a == FAULT_SOCKET ? 1 : a == FAULT_EXEC ? 2 : 3;
	int passed = 0;   /* a probe without a descriptor that got through */
	cpu_set_t set;

	if (a == FAULT_OPEN)
		fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	else if (a == FAULT_SOCKET)
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	else if (a == FAULT_EXEC)
		execve("/nonexistent/ortmk-sandbox-probe", argv, envp);
	else if (sched_getaffinity(getppid(), sizeof(set), &set) == 0)
		/* its own set again: harmless if it gets through */
		passed = sched_setaffinity(getppid(), sizeof(set), &set) == 0;
	ipc_log(IPC_LOG_ERROR, "fault injection: %s was not stopped (%s): no filter refused it",
		what[i], fd >= 0 || passed ? "it succeeded" : strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* Returns 1 when the fault replaced the normal handling of `req`. */
int ep_fault_fire(host *h, host_lane *lane, const Ortmk__Envelope *req)
{
	fault *f = &h->fault;
	uint8_t junk[64];

	long seen;

	if (f->action == FAULT_NONE || (int)req->kind != f->kind || (seen = ++f->seen) < f->after)
		return 0;
	ipc_log(IPC_LOG_WARN, "fault injection fires on %s #%ld", ipc_kind_name(f->kind), seen);
	switch (f->action) {
	case FAULT_CRASH:
		raise(SIGSEGV);
		break;
	case FAULT_HANG:
		for (;;)
			pause();
	case FAULT_EXIT:
		_exit(3);
	case FAULT_GARBAGE:
		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = (uint8_t)rand();
		if (lane) {
			/* On the ring, garbage is an envelope of an unknown kind. */
			Ortmk__Envelope bad = ORTMK__ENVELOPE__INIT;

			bad.kind = 99;
			bad.has_reply_to = 1;
			bad.reply_to = req->seq;
			ipc_ring_send(&lane->ring, &lane->ring.rep, &bad, &h->chan.next_seq);
			return 1;
		}
		nng_send(h->chan.sock, junk, sizeof(junk), 0);
		return 1;
	case FAULT_BADSEQ: {
		Ortmk__Envelope other = *req;

		Ortmk__Envelope ack = ORTMK__ENVELOPE__INIT;
		Ortmk__Ack body = ORTMK__ACK__INIT;

		other.seq += 1000;
		ack.kind = ORTMK__KIND__ACK;
		ack.body_case = ORTMK__ENVELOPE__BODY_ACK;
		ack.ack = &body;
		ep_host_reply_lane(h, lane, &other, &ack);
		return 1;
	}
	case FAULT_BADREF:
		fault_badref(h, lane, req);
		return 1;
	case FAULT_OPEN:
	case FAULT_SOCKET:
	case FAULT_EXEC:
	case FAULT_AFFINITY:
		fault_forbidden(f->action);
		return 0;
	case FAULT_NOSIGNAL:
		if (req->kind != ORTMK__KIND__COPY)
			return 0;
		ep_dev_on_copy(h, req, 1);
		return 1;
	default:
		break;
	}
	return 0;
}
