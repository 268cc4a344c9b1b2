/*
 * ort-run --bind DEVICE: timed runs through an IO binding (see
 * ort_run_bind.h and docs/DEVICE.md).  The comparison with the default
 * (unbound) runs of the same model is the point: `ort-run M --provider
 * vulkan --iters 100` against `... --bind vulkan`.
 */
#include "ort_run_bind.h"
#include "sysio.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static bool failed(char *err, size_t n, const char *what)
{
	snprintf(err, n, "%s: %s", what, ortmk_last_error());
	return false;
}

/* Copies of the inputs in DEVICE's memory. */
static bool to_device(ortmk_env *env, const char *device, ortmk_value **ins, size_t nin,
		      ortmk_value **dev, char *err, size_t n)
{
	for (size_t i = 0; i < nin; i++) {
		if (ortmk_value_kind_of(ins[i]) != ORTMK_VALUE_TENSOR ||
		    ortmk_value_dtype(ins[i]) == ORTMK_STRING) {
			dev[i] = NULL;          /* stays on the host */
			continue;
		}
		if (ortmk_value_create_on(env, device, ortmk_value_dtype(ins[i]), ortmk_value_dims(ins[i]),
					  ortmk_value_rank(ins[i]), &dev[i]))
			return failed(err, n, "cannot allocate an input on the device");
		if (ortmk_copy_tensors(env, (const ortmk_value *const *)&ins[i], &dev[i], 1, NULL))
			return failed(err, n, "cannot copy an input to the device");
	}
	return true;
}

/* Host copies of the bound outputs. */
static bool to_host(ortmk_env *env, ortmk_io_binding *b, const char **onames, ortmk_value **outs,
		    size_t nout, char *err, size_t n)
{
	for (size_t i = 0; i < nout; i++) {
		ortmk_value *v = ortmk_io_binding_output(b, onames[i]);

		if (!v)
			return snprintf(err, n, "output '%s' missing", onames[i]), false;
		if (ortmk_value_data(v)) {
			if (ortmk_io_binding_take_output(b, onames[i], &outs[i]))
				return failed(err, n, "take_output");
			continue;
		}
		if (ortmk_value_create(env, ortmk_value_dtype(v), ortmk_value_dims(v), ortmk_value_rank(v),
				       &outs[i]) ||
		    ortmk_copy_tensors(env, (const ortmk_value *const *)&v, &outs[i], 1, NULL))
			return failed(err, n, "cannot copy an output to the host");
	}
	return true;
}

bool ort_run_bound(ortmk_env *env, ortmk_session *s, const char *device, long warmup, long iters,
		   const char **inames, ortmk_value **ins, size_t nin, const char **onames,
		   ortmk_value **outs, size_t nout, double *times, char *err, size_t errlen)
{
	ortmk_value **dev = calloc(nin + 1, sizeof(*dev));
	ortmk_io_binding *b = NULL;
	bool ok = dev && !ortmk_io_binding_create(s, &b);

	if (!ok)
		snprintf(err, errlen, "cannot create the binding: %s", ortmk_last_error());
	if (ok)
		ok = to_device(env, device, ins, nin, dev, err, errlen);
	for (size_t i = 0; ok && i < nin; i++)
		if (ortmk_io_binding_bind_input(b, inames[i], dev[i] ? dev[i] : ins[i]))
			ok = failed(err, errlen, "bind_input");
	for (size_t i = 0; ok && i < nout; i++)
		if (ortmk_io_binding_bind_output_to_device(b, onames[i], device))
			ok = failed(err, errlen, "bind_output_to_device");
	for (long r = 0; ok && r < warmup + iters; r++) {
		double t0 = sys_now_ms();

		if (ortmk_session_run_binding(s, b))
			ok = failed(err, errlen, "run failed");
		else if (r >= warmup)
			times[r - warmup] = sys_now_ms() - t0;
	}
	if (ok)
		ok = to_host(env, b, onames, outs, nout, err, errlen);
	ortmk_io_binding_destroy(b);
	for (size_t i = 0; dev && i < nin; i++)
		ortmk_value_destroy(dev[i]);
	free(dev);
	return ok;
}
