/*
 * ort_run_maps: how ort-run shows an output that is a sequence of maps
 * (ai.onnx.ml ZipMap's, one map per row from class label to score): the
 * first maps on the text summary, and --output-dir's DIR/<name>.json, a
 * JSON array of objects as Python's json.dump writes a list of dicts (an
 * int64 key becomes its decimal string, as JSON keys are strings).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ort_run.h"

bool is_map_sequence(const ortmk_value *v)
{
	return ortmk_value_kind_of(v) == ORTMK_VALUE_SEQUENCE &&
	       ortmk_value_dtype(v) == ORTMK_UNDEFINED;
}

static void json_key(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(f, "\\%c", *c);
		else if (*c < 0x20)
			fprintf(f, "\\u%04x", *c);
		else
			fputc(*c, f);
	}
	fputc('"', f);
}

/* One map as a JSON object ("{}" for an element that is not a map). */
static void map_json(FILE *f, const ortmk_value *m)
{
	ortmk_map_info info = {.struct_size = sizeof(info)};
	const int64_t *ik;
	const float *vals;

	fputc('{', f);
	if (ortmk_value_map_info(m, &info) == ORTMK_OK && info.value_dtype == ORTMK_FLOAT) {
		ik = ortmk_value_map_int64_keys(m);
		vals = ortmk_value_map_values(m);
		for (size_t k = 0; k < info.count; k++) {
			char num[32];

			fputs(k ? ", " : "", f);
			if (ik)
				snprintf(num, sizeof num, "%" PRId64, ik[k]);
			json_key(f, ik ? num : ortmk_value_map_string_key(m, k));
			/* JSON has no NaN or infinity: null, as json.dump's strict mode wants. */
			if (isfinite(vals[k]))
				fprintf(f, ": %.9g", (double)vals[k]);
			else
				fputs(": null", f);
		}
	}
	fputc('}', f);
}

/* Maps [0, limit) of v to f, ", " between them; false when one cannot be
 * taken out of the sequence. */
static bool maps_json(FILE *f, const ortmk_value *v, size_t limit)
{
	size_t n = ortmk_value_sequence_length(v);

	for (size_t i = 0; i < n && i < limit; i++) {
		ortmk_value *m = NULL;

		if (ortmk_value_sequence_get(v, i, &m))
			return false;
		fputs(i ? ", " : "", f);
		map_json(f, m);
		ortmk_value_destroy(m);
	}
	return true;
}

void print_map_sequence(const char *name, const ortmk_value *v)
{
	size_t n = ortmk_value_sequence_length(v);

	printf("output %s: sequence of %zu map%s = [", name, n, n == 1 ? "" : "s");
	maps_json(stdout, v, 2);
	printf("%s]\n", n > 2 ? ", ..." : "");
}

bool write_map_sequence(const char *path, const ortmk_value *v)
{
	FILE *f = fopen(path, "w");
	bool ok;

	if (!f) {
		fail("cannot write %s: %s", path, strerror(errno));
		return false;
	}
	fputc('[', f);
	ok = maps_json(f, v, SIZE_MAX);
	fputs("]\n", f);
	if (fclose(f) || !ok) {
		fail("cannot write %s: %s", path, ok ? strerror(errno) : ortmk_last_error());
		return false;
	}
	return true;
}
