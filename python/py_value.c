/*
 * py_value.c: Value, one ortmk_value owned by Python.  It is the base of
 * every output ndarray (so an output's shared memory lives exactly as long
 * as the array), the value an IO binding borrows, and what ortmk.OrtValue
 * wraps (python/ortmk/_session.py).
 */
#include "pyortmk.h"

#include <string.h>

/* A Value owning v (destroyed here on failure). */
PyObject *pyo_value_wrap(pyo_env *env, ortmk_value *v)
{
	pyo_value *o = PyObject_New(pyo_value, &pyo_value_type);

	if (!o) {
		ortmk_value_destroy(v);
		return NULL;
	}
	o->v = v;
	o->env = env;
	Py_INCREF(env);
	return (PyObject *)o;
}

static void value_dealloc(pyo_value *o)
{
	ortmk_value_destroy(o->v);
	Py_XDECREF(o->env);
	Py_TYPE(o)->tp_free((PyObject *)o);
}

/* NULL or "host": host memory.  A provider name (even "cpu", which has
 * device memory when emulating it: docs/DEVICE.md) goes to
 * ortmk_value_create_on, which gives a host value where the provider has
 * no memory of its own. */
static int is_host(const char *provider)
{
	return !provider || !strcmp(provider, "host");
}

/* A host value copied into a new value in provider's memory; takes h. */
static ortmk_value *to_device(pyo_env *env, ortmk_value *h, const char *provider)
{
	ortmk_value *d = NULL;
	ortmk_status st;

	Py_BEGIN_ALLOW_THREADS
	st = ortmk_value_create_on(env->env, provider, ortmk_value_dtype(h), ortmk_value_dims(h),
				   ortmk_value_rank(h), &d);
	if (st == ORTMK_OK)
		st = ortmk_copy_tensors(env->env, (const ortmk_value *const[]){h},
					(ortmk_value *const[]){d}, 1, NULL);
	Py_END_ALLOW_THREADS
	if (st) {
		pyo_raise_last(st);
		ortmk_value_destroy(d);
		d = NULL;
	}
	ortmk_value_destroy(h);
	return d;
}

/* Value(obj, dtype=0, provider=None): obj (ndarray, list: a sequence, None:
 * an empty optional) copied into a new host value, then into provider's
 * memory when provider is given (ortmk_value_create_on).  dtype: the
 * element type of an empty list. */
static PyObject *value_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"obj", "dtype", "provider", NULL};
	PyObject *obj, *res;
	const char *provider = NULL;
	int dtype = 0, borrowed;
	ortmk_value *v;
	pyo_env *env;

	(void)type;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|iz", kwlist, &obj, &dtype, &provider))
		return NULL;
	if (PyObject_TypeCheck(obj, &pyo_value_type))
		return Py_NewRef(obj);
	env = pyo_env_get(-1);
	if (!env)
		return NULL;
	if (pyo_from_python(env, obj, "value", (ortmk_dtype)dtype, &v, &borrowed)) {
		Py_DECREF(env);
		return NULL;
	}
	if (!is_host(provider) && ortmk_value_kind_of(v) == ORTMK_VALUE_TENSOR &&
	    ortmk_value_dtype(v) != ORTMK_STRING)
		v = to_device(env, v, provider);
	res = v ? pyo_value_wrap(env, v) : NULL;
	Py_DECREF(env);
	return res;
}

/* Value.empty(shape, dtype, provider=None): uninitialized, in provider's
 * memory (the host for None, "host" or a provider without device memory). */
static PyObject *value_empty(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"shape", "dtype", "provider", NULL};
	const char *provider = NULL;
	int64_t dims[PYO_MAX_RANK];
	PyObject *shape, *res = NULL;
	ortmk_value *v = NULL;
	ortmk_status st;
	size_t rank;
	pyo_env *env;
	int dtype;

	(void)cls;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi|z", kwlist, &shape, &dtype, &provider) ||
	    pyo_dims(shape, dims, &rank))
		return NULL;
	env = pyo_env_get(-1);
	if (!env)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	if (is_host(provider))
		st = ortmk_value_create(env->env, (ortmk_dtype)dtype, dims, rank, &v);
	else
		st = ortmk_value_create_on(env->env, provider, (ortmk_dtype)dtype, dims, rank, &v);
	Py_END_ALLOW_THREADS
	if (st)
		pyo_raise_last(st);
	else
		res = pyo_value_wrap(env, v);
	Py_DECREF(env);
	return res;
}

static PyObject *value_numpy(pyo_value *o, PyObject *unused)
{
	(void)unused;
	return pyo_to_numpy_copy(o->env, o->v);
}

static PyObject *value_shape(pyo_value *o, void *closure)
{
	size_t rank = ortmk_value_rank(o->v);
	const int64_t *dims = ortmk_value_dims(o->v);
	PyObject *list;

	(void)closure;
	if (ortmk_value_kind_of(o->v) != ORTMK_VALUE_TENSOR)
		Py_RETURN_NONE;
	list = PyList_New((Py_ssize_t)rank);
	for (size_t i = 0; list && i < rank; i++) {
		PyObject *d = PyLong_FromLongLong(dims[i]);

		if (!d) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, d);
	}
	return list;
}

static PyObject *value_dtype(pyo_value *o, void *closure)
{
	(void)closure;
	return PyLong_FromLong((long)ortmk_value_dtype(o->v));
}

static PyObject *value_kind(pyo_value *o, void *closure)
{
	(void)closure;
	return PyLong_FromLong((long)ortmk_value_kind_of(o->v));
}

static PyObject *value_location(pyo_value *o, void *closure)
{
	const char *loc = ortmk_value_location(o->v);

	(void)closure;
	return PyUnicode_FromString(loc ? loc : "host");
}

static PyMethodDef value_methods[] = {
	{"numpy", (PyCFunction)value_numpy, METH_NOARGS,
	 "A copy on the host: ndarray, list (sequence) or None"},
	{"empty", (PyCFunction)(void (*)(void))value_empty, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
	 "empty(shape, dtype, provider=None): an uninitialized tensor"},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef value_getset[] = {
	{"shape", (getter)value_shape, NULL, "dims of a tensor (None otherwise)", NULL},
	{"dtype", (getter)value_dtype, NULL, "ONNX element type number", NULL},
	{"kind", (getter)value_kind, NULL, "0 tensor, 1 sequence, 2 none", NULL},
	{"location", (getter)value_location, NULL, "'host' or the provider holding it", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject pyo_value_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ortmk._ortmk.Value",
	.tp_basicsize = sizeof(pyo_value),
	.tp_dealloc = (destructor)value_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "One ortmk value (tensor, sequence, optional) owned by Python.",
	.tp_methods = value_methods,
	.tp_getset = value_getset,
	.tp_new = value_new,
};
