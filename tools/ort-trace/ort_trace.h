/*
 * ort-trace internals shared by its files: ort_trace.c (command line,
 * record and run), ort_trace_read.c (the trace reader, tensor-name
 * resolution, names and JSON strings), ort_trace_show.c (show and the live
 * printer of run), ort_trace_stats.c (with ort_trace_profile.c for
 * profiled runs) and ort_trace_export.c (Chrome trace JSON).  The file format is docs/TRACE.md; the schema is
 * proto/ortmk_trace.proto.
 */
#ifndef ORT_TRACE_H
#define ORT_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ortmk_trace.pb-c.h"

/* ---- reading (ort_trace_read.c) ---------------------------------------- */

typedef struct tr_reader {
	FILE *f;
	const char *name;         /* for messages */
	uint64_t offset;          /* byte offset of the next record */
	uint64_t index;           /* records read so far */
	uint8_t *buf;
	size_t cap;
	bool seen_header;
	char err[512];
} tr_reader;

void tr_reader_init(tr_reader *r, FILE *f, const char *name);
void tr_reader_fini(tr_reader *r);
/* 1 with *out (free with ortmk__trace__record__free_unpacked(*out, NULL)),
 * 0 at a clean end of file, -1 with r->err naming the record number and
 * byte offset of a malformed or truncated record. */
int tr_read(tr_reader *r, Ortmk__Trace__Record **out);

/* Tensor names: LOAD_SUBGRAPH records carry each subgraph's value table,
 * RUN bindings name values by index into it. */
typedef struct tr_subgraph {
	uint32_t core_pid;
	char provider[32];
	uint32_t id;
	char **names;
	size_t n;
} tr_subgraph;

typedef struct tr_names {
	tr_subgraph *sg;
	size_t n, cap;
	/* the subgraph of the last RUN per provider, for its RESULT */
	struct { uint32_t core_pid; char provider[32]; uint32_t sg; } *last;
	size_t n_last, cap_last;
} tr_names;

/* Learns from one message (a LOAD_SUBGRAPH's table, a RUN's subgraph). */
void tr_names_note(tr_names *t, const Ortmk__Trace__Message *m);
/* The name of tensor `value` in message m, or NULL. */
const char *tr_names_find(const tr_names *t, const Ortmk__Trace__Message *m, uint32_t value);
void tr_names_fini(tr_names *t);

const char *tr_kind_name(uint32_t kind, char *buf, size_t n);
const char *tr_dtype_name(int32_t dtype);
const char *tr_status_name(int32_t code);
/* "12.3KiB" */
const char *tr_bytes(uint64_t n, char *buf, size_t len);
/* A JSON string literal (quotes included); invalid UTF-8 and control
 * characters are escaped, so the output always parses. */
void tr_json_str(FILE *f, const char *s);
/* For terminals: control characters become '?'. */
void tr_print_clean(FILE *f, const char *s);

/* ---- show and run (ort_trace_show.c) ----------------------------------- */

typedef struct tr_filter {
	const char *provider;
	const char *kinds;        /* comma-separated kind or event names */
	const char *grep;
	bool has_session;
	uint64_t session;
} tr_filter;

typedef struct tr_printer {
	FILE *out;
	bool json, color;
	tr_filter filter;
	tr_names names;
	uint64_t base_ns;         /* the first header's start time */
	bool have_base, printed_columns;
	bool live;                /* flush after each record (run) */
	uint64_t index;           /* record number, from 1 */
} tr_printer;

void tr_printer_init(tr_printer *p, FILE *out, bool json, bool color, const tr_filter *f);
/* Formats one record if it passes the filter; flushes. */
void tr_printer_record(tr_printer *p, const Ortmk__Trace__Record *r);
void tr_printer_fini(tr_printer *p);
/* One-line human summary of a message (shared with export's args). */
void tr_summary(const tr_names *names, const Ortmk__Trace__Message *m, char *buf, size_t n);

/* ---- profiling totals (ort_trace_profile.c), for stats -------------------- */

typedef struct tr_prof tr_prof;
tr_prof *tr_prof_new(void);
void tr_prof_free(tr_prof *p);
/* Adds a ProviderRun or SessionRun record; ignores the others. */
void tr_prof_add(tr_prof *p, const Ortmk__Trace__Record *r);
/* The PROFILE section (nothing without profile records), or the
 * ,"profile":{...} member of stats --json. */
void tr_prof_print_text(tr_prof *p);
void tr_prof_print_json(tr_prof *p);

/* ---- commands ---------------------------------------------------------- */

/* Each returns the process exit status. */
int tr_cmd_show(const char *file, bool json, bool color, const tr_filter *f);
int tr_cmd_stats(const char *file, bool json, bool color);
int tr_cmd_export_chrome(const char *file, FILE *out);

/* Opens `file` for reading ("-" is stdin); prints an error and returns
 * NULL when it cannot. */
FILE *tr_open(const char *file);

#endif
