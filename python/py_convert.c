/*
 * py_convert.c: ortmk values to Python objects and back.
 *
 * Out: a numeric host tensor becomes an ndarray over the value's shared
 * memory whose base is a Value object owning the ortmk_value (zero copy; the
 * value is destroyed when the array goes); a string tensor an object array
 * of str; a sequence a list; a map (ZipMap's) a dict; an optional holding
 * nothing None.
 *
 * In: an ndarray that is C-contiguous, aligned and in native byte order is
 * copied once, straight into a new shared-memory value (anything else is
 * first made so by numpy); str/bytes/object arrays become string tensors,
 * lists sequences, None an empty optional, a Value is used as it is.
 */
#include "pyortmk.h"

#include <string.h>

/* ---- dtypes ---------------------------------------------------------- */

static const struct {
	ortmk_dtype t;
	int npy;
} dtype_table[] = {
	{ORTMK_FLOAT, NPY_FLOAT32}, {ORTMK_DOUBLE, NPY_FLOAT64}, {ORTMK_FLOAT16, NPY_FLOAT16},
	{ORTMK_INT8, NPY_INT8}, {ORTMK_INT16, NPY_INT16}, {ORTMK_INT32, NPY_INT32},
	{ORTMK_INT64, NPY_INT64}, {ORTMK_UINT8, NPY_UINT8}, {ORTMK_UINT16, NPY_UINT16},
	{ORTMK_UINT32, NPY_UINT32}, {ORTMK_UINT64, NPY_UINT64}, {ORTMK_BOOL, NPY_BOOL},
	/* numpy has no bfloat16: its bits come out as uint16 (docs/PYTHON.md). */
	{ORTMK_BFLOAT16, NPY_UINT16},
};

/* The numpy type number of t; -1 for strings and unknown types. */
int pyo_numpy_type(ortmk_dtype t)
{
	for (size_t i = 0; i < sizeof(dtype_table) / sizeof(dtype_table[0]); i++)
		if (dtype_table[i].t == t)
			return dtype_table[i].npy;
	return -1;
}

/* By kind and item size, not type number: int64 is both NPY_LONG and
 * NPY_LONGLONG on Linux.  (The size is the array's: numpy 2 moved elsize
 * out of PyArray_Descr.)  0 when they make an ortmk dtype. */
int pyo_dtype_from_numpy(char kind, npy_intp elsize, ortmk_dtype *out)
{
	static const ortmk_dtype ints[] = {ORTMK_INT8, ORTMK_INT16, ORTMK_INT32, ORTMK_INT64};
	static const ortmk_dtype uints[] = {ORTMK_UINT8, ORTMK_UINT16, ORTMK_UINT32, ORTMK_UINT64};
	static const ortmk_dtype floats[] = {ORTMK_UNDEFINED, ORTMK_FLOAT16, ORTMK_FLOAT, ORTMK_DOUBLE};
	int log2 = elsize == 1 ? 0 : elsize == 2 ? 1 : elsize == 4 ? 2 : elsize == 8 ? 3 : -1;

	*out = ORTMK_UNDEFINED;
	if (kind == 'U' || kind == 'S' || kind == 'O')
		*out = ORTMK_STRING;
	else if (kind == 'b' && elsize == 1)
		*out = ORTMK_BOOL;
	else if (kind == 'i' && log2 >= 0)
		*out = ints[log2];
	else if (kind == 'u' && log2 >= 0)
		*out = uints[log2];
	else if (kind == 'f' && log2 >= 0)
		*out = floats[log2];
	return *out == ORTMK_UNDEFINED ? -1 : 0;
}

/* ---- out: values to Python -------------------------------------------- */

static int np_dims(const ortmk_value *v, npy_intp *dims)
{
	size_t rank = ortmk_value_rank(v);
	const int64_t *d = ortmk_value_dims(v);

	for (size_t i = 0; i < rank; i++)
		dims[i] = (npy_intp)d[i];
	return (int)rank;
}

/* An object array of str; invalid UTF-8 is kept as surrogate escapes. */
static PyObject *strings_to_array(const ortmk_value *v)
{
	npy_intp dims[PYO_MAX_RANK];
	int rank = np_dims(v, dims);
	PyObject *arr = PyArray_SimpleNew(rank, dims, NPY_OBJECT);
	PyObject **items;
	npy_intp n;

	if (!arr)
		return NULL;
	items = PyArray_DATA((PyArrayObject *)arr);
	n = PyArray_SIZE((PyArrayObject *)arr);
	for (npy_intp i = 0; i < n; i++) {
		const char *s = ortmk_value_string(v, (size_t)i);
		PyObject *o = PyUnicode_DecodeUTF8(s ? s : "", s ? (Py_ssize_t)strlen(s) : 0,
						   "surrogateescape");

		if (!o) {
			Py_DECREF(arr);
			return NULL;
		}
		Py_XSETREF(items[i], o);
	}
	return arr;
}

static PyObject *seq_to_list(pyo_env *env, const ortmk_value *v)
{
	size_t n = ortmk_value_sequence_length(v);
	PyObject *list = PyList_New((Py_ssize_t)n);

	for (size_t i = 0; list && i < n; i++) {
		ortmk_value *item;
		ortmk_status st = ortmk_value_sequence_get(v, i, &item);
		PyObject *o = st ? pyo_raise_last(st) : pyo_to_python(env, item);

		if (!o) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, o);
	}
	return list;
}

/* A map (an element of ZipMap's sequence) as a dict, as onnxruntime gives
 * it: int or str keys, float values, in the map's order. */
static PyObject *map_to_dict(const ortmk_value *v)
{
	ortmk_map_info info = {.struct_size = sizeof(info)};
	ortmk_status st = ortmk_value_map_info(v, &info);
	const int64_t *ik = ortmk_value_map_int64_keys(v);
	const float *vals = ortmk_value_map_values(v);
	PyObject *d;

	if (st)
		return pyo_raise_last(st);
	if (info.value_dtype != ORTMK_FLOAT)
		return pyo_raise(ORTMK_ERR_NOT_IMPLEMENTED, "a map's values are not float");
	d = PyDict_New();
	for (size_t i = 0; d && i < info.count; i++) {
		PyObject *k = ik ? PyLong_FromLongLong(ik[i]) :
			PyUnicode_DecodeUTF8(ortmk_value_map_string_key(v, i),
					     (Py_ssize_t)strlen(ortmk_value_map_string_key(v, i)),
					     "replace");
		PyObject *x = PyFloat_FromDouble((double)vals[i]);

		if (!k || !x || PyDict_SetItem(d, k, x) < 0)
			Py_CLEAR(d);
		Py_XDECREF(k);
		Py_XDECREF(x);
	}
	return d;
}

/* A numeric host tensor as an ndarray over its memory; takes v. */
static PyObject *tensor_to_array(pyo_env *env, ortmk_value *v)
{
	npy_intp dims[PYO_MAX_RANK];
	int npy = pyo_numpy_type(ortmk_value_dtype(v));
	int rank = np_dims(v, dims);
	void *data = ortmk_value_data(v);
	PyObject *arr, *owner;

	if (npy < 0) {
		ortmk_value_destroy(v);
		return pyo_raise(ORTMK_ERR_NOT_IMPLEMENTED, "an output's element type has no numpy type");
	}
	if (!data || ortmk_value_nbytes(v) == 0) {
		ortmk_value_destroy(v);
		return PyArray_ZEROS(rank, dims, npy, 0);
	}
	owner = pyo_value_wrap(env, v);
	if (!owner)
		return NULL;
	arr = PyArray_SimpleNewFromData(rank, dims, npy, data);
	if (!arr) {
		Py_DECREF(owner);
		return NULL;
	}
	/* Steals owner: the value lives as long as the array (and its views). */
	if (PyArray_SetBaseObject((PyArrayObject *)arr, owner) < 0) {
		Py_DECREF(arr);
		return NULL;
	}
	return arr;
}

/* A device value as a new host value (ortmk_copy_tensors); NULL raised. */
static ortmk_value *to_host(pyo_env *env, const ortmk_value *v)
{
	ortmk_value *h;
	ortmk_status st = ortmk_value_create(env->env, ortmk_value_dtype(v), ortmk_value_dims(v),
					     ortmk_value_rank(v), &h);

	if (st == ORTMK_OK) {
		Py_BEGIN_ALLOW_THREADS
		st = ortmk_copy_tensors(env->env, (const ortmk_value *const[]){v},
					(ortmk_value *const[]){h}, 1, NULL);
		Py_END_ALLOW_THREADS
		if (st)
			ortmk_value_destroy(h);
	}
	if (st) {
		pyo_raise_last(st);
		return NULL;
	}
	return h;
}

static int on_host(const ortmk_value *v)
{
	const char *loc = ortmk_value_location(v);

	return !loc || strcmp(loc, "host") == 0;
}

/* The Python object for v; takes v (destroyed here or by the array). */
PyObject *pyo_to_python(pyo_env *env, ortmk_value *v)
{
	PyObject *o;

	if (ortmk_value_kind_of(v) == ORTMK_VALUE_TENSOR && ortmk_value_dtype(v) != ORTMK_STRING) {
		if (!on_host(v)) {
			ortmk_value *h = to_host(env, v);

			ortmk_value_destroy(v);
			return h ? tensor_to_array(env, h) : NULL;
		}
		return tensor_to_array(env, v);
	}
	o = pyo_to_numpy_copy(env, v);
	ortmk_value_destroy(v);
	return o;
}

/* The Python object for a value the caller keeps: always a copy. */
PyObject *pyo_to_numpy_copy(pyo_env *env, const ortmk_value *v)
{
	npy_intp dims[PYO_MAX_RANK];
	int npy, rank;
	PyObject *arr;

	switch (ortmk_value_kind_of(v)) {
	case ORTMK_VALUE_NONE:
		Py_RETURN_NONE;
	case ORTMK_VALUE_SEQUENCE:
		return seq_to_list(env, v);
	case ORTMK_VALUE_MAP:
		return map_to_dict(v);
	default:
		break;
	}
	if (ortmk_value_dtype(v) == ORTMK_STRING)
		return strings_to_array(v);
	if (!on_host(v)) {
		ortmk_value *h = to_host(env, v);

		return h ? tensor_to_array(env, h) : NULL;
	}
	npy = pyo_numpy_type(ortmk_value_dtype(v));
	if (npy < 0)
		return pyo_raise(ORTMK_ERR_NOT_IMPLEMENTED, "a value's element type has no numpy type");
	rank = np_dims(v, dims);
	arr = PyArray_ZEROS(rank, dims, npy, 0);
	if (arr && ortmk_value_data_const(v))
		memcpy(PyArray_DATA((PyArrayObject *)arr), ortmk_value_data_const(v),
		       (size_t)PyArray_NBYTES((PyArrayObject *)arr));
	return arr;
}

/* ---- in: Python to values ----------------------------------------------- */

/* shape: a sequence of ints, into dims.  0 when done, -1 raised. */
int pyo_dims(PyObject *shape, int64_t *dims, size_t *rank)
{
	PyObject *seq = PySequence_Fast(shape, "shape must be a sequence of ints");
	Py_ssize_t n;

	if (!seq)
		return -1;
	n = PySequence_Fast_GET_SIZE(seq);
	if (n > PYO_MAX_RANK) {
		Py_DECREF(seq);
		pyo_raise(ORTMK_ERR_INVALID_ARGUMENT, "shape: rank above 32");
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		dims[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
		if (dims[i] == -1 && PyErr_Occurred()) {
			Py_DECREF(seq);
			return -1;
		}
	}
	*rank = (size_t)n;
	Py_DECREF(seq);
	return 0;
}

static int fail(ortmk_status st, const char *name, const char *what)
{
	PyObject *msg = PyUnicode_FromFormat("input '%s': %s", name, what);

	if (msg) {
		pyo_raise(st, PyUnicode_AsUTF8(msg));
		Py_DECREF(msg);
	}
	return -1;
}

static int fail_last(ortmk_status st, const char *name)
{
	return fail(st, name, ortmk_last_error());
}

/* The UTF-8 of element i of a str/bytes/object array; *keep holds it. */
static const char *string_at(PyArrayObject *arr, npy_intp i, PyObject **keep)
{
	char *p = (char *)PyArray_DATA(arr) + i * PyArray_ITEMSIZE(arr);
	PyObject *o = PyArray_GETITEM(arr, p);

	*keep = o;
	if (!o)
		return NULL;
	if (PyUnicode_Check(o))
		return PyUnicode_AsUTF8(o);
	if (PyBytes_Check(o))
		return PyBytes_AS_STRING(o);
	PyErr_Format(PyExc_TypeError, "a string tensor holds str or bytes, not %s",
		     Py_TYPE(o)->tp_name);
	return NULL;
}

static int strings_in(pyo_env *env, PyArrayObject *arr, const int64_t *dims, size_t rank,
		      const char *name, ortmk_value **out)
{
	npy_intp n = PyArray_SIZE(arr);
	const char **strs = PyMem_Calloc((size_t)n + 1, sizeof(*strs));
	PyObject **keep = PyMem_Calloc((size_t)n + 1, sizeof(*keep));
	ortmk_status st = ORTMK_OK;
	int rc = -1;

	if (!strs || !keep) {
		PyErr_NoMemory();
		goto out;
	}
	for (npy_intp i = 0; i < n; i++)
		if (!(strs[i] = string_at(arr, i, &keep[i])))
			goto out;
	st = ortmk_value_create_strings(env->env, dims, rank, strs, out);
	rc = st ? fail_last(st, name) : 0;
out:
	for (npy_intp i = 0; keep && i < n; i++)
		Py_XDECREF(keep[i]);
	PyMem_Free(keep);
	PyMem_Free(strs);
	return rc;
}

/* One copy, into the new value's shared memory; big copies without the GIL. */
static int tensor_in(pyo_env *env, PyArrayObject *arr, ortmk_dtype t, const char *name,
		     ortmk_value **out)
{
	int64_t dims[PYO_MAX_RANK];
	size_t rank = (size_t)PyArray_NDIM(arr), nbytes = (size_t)PyArray_NBYTES(arr);
	const void *src = PyArray_DATA(arr);
	ortmk_status st;

	if (rank > PYO_MAX_RANK)
		return fail(ORTMK_ERR_INVALID_ARGUMENT, name, "rank above 32");
	for (size_t i = 0; i < rank; i++)
		dims[i] = (int64_t)PyArray_DIM(arr, (int)i);
	if (t == ORTMK_STRING)
		return strings_in(env, arr, dims, rank, name, out);
	st = ortmk_value_create(env->env, t, dims, rank, out);
	if (st)
		return fail_last(st, name);
	if (nbytes >= (1u << 20)) {
		void *dst = ortmk_value_data(*out);

		Py_BEGIN_ALLOW_THREADS
		memcpy(dst, src, nbytes);
		Py_END_ALLOW_THREADS
	} else if (nbytes) {
		memcpy(ortmk_value_data(*out), src, nbytes);
	}
	return 0;
}

static int array_in(pyo_env *env, PyObject *obj, const char *name, ortmk_value **out)
{
	int flags = NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_NOTSWAPPED;
	PyArrayObject *arr;
	ortmk_dtype t;
	int rc;

	/* The same array back (a new reference) when it is fit already. */
	arr = (PyArrayObject *)PyArray_CheckFromAny(obj, NULL, 0, 0, flags, NULL);
	if (!arr)
		return -1;
	if (pyo_dtype_from_numpy(PyArray_DESCR(arr)->kind, PyArray_ITEMSIZE(arr), &t)) {
		PyObject *s = PyObject_Str((PyObject *)PyArray_DESCR(arr));
		PyObject *msg = s ? PyUnicode_FromFormat("numpy dtype %U has no ONNX type", s) : NULL;

		rc = msg ? fail(ORTMK_ERR_INVALID_ARGUMENT, name, PyUnicode_AsUTF8(msg)) : -1;
		Py_XDECREF(msg);
		Py_XDECREF(s);
	} else {
		rc = tensor_in(env, arr, t, name, out);
	}
	Py_DECREF(arr);
	return rc;
}

static void destroy_all(ortmk_value **v, Py_ssize_t n)
{
	for (Py_ssize_t i = 0; i < n; i++)
		ortmk_value_destroy(v[i]);
}

/* A list or tuple of tensors of one element type as a sequence (copied
 * by ortmk_value_create_sequence).  seq_dtype: the type of an empty one. */
static int sequence_in(pyo_env *env, PyObject *obj, const char *name, ortmk_dtype seq_dtype,
		       ortmk_value **out)
{
	Py_ssize_t n = PySequence_Fast_GET_SIZE(obj), i;
	ortmk_value **items = PyMem_Calloc((size_t)n + 1, sizeof(*items));
	ortmk_dtype t = seq_dtype ? seq_dtype : ORTMK_FLOAT;
	ortmk_status st;
	int rc = -1;

	if (!items)
		return PyErr_NoMemory(), -1;
	for (i = 0; i < n; i++)
		if (array_in(env, PySequence_Fast_GET_ITEM(obj, i), name, &items[i]))
			goto out;
	if (n)
		t = ortmk_value_dtype(items[0]);
	st = ortmk_value_create_sequence(env->env, t, (const ortmk_value *const *)items,
					 (size_t)n, out);
	rc = st ? fail_last(st, name) : 0;
out:
	destroy_all(items, i);
	PyMem_Free(items);
	return rc;
}

/* obj as a value: *borrowed says whether it is a Value's (not to destroy).
 * name is for messages.  0 when done, -1 raised. */
int pyo_from_python(pyo_env *env, PyObject *obj, const char *name, ortmk_dtype seq_dtype,
		    ortmk_value **out, int *borrowed)
{
	ortmk_status st;
	PyObject *seq;
	int rc;

	*out = NULL;
	*borrowed = 0;
	if (PyObject_TypeCheck(obj, &pyo_value_type)) {
		*out = ((pyo_value *)obj)->v;
		*borrowed = 1;
		return *out ? 0 : fail(ORTMK_ERR_INVALID_ARGUMENT, name, "an empty Value");
	}
	if (obj == Py_None) {
		st = ortmk_value_create_none(env->env, out);
		return st ? fail_last(st, name) : 0;
	}
	if (!PyList_Check(obj) && !PyTuple_Check(obj))
		return array_in(env, obj, name, out);
	seq = PySequence_Fast(obj, "a sequence");
	if (!seq)
		return -1;
	rc = sequence_in(env, seq, name, seq_dtype, out);
	Py_DECREF(seq);
	return rc;
}
