/*
 * npy: NumPy .npy reader and writer for ort-run and the tests.
 *
 * The header is a Python dict literal; we parse just the subset np.save
 * writes ('descr' string, 'fortran_order' bool, 'shape' tuple of ints) and
 * treat everything else as a corrupt file.  Files come from users, so every
 * length and product is checked before it is trusted.
 */
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* np.save headers are tens of bytes; anything this big is not one. */
#define NPY_MAX_HEADER (1u << 20)

typedef struct npy_dtype_info {
	int32_t onnx;
	const char *descr;  /* what we write */
	size_t elsize;
} npy_dtype_info;

static const npy_dtype_info dtype_table[] = {
	{ 1, "<f4", 4 },  { 2, "|u1", 1 },  { 3, "|i1", 1 },  { 4, "<u2", 2 },
	{ 5, "<i2", 2 },  { 6, "<i4", 4 },  { 7, "<i8", 8 },  { 9, "|b1", 1 },
	{ 10, "<f2", 2 }, { 11, "<f8", 8 }, { 12, "<u4", 4 }, { 13, "<u8", 8 },
};

#define N_DTYPES (sizeof(dtype_table) / sizeof(dtype_table[0]))

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static const npy_dtype_info *dtype_by_onnx(int32_t onnx)
{
	for (size_t i = 0; i < N_DTYPES; i++)
		if (dtype_table[i].onnx == onnx)
			return &dtype_table[i];
	return NULL;
}

/* Maps a descr to our table.  Single-byte types have no byte order, so
 * '<' and '|' mean the same; '?' is numpy's other name for bool. */
static const npy_dtype_info *dtype_by_descr(const char *d)
{
	const char *kind = d + 1;

	if (d[0] != '<' && d[0] != '|')
		return NULL;
	if (strcmp(kind, "?") == 0)
		kind = "b1";
	for (size_t i = 0; i < N_DTYPES; i++) {
		const npy_dtype_info *t = &dtype_table[i];

		if (strcmp(t->descr + 1, kind) != 0)
			continue;
		/* '|' is only valid for one-byte types. */
		if (d[0] == '|' && t->elsize != 1)
			return NULL;
		return t;
	}
	return NULL;
}

/* ---- header parsing ---------------------------------------------------- */

typedef struct hdr_parser {
	const char *p, *end;
	char descr[16];
	int have_descr, have_order, have_shape;
	int fortran;
	int rank;
	int64_t dims[NPY_MAX_RANK];
	const char *why;    /* first error */
} hdr_parser;

static void skip_ws(hdr_parser *h)
{
	while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n'))
		h->p++;
}

static int expect(hdr_parser *h, char c)
{
	skip_ws(h);
	if (h->p >= h->end || *h->p != c)
		return -1;
	h->p++;
	return 0;
}

/* A quoted string without escapes (none of the keys or descrs need any). */
static int parse_string(hdr_parser *h, char *out, size_t outlen)
{
	char q;
	size_t n = 0;

	skip_ws(h);
	if (h->p >= h->end || (*h->p != '\'' && *h->p != '"'))
		return -1;
	q = *h->p++;
	while (h->p < h->end && *h->p != q) {
		if (*h->p == '\\' || n + 1 >= outlen)
			return -1;
		out[n++] = *h->p++;
	}
	if (h->p >= h->end)
		return -1;
	h->p++;
	out[n] = '\0';
	return 0;
}

static int parse_bool(hdr_parser *h, int *out)
{
	skip_ws(h);
	if ((size_t)(h->end - h->p) >= 4 && memcmp(h->p, "True", 4) == 0) {
		h->p += 4;
		*out = 1;
		return 0;
	}
	if ((size_t)(h->end - h->p) >= 5 && memcmp(h->p, "False", 5) == 0) {
		h->p += 5;
		*out = 0;
		return 0;
	}
	return -1;
}

static int parse_dim(hdr_parser *h, int64_t *out)
{
	int64_t v = 0;
	const char *start;

	skip_ws(h);
	start = h->p;
	while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
		int d = *h->p++ - '0';

		if (v > (INT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	/* Python 2 era files may write 3L. */
	if (h->p < h->end && *h->p == 'L')
		h->p++;
	*out = v;
	return h->p > start ? 0 : -1;
}

/* "(" [dim ("," dim)* [","]] ")" */
static int parse_shape(hdr_parser *h)
{
	if (expect(h, '(') < 0)
		return -1;
	h->rank = 0;
	for (;;) {
		skip_ws(h);
		if (h->p < h->end && *h->p == ')') {
			h->p++;
			return 0;
		}
		if (h->rank == NPY_MAX_RANK) {
			h->why = "rank above 16";
			return -1;
		}
		if (parse_dim(h, &h->dims[h->rank]) < 0)
			return -1;
		h->rank++;
		skip_ws(h);
		if (h->p < h->end && *h->p == ',')
			h->p++;
		else if (h->p >= h->end || *h->p != ')')
			return -1;
	}
}

static int parse_entry(hdr_parser *h)
{
	char key[32];

	if (parse_string(h, key, sizeof(key)) < 0 || expect(h, ':') < 0)
		return -1;
	if (strcmp(key, "descr") == 0 && !h->have_descr) {
		h->have_descr = 1;
		return parse_string(h, h->descr, sizeof(h->descr));
	}
	if (strcmp(key, "fortran_order") == 0 && !h->have_order) {
		h->have_order = 1;
		return parse_bool(h, &h->fortran);
	}
	if (strcmp(key, "shape") == 0 && !h->have_shape) {
		h->have_shape = 1;
		return parse_shape(h);
	}
	return -1;
}

/* "{" entry ("," entry)* [","] "}" followed only by padding. */
static int parse_header(hdr_parser *h)
{
	if (expect(h, '{') < 0)
		return -1;
	for (;;) {
		skip_ws(h);
		if (h->p < h->end && *h->p == '}')
			break;
		if (parse_entry(h) < 0)
			return -1;
		skip_ws(h);
		if (h->p < h->end && *h->p == ',')
			h->p++;
		else if (h->p >= h->end || *h->p != '}')
			return -1;
	}
	h->p++;
	skip_ws(h);
	if (h->p != h->end)
		return -1;
	return h->have_descr && h->have_order && h->have_shape ? 0 : -1;
}

/* ---- reading ----------------------------------------------------------- */

/* Reads magic, version and header length; leaves f at the header. */
static int read_preamble(FILE *f, uint32_t *hlen, char *err, size_t errlen)
{
	unsigned char b[NPY_MAGIC_LEN + 2 + 4];

	if (fread(b, 1, NPY_MAGIC_LEN + 2, f) != NPY_MAGIC_LEN + 2 ||
	    memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
		return fail(err, errlen, "bad magic: not a .npy file");
	if (b[6] == 1 && b[7] == 0) {
		if (fread(b + 8, 1, 2, f) != 2)
			return fail(err, errlen, "truncated header");
		*hlen = (uint32_t)b[8] | (uint32_t)b[9] << 8;
	} else if ((b[6] == 2 || b[6] == 3) && b[7] == 0) {
		if (fread(b + 8, 1, 4, f) != 4)
			return fail(err, errlen, "truncated header");
		*hlen = (uint32_t)b[8] | (uint32_t)b[9] << 8 |
			(uint32_t)b[10] << 16 | (uint32_t)b[11] << 24;
	} else {
		return fail(err, errlen, "unsupported .npy version %u.%u", b[6], b[7]);
	}
	if (*hlen == 0 || *hlen > NPY_MAX_HEADER)
		return fail(err, errlen, "bad header length %u", *hlen);
	return 0;
}

/* Bytes left in f from its position (SIZE_MAX when it is not a regular
 * file): what a header's sizes are checked against before any allocation,
 * so a lying header gets an error, not a huge malloc. */
static size_t bytes_left(FILE *f)
{
	struct stat st;
	long pos = ftell(f);

	if (pos < 0 || fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode))
		return SIZE_MAX;
	return st.st_size > pos ? (size_t)(st.st_size - pos) : 0;
}

/* Checks the parsed header and fills dtype, rank, dims and nbytes. */
static int header_to_array(const hdr_parser *h, npy_array *out,
			   char *err, size_t errlen)
{
	const npy_dtype_info *t;
	size_t n = 1;

	if (h->descr[0] == '>')
		return fail(err, errlen, "big-endian dtype '%s' not supported", h->descr);
	t = dtype_by_descr(h->descr);
	if (!t)
		return fail(err, errlen, "unsupported dtype '%s'", h->descr);
	if (h->fortran)
		return fail(err, errlen, "Fortran-order arrays not supported");
	for (int i = 0; i < h->rank; i++) {
		if ((uint64_t)h->dims[i] > SIZE_MAX ||
		    (h->dims[i] != 0 && n > SIZE_MAX / (size_t)h->dims[i]))
			return fail(err, errlen, "shape too large");
		n *= (size_t)h->dims[i];
		out->dims[i] = h->dims[i];
	}
	if (n > SIZE_MAX / t->elsize)
		return fail(err, errlen, "shape too large");
	out->dtype = t->onnx;
	out->rank = h->rank;
	out->nbytes = n * t->elsize;
	return 0;
}

static int read_header(FILE *f, npy_array *out, char *err, size_t errlen)
{
	hdr_parser h;
	uint32_t hlen = 0;
	char *buf = NULL;
	int ret = -1;

	if (read_preamble(f, &hlen, err, errlen) < 0)
		return -1;
	if ((size_t)hlen > bytes_left(f))
		return fail(err, errlen, "truncated header: %u bytes announced", (unsigned)hlen);
	buf = malloc(hlen);
	if (!buf)
		return fail(err, errlen, "out of memory");
	if (fread(buf, 1, hlen, f) != hlen) {
		fail(err, errlen, "truncated header");
		goto out;
	}
	memset(&h, 0, sizeof(h));
	h.p = buf;
	h.end = buf + hlen;
	if (parse_header(&h) < 0) {
		fail(err, errlen, "malformed header%s%s", h.why ? ": " : "",
		     h.why ? h.why : "");
		goto out;
	}
	ret = header_to_array(&h, out, err, errlen);
out:
	free(buf);
	return ret;
}

static int read_data(FILE *f, npy_array *out, char *err, size_t errlen)
{
	if (out->nbytes > bytes_left(f))
		return fail(err, errlen, "truncated data: expected %zu bytes, the file has %zu", out->nbytes,
			    bytes_left(f));
	/* malloc(0) may return NULL; an empty array still gets a pointer. */
	out->data = malloc(out->nbytes ? out->nbytes : 1);
	if (!out->data)
		return fail(err, errlen, "out of memory (%zu bytes)", out->nbytes);
	if (fread(out->data, 1, out->nbytes, f) != out->nbytes)
		return fail(err, errlen, "truncated data: expected %zu bytes", out->nbytes);
	if (fgetc(f) != EOF)
		return fail(err, errlen, "trailing bytes after the array data");
	return 0;
}

int npy_read(const char *path, npy_array *out, char *err, size_t errlen)
{
	FILE *f;
	int ret;

	if (!path || !out)
		return fail(err, errlen, "invalid argument");
	memset(out, 0, sizeof(*out));
	f = fopen(path, "rb");
	if (!f)
		return fail(err, errlen, "%s: %s", path, strerror(errno));
	ret = read_header(f, out, err, errlen);
	if (ret == 0)
		ret = read_data(f, out, err, errlen);
	fclose(f);
	if (ret < 0)
		npy_free(out);
	return ret;
}

void npy_free(npy_array *a)
{
	if (!a)
		return;
	free(a->data);
	memset(a, 0, sizeof(*a));
}

/* ---- writing ----------------------------------------------------------- */

/* Formats the dict and pads it so magic + length + dict is a multiple of
 * 64 bytes ending in '\n', as np.save does (keeps the data aligned). */
static int format_header(const npy_dtype_info *t, int rank, const int64_t *dims,
			 char *buf, size_t buflen, size_t *len)
{
	size_t n, total;
	int w;

	w = snprintf(buf, buflen, "{'descr': '%s', 'fortran_order': False, 'shape': (",
		     t->descr);
	n = (size_t)w;
	for (int i = 0; i < rank; i++) {
		w = snprintf(buf + n, buflen - n, "%s%lld", i ? ", " : "",
			     (long long)dims[i]);
		n += (size_t)w;
	}
	w = snprintf(buf + n, buflen - n, "%s), }", rank == 1 ? "," : "");
	n += (size_t)w;
	total = (10 + n + 1 + 63) / 64 * 64;
	if (total - 10 > buflen)
		return -1;
	memset(buf + n, ' ', total - 10 - n - 1);
	buf[total - 10 - 1] = '\n';
	*len = total - 10;
	return 0;
}

static int check_write_args(const npy_dtype_info *t, int rank, const int64_t *dims,
			    size_t nbytes, char *err, size_t errlen)
{
	size_t n = 1;

	if (!t)
		return fail(err, errlen, "unsupported dtype for .npy");
	if (rank < 0 || rank > NPY_MAX_RANK || (rank > 0 && !dims))
		return fail(err, errlen, "bad rank %d", rank);
	for (int i = 0; i < rank; i++) {
		if (dims[i] < 0 || (uint64_t)dims[i] > SIZE_MAX)
			return fail(err, errlen, "bad dimension %lld", (long long)dims[i]);
		if (dims[i] != 0 && n > SIZE_MAX / (size_t)dims[i])
			return fail(err, errlen, "shape too large");
		n *= (size_t)dims[i];
	}
	if (n > SIZE_MAX / t->elsize || n * t->elsize != nbytes)
		return fail(err, errlen, "data is %zu bytes, shape needs %zu", nbytes,
			    n <= SIZE_MAX / t->elsize ? n * t->elsize : SIZE_MAX);
	return 0;
}

int npy_write(const char *path, int32_t dtype, int rank, const int64_t *dims,
	      const void *data, size_t nbytes, char *err, size_t errlen)
{
	const npy_dtype_info *t = dtype_by_onnx(dtype);
	unsigned char pre[10] = "\x93NUMPY\x01\x00";
	char hdr[1024];
	size_t hlen;
	FILE *f;

	if (!path || (nbytes > 0 && !data))
		return fail(err, errlen, "invalid argument");
	if (check_write_args(t, rank, dims, nbytes, err, errlen) < 0)
		return -1;
	if (format_header(t, rank, dims, hdr, sizeof(hdr), &hlen) < 0)
		return fail(err, errlen, "header too long");
	pre[8] = (unsigned char)(hlen & 0xff);
	pre[9] = (unsigned char)(hlen >> 8);
	f = fopen(path, "wb");
	if (!f)
		return fail(err, errlen, "%s: %s", path, strerror(errno));
	if (fwrite(pre, 1, sizeof(pre), f) != sizeof(pre) ||
	    fwrite(hdr, 1, hlen, f) != hlen ||
	    (nbytes > 0 && fwrite(data, 1, nbytes, f) != nbytes))
		goto fail_io;
	if (fclose(f) != 0) {
		f = NULL;
		goto fail_io;
	}
	return 0;

fail_io:
	fail(err, errlen, "%s: write failed: %s", path, strerror(errno));
	if (f)
		fclose(f);
	unlink(path);
	return -1;
}
