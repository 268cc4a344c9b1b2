/*
 * env: the environment and its provider processes.  The core listens on an
 * nng ipc:// socket in a private 0700 directory, spawns the provider with
 * posix_spawn (descriptor socketpair on fd 3, socket address in the
 * environment), writes a random token on the socketpair, and accepts the
 * HELLO only if it carries that token and comes from the pid it spawned.
 * Every request to a provider goes through core_ep_request(), which turns
 * death, deadlines and bad replies into statuses with a message.
 */
#include <errno.h>
#include <fcntl.h>
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

extern char **environ;

#ifndef ORTMK_BUILD_EP_DIR
#define ORTMK_BUILD_EP_DIR ""
#endif
#ifndef ORTMK_INSTALL_EP_DIR
#define ORTMK_INSTALL_EP_DIR "/usr/local/libexec/ortmk"
#endif

uint64_t core_env_next_id(ortmk_env *env)
{
	return __atomic_add_fetch(&env->next_id, 1, __ATOMIC_RELAXED);
}

ortmk_status ortmk_env_create(ortmk_env **out)
{
	const char *base = getenv("XDG_RUNTIME_DIR");
	ortmk_env *env;

	if (!out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "env: NULL out");
	env = calloc(1, sizeof(*env));
	if (!env)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	if (!base || access(base, W_OK) != 0)
		base = "/tmp";
	snprintf(env->dir, sizeof(env->dir), "%s/ortmk-XXXXXX", base);
	/* mkdtemp makes the directory 0700: only this user reaches the sockets. */
	if (!mkdtemp(env->dir)) {
		int e = errno;

		free(env);
		return core_fail(ORTMK_ERR_IO, "env: cannot create a private directory in %s: %s",
				 base, strerror(e));
	}
	pthread_mutex_init(&env->lock, NULL);
	signal(SIGPIPE, SIG_IGN);
	*out = env;
	return ORTMK_OK;
}

static void ep_reap(core_ep *ep, int block)
{
	int status;
	pid_t r;

	if (ep->pid <= 0)
		return;
	r = waitpid(ep->pid, &status, block ? 0 : WNOHANG);
	if (r != ep->pid)
		return;
	if (WIFSIGNALED(status))
		snprintf(ep->death, sizeof(ep->death), "killed by signal %d (%s)",
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
	else if (WIFEXITED(status))
		snprintf(ep->death, sizeof(ep->death), "exited with status %d", WEXITSTATUS(status));
	ep->pid = 0;
}

static void ep_destroy(core_ep *ep)
{
	if (!ep)
		return;
	if (ep->alive && ep->chan.open) {
		Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
		Ortmk__Shutdown body = ORTMK__SHUTDOWN__INIT;

		e.kind = ORTMK__KIND__SHUTDOWN;
		e.body_case = ORTMK__ENVELOPE__BODY_SHUTDOWN;
		e.shutdown = &body;
		ipc_send(&ep->chan, &e);
	}
	if (ep->pid > 0) {
		/* Give it a moment to exit on its own, then make sure. */
		for (int i = 0; i < 100 && ep->pid > 0; i++) {
			ep_reap(ep, 0);
			if (ep->pid > 0)
				usleep(2000);
		}
		if (ep->pid > 0) {
			kill(ep->pid, SIGKILL);
			ep_reap(ep, 1);
		}
	}
	ipc_chan_close(&ep->chan);
	if (ep->fd_sock >= 0)
		close(ep->fd_sock);
	if (ep->pidfd >= 0)
		close(ep->pidfd);
	ipc_segtab_fini(&ep->segs);
	pthread_mutex_destroy(&ep->lock);
	free(ep);
}

void ortmk_env_destroy(ortmk_env *env)
{
	char path[512];

	if (!env)
		return;
	for (int i = 0; i < env->n_eps; i++) {
		snprintf(path, sizeof(path), "%s/%s.sock", env->dir, env->eps[i]->name);
		ep_destroy(env->eps[i]);
		unlink(path);
	}
	rmdir(env->dir);
	pthread_mutex_destroy(&env->lock);
	free(env);
}

/* ---- spawning ----------------------------------------------------------- */

static int find_binary(const char *name, char *out, size_t n)
{
	const char *dirs[3] = {getenv("ORTMK_EP_DIR"), ORTMK_BUILD_EP_DIR, ORTMK_INSTALL_EP_DIR};
	char file[64];

	snprintf(file, sizeof(file), "ort-ep-%s", name);
	for (int i = 0; i < 3; i++) {
		if (!dirs[i] || !dirs[i][0])
			continue;
		/* Build tree: <dir>/<name>/ort-ep-<name>; installed: <dir>/ort-ep-<name>. */
		snprintf(out, n, "%s/%s/%s", dirs[i], name, file);
		if (access(out, X_OK) == 0)
			return 0;
		snprintf(out, n, "%s/%s", dirs[i], file);
		if (access(out, X_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

static char **child_environ(const char *url)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 3, sizeof(char *));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "ORTMK_EP_URL=", 13) && strncmp(environ[i], "ORTMK_EP_FD=", 12))
			env[k++] = environ[i];
	env[k] = malloc(strlen(url) + 16);
	if (!env[k]) {
		free(env);
		return NULL;
	}
	sprintf(env[k++], "ORTMK_EP_URL=%s", url);
	env[k++] = "ORTMK_EP_FD=3";
	return env;
}

static int spawn_child(core_ep *ep, const char *url, int child_fd)
{
	posix_spawn_file_actions_t fa;
	char *argv[] = {ep->binary, NULL};
	char **env = child_environ(url);
	int rc;

	if (!env)
		return -ENOMEM;
	posix_spawn_file_actions_init(&fa);
	/* dup2 onto fd 3 clears close-on-exec for the child's copy only. */
	posix_spawn_file_actions_adddup2(&fa, child_fd, 3);
	rc = posix_spawn(&ep->pid, ep->binary, &fa, NULL, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	for (size_t i = 0; env[i]; i++)
		if (strncmp(env[i], "ORTMK_EP_URL=", 13) == 0)
			free(env[i]);
	free(env);
	return -rc;
}

static ortmk_status accept_hello(core_ep *ep, const uint8_t token[32])
{
	Ortmk__Envelope *hello = NULL, e = ORTMK__ENVELOPE__INIT;
	Ortmk__HelloAck ack = ORTMK__HELLO_ACK__INIT;
	char err[256] = "";
	int rc, ok;

	rc = ipc_recv(&ep->chan, CORE_HANDSHAKE_MS, &hello, err, sizeof(err));
	if (rc == -ECHILD) {
		ep_reap(ep, 1);
		return core_fail(ORTMK_ERR_PROVIDER_DIED, "provider '%s' (%s) died during its handshake: %s",
				 ep->name, ep->binary, ep->death);
	}
	if (rc)
		return core_fail(rc == -ETIMEDOUT ? ORTMK_ERR_TIMEOUT : ORTMK_ERR_PROTOCOL,
				 "provider '%s' (%s): no valid HELLO: %s", ep->name, ep->binary,
				 rc == -ETIMEDOUT ? "timed out" : err);
	/* Constant-time compare is moot for a local peer but costs nothing. */
	ok = hello->kind == ORTMK__KIND__HELLO;
	if (ok) {
		uint8_t diff = 0;

		for (int i = 0; i < 32; i++)
			diff |= hello->hello->token.data[i] ^ token[i];
		ok = diff == 0 && (pid_t)hello->hello->pid == ep->pid &&
		     ipc_last_peer_pid(&ep->chan) == ep->pid &&
		     hello->hello->protocol_version == IPC_PROTOCOL_VERSION &&
		     strcmp(hello->hello->provider, ep->name) == 0;
	}
	if (ok && hello->hello->detail)
		snprintf(ep->detail, sizeof(ep->detail), "%s", hello->hello->detail);
	ack.accepted = ok;
	ack.reason = ok ? "" : "token, pid, version or provider mismatch";
	e.kind = ORTMK__KIND__HELLO_ACK;
	e.body_case = ORTMK__ENVELOPE__BODY_HELLO_ACK;
	e.hello_ack = &ack;
	e.has_reply_to = 1;
	e.reply_to = hello->seq;
	ipc_envelope_free(hello);
	rc = ipc_send(&ep->chan, &e);
	if (!ok)
		return core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': handshake refused (%s)",
				 ep->name, ack.reason);
	return rc ? core_fail(ORTMK_ERR_IO, "provider '%s': cannot answer HELLO", ep->name) : ORTMK_OK;
}

static ortmk_status ep_start(ortmk_env *env, core_ep *ep)
{
	char url[512];
	uint8_t token[32];
	int sv[2], rc;

	snprintf(url, sizeof(url), "ipc://%s/%s.sock", env->dir, ep->name);
	unlink(url + 6);
	if (getrandom(token, sizeof(token), 0) != (ssize_t)sizeof(token))
		return core_fail(ORTMK_ERR_IO, "getrandom failed");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return core_fail(ORTMK_ERR_IO, "socketpair: %s", strerror(errno));
	ep->fd_sock = sv[0];
	if (ipc_chan_listen(&ep->chan, url)) {
		close(sv[1]);
		return core_fail(ORTMK_ERR_IO, "cannot listen on %s", url);
	}
	rc = spawn_child(ep, url, sv[1]);
	close(sv[1]);
	if (rc)
		return core_fail(ORTMK_ERR_IO, "cannot start %s: %s", ep->binary, strerror(-rc));
	ep->pidfd = (int)syscall(SYS_pidfd_open, ep->pid, 0);
	ep->chan.peer_pidfd = ep->pidfd;
	snprintf(ep->chan.peer, sizeof(ep->chan.peer), "ort-ep-%s[%d]", ep->name, (int)ep->pid);
	/* The token goes over the inherited socketpair, never argv or env. */
	if (ipc_send_bytes(ep->fd_sock, token, sizeof(token)))
		return core_fail(ORTMK_ERR_IO, "cannot send the token to %s", ep->binary);
	ep->alive = 1;
	rc = accept_hello(ep, token);
	if (rc)
		ep->alive = 0;
	else
		ipc_log(IPC_LOG_INFO, "provider %s started: pid %d, %s", ep->name, (int)ep->pid, ep->detail);
	return rc;
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
	st = ORTMK_ERR_INVALID_ARGUMENT;
	ep = env->n_eps < CORE_MAX_EPS && strlen(name) < 16 ? calloc(1, sizeof(*ep)) : NULL;
	if (!ep) {
		pthread_mutex_unlock(&env->lock);
		return core_fail(st, "provider '%s': cannot add another provider", name);
	}
	ipc_chan_init(&ep->chan);
	ep->chan.segs = &ep->segs;
	ep->pidfd = -1;
	ep->fd_sock = -1;
	pthread_mutex_init(&ep->lock, NULL);
	snprintf(ep->name, sizeof(ep->name), "%s", name);
	if (find_binary(name, ep->binary, sizeof(ep->binary))) {
		ep_destroy(ep);
		pthread_mutex_unlock(&env->lock);
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
				 "unknown provider '%s': no ort-ep-%s binary found (set ORTMK_EP_DIR)",
				 name, name);
	}
	st = ep_start(env, ep);
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

static ortmk_status died(core_ep *ep)
{
	int pid = (int)ep->pid;

	ep->alive = 0;
	/* A provider whose connection broke is not trusted to be idle: end it. */
	ep_reap(ep, 0);
	if (ep->pid > 0)
		kill(ep->pid, SIGKILL);
	ep_reap(ep, 1);
	return core_fail(ORTMK_ERR_PROVIDER_DIED, "provider '%s' (pid %d) died: %s",
			 ep->name, pid, ep->death[0] ? ep->death : "connection lost");
}

static ortmk_status error_reply(core_ep *ep, const Ortmk__Error *e)
{
	ortmk_status st = ORTMK_ERR_PROVIDER;

	if (e->code == ORTMK__ERROR_CODE__E_UNSUPPORTED)
		st = ORTMK_ERR_NOT_IMPLEMENTED;
	else if (e->code == ORTMK__ERROR_CODE__E_NOMEM)
		st = ORTMK_ERR_NO_MEMORY;
	return core_fail(st, "provider '%s': %s", ep->name, e->message);
}

ortmk_status core_ep_request(core_ep *ep, Ortmk__Envelope *req, int timeout_ms,
			     Ortmk__Envelope **rep)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX :
		ipc_now_ns() + (uint64_t)timeout_ms * 1000000u;
	char err[512] = "";
	int rc;

	*rep = NULL;
	if (!ep->alive)
		return core_fail(ORTMK_ERR_PROVIDER_DIED, "provider '%s' is not running (%s)",
				 ep->name, ep->death[0] ? ep->death : "stopped");
	rc = ipc_send(&ep->chan, req);
	if (rc)
		return rc == -EPIPE ? died(ep) : core_fail(ORTMK_ERR_IO, "provider '%s': send failed", ep->name);
	for (;;) {
		Ortmk__Envelope *m = NULL;
		int left = -1;

		if (deadline != UINT64_MAX) {
			uint64_t now = ipc_now_ns();

			left = now >= deadline ? 0 : (int)((deadline - now) / 1000000u);
		}
		rc = ipc_recv(&ep->chan, left, &m, err, sizeof(err));
		if (rc == -ECHILD || rc == -EPIPE)
			return died(ep);
		if (rc == -ETIMEDOUT)
			return core_fail(ORTMK_ERR_TIMEOUT, "provider '%s': no reply to %s within %d ms",
					 ep->name, ipc_kind_name(req->kind), timeout_ms);
		if (rc)
			return core_fail(ORTMK_ERR_PROTOCOL, "provider '%s' sent an invalid message: %s",
					 ep->name, err);
		if (m->has_reply_to && m->reply_to == req->seq) {
			if (m->kind == ORTMK__KIND__ERROR) {
				ortmk_status st = error_reply(ep, m->error);

				*rep = m;
				return st;
			}
			*rep = m;
			return ORTMK_OK;
		}
		if (m->kind == ORTMK__KIND__ERROR && (!m->has_reply_to || m->reply_to == 0)) {
			ortmk_status st = error_reply(ep, m->error);

			ipc_envelope_free(m);
			return st;
		}
		/* A reply to an earlier request we stopped waiting for: drop it. */
		ipc_log(IPC_LOG_WARN, "provider %s: dropped a stray %s", ep->name, ipc_kind_name(m->kind));
		ipc_envelope_free(m);
	}
}

static ortmk_status expect_ack(core_ep *ep, Ortmk__Envelope *req)
{
	Ortmk__Envelope *rep = NULL;
	ortmk_status st = core_ep_request(ep, req, CORE_CONTROL_MS, &rep);

	if (st == ORTMK_OK && rep->kind != ORTMK__KIND__ACK)
		st = core_fail(ORTMK_ERR_PROTOCOL, "provider '%s': expected ACK, got %s",
			       ep->name, ipc_kind_name(rep->kind));
	ipc_envelope_free(rep);
	return st;
}

ortmk_status core_ep_add_segment(core_ep *ep, shm_segment *s)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__AddSegment body = ORTMK__ADD_SEGMENT__INIT;
	ortmk_status st;

	if (ipc_segtab_find(&ep->segs, s->id))
		return ORTMK_OK;
	body.segment_id = s->id;
	body.size = s->size;
	body.fd_tag = ++ep->next_fd_tag;
	e.kind = ORTMK__KIND__ADD_SEGMENT;
	e.body_case = ORTMK__ENVELOPE__BODY_ADD_SEGMENT;
	e.add_segment = &body;
	if (ipc_send_fd(ep->fd_sock, s->fd, body.fd_tag))
		return ep->alive ? died(ep) : core_fail(ORTMK_ERR_PROVIDER_DIED, "provider '%s' is not running", ep->name);
	st = expect_ack(ep, &e);
	if (st == ORTMK_OK && ipc_segtab_add(&ep->segs, s))
		st = core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	return st;
}

ortmk_status core_ep_release_segment(core_ep *ep, uint64_t id)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Release body = ORTMK__RELEASE__INIT;

	ipc_segtab_remove(&ep->segs, id);
	if (!ep->alive)
		return ORTMK_OK;
	body.has_segment_id = 1;
	body.segment_id = id;
	e.kind = ORTMK__KIND__RELEASE;
	e.body_case = ORTMK__ENVELOPE__BODY_RELEASE;
	e.release = &body;
	return expect_ack(ep, &e);
}

ortmk_status core_ep_add_file(core_ep *ep, uint64_t file_id, int fd, uint64_t size)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__AddFile body = ORTMK__ADD_FILE__INIT;

	body.file_id = file_id;
	body.size = size;
	body.fd_tag = ++ep->next_fd_tag;
	e.kind = ORTMK__KIND__ADD_FILE;
	e.body_case = ORTMK__ENVELOPE__BODY_ADD_FILE;
	e.add_file = &body;
	if (ipc_send_fd(ep->fd_sock, fd, body.fd_tag))
		return ep->alive ? died(ep) : core_fail(ORTMK_ERR_PROVIDER_DIED, "provider '%s' is not running", ep->name);
	return expect_ack(ep, &e);
}
