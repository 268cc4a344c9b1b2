/*
 * Unit tests for onnxrules/window: ONNX's window geometry as the core and
 * every provider apply it — SAME_UPPER vs SAME_LOWER with an odd total
 * padding, ceil_mode (a last window starting in the end padding dropped;
 * ceil_mode ignored without explicit pads), dilations, overflow, and the
 * attribute checks of onnx_window_parse / onnx_window_geom.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "window.h"

#define AT(x) ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__##x

/* ------------------------------------------------------------ one dim */

static onnx_span span(int mode, int ceil, int64_t in, int64_t k, int64_t s, int64_t d,
		      int64_t pb, int64_t pe, int want_rc)
{
	onnx_span sp = {.in = in, .k = k, .s = s, .d = d, .pb = pb, .pe = pe};

	assert_int_equal(onnx_window_span(mode, ceil, &sp), want_rc);
	return sp;
}

static void test_same_odd_padding(void **state)
{
	onnx_span u, l;

	(void)state;
	/* in 5, kernel 4, stride 1: 3 padding elements, the odd one at the
	 * end (UPPER) or at the start (LOWER) */
	u = span(ONNX_PAD_SAME_UPPER, 0, 5, 4, 1, 1, 9, 9, 0);
	l = span(ONNX_PAD_SAME_LOWER, 0, 5, 4, 1, 1, 9, 9, 0);
	assert_int_equal(u.out, 5);
	assert_int_equal(u.pb, 1);
	assert_int_equal(u.pe, 2);
	assert_int_equal(l.out, 5);
	assert_int_equal(l.pb, 2);
	assert_int_equal(l.pe, 1);
	/* stride 2: out = ceil(7 / 2) = 4, padding (4-1)*2 + 3 - 7 = 2 */
	u = span(ONNX_PAD_SAME_UPPER, 0, 7, 3, 2, 1, 0, 0, 0);
	assert_int_equal(u.out, 4);
	assert_int_equal(u.pb, 1);
	assert_int_equal(u.pe, 1);
	/* no padding needed: never negative */
	u = span(ONNX_PAD_SAME_LOWER, 0, 8, 1, 4, 1, 0, 0, 0);
	assert_int_equal(u.out, 2);
	assert_int_equal(u.pb + u.pe, 0);
	/* an unknown kernel (the core's W): the size, no padding */
	u = span(ONNX_PAD_SAME_UPPER, 0, 9, -1, 2, 1, 0, 0, 0);
	assert_int_equal(u.out, 5);
}

static void test_ceil_mode(void **state)
{
	onnx_span sp;

	(void)state;
	/* in 6, kernel 3, stride 2: floor 2 windows, ceil 3 (the third
	 * starts at 4, inside the input) */
	assert_int_equal(span(ONNX_PAD_NOTSET, 0, 6, 3, 2, 1, 0, 0, 0).out, 2);
	assert_int_equal(span(ONNX_PAD_NOTSET, 1, 6, 3, 2, 1, 0, 0, 0).out, 3);
	/* in 5, kernel 2, stride 2, pads 1/1: rounding up gives a 4th window
	 * starting at 6 = in + pad begin, all in the end padding: dropped */
	sp = span(ONNX_PAD_NOTSET, 1, 5, 2, 2, 1, 1, 1, 0);
	assert_int_equal(sp.out, 3);
	assert_int_equal(sp.pb, 1);
	assert_int_equal(sp.pe, 1);
	/* ... even when the division is exact */
	assert_int_equal(span(ONNX_PAD_NOTSET, 1, 4, 1, 1, 1, 0, 1, 0).out, 4);
	assert_int_equal(span(ONNX_PAD_NOTSET, 0, 4, 1, 1, 1, 0, 1, 0).out, 5);
	/* ceil_mode applies to explicit pads only: VALID and SAME ignore it */
	assert_int_equal(span(ONNX_PAD_VALID, 1, 6, 3, 2, 1, 5, 5, 0).out, 2);
	assert_int_equal(span(ONNX_PAD_SAME_UPPER, 1, 6, 3, 4, 1, 0, 0, 0).out, 2);
}

static void test_dilations_and_limits(void **state)
{
	onnx_span sp;

	(void)state;
	/* kernel 3 dilated by 2 spans 5 */
	sp = span(ONNX_PAD_NOTSET, 0, 7, 3, 1, 2, 0, 0, 0);
	assert_int_equal(sp.out, 3);
	span(ONNX_PAD_NOTSET, 0, 4, 3, 1, 2, 0, 0, ONNX_SPAN_EXCEEDS);
	assert_int_equal(span(ONNX_PAD_NOTSET, 0, 4, 3, 1, 2, 1, 0, 0).out, 1);
	/* VALID drops the pads it was given */
	span(ONNX_PAD_VALID, 0, 4, 3, 1, 2, 1, 0, ONNX_SPAN_EXCEEDS);
	span(ONNX_PAD_NOTSET, 0, 4, INT64_MAX / 2, 1, 4, 0, 0, ONNX_SPAN_OVERFLOW);
	span(ONNX_PAD_NOTSET, 0, INT64_MAX - 1, 1, 1, 1, 1, 1, ONNX_SPAN_OVERFLOW);
}

static void test_span_error(void **state)
{
	onnx_span sp = {.in = 4, .k = 3, .s = 1, .d = 2};
	char err[160];

	(void)state;
	assert_int_equal(onnx_span_error(ONNX_SPAN_EXCEEDS, &sp, 1, err, sizeof(err)),
			 ONNX_E_INVALID);
	assert_string_equal(err, "kernel 3 (dilation 2) exceeds input 4 + padding at spatial dim 1");
	onnx_span_error(ONNX_SPAN_OVERFLOW, &sp, 0, err, sizeof(err));
	assert_string_equal(err, "kernel or padding too large at spatial dim 0");
}

/* ------------------------------------------------------------- a node */

typedef struct node {
	Onnx__NodeProto p;
	Onnx__AttributeProto a[8], *pa[8];
} node;

static void node_init(node *n)
{
	memset(n, 0, sizeof(*n));
	n->p = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
	n->p.attribute = n->pa;
}

static Onnx__AttributeProto *attr(node *n, const char *name, int type)
{
	Onnx__AttributeProto *a = &n->a[n->p.n_attribute];

	*a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
	a->name = (char *)name;
	a->has_type = 1;
	a->type = type;
	n->pa[n->p.n_attribute++] = a;
	return a;
}

static void ints(node *n, const char *name, int64_t *v, size_t cnt)
{
	Onnx__AttributeProto *a = attr(n, name, AT(INTS));

	a->ints = v;
	a->n_ints = cnt;
}

static void str(node *n, const char *name, const char *s)
{
	Onnx__AttributeProto *a = attr(n, name, AT(STRING));

	a->has_s = 1;
	a->s.data = (uint8_t *)s;
	a->s.len = strlen(s);
}

static void test_auto_pad(void **state)
{
	node n;
	Onnx__AttributeProto *a;

	(void)state;
	node_init(&n);
	assert_int_equal(onnx_auto_pad(&n.p), ONNX_PAD_NOTSET);
	str(&n, "auto_pad", "SAME_LOWER");
	assert_int_equal(onnx_auto_pad(&n.p), ONNX_PAD_SAME_LOWER);
	n.a[0].s.len = 0;
	assert_int_equal(onnx_auto_pad(&n.p), ONNX_PAD_NOTSET);
	n.a[0].s.data = (uint8_t *)"VALID", n.a[0].s.len = 5;
	assert_int_equal(onnx_auto_pad(&n.p), ONNX_PAD_VALID);
	n.a[0].s.data = (uint8_t *)"SAME", n.a[0].s.len = 4;
	assert_int_equal(onnx_auto_pad(&n.p), -1);
	/* typed as an INT: not an auto_pad string at all */
	n.a[0].type = AT(INT);
	assert_int_equal(onnx_auto_pad(&n.p), ONNX_PAD_NOTSET);
	/* an old exporter's unset type: the string field decides */
	node_init(&n);
	a = attr(&n, "auto_pad", AT(UNDEFINED));
	a->has_type = 0, a->has_s = 1, a->s.data = (uint8_t *)"SAME_UPPER", a->s.len = 10;
	assert_int_equal(onnx_auto_pad(&n.p), ONNX_PAD_SAME_UPPER);
}

static void test_parse_and_geom(void **state)
{
	int64_t k[] = {3, 2}, s[] = {2, 1}, pads[] = {1, 0, 1, 1}, in[] = {7, 5}, w[] = {3, 2};
	node n;
	onnx_window win;
	onnx_geom g;
	char err[160];

	(void)state;
	node_init(&n);
	ints(&n, "kernel_shape", k, 2);
	ints(&n, "strides", s, 2);
	ints(&n, "pads", pads, 4);
	assert_int_equal(onnx_window_parse(&n.p, &win, err, sizeof(err)), 0);
	assert_int_equal(onnx_window_geom(&win, 2, in, NULL, &g, err, sizeof(err)), 0);
	/* slot 0 (D) is unused: size, kernel, stride, dilation 1 */
	assert_int_equal(g.nsp, 2);
	assert_int_equal(g.in[0] + g.out[0] + g.k[0] + g.s[0] + g.d[0], 5);
	assert_int_equal(g.out[1], 4);          /* (7 + 2 - 3) / 2 + 1 */
	assert_int_equal(g.pb[1], 1);
	assert_int_equal(g.pe[1], 1);
	assert_int_equal(g.out[2], 5);          /* 5 + 1 - 2 + 1 */
	assert_int_equal(onnx_window_geom(&win, 2, in, w, &g, err, sizeof(err)), 0);
	w[1] = 3;
	assert_int_equal(onnx_window_geom(&win, 2, in, w, &g, err, sizeof(err)), ONNX_E_INVALID);
	assert_string_equal(err, "kernel_shape[1] = 2 but the weights have 3");
	assert_int_equal(onnx_window_geom(&win, 1, in, NULL, &g, err, sizeof(err)), ONNX_E_INVALID);
	assert_string_equal(err, "kernel_shape has 2 dims for 1 spatial dims");
	assert_int_equal(onnx_window_geom(&win, 4, in, NULL, &g, err, sizeof(err)),
			 ONNX_E_UNSUPPORTED);
	in[0] = 0;          /* 0 + pads 2 < 3 */
	assert_int_equal(onnx_window_geom(&win, 2, in, NULL, &g, err, sizeof(err)), ONNX_E_INVALID);
	assert_string_equal(err, "kernel 3 (dilation 1) exceeds input 0 + padding at spatial dim 0");
}

static void test_parse_errors(void **state)
{
	int64_t odd[] = {1, 1, 1}, big[] = {(int64_t)INT32_MAX + 1}, zero[] = {0};
	node n;
	onnx_window w;
	char err[160];

	(void)state;
	node_init(&n);
	ints(&n, "pads", odd, 3);
	assert_int_equal(onnx_window_parse(&n.p, &w, err, sizeof(err)), ONNX_E_INVALID);
	assert_string_equal(err, "attribute pads has an odd count (3)");
	node_init(&n);
	ints(&n, "strides", big, 1);
	assert_int_equal(onnx_window_parse(&n.p, &w, err, sizeof(err)), ONNX_E_INVALID);
	node_init(&n);
	ints(&n, "dilations", zero, 1);
	assert_int_equal(onnx_window_parse(&n.p, &w, err, sizeof(err)), ONNX_E_INVALID);
	assert_string_equal(err, "attribute dilations[0] = 0 must be in [1, 2147483647]");
	node_init(&n);
	str(&n, "auto_pad", "SAME");
	assert_int_equal(onnx_window_parse(&n.p, &w, err, sizeof(err)), ONNX_E_INVALID);
	assert_string_equal(err, "unknown auto_pad 'SAME'");
	node_init(&n);
	attr(&n, "ceil_mode", AT(INT))->i = 1;
	assert_int_equal(onnx_window_parse(&n.p, &w, err, sizeof(err)), 0);
	assert_int_equal(w.ceil_mode, 1);
	assert_int_equal(w.n_kernel + w.n_strides + w.n_dilations + w.n_pads, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_odd_padding),
		cmocka_unit_test(test_ceil_mode),
		cmocka_unit_test(test_dilations_and_limits),
		cmocka_unit_test(test_span_error),
		cmocka_unit_test(test_auto_pad),
		cmocka_unit_test(test_parse_and_geom),
		cmocka_unit_test(test_parse_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
