/*
 * env: an environment's provider processes, the process layer of the core
 * (core.h).  The core listens on an nng ipc:// socket in the environment's
 * private 0700 directory, spawns the provider with posix_spawn (descriptor
 * socketpair on fd 3, socket address in the environment), writes a random
 * token on the socketpair, and accepts the HELLO only if it carries that
 * token and comes from the pid it spawned.
 * Every request to a process goes through core_proc_request(), which turns
 * death, deadlines and bad replies into statuses with a message; the
 * supervised requests above it (supervise.c) restart a dead process first.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core.h"
#include "log.h"
#include "trace.h"

extern char **environ;

#ifndef ORTMK_LIBDIR
#define ORTMK_LIBDIR "lib"
#endif
#ifndef ORTMK_LIBEXECDIR
#define ORTMK_LIBEXECDIR "libexec"
#endif

uint64_t core_env_next_id(ortmk_env *env)
{
	return __atomic_add_fetch(&env->next_id, 1, __ATOMIC_RELAXED);
}

static void proc_reap(core_proc *p, int block)
{
	int status;
	pid_t r;

	if (p->pid <= 0)
		return;
	r = waitpid(p->pid, &status, block ? 0 : WNOHANG);
	if (r != p->pid)
		return;
	/* SIGSYS is how the provider's seccomp filter ends it: say so. */
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
		snprintf(p->death, sizeof(p->death), "killed by signal %d (SIGSYS, %s): a sandbox "
			 "violation, a system call its filter does not allow (docs/SECURITY.md)",
			 SIGSYS, strsignal(SIGSYS));
	else if (WIFSIGNALED(status))
		snprintf(p->death, sizeof(p->death), "killed by signal %d (%s)",
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
	else if (WIFEXITED(status))
		snprintf(p->death, sizeof(p->death), "exited with status %d", WEXITSTATUS(status));
	p->pid = 0;
}

static void sock_path(const core_ep *ep, const core_proc *p, char *out, size_t n)
{
	snprintf(out, n, "%s/%s-%llu.sock", ep->env->dir, ep->name,
		 (unsigned long long)p->exec_id);
}

/* Stops a process (politely, then SIGKILL) and frees what it held. */
void core_proc_stop(core_ep *ep, core_proc *p)
{
	char path[512];

	if (p->alive && p->chan.open) {
		Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
		Ortmk__Shutdown body = ORTMK__SHUTDOWN__INIT;

		e.kind = ORTMK__KIND__SHUTDOWN;
		e.body_case = ORTMK__ENVELOPE__BODY_SHUTDOWN;
		e.shutdown = &body;
		ipc_send(&p->chan, &e);
	}
	for (int i = 0; i < 100 && p->pid > 0 && p->alive; i++) {
		proc_reap(p, 0);
		if (p->pid > 0)
			usleep(1000);
	}
	if (p->pid > 0) {
		kill(p->pid, SIGKILL);
		proc_reap(p, 1);
	}
	p->alive = 0;
	for (int i = 0; i < p->n_lanes; i++) {
		ipc_ring_detach(&p->lanes[i].ring);
		shm_segment_destroy(&p->lanes[i].seg);
	}
	p->n_lanes = p->ring_on = 0;
	p->reply_lane = -1;
	ipc_chan_close(&p->chan);
	if (p->fd_sock >= 0)
		close(p->fd_sock);
	if (p->pidfd >= 0)
		close(p->pidfd);
	p->fd_sock = p->pidfd = -1;
	ipc_segtab_fini(&p->segs);
	if (p->exec_id) {
		sock_path(ep, p, path, sizeof(path));
		unlink(path);
	}
}

static void ep_destroy(core_ep *ep)
{
	if (!ep)
		return;
	core_proc_stop(ep, &ep->p);
	if (ep->cancel_seg.base)
		shm_segment_destroy(&ep->cancel_seg);
	for (size_t i = 0; i < ep->n_sgs; i++)
		free(ep->sgs[i].bytes);
	free(ep->sgs);
	free(ep->files);
	pthread_mutex_destroy(&ep->lock);
	pthread_rwlock_destroy(&ep->plock);
	pthread_mutex_destroy(&ep->lane_mu);
	pthread_cond_destroy(&ep->lane_cv);
	pthread_mutex_destroy(&ep->fail_mu);
	pthread_rwlock_destroy(&ep->segs_lock);
	free(ep);
}

/* Stops every provider process of env and frees its providers. */
void core_env_stop_eps(ortmk_env *env)
{
	for (int i = 0; i < env->n_eps; i++)
		ep_destroy(env->eps[i]);
}

/* ---- spawning ----------------------------------------------------------- */

/* The directory of the file holding this code: libortmk.so, or the Python
 * extension module that links the core in.  "" when unknown. */
static void self_dir(char *out, size_t n)
{
	Dl_info info;
	char *real, *slash;

	out[0] = 0;
	if (!dladdr((void *)self_dir, &info) || !info.dli_fname ||
	    !(real = realpath(info.dli_fname, NULL)))
		return;
	if ((slash = strrchr(real, '/')))
		*slash = 0;
	snprintf(out, n, "%s", real);
	free(real);
}

static int is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The build tree holding dir (dir or an ancestor up to three levels up
 * with meson-private/): its providers/ into out.  0 when found. */
static int build_tree_eps(const char *dir, char *out, size_t n)
{
	char root[PATH_MAX], probe[PATH_MAX + 16], *slash;

	snprintf(root, sizeof(root), "%s", dir);
	for (int up = 0; up < 4 && root[0]; up++) {
		snprintf(probe, sizeof(probe), "%s/meson-private", root);
		if (is_dir(probe))
			return snprintf(out, n, "%s/providers", root) < (int)n ? 0 : -1;
		if (!(slash = strrchr(root, '/')))
			break;
		*slash = 0;
	}
	return -1;
}

/* <prefix>/<libexecdir>/ortmk when dir is <prefix>/<libdir>. */
static int installed_eps(const char *dir, char *out, size_t n)
{
	size_t ld = strlen(ORTMK_LIBDIR), dl = strlen(dir);

	if (ORTMK_LIBDIR[0] == '/')
		return strcmp(dir, ORTMK_LIBDIR) ? -1 :
			(snprintf(out, n, "%s/ortmk", ORTMK_LIBEXECDIR), 0);
	if (dl <= ld || strcmp(dir + dl - ld, ORTMK_LIBDIR) || dir[dl - ld - 1] != '/')
		return -1;
	if (ORTMK_LIBEXECDIR[0] == '/')
		snprintf(out, n, "%s/ortmk", ORTMK_LIBEXECDIR);
	else
		snprintf(out, n, "%.*s%s/ortmk", (int)(dl - ld), dir, ORTMK_LIBEXECDIR);
	return 0;
}

/* The directories searched for provider binaries, in order (ortmk.h):
 * $ORTMK_EP_DIR, the build tree or the install prefix of the library,
 * the Python package's _providers/.  Returns how many were written. */
static int ep_dirs(char dirs[3][PATH_MAX])
{
	const char *env = getenv("ORTMK_EP_DIR");
	char self[PATH_MAX - 32];
	int k = 0;

	if (env && env[0])
		snprintf(dirs[k++], PATH_MAX, "%s", env);
	self_dir(self, sizeof(self));
	if (!self[0])
		return k;
	if (build_tree_eps(self, dirs[k], PATH_MAX) == 0 || installed_eps(self, dirs[k], PATH_MAX) == 0)
		k++;
	snprintf(dirs[k++], PATH_MAX, "%s/_providers", self);
	return k;
}

/* Finds ort-ep-<name>: 0 and its path in out, or -ENOENT and the
 * directories searched in out. */
static int find_binary(const char *name, char *out, size_t n)
{
	char dirs[3][PATH_MAX], file[64];
	int nd = ep_dirs(dirs);
	size_t used = 0;

	snprintf(file, sizeof(file), "ort-ep-%s", name);
	for (int i = 0; i < nd; i++) {
		/* Build tree: <dir>/<name>/ort-ep-<name>; installed: <dir>/ort-ep-<name>. */
		if (snprintf(out, n, "%s/%s/%s", dirs[i], name, file) < (int)n && access(out, X_OK) == 0)
			return 0;
		if (snprintf(out, n, "%s/%s", dirs[i], file) < (int)n && access(out, X_OK) == 0)
			return 0;
	}
	out[0] = 0;
	for (int i = 0; i < nd && used < n; i++)
		used += (size_t)snprintf(out + used, n - used, "%s%s", i ? ", " : "", dirs[i]);
	return -ENOENT;
}

static const char *const known[] = {"cpu", "vulkan", "cuda"};

int core_known_provider(const char *name)
{
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(name, known[i]) == 0)
			return 1;
	return 0;
}

size_t ortmk_available_providers(const char **names, size_t cap)
{
	char path[PATH_MAX * 3];
	size_t k = 0;

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (find_binary(known[i], path, sizeof(path)))
			continue;
		if (names && k < cap)
			names[k] = known[i];
		k++;
	}
	return k;
}

static int inherited(const char *var, int no_sandbox)
{
	return strncmp(var, "ORTMK_EP_URL=", 13) && strncmp(var, "ORTMK_EP_FD=", 12) &&
	       (!no_sandbox || strncmp(var, "ORTMK_SANDBOX=", 14));
}

static char **child_environ(const char *url, int no_sandbox)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 5, sizeof(char *));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (inherited(environ[i], no_sandbox))
			env[k++] = environ[i];
	/* ortmk_env_options.disable_sandbox: the provider runs unconfined. */
	if (no_sandbox)
		env[k++] = "ORTMK_SANDBOX=0";
	/* The provider logs at the core's level (ortmk_env_options). */
	if (!getenv("ORTMK_LOG")) {
		static const char *const lv[] = {"ORTMK_LOG=error", "ORTMK_LOG=warn", "ORTMK_LOG=info",
						 "ORTMK_LOG=debug"};

		for (int i = 0; i < 4; i++)
			if (strcmp(lv[i] + 10, ipc_log_level_name()) == 0)
				env[k++] = (char *)lv[i];
	}
	env[k] = malloc(strlen(url) + 16);
	if (!env[k]) {
		free(env);
		return NULL;
	}
	sprintf(env[k++], "ORTMK_EP_URL=%s", url);
	env[k++] = "ORTMK_EP_FD=3";
	return env;
}

static int spawn_child(core_proc *p, const char *binary, const char *url, int child_fd,
		       int no_sandbox)
{
	posix_spawn_file_actions_t fa;
	char *argv[] = {(char *)binary, NULL};
	char **env = child_environ(url, no_sandbox);
	int rc;

	if (!env)
		return -ENOMEM;
	posix_spawn_file_actions_init(&fa);
	/* dup2 onto fd 3 clears close-on-exec for the child's copy only. */
	posix_spawn_file_actions_adddup2(&fa, child_fd, 3);
	rc = posix_spawn(&p->pid, binary, &fa, NULL, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	for (size_t i = 0; env[i]; i++)
		if (strncmp(env[i], "ORTMK_EP_URL=", 13) == 0)
			free(env[i]);
	free(env);
	return -rc;
}

static int hello_ok(const core_ep *ep, const core_proc *p, const Ortmk__Envelope *m,
		    const uint8_t token[32])
{
	uint8_t diff = 0;

	if (m->kind != ORTMK__KIND__HELLO)
		return 0;
	/* Constant-time compare is moot for a local peer but costs nothing. */
	for (int i = 0; i < 32; i++)
		diff |= m->hello->token.data[i] ^ token[i];
	return diff == 0 && (pid_t)m->hello->pid == p->pid &&
	       ipc_last_peer_pid(&p->chan) == p->pid &&
	       m->hello->protocol_version == IPC_PROTOCOL_VERSION &&
	       strcmp(m->hello->provider, ep->name) == 0;
}

static ortmk_status accept_hello(core_ep *ep, core_proc *p, const char *binary,
				 const uint8_t token[32])
{
	Ortmk__Envelope *hello = NULL, e = ORTMK__ENVELOPE__INIT;
	Ortmk__HelloAck ack = ORTMK__HELLO_ACK__INIT;
	char err[256] = "";
	int rc, ok;

	rc = ipc_recv(&p->chan, CORE_HANDSHAKE_MS, &hello, err, sizeof(err));
	if (rc == -ECHILD) {
		proc_reap(p, 1);
		return core_fail(ORTMK_ERR_PROVIDER_DIED, "provider '%s' (%s) died during its handshake: %s",
				 ep->name, binary, p->death);
	}
	if (rc)
		return core_fail(rc == -ETIMEDOUT ? ORTMK_ERR_TIMEOUT : ORTMK_ERR_PROTOCOL,
				 "provider '%s' (%s): no valid HELLO: %s", ep->name, binary,
				 rc == -ETIMEDOUT ? "timed out" : err);
	ok = hello_ok(ep, p, hello, token);
	if (ok && hello->hello->detail)
		snprintf(p->detail, sizeof(p->detail), "%s", hello->hello->detail);
	snprintf(p->unavailable, sizeof(p->unavailable), "%s",
		 ok && hello->hello->unavailable ? hello->hello->unavailable : "");
	p->device_memory = ok && hello->hello->has_device_memory && hello->hello->device_memory;
	p->run_lanes = ok && hello->hello->has_run_lanes ? (int)hello->hello->run_lanes : 1;
	ack.accepted = ok;
	ack.reason = ok ? "" : "token, pid, version or provider mismatch";
	e.kind = ORTMK__KIND__HELLO_ACK;
	e.body_case = ORTMK__ENVELOPE__BODY_HELLO_ACK;
	e.hello_ack = &ack;
	e.has_reply_to = 1;
	e.reply_to = hello->seq;
	ipc_envelope_free(hello);
	rc = ipc_send(&p->chan, &e);
	if (!ok)
		return core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': handshake refused (%s)",
				 ep->name, ack.reason);
	return rc ? core_fail(ORTMK_ERR_IO, "provider '%s': cannot answer HELLO", ep->name) : ORTMK_OK;
}

static void proc_init(core_proc *p)
{
	memset(p, 0, sizeof(*p));
	ipc_chan_init(&p->chan);
	p->chan.segs = &p->segs;
	p->pidfd = -1;
	p->fd_sock = -1;
	p->reply_lane = -1;
}

static ortmk_status expect_ack(core_ep *ep, core_proc *p, Ortmk__Envelope *req);

/* Lanes to open to a process: what it serves, at most CORE_LANES or
 * ORTMK_LANES (1..CORE_MAX_LANES). */
static int lanes_wanted(const core_proc *p)
{
	const char *env = getenv("ORTMK_LANES");
	int n = env && atoi(env) > 0 ? atoi(env) : CORE_LANES;

	if (n > CORE_MAX_LANES)
		n = CORE_MAX_LANES;
	return p->run_lanes < n ? (p->run_lanes > 0 ? p->run_lanes : 1) : n;
}

/* The home CPU of lane i (Run.bind_cpu): the CPUs this process may use,
 * in turn. */
static int lane_home(int i)
{
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return -1;
	n = CPU_COUNT(&set);
	for (int c = 0, k = n ? i % n : 0; n && c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set) && k-- == 0)
			return c;
	return -1;
}

/* Opens one lane: a ring segment handed over and announced (RING_SETUP).
 * 1 when the provider took it, 0 when it refused or none could be made,
 * <0 (a status) when the process died. */
static int lane_open(core_ep *ep, core_proc *p)
{
	core_lane *l = &p->lanes[p->n_lanes];
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__RingSetup body = ORTMK__RING_SETUP__INIT;
	ortmk_status st;

	if (shm_segment_create("ortmk-ring", IPC_RING_SEGMENT, core_env_next_id(ep->env), &l->seg))
		return 0;
	ipc_ring_format(l->seg.base);
	if (ipc_ring_attach(&l->ring, l->seg.base, l->seg.size)) {
		shm_segment_destroy(&l->seg);
		return 0;
	}
	l->ring.trace = &p->chan;
	st = core_proc_add_segment(ep, p, &l->seg);
	/* The ring is the fast path's, not a tensor's: keep it out of replay. */
	pthread_rwlock_wrlock(&ep->segs_lock);
	ipc_segtab_remove(&p->segs, l->seg.id, NULL);
	pthread_rwlock_unlock(&ep->segs_lock);
	body.segment_id = l->seg.id;
	e.kind = ORTMK__KIND__RING_SETUP;
	e.body_case = ORTMK__ENVELOPE__BODY_RING_SETUP;
	e.ring_setup = &body;
	if (st == ORTMK_OK)
		st = expect_ack(ep, p, &e);
	if (st != ORTMK_OK) {
		ipc_ring_detach(&l->ring);
		shm_segment_destroy(&l->seg);
		return p->alive ? 0 : -(int)st;
	}
	l->busy = 0;
	l->home = lane_home(p->n_lanes);
	p->n_lanes++;
	return 1;
}

/* Negotiates the shared-memory fast path unless ORTMK_RING=0: as many
 * lanes as lanes_wanted.  A provider that refuses one (ERROR) is served
 * on the lanes it took, or on nng; only a dead one is a failure. */
static ortmk_status ring_setup(core_ep *ep, core_proc *p)
{
	const char *env = getenv("ORTMK_RING");
	int want = lanes_wanted(p), rc = 1;

	if (env && strcmp(env, "0") == 0)
		return ORTMK_OK;
	while (rc == 1 && p->n_lanes < want)
		rc = lane_open(ep, p);
	p->ring_on = p->n_lanes > 0;
	return rc < 0 ? (ortmk_status)-rc : ORTMK_OK;
}

/* Spawns `binary` as a new process of `ep` and completes the handshake.
 * On failure the process is gone and *p holds nothing. */
ortmk_status core_proc_start(core_ep *ep, core_proc *p, const char *binary)
{
	char url[512];
	uint8_t token[32];
	int sv[2], rc;
	ortmk_status st;

	proc_init(p);
	p->exec_id = core_env_next_id(ep->env);
	sock_path(ep, p, url + 6, sizeof(url) - 6);
	memcpy(url, "ipc://", 6);
	if (getrandom(token, sizeof(token), 0) != (ssize_t)sizeof(token))
		return core_fail(ORTMK_ERR_IO, "getrandom failed");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return core_fail(ORTMK_ERR_IO, "socketpair: %s", strerror(errno));
	p->fd_sock = sv[0];
	if (ipc_chan_listen(&p->chan, url)) {
		close(sv[1]);
		core_proc_stop(ep, p);
		return core_fail(ORTMK_ERR_IO, "cannot listen on %s", url);
	}
	rc = spawn_child(p, binary, url, sv[1], ep->env->no_sandbox);
	close(sv[1]);
	if (rc) {
		core_proc_stop(ep, p);
		return core_fail(ORTMK_ERR_IO, "cannot start %s: %s", binary, strerror(-rc));
	}
	p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	p->chan.peer_pidfd = p->pidfd;
	snprintf(p->chan.peer, sizeof(p->chan.peer), "ort-ep-%s[%d]", ep->name, (int)p->pid);
	ipc_chan_set_trace_identity(&p->chan, ep->name, (int)p->pid);
	ipc_trace_event(ep->name, (int)p->pid, "spawn", binary);
	/* The token goes over the inherited socketpair, never argv or env. */
	st = ipc_send_bytes(p->fd_sock, token, sizeof(token)) ?
		core_fail(ORTMK_ERR_IO, "cannot send the token to %s", binary) :
		accept_hello(ep, p, binary, token);
	if (st) {
		core_proc_stop(ep, p);
		return st;
	}
	p->alive = 1;
	st = ring_setup(ep, p);
	if (st) {
		core_proc_stop(ep, p);
		return st;
	}
	ipc_log(IPC_LOG_INFO, "provider %s started: pid %d (%s), %s, %d shared-memory lanes", ep->name,
		(int)p->pid, binary, p->detail, p->n_lanes);
	return ORTMK_OK;
}

ortmk_status core_env_get_ep(ortmk_env *env, const char *name, core_ep **out)
{
	core_ep *ep;
	ortmk_status st;

	pthread_mutex_lock(&env->lock);
	for (int i = 0; i < env->n_eps; i++) {
		if (strcmp(env->eps[i]->name, name) == 0) {
			*out = env->eps[i];
			pthread_mutex_unlock(&env->lock);
			return ORTMK_OK;
		}
	}
	ep = env->n_eps < CORE_MAX_EPS && strlen(name) < 16 ? calloc(1, sizeof(*ep)) : NULL;
	if (!ep) {
		pthread_mutex_unlock(&env->lock);
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "provider '%s': cannot add another provider", name);
	}
	ep->env = env;
	proc_init(&ep->p);
	pthread_mutex_init(&ep->lock, NULL);
	{
		/* A waiting restart or swap goes before new runs. */
		pthread_rwlockattr_t attr;

		pthread_rwlockattr_init(&attr);
		pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&ep->plock, &attr);
		pthread_rwlockattr_destroy(&attr);
	}
	pthread_mutex_init(&ep->lane_mu, NULL);
	pthread_cond_init(&ep->lane_cv, NULL);
	pthread_mutex_init(&ep->fail_mu, NULL);
	pthread_rwlock_init(&ep->segs_lock, NULL);
	snprintf(ep->name, sizeof(ep->name), "%s", name);
	st = find_binary(name, ep->binary, sizeof(ep->binary)) ?
		core_fail(core_known_provider(name) ? ORTMK_ERR_UNAVAILABLE : ORTMK_ERR_INVALID_ARGUMENT,
			  "%s provider '%s': no ort-ep-%s binary in %s (set ORTMK_EP_DIR)",
			  core_known_provider(name) ? "unavailable" : "unknown", name, name,
			  ep->binary[0] ? ep->binary : "no directory") :
		core_proc_start(ep, &ep->p, ep->binary);
	if (st) {
		ep_destroy(ep);
		pthread_mutex_unlock(&env->lock);
		return st;
	}
	ep->index = env->n_eps;
	env->eps[env->n_eps++] = ep;
	*out = ep;
	pthread_mutex_unlock(&env->lock);
	return ORTMK_OK;
}

/* ---- requests ----------------------------------------------------------- */

/* Records a failure of the current process and makes sure it is gone.
 * Several runs in flight may notice one death at once: the first records
 * it (one failure, one restart later), the others fail with its message. */
static ortmk_status proc_failed(core_ep *ep, core_proc *p, ortmk_status st)
{
	int pid, first;
	char msg[1024];

	snprintf(msg, sizeof(msg), "%s", ortmk_last_error());
	pthread_mutex_lock(&ep->fail_mu);
	pid = (int)p->pid;
	first = __atomic_exchange_n(&p->alive, 0, __ATOMIC_ACQ_REL);
	if (!first) {
		if (p == &ep->p && ep->last_failure[0])
			snprintf(msg, sizeof(msg), "%s", ep->last_failure);
		pthread_mutex_unlock(&ep->fail_mu);
		return core_fail(st, "%s", msg);
	}
	/* A provider that broke the protocol or a deadline is not trusted to be
	 * idle: end it.  One that died is reaped to learn how. */
	proc_reap(p, 0);
	if (p->pid > 0)
		kill(p->pid, SIGKILL);
	proc_reap(p, 1);
	if (st == ORTMK_ERR_PROVIDER_DIED)
		snprintf(msg, sizeof(msg), "provider '%s' (pid %d) died: %s", ep->name, pid,
			 p->death[0] ? p->death : "connection lost");
	if (p == &ep->p) {
		ep->failures++;
		ep->fail_ns[ep->failures % CORE_FAIL_HISTORY] = ipc_now_ns();
		ep->died_ns = ipc_now_ns();
		snprintf(ep->last_failure, sizeof(ep->last_failure), "%s", msg);
	}
	/* Work it had not finished never will: wake its fences' waiters. */
	core_dev_proc_lost(ep, p);
	pthread_mutex_unlock(&ep->fail_mu);
	ipc_log(IPC_LOG_WARN, "%s", msg);
	ipc_trace_event(ep->name, pid, "died", msg);
	return core_fail(st, "%s", msg);
}

ortmk_status core_ep_broke_protocol(core_ep *ep)
{
	if (!__atomic_load_n(&ep->p.alive, __ATOMIC_ACQUIRE))
		return ORTMK_ERR_PROTOCOL;
	return proc_failed(ep, &ep->p, ORTMK_ERR_PROTOCOL);
}

int core_proc_check_dead(core_ep *ep, core_proc *p)
{
	struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
	int alive = __atomic_load_n(&p->alive, __ATOMIC_ACQUIRE);

	if (!alive || p->pidfd < 0 || poll(&pf, 1, 0) != 1)
		return !alive;
	proc_failed(ep, p, ORTMK_ERR_PROVIDER_DIED);
	core_clear_error();
	return 1;
}

static ortmk_status error_reply(core_ep *ep, const Ortmk__Error *e)
{
	ortmk_status st = ORTMK_ERR_PROVIDER;

	if (e->code == ORTMK__ERROR_CODE__E_UNSUPPORTED)
		st = ORTMK_ERR_NOT_IMPLEMENTED;
	else if (e->code == ORTMK__ERROR_CODE__E_NOMEM)
		st = ORTMK_ERR_NO_MEMORY;
	else if (e->code == ORTMK__ERROR_CODE__E_CANCELLED)
		st = ORTMK_ERR_CANCELLED;
	return core_fail(st, "provider '%s': %s", ep->name, e->message);
}

static int left_ms(uint64_t deadline)
{
	uint64_t now = ipc_now_ns();

	if (deadline == UINT64_MAX)
		return -1;
	return now >= deadline ? 0 : (int)((deadline - now) / 1000000u);
}

static ortmk_status ring_request(core_ep *ep, core_proc *p, core_lane *l, Ortmk__Envelope *req,
				 uint64_t deadline, int timeout_ms, uint64_t spin_ns,
				 Ortmk__Envelope **rep);

int core_lane_take(core_ep *ep, int cpu)
{
	core_proc *p = &ep->p;
	int lane = -1;

	if (!p->ring_on)
		return -1;
	pthread_mutex_lock(&ep->lane_mu);
	for (;;) {
		for (int i = 0; i < p->n_lanes && lane < 0 && cpu >= 0; i++)
			if (!p->lanes[i].busy && p->lanes[i].home == cpu)
				lane = i;
		for (int i = 0; i < p->n_lanes && lane < 0; i++)
			if (!p->lanes[i].busy)
				lane = i;
		if (lane >= 0)
			break;
		pthread_cond_wait(&ep->lane_cv, &ep->lane_mu);
	}
	p->lanes[lane].busy = 1;
	pthread_mutex_unlock(&ep->lane_mu);
	return lane;
}

void core_lane_put(core_ep *ep, int lane)
{
	if (lane < 0)
		return;
	pthread_mutex_lock(&ep->lane_mu);
	ep->p.lanes[lane].busy = 0;
	pthread_cond_signal(&ep->lane_cv);
	pthread_mutex_unlock(&ep->lane_mu);
}

ortmk_status core_lane_request(core_ep *ep, core_proc *p, int lane, Ortmk__Envelope *req,
			       int timeout_ms, uint64_t spin_ns, Ortmk__Envelope **rep)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX :
		ipc_now_ns() + (uint64_t)timeout_ms * 1000000u;

	*rep = NULL;
	if (!__atomic_load_n(&p->alive, __ATOMIC_ACQUIRE))
		return core_fail(ORTMK_ERR_PROVIDER_DIED, "provider '%s' is not running (%s)",
				 ep->name, p->death[0] ? p->death : "stopped");
	return ring_request(ep, p, &p->lanes[lane], req, deadline, timeout_ms, spin_ns, rep);
}

ortmk_status core_proc_request(core_ep *ep, core_proc *p, Ortmk__Envelope *req,
			       int timeout_ms, Ortmk__Envelope **rep)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX :
		ipc_now_ns() + (uint64_t)timeout_ms * 1000000u;
	Ortmk__Envelope *m = NULL;
	char err[512] = "";
	int rc;

	*rep = NULL;
	/* The last control reply on a lane is not read any more. */
	if (p->reply_lane >= 0 && p == &ep->p)
		core_lane_put(ep, p->reply_lane);
	p->reply_lane = -1;
	if (!p->alive)
		return core_fail(ORTMK_ERR_PROVIDER_DIED, "provider '%s' is not running (%s)",
				 ep->name, p->death[0] ? p->death : "stopped");
	/* The hot requests take the ring; those that pass descriptors or
	 * whose replies callers free with ipc_envelope_free stay on nng. */
	if (p->ring_on && (req->kind == ORTMK__KIND__RUN || req->kind == ORTMK__KIND__ALLOC ||
			   req->kind == ORTMK__KIND__COPY ||
			   (req->kind == ORTMK__KIND__RELEASE && req->release->has_buffer_id))) {
		int lane = p == &ep->p ? core_lane_take(ep, -1) : 0;
		ortmk_status st = ring_request(ep, p, &p->lanes[lane], req, deadline, timeout_ms, 0, rep);

		if (*rep && p == &ep->p)
			p->reply_lane = lane;
		else if (p == &ep->p)
			core_lane_put(ep, lane);
		if (st != ORTMK_ERR_INTERNAL || *rep)
			return st;
	}
	rc = ipc_send(&p->chan, req);
	/* Not sent, but a descriptor may have gone ahead of it (ADD_SEGMENT):
	 * the process goes, or the next descriptor would be taken for this one. */
	if (rc == -ENOMEM)
		return proc_failed(ep, p, core_fail(ORTMK_ERR_NO_MEMORY, "out of memory sending %s to provider '%s'",
						    ipc_kind_name(req->kind), ep->name));
	if (rc)
		return proc_failed(ep, p, rc == -EPIPE ? ORTMK_ERR_PROVIDER_DIED :
				   core_fail(ORTMK_ERR_IO, "provider '%s': send failed", ep->name));
	rc = ipc_recv(&p->chan, left_ms(deadline), &m, err, sizeof(err));
	/* The reply may still come: the process goes, so it cannot be taken
	 * for the answer to the next request. */
	if (rc == -ENOMEM)
		return proc_failed(ep, p, core_fail(ORTMK_ERR_NO_MEMORY,
			"provider '%s' (pid %d): out of memory receiving the reply to %s", ep->name,
			(int)p->pid, ipc_kind_name(req->kind)));
	if (rc == -ECHILD || rc == -EPIPE)
		return proc_failed(ep, p, ORTMK_ERR_PROVIDER_DIED);
	if (rc == -ETIMEDOUT)
		return proc_failed(ep, p, core_fail(ORTMK_ERR_TIMEOUT,
			"provider '%s' (pid %d): no reply to %s within %d ms; killed",
			ep->name, (int)p->pid, ipc_kind_name(req->kind), timeout_ms));
	if (rc)
		return proc_failed(ep, p, core_fail(ORTMK_ERR_PROTOCOL, "provider '%s' (pid %d) %s: %s",
			ep->name, (int)p->pid, rc == -ECONNRESET ? "lost its connection" :
			"sent an invalid message", err));
	/* One request is outstanding at a time, so any other reply_to is a
	 * broken provider (an unknown-request ERROR has reply_to 0). */
	if (!m->has_reply_to || (m->reply_to != req->seq && m->reply_to != 0) ||
	    (m->reply_to == 0 && m->kind != ORTMK__KIND__ERROR)) {
		ipc_envelope_free(m);
		return proc_failed(ep, p, core_fail(ORTMK_ERR_PROTOCOL,
			"provider '%s' (pid %d) answered a request it was not asked", ep->name, (int)p->pid));
	}
	*rep = m;
	return m->kind == ORTMK__KIND__ERROR ? error_reply(ep, m->error) : ORTMK_OK;
}

void core_proc_moved(core_proc *p)
{
	p->chan.segs = &p->segs;
	for (int i = 0; i < p->n_lanes; i++) {
		p->lanes[i].ring.trace = &p->chan;
		p->lanes[i].ring.alloc.allocator_data = &p->lanes[i].ring;
	}
}

void core_ep_reply_free(core_ep *ep, Ortmk__Envelope *rep)
{
	if (ep->p.reply_lane >= 0) {
		core_lane_put(ep, ep->p.reply_lane);
		ep->p.reply_lane = -1;
		return;
	}
	if (rep)
		ipc_envelope_free(rep);
}

/* The fast path: one request on lane l.  The wait is sliced so the peer's
 * pidfd is checked every few milliseconds: a ring knows nothing of a dead
 * process. */
static ortmk_status ring_request(core_ep *ep, core_proc *p, core_lane *l, Ortmk__Envelope *req,
				 uint64_t deadline, int timeout_ms, uint64_t spin_ns,
				 Ortmk__Envelope **rep)
{
	char err[512] = "";
	int rc = ipc_ring_send(&l->ring, &l->ring.req, req, &p->chan.next_seq);

	if (rc)
		return ORTMK_ERR_INTERNAL;  /* caller falls back to nng */
	for (int slice = 0;; slice++) {
		int left = left_ms(deadline);

		/* Wait unlocked; decode and check the reply against the
		 * segment table under segs_lock: the control path may add to
		 * it meanwhile (another run's segments). */
		rc = ipc_ring_wait(&l->ring.rep, left < 0 || left > 5 ? 5 : left,
				   slice ? 0 : spin_ns ? spin_ns : IPC_RING_SPIN_NS);
		if (rc == 0) {
			pthread_rwlock_rdlock(&ep->segs_lock);
			rc = ipc_ring_recv(&l->ring, &l->ring.rep, 0, 0, &p->segs, rep, err, sizeof(err));
			pthread_rwlock_unlock(&ep->segs_lock);
		}
		if (rc == 0)
			break;
		if (rc == -EPROTO)
			return proc_failed(ep, p, core_fail(ORTMK_ERR_PROTOCOL,
				"provider '%s' (pid %d) sent an invalid message: %s", ep->name, (int)p->pid, err));
		if (core_proc_check_dead(ep, p))
			return core_fail(ORTMK_ERR_PROVIDER_DIED, "%s", ep->last_failure);
		/* Only a provider closes the reply ring: waiting on would spin
		 * until the deadline (or forever without one). */
		if (rc == -EPIPE)
			return proc_failed(ep, p, core_fail(ORTMK_ERR_PROTOCOL,
				"provider '%s' (pid %d) closed the shared-memory ring while a %s waited on it",
				ep->name, (int)p->pid, ipc_kind_name(req->kind)));
		if (left == 0)
			return proc_failed(ep, p, core_fail(ORTMK_ERR_TIMEOUT,
				"provider '%s' (pid %d): no reply to %s within %d ms; killed",
				ep->name, (int)p->pid, ipc_kind_name(req->kind), timeout_ms));
	}
	/* reply_to 0: the provider could not read what we sent. */
	if ((*rep)->reply_to == 0 && (*rep)->kind == ORTMK__KIND__ERROR)
		return error_reply(ep, (*rep)->error);
	if ((*rep)->reply_to != req->seq) {
		*rep = NULL;
		return proc_failed(ep, p, core_fail(ORTMK_ERR_PROTOCOL,
			"provider '%s' (pid %d) answered a request it was not asked", ep->name, (int)p->pid));
	}
	return (*rep)->kind == ORTMK__KIND__ERROR ? error_reply(ep, (*rep)->error) : ORTMK_OK;
}

static ortmk_status expect_ack(core_ep *ep, core_proc *p, Ortmk__Envelope *req)
{
	Ortmk__Envelope *rep = NULL;
	ortmk_status st = core_proc_request(ep, p, req, CORE_CONTROL_MS, &rep);

	if (st == ORTMK_OK && rep->kind != ORTMK__KIND__ACK)
		st = proc_failed(ep, p, core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': expected ACK, got %s",
						  ep->name, ipc_kind_name(rep->kind)));
	ipc_envelope_free(rep);
	return st;
}

static ortmk_status send_fd(core_ep *ep, core_proc *p, int fd, uint64_t tag)
{
	if (!p->alive)
		return core_fail(ORTMK_ERR_PROVIDER_DIED, "provider '%s' is not running", ep->name);
	if (ipc_send_fd(p->fd_sock, fd, tag))
		return proc_failed(ep, p, ORTMK_ERR_PROVIDER_DIED);
	return ORTMK_OK;
}

ortmk_status core_proc_add_segment(core_ep *ep, core_proc *p, shm_segment *s)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__AddSegment body = ORTMK__ADD_SEGMENT__INIT;
	ortmk_status st;

	if (ipc_segtab_find(&p->segs, s->id))
		return ORTMK_OK;
	body.segment_id = s->id;
	body.size = s->size;
	body.fd_tag = ++p->next_fd_tag;
	e.kind = ORTMK__KIND__ADD_SEGMENT;
	e.body_case = ORTMK__ENVELOPE__BODY_ADD_SEGMENT;
	e.add_segment = &body;
	st = send_fd(ep, p, s->fd, body.fd_tag);
	if (st == ORTMK_OK)
		st = expect_ack(ep, p, &e);
	if (st == ORTMK_OK) {
		int rc;

		pthread_rwlock_wrlock(&ep->segs_lock);
		rc = ipc_segtab_add(&p->segs, s);
		pthread_rwlock_unlock(&ep->segs_lock);
		if (rc)
			st = core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	}
	return st;
}

ortmk_status core_ep_release_segment(core_ep *ep, uint64_t id)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Release body = ORTMK__RELEASE__INIT;

	pthread_rwlock_wrlock(&ep->segs_lock);
	ipc_segtab_remove(&ep->p.segs, id, NULL);
	pthread_rwlock_unlock(&ep->segs_lock);
	if (!ep->p.alive)
		return ORTMK_OK;
	body.has_segment_id = 1;
	body.segment_id = id;
	e.kind = ORTMK__KIND__RELEASE;
	e.body_case = ORTMK__ENVELOPE__BODY_RELEASE;
	e.release = &body;
	return expect_ack(ep, &ep->p, &e);
}

ortmk_status core_proc_add_file(core_ep *ep, core_proc *p, uint64_t id, int fd, uint64_t size)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__AddFile body = ORTMK__ADD_FILE__INIT;
	ortmk_status st;

	body.file_id = id;
	body.size = size;
	body.fd_tag = ++p->next_fd_tag;
	e.kind = ORTMK__KIND__ADD_FILE;
	e.body_case = ORTMK__ENVELOPE__BODY_ADD_FILE;
	e.add_file = &body;
	st = send_fd(ep, p, fd, body.fd_tag);
	return st ? st : expect_ack(ep, p, &e);
}
