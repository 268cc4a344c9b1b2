/*
 * ort_model_ext.c: `ort-model externalize`, rewriting a model so that every
 * external tensor starts on an alignment boundary in one data file.
 *
 * Inline initializers of the main graph of at least the threshold move out
 * (typed fields become raw little-endian bytes); tensors that are already
 * external, wherever they are (subgraphs, Constant attributes), are copied
 * from their files, checked as the core's loader checks them, into the new
 * file.  Aligned offsets let a provider map each weight in place
 * (providers/host/ep_host.c maps around unaligned ones, at a cost).
 *
 * Weights may exceed 2 GiB and memory: external tensors are streamed file to
 * file (copy_file_range, or pread/pwrite through a bounded buffer), never
 * loaded whole.  Only the ModelProto is held in memory, and it is below
 * 2 GiB by protobuf's rules.  Both files are written under temporary names
 * beside OUT, synced, then renamed into place, so OUT is never half
 * written and MODEL may be OUT.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ort_model.h"
#include "sysio.h"

#define COPY_CHUNK (1u << 20)   /* bounded buffer of the pread/pwrite path */

typedef struct ext_ctx {
	om_model m;
	om_files src;
	const om_ext_opts *o;
	om_ext_stats *st;
	int fd;                   /* the new data file (temporary name) */
	uint64_t pos;             /* end of the bytes written so far */
	uint8_t *buf;             /* COPY_CHUNK bytes once copy_file_range fails */
	char *err;
	size_t errlen;
} ext_ctx;

static int write_all(int fd, const uint8_t *p, uint64_t n, uint64_t off, const char *what,
		     char *err, size_t errlen)
{
	int rc = sys_write_all(fd, p, (size_t)n, (int64_t)off);

	return rc ? om_errf(err, errlen, rc, "writing %s: %s", what,
			    rc == -EIO ? "short write" : strerror(-rc)) : 0;
}

/* Copies n bytes at `in` of the source file to `out` of the new file. */
static int copy_range(ext_ctx *c, const om_file *f, uint64_t in, uint64_t out, uint64_t n)
{
	loff_t oin = (loff_t)in, oout = (loff_t)out;
	ssize_t r;
	size_t want;
	int rc;

	/* In-kernel first: no user-space copy, a reflink where supported. */
	while (n > 0 && !c->buf) {
		r = copy_file_range(f->fd, &oin, c->fd, &oout, n > (1u << 30) ? (1u << 30) : (size_t)n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL)) {
			c->buf = malloc(COPY_CHUNK);
			if (!c->buf)
				return om_errf(c->err, c->errlen, -ENOMEM, "out of memory");
			break;
		}
		if (r < 0)
			return om_errf(c->err, c->errlen, -errno, "copying from '%s': %s", f->location, strerror(errno));
		if (r == 0)
			return om_errf(c->err, c->errlen, -EIO, "'%s' ended early (truncated while being copied?)", f->location);
		n -= (uint64_t)r;
	}
	in = (uint64_t)oin, out = (uint64_t)oout;
	while (n > 0) {
		want = n > COPY_CHUNK ? COPY_CHUNK : (size_t)n;
		r = pread(f->fd, c->buf, want, (off_t)in);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return om_errf(c->err, c->errlen, -errno, "reading '%s': %s", f->location, strerror(errno));
		if (r == 0)
			return om_errf(c->err, c->errlen, -EIO, "'%s' ended early (truncated while being copied?)", f->location);
		rc = write_all(c->fd, c->buf, (uint64_t)r, out, c->st->data_name, c->err, c->errlen);
		if (rc < 0)
			return rc;
		in += (uint64_t)r, out += (uint64_t)r, n -= (uint64_t)r;
	}
	return 0;
}

/* Where the next tensor of n bytes goes; -EFBIG past what off_t holds. */
static int place(ext_ctx *c, uint64_t n, uint64_t *at)
{
	uint64_t a = c->o->align;

	if (c->pos > (uint64_t)INT64_MAX - a || ((c->pos + a - 1) & ~(a - 1)) > (uint64_t)INT64_MAX - n)
		return om_errf(c->err, c->errlen, -EFBIG, "the data file would exceed %" PRId64 " bytes", INT64_MAX);
	*at = (c->pos + a - 1) & ~(a - 1);
	c->pos = *at + n;
	return 0;
}

static Onnx__StringStringEntryProto *entry(const char *key, const char *value)
{
	Onnx__StringStringEntryProto *e = malloc(sizeof(*e));

	if (!e)
		return NULL;
	onnx__string_string_entry_proto__init(e);
	e->key = strdup(key);
	e->value = strdup(value);
	if (!e->key || !e->value) {
		onnx__string_string_entry_proto__free_unpacked(e, NULL);
		return NULL;
	}
	return e;
}

/* Points t at (location, offset, length).  Keys other than those three
 * stay, except "checksum": it digests the whole old file.  protobuf-c's
 * free_unpacked releases all of it later with free(), so it is malloc'd. */
static int set_external(ext_ctx *c, Onnx__TensorProto *t, uint64_t off, uint64_t len)
{
	Onnx__StringStringEntryProto **v, *e;
	char num[2][24];
	size_t i, n = 3;

	v = calloc(t->n_external_data + 3, sizeof(*v));
	if (!v)
		return om_errf(c->err, c->errlen, -ENOMEM, "out of memory");
	snprintf(num[0], sizeof(num[0]), "%" PRIu64, off);
	snprintf(num[1], sizeof(num[1]), "%" PRIu64, len);
	v[0] = entry("location", c->st->data_name);
	v[1] = entry("offset", num[0]);
	v[2] = entry("length", num[1]);
	for (i = 0; i < t->n_external_data; i++) {
		e = t->external_data[i];
		if (e->key && strcmp(e->key, "location") && strcmp(e->key, "offset") &&
		    strcmp(e->key, "length") && strcmp(e->key, "checksum"))
			v[n++] = e;
		else
			onnx__string_string_entry_proto__free_unpacked(e, NULL);
	}
	free(t->external_data);
	t->external_data = v;
	t->n_external_data = n;
	t->has_data_location = 1;
	t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	if (!v[0] || !v[1] || !v[2])
		return om_errf(c->err, c->errlen, -ENOMEM, "out of memory");
	return 0;
}

static void clear_inline(Onnx__TensorProto *t)
{
	free(t->raw_data.data);
	t->raw_data.data = NULL;
	t->raw_data.len = 0;
	t->has_raw_data = 0;
	free(t->float_data), t->float_data = NULL, t->n_float_data = 0;
	free(t->int32_data), t->int32_data = NULL, t->n_int32_data = 0;
	free(t->int64_data), t->int64_data = NULL, t->n_int64_data = 0;
	free(t->double_data), t->double_data = NULL, t->n_double_data = 0;
	free(t->uint64_data), t->uint64_data = NULL, t->n_uint64_data = 0;
}

static int copy_external(ext_ctx *c, Onnx__TensorProto *t, const char *kind)
{
	uint64_t at;
	om_ext e;
	int rc;

	rc = om_ext_check(&c->m, &c->src, t, kind, &e, c->err, c->errlen);
	if (rc == 0)
		rc = place(c, e.length, &at);
	if (rc == 0)
		rc = copy_range(c, &c->src.v[e.file], e.offset, at, e.length);
	if (rc == 0)
		rc = set_external(c, t, at, e.length);
	c->st->copied++;
	c->st->copied_bytes += e.length;
	return rc;
}

/* An inline main-graph initializer moves out when it has a fixed-size
 * dtype and at least `threshold` bytes.  Empty tensors stay: there is
 * nothing to map.  String tensors have no raw layout and stay too. */
static int convert_inline(ext_ctx *c, Onnx__TensorProto *t)
{
	const uint8_t *data;
	uint64_t want, at;
	void *owned;
	int rc;

	if (om_tensor_want(t, "initializer", &want, NULL, 0) < 0 || t->segment || want == 0 || want < c->o->threshold)
		return 0;
	rc = om_tensor_bytes(t, "initializer", &data, &owned, &want, c->err, c->errlen);
	if (rc < 0)
		return rc;
	rc = place(c, want, &at);
	if (rc == 0)
		rc = write_all(c->fd, data, want, at, c->st->data_name, c->err, c->errlen);
	free(owned);
	if (rc < 0)
		return rc;
	clear_inline(t);
	c->st->converted++;
	c->st->converted_bytes += want;
	return set_external(c, t, at, want);
}

static int on_tensor(void *ctx, Onnx__TensorProto *t, const char *kind, int main_init)
{
	ext_ctx *c = ctx;

	if (om_is_external(t))
		return copy_external(c, t, kind);
	return main_init ? convert_inline(c, t) : 0;
}

/* ---- files ------------------------------------------------------------- */

static const char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

static int check_names(const char *out, const om_ext_opts *o, om_ext_stats *st,
		       char *err, size_t errlen)
{
	const char *base = base_of(out);
	const char *d = o->data_name;
	struct stat sb;

	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0 ||
	    (stat(out, &sb) == 0 && S_ISDIR(sb.st_mode)))
		return om_errf(err, errlen, -EINVAL, "%s: OUT must name a file, not a directory", out);
	if (d && (!*d || strchr(d, '/') || strcmp(d, ".") == 0 || strcmp(d, "..") == 0))
		return om_errf(err, errlen, -EINVAL, "--data '%s': must be a file name (it is placed beside OUT)", d);
	if ((size_t)snprintf(st->data_name, sizeof(st->data_name), "%s%s", d ? d : base, d ? "" : ".data")
	    >= sizeof(st->data_name) - 8)
		return om_errf(err, errlen, -ENAMETOOLONG, "data file name too long");
	if (strcmp(st->data_name, base) == 0)
		return om_errf(err, errlen, -EINVAL, "--data '%s' is OUT itself", d);
	return 0;
}

/* Creates "DIR/.NAME.XXXXXX" with the mode a new file would get. */
static int make_temp(const char *out, const char *name, char **path, char *err, size_t errlen)
{
	const char *base = base_of(out);
	mode_t mask = umask(0);
	int fd;

	umask(mask);
	if (asprintf(path, "%.*s.%s.XXXXXX", (int)(base - out), out, name) < 0) {
		*path = NULL;
		return om_errf(err, errlen, -ENOMEM, "out of memory");
	}
	fd = mkostemp(*path, O_CLOEXEC);
	if (fd < 0) {
		int rc = om_errf(err, errlen, -errno, "%s: cannot create a file beside it: %s", out, strerror(errno));

		free(*path);
		*path = NULL;
		return rc;
	}
	/* Not fatal when it fails: the file stays 0600. */
	(void)fchmod(fd, 0666 & ~mask);
	return fd;
}

static int write_model(ext_ctx *c, const char *out, int fd)
{
	size_t n = onnx__model_proto__get_packed_size(c->m.proto);
	uint8_t *buf;
	int rc;

	if (n > INT32_MAX)
		return om_errf(c->err, c->errlen, -EFBIG, "%s: the rewritten model is still %zu bytes, over protobuf's 2 GiB (lower --threshold)",
			       out, n);
	buf = malloc(n ? n : 1);
	if (!buf)
		return om_errf(c->err, c->errlen, -ENOMEM, "out of memory");
	onnx__model_proto__pack(c->m.proto, buf);
	rc = write_all(fd, buf, n, 0, out, c->err, c->errlen);
	free(buf);
	if (rc == 0 && fsync(fd) < 0)
		rc = om_errf(c->err, c->errlen, -errno, "%s: %s", out, strerror(errno));
	return rc;
}

static void sync_dir(const char *out)
{
	const char *base = base_of(out);
	char *dir = base == out ? strdup(".") : strndup(out, (size_t)(base - out));
	int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;

	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
	free(dir);
}

/* Renames the data file, then the model: a reader of OUT sees the old pair
 * or the new model whose data is already in place. */
static int commit(ext_ctx *c, const char *out, char **data_tmp, char **model_tmp)
{
	const char *base = base_of(out);
	char *data_path = NULL;
	int rc = 0;

	if (*data_tmp) {
		if (asprintf(&data_path, "%.*s%s", (int)(base - out), out, c->st->data_name) < 0)
			return om_errf(c->err, c->errlen, -ENOMEM, "out of memory");
		if (rename(*data_tmp, data_path) < 0)
			rc = om_errf(c->err, c->errlen, -errno, "%s: %s", data_path, strerror(errno));
		free(data_path);
		if (rc < 0)
			return rc;
		free(*data_tmp);
		*data_tmp = NULL;
	}
	if (rename(*model_tmp, out) < 0)
		return om_errf(c->err, c->errlen, -errno, "%s: %s", out, strerror(errno));
	free(*model_tmp);
	*model_tmp = NULL;
	sync_dir(out);
	return 0;
}

int om_externalize(const char *model, const char *out, const om_ext_opts *o,
		   om_ext_stats *st, char *err, size_t errlen)
{
	ext_ctx c = {.o = o, .st = st, .fd = -1, .err = err, .errlen = errlen};
	char *data_tmp = NULL, *model_tmp = NULL;
	int mfd = -1, rc;

	memset(st, 0, sizeof(*st));
	rc = check_names(out, o, st, err, errlen);
	if (rc == 0)
		rc = om_model_load(model, &c.m, err, errlen);
	if (rc < 0)
		return rc;
	rc = c.fd = make_temp(out, st->data_name, &data_tmp, err, errlen);
	if (rc >= 0)
		rc = om_walk_tensors(c.m.proto, on_tensor, &c, err, errlen);
	if (rc >= 0 && ftruncate(c.fd, (off_t)c.pos) < 0)
		rc = om_errf(err, errlen, -errno, "%s: %s", st->data_name, strerror(errno));
	if (rc >= 0 && fsync(c.fd) < 0)
		rc = om_errf(err, errlen, -errno, "%s: %s", st->data_name, strerror(errno));
	if (rc >= 0)
		rc = mfd = make_temp(out, base_of(out), &model_tmp, err, errlen);
	if (rc >= 0)
		rc = write_model(&c, out, mfd);
	/* No external tensor at all: no data file either. */
	if (rc >= 0 && st->converted + st->copied == 0) {
		unlink(data_tmp);
		free(data_tmp);
		data_tmp = NULL;
		st->data_name[0] = '\0';
	}
	if (rc >= 0)
		rc = commit(&c, out, &data_tmp, &model_tmp);
	st->data_size = c.pos;
	if (mfd >= 0)
		close(mfd);
	if (c.fd >= 0)
		close(c.fd);
	if (data_tmp)
		unlink(data_tmp);
	if (model_tmp)
		unlink(model_tmp);
	free(data_tmp);
	free(model_tmp);
	free(c.buf);
	om_files_close(&c.src);
	om_model_free(&c.m);
	return rc < 0 ? rc : 0;
}
