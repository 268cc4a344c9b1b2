/*
 * pyortmk.h: what the files of the _ortmk extension module share.  The
 * extension is the low layer of the Python package (python/ortmk/ holds the
 * ONNX Runtime-shaped classes): one process-wide environment (_ortmk.c),
 * values and their conversion to and from numpy (py_value.c), sessions and
 * runs (py_session.c), IO bindings (py_binding.c).
 *
 * Lifetimes: every object holding an ortmk handle holds a reference to the
 * environment object, so the environment is destroyed only after the last
 * session, value and binding (ortmk wants handles destroyed before their
 * environment).
 */
#ifndef PYORTMK_H
#define PYORTMK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL pyortmk_ARRAY_API
#ifndef PYORTMK_IMPORT_ARRAY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include <ortmk/ortmk.h>

/* The environment: one per process, created on first use. */
typedef struct {
	PyObject_HEAD
	ortmk_env *env;
} pyo_env;

/* One ortmk_value owned by Python: an output array's base, a value bound to
 * an IO binding, an OrtValue. */
typedef struct {
	PyObject_HEAD
	ortmk_value *v;
	pyo_env *env;
} pyo_value;

typedef struct {
	PyObject_HEAD
	ortmk_session *s;
	pyo_env *env;
} pyo_session;

/* A run's options (py_runopts.c). */
typedef struct {
	PyObject_HEAD
	ortmk_run_options *ro;
} pyo_runopts;

extern PyTypeObject pyo_env_type;
extern PyTypeObject pyo_runopts_type;
extern PyTypeObject pyo_value_type;
extern PyTypeObject pyo_session_type;
extern PyTypeObject pyo_binding_type;

/* _ortmk.c */
pyo_env *pyo_env_get(int log_severity);
PyObject *pyo_raise(ortmk_status st, const char *msg);
PyObject *pyo_raise_last(ortmk_status st);
PyObject *pyo_raise_saved(ortmk_status st, char *msg);
char *pyo_save_error(void);

/* py_value.c */
PyObject *pyo_value_wrap(pyo_env *env, ortmk_value *v);
PyObject *pyo_to_python(pyo_env *env, ortmk_value *v);
PyObject *pyo_to_numpy_copy(pyo_env *env, const ortmk_value *v);
int pyo_from_python(pyo_env *env, PyObject *obj, const char *name, ortmk_dtype seq_dtype,
		    ortmk_value **out, int *borrowed);
int pyo_dtype_from_numpy(char kind, npy_intp elsize, ortmk_dtype *out);
int pyo_numpy_type(ortmk_dtype t);
int pyo_dims(PyObject *shape, int64_t *dims, size_t *rank);
#define PYO_MAX_RANK 32

#endif
