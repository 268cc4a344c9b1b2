/*
 * py_run.c: Session.run().  Feeds become shared-memory values (one copy of
 * each contiguous array, py_convert.c), the run waits for its providers with
 * the GIL released, and outputs come back as arrays over their own values
 * (zero copy).  Every name the C call reads stays referenced by a Python
 * object held here, since other threads run while the GIL is released.
 */
#include "pyortmk.h"

#include <stdlib.h>

typedef struct {
	PyObject *items;          /* the feeds' (name, value) pairs */
	PyObject *onames;         /* the requested output names, or NULL */
	size_t n_in, n_out;
	const char **in_names;
	const ortmk_value **in;
	int *borrowed;            /* in[i] is a Value's: not destroyed here */
	const char **out_names;
	ortmk_value **out;
} run_call;

static void run_free(run_call *r)
{
	for (size_t i = 0; r->in && i < r->n_in; i++)
		if (!r->borrowed[i])
			ortmk_value_destroy((ortmk_value *)r->in[i]);
	for (size_t i = 0; r->out && i < r->n_out; i++)
		ortmk_value_destroy(r->out[i]);
	PyMem_Free(r->in_names);
	PyMem_Free(r->in);
	PyMem_Free(r->borrowed);
	PyMem_Free(r->out_names);
	PyMem_Free(r->out);
	Py_XDECREF(r->items);
	Py_XDECREF(r->onames);
}

static int feeds_in(pyo_session *self, run_call *r, PyObject *feeds)
{
	r->items = PyDict_Items(feeds);
	if (!r->items)
		return -1;
	r->n_in = (size_t)PyList_GET_SIZE(r->items);
	r->in_names = PyMem_Calloc(r->n_in + 1, sizeof(*r->in_names));
	r->in = PyMem_Calloc(r->n_in + 1, sizeof(*r->in));
	r->borrowed = PyMem_Calloc(r->n_in + 1, sizeof(*r->borrowed));
	if (!r->in_names || !r->in || !r->borrowed) {
		PyErr_NoMemory();
		return -1;
	}
	for (size_t i = 0; i < r->n_in; i++) {
		PyObject *kv = PyList_GET_ITEM(r->items, (Py_ssize_t)i);
		PyObject *key = PyTuple_GET_ITEM(kv, 0);
		ortmk_value *v;

		if (!PyUnicode_Check(key)) {
			PyErr_SetString(PyExc_TypeError, "input names must be str");
			return -1;
		}
		r->in_names[i] = PyUnicode_AsUTF8(key);
		if (!r->in_names[i] ||
		    pyo_from_python(self->env, PyTuple_GET_ITEM(kv, 1), r->in_names[i],
				    ORTMK_UNDEFINED, &v, &r->borrowed[i]))
			return -1;
		r->in[i] = v;
	}
	return 0;
}

/* onames None: every output of the model, in its order. */
static int names_out(pyo_session *self, run_call *r, PyObject *onames)
{
	if (onames == Py_None) {
		r->n_out = ortmk_session_output_count(self->s);
	} else {
		r->onames = PySequence_Fast(onames, "output_names: a list of str or None");
		if (!r->onames)
			return -1;
		r->n_out = (size_t)PySequence_Fast_GET_SIZE(r->onames);
	}
	r->out_names = PyMem_Calloc(r->n_out + 1, sizeof(*r->out_names));
	r->out = PyMem_Calloc(r->n_out + 1, sizeof(*r->out));
	if (!r->out_names || !r->out) {
		PyErr_NoMemory();
		return -1;
	}
	for (size_t i = 0; i < r->n_out; i++) {
		ortmk_status st;

		if (r->onames) {
			r->out_names[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(r->onames, (Py_ssize_t)i));
			if (!r->out_names[i])
				return -1;
		} else if ((st = ortmk_session_output_info(self->s, i, &r->out_names[i], NULL, NULL,
							   NULL))) {
			pyo_raise_last(st);
			return -1;
		}
	}
	return 0;
}

/* The outputs as Python objects; each value goes to its object. */
static PyObject *outputs_list(pyo_session *self, run_call *r)
{
	PyObject *list = PyList_New((Py_ssize_t)r->n_out);

	for (size_t i = 0; i < r->n_out; i++) {
		ortmk_value *v = r->out[i];
		PyObject *o;

		r->out[i] = NULL;
		o = list ? pyo_to_python(self->env, v) : NULL;
		if (!o) {
			if (list)
				Py_CLEAR(list);
			else
				ortmk_value_destroy(v);
			continue;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, o);
	}
	return list;
}

/* run(output_names or None, feeds, run_options=None) -> list */
PyObject *pyo_session_run(pyo_session *self, PyObject *args)
{
	PyObject *onames, *feeds, *res = NULL, *ropts = Py_None;
	ortmk_run_options *ro = NULL;
	run_call r = {0};
	ortmk_status st;
	char *msg = NULL;

	if (!PyArg_ParseTuple(args, "OO!|O:run", &onames, &PyDict_Type, &feeds, &ropts))
		return NULL;
	if (ropts != Py_None) {
		if (!PyObject_TypeCheck(ropts, &pyo_runopts_type)) {
			PyErr_SetString(PyExc_TypeError, "run: run options must be _ortmk.RunOptions");
			return NULL;
		}
		ro = ((pyo_runopts *)ropts)->ro;
	}
	if (!self->s) {
		PyErr_SetString(PyExc_RuntimeError, "Session: not created");
		return NULL;
	}
	if (feeds_in(self, &r, feeds) || names_out(self, &r, onames))
		goto out;
	Py_BEGIN_ALLOW_THREADS
	st = ortmk_session_run_with_options(self->s, ro, r.in_names, r.in, r.n_in, r.out_names,
					    r.n_out, r.out);
	if (st)
		msg = pyo_save_error();
	Py_END_ALLOW_THREADS
	if (st)
		pyo_raise_saved(st, msg);
	else
		res = outputs_list(self, &r);
out:
	run_free(&r);
	return res;
}
