/*
 * ep_host: the message loop of a provider process (see ep_host.h).
 *
 * Start-up: close every inherited descriptor but the socketpair, read the
 * 32-byte token the core wrote on it, let the provider initialise, dial
 * the core's ipc:// socket, enter the sandbox (ep_sandbox.c), say HELLO
 * with the token and our pid, wait for HELLO_ACK.  Then serve requests,
 * replying to each with the reply_to set to its sequence number: those on
 * the nng channel from this thread, those on each shared-memory lane from
 * the lane's thread; one at a time, except runs of a provider that runs
 * concurrently (ep_vtable.concurrent_runs), which overlap each other.  Everything a
 * request names (segments, files, value indexes, byte ranges) is checked
 * here before the provider's vtable sees it.
 */
#include "ep_host_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

#define HANDSHAKE_TIMEOUT_MS 10000

/* ---- capability -------------------------------------------------------- */

static int on_capability(host *h, const Ortmk__Envelope *req)
{
	const Ortmk__CapabilityQuery *q = req->capability_query;
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__CapabilityReply body = ORTMK__CAPABILITY_REPLY__INIT;
	size_t n = q->n_nodes;
	protobuf_c_boolean *sup = calloc(n ? n : 1, sizeof(*sup));
	char **why = calloc(n ? n : 1, sizeof(*why));
	int rc = -ENOMEM;

	if (!sup || !why)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const Ortmk__NodeQuery *nq = q->nodes[i];
		Onnx__NodeProto *node = onnx__node_proto__unpack(NULL, nq->node.len, nq->node.data);
		char reason[512] = "";

		if (!node) {
			snprintf(reason, sizeof(reason), "undecodable node");
		} else {
			sup[i] = h->vt->supported(h->self, node, nq->opset, nq->input_dtypes,
						  (int)nq->n_input_dtypes, reason, sizeof(reason)) == 1;
			if (sup[i] && h->vt->supported_shapes)
				sup[i] = h->vt->supported_shapes(h->self, node, nq, reason,
								 sizeof(reason)) == 1;
			onnx__node_proto__free_unpacked(node, NULL);
		}
		why[i] = strdup(sup[i] ? "" : reason);
		if (!why[i])
			goto out;
	}
	body.n_supported = n;
	body.supported = sup;
	body.n_reason = n;
	body.reason = why;
	e.kind = ORTMK__KIND__CAPABILITY_REPLY;
	e.body_case = ORTMK__ENVELOPE__BODY_CAPABILITY_REPLY;
	e.capability_reply = &body;
	rc = ep_host_reply(h, req, &e);
out:
	for (size_t i = 0; why && i < n; i++)
		free(why[i]);
	free(why);
	free(sup);
	if (rc == -ENOMEM)
		rc = ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_NOMEM, "out of memory");
	return rc;
}

/* ---- run --------------------------------------------------------------- */

static ep_subgraph *find_subgraph(host *h, uint32_t id)
{
	for (size_t i = 0; i < h->n_sgs; i++)
		if (h->sgs[i]->id == id)
			return h->sgs[i];
	return NULL;
}

/* Resolves the run's references to pointers; the envelope check already
 * proved every non-dynamic byte range lies inside its segment. */
static int bind_run(host *h, const Ortmk__Run *r, const ep_subgraph *sg, ep_run *run, char *err,
		    size_t n)
{
	for (size_t i = 0; i < r->n_bindings; i++) {
		const Ortmk__TensorRef *t = r->bindings[i];
		ep_tensor *b = &run->bindings[i];

		if (t->value >= sg->n_values)
			return snprintf(err, n, "binding %zu: value %u out of range", i, t->value),
				-EINVAL;
		b->value = t->value;
		b->dtype = t->dtype;
		b->dynamic = t->dynamic;
		b->kind = t->has_kind ? (int)t->kind : 0;
		b->rank = (int)t->n_dims;
		if (t->n_dims)
			memcpy(b->dims, t->dims, t->n_dims * sizeof(int64_t));
		b->nbytes = t->nbytes;
		if (t->has_buffer_id) {
			int rc = ep_dev_bind(h, t, b, err, n);

			if (rc)
				return rc;
		} else if (!t->dynamic) {
			b->data = (uint8_t *)ipc_segtab_find(&h->segs, t->segment_id)->base + t->offset;
		}
	}
	if (r->has_dyn_segment) {
		shm_segment *s = ipc_segtab_find(&h->segs, r->dyn_segment);

		run->dyn_base = (uint8_t *)s->base + r->dyn_offset;
		run->dyn_size = r->dyn_size;
	}
	return 0;
}

/* Where a profiled run's spans go: the lane's buffer, or the host's for
 * a run that came over nng (allocated on the first). */
static ep_span *span_buffer(host *h, host_lane *lane)
{
	ep_span **buf = lane ? &lane->spans : &h->spans;

	if (!*buf)
		*buf = calloc(EP_PROFILE_MAX_SPANS, sizeof(**buf));
	return *buf;
}

/* Binds the lane's thread to `cpu` (Run.bind_cpu: when runs outnumber
 * CPUs, its lane's CPU, where the application thread waiting for it is),
 * or lets it run anywhere again (-1).  A system call only when that changes;
 * a CPU this process may not use, or a failure, leaves it unbound. */
static void lane_place(host_lane *lane, int cpu)
{
	cpu_set_t one;

	if (!lane->can_bind)
		return;
	if (cpu >= 0 && (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &lane->all)))
		cpu = -1;
	if (cpu == lane->cpu)
		return;
	CPU_ZERO(&one);
	if (cpu >= 0)
		CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(cpu_set_t), cpu >= 0 ? &one : &lane->all)) {
		lane->can_bind = 0;
		return;
	}
	lane->cpu = cpu;
}

#define EP_RUN_LOCAL_BINDINGS 16

/* A RUN.  Served under the read lock when the provider runs concurrently
 * (then nothing here may touch what another run uses: the error text,
 * the spans and the reply are the run's or its lane's). */
static int on_run(host *h, host_lane *lane, const Ortmk__Envelope *req)
{
	const Ortmk__Run *r = req->run;
	ep_subgraph *sg = find_subgraph(h, r->subgraph_id);
	ep_run run = {.run_id = r->run_id, .n_bindings = r->n_bindings,
		      .stream = req->has_stream ? req->stream : 0};
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Error body = ORTMK__ERROR__INIT;
	ep_profile profile = {0};
	uint64_t t0 = ipc_now_ns();
	char err[1024] = "";
	int rc;

	if (!sg)
		return ep_host_reply_error_lane(h, lane, req, ORTMK__ERROR_CODE__E_INVALID,
						"run of an unknown subgraph");
	if (lane)
		lane_place(lane, r->has_bind_cpu ? r->bind_cpu : -1);
	/* a run's few bindings on the stack (a calloc and free per run
	 * showed in the CNN's profile) */
	ep_tensor local[EP_RUN_LOCAL_BINDINGS];

	if (r->n_bindings <= EP_RUN_LOCAL_BINDINGS)
		run.bindings = memset(local, 0, r->n_bindings * sizeof(*local));
	else
		run.bindings = calloc(r->n_bindings + 1, sizeof(*run.bindings));
	if (!run.bindings)
		return ep_host_reply_error_lane(h, lane, req, ORTMK__ERROR_CODE__E_NOMEM, "out of memory");
	if (r->has_cancel_segment && r->has_cancel_token) {
		const shm_segment *cs = ipc_segtab_find(&h->segs, r->cancel_segment);

		if (cs && cs->size >= sizeof(uint64_t)) {
			run.cancel = (const _Atomic uint64_t *)cs->base;
			run.cancel_token = r->cancel_token;
		}
	}
	if (r->has_profile && r->profile && (profile.spans = span_buffer(h, lane))) {
		profile.cap = EP_PROFILE_MAX_SPANS;
		run.profile = &profile;
	}
	rc = bind_run(h, r, sg, &run, err, sizeof(err));
	if (rc == 0)
		rc = h->vt->run(h->self, sg, &run, err, sizeof(err));
	if (rc == 0 && (rc = ep_dev_after_run(h, &run)))
		snprintf(err, sizeof(err), "%s", h->err);
	if (rc == 0) {
		rc = ep_host_reply_result(h, lane, req, &run, t0, ipc_now_ns() - t0);
		if (run.bindings != local)
			free(run.bindings);
		return rc;
	}
	if (run.bindings != local)
		free(run.bindings);
	body.code = rc == -EINVAL ? ORTMK__ERROR_CODE__E_INVALID :
		rc == -ENOMEM ? ORTMK__ERROR_CODE__E_NOMEM : ep_host_code(rc);
	body.message = err[0] ? err : "run failed";
	if (rc == EP_E_DYN_OVERFLOW) {
		body.has_needed = 1;
		body.needed = run.dyn_needed;
	}
	e.kind = ORTMK__KIND__ERROR;
	e.body_case = ORTMK__ENVELOPE__BODY_ERROR;
	e.error = &body;
	return ep_host_reply_lane(h, lane, req, &e);
}

/* ---- release and the loop --------------------------------------------- */

static int on_release(host *h, const Ortmk__Envelope *req)
{
	const Ortmk__Release *r = req->release;

	if (r->has_subgraph_id) {
		for (size_t i = 0; i < h->n_sgs; i++) {
			if (h->sgs[i]->id == r->subgraph_id) {
				ep_host_subgraph_free(h, h->sgs[i]);
				h->sgs[i] = h->sgs[--h->n_sgs];
				break;
			}
		}
	}
	if (r->has_segment_id) {
		shm_segment s;

		if (ipc_segtab_remove(&h->segs, r->segment_id, &s))
			shm_segment_destroy(&s);
	}
	if (r->has_buffer_id)
		ep_dev_release_buffer(h, r->buffer_id);
	if (r->has_stream)
		ep_dev_release_stream(h, r->stream);
	if (r->has_file_id) {
		for (size_t i = 0; i < h->n_files; i++) {
			if (h->files[i].id == r->file_id) {
				close(h->files[i].fd);
				h->files[i] = h->files[--h->n_files];
				break;
			}
		}
	}
	return ep_host_reply_ack(h, req);
}

static int on_ring_setup(host *h, const Ortmk__Envelope *req);

/* Handles one request that came by `lane` (NULL: nng); 1 to stop serving.
 * Ring requests live in the lane's arena and are not freed here.  Every
 * request but a concurrent RUN is handled under the write lock with
 * h->cur_lane == lane. */
static int dispatch(host *h, host_lane *lane, Ortmk__Envelope *req)
{
	int kept = lane != NULL, rc;

	if (ep_fault_fire(h, lane, req)) {
		if (!kept)
			ipc_envelope_free(req);
		return 0;
	}
	switch (req->kind) {
	case ORTMK__KIND__ADD_SEGMENT: rc = ep_host_on_add_segment(h, req); break;
	case ORTMK__KIND__ADD_FILE: rc = ep_host_on_add_file(h, req); break;
	case ORTMK__KIND__CAPABILITY_QUERY: rc = on_capability(h, req); break;
	case ORTMK__KIND__LOAD_SUBGRAPH: rc = ep_host_on_load(h, req, &kept); break;
	case ORTMK__KIND__RUN: rc = on_run(h, lane, req); break;
	case ORTMK__KIND__RELEASE: rc = on_release(h, req); break;
	case ORTMK__KIND__RING_SETUP: rc = on_ring_setup(h, req); break;
	case ORTMK__KIND__ALLOC: rc = ep_dev_on_alloc(h, req); break;
	case ORTMK__KIND__COPY: rc = ep_dev_on_copy(h, req, 0); break;
	case ORTMK__KIND__SHUTDOWN: rc = 1; break;
	default:
		rc = ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_INVALID, "unexpected message kind");
	}
	if (!kept)
		ipc_envelope_free(req);
	return rc;
}

/* Runs that may overlap: the provider said so, and no device buffer table
 * is touched by a run (a provider with device memory, or emulating it). */
static int runs_concurrently(const host *h)
{
	return h->vt->concurrent_runs && !ep_dev_has_memory(h);
}

/* Handles what arrived on a lane (rc from ipc_ring_recv) under the write
 * lock; 1 to stop serving. */
static int lane_exclusive(host *h, host_lane *lane, int rc, Ortmk__Envelope *req,
			  const char *err)
{
	int stop = 0;

	pthread_rwlock_wrlock(&h->mu);
	h->cur_lane = lane;
	if (rc == 0) {
		stop = dispatch(h, lane, req);
	} else {
		/* The core waits on the ring for an answer: give it one. */
		Ortmk__Envelope unknown = ORTMK__ENVELOPE__INIT;
		char msg[600];

		snprintf(msg, sizeof(msg), "provider rejected a message: %s", err);
		ipc_log(IPC_LOG_ERROR, "%s", msg);
		ep_host_reply_error(h, &unknown, ORTMK__ERROR_CODE__E_INVALID, msg);
	}
	h->cur_lane = NULL;
	pthread_rwlock_unlock(&h->mu);
	return stop;
}

/* One request that lane_main found waiting on the lane: decoded (the
 * check reads the segment table) under the read lock, a RUN run there
 * when runs may overlap, anything else under the write lock.  1: stop. */
static int lane_serve(host *h, host_lane *lane)
{
	Ortmk__Envelope *req = NULL;
	char err[512] = "";
	int rc, stop;

	pthread_rwlock_rdlock(&h->mu);
	rc = ipc_ring_recv(&lane->ring, &lane->ring.req, 0, 0, &h->segs, &req, err, sizeof(err));
	if (rc == 0 && req->kind == ORTMK__KIND__RUN && runs_concurrently(h)) {
		stop = dispatch(h, lane, req) != 0;
		pthread_rwlock_unlock(&h->mu);
		return stop;
	}
	pthread_rwlock_unlock(&h->mu);
	/* The message stays in the lane's arena: the check above holds, as
	 * the core releases nothing a request in flight names. */
	return lane_exclusive(h, lane, rc, req, err) != 0;
}

/* A lane's thread: waits for requests unlocked and serves them. */
static void *lane_main(void *arg)
{
	host_lane *lane = arg;
	host *h = lane->h;
	int idle = 0;

	lane->cpu = -1;
	lane->can_bind = sched_getaffinity(0, sizeof(cpu_set_t), &lane->all) == 0;

	while (!atomic_load(&h->stopping)) {
		/* Spinning for the next request saves its sender a wake-up of
		 * this thread, but while another lane computes it takes that
		 * lane's CPU (2 concurrent runs on 2 cores): then sleep. */
		int rc = ipc_ring_wait(&lane->ring.req, 1000,
				       idle || atomic_load(&h->busy_lanes) ? 0 : IPC_RING_SPIN_NS);

		idle = rc == -ETIMEDOUT;
		if (idle)
			continue;
		if (rc == -EPIPE)
			break;
		atomic_fetch_add(&h->busy_lanes, 1);
		if (lane_serve(h, lane))
			atomic_store(&h->stopping, 1);
		atomic_fetch_sub(&h->busy_lanes, 1);
	}
	return NULL;
}

/* How many lanes this provider serves (HELLO's run_lanes). */
static int max_lanes(const host *h)
{
	return runs_concurrently(h) ? EP_MAX_LANES : 1;
}

static int on_ring_setup(host *h, const Ortmk__Envelope *req)
{
	const shm_segment *s = ipc_segtab_find(&h->segs, req->ring_setup->segment_id);
	host_lane *lane;

	if (h->n_lanes >= max_lanes(h) || !s)
		return ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_INVALID, "ring segment unusable");
	if (!(lane = calloc(1, sizeof(*lane))))
		return ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_NOMEM, "out of memory");
	lane->h = h;
	if (ipc_ring_attach(&lane->ring, s->base, s->size)) {
		free(lane);
		return ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_INVALID, "ring segment unusable");
	}
	if (pthread_create(&lane->thread, NULL, lane_main, lane)) {
		ipc_ring_detach(&lane->ring);
		free(lane);
		return ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_INTERNAL, "cannot start the ring thread");
	}
	h->lanes[h->n_lanes++] = lane;
	return ep_host_reply_ack(h, req);
}

static void lanes_stop(host *h)
{
	atomic_store(&h->stopping, 1);
	for (int i = 0; i < h->n_lanes; i++)
		ipc_ring_close(&h->lanes[i]->ring.req);
	for (int i = 0; i < h->n_lanes; i++) {
		pthread_join(h->lanes[i]->thread, NULL);
		ipc_ring_detach(&h->lanes[i]->ring);
		free(h->lanes[i]->spans);
		free(h->lanes[i]);
	}
	h->n_lanes = 0;
}

static char unavailable[256];

void ep_host_unavailable(const char *why)
{
	snprintf(unavailable, sizeof(unavailable), "%s", why && why[0] ? why : "no device");
}

/* Everything the process needs from the file system is open by now (the
 * provider's init, the channel).  A filter that cannot be loaded leaves
 * the process unconfined, so it says it is unavailable and gets no node. */
static void sandbox(host *h)
{
	const ep_sandbox_policy *p = h->vt->sandbox;
	int mode = ep_sandbox_mode();
	char err[256] = "", why[400];

	if (mode == EP_SANDBOX_OFF)
		ipc_log(IPC_LOG_INFO, "system-call sandbox off (ORTMK_SANDBOX=0)");
	if (ep_sandbox_enter(p, mode, err, sizeof(err)) == 0)
		return;
	snprintf(why, sizeof(why), "the system-call sandbox could not be set up (%s); "
		 "ORTMK_SANDBOX=0 runs providers without it", err);
	ipc_log(IPC_LOG_ERROR, "%s", why);
	ep_host_unavailable(why);
}

static int handshake(host *h)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT, *ack = NULL;
	Ortmk__Hello body = ORTMK__HELLO__INIT;
	uint8_t token[32];
	char detail[256] = "";
	const char *url = getenv("ORTMK_EP_URL");
	const char *fds = getenv("ORTMK_EP_FD");
	int rc;

	if (!url || !fds) {
		ipc_log(IPC_LOG_ERROR, "must be started by libortmk (ORTMK_EP_URL unset)");
		return -EINVAL;
	}
	h->chan.fd_sock = atoi(fds);
	rc = ipc_recv_bytes(h->chan.fd_sock, token, sizeof(token), HANDSHAKE_TIMEOUT_MS);
	if (rc == 0)
		rc = h->vt->init(&h->self, detail, sizeof(detail));
	h->inited = rc == 0;
	if (rc == 0)
		rc = ipc_chan_dial(&h->chan, url);
	if (rc)
		return rc;
	sandbox(h);
	body.protocol_version = IPC_PROTOCOL_VERSION;
	body.token = (ProtobufCBinaryData){sizeof(token), token};
	body.pid = (uint32_t)getpid();
	body.provider = (char *)h->vt->name;
	body.detail = detail;
	body.has_device_memory = 1;
	body.device_memory = ep_dev_has_memory(h);
	body.unavailable = unavailable[0] ? unavailable : NULL;
	body.has_run_lanes = 1;
	body.run_lanes = (uint32_t)max_lanes(h);
	e.kind = ORTMK__KIND__HELLO;
	e.body_case = ORTMK__ENVELOPE__BODY_HELLO;
	e.hello = &body;
	rc = ipc_send(&h->chan, &e);
	if (rc == 0)
		rc = ipc_recv(&h->chan, HANDSHAKE_TIMEOUT_MS, &ack, h->err, sizeof(h->err));
	if (rc == 0 && (ack->kind != ORTMK__KIND__HELLO_ACK || !ack->hello_ack->accepted))
		rc = -EACCES;
	ipc_envelope_free(ack);
	return rc;
}

int ep_host_main(const ep_vtable *vt, int argc, char **argv)
{
	host h = {.vt = vt};
	pthread_rwlockattr_t attr;
	int rc, status = 0;

	(void)argc;
	(void)argv;
	if (ep_sandbox_mode() != EP_SANDBOX_OFF) {
		ep_sandbox_prepare();
		if (getenv("ORTMK_EP_FD"))
			ep_sandbox_close_fds(atoi(getenv("ORTMK_EP_FD")));
	}
	/* A waiting load or release goes before new runs, or a steady stream
	 * of runs would keep it waiting for ever. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&h.mu, &attr);
	pthread_rwlockattr_destroy(&attr);
	ipc_chan_init(&h.chan);
	ipc_log_set_role(vt->name);
	/* The core is our reason to exist: watch it and leave with it.  Not
	 * PR_SET_PDEATHSIG, which fires when the spawning *thread* exits. */
	h.chan.peer_pidfd = (int)syscall(SYS_pidfd_open, getppid(), 0);
	if (h.chan.peer_pidfd < 0 || getppid() == 1)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	h.chan.segs = &h.segs;
	ep_fault_parse(&h.fault, vt->name);
	ep_dev_init(&h);
	rc = handshake(&h);
	if (rc) {
		/* the core went away or refused us: what init made is freed
		 * (LeakSanitizer found the CPU provider's state left behind) */
		ipc_log(IPC_LOG_ERROR, "handshake failed: %s", strerror(-rc));
		ep_dev_fini(&h);
		if (vt->fini && h.inited)
			vt->fini(h.self);
		ipc_chan_close(&h.chan);
		return 1;
	}
	for (;;) {
		Ortmk__Envelope *req = NULL;

		rc = ipc_recv(&h.chan, 1000, &req, h.err, sizeof(h.err));
		if (rc == -ETIMEDOUT) {
			if (getppid() == 1)
				break;
			continue;
		}
		if (rc == -EPROTO) {
			/* We cannot know which request this was: answer with
			 * reply_to 0 so the core fails whatever it waits for. */
			Ortmk__Envelope unknown = ORTMK__ENVELOPE__INIT;
			char msg[1100];

			snprintf(msg, sizeof(msg), "provider rejected a message: %s", h.err);
			ipc_log(IPC_LOG_ERROR, "%s", msg);
			ep_host_reply_error(&h, &unknown, ORTMK__ERROR_CODE__E_INVALID, msg);
			continue;
		}
		if (rc) {
			status = 1;
			break;
		}
		pthread_rwlock_wrlock(&h.mu);
		rc = dispatch(&h, NULL, req);
		pthread_rwlock_unlock(&h.mu);
		if (rc || atomic_load(&h.stopping))
			break;
	}
	lanes_stop(&h);
	while (h.n_sgs)
		ep_host_subgraph_free(&h, h.sgs[--h.n_sgs]);
	free(h.sgs);
	for (size_t i = 0; i < h.n_files; i++)
		close(h.files[i].fd);
	free(h.files);
	for (size_t i = 0; i < h.segs.n; i++)
		shm_segment_destroy(&h.segs.segs[i]);
	ep_dev_fini(&h);
	free(h.spans);
	ipc_segtab_fini(&h.segs);
	if (vt->fini)
		vt->fini(h.self);
	ipc_chan_close(&h.chan);
	pthread_rwlock_destroy(&h.mu);
	return status;
}
