/*
 * fuzz_trace: ort-trace's reader (tools/ort-trace/ort_trace_read.c) and
 * its printer over every record of the input as a trace file.
 */
#include <stdio.h>

#include "ort_trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *in = fmemopen((void *)data, size, "rb"), *out = fopen("/dev/null", "w");
	Ortmk__Trace__Record *r;
	tr_filter filter = {0};
	tr_printer p;
	tr_reader rd;

	if (!in || !out) {
		if (in)
			fclose(in);
		if (out)
			fclose(out);
		return 0;
	}
	tr_reader_init(&rd, in, "fuzz");
	tr_printer_init(&p, out, size % 2, 0, &filter);
	for (int i = 0; i < 10000 && tr_read(&rd, &r) == 1; i++) {
		tr_printer_record(&p, r);
		ortmk__trace__record__free_unpacked(r, NULL);
	}
	tr_printer_fini(&p);
	tr_reader_fini(&rd);
	fclose(in);
	fclose(out);
	return 0;
}
