/*
 * conformance_value: reading the values of an ONNX backend test case
 * (TensorProto, SequenceProto, OptionalProto files; see
 * conformance_value.h) and the ONNX dtype table the runner uses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "conformance_value.h"
#include "tensor_bytes.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "raw_data is little-endian; this reader copies it as is"
#endif

/* ---- dtypes (ONNX numbering, including the ones ortmk cannot hold) ----- */

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
	[8] = {"string", K_STRING, sizeof(char *)}, [9] = {"bool", K_BOOL, 1},
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

int conf_dtype_kind(int t)
{
	return dtype_get(t)->kind;
}

int conf_dtype_size(int t)
{
	return dtype_get(t)->size;
}

const char *conf_dtype_name(int t)
{
	return dtype_get(t)->name;
}

void conf_retag_bfloat16(conf_value *t, int model_t)
{
	if (model_t == ORTMK_BFLOAT16 && t->kind == CONF_TENSOR && t->dtype == ORTMK_UINT16)
		t->dtype = ORTMK_BFLOAT16;
}

/* ---- reading ------------------------------------------------------------ */

bool conf_read_file(const char *path, uint8_t **buf, size_t *len)
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

static bool strings_fill(conf_value *t, const Onnx__TensorProto *p, char *err, size_t cap)
{
	char **s = t->data;

	if (p->n_string_data != t->count) {
		snprintf(err, cap, "%zu strings for %zu elements", p->n_string_data, t->count);
		return false;
	}
	for (size_t i = 0; i < t->count; i++) {
		s[i] = malloc(p->string_data[i].len + 1);
		if (!s[i]) {
			snprintf(err, cap, "out of memory");
			return false;
		}
		if (p->string_data[i].len)
			memcpy(s[i], p->string_data[i].data, p->string_data[i].len);
		s[i][p->string_data[i].len] = 0;
	}
	return true;
}

static bool tensor_fill(conf_value *t, const Onnx__TensorProto *p, char *err, size_t cap)
{
	size_t n, unit;

	t->data = calloc(1, t->nbytes ? t->nbytes : 1);
	if (!t->data) {
		snprintf(err, cap, "out of memory");
		return false;
	}
	if (t->dtype == ORTMK_STRING)
		return strings_fill(t, p, err, cap);
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
	if (proto_typed_field(p, &n, &unit) < 0) {
		snprintf(err, cap, "dtype %s has no typed field", dtype_get(t->dtype)->name);
		return false;
	}
	if (n != t->count) {
		snprintf(err, cap, "%zu values for %zu elements", n, t->count);
		return false;
	}
	proto_typed_copy(p, t->data);
	return true;
}

static bool tensor_parse(conf_value *t, const Onnx__TensorProto *p, char *err, size_t cap)
{
	const dtype_info *d;

	t->kind = CONF_TENSOR;
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
	if (p->n_dims > CONF_MAX_RANK) {
		snprintf(err, cap, "rank %zu is above %d", p->n_dims, CONF_MAX_RANK);
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

static int declared_elem(const Onnx__TypeProto *ty)
{
	while (ty) {
		switch (ty->value_case) {
		case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
			return ty->tensor_type && ty->tensor_type->has_elem_type ?
				ty->tensor_type->elem_type : 0;
		case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
			ty = ty->sequence_type ? ty->sequence_type->elem_type : NULL;
			break;
		case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
			ty = ty->optional_type ? ty->optional_type->elem_type : NULL;
			break;
		default:
			return 0;
		}
	}
	return 0;
}

/*
 * SequenceProto and OptionalProto are in onnx-data.proto, which the ONNX
 * schema ortmk builds from (Debian's onnx.proto) does not hold, so they
 * are read here straight from the protobuf wire format; only the fields
 * the test data uses are understood: SequenceProto.tensor_values (3) and
 * OptionalProto.tensor_value (3) and sequence_value (5).  The other value
 * fields (sparse tensors, maps, nested optionals) are refused.
 */
typedef struct wire {
	const uint8_t *p, *end;
} wire;

static bool wire_varint(wire *w, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64 && w->p < w->end; shift += 7) {
		uint8_t b = *w->p++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/* The next field: its number, and for a length-delimited one its bytes. */
static bool wire_field(wire *w, uint32_t *field, const uint8_t **data, size_t *len)
{
	uint64_t key, v;

	if (!wire_varint(w, &key))
		return false;
	*field = (uint32_t)(key >> 3);
	*data = NULL;
	*len = 0;
	switch (key & 7) {
	case 0:
		return wire_varint(w, &v);
	case 1:
	case 5:
		v = (key & 7) == 1 ? 8 : 4;
		break;
	case 2:
		if (!wire_varint(w, &v))
			return false;
		*data = w->p;
		*len = (size_t)v;
		break;
	default:
		return false;
	}
	if (v > (uint64_t)(w->end - w->p))
		return false;
	w->p += v;
	return true;
}

static bool tensor_bytes(conf_value *v, const uint8_t *data, size_t len, int elem, char *err,
			 size_t cap)
{
	Onnx__TensorProto *p = onnx__tensor_proto__unpack(NULL, len, data);
	bool ok;

	if (!p) {
		snprintf(err, cap, "not a TensorProto");
		return false;
	}
	ok = tensor_parse(v, p, err, cap);
	conf_retag_bfloat16(v, elem);
	onnx__tensor_proto__free_unpacked(p, NULL);
	return ok;
}

static bool sequence_parse(conf_value *v, const uint8_t *buf, size_t len, int elem, char *err,
			   size_t cap)
{
	wire w = {buf, buf + len};
	const uint8_t *data;
	size_t n;
	uint32_t f;

	v->kind = CONF_SEQUENCE;
	v->elem_dtype = elem;
	v->items = calloc(len / 2 + 1, sizeof(*v->items));   /* a field takes 2 bytes or more */
	if (!v->items) {
		snprintf(err, cap, "out of memory");
		return false;
	}
	while (w.p < w.end) {
		if (!wire_field(&w, &f, &data, &n)) {
			snprintf(err, cap, "not a SequenceProto");
			return false;
		}
		if (f >= 4 && f <= 6) {
			snprintf(err, cap, "a sequence of other than tensors");
			return false;
		}
		if (f == 3 && !tensor_bytes(&v->items[v->n++], data, n, elem, err, cap))
			return false;
	}
	if (!v->elem_dtype && v->n)
		v->elem_dtype = v->items[0].dtype;
	return true;
}

static bool optional_parse(conf_value *v, const uint8_t *buf, size_t len, int elem, char *err,
			   size_t cap)
{
	wire w = {buf, buf + len};
	const uint8_t *data;
	size_t n;
	uint32_t f;

	v->kind = CONF_NONE;
	while (w.p < w.end) {
		if (!wire_field(&w, &f, &data, &n)) {
			snprintf(err, cap, "not an OptionalProto");
			return false;
		}
		if (f == 4 || f == 6 || f == 7) {
			snprintf(err, cap, "an optional of other than a tensor or a sequence");
			return false;
		}
		if (f == 3 && (v->kind != CONF_NONE || !tensor_bytes(v, data, n, elem, err, cap)))
			return false;
		if (f == 5 && (v->kind != CONF_NONE || !sequence_parse(v, data, n, elem, err, cap)))
			return false;
	}
	return true;
}

bool conf_value_load(const char *path, const Onnx__TypeProto *declared, conf_value *v,
		     char *err, size_t cap)
{
	int kind = declared ? (int)declared->value_case : ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	int elem = declared_elem(declared);
	uint8_t *buf;
	size_t len;
	bool ok;

	memset(v, 0, sizeof *v);
	if (!conf_read_file(path, &buf, &len)) {
		snprintf(err, cap, "cannot read the file");
		return false;
	}
	if (kind == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE)
		ok = sequence_parse(v, buf, len, elem, err, cap);
	else if (kind == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE)
		ok = optional_parse(v, buf, len, elem, err, cap);
	else
		ok = tensor_bytes(v, buf, len, elem, err, cap);
	free(buf);
	return ok;
}

void conf_value_free(conf_value *v)
{
	if (v->kind == CONF_TENSOR && v->dtype == ORTMK_STRING && v->data)
		for (size_t i = 0; i < v->count; i++)
			free(((char **)v->data)[i]);
	free(v->data);
	for (size_t i = 0; v->items && i < v->n; i++)
		conf_value_free(&v->items[i]);
	free(v->items);
	memset(v, 0, sizeof *v);
}

