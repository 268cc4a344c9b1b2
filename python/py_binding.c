/*
 * py_binding.c: Binding, one ortmk_io_binding (docs/DEVICE.md) behind
 * ortmk.IOBinding.  The C binding borrows the values bound to it, so this
 * object keeps them referenced (ins, outs) for as long as they are bound.
 * Outputs the runtime allocates are taken from the binding the first time
 * Python asks for them (outputs()), so they outlive the next run when
 * Python keeps them (e.g. bound as the next step's input).
 */
#include "pyortmk.h"

#include <string.h>

typedef struct {
	PyObject_HEAD
	ortmk_io_binding *b;
	pyo_session *sess;
	PyObject *ins;            /* name -> Value bound as input */
	PyObject *outs;           /* name -> Value the output is written into */
	PyObject *taken;          /* name -> Value taken after the last run */
	int busy;                 /* a run on another thread uses b */
} pyo_binding;

static int binding_init(pyo_binding *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"session", NULL};
	pyo_session *sess;
	ortmk_status st;

	if (self->b) {
		PyErr_SetString(PyExc_RuntimeError, "Binding: already initialized");
		return -1;
	}
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!", kwlist, &pyo_session_type, &sess))
		return -1;
	if (!sess->s) {
		PyErr_SetString(PyExc_RuntimeError, "Binding: the session is not created");
		return -1;
	}
	self->ins = PyDict_New();
	self->outs = PyDict_New();
	self->taken = PyDict_New();
	if (!self->ins || !self->outs || !self->taken)
		return -1;
	if ((st = ortmk_io_binding_create(sess->s, &self->b))) {
		pyo_raise_last(st);
		return -1;
	}
	self->sess = (pyo_session *)Py_NewRef(sess);
	return 0;
}

static void binding_dealloc(pyo_binding *self)
{
	/* The C binding first: it borrows the values the dicts hold. */
	ortmk_io_binding_destroy(self->b);
	Py_XDECREF(self->taken);
	Py_XDECREF(self->outs);
	Py_XDECREF(self->ins);
	Py_XDECREF(self->sess);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int usable(pyo_binding *self)
{
	if (!self->b)
		PyErr_SetString(PyExc_RuntimeError, "Binding: not created");
	else if (self->busy)
		PyErr_SetString(PyExc_RuntimeError, "IOBinding: in use by a run on another thread");
	else
		return 1;
	return 0;
}

/* bind_input(name, obj): obj a Value (bound as it is) or anything
 * convertible (copied into a new host value). */
static PyObject *binding_bind_input(pyo_binding *self, PyObject *args)
{
	PyObject *obj, *val;
	const char *name;
	ortmk_status st;
	ortmk_value *v;
	int borrowed;

	if (!PyArg_ParseTuple(args, "sO:bind_input", &name, &obj) || !usable(self))
		return NULL;
	if (pyo_from_python(self->sess->env, obj, name, ORTMK_UNDEFINED, &v, &borrowed))
		return NULL;
	val = borrowed ? Py_NewRef(obj) : pyo_value_wrap(self->sess->env, v);
	if (!val)
		return NULL;
	if ((st = ortmk_io_binding_bind_input(self->b, name, v))) {
		Py_DECREF(val);
		return pyo_raise_last(st);
	}
	/* Replaces (and releases) what was bound to name before. */
	if (PyDict_SetItemString(self->ins, name, val) < 0) {
		Py_DECREF(val);
		return NULL;
	}
	Py_DECREF(val);
	Py_RETURN_NONE;
}

/* bind_output(name, provider="cpu"): a new value each run, in provider's
 * memory (the host for cpu). */
static PyObject *binding_bind_output(pyo_binding *self, PyObject *args)
{
	const char *name, *provider = "cpu";
	ortmk_status st;

	if (!PyArg_ParseTuple(args, "s|s:bind_output", &name, &provider) || !usable(self))
		return NULL;
	if ((st = ortmk_io_binding_bind_output_to_device(self->b, name, provider)))
		return pyo_raise_last(st);
	if (PyDict_DelItemString(self->outs, name) < 0)
		PyErr_Clear();
	Py_RETURN_NONE;
}

/* bind_output_value(name, value): the output is written into value. */
static PyObject *binding_bind_output_value(pyo_binding *self, PyObject *args)
{
	pyo_value *val;
	const char *name;
	ortmk_status st;

	if (!PyArg_ParseTuple(args, "sO!:bind_output_value", &name, &pyo_value_type, &val) ||
	    !usable(self))
		return NULL;
	if ((st = ortmk_io_binding_bind_output(self->b, name, val->v)))
		return pyo_raise_last(st);
	if (PyDict_SetItemString(self->outs, name, (PyObject *)val) < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *binding_run(pyo_binding *self, PyObject *unused)
{
	ortmk_session *s = self->sess->s;
	ortmk_io_binding *b = self->b;
	char *msg = NULL;
	ortmk_status st;

	(void)unused;
	if (!usable(self))
		return NULL;
	self->busy = 1;
	Py_BEGIN_ALLOW_THREADS
	st = ortmk_session_run_binding(s, b);
	if (st)
		msg = pyo_save_error();
	Py_END_ALLOW_THREADS
	self->busy = 0;
	/* Values taken after the previous run are Python's now: they live on
	 * where Python holds them. */
	PyDict_Clear(self->taken);
	if (st)
		return pyo_raise_saved(st, msg);
	Py_RETURN_NONE;
}

static PyObject *binding_output_names(pyo_binding *self, PyObject *unused)
{
	size_t n;
	PyObject *list;

	(void)unused;
	if (!usable(self))
		return NULL;
	n = ortmk_io_binding_output_count(self->b);
	list = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *s = PyUnicode_FromString(ortmk_io_binding_output_name(self->b, i));

		if (!s) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, s);
	}
	return list;
}

/* The Value of output name after the last run (borrowed reference). */
static PyObject *output_value(pyo_binding *self, const char *name)
{
	PyObject *val = PyDict_GetItemString(self->outs, name);
	ortmk_status st;
	ortmk_value *v;

	if (val)
		return val;
	if ((val = PyDict_GetItemString(self->taken, name)))
		return val;
	if ((st = ortmk_io_binding_take_output(self->b, name, &v)))
		return pyo_raise_last(st);
	val = pyo_value_wrap(self->sess->env, v);
	if (!val || PyDict_SetItemString(self->taken, name, val) < 0) {
		Py_XDECREF(val);
		return NULL;
	}
	Py_DECREF(val);
	return val;
}

/* outputs(as_numpy): the outputs of the last run in binding order, as
 * Values, or as host copies (ndarray, list, None). */
static PyObject *binding_outputs(pyo_binding *self, PyObject *args)
{
	int as_numpy = 0;
	size_t n;
	PyObject *list;

	if (!PyArg_ParseTuple(args, "|p:outputs", &as_numpy) || !usable(self))
		return NULL;
	n = ortmk_io_binding_output_count(self->b);
	list = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *val = output_value(self, ortmk_io_binding_output_name(self->b, i));
		PyObject *o = !val ? NULL : as_numpy ? pyo_to_numpy_copy(self->sess->env,
							 ((pyo_value *)val)->v) : Py_NewRef(val);

		if (!o) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, o);
	}
	return list;
}

static PyObject *binding_clear_inputs(pyo_binding *self, PyObject *unused)
{
	(void)unused;
	if (!usable(self))
		return NULL;
	ortmk_io_binding_clear_inputs(self->b);
	PyDict_Clear(self->ins);
	Py_RETURN_NONE;
}

static PyObject *binding_clear_outputs(pyo_binding *self, PyObject *unused)
{
	(void)unused;
	if (!usable(self))
		return NULL;
	ortmk_io_binding_clear_outputs(self->b);
	PyDict_Clear(self->outs);
	PyDict_Clear(self->taken);
	Py_RETURN_NONE;
}

/* synchronize(outputs, timeout_ms=-1): waits for pending copies. */
static PyObject *binding_synchronize(pyo_binding *self, PyObject *args)
{
	ortmk_io_binding *b = self->b;
	int outputs, timeout_ms = -1;
	char *msg = NULL;
	ortmk_status st;

	if (!PyArg_ParseTuple(args, "p|i:synchronize", &outputs, &timeout_ms) || !usable(self))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	st = outputs ? ortmk_io_binding_synchronize_outputs(b, timeout_ms) :
	     ortmk_io_binding_synchronize_inputs(b, timeout_ms);
	if (st)
		msg = pyo_save_error();
	Py_END_ALLOW_THREADS
	if (st)
		return pyo_raise_saved(st, msg);
	Py_RETURN_NONE;
}

static PyMethodDef binding_methods[] = {
	{"bind_input", (PyCFunction)binding_bind_input, METH_VARARGS, "bind_input(name, obj)"},
	{"bind_output", (PyCFunction)binding_bind_output, METH_VARARGS,
	 "bind_output(name, provider='cpu')"},
	{"bind_output_value", (PyCFunction)binding_bind_output_value, METH_VARARGS,
	 "bind_output_value(name, value)"},
	{"run", (PyCFunction)binding_run, METH_NOARGS, "ortmk_session_run_binding"},
	{"output_names", (PyCFunction)binding_output_names, METH_NOARGS, "bound outputs, in order"},
	{"outputs", (PyCFunction)binding_outputs, METH_VARARGS, "outputs(as_numpy=False)"},
	{"clear_inputs", (PyCFunction)binding_clear_inputs, METH_NOARGS, "unbind every input"},
	{"clear_outputs", (PyCFunction)binding_clear_outputs, METH_NOARGS, "unbind every output"},
	{"synchronize", (PyCFunction)binding_synchronize, METH_VARARGS,
	 "synchronize(outputs: bool, timeout_ms=-1)"},
	{NULL, NULL, 0, NULL},
};

PyTypeObject pyo_binding_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ortmk._ortmk.Binding",
	.tp_basicsize = sizeof(pyo_binding),
	.tp_dealloc = (destructor)binding_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Binding(session): an ortmk_io_binding",
	.tp_methods = binding_methods,
	.tp_init = (initproc)binding_init,
	.tp_new = PyType_GenericNew,
};
