/*
 * binding: the IO binding object of the public API (docs/DEVICE.md).  It
 * remembers, per graph input, the value bound to it (borrowed) and, per
 * bound output, where the output goes: into a caller's value, or into a new
 * value on a device (or the host) each run.  ortmk_session_run_binding()
 * hands that to core_session_run_outs() (run.c, run_device.c).  The outputs
 * of a run stay owned by the binding until the next run has finished, so
 * they can be bound as that run's inputs without a copy.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

typedef struct bind_out {
	char *name;
	core_out spec;            /* mode, v, value, dev */
	ortmk_value *cur;         /* the value of the last run */
	int owned;                /* cur is the binding's to destroy */
} bind_out;

struct ortmk_io_binding {
	ortmk_session *s;
	const ortmk_value **in;   /* per graph input */
	bind_out *outs;
	size_t n_outs;
	ortmk_stream *stream;
};

ortmk_status ortmk_io_binding_create(ortmk_session *s, ortmk_io_binding **out)
{
	ortmk_io_binding *b;

	core_clear_error();
	if (!s || !out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "io_binding_create: NULL argument");
	b = calloc(1, sizeof(*b));
	if (b)
		b->in = calloc(s->g->n_inputs + 1, sizeof(*b->in));
	if (!b || !b->in) {
		free(b);
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	}
	b->s = s;
	*out = b;
	return ORTMK_OK;
}

static void drop_value(bind_out *o)
{
	if (o->owned)
		ortmk_value_destroy(o->cur);
	o->cur = NULL;
	o->owned = 0;
}

void ortmk_io_binding_clear_outputs(ortmk_io_binding *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n_outs; i++) {
		drop_value(&b->outs[i]);
		free(b->outs[i].name);
	}
	free(b->outs);
	b->outs = NULL;
	b->n_outs = 0;
}

void ortmk_io_binding_clear_inputs(ortmk_io_binding *b)
{
	if (b)
		memset(b->in, 0, b->s->g->n_inputs * sizeof(*b->in));
}

void ortmk_io_binding_destroy(ortmk_io_binding *b)
{
	if (!b)
		return;
	ortmk_io_binding_clear_outputs(b);
	free(b->in);
	free(b);
}

ortmk_status ortmk_io_binding_bind_input(ortmk_io_binding *b, const char *name,
					 const ortmk_value *v)
{
	const graph *g;

	core_clear_error();
	if (!b || !name || !v)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "bind_input: NULL argument");
	if (v->env != b->s->env)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "bind_input: the value belongs to another environment");
	g = b->s->g;
	for (size_t i = 0; i < g->n_inputs; i++) {
		if (strcmp(g->values[g->inputs[i]].name, name) == 0) {
			ortmk_status st = core_check_input(b->s, i, v);

			if (st == ORTMK_OK)
				b->in[i] = v;
			return st;
		}
	}
	return core_fail(ORTMK_ERR_INPUT, "bind_input: '%s' is not an input of the model", name);
}

/* The entry for output `name`, added if new; NULL with the error set. */
static bind_out *out_slot(ortmk_io_binding *b, const char *name)
{
	int v = name ? graph_find_value(b->s->g, name) : -1;
	bind_out *n;

	if (v < 0 || !b->s->g->values[v].is_graph_output) {
		core_fail(ORTMK_ERR_INPUT, "bind_output: '%s' is not an output of the model",
			  name ? name : "(null)");
		return NULL;
	}
	for (size_t i = 0; i < b->n_outs; i++) {
		if (b->outs[i].spec.v == v) {
			drop_value(&b->outs[i]);
			return &b->outs[i];
		}
	}
	n = realloc(b->outs, (b->n_outs + 1) * sizeof(*n));
	if (!n) {
		core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
		return NULL;
	}
	b->outs = n;
	n = &b->outs[b->n_outs];
	memset(n, 0, sizeof(*n));
	n->name = strdup(name);
	if (!n->name) {
		core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
		return NULL;
	}
	n->spec.v = v;
	b->n_outs++;
	return n;
}

ortmk_status ortmk_io_binding_bind_output(ortmk_io_binding *b, const char *name, ortmk_value *v)
{
	bind_out *o;

	core_clear_error();
	if (!b || !v)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "bind_output: NULL argument");
	if (v->env != b->s->env)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "bind_output: the value belongs to another environment");
	o = out_slot(b, name);
	if (!o)
		return ORTMK_ERR_INPUT;
	o->spec.mode = CORE_OUT_VALUE;
	o->spec.value = v;
	o->spec.dev = NULL;
	return ORTMK_OK;
}

ortmk_status ortmk_io_binding_bind_output_to_device(ortmk_io_binding *b, const char *name,
						    const char *provider)
{
	core_ep *ep = NULL;
	bind_out *o;
	ortmk_status st;

	core_clear_error();
	if (!b || !provider)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "bind_output_to_device: NULL argument");
	if (strcmp(provider, "host") != 0) {
		st = core_env_get_ep(b->s->env, provider, &ep);
		if (st)
			return st;
	}
	o = out_slot(b, name);
	if (!o)
		return ortmk_last_error()[0] ? ORTMK_ERR_INPUT : ORTMK_ERR_NO_MEMORY;
	o->spec.mode = CORE_OUT_DEVICE;
	o->spec.value = NULL;
	o->spec.dev = ep;
	return ORTMK_OK;
}

ortmk_status ortmk_io_binding_set_stream(ortmk_io_binding *b, ortmk_stream *st)
{
	core_clear_error();
	if (!b)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "set_stream: NULL binding");
	if (st && st->env != b->s->env)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "set_stream: the stream belongs to another environment");
	b->stream = st;
	return ORTMK_OK;
}

static ortmk_status wait_value(ortmk_value *v, int timeout_ms)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX :
		shm_now_ns() + (uint64_t)timeout_ms * 1000000u;

	return v && v->pend.slot >= 0 ? core_dev_pend_wait(v->env, &v->pend, deadline) : ORTMK_OK;
}

ortmk_status ortmk_io_binding_synchronize_inputs(ortmk_io_binding *b, int timeout_ms)
{
	core_clear_error();
	if (!b)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "synchronize_inputs: NULL binding");
	for (size_t i = 0; i < b->s->g->n_inputs; i++) {
		ortmk_status st = wait_value((ortmk_value *)b->in[i], timeout_ms);

		if (st)
			return st;
	}
	return ORTMK_OK;
}

ortmk_status ortmk_io_binding_synchronize_outputs(ortmk_io_binding *b, int timeout_ms)
{
	core_clear_error();
	if (!b)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "synchronize_outputs: NULL binding");
	for (size_t i = 0; i < b->n_outs; i++) {
		ortmk_status st = wait_value(b->outs[i].cur, timeout_ms);

		if (st)
			return st;
	}
	/* Runs are synchronous; what can still be running is the binding's
	 * stream (copies the application enqueued after the run). */
	return b->stream ? ortmk_stream_synchronize(b->stream, timeout_ms) : ORTMK_OK;
}

ortmk_status ortmk_session_run_binding(ortmk_session *s, ortmk_io_binding *b)
{
	core_out *specs;
	ortmk_status st;

	core_clear_error();
	if (!s || !b || b->s != s)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "run_binding: NULL argument or a binding of another session");
	for (size_t i = 0; i < s->g->n_inputs; i++)
		if (!b->in[i])
			return core_fail(ORTMK_ERR_INPUT, "input '%s' is not bound",
					 s->g->values[s->g->inputs[i]].name);
	/* A value both read and written by one run would be overwritten
	 * while the kernels still read it. */
	for (size_t i = 0; i < b->n_outs; i++)
		for (size_t k = 0; b->outs[i].spec.mode == CORE_OUT_VALUE && k < s->g->n_inputs; k++)
			if (b->in[k] == b->outs[i].spec.value)
				return core_fail(ORTMK_ERR_INPUT, "one value is bound as input '%s' and output '%s' of one run",
						 s->g->values[s->g->inputs[k]].name, b->outs[i].name);
	specs = calloc(b->n_outs + 1, sizeof(*specs));
	if (!specs)
		return core_fail(ORTMK_ERR_NO_MEMORY, "out of memory");
	for (size_t i = 0; i < b->n_outs; i++)
		specs[i] = b->outs[i].spec;
	st = core_session_run_outs(s, NULL, b->in, specs, b->n_outs, b->stream);
	/* The previous outputs may have been this run's inputs: only now may
	 * they go. */
	for (size_t i = 0; i < b->n_outs && st == ORTMK_OK; i++) {
		bind_out *o = &b->outs[i];

		drop_value(o);
		o->cur = specs[i].result;
		o->owned = specs[i].result != specs[i].value;
	}
	free(specs);
	return st;
}

size_t ortmk_io_binding_output_count(const ortmk_io_binding *b)
{
	return b ? b->n_outs : 0;
}

const char *ortmk_io_binding_output_name(const ortmk_io_binding *b, size_t i)
{
	return b && i < b->n_outs ? b->outs[i].name : NULL;
}

static bind_out *find_out(const ortmk_io_binding *b, const char *name)
{
	for (size_t i = 0; b && name && i < b->n_outs; i++)
		if (strcmp(b->outs[i].name, name) == 0)
			return &b->outs[i];
	return NULL;
}

ortmk_value *ortmk_io_binding_output(const ortmk_io_binding *b, const char *name)
{
	bind_out *o = find_out(b, name);

	return o ? o->cur : NULL;
}

ortmk_status ortmk_io_binding_take_output(ortmk_io_binding *b, const char *name, ortmk_value **out)
{
	bind_out *o = find_out(b, name);

	core_clear_error();
	if (!out)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "take_output: NULL out");
	*out = NULL;
	if (!o || !o->cur)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "take_output: no value for output '%s'",
				 name ? name : "(null)");
	if (!o->owned)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
				 "take_output: output '%s' is written into the caller's own value", name);
	*out = o->cur;
	o->cur = NULL;
	o->owned = 0;
	return ORTMK_OK;
}
