/*
 * ep_sandbox: the system-call filter a provider process serves under
 * (docs/SECURITY.md, "The provider sandbox").  ep_host_main calls
 * ep_sandbox_prepare and ep_sandbox_close_fds first thing and ep_sandbox_enter
 * once the provider
 * is initialised and connected, before it says HELLO: from then on the
 * process can compute on memory and descriptors it holds or is handed, talk
 * on its channel, and start threads, and nothing else.  It cannot open a
 * path, make a socket, run a program, trace a process or fork.
 *
 * GPU providers get the driver filter instead (ep_sandbox_policy.driver):
 * everything allowed but the calls in `denied` and a fork, a network
 * socket or a signal to another process; their drivers open files and
 * drive devices after start, which an allow list cannot foresee.
 *
 * A call outside the list kills the whole process (SIGSYS), which the core
 * reports as a sandbox violation and restarts like any other crash.  The
 * filter is libseccomp's, loaded with TSYNC so nng's threads, started by
 * the dial, are confined too.  ORTMK_SANDBOX=0 runs without it (debugging:
 * core dumps, gdb attach); ORTMK_SANDBOX=report logs each call the filter
 * would refuse and fails it with ENOSYS instead, to find what a new driver
 * needs.
 */
#include "ep_host_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <malloc.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "log.h"

#if defined(__SANITIZE_ADDRESS__)
#define EP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EP_ASAN 1
#endif
#endif

#ifdef EP_ASAN
#include <sanitizer/common_interface_defs.h>

static int confined;

/* LeakSanitizer's check at exit stops the world with ptrace and reads
 * /proc: the filter would kill it.  A confined provider skips the check
 * (leaks in providers are found with ORTMK_SANDBOX=0). */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
	return confined;
}

/* Reports must still print under the filter: the memory map is read and
 * the symbolizer loads every module's debug information now, while files
 * can still be opened. */
static void sanitizer_prepare(void)
{
	__sanitizer_sandbox_arguments a;
	char buf[256];

	memset(&a, 0, sizeof(a));
	__sanitizer_sandbox_on_notify(&a);
	__sanitizer_symbolize_pc(__builtin_return_address(0), "%p %F %L", buf, sizeof(buf));
}

/* What the sanitizer runtime still tries while it reports (isatty on
 * stderr for colours, its raw open of /proc and module files) fails with
 * an error instead of killing the report half-way.  glibc's open() is
 * openat, which stays fatal, so the sandbox tests mean the same here. */
static int sanitizer_rules(scmp_filter_ctx f, char *err, size_t n);
#else
static void sanitizer_prepare(void)
{
}

static int sanitizer_rules(scmp_filter_ctx f, char *err, size_t n)
{
	(void)f;
	(void)err;
	(void)n;
	return 0;
}
#endif

/* Everything the message loop, the kernels, malloc and glibc's threads
 * need (docs/SECURITY.md has the reason for each group). */
static const char *const allowed[] = {
	/* the channel (nng's sockets, its eventfd and epoll, the descriptor
	 * socketpair) and the descriptors passed over it */
	"read", "readv", "write", "writev", "recvmsg", "recvfrom", "sendmsg", "sendto",
	"getsockopt", "shutdown", "close", "poll", "ppoll", "epoll_wait", "epoll_pwait",
	"epoll_pwait2", "epoll_ctl",
	/* passed files: segments, external data, the pre-pack cache (read,
	 * and written by the provider through the descriptor it is handed) */
	"fstat", "newfstatat", "lseek", "pread64", "pwrite64", "ftruncate", "fsync", "fdatasync",
	/* memory */
	"brk", "munmap", "mremap", "madvise",
	/* threads and their synchronisation */
	"futex", "set_robust_list", "get_robust_list", "rseq", "sched_yield",
	"sched_getaffinity", "exit", "exit_group", "restart_syscall", "membarrier",
	/* time */
	"clock_gettime", "clock_getres", "gettimeofday", "time", "clock_nanosleep", "nanosleep",
	/* signals: masks, handlers, returning from one, waiting */
	"rt_sigprocmask", "rt_sigaction", "rt_sigreturn", "sigaltstack", "pause",
	/* identity and facts */
	"getpid", "gettid", "getppid", "sysinfo", "getrandom",
};

/* What the driver filter refuses: running a program, forking (a clone
 * without thread flags, below), tracing or reading other processes, and
 * kernel administration no driver does. */
static const char *const denied[] = {
	"execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev",
	"pidfd_getfd", "kexec_load", "kexec_file_load", "init_module", "finit_module",
	"delete_module", "mount", "umount2", "pivot_root", "chroot", "setns", "unshare", "bpf",
	"userfaultfd", "keyctl", "add_key", "request_key", "reboot", "swapon", "swapoff", "acct",
	"iopl", "ioperm", "open_by_handle_at", "name_to_handle_at", "syslog", "personality",
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
	"settimeofday", "clock_settime", "adjtimex", "quotactl",
};

/* fcntl commands: descriptor flags, status flags (nng's non-blocking
 * sockets) and the seals a segment is checked for. */
static const int fcntl_cmds[] = {F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_GET_SEALS};

/* What pthread_create passes to clone (glibc); a fork lacks CLONE_THREAD
 * and CLONE_VM. */
#define THREAD_FLAGS (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD)

int ep_sandbox_mode(void)
{
	const char *e = getenv("ORTMK_SANDBOX");

	if (!e || !e[0] || strcmp(e, "1") == 0)
		return EP_SANDBOX_ON;
	if (strcmp(e, "0") == 0)
		return EP_SANDBOX_OFF;
	if (strcmp(e, "report") == 0)
		return EP_SANDBOX_REPORT;
	/* The core refuses other values; a provider started by hand keeps
	 * the filter rather than guess. */
	ipc_log(IPC_LOG_WARN, "ORTMK_SANDBOX=%s: expected 0, 1 or report; the sandbox stays on", e);
	return EP_SANDBOX_ON;
}

void ep_sandbox_prepare(void)
{
	/* glibc gives each thread its own malloc arena, and the first time
	 * one of those arenas shrinks it opens /proc/sys/vm/overcommit_memory
	 * (found on a batch-32 CNN run: the provider was killed mid-run).
	 * With one arena, the process heap shrinks by brk and nothing is
	 * opened.  Before any thread exists, so no thread has an arena yet. */
	mallopt(M_ARENA_MAX, 1);
}

void ep_sandbox_close_fds(int keep)
{
	/* Whatever the application left without close-on-exec: the provider
	 * needs stdio and its descriptor socketpair only. */
	if (keep > 3)
		syscall(SYS_close_range, 3u, (unsigned)keep - 1, 0u);
	if (keep >= 3)
		syscall(SYS_close_range, (unsigned)keep + 1, ~0u, 0u);
}

static int rule(scmp_filter_ctx f, uint32_t action, const char *name, unsigned n,
		const struct scmp_arg_cmp *cmp, char *err, size_t en)
{
	int nr = seccomp_syscall_resolve_name(name);
	int rc;

	/* A name this architecture lacks (poll on arm64) is nothing to allow. */
	if (nr == __NR_SCMP_ERROR)
		return 0;
	rc = seccomp_rule_add_array(f, action, nr, n, cmp);
	if (rc < 0)
		snprintf(err, en, "cannot add the rule for %s: %s", name, strerror(-rc));
	return rc;
}

/* Calls allowed only with some arguments. */
static int conditional_rules(scmp_filter_ctx f, const ep_sandbox_policy *p, char *err, size_t n)
{
	struct scmp_arg_cmp noexec = SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0);
	struct scmp_arg_cmp thread = SCMP_A0(SCMP_CMP_MASKED_EQ, THREAD_FLAGS, THREAD_FLAGS);
	struct scmp_arg_cmp self = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid());
	struct scmp_arg_cmp calling = SCMP_A0(SCMP_CMP_EQ, 0);
	struct scmp_arg_cmp name_set = SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME);
	struct scmp_arg_cmp name_get = SCMP_A0(SCMP_CMP_EQ, PR_GET_NAME);
	int exec = p && p->exec_memory, rc;

	rc = rule(f, SCMP_ACT_ALLOW, "mmap", exec ? 0 : 1, &noexec, err, n);
	if (rc == 0)
		rc = rule(f, SCMP_ACT_ALLOW, "mprotect", exec ? 0 : 1, &noexec, err, n);
	if (rc == 0)
		rc = rule(f, SCMP_ACT_ALLOW, "clone", 1, &thread, err, n);
	/* glibc falls back to clone, whose flags a filter can read, when
	 * clone3 (flags behind a pointer) says it does not exist. */
	if (rc == 0)
		rc = rule(f, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL, err, n);
	/* raise() and abort(): signals to this process only */
	if (rc == 0)
		rc = rule(f, SCMP_ACT_ALLOW, "tgkill", 1, &self, err, n);
	if (rc == 0)
		rc = rule(f, SCMP_ACT_ALLOW, "kill", 1, &self, err, n);
	/* a lane's thread binds itself to a CPU (Run.bind_cpu):
	 * the calling thread only (pid 0) */
	if (rc == 0)
		rc = rule(f, SCMP_ACT_ALLOW, "sched_setaffinity", 1, &calling, err, n);
	/* nng names its threads */
	if (rc == 0)
		rc = rule(f, SCMP_ACT_ALLOW, "prctl", 1, &name_set, err, n);
	if (rc == 0)
		rc = rule(f, SCMP_ACT_ALLOW, "prctl", 1, &name_get, err, n);
	for (size_t i = 0; rc == 0 && i < sizeof(fcntl_cmds) / sizeof(fcntl_cmds[0]); i++) {
		struct scmp_arg_cmp cmd = SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)fcntl_cmds[i]);

		rc = rule(f, SCMP_ACT_ALLOW, "fcntl", 1, &cmd, err, n);
	}
	return rc;
}

#ifdef EP_ASAN
static int sanitizer_rules(scmp_filter_ctx f, char *err, size_t n)
{
	int rc = rule(f, SCMP_ACT_ERRNO(ENOTTY), "ioctl", 0, NULL, err, n);

	return rc ? rc : rule(f, SCMP_ACT_ERRNO(EACCES), "open", 0, NULL, err, n);
}
#endif

/* The driver filter's rules on top of "allow by default". */
static int driver_rules(scmp_filter_ctx f, uint32_t deny, char *err, size_t n)
{
	struct scmp_arg_cmp fork = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0);
	struct scmp_arg_cmp inet = SCMP_A0(SCMP_CMP_NE, AF_UNIX);
	struct scmp_arg_cmp other = SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)getpid());
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < sizeof(denied) / sizeof(denied[0]); i++)
		rc = rule(f, deny, denied[i], 0, NULL, err, n);
	if (rc == 0)
		rc = rule(f, deny, "clone", 1, &fork, err, n);
	if (rc == 0)
		rc = rule(f, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL, err, n);
	if (rc == 0)
		rc = rule(f, deny, "socket", 1, &inet, err, n);
	if (rc == 0)
		rc = rule(f, deny, "socketpair", 1, &inet, err, n);
	if (rc == 0)
		rc = rule(f, deny, "kill", 1, &other, err, n);
	if (rc == 0)
		rc = rule(f, deny, "tgkill", 1, &other, err, n);
	return rc;
}

static int build(scmp_filter_ctx f, const ep_sandbox_policy *p, uint32_t deny, char *err,
		 size_t n)
{
	int rc = seccomp_attr_set(f, SCMP_FLTATR_CTL_TSYNC, 1);

	if (rc < 0)
		return snprintf(err, n, "cannot ask for thread sync: %s", strerror(-rc)), rc;
	if (p && p->driver)
		return driver_rules(f, deny, err, n);
	for (size_t i = 0; rc == 0 && i < sizeof(allowed) / sizeof(allowed[0]); i++)
		rc = rule(f, SCMP_ACT_ALLOW, allowed[i], 0, NULL, err, n);
	for (size_t i = 0; rc == 0 && p && p->extra && p->extra[i]; i++)
		rc = rule(f, SCMP_ACT_ALLOW, p->extra[i], 0, NULL, err, n);
	if (rc == 0)
		rc = conditional_rules(f, p, err, n);
	if (rc == 0)
		rc = sanitizer_rules(f, err, n);
	return rc;
}

#if defined(__x86_64__) || defined(__aarch64__)
/* ORTMK_SANDBOX=report: name the call and fail it instead of dying. */
static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	char line[96];
	int len = snprintf(line, sizeof(line), "ort-ep sandbox: system call %d refused (ORTMK_SANDBOX=report)\n",
			   si->si_syscall);

	(void)sig;
	if (write(2, line, (size_t)len) < 0)
		return;
#ifdef __x86_64__
	uc->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
#else
	uc->uc_mcontext.regs[0] = (unsigned long long)-ENOSYS;
#endif
}

static int report_handler(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigsys;
	sa.sa_flags = SA_SIGINFO;
	return sigaction(SIGSYS, &sa, NULL) ? -errno : 0;
}
#else
static int report_handler(void)
{
	return -ENOTSUP;
}
#endif

/* No core files (weights and inputs would land on disk) and no ptrace
 * attach by other processes of the user. */
static int harden(char *err, size_t n)
{
	struct rlimit no_core = {0, 0};

	if (setrlimit(RLIMIT_CORE, &no_core))
		return snprintf(err, n, "setrlimit(RLIMIT_CORE): %s", strerror(errno)), -errno;
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		return snprintf(err, n, "PR_SET_DUMPABLE: %s", strerror(errno)), -errno;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return snprintf(err, n, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno)), -errno;
	return 0;
}

int ep_sandbox_enter(const ep_sandbox_policy *p, int mode, char *err, size_t n)
{
	uint32_t deflt = mode == EP_SANDBOX_REPORT ? SCMP_ACT_TRAP : SCMP_ACT_KILL_PROCESS;
	scmp_filter_ctx f = NULL;
	int rc;

	if (mode == EP_SANDBOX_OFF)
		return 0;
	rc = harden(err, n);
	if (rc == 0 && mode == EP_SANDBOX_REPORT && (rc = report_handler()) != 0)
		snprintf(err, n, "ORTMK_SANDBOX=report is not supported on this architecture");
	if (rc == 0 && !(f = seccomp_init(p && p->driver ? SCMP_ACT_ALLOW : deflt))) {
		snprintf(err, n, "seccomp_init failed");
		rc = -ENOMEM;
	}
	if (rc == 0)
		rc = build(f, p, deflt, err, n);
	if (rc == 0)
		sanitizer_prepare();
	if (rc == 0 && (rc = seccomp_load(f)) < 0)
		snprintf(err, n, "loading the filter: %s", strerror(-rc));
#ifdef EP_ASAN
	confined = rc == 0;
#endif
	seccomp_release(f);
	return rc;
}
