/*
 * fdpass: descriptors over the AF_UNIX socketpair a provider inherits at
 * spawn.  Each descriptor travels with an 8-byte tag in one datagram
 * (SOCK_SEQPACKET keeps message boundaries), so the receiver can match it to
 * the ADD_SEGMENT/ADD_FILE message that announced it.
 */
#include "channel.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int wait_readable(int sock, int timeout_ms)
{
	struct pollfd p = {.fd = sock, .events = POLLIN};
	int rc;

	do
		rc = poll(&p, 1, timeout_ms);
	while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return -errno;
	if (rc == 0)
		return -ETIMEDOUT;
	return 0;
}

int ipc_send_fd(int sock, int fd, uint64_t tag)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &tag, .iov_len = sizeof(tag)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
			   .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm;
	ssize_t n;

	memset(cbuf, 0, sizeof(cbuf));
	cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	do
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(tag) ? 0 : (n < 0 ? -errno : -EIO);
}

int ipc_recv_fd(int sock, uint64_t tag, int timeout_ms, int *fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	uint64_t got;
	struct iovec iov = {.iov_base = &got, .iov_len = sizeof(got)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
			   .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm;
	ssize_t n;
	int rc, rfd = -1;

	*fd = -1;
	rc = wait_readable(sock, timeout_ms);
	if (rc)
		return rc;
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EPIPE;
	cm = CMSG_FIRSTHDR(&m);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
	    cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&rfd, CMSG_DATA(cm), sizeof(int));
	if (rfd < 0 || n != (ssize_t)sizeof(got) || (m.msg_flags & MSG_CTRUNC)) {
		if (rfd >= 0)
			close(rfd);
		return -EPROTO;
	}
	if (got != tag) {
		close(rfd);
		return -EPROTO;
	}
	*fd = rfd;
	return 0;
}

int ipc_send_bytes(int sock, const void *buf, size_t n)
{
	ssize_t w;

	do
		w = send(sock, buf, n, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	return w == (ssize_t)n ? 0 : (w < 0 ? -errno : -EIO);
}

int ipc_recv_bytes(int sock, void *buf, size_t n, int timeout_ms)
{
	ssize_t r;
	int rc = wait_readable(sock, timeout_ms);

	if (rc)
		return rc;
	do
		r = recv(sock, buf, n, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return r == (ssize_t)n ? 0 : -EPROTO;
}
