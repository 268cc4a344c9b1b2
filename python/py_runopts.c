/*
 * py_runopts.c: _ortmk.RunOptions, the ortmk_run_options behind the
 * package's RunOptions: terminate (from any thread, the GIL not needed by
 * the C call), the run tag, a per-run timeout.
 */
#include "pyortmk.h"

static void ro_dealloc(pyo_runopts *self)
{
	ortmk_run_options_destroy(self->ro);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ro_init(pyo_runopts *self, PyObject *args, PyObject *kw)
{
	ortmk_status st;

	if (!PyArg_ParseTuple(args, ":RunOptions") || (kw && PyDict_Size(kw))) {
		PyErr_SetString(PyExc_TypeError, "RunOptions() takes no arguments");
		return -1;
	}
	if (self->ro)
		return 0;
	st = ortmk_run_options_create(&self->ro);
	if (st) {
		pyo_raise_last(st);
		return -1;
	}
	return 0;
}

static PyObject *ro_set_terminate(pyo_runopts *self, PyObject *arg)
{
	int t = PyObject_IsTrue(arg);

	if (t < 0)
		return NULL;
	ortmk_run_options_set_terminate(self->ro, t);
	Py_RETURN_NONE;
}

static PyObject *ro_set_tag(pyo_runopts *self, PyObject *arg)
{
	const char *tag = PyUnicode_AsUTF8(arg);
	ortmk_status st;

	if (!tag)
		return NULL;
	st = ortmk_run_options_set_tag(self->ro, tag);
	if (st)
		return pyo_raise_last(st), NULL;
	Py_RETURN_NONE;
}

static PyObject *ro_set_timeout_ms(pyo_runopts *self, PyObject *arg)
{
	long ms = PyLong_AsLong(arg);
	ortmk_status st;

	if (ms == -1 && PyErr_Occurred())
		return NULL;
	st = ms < 0 || ms > 86400000 ? ORTMK_ERR_INVALID_ARGUMENT :
	     ortmk_run_options_set_timeout_ms(self->ro, (int)ms);
	if (st) {
		PyErr_Format(PyExc_ValueError, "RunOptions: timeout %ld ms is not 0..86400000", ms);
		return NULL;
	}
	Py_RETURN_NONE;
}

static PyMethodDef ro_methods[] = {
	{"set_terminate", (PyCFunction)ro_set_terminate, METH_O, "ortmk_run_options_set_terminate"},
	{"set_tag", (PyCFunction)ro_set_tag, METH_O, "ortmk_run_options_set_tag"},
	{"set_timeout_ms", (PyCFunction)ro_set_timeout_ms, METH_O, "ortmk_run_options_set_timeout_ms"},
	{NULL, NULL, 0, NULL},
};

PyTypeObject pyo_runopts_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ortmk._ortmk.RunOptions",
	.tp_basicsize = sizeof(pyo_runopts),
	.tp_dealloc = (destructor)ro_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "ortmk_run_options (internal: use ortmk.RunOptions).",
	.tp_methods = ro_methods,
	.tp_init = (initproc)ro_init,
	.tp_new = PyType_GenericNew,
};
