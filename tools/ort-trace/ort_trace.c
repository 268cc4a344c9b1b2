/*
 * ort-trace: see every message that crosses ortmk's process boundary, the
 * way strace shows system calls.
 *
 *   ort-trace record -o FILE -- PROGRAM ARGS...   record a run to FILE
 *   ort-trace run [FILTERS] [--json] [-o OUT] -- PROGRAM ARGS...
 *                                                 print messages live
 *   ort-trace show FILE [FILTERS] [--json]        print a recorded trace
 *   ort-trace stats FILE [--json]                 totals per kind, per provider
 *   ort-trace export --chrome FILE [-o OUT]       Chrome trace JSON (Perfetto)
 *
 * The traced program is any program linked with libortmk: the core's tap
 * (ipc/trace.c) writes records to the descriptor named by ORTMK_TRACE_FD,
 * which `record` opens on FILE (append mode, so several libortmk processes
 * started by PROGRAM share it) and `run` makes a pipe this process reads.
 * Exit status: PROGRAM's (128 + signal when killed) for record and run; 0,
 * or 1 on an unreadable or malformed trace, for the others; 2 for a bad
 * command line.  The file format is docs/TRACE.md.
 */
#include "ort_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fputs(
"usage: ort-trace record -o FILE -- PROGRAM [ARGS...]\n"
"       ort-trace run [FILTERS] [--json] [--no-color] [-o OUT] -- PROGRAM [ARGS...]\n"
"       ort-trace show FILE [FILTERS] [--json] [--no-color]\n"
"       ort-trace stats FILE [--json] [--no-color]\n"
"       ort-trace export --chrome FILE [-o OUT]\n"
"filters:\n"
"  --provider P   messages and events of provider P (\"cpu\")\n"
"  --kind K[,K]   message kinds (RUN, RESULT, ...), \"invalid\", event names\n"
"                 (died, restart, ...) or \"event\"; case does not matter\n"
"  --session S    messages of session S\n"
"  --grep TEXT    records whose kind, provider or summary contain TEXT\n"
"run prints to stderr (like strace) unless -o OUT is given.\n"
"FILE may be - for standard input.  Format: docs/TRACE.md.\n", f);
}

typedef struct cmdline {
	const char *cmd, *file, *out;
	bool json, no_color, chrome;
	tr_filter filter;
	char **program;           /* after "--" */
} cmdline;

static int bad(const char *fmt, const char *arg)
{
	fputs("ort-trace: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs(" (ort-trace --help)\n", stderr);
	return 2;
}

static int parse_session(cmdline *c, const char *v)
{
	char *end;

	errno = 0;
	c->filter.session = strtoull(v, &end, 10);
	if (errno || end == v || *end || *v == '-')
		return bad("--session wants a number, not '%s'", v);
	c->filter.has_session = true;
	return 0;
}

/* An option that takes a value: 1 when `a` is one (value consumed). */
static int option_value(cmdline *c, const char *a, const char *v, int *rc)
{
	const char **slot = !strcmp(a, "--provider") ? &c->filter.provider :
		!strcmp(a, "--kind") ? &c->filter.kinds :
		!strcmp(a, "--grep") ? &c->filter.grep :
		!strcmp(a, "-o") || !strcmp(a, "--output") ? &c->out : NULL;

	if (!slot && strcmp(a, "--session"))
		return 0;
	if (!v) {
		*rc = bad("%s needs a value", a);
		return 1;
	}
	if (!slot)
		*rc = parse_session(c, v);
	else
		*slot = v;
	return 1;
}

static int parse(int argc, char **argv, cmdline *c)
{
	int rc = 0;

	memset(c, 0, sizeof(*c));
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))
		return 1;
	c->cmd = argv[1];
	for (int i = 2; i < argc && !rc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--")) {
			c->program = argv + i + 1;
			break;
		} else if (!strcmp(a, "--json")) {
			c->json = true;
		} else if (!strcmp(a, "--no-color")) {
			c->no_color = true;
		} else if (!strcmp(a, "--chrome")) {
			c->chrome = true;
		} else if (option_value(c, a, i + 1 < argc ? argv[i + 1] : NULL, &rc)) {
			i++;
		} else if (a[0] == '-' && a[1]) {
			return bad("unknown option '%s'", a);
		} else if (!c->file) {
			c->file = a;
		} else {
			return bad("unexpected argument '%s'", a);
		}
	}
	return rc;
}

static bool use_color(FILE *f, bool no_color)
{
	const char *nc = getenv("NO_COLOR");

	return !no_color && !(nc && nc[0]) && isatty(fileno(f));
}

/* ---- running the traced program ---------------------------------------- */

/* Starts PROGRAM with ORTMK_TRACE_FD=fd; fd stays open in the child only. */
static pid_t start_program(char **program, int fd)
{
	char val[16];
	pid_t pid;

	snprintf(val, sizeof(val), "%d", fd);
	pid = fork();
	if (pid != 0)
		return pid;
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	unsetenv("ORTMK_TRACE");
	setenv("ORTMK_TRACE_FD", val, 1);
	execvp(program[0], program);
	fprintf(stderr, "ort-trace: cannot run %s: %s\n", program[0], strerror(errno));
	_exit(127);
}

/* Waits for the program; its exit status, 128 + signal when killed. */
static int wait_program(pid_t pid, const char *name)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 1;
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "ort-trace: %s killed by signal %d (%s)\n", name, WTERMSIG(st),
			strsignal(WTERMSIG(st)));
		return 128 + WTERMSIG(st);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/* Like system(): Ctrl-C goes to the program; this process outlives it to
 * finish the trace. */
static void ignore_interrupts(void)
{
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
}

static int count_records(const char *file, uint64_t *records, uint64_t *bytes)
{
	FILE *f = fopen(file, "rb");
	Ortmk__Trace__Record *r;
	tr_reader rd;
	int rc;

	if (!f)
		return -1;
	tr_reader_init(&rd, f, file);
	while ((rc = tr_read(&rd, &r)) > 0)
		ortmk__trace__record__free_unpacked(r, NULL);
	*records = rd.index;
	*bytes = rd.offset;
	/* An empty file is reported by the caller, in its own words. */
	if (rc < 0 && rd.index > 0)
		fprintf(stderr, "ort-trace: warning: %s\n", rd.err);
	tr_reader_fini(&rd);
	fclose(f);
	return rc;
}

static int cmd_record(const cmdline *c)
{
	uint64_t records = 0, bytes = 0;
	int fd, status;
	pid_t pid;

	if (!c->out || !c->program || !c->program[0] || c->file)
		return bad("%s", "usage: ort-trace record -o FILE -- PROGRAM [ARGS...]");
	/* O_APPEND: every libortmk process PROGRAM starts appends whole records. */
	fd = open(c->out, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (fd < 0) {
		fprintf(stderr, "ort-trace: cannot create %s: %s\n", c->out, strerror(errno));
		return 1;
	}
	ignore_interrupts();
	pid = start_program(c->program, fd);
	close(fd);
	if (pid < 0) {
		fprintf(stderr, "ort-trace: fork: %s\n", strerror(errno));
		return 1;
	}
	status = wait_program(pid, c->program[0]);
	count_records(c->out, &records, &bytes);
	if (records > 0)
		fprintf(stderr, "ort-trace: %llu records (%llu bytes) in %s\n",
			(unsigned long long)records, (unsigned long long)bytes, c->out);
	if (records == 0)
		fprintf(stderr, "ort-trace: nothing recorded: %s never started a libortmk environment\n",
			c->program[0]);
	return status;
}

static int print_live(int fd, FILE *out, const cmdline *c)
{
	FILE *in = fdopen(fd, "rb");
	Ortmk__Trace__Record *r;
	tr_reader rd;
	tr_printer p;
	int rc;

	if (!in) {
		close(fd);
		return -1;
	}
	tr_reader_init(&rd, in, "live trace");
	tr_printer_init(&p, out, c->json, use_color(out, c->no_color), &c->filter);
	p.live = true;
	while ((rc = tr_read(&rd, &r)) > 0) {
		tr_printer_record(&p, r);
		ortmk__trace__record__free_unpacked(r, NULL);
	}
	/* A program that never traced leaves an empty pipe: not an error. */
	if (rc < 0 && rd.index > 0)
		fprintf(stderr, "ort-trace: %s\n", rd.err);
	tr_printer_fini(&p);
	tr_reader_fini(&rd);
	fclose(in);
	return rc;
}

static int cmd_run(const cmdline *c)
{
	FILE *out = stderr;
	int pfd[2], status;
	pid_t pid;

	if (!c->program || !c->program[0] || c->file)
		return bad("%s", "usage: ort-trace run [FILTERS] [--json] [-o OUT] -- PROGRAM [ARGS...]");
	if (c->out && !(out = fopen(c->out, "w"))) {
		fprintf(stderr, "ort-trace: cannot create %s: %s\n", c->out, strerror(errno));
		return 1;
	}
	if (pipe2(pfd, O_CLOEXEC)) {
		fprintf(stderr, "ort-trace: pipe: %s\n", strerror(errno));
		return 1;
	}
	ignore_interrupts();
	/* The write end must survive exec in the child only. */
	fcntl(pfd[1], F_SETFD, 0);
	pid = start_program(c->program, pfd[1]);
	close(pfd[1]);
	if (pid < 0) {
		fprintf(stderr, "ort-trace: fork: %s\n", strerror(errno));
		close(pfd[0]);
		return 1;
	}
	print_live(pfd[0], out, c);
	status = wait_program(pid, c->program[0]);
	if (out != stderr)
		fclose(out);
	return status;
}

static int cmd_export(const cmdline *c)
{
	FILE *out = stdout;
	int rc;

	if (!c->chrome || !c->file)
		return bad("%s", "usage: ort-trace export --chrome FILE [-o OUT]");
	if (c->out && !(out = fopen(c->out, "w"))) {
		fprintf(stderr, "ort-trace: cannot create %s: %s\n", c->out, strerror(errno));
		return 1;
	}
	rc = tr_cmd_export_chrome(c->file, out);
	if (fflush(out) && !rc) {
		fprintf(stderr, "ort-trace: cannot write the export: %s\n", strerror(errno));
		rc = 1;
	}
	if (out != stdout)
		fclose(out);
	return rc;
}

int main(int argc, char **argv)
{
	cmdline c;
	int rc = parse(argc, argv, &c);

	if (rc) {
		if (rc == 1)
			usage(stdout);
		return rc == 1 ? 0 : 2;
	}
	if (!strcmp(c.cmd, "record"))
		return cmd_record(&c);
	if (!strcmp(c.cmd, "run"))
		return cmd_run(&c);
	if (!strcmp(c.cmd, "export"))
		return cmd_export(&c);
	if (strcmp(c.cmd, "show") && strcmp(c.cmd, "stats"))
		return bad("unknown command '%s'", c.cmd);
	if (!c.file)
		return bad("%s needs a trace FILE", c.cmd);
	if (c.program)
		return bad("%s takes no program", c.cmd);
	if (!strcmp(c.cmd, "show"))
		return tr_cmd_show(c.file, c.json, use_color(stdout, c.no_color), &c.filter);
	return tr_cmd_stats(c.file, c.json, use_color(stdout, c.no_color));
}
