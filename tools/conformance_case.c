/*
 * conformance_case: one ONNX backend test case through the public API.
 *
 * A case is model.onnx plus data sets test_data_set_N/ holding input_K.pb
 * and output_K.pb, each a serialized onnx.TensorProto (or, for sequence and
 * optional values, a SequenceProto/OptionalProto that the API cannot feed
 * yet).  Inputs map to the session's inputs by position: the test data
 * follows the graph input order, less the initializers, which is what
 * ortmk_session_input_info reports.
 *
 * Outputs must match the expected ones in dtype and shape; floating values
 * within |got - exp| <= 1e-7 + 1e-3 * |exp| (NaN equals NaN, an infinity
 * only itself), integers and bools exactly: the default tolerances of the
 * ONNX backend test runner (rtol 1e-3, atol 1e-7).  float16 and bfloat16
 * values are converted to float first.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "conformance_case.h"
#include "onnx.pb-c.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "raw_data is little-endian; this reader copies it as is"
#endif

#define MAX_RANK 16
#define MAX_IO 64       /* inputs or outputs of one model */
#define ABS_TOL 1e-7
#define REL_TOL 1e-3

/* ---- dtypes (ONNX numbering, including the ones ortmk cannot hold) ----- */

enum { K_NONE, K_FLOAT, K_SIGNED, K_UNSIGNED, K_BOOL };

typedef struct dtype_info {
	const char *name;
	int kind;   /* K_NONE: the API has no such dtype */
	int size;
} dtype_info;

static const dtype_info dtypes[] = {
	[0] = {"undefined", K_NONE, 0},     [1] = {"float", K_FLOAT, 4},
	[2] = {"uint8", K_UNSIGNED, 1},     [3] = {"int8", K_SIGNED, 1},
	[4] = {"uint16", K_UNSIGNED, 2},    [5] = {"int16", K_SIGNED, 2},
	[6] = {"int32", K_SIGNED, 4},       [7] = {"int64", K_SIGNED, 8},
	[8] = {"string", K_NONE, 0},        [9] = {"bool", K_BOOL, 1},
	[10] = {"float16", K_FLOAT, 2},     [11] = {"double", K_FLOAT, 8},
	[12] = {"uint32", K_UNSIGNED, 4},   [13] = {"uint64", K_UNSIGNED, 8},
	[14] = {"complex64", K_NONE, 0},    [15] = {"complex128", K_NONE, 0},
	[16] = {"bfloat16", K_FLOAT, 2},    [17] = {"float8e4m3fn", K_NONE, 0},
	[18] = {"float8e4m3fnuz", K_NONE, 0}, [19] = {"float8e5m2", K_NONE, 0},
	[20] = {"float8e5m2fnuz", K_NONE, 0}, [21] = {"uint4", K_NONE, 0},
	[22] = {"int4", K_NONE, 0},         [23] = {"float4e2m1", K_NONE, 0},
};
#define N_DTYPES (int)(sizeof dtypes / sizeof dtypes[0])

static const dtype_info *dtype_get(int t)
{
	static const dtype_info unknown = {"unknown", K_NONE, 0};

	return t >= 0 && t < N_DTYPES && dtypes[t].name ? &dtypes[t] : &unknown;
}

static float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff, bits;
	float f;

	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13);
	} else if (exp != 0) {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	} else {
		/* Zero or subnormal: man * 2^-24, exact in float. */
		f = ldexpf((float)man, -24);
		return sign ? -f : f;
	}
	memcpy(&f, &bits, sizeof f);
	return f;
}

static float bf16_to_float(uint16_t b)
{
	uint32_t bits = (uint32_t)b << 16;
	float f;

	memcpy(&f, &bits, sizeof f);
	return f;
}

static double elem_float(const void *data, int t, size_t i)
{
	uint16_t h;

	switch (t) {
	case ORTMK_FLOAT: return ((const float *)data)[i];
	case ORTMK_DOUBLE: return ((const double *)data)[i];
	case ORTMK_FLOAT16:
		memcpy(&h, (const char *)data + 2 * i, 2);
		return half_to_float(h);
	default:
		memcpy(&h, (const char *)data + 2 * i, 2);
		return bf16_to_float(h);
	}
}

/* An integer or bool element, sign- or zero-extended to 64 bits. */
static uint64_t elem_bits(const void *data, int t, size_t i)
{
	const dtype_info *d = dtype_get(t);
	const char *p = (const char *)data + (size_t)d->size * i;
	int8_t s8; int16_t s16; int32_t s32; uint64_t u = 0;

	if (d->kind == K_SIGNED && d->size < 8) {
		if (d->size == 1) { memcpy(&s8, p, 1); return (uint64_t)(int64_t)s8; }
		if (d->size == 2) { memcpy(&s16, p, 2); return (uint64_t)(int64_t)s16; }
		memcpy(&s32, p, 4);
		return (uint64_t)(int64_t)s32;
	}
	memcpy(&u, p, (size_t)d->size);   /* little-endian host */
	if (d->kind == K_BOOL)
		return u != 0;
	return u;
}

static void format_elem(char *buf, size_t cap, const void *data, int t, size_t i)
{
	int kind = dtype_get(t)->kind;

	if (kind == K_FLOAT)
		snprintf(buf, cap, "%.9g", elem_float(data, t, i));
	else if (kind == K_SIGNED)
		snprintf(buf, cap, "%lld", (long long)elem_bits(data, t, i));
	else
		snprintf(buf, cap, "%llu", (unsigned long long)elem_bits(data, t, i));
}

static void format_shape(char *buf, size_t cap, const int64_t *dims, size_t rank)
{
	size_t len = 0;

	buf[len++] = '[';
	for (size_t i = 0; i < rank && len + 24 < cap; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "," : "",
					(long long)dims[i]);
	snprintf(buf + len, cap - len, "]");
}

/* ---- TensorProto files -------------------------------------------------- */

typedef struct tensor {
	int dtype;
	int64_t dims[MAX_RANK];
	size_t rank, count, nbytes;
	void *data;
} tensor;

static bool read_file(const char *path, uint8_t **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	bool ok = false;

	*buf = NULL;
	if (!f)
		return false;
	if (fstat(fileno(f), &st) == 0 && st.st_size >= 0) {
		*len = (size_t)st.st_size;
		*buf = malloc(*len ? *len : 1);
		ok = *buf && fread(*buf, 1, *len, f) == *len;
	}
	fclose(f);
	if (!ok) {
		free(*buf);
		*buf = NULL;
	}
	return ok;
}

/* The typed repeated field that holds dtype t's values, as (count, element
 * size, pointer); int32_data carries every type of 16 bits or less. */
static const void *typed_field(const Onnx__TensorProto *p, int t, size_t *n, int *esize)
{
	switch (t) {
	case ORTMK_FLOAT: *n = p->n_float_data; *esize = 4; return p->float_data;
	case ORTMK_DOUBLE: *n = p->n_double_data; *esize = 8; return p->double_data;
	case ORTMK_INT64: *n = p->n_int64_data; *esize = 8; return p->int64_data;
	case ORTMK_UINT32:
	case ORTMK_UINT64: *n = p->n_uint64_data; *esize = 8; return p->uint64_data;
	default: *n = p->n_int32_data; *esize = 4; return p->int32_data;
	}
}

static bool tensor_fill(tensor *t, const Onnx__TensorProto *p, char *err, size_t cap)
{
	size_t n, size = (size_t)dtype_get(t->dtype)->size;
	int esize;
	const char *src;

	t->data = malloc(t->nbytes ? t->nbytes : 1);
	if (!t->data) {
		snprintf(err, cap, "out of memory");
		return false;
	}
	if (p->has_raw_data || t->count == 0) {
		if (p->raw_data.len != t->nbytes) {
			snprintf(err, cap, "raw_data holds %zu bytes, the shape needs %zu",
				 p->raw_data.len, t->nbytes);
			return false;
		}
		if (t->nbytes)
			memcpy(t->data, p->raw_data.data, t->nbytes);
		return true;
	}
	src = typed_field(p, t->dtype, &n, &esize);
	if (n != t->count) {
		snprintf(err, cap, "%zu values for %zu elements", n, t->count);
		return false;
	}
	/* Narrowing keeps the low bytes: the value for integers, the bit
	 * pattern for float16/bfloat16 (little-endian host). */
	for (size_t i = 0; i < n; i++)
		memcpy((char *)t->data + i * size, src + i * (size_t)esize, size);
	return true;
}

static bool tensor_parse(tensor *t, const Onnx__TensorProto *p, char *err, size_t cap)
{
	const dtype_info *d;

	t->dtype = p->has_data_type ? p->data_type : 0;
	d = dtype_get(t->dtype);
	if (d->kind == K_NONE) {
		snprintf(err, cap, "unsupported dtype %s", d->name);
		return false;
	}
	if (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
		snprintf(err, cap, "external data is not supported");
		return false;
	}
	if (p->n_dims > MAX_RANK) {
		snprintf(err, cap, "rank %zu is above %d", p->n_dims, MAX_RANK);
		return false;
	}
	t->rank = p->n_dims;
	t->count = 1;
	for (size_t i = 0; i < t->rank; i++) {
		t->dims[i] = p->dims[i];
		if (p->dims[i] < 0 || (p->dims[i] && t->count > SIZE_MAX / 16 / (size_t)p->dims[i])) {
			snprintf(err, cap, "bad dim %lld", (long long)p->dims[i]);
			return false;
		}
		t->count *= (size_t)p->dims[i];
	}
	t->nbytes = t->count * (size_t)d->size;
	return tensor_fill(t, p, err, cap);
}

/* Loads one .pb file; on failure `err` says why (prefixed by the caller). */
static bool tensor_load(const char *path, tensor *t, char *err, size_t cap)
{
	uint8_t *buf;
	size_t len;
	Onnx__TensorProto *p;
	bool ok;

	memset(t, 0, sizeof *t);
	if (!read_file(path, &buf, &len)) {
		snprintf(err, cap, "cannot read the file");
		return false;
	}
	p = onnx__tensor_proto__unpack(NULL, len, buf);
	free(buf);
	if (!p) {
		snprintf(err, cap, "not a TensorProto");
		return false;
	}
	ok = tensor_parse(t, p, err, cap);
	onnx__tensor_proto__free_unpacked(p, NULL);
	return ok;
}

static void tensor_free(tensor *t)
{
	free(t->data);
	t->data = NULL;
}

/* numpy has no bfloat16, so the ONNX test data stores bfloat16 tensors as
 * uint16 holding the same bits; `model_t` is the dtype the model declares. */
static void retag_bfloat16(tensor *t, int model_t)
{
	if (model_t == ORTMK_BFLOAT16 && t->dtype == ORTMK_UINT16)
		t->dtype = ORTMK_BFLOAT16;
}

/* ---- the model's signature ---------------------------------------------- */

/* NULL when the API can feed or return a value of this type, else its name. */
static const char *unsupported_type(const Onnx__TypeProto *ty, char *buf, size_t cap)
{
	if (!ty)
		return NULL;   /* untyped: let the library judge */
	switch (ty->value_case) {
	case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
		if (!ty->tensor_type || !ty->tensor_type->has_elem_type)
			return NULL;
		if (dtype_get(ty->tensor_type->elem_type)->kind != K_NONE)
			return NULL;
		snprintf(buf, cap, "tensor(%s)", dtype_get(ty->tensor_type->elem_type)->name);
		return buf;
	case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE: return "sequence";
	case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: return "optional";
	case ONNX__TYPE_PROTO__VALUE_MAP_TYPE: return "map";
	case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE: return "sparse tensor";
	default: return NULL;
	}
}

static bool is_initializer(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_initializer; i++)
		if (g->initializer[i]->name && strcmp(g->initializer[i]->name, name) == 0)
			return true;
	return false;
}

/* Finds inputs and outputs whose type the API cannot carry (sequences,
 * optionals, strings...): those cases are errors before any session. */
static bool model_check(const Onnx__GraphProto *g, char *reason, size_t cap)
{
	char buf[64];
	const char *bad;

	for (size_t i = 0; i < g->n_input; i++) {
		const Onnx__ValueInfoProto *v = g->input[i];

		if (is_initializer(g, v->name))
			continue;
		if ((bad = unsupported_type(v->type, buf, sizeof buf))) {
			snprintf(reason, cap, "unsupported input type %s (input '%s')", bad, v->name);
			return false;
		}
	}
	for (size_t i = 0; i < g->n_output; i++) {
		if ((bad = unsupported_type(g->output[i]->type, buf, sizeof buf))) {
			snprintf(reason, cap, "unsupported output type %s (output '%s')", bad,
				 g->output[i]->name);
			return false;
		}
	}
	return true;
}

static conf_result check_signature(const char *model_path, char *reason, size_t cap)
{
	uint8_t *buf;
	size_t len;
	Onnx__ModelProto *m;
	conf_result r = CONF_PASS;

	if (!read_file(model_path, &buf, &len)) {
		snprintf(reason, cap, "cannot read %s", model_path);
		return CONF_ERROR;
	}
	m = onnx__model_proto__unpack(NULL, len, buf);
	free(buf);
	/* A model protobuf-c cannot parse goes on to the library, whose own
	 * message is the more useful one. */
	if (m && m->graph && !model_check(m->graph, reason, cap))
		r = CONF_ERROR;
	if (m)
		onnx__model_proto__free_unpacked(m, NULL);
	return r;
}

/* ---- comparing ---------------------------------------------------------- */

static bool float_close(double got, double exp)
{
	if (isnan(exp))
		return isnan(got);
	if (isinf(exp))
		return got == exp;
	return fabs(got - exp) <= ABS_TOL + REL_TOL * fabs(exp);   /* false for NaN */
}

static bool elem_equal(const void *got, const void *exp, int t, size_t i)
{
	if (dtype_get(t)->kind == K_FLOAT)
		return float_close(elem_float(got, t, i), elem_float(exp, t, i));
	return elem_bits(got, t, i) == elem_bits(exp, t, i);
}

/* False with a reason when output k (`got`) differs from `exp`. */
static bool compare_output(size_t k, const char *name, const ortmk_value *got,
			   tensor *exp, char *reason, size_t cap)
{
	int t = (int)ortmk_value_dtype(got);
	size_t rank = ortmk_value_rank(got), bad = 0, first = 0;
	const int64_t *dims = ortmk_value_dims(got);
	const void *data = ortmk_value_data_const(got);
	char a[128], b[128];

	retag_bfloat16(exp, t);
	if (t != exp->dtype) {
		snprintf(reason, cap, "output %zu '%s': dtype %s, expected %s", k, name,
			 dtype_get(t)->name, dtype_get(exp->dtype)->name);
		return false;
	}
	if (rank != exp->rank || (rank && memcmp(dims, exp->dims, rank * sizeof *dims))) {
		format_shape(a, sizeof a, dims, rank);
		format_shape(b, sizeof b, exp->dims, exp->rank);
		snprintf(reason, cap, "output %zu '%s': shape %s, expected %s", k, name, a, b);
		return false;
	}
	for (size_t i = exp->count; i-- > 0;) {
		if (!elem_equal(data, exp->data, t, i)) {
			bad++;
			first = i;
		}
	}
	if (bad == 0)
		return true;
	format_elem(a, sizeof a, data, t, first);
	format_elem(b, sizeof b, exp->data, t, first);
	snprintf(reason, cap, "output %zu '%s': %zu of %zu elements differ, first at %zu: got %s, expected %s",
		 k, name, bad, exp->count, first, a, b);
	return false;
}

/* ---- running ------------------------------------------------------------ */

typedef struct data_set {
	tensor in[MAX_IO], out[MAX_IO];
	size_t n_in, n_out;
	ortmk_value *vin[MAX_IO], *vout[MAX_IO];
} data_set;

static void data_set_free(data_set *d)
{
	for (size_t i = 0; i < d->n_in; i++) {
		tensor_free(&d->in[i]);
		ortmk_value_destroy(d->vin[i]);
	}
	for (size_t i = 0; i < d->n_out; i++) {
		tensor_free(&d->out[i]);
		ortmk_value_destroy(d->vout[i]);
	}
}

static bool file_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* Loads <dir>/<prefix>_K.pb for K = 0, 1, ... into v. */
static bool load_tensors(const char *dir, const char *prefix, tensor *v, size_t *n,
			 char *reason, size_t cap)
{
	char path[4096], err[512];

	for (*n = 0; *n < MAX_IO; (*n)++) {
		snprintf(path, sizeof path, "%s/%s_%zu.pb", dir, prefix, *n);
		if (!file_exists(path))
			return true;
		if (!tensor_load(path, &v[*n], err, sizeof err)) {
			tensor_free(&v[*n]);
			snprintf(reason, cap, "%s %zu: %s", prefix, *n, err);
			return false;
		}
	}
	snprintf(reason, cap, "more than %d %ss", MAX_IO, prefix);
	return false;
}

/* Feeds the inputs of one data set, runs, compares. */
static conf_result run_data_set(ortmk_env *env, ortmk_session *s, const char *dir,
				data_set *d, char *reason, size_t cap)
{
	const char *in_names[MAX_IO], *out_names[MAX_IO];
	size_t n_in = ortmk_session_input_count(s), n_out = ortmk_session_output_count(s);

	if (!load_tensors(dir, "input", d->in, &d->n_in, reason, cap) ||
	    !load_tensors(dir, "output", d->out, &d->n_out, reason, cap))
		return CONF_ERROR;
	if (d->n_in != n_in || d->n_out > n_out || n_out > MAX_IO) {
		snprintf(reason, cap, "the data set has %zu inputs and %zu outputs, the session %zu and %zu",
			 d->n_in, d->n_out, n_in, n_out);
		return CONF_ERROR;
	}
	for (size_t i = 0; i < n_in; i++) {
		tensor *t = &d->in[i];
		ortmk_dtype dt = ORTMK_UNDEFINED;

		ortmk_session_input_info(s, i, &in_names[i], &dt, NULL, NULL);
		retag_bfloat16(t, (int)dt);
		if (ortmk_value_create_copy(env, (ortmk_dtype)t->dtype, t->dims, t->rank,
					    t->data, t->nbytes, &d->vin[i])) {
			snprintf(reason, cap, "input %zu: %s", i, ortmk_last_error());
			return CONF_ERROR;
		}
	}
	for (size_t i = 0; i < n_out; i++)
		ortmk_session_output_info(s, i, &out_names[i], NULL, NULL, NULL);
	if (ortmk_session_run(s, in_names, (const ortmk_value *const *)d->vin, n_in,
			      out_names, n_out, d->vout)) {
		memset(d->vout, 0, sizeof d->vout);
		snprintf(reason, cap, "run: %s", ortmk_last_error());
		return CONF_ERROR;
	}
	d->n_out = n_out;   /* every returned value is destroyed, compared or not */
	for (size_t k = 0; k < n_out; k++)
		if (d->out[k].data && !compare_output(k, out_names[k], d->vout[k], &d->out[k], reason, cap))
			return CONF_FAIL;
	return CONF_PASS;
}

static conf_result run_sets(ortmk_env *env, ortmk_session *s, const char *case_dir,
			    char *reason, size_t cap)
{
	char dir[4096], why[1024];
	conf_result r = CONF_PASS;
	size_t n;

	for (n = 0; r == CONF_PASS; n++) {
		data_set *d;

		snprintf(dir, sizeof dir, "%s/test_data_set_%zu", case_dir, n);
		if (!file_exists(dir))
			break;
		d = calloc(1, sizeof *d);
		if (!d) {
			snprintf(reason, cap, "out of memory");
			return CONF_ERROR;
		}
		r = run_data_set(env, s, dir, d, why, sizeof why);
		data_set_free(d);
		free(d);
		if (r != CONF_PASS && n == 0)
			snprintf(reason, cap, "%s", why);
		else if (r != CONF_PASS)
			snprintf(reason, cap, "data set %zu: %s", n, why);
	}
	if (n == 0) {
		snprintf(reason, cap, "no test_data_set_0");
		return CONF_ERROR;
	}
	return r;
}

conf_result conf_run_case(ortmk_env *env, const char *case_dir,
			  const conf_settings *set, char *reason, size_t cap)
{
	char model[4096];
	ortmk_session_options *opts = NULL;
	ortmk_session *s = NULL;
	conf_result r;

	reason[0] = '\0';
	snprintf(model, sizeof model, "%s/model.onnx", case_dir);
	if (check_signature(model, reason, cap) != CONF_PASS)
		return CONF_ERROR;
	if (ortmk_session_options_create(&opts) ||
	    (set->providers && ortmk_session_options_set(opts, "providers", set->providers)) ||
	    (set->threads && ortmk_session_options_set(opts, "threads", set->threads)) ||
	    ortmk_session_create(env, model, opts, &s)) {
		snprintf(reason, cap, "%s", ortmk_last_error());
		r = CONF_ERROR;
		goto out;
	}
	r = run_sets(env, s, case_dir, reason, cap);
out:
	ortmk_session_destroy(s);
	ortmk_session_options_destroy(opts);
	return r;
}

const char *conf_result_name(conf_result r)
{
	switch (r) {
	case CONF_PASS: return "pass";
	case CONF_FAIL: return "fail";
	default: return "error";
	}
}
