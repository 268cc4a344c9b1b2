/*
 * ort_run_report: what ort-run prints and writes after its runs: the JSON
 * object of --json (latencies, session creation, pre-pack cache, peak RSS
 * of the core and of each provider, supervision counters, nodes per
 * provider), the text summary, and --output-dir's .npy files (sequences
 * of maps: ort_run_maps.c).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ort_run.h"
#include "tensor_fill.h"

int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* VmHWM (peak resident set) of a process in MB; -1 if unreadable. */
static double peak_rss_mb(const char *pid)
{
	char path[64], line[256];
	double mb = -1.0;
	snprintf(path, sizeof path, "/proc/%s/status", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1.0;
	while (fgets(line, sizeof line, f)) {
		long kb;
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) {
			mb = (double)kb / 1024.0;
			break;
		}
	}
	fclose(f);
	return mb;
}

static void json_string(const char *s)
{
	putchar('"');
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			printf("\\%c", *c);
		else if (*c == '\n')
			fputs("\\n", stdout);
		else if (*c == '\t')
			fputs("\\t", stdout);
		else if (*c < 0x20)
			printf("\\u%04x", *c);
		else
			putchar(*c);
	}
	putchar('"');
}

static double median(const double *sorted, size_t n)
{
	return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

static void print_supervision(ortmk_env *env, const options *o)
{
	unsigned restarts = 0, swaps = 0;
	ortmk_provider_status ps = {.struct_size = sizeof(ps)};

	for (size_t i = 0; i < ortmk_env_provider_count(env); i++) {
		if (ortmk_env_provider_status(env, i, &ps))
			continue;
		restarts += ps.restarts;
		swaps += ps.swaps;
	}
	printf(", \"runs\": %ld, \"failed_runs\": %ld, \"ep_restarts\": %u, \"swaps\": %u",
	       o->runs, o->failed_runs, restarts, swaps);
}

static void print_prepack(ortmk_session *s)
{
	ortmk_session_stats st = {.struct_size = sizeof(st)};

	if (ortmk_session_get_stats(s, &st))
		return;
	printf(", \"prepack_ms\": %.3f, \"prepack_cache\": {\"hits\": %u, \"misses\": %u}"
	       ", \"arena_bytes\": %llu",
	       st.prepack_ms, st.prepack_hits, st.prepack_misses,
	       (unsigned long long)st.arena_bytes);
}

void print_json(ortmk_env *env, ortmk_session *s, const options *o, double create_ms,
		const double *times)
{
	size_t np = ortmk_session_provider_count(s), n = (size_t)o->timed;
	const char *prov;
	size_t nodes;
	int pid;
	char spid[32];

	printf("{\"model\": ");
	json_string(o->model);
	printf(", \"provider\": ");
	json_string(o->provider);
	if (o->threads)
		printf(", \"threads\": %s", o->threads);
	else
		printf(", \"threads\": %ld", sysconf(_SC_NPROCESSORS_ONLN));
	printf(", \"iters\": %ld, \"session_create_ms\": %.3f", o->iters, create_ms);
	if (n)
		printf(", \"median_ms\": %.3f, \"p90_ms\": %.3f, \"min_ms\": %.3f",
		       median(times, n), times[(size_t)ceil(0.9 * (double)n) - 1], times[0]);
	else
		printf(", \"median_ms\": null, \"p90_ms\": null, \"min_ms\": null");
	print_supervision(env, o);
	print_prepack(s);
	printf(", \"core_peak_rss_mb\": %.1f, \"ep_peak_rss_mb\": {",
	       peak_rss_mb("self"));
	for (size_t i = 0; i < np; i++) {
		double mb = -1.0;
		if (ortmk_session_provider_nodes(s, i, &prov, &nodes))
			continue;
		if (!ortmk_session_provider_pid(s, i, &pid)) {
			snprintf(spid, sizeof spid, "%d", pid);
			mb = peak_rss_mb(spid);
		}
		printf("%s", i ? ", " : "");
		json_string(prov);
		if (mb < 0)
			printf(": null");
		else
			printf(": %.1f", mb);
	}
	printf("}, \"nodes_per_provider\": {");
	for (size_t i = 0; i < np; i++) {
		if (ortmk_session_provider_nodes(s, i, &prov, &nodes))
			continue;
		printf("%s", i ? ", " : "");
		json_string(prov);
		printf(": %zu", nodes);
	}
	printf("}}\n");
}

void print_text(ortmk_session *s, const options *o, const char **onames, ortmk_value **outs,
		size_t nout, const double *times)
{
	size_t n = (size_t)o->timed;
	char shape[256];

	for (size_t i = 0; i < nout; i++) {
		ortmk_dtype t = ortmk_value_dtype(outs[i]);
		size_t size = ortmk_dtype_size(t);
		size_t count = size ? ortmk_value_nbytes(outs[i]) / size : 0;

		if (is_map_sequence(outs[i])) {
			print_map_sequence(onames[i], outs[i]);
			continue;
		}
		format_dims(shape, sizeof shape, ortmk_value_dims(outs[i]),
			    ortmk_value_rank(outs[i]));
		printf("output %s: %s %s =", onames[i], ortmk_dtype_name(t), shape);
		for (size_t k = 0; k < count && k < 8; k++)
			printf(" %.6g", tfill_element(ortmk_value_data_const(outs[i]), t, k));
		printf("%s\n", count > 8 ? " ..." : "");
	}
	if (n)
		printf("latency: median %.3f ms over %zu run%s\n",
		       median(times, n), n, n == 1 ? "" : "s");
	if (o->failed_runs)
		printf("failed runs: %ld of %ld\n", o->failed_runs, o->runs);
	for (size_t i = 0; i < ortmk_session_provider_count(s); i++) {
		const char *prov;
		size_t nodes;
		if (!ortmk_session_provider_nodes(s, i, &prov, &nodes))
			printf("provider %s: %zu node%s\n", prov, nodes, nodes == 1 ? "" : "s");
	}
}

/* mkdir -p */
static bool make_dirs(const char *dir)
{
	char path[4096];
	size_t len = strlen(dir);

	if (len >= sizeof path) {
		errno = ENAMETOOLONG;
		return false;
	}
	memcpy(path, dir, len + 1);
	for (size_t i = 1; i <= len; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0777) && errno != EEXIST)
			return false;
		path[i] = dir[i];
	}
	return true;
}

/* DIR/<name>.npy with every byte outside [A-Za-z0-9._-] replaced by '_'. */
bool write_outputs(const char *dir, const char **onames, ortmk_value **outs, size_t nout)
{
	if (!make_dirs(dir)) {
		fail("cannot create %s: %s", dir, strerror(errno));
		return false;
	}
	for (size_t i = 0; i < nout; i++) {
		char file[256], path[4096], err[256];
		size_t len = strlen(onames[i]);
		if (len >= sizeof file)
			len = sizeof file - 1;
		for (size_t k = 0; k < len; k++) {
			char c = onames[i][k];
			file[k] = (isalnum((unsigned char)c) || c == '.' || c == '-' ||
				   c == '_') ? c : '_';
		}
		file[len] = '\0';
		if (!len || !strcmp(file, ".") || !strcmp(file, ".."))
			snprintf(file, sizeof file, "_");
		if (is_map_sequence(outs[i])) {
			snprintf(path, sizeof path, "%s/%s.json", dir, file);
			if (!write_map_sequence(path, outs[i]))
				return false;
			continue;
		}
		snprintf(path, sizeof path, "%s/%s.npy", dir, file);
		if (ortmk_value_rank(outs[i]) > MAX_RANK ||
		    npy_write(path, (int32_t)ortmk_value_dtype(outs[i]),
			      (int)ortmk_value_rank(outs[i]), ortmk_value_dims(outs[i]),
			      ortmk_value_data_const(outs[i]), ortmk_value_nbytes(outs[i]),
			      err, sizeof err)) {
			fail("output '%s': cannot write %s: %s", onames[i], path,
			     ortmk_value_rank(outs[i]) > MAX_RANK ? "rank too large" :
			     !strncmp(err, path, strlen(path)) ? err + strlen(path) + 2 : err);
			return false;
		}
	}
	return true;
}
