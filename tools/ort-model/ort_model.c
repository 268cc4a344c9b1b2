/*
 * ort-model: inspect and rewrite ONNX models for ortmk.
 *
 *   ort-model info MODEL
 *   ort-model externalize MODEL OUT [--align N] [--threshold BYTES] [--data NAME]
 *
 * `info` prints opsets, inputs and outputs, node counts by op, and where the
 * initializers live (inline bytes, external bytes per file and how their
 * offsets are aligned), checking every external reference as a session
 * would.  `externalize` (ort_model_ext.c) rewrites a model so that every
 * external tensor starts on an --align boundary in one data file beside
 * OUT: providers then map each weight in place.  docs/WEIGHTS.md describes
 * both.
 *
 * Every error is one line "ort-model: <message>" on stderr and exit status
 * 1; a bad command line exits 2.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ort_model.h"

static void usage(FILE *f)
{
	fputs(
"usage: ort-model info MODEL\n"
"       ort-model externalize MODEL OUT [--align N] [--threshold BYTES] [--data NAME]\n"
"\n"
"externalize writes OUT and one data file beside it (default: OUT's name\n"
"+ \".data\") holding every external tensor, each at a multiple of --align:\n"
"  --align N          power of two, default 4096 (65536 for 64 KiB pages)\n"
"  --threshold BYTES  inline initializers of at least BYTES move out\n"
"                     (default 1024); smaller ones stay inline\n"
"  --data NAME        name of the data file (a file name, no directory)\n"
"Tensors that are already external are copied into the new file.\n", f);
}

static int die_usage(const char *msg, const char *arg)
{
	fprintf(stderr, "ort-model: %s%s%s (ort-model --help for usage)\n", msg, arg ? ": " : "",
		arg ? arg : "");
	return 2;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || *end ? -1 : 0;
}

/* ---- info -------------------------------------------------------------- */

static void print_type(const Onnx__TypeProto *tp)
{
	const Onnx__TensorShapeProto *s;
	const Onnx__TensorShapeProto__Dimension *d;
	size_t i;

	if (!tp) {
		fputs("?", stdout);
		return;
	}
	switch (tp->value_case) {
	case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
		break;
	case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
		fputs("sequence", stdout);
		return;
	case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
		fputs("map", stdout);
		return;
	default:
		fputs("(non-tensor type)", stdout);
		return;
	}
	fputs(om_dtype_name(tp->tensor_type->elem_type), stdout);
	s = tp->tensor_type->shape;
	if (!s) {
		fputs(" (unknown rank)", stdout);
		return;
	}
	fputs(" [", stdout);
	for (i = 0; i < s->n_dim; i++) {
		d = s->dim[i];
		fputs(i ? "," : "", stdout);
		if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
			printf("%" PRId64, d->dim_value);
		else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param)
			fputs(d->dim_param, stdout);
		else
			fputs("?", stdout);
	}
	fputs("]", stdout);
}

static void print_values(const char *label, Onnx__ValueInfoProto **v, size_t n)
{
	size_t i;

	printf("%-13s%zu\n", label, n);
	for (i = 0; i < n; i++) {
		printf("  %s: ", v[i]->name ? v[i]->name : "");
		print_type(v[i]->type);
		fputs("\n", stdout);
	}
}

typedef struct op_count {
	char *op;
	size_t n;
} op_count;

static int cmp_count(const void *a, const void *b)
{
	const op_count *x = a, *y = b;

	if (x->n != y->n)
		return x->n < y->n ? 1 : -1;
	return strcmp(x->op, y->op);
}

/* "nodes 16: MatMul 16", most frequent op first; other domains prefixed. */
static int print_nodes(const Onnx__GraphProto *g)
{
	op_count *v = calloc(g->n_node ? g->n_node : 1, sizeof(*v));
	const Onnx__NodeProto *np;
	size_t i, j, n = 0;
	char *key;

	if (!v)
		return -ENOMEM;
	for (i = 0; i < g->n_node; i++) {
		np = g->node[i];
		if (asprintf(&key, "%s%s%s", np->domain && *np->domain ? np->domain : "",
			     np->domain && *np->domain ? ":" : "", np->op_type ? np->op_type : "?") < 0)
			break;
		for (j = 0; j < n && strcmp(v[j].op, key); j++)
			;
		if (j < n)
			free(key);
		else
			v[n++].op = key;
		v[j].n++;
	}
	qsort(v, n, sizeof(*v), cmp_count);
	printf("%-13s%zu", "nodes", g->n_node);
	for (j = 0; j < n; j++) {
		printf("%s%s %zu", j ? ", " : ": ", v[j].op, v[j].n);
		free(v[j].op);
	}
	fputs("\n", stdout);
	free(v);
	return i < g->n_node ? -ENOMEM : 0;
}

typedef struct info_ctx {
	om_model *m;
	om_files files;
	uint64_t count[2][2], bytes[2][2];   /* [initializer?][external?] */
	char *err;
	size_t errlen;
} info_ctx;

static int info_tensor(void *ctx, Onnx__TensorProto *t, const char *kind, int main_init)
{
	info_ctx *c = ctx;
	int init = strcmp(kind, "initializer") == 0, ext = om_is_external(t);
	uint64_t want = 0;
	om_ext e;
	int rc;

	(void)main_init;
	if (ext) {
		rc = om_ext_check(c->m, &c->files, t, kind, &e, c->err, c->errlen);
		if (rc < 0)
			return rc;
		want = e.length;
	} else if (om_tensor_want(t, kind, &want, NULL, 0) < 0) {
		want = 0;   /* strings: no fixed size to report */
	}
	c->count[init][ext]++;
	c->bytes[init][ext] += want;
	return 0;
}

static void print_placement(const char *label, const uint64_t count[2], const uint64_t bytes[2])
{
	printf("%-13s%" PRIu64 ": inline %" PRIu64 " (%" PRIu64 " bytes), external %" PRIu64 " (%" PRIu64 " bytes)\n",
	       label, count[0] + count[1], count[0], bytes[0], count[1], bytes[1]);
}

static int cmd_info(const char *path)
{
	info_ctx c = {0};
	char err[OM_ERRLEN];
	om_model m;
	const Onnx__ModelProto *p;
	const om_file *f;
	size_t i;
	int rc;

	if (om_model_load(path, &m, err, sizeof(err)) < 0)
		return fprintf(stderr, "ort-model: %s\n", err), 1;
	c.m = &m, c.err = err, c.errlen = sizeof(err);
	rc = om_walk_tensors(m.proto, info_tensor, &c, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "ort-model: %s: %s\n", path, err);
		goto out;
	}
	p = m.proto;
	printf("%-13s%s (ir_version %" PRId64 "%s%s%s%s)\n", "model", path, p->ir_version,
	       p->producer_name && *p->producer_name ? ", producer " : "",
	       p->producer_name ? p->producer_name : "",
	       p->producer_version && *p->producer_version ? " " : "",
	       p->producer_version ? p->producer_version : "");
	printf("%-13s", "opsets");
	for (i = 0; i < p->n_opset_import; i++)
		printf("%s%s %" PRId64, i ? ", " : "",
		       p->opset_import[i]->domain && *p->opset_import[i]->domain ? p->opset_import[i]->domain : "ai.onnx",
		       p->opset_import[i]->version);
	fputs(p->n_opset_import ? "\n" : "(none)\n", stdout);
	print_values("inputs", p->graph->input, p->graph->n_input);
	print_values("outputs", p->graph->output, p->graph->n_output);
	rc = print_nodes(p->graph);
	if (rc < 0) {
		fprintf(stderr, "ort-model: out of memory\n");
		goto out;
	}
	print_placement("initializers", c.count[1], c.bytes[1]);
	if (c.count[0][0] + c.count[0][1])
		print_placement("attr tensors", c.count[0], c.bytes[0]);
	for (i = 0; i < c.files.n; i++) {
		f = &c.files.v[i];
		printf("  file %s: %" PRIu64 " tensors, %" PRIu64 " of its %" PRIu64 " bytes, ",
		       f->location, f->tensors, f->bytes, f->size);
		if (!f->align)
			fputs("every offset 0\n", stdout);
		else if (f->align >= 4096)
			printf("offsets aligned to %" PRIu64 "\n", f->align > 65536 ? 65536 : f->align);
		else
			printf("offsets aligned to only %" PRIu64 " (not page aligned: ort-model externalize fixes that)\n",
			       f->align);
	}
out:
	om_files_close(&c.files);
	om_model_free(&m);
	return rc < 0 ? 1 : 0;
}

/* ---- externalize ------------------------------------------------------- */

static int cmd_externalize(int argc, char **argv)
{
	om_ext_opts o = {.align = 4096, .threshold = 1024};
	const char *pos[2] = {NULL, NULL};
	char err[OM_ERRLEN];
	om_ext_stats st;
	int i, n = 0;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--align") == 0 || strcmp(a, "--threshold") == 0 || strcmp(a, "--data") == 0) {
			if (!v)
				return die_usage("missing value after", a);
			i++;
			if (strcmp(a, "--data") == 0)
				o.data_name = v;
			else if (strcmp(a, "--threshold") == 0 && parse_u64(v, &o.threshold) < 0)
				return die_usage("--threshold needs a number of bytes", v);
			else if (strcmp(a, "--align") == 0 && (parse_u64(v, &o.align) < 0 || o.align == 0 ||
							       (o.align & (o.align - 1)) || o.align > (1u << 30)))
				return die_usage("--align needs a power of two up to 1073741824", v);
		} else if (a[0] == '-' && a[1]) {
			return die_usage("unknown option", a);
		} else if (n < 2) {
			pos[n++] = a;
		} else {
			return die_usage("unexpected argument", a);
		}
	}
	if (n < 2)
		return die_usage("externalize needs MODEL and OUT", NULL);
	if (om_externalize(pos[0], pos[1], &o, &st, err, sizeof(err)) < 0)
		return fprintf(stderr, "ort-model: %s\n", err), 1;
	if (st.data_name[0])
		printf("wrote %s and %s (%" PRIu64 " bytes, offsets aligned to %" PRIu64 "): %" PRIu64
		       " tensors moved out of the model (%" PRIu64 " bytes), %" PRIu64 " external tensors copied (%" PRIu64 " bytes)\n",
		       pos[1], st.data_name, st.data_size, o.align, st.converted, st.converted_bytes,
		       st.copied, st.copied_bytes);
	else
		printf("wrote %s: no tensor of at least %" PRIu64 " bytes, no data file\n", pos[1], o.threshold);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return die_usage("missing command", NULL);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "info") == 0) {
		if (argc != 3)
			return die_usage("info needs exactly one MODEL", NULL);
		return cmd_info(argv[2]);
	}
	if (strcmp(argv[1], "externalize") == 0)
		return cmd_externalize(argc - 2, argv + 2);
	return die_usage("unknown command", argv[1]);
}
