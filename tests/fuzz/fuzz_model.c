/*
 * fuzz_model: the model loader through graph build, constant folding and
 * shape inference (core/loader*.c, graph*.c, shape*.c), as a session does
 * before partitioning, on the input as a serialized ModelProto, and the
 * wire-format walk graph_load makes first (loader_slim: its rewrite must
 * parse wherever the input did).  Reports how far inputs get
 * (ORTMK_FUZZ_STATS=1 prints per-stage counts at exit).
 */
#include <stdio.h>
#include <stdlib.h>

#include "graph.h"
#include "loader.h"

static unsigned long tried, loaded, inferred;

static void report(void)
{
	fprintf(stderr, "fuzz_model: %lu inputs, %lu loaded, %lu through shape inference\n",
		tried, loaded, inferred);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int registered;
	char err[512];
	graph_tinfo *t;
	graph *g = NULL;
	uint8_t *slim;
	size_t slim_n;
	int next_sym;

	if (!registered && getenv("ORTMK_FUZZ_STATS")) {
		atexit(report);
		registered = 1;
	}
	tried++;
	if (loader_slim(data, size, "model.onnx", &slim, &slim_n) > 0) {
		Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, slim_n, slim);
		Onnx__ModelProto *o = onnx__model_proto__unpack(NULL, size, data);

		/* the rewrite changes initializers only: it parses if the input did */
		if (o && !m)
			abort();
		onnx__model_proto__free_unpacked(m, NULL);
		onnx__model_proto__free_unpacked(o, NULL);
		free(slim);
	}
	if (graph_load_bytes(data, size, NULL, &g, err, sizeof(err)))
		return 0;
	loaded++;
	next_sym = -g->n_symbols - 1;
	t = calloc(g->n_values + 1, sizeof(*t));
	if (t) {
		shape_seed(g, t);
		if (shape_infer(g, t, 0, &next_sym, err, sizeof(err)) == 0) {
			inferred++;
			graph_fold_known(g, t);
		}
	}
	free(t);
	graph_free(g);
	return 0;
}
