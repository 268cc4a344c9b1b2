/*
 * ort-trace: reading trace files (docs/TRACE.md) and the small helpers every
 * command shares.  A trace file is untrusted input: every length is checked
 * before it is used, a short read is a truncated record, and each error
 * names the record number and byte offset where reading stopped.  The
 * commands never look at a record this file has not decoded and checked.
 */
#include "ort_trace.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ortmk_ipc.pb-c.h"
#include "trace.h"

void tr_reader_init(tr_reader *r, FILE *f, const char *name)
{
	memset(r, 0, sizeof(*r));
	r->f = f;
	r->name = name;
}

void tr_reader_fini(tr_reader *r)
{
	free(r->buf);
	r->buf = NULL;
	r->cap = 0;
}

static int fail(tr_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(tr_reader *r, const char *fmt, ...)
{
	int k = snprintf(r->err, sizeof(r->err), "%s: record %llu at byte offset %llu: ",
			 r->name, (unsigned long long)r->index + 1, (unsigned long long)r->offset);
	va_list ap;

	if (k < 0 || (size_t)k >= sizeof(r->err))
		return -1;
	va_start(ap, fmt);
	vsnprintf(r->err + k, sizeof(r->err) - (size_t)k, fmt, ap);
	va_end(ap);
	return -1;
}

/* Reads exactly n bytes: n, or fewer at end of file or on error. */
static size_t read_full(FILE *f, uint8_t *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		size_t k = fread(p + got, 1, n - got, f);

		if (k == 0)
			break;
		got += k;
	}
	return got;
}

static int check_header(tr_reader *r, const Ortmk__Trace__Header *h)
{
	if (!h->magic || strcmp(h->magic, IPC_TRACE_MAGIC) != 0)
		return fail(r, "not an ortmk trace header (magic is not \"%s\")", IPC_TRACE_MAGIC);
	if (h->format_version != IPC_TRACE_FORMAT_VERSION)
		return fail(r, "trace format version %u; this ort-trace reads version %u",
			    h->format_version, IPC_TRACE_FORMAT_VERSION);
	return 0;
}

/* What a decoded record must satisfy beyond protobuf itself. */
static int check_record(tr_reader *r, const Ortmk__Trace__Record *rec)
{
	if (!r->seen_header && rec->body_case != ORTMK__TRACE__RECORD__BODY_HEADER)
		return fail(r, "not an ortmk trace: the first record is not a header");
	if (rec->body_case == ORTMK__TRACE__RECORD__BODY_HEADER) {
		if (check_header(r, rec->header))
			return -1;
		r->seen_header = true;
	}
	return 0;
}

static int ensure_cap(tr_reader *r, size_t n)
{
	uint8_t *b;

	if (n <= r->cap)
		return 0;
	b = realloc(r->buf, n);
	if (!b)
		return -1;
	r->buf = b;
	r->cap = n;
	return 0;
}

int tr_read(tr_reader *r, Ortmk__Trace__Record **out)
{
	uint8_t len[4];
	size_t got = read_full(r->f, len, 4);
	uint32_t n;
	Ortmk__Trace__Record *rec;

	*out = NULL;
	if (ferror(r->f))
		return fail(r, "read error: %s", strerror(errno));
	if (got == 0)
		return r->index == 0 ? fail(r, "empty: no trace header (did the program use libortmk?)") : 0;
	if (got < 4)
		return fail(r, "truncated length prefix (%zu of 4 bytes)", got);
	n = (uint32_t)len[0] | (uint32_t)len[1] << 8 | (uint32_t)len[2] << 16 | (uint32_t)len[3] << 24;
	if (n > IPC_TRACE_MAX_RECORD)
		return fail(r, "length %u exceeds the limit of %u bytes (corrupt, or not a trace)",
			    n, IPC_TRACE_MAX_RECORD);
	if (ensure_cap(r, n ? n : 1))
		return fail(r, "out of memory for %u bytes", n);
	got = read_full(r->f, r->buf, n);
	if (got < n)
		return fail(r, "truncated: the length prefix says %u bytes, %zu remain", n, got);
	rec = ortmk__trace__record__unpack(NULL, n, r->buf);
	if (!rec)
		return fail(r, "not a valid trace record (protobuf decoding failed, %u bytes)", n);
	if (check_record(r, rec)) {
		ortmk__trace__record__free_unpacked(rec, NULL);
		return -1;
	}
	r->offset += 4 + (uint64_t)n;
	r->index++;
	*out = rec;
	return 1;
}

FILE *tr_open(const char *file)
{
	FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "rb");

	if (!f)
		fprintf(stderr, "ort-trace: cannot open %s: %s\n", file, strerror(errno));
	return f;
}

/* ---- tensor names -------------------------------------------------------- */

static bool same_provider(const char *a, const char *b)
{
	return strncmp(a ? a : "", b ? b : "", 31) == 0;
}

static void note_run(tr_names *t, const Ortmk__Trace__Message *m)
{
	size_t i;

	for (i = 0; i < t->n_last; i++)
		if (t->last[i].core_pid == m->core_pid && same_provider(t->last[i].provider, m->provider))
			break;
	if (i == t->n_last) {
		if (t->n_last == t->cap_last) {
			size_t cap = t->cap_last ? 2 * t->cap_last : 4;
			void *p = realloc(t->last, cap * sizeof(*t->last));

			if (!p)
				return;
			t->last = p;
			t->cap_last = cap;
		}
		t->n_last++;
		t->last[i].core_pid = m->core_pid;
		snprintf(t->last[i].provider, sizeof(t->last[i].provider), "%s", m->provider ? m->provider : "");
	}
	t->last[i].sg = m->subgraph_id;
}

static void note_load(tr_names *t, const Ortmk__Trace__Message *m)
{
	tr_subgraph *s;

	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 8;
		void *p = realloc(t->sg, cap * sizeof(*t->sg));

		if (!p)
			return;
		t->sg = p;
		t->cap = cap;
	}
	s = &t->sg[t->n];
	memset(s, 0, sizeof(*s));
	s->core_pid = m->core_pid;
	snprintf(s->provider, sizeof(s->provider), "%s", m->provider ? m->provider : "");
	s->id = m->subgraph_id;
	s->names = calloc(m->n_value_names ? m->n_value_names : 1, sizeof(char *));
	if (!s->names)
		return;
	for (size_t i = 0; i < m->n_value_names; i++)
		s->names[i] = strdup(m->value_names[i] ? m->value_names[i] : "");
	s->n = m->n_value_names;
	t->n++;
}

void tr_names_note(tr_names *t, const Ortmk__Trace__Message *m)
{
	if (!m->has_kind || !m->has_subgraph_id)
		return;
	if (m->kind == ORTMK__KIND__LOAD_SUBGRAPH && m->n_value_names)
		note_load(t, m);
	else if (m->kind == ORTMK__KIND__RUN)
		note_run(t, m);
}

const char *tr_names_find(const tr_names *t, const Ortmk__Trace__Message *m, uint32_t value)
{
	uint32_t sg = m->subgraph_id;
	bool have = m->has_subgraph_id;

	for (size_t i = 0; !have && i < t->n_last; i++) {
		if (t->last[i].core_pid == m->core_pid && same_provider(t->last[i].provider, m->provider)) {
			sg = t->last[i].sg;
			have = true;
		}
	}
	/* Newest first: a subgraph id reloaded later wins. */
	for (size_t i = t->n; have && i-- > 0;) {
		const tr_subgraph *s = &t->sg[i];

		if (s->id == sg && s->core_pid == m->core_pid && same_provider(s->provider, m->provider))
			return value < s->n ? s->names[value] : NULL;
	}
	return NULL;
}

void tr_names_fini(tr_names *t)
{
	for (size_t i = 0; i < t->n; i++) {
		for (size_t j = 0; j < t->sg[i].n; j++)
			free(t->sg[i].names[j]);
		free(t->sg[i].names);
	}
	free(t->sg);
	free(t->last);
	memset(t, 0, sizeof(*t));
}

/* ---- names and formatting -------------------------------------------------- */

const char *tr_kind_name(uint32_t kind, char *buf, size_t n)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&ortmk__kind__descriptor,
									  (int)kind);

	if (v && kind != 0)
		return v->name;
	snprintf(buf, n, "KIND_%u", kind);
	return buf;
}

const char *tr_dtype_name(int32_t dtype)
{
	static const char *names[] = {
		"undefined", "float32", "uint8", "int8", "uint16", "int16", "int32", "int64",
		"string", "bool", "float16", "float64", "uint32", "uint64", "complex64",
		"complex128", "bfloat16",
	};

	return dtype >= 0 && dtype < (int32_t)(sizeof(names) / sizeof(names[0])) ? names[dtype] : "dtype?";
}

const char *tr_status_name(int32_t code)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&ortmk__error_code__descriptor,
									  code);

	return v ? v->name : "E_?";
}

const char *tr_bytes(uint64_t n, char *buf, size_t len)
{
	static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)n;
	int u = 0;

	if (n < 1024) {
		snprintf(buf, len, "%lluB", (unsigned long long)n);
		return buf;
	}
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f%s", v, units[u]);
	return buf;
}

/* Length of the valid UTF-8 sequence at s (no overlongs, no surrogates,
 * nothing past U+10FFFF), or 0. */
static int utf8_len(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf;
	int n;

	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (int i = 2; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

void tr_json_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	fputc('"', f);
	while (*p) {
		int n;

		if (*p == '"' || *p == '\\') {
			fprintf(f, "\\%c", *p++);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, "\\u%04x", *p++);
		} else if (*p < 0x80) {
			fputc(*p++, f);
		} else if ((n = utf8_len(p)) > 0) {
			fwrite(p, 1, (size_t)n, f);
			p += n;
		} else {
			fputs("\\ufffd", f);
			p++;
		}
	}
	fputc('"', f);
}

void tr_print_clean(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
		fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, f);
}
