/* ort-serve: the model repository.  DIR/<model>/<version>/model.onnx (plus
 * its external data) and an optional DIR/<model>/config.json; the highest
 * numeric version is the one served (Triton's default version policy).
 * Names are checked before any path is built from them, so no request can
 * reach outside DIR.  A load of a loaded model builds the new version's
 * sessions while the old one serves, swaps, and lets the old one close when
 * its last queued request is answered (reference counts).  Called by
 * serve_http.c (requests) and serve_main.c (start, shutdown). */
#include "serve.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_MODELS 256

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t closed_cv = PTHREAD_COND_INITIALIZER;
static srv_model *loaded[MAX_MODELS];
static int n_alive;       /* models not closed yet, loaded or retiring */
static int n_loading;

int srv_name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n >= SRV_NAME_MAX || name[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return 0;
	}
	return 1;
}

static int version_ok(const char *v)
{
	size_t n = strlen(v);
	if (n == 0 || n > 18 || v[0] == '0')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (v[i] < '0' || v[i] > '9')
			return 0;
	return 1;
}

static int int_key(const cJSON *doc, const char *key, int lo, int hi, int *out,
		   char *err, size_t errlen)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(doc, key);
	if (!j)
		return 0;
	if (!cJSON_IsNumber(j) || j->valuedouble < lo || j->valuedouble > hi) {
		snprintf(err, errlen, "config.json: '%s' must be a number in [%d, %d]", key, lo, hi);
		return -1;
	}
	*out = (int)j->valuedouble;
	return 0;
}

/* The providers key: "cpu,vulkan" or ["vulkan", "cpu"]. */
static int providers_key(const cJSON *doc, srv_config *c, char *err, size_t errlen)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(doc, "providers");
	if (!j)
		return 0;
	if (cJSON_IsString(j) && strlen(j->valuestring) < sizeof(c->providers)) {
		strcpy(c->providers, j->valuestring);
		return 0;
	}
	size_t len = 0;
	c->providers[0] = '\0';
	for (const cJSON *p = cJSON_IsArray(j) ? j->child : NULL; p; p = p->next) {
		if (!cJSON_IsString(p) || len + strlen(p->valuestring) + 2 > sizeof(c->providers))
			goto bad;
		len += (size_t)snprintf(c->providers + len, sizeof(c->providers) - len, "%s%s",
					len ? "," : "", p->valuestring);
	}
	if (len)
		return 0;
bad:
	snprintf(err, errlen, "config.json: 'providers' must be a string or an array of names");
	return -1;
}

int srv_config_read(const char *path, srv_config *c, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char buf[8192];
	if (!f)
		return errno == ENOENT ? 0 : (snprintf(err, errlen, "config.json: %s",
						       strerror(errno)), -1);
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	cJSON *doc = n < sizeof(buf) ? cJSON_ParseWithLength(buf, n) : NULL;
	int rc = -1;
	if (!cJSON_IsObject(doc)) {
		snprintf(err, errlen, "config.json: not a JSON object (or over 8 KiB)");
		goto out;
	}
	if (providers_key(doc, c, err, errlen) ||
	    int_key(doc, "threads", 0, 1024, &c->threads, err, errlen) ||
	    int_key(doc, "instances", 1, 64, &c->instances, err, errlen) ||
	    int_key(doc, "max_batch_size", 0, 1 << 20, &c->max_batch_size, err, errlen) ||
	    int_key(doc, "batch_delay_us", 0, 10000000, &c->batch_delay_us, err, errlen) ||
	    int_key(doc, "timeout_ms", 0, 3600000, &c->timeout_ms, err, errlen) ||
	    int_key(doc, "max_queue", 1, 1 << 20, &c->max_queue, err, errlen))
		goto out;
	rc = 0;
out:
	cJSON_Delete(doc);
	return rc;
}

/* The highest numeric version directory of DIR/name holding model.onnx. */
static int latest_version(const char *name, char *version, size_t cap)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", srv_cfg.repo_dir, name);
	DIR *d = opendir(path);
	long long best = -1;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));) {
		char onnx[PATH_MAX];
		struct stat st;
		if (!version_ok(e->d_name))
			continue;
		if (snprintf(onnx, sizeof(onnx), "%s/%s/model.onnx", path, e->d_name) >=
		    (int)sizeof(onnx))
			continue;
		if (stat(onnx, &st) == 0 && S_ISREG(st.st_mode) && atoll(e->d_name) > best)
			best = atoll(e->d_name);
	}
	closedir(d);
	if (best < 0)
		return -1;
	snprintf(version, cap, "%lld", best);
	return 0;
}

static int find_slot(const char *name)
{
	for (int i = 0; i < MAX_MODELS; i++)
		if (loaded[i] && strcmp(loaded[i]->name, name) == 0)
			return i;
	return -1;
}

srv_model *srv_model_get(const char *name, const char *version)
{
	pthread_mutex_lock(&mu);
	int i = find_slot(name);
	srv_model *m = i >= 0 ? loaded[i] : NULL;
	if (m && version && strcmp(version, m->version) != 0)
		m = NULL;
	if (m)
		m->refs++;
	pthread_mutex_unlock(&mu);
	return m;
}

static void *close_thread(void *arg)
{
	srv_model *m = arg;
	unsigned restarts = 0, failed = 0;
	srv_model_provider_counts(m, &restarts, &failed);
	srv_stats_retired(m->stats, restarts, failed);
	srv_model_stop(m);
	pthread_mutex_lock(&mu);
	n_alive--;
	pthread_cond_broadcast(&closed_cv);
	pthread_mutex_unlock(&mu);
	return NULL;
}

/* The last reference closes the model on a thread of its own: the caller
 * may be one of the model's workers, which the close joins. */
void srv_model_put(srv_model *m)
{
	pthread_mutex_lock(&mu);
	int last = --m->refs == 0;
	pthread_mutex_unlock(&mu);
	pthread_t t;
	if (last && pthread_create(&t, NULL, close_thread, m) == 0)
		pthread_detach(t);
	else if (last)
		close_thread(m);
}

static int load_locked_out(const char *name, char *err, size_t errlen)
{
	char version[32], path[PATH_MAX];
	srv_config c = srv_cfg.defaults;
	if (latest_version(name, version, sizeof(version)))
		return snprintf(err, errlen, "model '%s': no <version>/model.onnx in the repository",
				name), 404;
	snprintf(path, sizeof(path), "%s/%s/config.json", srv_cfg.repo_dir, name);
	if (srv_config_read(path, &c, err, errlen))
		return 400;
	srv_model *m = calloc(1, sizeof(*m));
	if (!m)
		return snprintf(err, errlen, "out of memory"), 500;
	snprintf(m->name, sizeof(m->name), "%s", name);
	snprintf(m->version, sizeof(m->version), "%s", version);
	m->cfg = c;
	m->refs = 1;
	m->stats = srv_stats_get(name);
	snprintf(path, sizeof(path), "%s/%s/%s/model.onnx", srv_cfg.repo_dir, name, version);
	if (srv_model_start(m, path, err, errlen)) {
		srv_model_stop(m);
		return 500;
	}
	pthread_mutex_lock(&mu);
	int i = find_slot(name);
	srv_model *old = i >= 0 ? loaded[i] : NULL;
	for (int k = 0; i < 0 && k < MAX_MODELS; k++)
		if (!loaded[k])
			i = k;
	if (i >= 0) {
		loaded[i] = m;
		n_alive++;
	}
	pthread_mutex_unlock(&mu);
	if (i < 0) {
		srv_model_stop(m);
		return snprintf(err, errlen, "more than %d models", MAX_MODELS), 500;
	}
	if (old)
		srv_model_put(old);
	return 0;
}

int srv_repo_load(const char *name, char *err, size_t errlen)
{
	if (!srv_name_ok(name))
		return snprintf(err, errlen, "invalid model name"), 400;
	/* a reload leaves the old version serving: only a model that serves
	 * nothing yet makes the server not ready while it loads */
	pthread_mutex_lock(&mu);
	int fresh = find_slot(name) < 0;
	n_loading += fresh;
	pthread_mutex_unlock(&mu);
	int rc = load_locked_out(name, err, errlen);
	pthread_mutex_lock(&mu);
	n_loading -= fresh;
	pthread_mutex_unlock(&mu);
	return rc;
}

int srv_repo_unload(const char *name, char *err, size_t errlen)
{
	if (!srv_name_ok(name))
		return snprintf(err, errlen, "invalid model name"), 400;
	pthread_mutex_lock(&mu);
	int i = find_slot(name);
	srv_model *m = i >= 0 ? loaded[i] : NULL;
	if (m)
		loaded[i] = NULL;
	pthread_mutex_unlock(&mu);
	if (!m)
		return snprintf(err, errlen, "model '%s' is not loaded", name), 404;
	srv_model_put(m);
	return 0;
}

int srv_repo_ready(void)
{
	pthread_mutex_lock(&mu);
	int r = n_loading == 0;
	pthread_mutex_unlock(&mu);
	return r;
}

void srv_repo_index(srv_buf *b)
{
	DIR *d = opendir(srv_cfg.repo_dir);
	int first = 1;
	srv_buf_put(b, "[", 1);
	for (struct dirent *e; d && (e = readdir(d));) {
		char version[32];
		if (!srv_name_ok(e->d_name) || latest_version(e->d_name, version, sizeof(version)))
			continue;
		srv_model *m = srv_model_get(e->d_name, NULL);
		srv_buf_printf(b, "%s{\"name\":", first ? "" : ",");
		srv_buf_json_str(b, e->d_name);
		srv_buf_printf(b, ",\"version\":\"%s\",\"state\":\"%s\"", m ? m->version : version,
			       m ? "READY" : "UNAVAILABLE");
		if (!m)
			srv_buf_printf(b, ",\"reason\":\"unloaded\"");
		srv_buf_put(b, "}", 1);
		if (m)
			srv_model_put(m);
		first = 0;
	}
	srv_buf_put(b, "]", 1);
	if (d)
		closedir(d);
}

int srv_repo_init(void)
{
	DIR *d = opendir(srv_cfg.repo_dir);
	int failed = 0;
	if (!d) {
		fprintf(stderr, "ort-serve: model repository %s: %s\n", srv_cfg.repo_dir,
			strerror(errno));
		return -1;
	}
	for (struct dirent *e; (e = readdir(d));) {
		char err[512], version[32];
		if (!srv_name_ok(e->d_name) || latest_version(e->d_name, version, sizeof(version)))
			continue;
		if (srv_repo_load(e->d_name, err, sizeof(err))) {
			fprintf(stderr, "ort-serve: %s\n", err);
			failed++;
		} else {
			fprintf(stderr, "ort-serve: loaded %s version %s\n", e->d_name, version);
		}
	}
	closedir(d);
	return failed ? -1 : 0;
}

void srv_repo_shutdown(void)
{
	for (int i = 0; i < MAX_MODELS; i++) {
		pthread_mutex_lock(&mu);
		srv_model *m = loaded[i];
		loaded[i] = NULL;
		pthread_mutex_unlock(&mu);
		if (m)
			srv_model_put(m);
	}
	pthread_mutex_lock(&mu);
	while (n_alive > 0)
		pthread_cond_wait(&closed_cv, &mu);
	pthread_mutex_unlock(&mu);
}
