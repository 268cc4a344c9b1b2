/*
 * py_session.c: Session, one ortmk_session: creation from a path or bytes,
 * the model's signature and metadata, and run().  The GIL is released
 * while a session is created and while a run waits for its providers, so
 * other Python threads (and other runs of the same session: the C API
 * allows concurrent runs) go on meanwhile.
 */
#include "pyortmk.h"

#include <stdlib.h>
#include <string.h>

/* options: (key, value) pairs of strings for ortmk_session_options_set;
 * NULL or None: none. */
static ortmk_session_options *make_options(PyObject *options)
{
	ortmk_session_options *o;
	PyObject *seq = NULL;
	ortmk_status st;

	if ((st = ortmk_session_options_create(&o))) {
		pyo_raise_last(st);
		return NULL;
	}
	if (!options || options == Py_None)
		return o;
	seq = PySequence_Fast(options, "options: a sequence of (key, value) pairs");
	if (!seq)
		goto fail;
	for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
		const char *key, *value;

		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "ss", &key, &value))
			goto fail;
		if ((st = ortmk_session_options_set(o, key, value))) {
			pyo_raise_last(st);
			goto fail;
		}
	}
	Py_DECREF(seq);
	return o;
fail:
	Py_XDECREF(seq);
	ortmk_session_options_destroy(o);
	return NULL;
}

/* Creates the session from a path (str) or a serialized model (bytes-like)
 * without the GIL; 0 when done, -1 raised. */
static int create(pyo_session *self, PyObject *model, const ortmk_session_options *o,
		  const char *ext_dir)
{
	ortmk_env *env = self->env->env;
	ortmk_status st;
	Py_buffer buf;
	char *msg = NULL;

	if (PyUnicode_Check(model)) {
		const char *path = PyUnicode_AsUTF8(model);

		if (!path)
			return -1;
		Py_BEGIN_ALLOW_THREADS
		st = ortmk_session_create(env, path, o, &self->s);
		if (st)
			msg = pyo_save_error();
		Py_END_ALLOW_THREADS
	} else {
		if (PyObject_GetBuffer(model, &buf, PyBUF_SIMPLE) < 0)
			return -1;
		Py_BEGIN_ALLOW_THREADS
		st = ortmk_session_create_from_buffer(env, buf.buf, (size_t)buf.len, ext_dir, o,
						      &self->s);
		if (st)
			msg = pyo_save_error();
		Py_END_ALLOW_THREADS
		PyBuffer_Release(&buf);
	}
	if (st) {
		pyo_raise_saved(st, msg);
		return -1;
	}
	return 0;
}

/* Session(model, options=(), external_data_dir=None, log_severity=-1). */
static int session_init(pyo_session *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"model", "options", "external_data_dir", "log_severity", NULL};
	PyObject *model, *options = NULL;
	const char *ext_dir = NULL;
	int log_severity = -1, rc;
	ortmk_session_options *o;

	if (self->s) {
		PyErr_SetString(PyExc_RuntimeError, "Session: already initialized");
		return -1;
	}
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Ozi", kwlist, &model, &options, &ext_dir,
					 &log_severity))
		return -1;
	if (!self->env && !(self->env = pyo_env_get(log_severity)))
		return -1;
	o = make_options(options);
	if (!o)
		return -1;
	rc = create(self, model, o, ext_dir);
	ortmk_session_options_destroy(o);
	return rc;
}

static void session_dealloc(pyo_session *self)
{
	ortmk_session *s = self->s;

	if (s) {
		Py_BEGIN_ALLOW_THREADS
		ortmk_session_destroy(s);
		Py_END_ALLOW_THREADS
	}
	Py_XDECREF(self->env);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_open(pyo_session *self)
{
	if (self->s)
		return 0;
	PyErr_SetString(PyExc_RuntimeError, "Session: not created");
	return -1;
}

/* ---- signature and metadata ------------------------------------------ */

static PyObject *dims_list(const ortmk_io_info *io)
{
	PyObject *dims, *names;

	if (!io->rank_known)
		return Py_BuildValue("(OO)", Py_None, Py_None);
	dims = PyList_New((Py_ssize_t)io->rank);
	names = PyList_New((Py_ssize_t)io->rank);
	for (size_t i = 0; dims && names && i < io->rank; i++) {
		const char *n = io->dim_names ? io->dim_names[i] : NULL;

		PyList_SET_ITEM(dims, (Py_ssize_t)i, PyLong_FromLongLong(io->dims[i]));
		PyList_SET_ITEM(names, (Py_ssize_t)i, n ? PyUnicode_FromString(n) : Py_NewRef(Py_None));
	}
	return Py_BuildValue("(NN)", dims, names);
}

/* A list of dicts: name, kind (0 tensor, 1 sequence), optional, dtype,
 * dims (None: rank unknown; -1: not a fixed number), dim_names. */
static PyObject *meta_list(pyo_session *self, int outputs)
{
	size_t n = outputs ? ortmk_session_output_count(self->s) : ortmk_session_input_count(self->s);
	PyObject *list = PyList_New((Py_ssize_t)n);

	for (size_t i = 0; list && i < n; i++) {
		ortmk_io_info io = {.struct_size = sizeof(io)};
		ortmk_status st = outputs ? ortmk_session_output_meta(self->s, i, &io) :
				  ortmk_session_input_meta(self->s, i, &io);
		PyObject *d = st ? pyo_raise_last(st) : dims_list(&io);
		PyObject *item = d ? Py_BuildValue("{s:s,s:i,s:O,s:i,s:O,s:O,s:i}", "name", io.name,
						   "kind", (int)io.kind, "optional",
						   io.optional ? Py_True : Py_False, "dtype",
						   (int)io.dtype, "dims", PyTuple_GET_ITEM(d, 0),
						   "dim_names", PyTuple_GET_ITEM(d, 1),
						   "map_key_dtype", (int)io.map_key_dtype) : NULL;

		Py_XDECREF(d);
		if (!item) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, item);
	}
	return list;
}

static PyObject *session_input_meta(pyo_session *self, PyObject *unused)
{
	(void)unused;
	return check_open(self) ? NULL : meta_list(self, 0);
}

static PyObject *session_output_meta(pyo_session *self, PyObject *unused)
{
	(void)unused;
	return check_open(self) ? NULL : meta_list(self, 1);
}

static PyObject *props_dict(const ortmk_model_metadata *m)
{
	PyObject *d = PyDict_New();

	for (size_t i = 0; d && i < m->n_props; i++) {
		PyObject *v = PyUnicode_FromString(m->prop_values[i]);

		if (!v || PyDict_SetItemString(d, m->prop_keys[i], v) < 0)
			Py_CLEAR(d);
		Py_XDECREF(v);
	}
	return d;
}

static PyObject *session_metadata(pyo_session *self, PyObject *unused)
{
	ortmk_model_metadata m = {.struct_size = sizeof(m)};
	ortmk_status st;

	(void)unused;
	if (check_open(self))
		return NULL;
	if ((st = ortmk_session_model_metadata(self->s, &m)))
		return pyo_raise_last(st);
	return Py_BuildValue("{s:s,s:s,s:s,s:s,s:s,s:s,s:L,s:N}", "producer_name", m.producer_name,
			     "producer_version", m.producer_version, "domain", m.domain,
			     "description", m.description, "graph_name", m.graph_name,
			     "graph_description", m.graph_description, "version",
			     (long long)m.version, "custom_metadata_map", props_dict(&m));
}

/* [(provider, nodes, pid)] in the session's priority order. */
static PyObject *session_providers(pyo_session *self, PyObject *unused)
{
	size_t n;
	PyObject *list;

	(void)unused;
	if (check_open(self))
		return NULL;
	n = ortmk_session_provider_count(self->s);
	list = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; list && i < n; i++) {
		const char *name = "";
		size_t nodes = 0;
		int pid = -1;
		PyObject *t;

		ortmk_session_provider_nodes(self->s, i, &name, &nodes);
		ortmk_session_provider_pid(self->s, i, &pid);
		t = Py_BuildValue("(sni)", name, (Py_ssize_t)nodes, pid);
		if (!t) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, t);
	}
	return list;
}

PyObject *pyo_session_run(pyo_session *self, PyObject *args);

static PyMethodDef session_methods[] = {
	{"run", (PyCFunction)pyo_session_run, METH_VARARGS,
	 "run(output_names or None, feeds: dict) -> list"},
	{"input_meta", (PyCFunction)session_input_meta, METH_NOARGS, "the inputs' signature"},
	{"output_meta", (PyCFunction)session_output_meta, METH_NOARGS, "the outputs' signature"},
	{"metadata", (PyCFunction)session_metadata, METH_NOARGS, "the model's metadata (dict)"},
	{"providers", (PyCFunction)session_providers, METH_NOARGS,
	 "[(provider, nodes, pid)] in priority order"},
	{NULL, NULL, 0, NULL},
};

PyTypeObject pyo_session_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ortmk._ortmk.Session",
	.tp_basicsize = sizeof(pyo_session),
	.tp_dealloc = (destructor)session_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "Session(model, options=(), external_data_dir=None, log_severity=-1)",
	.tp_methods = session_methods,
	.tp_init = (initproc)session_init,
	.tp_new = PyType_GenericNew,
};
