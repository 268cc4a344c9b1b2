/*
 * ort-conformance: runs the ONNX backend test cases (Debian's
 * libonnx-testdata) through ortmk and reports pass / fail / error per case,
 * per suite and in total, optionally as a TSV.  With --expect it checks a
 * list of cases that must pass: `meson test --suite conformance` runs it so
 * (tests/conformance/), and people run it to see which ops are missing
 * (docs/CONFORMANCE.md).
 *
 * Each case runs in a forked worker that is its own process group and has
 * its own env, so a crash or a hang (the worker and its provider processes
 * are killed after --timeout-s) costs that case only.  The parent forks
 * before it would touch ortmk or nng, and never does: it only reads one
 * result line per worker from a pipe.  --jobs 0 runs the cases in this
 * process instead, for a debugger.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <fcntl.h>

#include <ortmk/ortmk.h>
#include "conformance_case.h"

#define DEFAULT_DATA "/usr/share/libonnx-testdata/data"
#define DEFAULT_SUITES "node,pytorch-converted,pytorch-operator,simple"
#define REASON_MAX 1536
#define MAX_SUITES 16
#define MAX_JOBS 256

typedef struct conf_case {
	const char *suite;
	char *name;          /* the case directory's name */
	char *dir;
	conf_result result;
	char *reason;
	double secs;
} conf_case;

typedef struct options {
	const char *data, *filter, *tsv, *expect;
	char *suite_list;        /* owns the strings suites[] points into */
	const char *suites[MAX_SUITES];
	size_t n_suites;
	conf_settings set;
	long jobs;
	double timeout_s;
	bool verbose;
} options;

static volatile sig_atomic_t stop_requested;

static void usage(FILE *f)
{
	fputs(
"usage: ort-conformance [options]\n"
"  --data DIR          test data root (default " DEFAULT_DATA ")\n"
"  --suite LIST        comma-separated suites (default " DEFAULT_SUITES ")\n"
"  --filter SUBSTR     only cases whose \"suite/case\" contains SUBSTR\n"
"  --provider LIST     session providers in priority order (default: the library's)\n"
"  --threads T         intra-op threads per provider (default 1: the cases are\n"
"                      small and --jobs gives the parallelism)\n"
"  --tsv FILE          write suite, case, result, reason per case\n"
"  --jobs N            worker processes (default: the number of cores);\n"
"                      0 runs the cases in this process, without isolation\n"
"  --timeout-s S       seconds per case before its worker is killed (default 20)\n"
"  --expect PASSLIST   cases that must pass (\"suite/case\" per line, '#' comments):\n"
"                      exit 1 if one does not; the last line printed is\n"
"                      \"N passed, M failed\" over the listed cases\n"
"  -v                  print every case as it finishes\n", f);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fputs("ort-conformance: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

static char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(xmalloc(n), s, n);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- command line -------------------------------------------------------- */

static void split_suites(options *o, const char *list)
{
	free(o->suite_list);
	o->suite_list = xstrdup(list);
	o->n_suites = 0;
	for (char *save, *tok = strtok_r(o->suite_list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (o->n_suites == MAX_SUITES || strchr(tok, '/')) {
			fprintf(stderr, "ort-conformance: bad --suite list\n");
			exit(2);
		}
		o->suites[o->n_suites++] = tok;
	}
}

static bool parse_number(const char *s, double lo, double hi, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return errno == 0 && end != s && *end == '\0' && *out >= lo && *out <= hi;
}

static void parse_args(int argc, char **argv, options *o)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	double num;

	*o = (options){.data = DEFAULT_DATA, .jobs = cores > 0 ? cores : 1,
		       .timeout_s = 20, .set.threads = "1"};
	split_suites(o, DEFAULT_SUITES);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(a, "-v")) {
			o->verbose = true;
			continue;
		} else if (!v) {
			goto bad;
		} else if (!strcmp(a, "--data")) {
			o->data = v;
		} else if (!strcmp(a, "--suite")) {
			split_suites(o, v);
		} else if (!strcmp(a, "--filter")) {
			o->filter = v;
		} else if (!strcmp(a, "--provider")) {
			o->set.providers = v;
		} else if (!strcmp(a, "--threads")) {
			o->set.threads = v;
		} else if (!strcmp(a, "--tsv")) {
			o->tsv = v;
		} else if (!strcmp(a, "--expect")) {
			o->expect = v;
		} else if (!strcmp(a, "--jobs") && parse_number(v, 0, MAX_JOBS, &num) && num == (long)num) {
			o->jobs = (long)num;
		} else if (!strcmp(a, "--timeout-s") && parse_number(v, 0.001, 86400, &num)) {
			o->timeout_s = num;
		} else {
			goto bad;
		}
		i++;
	}
	if (o->n_suites)
		return;
bad:
	usage(stderr);
	exit(2);
}

/* ---- finding the cases --------------------------------------------------- */

typedef struct case_list {
	conf_case *v;
	size_t n, cap;
} case_list;

static void case_add(case_list *l, const char *suite, const char *dir, const char *name)
{
	conf_case *c;
	size_t len = strlen(dir) + strlen(name) + 2;

	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->v = realloc(l->v, l->cap * sizeof *l->v);
		if (!l->v) {
			fputs("ort-conformance: out of memory\n", stderr);
			exit(1);
		}
	}
	c = &l->v[l->n++];
	*c = (conf_case){.suite = suite, .name = xstrdup(name), .dir = xmalloc(len),
			 .result = CONF_ERROR};
	snprintf(c->dir, len, "%s/%s", dir, name);
}

static bool has_model(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;

	if (snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name) >= (int)sizeof path)
		return false;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool selected(const options *o, const char *suite, const char *name)
{
	char full[1024];

	snprintf(full, sizeof full, "%s/%s", suite, name);
	return !o->filter || strstr(full, o->filter);
}

/* Every case directory of the chosen suites, sorted by name per suite. */
static void find_cases(const options *o, case_list *l)
{
	char dir[4096];

	for (size_t s = 0; s < o->n_suites; s++) {
		struct dirent **ents;
		int n;

		snprintf(dir, sizeof dir, "%s/%s", o->data, o->suites[s]);
		n = scandir(dir, &ents, NULL, alphasort);
		if (n < 0) {
			fprintf(stderr, "ort-conformance: cannot read %s: %s\n", dir, strerror(errno));
			exit(1);
		}
		for (int i = 0; i < n; i++) {
			const char *name = ents[i]->d_name;

			if (name[0] != '.' && has_model(dir, name) && selected(o, o->suites[s], name))
				case_add(l, o->suites[s], dir, name);
			free(ents[i]);
		}
		free(ents);
	}
}

/* ---- running: workers ---------------------------------------------------- */

static void set_result(conf_case *c, conf_result r, const char *reason)
{
	c->result = r;
	free(c->reason);
	c->reason = xstrdup(reason);
	/* One TSV field per reason: no tabs, no line breaks. */
	for (char *p = c->reason; *p; p++)
		if (*p == '\t' || *p == '\n' || *p == '\r')
			*p = ' ';
}

/* The worker: one env, one case, one line "<result> <reason>\n" on fd. */
static void worker_main(const options *o, const conf_case *c, int fd)
{
	char reason[REASON_MAX], line[REASON_MAX + 16];
	ortmk_env *env = NULL;
	conf_result r;
	int n;

	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	setpgid(0, 0);
	if (ortmk_env_create(&env)) {
		snprintf(reason, sizeof reason, "env: %s", ortmk_last_error());
		r = CONF_ERROR;
	} else {
		r = conf_run_case(env, c->dir, &o->set, reason, sizeof reason);
	}
	/* One write of less than PIPE_BUF bytes (reason is shorter than
	 * REASON_MAX): the parent reads all of it or none. */
	n = snprintf(line, sizeof line, "%d %s\n", (int)r, reason);
	if (write(fd, line, (size_t)n) != n)
		_exit(3);
	ortmk_env_destroy(env);
	_exit(0);
}

typedef struct slot {
	pid_t pid;           /* 0: free */
	int fd;
	conf_case *c;
	double start;
	char buf[REASON_MAX + 32];
	size_t len;
} slot;

static void slot_start(slot *sl, const options *o, conf_case *c)
{
	int fds[2];

	sl->c = c;
	sl->len = 0;
	sl->start = now_s();
	if (pipe2(fds, O_CLOEXEC)) {
		set_result(c, CONF_ERROR, "pipe failed");
		return;
	}
	fflush(NULL);
	sl->pid = fork();
	if (sl->pid == 0) {
		close(fds[0]);
		worker_main(o, c, fds[1]);
	}
	close(fds[1]);
	if (sl->pid < 0) {
		sl->pid = 0;
		close(fds[0]);
		set_result(c, CONF_ERROR, "fork failed");
		return;
	}
	setpgid(sl->pid, sl->pid);   /* also done by the child: no race on kill */
	sl->fd = fds[0];
}

static void print_case(const conf_case *c)
{
	printf("%-5s %s/%s (%.2fs)%s%s\n", conf_result_name(c->result), c->suite, c->name,
	       c->secs, c->result == CONF_PASS ? "" : ": ", c->result == CONF_PASS ? "" : c->reason);
	fflush(stdout);
}

/* The worker's line "<result> <reason>" (without its newline) into c. */
static bool take_reply(conf_case *c, char *line)
{
	char *sp = strchr(line, ' ');

	if (!sp || sp != line + 1 || line[0] < '0' || line[0] > '2')
		return false;
	set_result(c, (conf_result)(line[0] - '0'), sp + 1);
	return true;
}

/* Reaps the worker and records its case.  `why` (timeout, interrupted)
 * overrides what the worker said, and so does a crash: a worker that dies
 * after reporting (in teardown) is still a bug of the library. */
static void slot_finish(slot *sl, const options *o, const char *why)
{
	char msg[REASON_MAX + 96], crash[64];
	int status = 0;
	bool said = sl->len > 0 && sl->buf[sl->len - 1] == '\n';

	if (why)
		kill(-sl->pid, SIGKILL);   /* the worker and its providers */
	while (waitpid(sl->pid, &status, 0) < 0 && errno == EINTR)
		;
	close(sl->fd);
	sl->pid = 0;
	sl->c->secs = now_s() - sl->start;
	sl->buf[said ? sl->len - 1 : sl->len] = '\0';
	said = said && take_reply(sl->c, sl->buf);
	if (!why && WIFSIGNALED(status))
		snprintf(crash, sizeof crash, "crashed (signal %d)", WTERMSIG(status));
	else if (!why && (!said || WEXITSTATUS(status) != 0))
		snprintf(crash, sizeof crash, "crashed (exit %d)", WEXITSTATUS(status));
	else
		crash[0] = '\0';
	if (!why && crash[0])
		why = crash;
	if (why && said)
		snprintf(msg, sizeof msg, "%s after the case ended (%s: %s)", why,
			 conf_result_name(sl->c->result), sl->c->reason);
	else if (why)
		snprintf(msg, sizeof msg, "%s", why);
	if (why)
		set_result(sl->c, CONF_ERROR, msg);
	if (o->verbose)
		print_case(sl->c);
}

static void slot_read(slot *sl, const options *o)
{
	ssize_t n = read(sl->fd, sl->buf + sl->len, sizeof sl->buf - 1 - sl->len);

	if (n > 0)
		sl->len += (size_t)n;
	else if (n == 0 || errno != EINTR)
		slot_finish(sl, o, NULL);   /* EOF: the worker has exited */
}

/* Waits for output or the nearest deadline, then serves every slot once. */
static void pool_step(slot *slots, size_t jobs, const options *o)
{
	struct pollfd pfd[MAX_JOBS];
	size_t map[MAX_JOBS], n = 0;
	double t = now_s(), wait_s = o->timeout_s;

	for (size_t i = 0; i < jobs; i++) {
		if (!slots[i].pid)
			continue;
		pfd[n] = (struct pollfd){.fd = slots[i].fd, .events = POLLIN};
		map[n++] = i;
		if (slots[i].start + o->timeout_s - t < wait_s)
			wait_s = slots[i].start + o->timeout_s - t;
	}
	if (poll(pfd, n, wait_s > 0 ? (int)(wait_s * 1000) + 1 : 0) < 0 && errno != EINTR) {
		perror("ort-conformance: poll");
		exit(1);
	}
	t = now_s();
	for (size_t k = 0; k < n; k++) {
		slot *sl = &slots[map[k]];

		if (pfd[k].revents)
			slot_read(sl, o);
		else if (stop_requested)
			slot_finish(sl, o, "interrupted");
		else if (t >= sl->start + o->timeout_s)
			slot_finish(sl, o, "timeout");
	}
}

static void run_pool(const options *o, case_list *l)
{
	size_t jobs = (size_t)o->jobs, next = 0, running;
	slot *slots = calloc(jobs, sizeof *slots);

	if (!slots) {
		fputs("ort-conformance: out of memory\n", stderr);
		exit(1);
	}
	for (;;) {
		running = 0;
		for (size_t i = 0; i < jobs; i++) {
			/* A case whose worker cannot start is recorded as an error. */
			while (!slots[i].pid && next < l->n && !stop_requested)
				slot_start(&slots[i], o, &l->v[next++]);
			running += slots[i].pid != 0;
		}
		if (!running)
			break;
		pool_step(slots, jobs, o);
	}
	free(slots);
}

/* --jobs 0: in this process, one env for every case, no timeout. */
static void run_inline(const options *o, case_list *l)
{
	char reason[REASON_MAX];
	ortmk_env *env;

	if (ortmk_env_create(&env)) {
		fprintf(stderr, "ort-conformance: env: %s\n", ortmk_last_error());
		exit(1);
	}
	for (size_t i = 0; i < l->n && !stop_requested; i++) {
		conf_case *c = &l->v[i];
		double t0 = now_s();
		conf_result r = conf_run_case(env, c->dir, &o->set, reason, sizeof reason);

		c->secs = now_s() - t0;
		set_result(c, r, reason);
		if (o->verbose)
			print_case(c);
	}
	ortmk_env_destroy(env);
}

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* ---- reporting ----------------------------------------------------------- */

static void print_counts(const char *label, const size_t cnt[3])
{
	printf("%-20s %6zu %6zu %6zu %6zu\n", label, cnt[CONF_PASS], cnt[CONF_FAIL],
	       cnt[CONF_ERROR], cnt[0] + cnt[1] + cnt[2]);
}

static void print_summary(const options *o, const case_list *l)
{
	size_t total[3] = {0};

	printf("%-20s %6s %6s %6s %6s\n", "suite", "pass", "fail", "error", "total");
	for (size_t s = 0; s < o->n_suites; s++) {
		size_t cnt[3] = {0};

		for (size_t i = 0; i < l->n; i++)
			if (l->v[i].suite == o->suites[s])
				cnt[l->v[i].result]++;
		for (int k = 0; k < 3; k++)
			total[k] += cnt[k];
		print_counts(o->suites[s], cnt);
	}
	print_counts("total", total);
}

static void write_tsv(const char *path, const case_list *l)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		fprintf(stderr, "ort-conformance: cannot write %s: %s\n", path, strerror(errno));
		exit(1);
	}
	fputs("suite\tcase\tresult\treason\n", f);
	for (size_t i = 0; i < l->n; i++)
		fprintf(f, "%s\t%s\t%s\t%s\n", l->v[i].suite, l->v[i].name,
			conf_result_name(l->v[i].result), l->v[i].reason ? l->v[i].reason : "not run");
	if (fclose(f)) {
		fprintf(stderr, "ort-conformance: cannot write %s\n", path);
		exit(1);
	}
}

/* ---- --expect ------------------------------------------------------------ */

/* The entry of one PASSLIST line ("suite/case"), or NULL for none. */
static char *list_entry(char *line)
{
	char *e, *hash = strchr(line, '#');

	if (hash)
		*hash = '\0';
	while (*line == ' ' || *line == '\t')
		line++;
	e = line + strlen(line);
	while (e > line && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = '\0';
	return *line ? line : NULL;
}

static conf_case *find_case(const case_list *l, const char *entry)
{
	const char *slash = strchr(entry, '/');

	for (size_t i = 0; slash && i < l->n; i++) {
		conf_case *c = &l->v[i];

		if (strlen(c->suite) == (size_t)(slash - entry) &&
		    !strncmp(c->suite, entry, (size_t)(slash - entry)) && !strcmp(c->name, slash + 1))
			return c;
	}
	return NULL;
}

static void not_passing(size_t *failed, const char *entry, const char *result, const char *why)
{
	if ((*failed)++ == 0)
		printf("listed cases not passing:\n");
	printf("  %s: %s: %s\n", entry, result, why);
}

/* Checks the listed cases; the last line printed is "N passed, M failed".
 * Listed cases that exist but --suite/--filter left out are not counted. */
static int check_expected(const options *o, const case_list *l)
{
	FILE *f = fopen(o->expect, "r");
	char line[1024];
	size_t passed = 0, failed = 0, skipped = 0, unlisted = 0;
	bool *listed = calloc(l->n ? l->n : 1, sizeof *listed);

	if (!f || !listed) {
		fprintf(stderr, "ort-conformance: cannot read %s\n", o->expect);
		exit(1);
	}
	while (fgets(line, sizeof line, f)) {
		char *e = list_entry(line);
		conf_case *c = e ? find_case(l, e) : NULL;

		if (!e || (c && listed[c - l->v]))
			continue;
		if (c) {
			listed[c - l->v] = true;
			if (c->result == CONF_PASS)
				passed++;
			else
				not_passing(&failed, e, conf_result_name(c->result), c->reason ? c->reason : "not run");
		} else if (strchr(e, '/') && has_model(o->data, e)) {
			skipped++;
		} else {
			not_passing(&failed, e, "error", "no such case in the test data");
		}
	}
	fclose(f);
	for (size_t i = 0; i < l->n; i++)
		unlisted += l->v[i].result == CONF_PASS && !listed[i];
	free(listed);
	if (skipped)
		printf("%zu listed cases not selected by --suite/--filter\n", skipped);
	if (unlisted)
		printf("%zu cases pass that %s does not list (update it with tests/conformance/update_passing.sh)\n",
		       unlisted, o->expect);
	printf("%zu passed, %zu failed\n", passed, failed);
	return failed ? 1 : 0;
}

static void free_cases(case_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].dir);
		free(l->v[i].reason);
	}
	free(l->v);
}

int main(int argc, char **argv)
{
	options o;
	case_list l = {0};
	struct sigaction sa = {.sa_handler = on_signal};
	double t0 = now_s();
	int rc = 0;

	parse_args(argc, argv, &o);
	find_cases(&o, &l);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (o.jobs == 0)
		run_inline(&o, &l);
	else
		run_pool(&o, &l);
	if (o.tsv)
		write_tsv(o.tsv, &l);
	print_summary(&o, &l);
	printf("%zu cases in %.1f s, %ld jobs%s\n", l.n, now_s() - t0, o.jobs,
	       stop_requested ? " (interrupted)" : "");
	if (o.expect)
		rc = check_expected(&o, &l);
	free_cases(&l);
	free(o.suite_list);
	return stop_requested ? 130 : rc;
}
