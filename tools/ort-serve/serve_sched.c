/* ort-serve: how a model's requests are run.  A model version has a
 * bounded queue and `instances` workers; each worker owns an environment
 * and a session of its own, hence its own provider processes: that is how
 * runs of one model proceed in parallel (one session runs one request at a
 * time, core/run.c).  With max_batch_size > 1 a worker that takes a request
 * waits up to batch_delay_us for more whose inputs concatenate on dim 0,
 * runs them as one and splits the outputs back.  Requests past their
 * timeout in the queue are answered 503 without running.
 *
 * A request that finds the queue empty and an instance idle (and no batch
 * to wait for) is run at once on the I/O thread that read it: handing it
 * to the idle worker would cost a thread wakeup for nothing, tens of
 * microseconds on a busy 2-core machine (docs/SERVING.md, "Measured").
 * The instance is claimed meanwhile, so its worker leaves it alone; the
 * other I/O threads keep reading.  Requests queued while it runs are run
 * by that thread too, until the queue is empty.  Called by serve_repo.c (start, stop)
 * and serve_http.c (submit). */
#include "serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_BATCH_JOBS 256

static int same_shape_but_0(const srv_tensor *a, const srv_tensor *b)
{
	if (strcmp(a->name, b->name) != 0 || a->dtype != b->dtype || a->rank != b->rank)
		return 0;
	for (size_t d = 1; d < a->rank; d++)
		if (a->dims[d] != b->dims[d])
			return 0;
	return 1;
}

/* Whether b can join a batch led by a: same inputs but for dim 0, same
 * requested outputs. */
static int batchable_with(const srv_job *a, const srv_job *b)
{
	if (b->batch < 0 || a->req.n_in != b->req.n_in || a->req.n_out != b->req.n_out)
		return 0;
	for (size_t i = 0; i < a->req.n_in; i++)
		if (!same_shape_but_0(&a->req.in[i], &b->req.in[i]))
			return 0;
	for (size_t i = 0; i < a->req.n_out; i++)
		if (strcmp(a->req.out[i].name, b->req.out[i].name) != 0)
			return 0;
	return 1;
}

/* dim 0 shared by every input, or -1 (strings, scalars, mismatch). */
static int64_t batch_dim(const srv_request *r)
{
	int64_t b = -1;
	for (size_t i = 0; i < r->n_in; i++) {
		const srv_tensor *t = &r->in[i];
		if (t->dtype == ORTMK_STRING || t->rank == 0 || (b >= 0 && t->dims[0] != b))
			return -1;
		b = t->dims[0];
	}
	return b;
}

int srv_model_reserve(srv_model *m, char *err, size_t errlen)
{
	pthread_mutex_lock(&m->mu);
	int full = m->queued >= m->cfg.max_queue;
	if (!full)
		m->queued++;
	pthread_mutex_unlock(&m->mu);
	if (full)
		snprintf(err, errlen, "model '%s': queue full (%d requests waiting)", m->name,
			 m->cfg.max_queue);
	return full ? 503 : 0;
}

static ortmk_status run_batch(srv_instance *in, srv_job **jobs, size_t n);
static void heal(srv_instance *in);
static size_t take_batch(srv_instance *in, srv_job **jobs, int wait);
static void run_taken(srv_instance *in, srv_job **jobs, size_t n);

/* An instance for a run on the caller's thread, claimed; NULL when the
 * job has to queue (others wait, every instance busy, or a batch could
 * still form).  Under m->mu. */
static srv_instance *claim_idle(srv_model *m, const srv_job *job)
{
	if (m->head || m->stopping || (job->batch >= 0 && m->cfg.batch_delay_us > 0 &&
				       job->batch < m->cfg.max_batch_size))
		return NULL;
	for (int i = 0; i < m->n_inst; i++)
		if (!m->inst[i].claimed) {
			m->inst[i].claimed = 1;
			return &m->inst[i];
		}
	return NULL;
}

void srv_model_enqueue(srv_model *m, srv_job *job)
{
	job->batch = m->cfg.max_batch_size > 1 ? batch_dim(&job->req) : -1;
	job->t_enqueued = srv_now();
	job->next = NULL;
	pthread_mutex_lock(&m->mu);
	srv_instance *in = claim_idle(m, job);
	if (in) {
		m->queued--;              /* the place reserved is not needed */
		pthread_mutex_unlock(&m->mu);
		srv_stats_queue(m->stats, 0);
		heal(in);                 /* as in run_taken */
		if (run_batch(in, &job, 1) != ORTMK_OK)
			heal(in);
		/* requests that came while it ran (the next one of a client that
		 * got its answer, say) run here too: waking the worker for them
		 * would cost the wakeup this path avoids */
		srv_job *more[MAX_BATCH_JOBS];
		size_t n;
		while ((n = take_batch(in, more, 0)) > 0)
			run_taken(in, more, n);
		/* after this unlock m may be gone: srv_model_stop waits for claims */
		pthread_mutex_lock(&m->mu);
		in->claimed = 0;
		if (m->head || m->stopping)   /* its worker may be the one to take them */
			pthread_cond_broadcast(&m->cv);
		pthread_mutex_unlock(&m->mu);
		return;
	}
	if (m->tail)
		m->tail->next = job;
	else
		m->head = job;
	m->tail = job;
	/* a claimed instance takes the queue when its run ends: wake a worker
	 * only when one is free to take it */
	for (int i = 0; i < m->n_inst; i++)
		if (!m->inst[i].claimed) {
			pthread_cond_signal(&m->cv);
			break;
		}
	pthread_mutex_unlock(&m->mu);
}

/* Removes job from the queue (under m->mu). */
static void unlink_job(srv_model *m, srv_job *job)
{
	srv_job **pp = &m->head, *prev = NULL;
	while (*pp != job) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	*pp = job->next;
	if (m->tail == job)
		m->tail = prev;
	m->queued--;
}

static void deadline_after(struct timespec *ts, int us)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_nsec += (long)(us % 1000000) * 1000;
	ts->tv_sec += us / 1000000 + ts->tv_nsec / 1000000000;
	ts->tv_nsec %= 1000000000;
}

/* Takes the next job and, when batching, those that join it, for
 * instance `in`.  wait: its worker, which waits for a job and for the
 * instance, then claims it until release(); else the caller holds the
 * claim already and takes only what is queued.  Returns the number taken
 * (0: stopping, or nothing queued). */
static size_t take_batch(srv_instance *in, srv_job **jobs, int wait)
{
	srv_model *m = in->m;
	struct timespec until;
	size_t n = 0;
	int64_t total = 0;
	pthread_mutex_lock(&m->mu);
	while (wait && (!m->head || in->claimed) && !m->stopping)
		pthread_cond_wait(&m->cv, &m->mu);
	if (!m->head || (wait && in->claimed) || m->stopping)
		goto out;
	in->claimed = 1;
	jobs[n++] = m->head;
	unlink_job(m, m->head);
	total = jobs[0]->batch;
	if (total < 0 || total >= m->cfg.max_batch_size)
		goto out;
	deadline_after(&until, m->cfg.batch_delay_us);
	for (;;) {
		for (srv_job *j = m->head, *next; j && n < MAX_BATCH_JOBS; j = next) {
			next = j->next;
			if (batchable_with(jobs[0], j) && total + j->batch <= m->cfg.max_batch_size) {
				unlink_job(m, j);
				jobs[n++] = j;
				total += j->batch;
			}
		}
		if (total >= m->cfg.max_batch_size || n == MAX_BATCH_JOBS || m->stopping ||
		    pthread_cond_timedwait(&m->cv, &m->mu, &until) == ETIMEDOUT)
			break;
	}
out:
	pthread_mutex_unlock(&m->mu);
	return n;
}

/* The output names to fetch: the requested ones or all of them. */
static int output_names(srv_instance *in, const srv_request *r, const char **names,
			int *binary, size_t *n)
{
	if (r->n_out) {
		for (size_t i = 0; i < r->n_out; i++) {
			names[i] = r->out[i].name;
			binary[i] = r->out[i].binary || r->binary_all;
		}
		*n = r->n_out;
		return 0;
	}
	*n = ortmk_session_output_count(in->s);
	for (size_t i = 0; i < *n; i++) {
		ortmk_dtype t;
		const int64_t *dims;
		size_t rank;
		if (ortmk_session_output_info(in->s, i, &names[i], &t, &dims, &rank))
			return -1;
		binary[i] = r->binary_all;
	}
	return 0;
}

/* Builds input k of a batch: the jobs' tensors stacked on dim 0. */
static ortmk_status stack_input(srv_instance *in, srv_job **jobs, size_t n, int64_t total,
				size_t k, ortmk_value **out)
{
	const srv_tensor *t0 = &jobs[0]->req.in[k];
	if (n == 1 && t0->dtype == ORTMK_STRING)
		return ortmk_value_create_strings(in->env, t0->dims, t0->rank,
						  (const char *const *)t0->strs, out);
	if (n == 1)
		return ortmk_value_create_copy(in->env, t0->dtype, t0->dims, t0->rank, t0->data,
					       t0->nbytes, out);
	int64_t dims[SRV_MAX_RANK];
	memcpy(dims, t0->dims, sizeof(dims));
	dims[0] = total;
	ortmk_status st = ortmk_value_create(in->env, t0->dtype, dims, t0->rank, out);
	char *p = st ? NULL : ortmk_value_data(*out);
	for (size_t j = 0; p && j < n; j++) {
		memcpy(p, jobs[j]->req.in[k].data, jobs[j]->req.in[k].nbytes);
		p += jobs[j]->req.in[k].nbytes;
	}
	return st;
}

static int status_http(ortmk_status st)
{
	return st == ORTMK_ERR_INPUT || st == ORTMK_ERR_INVALID_ARGUMENT ? 400 :
	       st == ORTMK_ERR_TIMEOUT ? 503 : 500;
}

/* Answers each job from the batch's outputs (rows split back), or all of
 * them with one error. */
static void answer(srv_model *m, srv_job **jobs, size_t n, const char **names, const int *bin,
		   ortmk_value **outs, size_t n_out, int64_t total)
{
	srv_outview views[64];
	for (size_t i = 0; i < n_out; i++) {
		size_t r = ortmk_value_rank(outs[i]);
		if (ortmk_value_kind_of(outs[i]) != ORTMK_VALUE_TENSOR ||
		    (n > 1 && (r == 0 || ortmk_value_dims(outs[i])[0] != total))) {
			for (size_t j = 0; j < n; j++)
				srv_job_finish(jobs[j], 500, NULL, NULL, n > 1 ?
					       "an output does not follow the batch dimension "
					       "(set max_batch_size 0 for this model)" :
					       "an output is not a tensor");
			return;
		}
	}
	int64_t row = 0;
	for (size_t j = 0; j < n; j++) {
		srv_buf hdr = { 0 }, b = { 0 };
		for (size_t i = 0; i < n_out; i++) {
			srv_outview *v = &views[i];
			size_t rank = ortmk_value_rank(outs[i]), per_row = 1;
			memcpy(v->dims, ortmk_value_dims(outs[i]), rank * sizeof(int64_t));
			for (size_t d = 1; d < rank; d++)
				per_row *= (size_t)v->dims[d];
			v->name = names[i];
			v->v = outs[i];
			v->rank = rank;
			v->binary = bin[i];
			if (n > 1)
				v->dims[0] = jobs[j]->batch;
			v->numel = rank ? per_row * (size_t)v->dims[0] : 1;
			v->first = n > 1 ? (size_t)row * per_row : 0;
		}
		srv_response_encode(m->name, m->version, &jobs[j]->req, views, n_out, &hdr, &b);
		row += jobs[j]->batch;
		srv_job_finish(jobs[j], 200, &hdr, &b, NULL);
	}
}

static ortmk_status run_batch(srv_instance *in, srv_job **jobs, size_t n)
{
	srv_model *m = in->m;
	const srv_request *r = &jobs[0]->req;
	const char *in_names[64], *out_names[64];
	ortmk_value *vals[64] = { 0 }, *outs[64] = { 0 };
	int binary[64];
	size_t n_out = 0, k = 0;
	int64_t total = 0;
	char err[600];
	ortmk_status st = ORTMK_ERR_INVALID_ARGUMENT;
	ortmk_run_options *ro = NULL;

	for (size_t j = 0; j < n; j++)
		total += jobs[j]->batch;
	if (r->n_in > 64 || r->n_out > 64 || output_names(in, r, out_names, binary, &n_out) ||
	    n_out > 64)
		goto fail;
	for (k = 0; k < r->n_in; k++) {
		in_names[k] = r->in[k].name;
		if ((st = stack_input(in, jobs, n, total, k, &vals[k])))
			goto fail;
	}
	if ((st = ortmk_run_options_create(&ro)))
		goto fail;
	if (m->cfg.timeout_ms) {
		int left = m->cfg.timeout_ms - (int)((srv_now() - jobs[0]->t_start) * 1000);
		ortmk_run_options_set_timeout_ms(ro, left > 1 ? left : 1);
	}
	st = ortmk_session_run_with_options(in->s, ro, in_names, (const ortmk_value *const *)vals,
					    r->n_in, out_names, n_out, outs);
	if (!st) {
		srv_stats_batch(m->stats, (size_t)(n > 1 ? total : 1));
		answer(m, jobs, n, out_names, binary, outs, n_out, total);
	}
fail:
	if (st) {
		snprintf(err, sizeof(err), "%s: %s", ortmk_status_name(st), ortmk_last_error());
		for (size_t j = 0; j < n; j++)
			srv_job_finish(jobs[j], status_http(st), NULL, NULL, err);
	}
	ortmk_run_options_destroy(ro);
	for (size_t i = 0; i < n_out; i++)
		ortmk_value_destroy(outs[i]);
	for (size_t i = 0; i < k; i++)
		ortmk_value_destroy(vals[i]);
	return st;
}

/* A new session for instance `in` (in its own environment). */
static ortmk_status new_session(srv_instance *in, ortmk_session **out)
{
	srv_model *m = in->m;
	ortmk_session_options *o = NULL;
	char threads[16];
	snprintf(threads, sizeof(threads), "%d", m->cfg.threads);
	ortmk_status st = ortmk_session_options_create(&o);
	if (!st)
		st = ortmk_session_options_set(o, "providers", m->cfg.providers);
	if (!st)
		st = ortmk_session_options_set(o, "threads", threads);
	if (!st)
		st = ortmk_session_options_set(o, "retry", "1");
	if (!st)
		st = ortmk_session_create(in->env, in->path, o, out);
	ortmk_session_options_destroy(o);
	return st;
}

/* Whether every provider of the session gave up (a crash loop): the
 * session then fails every run, so the instance needs a new one. */
static int all_disabled(ortmk_session *s)
{
	size_t n = ortmk_session_provider_count(s);
	for (size_t i = 0; i < n; i++) {
		ortmk_provider_status ps = { .struct_size = sizeof(ps) };
		if (ortmk_session_provider_status(s, i, &ps) != ORTMK_OK ||
		    strcmp(ps.state, "disabled") != 0)
			return 0;
	}
	return n > 0;
}

/* Replaces the instance's session after a crash loop disabled it (the
 * model reads not ready meanwhile); its counters go to the statistics.
 * Called after a failed run and before every run: providers killed while
 * no request ran (a crash loop ortmk saw on its own restarts) would
 * otherwise fail the next request. */
static void heal(srv_instance *in)
{
	srv_model *m = in->m;
	ortmk_session *fresh = NULL;
	unsigned restarts = 0, failed = 0;
	if (!all_disabled(in->s))
		return;
	__atomic_add_fetch(&m->healing, 1, __ATOMIC_SEQ_CST);
	fprintf(stderr, "ort-serve: model '%s' instance %d: every provider disabled after "
		"repeated failures; creating a new session\n", m->name, in->index);
	if (new_session(in, &fresh)) {
		fprintf(stderr, "ort-serve: model '%s' instance %d: %s\n", m->name, in->index,
			ortmk_last_error());
	} else {
		pthread_mutex_lock(&in->s_mu);
		ortmk_session *old = in->s;
		in->s = fresh;
		pthread_mutex_unlock(&in->s_mu);
		ortmk_session_stats ss = { .struct_size = sizeof(ss) };
		for (size_t p = 0; p < ortmk_session_provider_count(old); p++) {
			ortmk_provider_status ps = { .struct_size = sizeof(ps) };
			if (ortmk_session_provider_status(old, p, &ps) == ORTMK_OK)
				restarts += ps.restarts;
		}
		if (ortmk_session_get_stats(old, &ss) == ORTMK_OK)
			failed = ss.failed_runs;
		srv_stats_retired(m->stats, restarts, failed);
		ortmk_session_destroy(old);
	}
	__atomic_sub_fetch(&m->healing, 1, __ATOMIC_SEQ_CST);
}

static void release(srv_instance *in)
{
	pthread_mutex_lock(&in->m->mu);
	in->claimed = 0;
	if (in->m->stopping)
		pthread_cond_broadcast(&in->m->cv);
	pthread_mutex_unlock(&in->m->mu);
}

/* Runs the jobs taken from the queue on instance `in` (claimed): those
 * of clients gone or past their timeout are answered without running. */
static void run_taken(srv_instance *in, srv_job **jobs, size_t n)
{
	srv_model *m = in->m;
	double now = srv_now();
	size_t live = 0;
	for (size_t j = 0; j < n; j++) {
		srv_stats_queue(m->stats, now - jobs[j]->t_enqueued);
		if (srv_cfg.drop_disconnected && srv_conn_gone(jobs[j]->hreq->conn))
			srv_job_finish(jobs[j], SRV_GONE, NULL, NULL, NULL);
		else if (m->cfg.timeout_ms && (now - jobs[j]->t_start) * 1000 > m->cfg.timeout_ms)
			srv_job_finish(jobs[j], 503, NULL, NULL,
				       "the request timed out waiting in the queue");
		else
			jobs[live++] = jobs[j];
	}
	if (!live)
		return;
	heal(in);                 /* a crash loop the last run did not see */
	if (run_batch(in, jobs, live) != ORTMK_OK)
		heal(in);
}

static void *worker(void *arg)
{
	srv_instance *in = arg;
	srv_job *jobs[MAX_BATCH_JOBS];
	size_t n;
	while ((n = take_batch(in, jobs, 1)) > 0) {
		run_taken(in, jobs, n);
		release(in);
	}
	return NULL;
}

static int start_instance(srv_model *m, srv_instance *in, const char *path,
			  char *err, size_t errlen)
{
	in->m = m;
	in->index = (int)(in - m->inst);
	snprintf(in->path, sizeof(in->path), "%s", path);
	pthread_mutex_init(&in->s_mu, NULL);
	ortmk_status st = ortmk_env_create(&in->env);
	if (!st)
		st = new_session(in, &in->s);
	if (st) {
		snprintf(err, errlen, "model '%s' version %s: %s", m->name, m->version,
			 ortmk_last_error());
		return -1;
	}
	if (pthread_create(&in->thread, NULL, worker, in) != 0) {
		snprintf(err, errlen, "model '%s': cannot start a worker thread", m->name);
		return -1;
	}
	in->started = 1;
	return 0;
}

/* The signature, from the first instance's session. */
static int copy_signature(srv_model *m, int outputs, char *err, size_t errlen)
{
	ortmk_session *s = m->inst[0].s;
	size_t n = outputs ? ortmk_session_output_count(s) : ortmk_session_input_count(s);
	srv_io *io = calloc(n ? n : 1, sizeof(*io));
	if (!io)
		return snprintf(err, errlen, "out of memory"), -1;
	*(outputs ? &m->outs : &m->ins) = io;
	*(outputs ? &m->n_outs : &m->n_ins) = n;
	for (size_t i = 0; i < n; i++) {
		ortmk_io_info info = { .struct_size = sizeof(info) };
		ortmk_status st = outputs ? ortmk_session_output_meta(s, i, &info) :
					    ortmk_session_input_meta(s, i, &info);
		if (st || strlen(info.name) >= SRV_NAME_MAX || info.rank > SRV_MAX_RANK)
			return snprintf(err, errlen, "model '%s': a name over %d bytes or a rank "
					"over %d", m->name, SRV_NAME_MAX - 1, SRV_MAX_RANK), -1;
		strcpy(io[i].name, info.name);
		io[i].dtype = info.dtype;
		io[i].rank_known = info.rank_known;
		io[i].rank = info.rank;
		if (info.rank_known && info.rank)
			memcpy(io[i].dims, info.dims, info.rank * sizeof(int64_t));
	}
	return 0;
}

int srv_model_start(srv_model *m, const char *path, char *err, size_t errlen)
{
	pthread_mutex_init(&m->mu, NULL);
	pthread_cond_init(&m->cv, NULL);
	if (m->cfg.instances < 1)
		m->cfg.instances = 1;
	if (!(m->inst = calloc((size_t)m->cfg.instances, sizeof(*m->inst))))
		return snprintf(err, errlen, "out of memory"), -1;
	for (; m->n_inst < m->cfg.instances; m->n_inst++)
		if (start_instance(m, &m->inst[m->n_inst], path, err, errlen)) {
			m->n_inst++;
			return -1;
		}
	return copy_signature(m, 0, err, errlen) || copy_signature(m, 1, err, errlen) ? -1 : 0;
}

static int any_claimed(const srv_model *m)
{
	for (int i = 0; i < m->n_inst; i++)
		if (m->inst[i].claimed)
			return 1;
	return 0;
}

/* Stops the workers (the queue is empty: no reference is left), waits for
 * a run on an I/O thread to let go of its instance (its job's answer may
 * have dropped the last reference), closes the sessions and frees m. */
void srv_model_stop(srv_model *m)
{
	pthread_mutex_lock(&m->mu);
	m->stopping = 1;
	pthread_cond_broadcast(&m->cv);
	while (any_claimed(m))
		pthread_cond_wait(&m->cv, &m->mu);
	pthread_mutex_unlock(&m->mu);
	for (int i = 0; i < m->n_inst; i++) {
		srv_instance *in = &m->inst[i];
		if (in->started)
			pthread_join(in->thread, NULL);
		if (in->s)
			ortmk_session_destroy(in->s);
		if (in->env)
			ortmk_env_destroy(in->env);
		if (in->m)
			pthread_mutex_destroy(&in->s_mu);
	}
	free(m->inst);
	free(m->ins);
	free(m->outs);
	pthread_cond_destroy(&m->cv);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

void srv_model_provider_counts(srv_model *m, unsigned *restarts, unsigned *failed)
{
	for (int i = 0; i < m->n_inst; i++) {
		srv_instance *in = &m->inst[i];
		ortmk_session_stats ss = { .struct_size = sizeof(ss) };
		if (!in->m)
			continue;
		pthread_mutex_lock(&in->s_mu);
		for (size_t p = 0; in->s && p < ortmk_session_provider_count(in->s); p++) {
			ortmk_provider_status ps = { .struct_size = sizeof(ps) };
			if (ortmk_session_provider_status(in->s, p, &ps) == ORTMK_OK)
				*restarts += ps.restarts;
		}
		if (in->s && ortmk_session_get_stats(in->s, &ss) == ORTMK_OK)
			*failed += ss.failed_runs;
		pthread_mutex_unlock(&in->s_mu);
	}
}
