/*
 * supervise: keeping providers alive.  Each provider remembers what it was
 * given (segments, external-data files, loaded subgraphs); when its process
 * dies, is killed for a missed deadline or for breaking the protocol, the
 * next request restarts it, after a back-off that grows with consecutive
 * failures, and replays that state: segments and files are handed over
 * again as descriptors (weights are mapped again, not copied) and every
 * subgraph is loaded again.  A hot swap starts a process of another binary,
 * replays into it while the old one still serves, waits (up to a deadline)
 * for the runs in flight on the old one, switches and stops the old one.
 * Runs on lanes (core_ep_run_request) hold the process's plock for
 * reading, so a restart or a swap replaces it only between them.  The requests the layers
 * above send (core_ep_request, core_ep_add_segment, core_ep_load...) go
 * through here so that a dead process is restarted before them; env.c
 * below knows processes, not their replacement.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "log.h"
#include "trace.h"

#define BACKOFF_MAX_MS 2000

unsigned core_ep_recent_failures(const core_ep *ep, unsigned window_ms)
{
	uint64_t now = ipc_now_ns(), win = (uint64_t)window_ms * 1000000u;
	unsigned n = 0;

	for (unsigned i = 0; i < CORE_FAIL_HISTORY && i < ep->failures; i++) {
		uint64_t t = ep->fail_ns[(ep->failures - i) % CORE_FAIL_HISTORY];

		if (now - t <= win)
			n++;
	}
	return n;
}

/* ---- what is replayed --------------------------------------------------- */

ortmk_status core_ep_add_file(core_ep *ep, uint64_t file_id, int fd, uint64_t size)
{
	core_file_rec *n;
	ortmk_status st;

	for (size_t i = 0; i < ep->n_files; i++)
		if (ep->files[i].id == file_id)
			return ORTMK_OK;
	n = realloc(ep->files, (ep->n_files + 1) * sizeof(*n));
	if (!n)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	ep->files = n;
	st = core_ep_ensure(ep);
	if (st == ORTMK_OK)
		st = core_proc_add_file(ep, &ep->p, file_id, fd, size);
	if (st == ORTMK_OK)
		ep->files[ep->n_files++] = (core_file_rec){file_id, fd, size};
	return st;
}

static void release(core_ep *ep, Ortmk__Release *body)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT, *rep = NULL;

	if (!ep->p.alive)
		return;
	e.kind = ORTMK__KIND__RELEASE;
	e.body_case = ORTMK__ENVELOPE__BODY_RELEASE;
	e.release = body;
	core_proc_request(ep, &ep->p, &e, CORE_CONTROL_MS, &rep);
	ipc_envelope_free(rep);
}

ortmk_status core_ep_forget_file(core_ep *ep, uint64_t file_id)
{
	Ortmk__Release r = ORTMK__RELEASE__INIT;

	for (size_t i = 0; i < ep->n_files; i++) {
		if (ep->files[i].id == file_id) {
			ep->files[i] = ep->files[--ep->n_files];
			r.has_file_id = 1;
			r.file_id = file_id;
			release(ep, &r);
			break;
		}
	}
	return ORTMK_OK;
}

static ortmk_status load_on(core_ep *ep, core_proc *p, uint64_t session, Ortmk__LoadSubgraph *l,
			    core_load_stats *stats)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT, *rep = NULL;
	ortmk_status st;

	e.kind = ORTMK__KIND__LOAD_SUBGRAPH;
	e.body_case = ORTMK__ENVELOPE__BODY_LOAD_SUBGRAPH;
	e.load_subgraph = l;
	e.has_session = 1;
	e.session = session;
	st = core_proc_request(ep, p, &e, CORE_CONTROL_MS, &rep);
	if (st == ORTMK_OK && rep->kind != ORTMK__KIND__LOAD_DONE)
		st = core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': expected LOAD_DONE", ep->name);
	if (st == ORTMK_OK && stats) {
		stats->prepack_ns = rep->load_done->prepack_ns;
		stats->prepack_hits = rep->load_done->prepack_hits;
		stats->prepack_misses = rep->load_done->prepack_misses;
		stats->prepack_written = rep->load_done->prepack_written;
	}
	ipc_envelope_free(rep);
	return st;
}

ortmk_status core_ep_load(core_ep *ep, uint64_t session, Ortmk__LoadSubgraph *l,
			  core_load_stats *stats)
{
	core_sg_rec *n = realloc(ep->sgs, (ep->n_sgs + 1) * sizeof(*n));
	core_sg_rec rec = {.id = l->subgraph_id, .session = session};
	ortmk_status st;

	if (!n)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	ep->sgs = n;
	/* A replay reads the cache it was given but writes no new one. */
	int out = l->has_prepack_out;

	l->has_prepack_out = 0;
	rec.len = ortmk__load_subgraph__get_packed_size(l);
	rec.bytes = malloc(rec.len + 1);
	if (rec.bytes)
		ortmk__load_subgraph__pack(l, rec.bytes);
	l->has_prepack_out = out;
	if (!rec.bytes)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	st = core_ep_ensure(ep);
	if (st == ORTMK_OK)
		st = load_on(ep, &ep->p, session, l, stats);
	if (st) {
		free(rec.bytes);
		return st;
	}
	ep->sgs[ep->n_sgs++] = rec;
	return ORTMK_OK;
}

ortmk_status core_ep_forget_subgraph(core_ep *ep, uint32_t id)
{
	Ortmk__Release r = ORTMK__RELEASE__INIT;

	for (size_t i = 0; i < ep->n_sgs; i++) {
		if (ep->sgs[i].id == id) {
			free(ep->sgs[i].bytes);
			ep->sgs[i] = ep->sgs[--ep->n_sgs];
			r.has_subgraph_id = 1;
			r.subgraph_id = id;
			release(ep, &r);
			break;
		}
	}
	return ORTMK_OK;
}

/* ---- restart and replay --------------------------------------------------- */

/* Gives process `to` everything `ep` has handed out so far. */
static ortmk_status replay(core_ep *ep, core_proc *to, const ipc_segtab *segs)
{
	ortmk_status st = ORTMK_OK;

	for (size_t i = 0; i < segs->n && st == ORTMK_OK; i++)
		st = core_proc_add_segment(ep, to, &segs->segs[i]);
	for (size_t i = 0; i < ep->n_files && st == ORTMK_OK; i++)
		st = core_proc_add_file(ep, to, ep->files[i].id, ep->files[i].fd, ep->files[i].size);
	for (size_t i = 0; i < ep->n_sgs && st == ORTMK_OK; i++) {
		Ortmk__LoadSubgraph *l = ortmk__load_subgraph__unpack(NULL, ep->sgs[i].len,
								       ep->sgs[i].bytes);

		if (!l)
			return core_fail(ORTMK_ERR_INTERNAL, "cannot replay subgraph %u", ep->sgs[i].id);
		st = load_on(ep, to, ep->sgs[i].session, l, NULL);
		ortmk__load_subgraph__free_unpacked(l, NULL);
	}
	return st;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Starts a process of `binary` and replays into it; `old_segs` is the set
 * of segments to hand over. */
static ortmk_status start_and_replay(core_ep *ep, core_proc *np, const char *binary,
				     const ipc_segtab *old_segs)
{
	ortmk_status st = core_proc_start(ep, np, binary);

	if (st == ORTMK_OK)
		st = replay(ep, np, old_segs);
	if (st) {
		char keep[1024];

		snprintf(keep, sizeof(keep), "%s", ortmk_last_error());
		core_proc_stop(ep, np);
		return core_fail(st, "%s", keep);
	}
	return ORTMK_OK;
}

ortmk_status core_ep_ensure(core_ep *ep)
{
	ipc_segtab segs;
	core_proc np;
	ortmk_status st;

	/* A death between requests is noticed here, so the next request goes
	 * to a new process instead of failing. */
	if (!core_proc_check_dead(ep, &ep->p))
		return ORTMK_OK;
	/* A control reply still held would keep a lane a run may wait for. */
	if (ep->p.reply_lane >= 0) {
		core_lane_put(ep, ep->p.reply_lane);
		ep->p.reply_lane = -1;
	}
	/* Back-off: consecutive failures wait 0, 10, 20, 40 ... ms (capped). */
	if (ep->backoff_ms)
		sleep_ms(ep->backoff_ms);
	ep->backoff_ms = ep->backoff_ms ? ep->backoff_ms * 2 : 10;
	if (ep->backoff_ms > BACKOFF_MAX_MS)
		ep->backoff_ms = BACKOFF_MAX_MS;
	/* Runs in flight on the dead process notice it within a few ms (their
	 * waits are sliced) and leave; then it can be replaced. */
	pthread_rwlock_wrlock(&ep->plock);
	/* The dead process's segment table is the list to replay. */
	segs = ep->p.segs;
	memset(&ep->p.segs, 0, sizeof(ep->p.segs));
	core_proc_stop(ep, &ep->p);
	st = start_and_replay(ep, &np, ep->binary, &segs);
	ipc_segtab_fini(&segs);
	if (st) {
		ep->p.alive = 0;
		pthread_rwlock_unlock(&ep->plock);
		return st;
	}
	ep->p = np;
	core_proc_moved(&ep->p);
	pthread_rwlock_unlock(&ep->plock);
	ep->restarts++;
	ep->last_restart_ms = ep->died_ns ? (double)(ipc_now_ns() - ep->died_ns) / 1e6 : 0;
	ipc_trace_event(ep->name, (int)ep->p.pid, "restart", NULL);
	ipc_log(IPC_LOG_INFO, "provider %s restarted (pid %d) in %.1f ms", ep->name,
		(int)ep->p.pid, ep->last_restart_ms);
	return ORTMK_OK;
}

/* ---- supervised requests: a dead process is restarted first ------------- */

ortmk_status core_ep_request(core_ep *ep, Ortmk__Envelope *req, int timeout_ms,
			     Ortmk__Envelope **rep)
{
	ortmk_status st = core_ep_ensure(ep);

	*rep = NULL;
	return st ? st : core_proc_request(ep, &ep->p, req, timeout_ms, rep);
}

ortmk_status core_ep_add_segment(core_ep *ep, shm_segment *s)
{
	ortmk_status st = core_ep_ensure(ep);

	return st ? st : core_proc_add_segment(ep, &ep->p, s);
}

/* A run that completes resets the back-off. */
void core_ep_healthy(core_ep *ep)
{
	__atomic_store_n(&ep->backoff_ms, 0, __ATOMIC_RELAXED);
}

/* ---- runs on lanes: not under ep->lock -------------------------------- */

/* Holds ep->plock for reading on a live process: a dead one is restarted
 * first (under ep->lock, which `locked` says the caller holds). */
static ortmk_status hold_live(core_ep *ep, int locked)
{
	for (int attempt = 0;; attempt++) {
		ortmk_status st;

		pthread_rwlock_rdlock(&ep->plock);
		if (!core_proc_check_dead(ep, &ep->p) || attempt == 1)
			return ORTMK_OK;   /* a second death: the request fails */
		pthread_rwlock_unlock(&ep->plock);
		if (!locked)
			pthread_mutex_lock(&ep->lock);
		st = core_ep_ensure(ep);
		if (!locked)
			pthread_mutex_unlock(&ep->lock);
		if (st)
			return st;
	}
}

ortmk_status core_ep_run_request(core_ep *ep, Ortmk__Envelope *req, int timeout_ms,
				 uint64_t spin_ns, int locked, int near_cpu, core_call *call)
{
	ortmk_status st = hold_live(ep, locked);

	*call = (core_call){.ep = ep, .lane = -1};
	if (st)
		return st;
	call->rd = 1;
	call->lane = core_lane_take(ep, near_cpu);
	if (call->lane >= 0) {
		if (req->run) {
			req->run->has_bind_cpu = near_cpu >= 0 && ep->p.lanes[call->lane].home >= 0;
			req->run->bind_cpu = ep->p.lanes[call->lane].home;
		}
		st = core_lane_request(ep, &ep->p, call->lane, req, timeout_ms, spin_ns, &call->rep);
		if (st != ORTMK_ERR_INTERNAL || call->rep)
			return st;
		/* Too large for a ring: over nng. */
		core_lane_put(ep, call->lane);
		call->lane = -1;
	}
	/* nng: one request at a time on the channel, under ep->lock (taken
	 * after plock is let go: the lock order). */
	pthread_rwlock_unlock(&ep->plock);
	call->rd = 0;
	if (!locked) {
		pthread_mutex_lock(&ep->lock);
		call->locked_here = 1;
	}
	st = core_ep_request(ep, req, timeout_ms, &call->rep);
	/* A ring reply from the control path's lane: released in done. */
	return st;
}

void core_ep_call_done(core_call *call)
{
	core_ep *ep = call->ep;

	if (!ep)
		return;
	if (call->lane >= 0)
		core_lane_put(ep, call->lane);
	else
		core_ep_reply_free(ep, call->rep);
	if (call->rd)
		pthread_rwlock_unlock(&ep->plock);
	if (call->locked_here)
		pthread_mutex_unlock(&ep->lock);
	*call = (core_call){.lane = -1};
}

/* ---- hot swap ------------------------------------------------------------- */

ortmk_status ortmk_env_swap_provider(ortmk_env *env, const char *provider, const char *binary)
{
	core_ep *ep = NULL;
	core_proc np;
	ortmk_status st;

	core_clear_error();
	if (!env || !provider || !binary)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "swap: NULL argument");
	if (access(binary, X_OK))
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "swap: '%s' is not an executable", binary);
	st = core_env_get_ep(env, provider, &ep);
	if (st)
		return st;
	/* The new process is started and given the state while the old one
	 * serves; then the switch waits for the runs in flight on it (plock),
	 * up to a deadline (CORE_CONTROL_MS): past it the swap fails and the
	 * old process stays. */
	pthread_mutex_lock(&ep->lock);
	st = start_and_replay(ep, &np, binary, &ep->p.segs);
	if (st == ORTMK_OK) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += CORE_CONTROL_MS / 1000;
		if (pthread_rwlock_timedwrlock(&ep->plock, &until)) {
			core_proc_stop(ep, &np);
			st = core_fail(ORTMK_ERR_TIMEOUT, "swap of provider '%s': runs in flight did not end within %d ms",
				       ep->name, CORE_CONTROL_MS);
		}
	}
	if (st == ORTMK_OK) {
		if (ep->p.reply_lane >= 0)
			core_lane_put(ep, ep->p.reply_lane);
		core_proc_stop(ep, &ep->p);
		ep->p = np;
		core_proc_moved(&ep->p);
		pthread_rwlock_unlock(&ep->plock);
		if (binary != ep->binary)
			snprintf(ep->binary, sizeof(ep->binary), "%s", binary);
		ep->swaps++;
		ipc_trace_event(ep->name, (int)ep->p.pid, "swap", binary);
		ipc_log(IPC_LOG_INFO, "provider %s swapped to %s (pid %d)", ep->name, binary,
			(int)ep->p.pid);
	}
	pthread_mutex_unlock(&ep->lock);
	return st;
}

/* ---- status --------------------------------------------------------------- */

size_t ortmk_env_provider_count(const ortmk_env *env)
{
	return env ? (size_t)env->n_eps : 0;
}

static void fill_status(core_ep *ep, ortmk_provider_status *out)
{
	memset(out, 0, sizeof(*out));
	out->struct_size = sizeof(*out);
	out->name = ep->name;
	out->binary = ep->binary;
	out->pid = ep->p.alive ? (int)ep->p.pid : -1;
	out->state = ep->p.unavailable[0] ? "unavailable" : ep->p.alive ? "running" : "dead";
	out->restarts = ep->restarts;
	out->swaps = ep->swaps;
	out->failures = ep->failures;
	out->last_failure = ep->last_failure;
	out->last_restart_ms = ep->last_restart_ms;
}

ortmk_status ortmk_env_provider_status(ortmk_env *env, size_t i, ortmk_provider_status *out)
{
	ortmk_provider_status full;

	if (!env || !out || i >= (size_t)env->n_eps)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "provider index %zu out of range", i);
	fill_status(env->eps[i], &full);
	return core_out_struct(out, &full, sizeof(full), "provider status");
}

ortmk_status ortmk_session_provider_status(const ortmk_session *s, size_t i,
					   ortmk_provider_status *out)
{
	ortmk_provider_status full;

	if (!s || !out || i >= (size_t)s->n_eps)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "provider index %zu out of range", i);
	fill_status(s->eps[i], &full);
	if (s->disabled[i])
		full.state = "disabled";
	return core_out_struct(out, &full, sizeof(full), "provider status");
}
