/*
 * strnorm: ONNX StringNormalizer.  Drops the stopwords (compared exactly,
 * or case-insensitively unless is_case_sensitive) and then changes case
 * (case_change_action NONE, LOWER or UPPER) of a [C] or [1, C] string
 * tensor; when every string goes, the output holds one empty string.
 *
 * Case mapping is done here, not by the C library, so it never depends on
 * an installed locale (the `locale` attribute is accepted and ignored): the
 * strings are UTF-8 and the letters of ASCII and Latin-1 (U+00C0..U+00FE,
 * less the multiplication and division signs) change case; every other
 * byte sequence is kept as is.
 */
#include <stdio.h>
#include <string.h>

#include "seq_ops.h"

enum { CASE_NONE, CASE_LOWER, CASE_UPPER };

/* Maps one code point. */
static unsigned map_cp(unsigned c, int mode)
{
	if (mode == CASE_LOWER) {
		if ((c >= 'A' && c <= 'Z') || (c >= 0xC0 && c <= 0xDE && c != 0xD7))
			return c + 32;
	} else if (mode == CASE_UPPER) {
		if ((c >= 'a' && c <= 'z') || (c >= 0xE0 && c <= 0xFE && c != 0xF7))
			return c - 32;
	}
	return c;
}

/* Writes s with its case changed into out (room for 2 * len + 1: a mapped
 * letter keeps its UTF-8 length, so len + 1 is enough); returns the length. */
static size_t map_case(const char *s, size_t len, int mode, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < len;) {
		unsigned char b = (unsigned char)s[i];

		if (b < 0x80) {
			out[o++] = (char)map_cp(b, mode);
			i++;
		} else if ((b == 0xC3) && i + 1 < len && ((unsigned char)s[i + 1] & 0xC0) == 0x80) {
			unsigned c = map_cp(0xC0 | ((unsigned char)s[i + 1] & 0x3F), mode);

			out[o++] = (char)(0xC0 | (c >> 6));
			out[o++] = (char)(0x80 | (c & 0x3F));
			i += 2;
		} else {
			out[o++] = s[i++];
		}
	}
	out[o] = 0;
	return o;
}

static int parse_mode(const Onnx__NodeProto *p, int *mode)
{
	char s[16];

	if (!cpu_attr_str(p, "case_change_action", s, sizeof(s)))
		snprintf(s, sizeof(s), "NONE");
	*mode = strcmp(s, "LOWER") == 0 ? CASE_LOWER : strcmp(s, "UPPER") == 0 ? CASE_UPPER :
		strcmp(s, "NONE") == 0 ? CASE_NONE : -1;
	return *mode >= 0;
}

static int strnorm_supports(const Onnx__NodeProto *p, int64_t opset, const int32_t *dt,
			    int n_in, char *why, size_t n)
{
	int mode;

	(void)opset;
	if (!parse_mode(p, &mode)) {
		snprintf(why, n, "case_change_action must be NONE, LOWER or UPPER");
		return 0;
	}
	return cpu_supports_dtype(dt, n_in, 0, CPU_BIT(CPU_STRING), why, n);
}

/* 1 when s is a stopword. */
static int is_stopword(const Onnx__NodeProto *p, const char *s, int sensitive, char *a, char *b)
{
	const Onnx__AttributeProto *sw = cpu_attr(p, "stopwords");
	size_t len = strlen(s);

	if (!sensitive)
		map_case(s, len, CASE_LOWER, a);
	for (size_t i = 0; sw && i < sw->n_strings; i++) {
		const ProtobufCBinaryData *w = &sw->strings[i];

		if (sensitive) {
			if (w->len == len && memcmp(w->data, s, len) == 0)
				return 1;
		} else if (w->len == len) {
			map_case((const char *)w->data, w->len, CASE_LOWER, b);
			if (memcmp(a, b, len) == 0)
				return 1;
		}
	}
	return 0;
}

static void max_len(const cpu_tensor *X, const Onnx__NodeProto *p, size_t *m)
{
	const Onnx__AttributeProto *sw = cpu_attr(p, "stopwords");

	*m = 0;
	for (int64_t i = 0; i < cpu_numel(X); i++) {
		size_t l = strlen(((const char *const *)X->data)[i]);

		*m = l > *m ? l : *m;
	}
	for (size_t i = 0; sw && i < sw->n_strings; i++)
		*m = sw->strings[i].len > *m ? sw->strings[i].len : *m;
}

static int strnorm_compute(cpu_ctx *ctx)
{
	const Onnx__NodeProto *p = ctx->node->proto;
	const cpu_tensor *X = cpu_input(ctx, 0);
	int sensitive = cpu_attr_int(p, "is_case_sensitive", 0) != 0, mode;
	int64_t n, kept = 0, dims[2];
	const char **keep;
	char *a, *b;
	size_t m;
	cpu_tensor *Y;

	if (!X || X->dtype != CPU_STRING || X->rank < 1 || X->rank > 2 ||
	    (X->rank == 2 && X->dims[0] != 1))
		return cpu_fail(ctx, CPU_E_INVALID, "input must be a string tensor [C] or [1, C]");
	if (!parse_mode(p, &mode))
		return cpu_fail(ctx, CPU_E_INVALID, "bad case_change_action");
	n = cpu_numel(X);
	max_len(X, p, &m);
	keep = cpu_scratch(ctx, sizeof(*keep) * (size_t)(n + 1));
	a = cpu_scratch(ctx, 2 * m + 2);
	b = cpu_scratch(ctx, 2 * m + 2);
	if (!keep || !a || !b)
		return CPU_E_NOMEM;
	for (int64_t i = 0; i < n; i++) {
		const char *s = ((const char *const *)X->data)[i];
		size_t len;

		if (is_stopword(p, s, sensitive, a, b))
			continue;
		len = map_case(s, strlen(s), mode, a);
		if (!(keep[kept++] = cpu_string_new(ctx, a, len)))
			return CPU_E_NOMEM;
	}
	if (kept == 0 && !(keep[kept++] = cpu_string_new(ctx, "", 0)))
		return CPU_E_NOMEM;
	dims[0] = 1;
	dims[X->rank - 1] = kept;
	if (!(Y = cpu_output(ctx, 0, CPU_STRING, X->rank, dims)))
		return CPU_E_NOMEM;
	memcpy(Y->data, keep, sizeof(*keep) * (size_t)kept);
	return 0;
}

const cpu_op cpu_op_stringnormalizer = {
	"StringNormalizer", "", 10, CPU_OPSET_MAX, strnorm_supports, NULL, strnorm_compute, NULL,
};
