/*
 * _ortmk.c: the extension module's entry point.  It owns the process-wide
 * environment (ONNX Runtime has one OrtEnv per process, so has this
 * package), turns an ortmk_status and ortmk_last_error() into the
 * exception class python/ortmk/_errors.py registers for that status, and
 * exposes the library-level calls (version, available providers).
 *
 * The core's code is linked into this module (ortmk_static_dep): the
 * library finds its provider executables in the _providers directory
 * beside this file (dladdr), which is where the wheel installs them.
 */
#define PYORTMK_IMPORT_ARRAY
#include "pyortmk.h"

#include <stdlib.h>
#include <string.h>

/* The environment every session shares; NULL until the first session
 * (or value) needs it and again after _shutdown(), when the objects still
 * holding it keep it alive until they go. */
static pyo_env *g_env;
static int g_log_severity = -1;      /* -1: the library's default */
/* Exception classes indexed by ortmk_status, set by _errors.py. */
static PyObject *g_errors;

/* ---- environment ---------------------------------------------------- */

static void env_dealloc(pyo_env *e)
{
	ortmk_env *env = e->env;

	/* Stopping provider processes waits for them: let other threads run. */
	if (env) {
		Py_BEGIN_ALLOW_THREADS
		ortmk_env_destroy(env);
		Py_END_ALLOW_THREADS
	}
	Py_TYPE(e)->tp_free((PyObject *)e);
}

PyTypeObject pyo_env_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ortmk._ortmk.Env",
	.tp_basicsize = sizeof(pyo_env),
	.tp_dealloc = (destructor)env_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "The process-wide ortmk environment (internal).",
};

/* A new reference to the environment, created on first use with
 * log_severity (ONNX Runtime's 0..4; -1: the default set by
 * set_log_severity, else the library's). */
pyo_env *pyo_env_get(int log_severity)
{
	ortmk_env_options opts = {.struct_size = sizeof(opts)};
	ortmk_env *env;
	ortmk_status st;
	pyo_env *e;

	if (g_env) {
		Py_INCREF(g_env);
		return g_env;
	}
	if (log_severity < 0)
		log_severity = g_log_severity;
	opts.log_severity = log_severity < 0 ? ORTMK_LOG_WARNING : (ortmk_log_severity)log_severity;
	st = ortmk_env_create_with_options(&opts, &env);
	if (st) {
		pyo_raise_last(st);
		return NULL;
	}
	e = PyObject_New(pyo_env, &pyo_env_type);
	if (!e) {
		ortmk_env_destroy(env);
		return NULL;
	}
	e->env = env;
	g_env = e;
	Py_INCREF(g_env);
	return e;
}

/* ---- errors --------------------------------------------------------- */

/* The message of the call that just failed, copied: call it on the thread
 * of the failing call before anything else can touch ortmk (it may run
 * with the GIL released; it uses no Python API).  NULL when out of memory. */
char *pyo_save_error(void)
{
	return strdup(ortmk_last_error());
}

/* Raises the class registered for st with msg; returns NULL. */
PyObject *pyo_raise(ortmk_status st, const char *msg)
{
	PyObject *cls = NULL, *exc;

	if (!msg || !*msg)
		msg = ortmk_status_name(st);
	if (g_errors && (Py_ssize_t)st < PyTuple_GET_SIZE(g_errors))
		cls = PyTuple_GET_ITEM(g_errors, (Py_ssize_t)st);
	if (!cls || cls == Py_None) {
		PyErr_Format(PyExc_RuntimeError, "%s: %s", ortmk_status_name(st), msg);
		return NULL;
	}
	/* A message may hold a path that is not UTF-8: never fail on it. */
	exc = PyObject_CallFunction(cls, "Nis", PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg),
								     "replace"),
				    (int)st, ortmk_status_name(st));
	if (exc) {
		PyErr_SetObject(cls, exc);
		Py_DECREF(exc);
	}
	return NULL;
}

PyObject *pyo_raise_last(ortmk_status st)
{
	return pyo_raise(st, ortmk_last_error());
}

/* Raises with a message saved by pyo_save_error and frees it. */
PyObject *pyo_raise_saved(ortmk_status st, char *msg)
{
	pyo_raise(st, msg);
	free(msg);
	return NULL;
}

/* ---- module functions ------------------------------------------------ */

static PyObject *mod_version(PyObject *m, PyObject *unused)
{
	(void)m;
	(void)unused;
	return PyUnicode_FromString(ortmk_version());
}

static PyObject *mod_api_version(PyObject *m, PyObject *unused)
{
	(void)m;
	(void)unused;
	return PyLong_FromLong(ortmk_api_version());
}

static PyObject *mod_available_providers(PyObject *m, PyObject *unused)
{
	const char *names[16];
	size_t n = ortmk_available_providers(names, 16);
	PyObject *list;

	(void)m;
	(void)unused;
	if (n > 16)
		n = 16;
	list = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *s = PyUnicode_FromString(names[i]);

		if (!s) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, s);
	}
	return list;
}

static PyObject *mod_status_name(PyObject *m, PyObject *arg)
{
	long st = PyLong_AsLong(arg);

	(void)m;
	if (st == -1 && PyErr_Occurred())
		return NULL;
	return PyUnicode_FromString(ortmk_status_name((ortmk_status)st));
}

/* set_log_severity(level): the severity of the environment when it is
 * created; returns False when it exists already (then it keeps its own). */
static PyObject *mod_set_log_severity(PyObject *m, PyObject *arg)
{
	long level = PyLong_AsLong(arg);

	(void)m;
	if (level == -1 && PyErr_Occurred())
		return NULL;
	if (level < 0 || level > 4)
		return pyo_raise(ORTMK_ERR_INVALID_ARGUMENT, "log severity must be 0..4");
	g_log_severity = (int)level;
	return PyBool_FromLong(g_env == NULL);
}

/* env_exists(): whether the environment has been created (tests). */
static PyObject *mod_env_exists(PyObject *m, PyObject *unused)
{
	(void)m;
	(void)unused;
	return PyBool_FromLong(g_env != NULL);
}

static PyObject *mod_set_error_classes(PyObject *m, PyObject *arg)
{
	(void)m;
	if (!PyTuple_Check(arg)) {
		PyErr_SetString(PyExc_TypeError, "_set_error_classes: a tuple");
		return NULL;
	}
	Py_INCREF(arg);
	Py_XSETREF(g_errors, arg);
	Py_RETURN_NONE;
}

/* _shutdown(): drops the module's reference (atexit); the environment is
 * destroyed now, or when the last object using it goes. */
static PyObject *mod_shutdown(PyObject *m, PyObject *unused)
{
	(void)m;
	(void)unused;
	Py_CLEAR(g_env);
	Py_RETURN_NONE;
}

static PyMethodDef mod_methods[] = {
	{"version", mod_version, METH_NOARGS, "ortmk_version()"},
	{"api_version", mod_api_version, METH_NOARGS, "ortmk_api_version()"},
	{"available_providers", mod_available_providers, METH_NOARGS,
	 "ortmk_available_providers(): ortmk's names"},
	{"status_name", mod_status_name, METH_O, "ortmk_status_name(status)"},
	{"set_log_severity", mod_set_log_severity, METH_O,
	 "severity (0..4) of the environment when it is created"},
	{"env_exists", mod_env_exists, METH_NOARGS, "whether the environment exists"},
	{"_set_error_classes", mod_set_error_classes, METH_O, "exception class per status"},
	{"_shutdown", mod_shutdown, METH_NOARGS, "drop the module's environment reference"},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod_def = {
	PyModuleDef_HEAD_INIT,
	.m_name = "ortmk._ortmk",
	.m_doc = "ortmk's C API for the ortmk package (use the package, not this).",
	.m_size = -1,
	.m_methods = mod_methods,
};

static int add_type(PyObject *m, PyTypeObject *t, const char *name)
{
	if (PyType_Ready(t) < 0)
		return -1;
	Py_INCREF(t);
	if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
		Py_DECREF(t);
		return -1;
	}
	return 0;
}

PyMODINIT_FUNC PyInit__ortmk(void)
{
	PyObject *m;

	import_array();
	m = PyModule_Create(&mod_def);
	if (!m)
		return NULL;
	if (add_type(m, &pyo_env_type, "Env") || add_type(m, &pyo_value_type, "Value") ||
	    add_type(m, &pyo_session_type, "Session") ||
	    add_type(m, &pyo_binding_type, "Binding") ||
	    add_type(m, &pyo_runopts_type, "RunOptions") ||
	    PyModule_AddIntConstant(m, "API_VERSION", ORTMK_API_VERSION) ||
	    PyModule_AddStringConstant(m, "HEADER_VERSION", ORTMK_VERSION_STRING)) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
