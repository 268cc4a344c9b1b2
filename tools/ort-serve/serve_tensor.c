/* ort-serve: tensors on the wire.  Decodes an infer request (JSON tensors,
 * flat or nested `data`, or the binary-data extension: a JSON header of
 * Inference-Header-Content-Length bytes followed by the raw tensors in the
 * order of the inputs that declare `binary_data_size`) and encodes the
 * outputs back the same two ways.  serve_http.c parses, serve_sched.c
 * encodes.  JSON numbers go through cJSON's double: integers past 2^53
 * are exact on the binary path only (docs/SERVING.md). */
#include "serve.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	ortmk_dtype t;
	const char *wire;
} dtypes[] = {
	{ ORTMK_BOOL, "BOOL" },     { ORTMK_UINT8, "UINT8" },   { ORTMK_UINT16, "UINT16" },
	{ ORTMK_UINT32, "UINT32" }, { ORTMK_UINT64, "UINT64" }, { ORTMK_INT8, "INT8" },
	{ ORTMK_INT16, "INT16" },   { ORTMK_INT32, "INT32" },   { ORTMK_INT64, "INT64" },
	{ ORTMK_FLOAT16, "FP16" },  { ORTMK_FLOAT, "FP32" },    { ORTMK_DOUBLE, "FP64" },
	{ ORTMK_BFLOAT16, "BF16" }, { ORTMK_STRING, "BYTES" },
};

const char *srv_dtype_wire(ortmk_dtype t)
{
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (dtypes[i].t == t)
			return dtypes[i].wire;
	return NULL;
}

ortmk_dtype srv_dtype_parse(const char *wire)
{
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (strcmp(dtypes[i].wire, wire) == 0)
			return dtypes[i].t;
	return ORTMK_UNDEFINED;
}

static uint16_t f32_to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xff, m = x & 0x7fffff;
	if (e == 0xff)
		return (uint16_t)(sign | 0x7c00 | (m ? 0x200 : 0));
	int ne = (int)e - 127 + 15;
	if (ne >= 31)
		return (uint16_t)(sign | 0x7c00);
	if (ne <= 0) {
		if (ne < -10)
			return (uint16_t)sign;
		m |= 0x800000;
		uint32_t shift = (uint32_t)(14 - ne), h = m >> shift;
		uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = sign | ((uint32_t)ne << 10) | (m >> 13), rem = m & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++;
	return (uint16_t)h;
}

static float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
	if (e == 0x1f)
		x = sign | 0x7f800000 | (m << 13);
	else if (e)
		x = sign | ((e + 112) << 23) | (m << 13);
	else if (!m)
		x = sign;
	else {
		e = 113;
		while (!(m & 0x400)) {
			m <<= 1;
			e--;
		}
		x = sign | (e << 23) | ((m & 0x3ff) << 13);
	}
	float f;
	memcpy(&f, &x, 4);
	return f;
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

static float bf16_to_f32(uint16_t h)
{
	uint32_t x = (uint32_t)h << 16;
	float f;
	memcpy(&f, &x, 4);
	return f;
}

/* Stores JSON number/bool `j` as element i of a dtype-t buffer. */
static int store_elem(ortmk_dtype t, void *buf, size_t i, const cJSON *j)
{
	double d;
	if (cJSON_IsBool(j))
		d = cJSON_IsTrue(j) ? 1 : 0;
	else if (cJSON_IsNumber(j))
		d = j->valuedouble;
	else
		return -1;
	int integral = d == floor(d);
	switch (t) {
	case ORTMK_FLOAT: ((float *)buf)[i] = (float)d; return 0;
	case ORTMK_DOUBLE: ((double *)buf)[i] = d; return 0;
	case ORTMK_FLOAT16: ((uint16_t *)buf)[i] = f32_to_f16((float)d); return 0;
	case ORTMK_BFLOAT16: ((uint16_t *)buf)[i] = f32_to_bf16((float)d); return 0;
	case ORTMK_BOOL: if (d != 0 && d != 1) return -1; ((uint8_t *)buf)[i] = (uint8_t)d; return 0;
	default: break;
	}
	if (!integral)
		return -1;
	switch (t) {
	case ORTMK_UINT8: if (d < 0 || d > UINT8_MAX) return -1; ((uint8_t *)buf)[i] = (uint8_t)d; return 0;
	case ORTMK_UINT16: if (d < 0 || d > UINT16_MAX) return -1; ((uint16_t *)buf)[i] = (uint16_t)d; return 0;
	case ORTMK_UINT32: if (d < 0 || d > UINT32_MAX) return -1; ((uint32_t *)buf)[i] = (uint32_t)d; return 0;
	case ORTMK_UINT64: if (d < 0 || d >= 18446744073709551616.0) return -1; ((uint64_t *)buf)[i] = (uint64_t)d; return 0;
	case ORTMK_INT8: if (d < INT8_MIN || d > INT8_MAX) return -1; ((int8_t *)buf)[i] = (int8_t)d; return 0;
	case ORTMK_INT16: if (d < INT16_MIN || d > INT16_MAX) return -1; ((int16_t *)buf)[i] = (int16_t)d; return 0;
	case ORTMK_INT32: if (d < INT32_MIN || d > INT32_MAX) return -1; ((int32_t *)buf)[i] = (int32_t)d; return 0;
	case ORTMK_INT64: if (d < -9223372036854775808.0 || d >= 9223372036854775808.0) return -1; ((int64_t *)buf)[i] = (int64_t)d; return 0;
	default: return -1;
	}
}

/* Walks `data` (flat or nested) in row-major order into t's buffer. */
static int fill_data(srv_tensor *t, const cJSON *j, size_t *n)
{
	if (cJSON_IsArray(j)) {
		for (const cJSON *c = j->child; c; c = c->next)
			if (fill_data(t, c, n))
				return -1;
		return 0;
	}
	if (*n >= t->numel)
		return -1;
	if (t->dtype == ORTMK_STRING) {
		if (!cJSON_IsString(j) || !(t->strs[*n] = strdup(j->valuestring)))
			return -1;
	} else if (store_elem(t->dtype, t->owned, *n, j)) {
		return -1;
	}
	(*n)++;
	return 0;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* The binary BYTES layout: each element a 4-byte little-endian length and
 * its bytes. */
static int split_bytes(srv_tensor *t, const uint8_t *p, size_t len)
{
	size_t off = 0;
	for (size_t i = 0; i < t->numel; i++) {
		if (len - off < 4)
			return -1;
		uint32_t n = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 |
			     (uint32_t)p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;
		off += 4;
		if (n > len - off || !(t->strs[i] = strndup((const char *)p + off, n)))
			return -1;
		off += n;
	}
	return off == len ? 0 : -1;
}

static int parse_shape(srv_tensor *t, const cJSON *shape, char *err, size_t errlen)
{
	if (!cJSON_IsArray(shape))
		return fail(err, errlen, "input '%s': 'shape' must be an array", t->name);
	t->numel = 1;
	for (const cJSON *d = shape->child; d; d = d->next) {
		if (t->rank == SRV_MAX_RANK || !cJSON_IsNumber(d) || d->valuedouble < 0 ||
		    d->valuedouble != floor(d->valuedouble) || d->valuedouble > 1e12)
			return fail(err, errlen, "input '%s': bad shape", t->name);
		t->dims[t->rank++] = (int64_t)d->valuedouble;
		if (t->numel && (size_t)d->valuedouble > ((size_t)1 << 40) / t->numel)
			return fail(err, errlen, "input '%s': shape too large", t->name);
		t->numel *= (size_t)d->valuedouble;
	}
	return 0;
}

/* One element of "inputs"; bin and binlen: the binary part not used yet. */
static int parse_input(srv_tensor *t, const cJSON *j, const uint8_t **bin, size_t *binlen,
		       size_t body_len, char *err, size_t errlen)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "datatype");
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
	const cJSON *par = cJSON_GetObjectItemCaseSensitive(j, "parameters");
	const cJSON *bsz = par ? cJSON_GetObjectItemCaseSensitive(par, "binary_data_size") : NULL;

	if (!cJSON_IsString(name) || strlen(name->valuestring) >= SRV_NAME_MAX)
		return fail(err, errlen, "an input has no valid 'name'");
	strcpy(t->name, name->valuestring);
	if (!cJSON_IsString(dt) || (t->dtype = srv_dtype_parse(dt->valuestring)) == ORTMK_UNDEFINED)
		return fail(err, errlen, "input '%s': unknown 'datatype'", t->name);
	if (parse_shape(t, cJSON_GetObjectItemCaseSensitive(j, "shape"), err, errlen))
		return -1;
	/* every element takes at least a byte of the body (JSON or binary):
	 * a larger shape is a lie, refused before allocating for it */
	if (t->numel > body_len)
		return fail(err, errlen, "input '%s': shape of %zu elements in a body of %zu bytes",
			    t->name, t->numel, body_len);
	if (t->dtype == ORTMK_STRING && !(t->strs = calloc(t->numel ? t->numel : 1, sizeof(char *))))
		return fail(err, errlen, "out of memory");
	if (bsz) {
		if (!cJSON_IsNumber(bsz) || bsz->valuedouble < 0 || (size_t)bsz->valuedouble > *binlen)
			return fail(err, errlen, "input '%s': binary_data_size exceeds the body", t->name);
		size_t n = (size_t)bsz->valuedouble;
		const uint8_t *p = *bin;
		*bin += n;
		*binlen -= n;
		if (t->dtype == ORTMK_STRING)
			return split_bytes(t, p, n) ? fail(err, errlen, "input '%s': malformed BYTES data",
							  t->name) : 0;
		if (n != t->numel * ortmk_dtype_size(t->dtype))
			return fail(err, errlen, "input '%s': %zu bytes of data for shape of %zu elements",
				    t->name, n, t->numel);
		t->data = p;
		t->nbytes = n;
		return 0;
	}
	if (!data)
		return fail(err, errlen, "input '%s' has no 'data'", t->name);
	if (t->dtype != ORTMK_STRING) {
		t->nbytes = t->numel * ortmk_dtype_size(t->dtype);
		if (!(t->owned = malloc(t->nbytes ? t->nbytes : 1)))
			return fail(err, errlen, "out of memory");
		t->data = t->owned;
	}
	size_t n = 0;
	if (fill_data(t, data, &n) || n != t->numel)
		return fail(err, errlen, "input '%s': 'data' does not match shape and datatype %s",
			    t->name, srv_dtype_wire(t->dtype));
	return 0;
}

static int parse_outputs(srv_request *r, const cJSON *outs, char *err, size_t errlen)
{
	if (!outs)
		return 0;
	int n = cJSON_GetArraySize(outs);
	if (!cJSON_IsArray(outs) || n == 0)
		return fail(err, errlen, "'outputs' must be a non-empty array");
	if (!(r->out = calloc((size_t)n, sizeof(*r->out))))
		return fail(err, errlen, "out of memory");
	for (const cJSON *o = outs->child; o; o = o->next) {
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
		const cJSON *par = cJSON_GetObjectItemCaseSensitive(o, "parameters");
		const cJSON *b = par ? cJSON_GetObjectItemCaseSensitive(par, "binary_data") : NULL;
		if (!cJSON_IsString(name) || strlen(name->valuestring) >= SRV_NAME_MAX)
			return fail(err, errlen, "a requested output has no valid 'name'");
		strcpy(r->out[r->n_out].name, name->valuestring);
		r->out[r->n_out++].binary = cJSON_IsTrue(b);
	}
	return 0;
}

static int parse_doc(const cJSON *doc, srv_request *r, const uint8_t *bin, size_t binlen,
		     size_t body_len, char *err, size_t errlen)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(doc, "id");
	const cJSON *ins = cJSON_GetObjectItemCaseSensitive(doc, "inputs");
	const cJSON *par = cJSON_GetObjectItemCaseSensitive(doc, "parameters");

	if (!cJSON_IsObject(doc))
		return fail(err, errlen, "the request body is not a JSON object");
	if (cJSON_IsString(id) && strlen(id->valuestring) < SRV_NAME_MAX) {
		strcpy(r->id, id->valuestring);
		r->has_id = 1;
	}
	if (par && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(par, "binary_data_output")))
		r->binary_all = 1;
	int n = cJSON_GetArraySize(ins);
	if (!cJSON_IsArray(ins) || n == 0)
		return fail(err, errlen, "'inputs' must be a non-empty array");
	if (!(r->in = calloc((size_t)n, sizeof(*r->in))))
		return fail(err, errlen, "out of memory");
	for (const cJSON *i = ins->child; i; i = i->next)
		if (parse_input(&r->in[r->n_in++], i, &bin, &binlen, body_len, err, errlen))
			return -1;
	if (binlen)
		return fail(err, errlen, "%zu bytes of binary data follow the inputs unused", binlen);
	return parse_outputs(r, cJSON_GetObjectItemCaseSensitive(doc, "outputs"), err, errlen);
}

int srv_request_parse(const void *body, size_t len, size_t header_len,
		      srv_request *r, char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	if (header_len > len)
		return fail(err, errlen, "Inference-Header-Content-Length %zu exceeds the body (%zu)",
			    header_len, len);
	size_t jlen = header_len ? header_len : len;
	cJSON *doc = cJSON_ParseWithLength(body, jlen);
	if (!doc)
		return fail(err, errlen, "malformed JSON in the request body");
	int rc = parse_doc(doc, r, (const uint8_t *)body + jlen, len - jlen, len, err, errlen);
	cJSON_Delete(doc);
	if (rc)
		srv_request_free(r);
	return rc;
}

void srv_request_free(srv_request *r)
{
	for (size_t i = 0; i < r->n_in; i++) {
		srv_tensor *t = &r->in[i];
		if (t->strs)
			for (size_t k = 0; k < t->numel; k++)
				free(t->strs[k]);
		free(t->strs);
		free(t->owned);
	}
	free(r->in);
	free(r->out);
	memset(r, 0, sizeof(*r));
}

/* ---- output ---- */

static void put_number(srv_buf *b, double d, int digits)
{
	if (isnan(d))
		srv_buf_put(b, "NaN", 3);
	else if (isinf(d))
		srv_buf_printf(b, "%sInfinity", d < 0 ? "-" : "");
	else
		srv_buf_printf(b, "%.*g", digits, d);
}

static void put_elem(srv_buf *b, ortmk_dtype t, const void *p, size_t i)
{
	switch (t) {
	case ORTMK_FLOAT: put_number(b, ((const float *)p)[i], 9); break;
	case ORTMK_DOUBLE: put_number(b, ((const double *)p)[i], 17); break;
	case ORTMK_FLOAT16: put_number(b, f16_to_f32(((const uint16_t *)p)[i]), 9); break;
	case ORTMK_BFLOAT16: put_number(b, bf16_to_f32(((const uint16_t *)p)[i]), 9); break;
	case ORTMK_BOOL: srv_buf_printf(b, ((const uint8_t *)p)[i] ? "true" : "false"); break;
	case ORTMK_UINT8: srv_buf_printf(b, "%u", ((const uint8_t *)p)[i]); break;
	case ORTMK_UINT16: srv_buf_printf(b, "%u", ((const uint16_t *)p)[i]); break;
	case ORTMK_UINT32: srv_buf_printf(b, "%" PRIu32, ((const uint32_t *)p)[i]); break;
	case ORTMK_UINT64: srv_buf_printf(b, "%" PRIu64, ((const uint64_t *)p)[i]); break;
	case ORTMK_INT8: srv_buf_printf(b, "%d", ((const int8_t *)p)[i]); break;
	case ORTMK_INT16: srv_buf_printf(b, "%d", ((const int16_t *)p)[i]); break;
	case ORTMK_INT32: srv_buf_printf(b, "%" PRId32, ((const int32_t *)p)[i]); break;
	case ORTMK_INT64: srv_buf_printf(b, "%" PRId64, ((const int64_t *)p)[i]); break;
	default: srv_buf_put(b, "null", 4); break;
	}
}

/* The output's bytes appended to bin; returns how many. */
static size_t put_binary(srv_buf *bin, const srv_outview *o, ortmk_dtype t)
{
	size_t before = bin->len;
	if (t == ORTMK_STRING) {
		for (size_t i = 0; i < o->numel; i++) {
			const char *s = ortmk_value_string(o->v, o->first + i);
			uint32_t n = (uint32_t)strlen(s ? s : "");
			uint8_t le[4] = { (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16),
					  (uint8_t)(n >> 24) };
			srv_buf_put(bin, le, 4);
			srv_buf_put(bin, s ? s : "", n);
		}
	} else {
		size_t es = ortmk_dtype_size(t);
		srv_buf_put(bin, (const char *)ortmk_value_data_const(o->v) + o->first * es,
			    o->numel * es);
	}
	return bin->len - before;
}

static void put_output(srv_buf *b, srv_buf *bin, const srv_outview *o)
{
	ortmk_dtype t = ortmk_value_dtype(o->v);
	const char *wire = srv_dtype_wire(t);
	srv_buf_put(b, "{\"name\":", 8);
	srv_buf_json_str(b, o->name);
	srv_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":[", wire ? wire : "UNKNOWN");
	for (size_t d = 0; d < o->rank; d++)
		srv_buf_printf(b, "%s%" PRId64, d ? "," : "", o->dims[d]);
	srv_buf_put(b, "]", 1);
	if (o->binary) {
		size_t n = put_binary(bin, o, t);
		srv_buf_printf(b, ",\"parameters\":{\"binary_data_size\":%zu}}", n);
		return;
	}
	srv_buf_put(b, ",\"data\":[", 9);
	const void *p = t == ORTMK_STRING ? NULL : ortmk_value_data_const(o->v);
	for (size_t i = 0; i < o->numel; i++) {
		if (i)
			srv_buf_put(b, ",", 1);
		if (t == ORTMK_STRING) {
			const char *s = ortmk_value_string(o->v, o->first + i);
			srv_buf_json_str(b, s ? s : "");
		} else {
			put_elem(b, t, p, o->first + i);
		}
	}
	srv_buf_put(b, "]}", 2);
}

void srv_response_encode(const char *model, const char *version, const srv_request *r,
			 const srv_outview *outs, size_t n, srv_buf *hdr, srv_buf *bin)
{
	srv_buf_put(hdr, "{\"model_name\":", 14);
	srv_buf_json_str(hdr, model);
	srv_buf_put(hdr, ",\"model_version\":", 17);
	srv_buf_json_str(hdr, version);
	if (r->has_id) {
		srv_buf_put(hdr, ",\"id\":", 6);
		srv_buf_json_str(hdr, r->id);
	}
	srv_buf_put(hdr, ",\"outputs\":[", 12);
	for (size_t i = 0; i < n; i++) {
		if (i)
			srv_buf_put(hdr, ",", 1);
		put_output(hdr, bin, &outs[i]);
	}
	srv_buf_put(hdr, "]}", 2);
}
