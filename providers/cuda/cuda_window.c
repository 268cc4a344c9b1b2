/*
 * cuda_window: the shared window geometry as the kernels' cuk_window (see
 * cuda_window.h).
 */
#include "cuda_window.h"

int cu_window_geometry(dk_ctx *c, const dk_val *x, const int64_t *kern, cuk_window *w, int *nsp)
{
	dk_window g;
	char err[128];
	int rc = dk_window_geometry(c->node->proto, x->rank, x->dims, kern, &g, nsp, err,
				    sizeof(err));

	if (rc)
		return dk_fail(c, rc, "%s", err);
	cu_window_of(&g, w);
	return 0;
}

void cu_window_of(const dk_window *g, cuk_window *w)
{
	for (int j = 0; j < 3; j++) {
		w->in[j] = g->in[j];
		w->out[j] = g->out[j];
		w->k[j] = g->k[j];
		w->s[j] = g->s[j];
		w->d[j] = g->d[j];
		w->pb[j] = g->pb[j];
		w->pe[j] = g->pe[j];
	}
}
