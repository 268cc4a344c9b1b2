/*
 * gen_seeds: writes the envelope fuzzer's seed corpus, one packed message
 * per file in DIR: each kind the core and the providers exchange, with the
 * fields a real session fills (tensor references into the two segments
 * fuzz_envelope registers, a LOAD_SUBGRAPH with weights, an ERROR with
 * `needed`); and a pre-pack cache of two blobs with fuzz_prepack's
 * identity as DIR/../prepack/cache.  Usage: gen_seeds DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <unistd.h>

#include "ortmk_ipc.pb-c.h"
#define ORTMK_FUZZ_PACK
#include "fuzz_util.h"

static const char *dir;

static void put(const char *name, Ortmk__Envelope *e, Ortmk__Kind kind, int body)
{
	char path[512];
	size_t n;
	uint8_t *buf;
	FILE *f;

	e->version = 1;
	e->seq = 7;
	e->kind = kind;
	e->body_case = body;
	n = ortmk__envelope__get_packed_size(e);
	buf = malloc(n);
	ortmk__envelope__pack(e, buf);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "wb"))) {
		fwrite(buf, 1, n, f);
		fclose(f);
	}
	free(buf);
}

static int write_pack(void)
{
	static uint8_t a[64], b[96];
	pack_ident id = fuzz_pack_ident();
	pack_entry ea = fuzz_pack_entry(), eb = fuzz_pack_entry();
	char path[512];
	pack_file *f = pack_file_open(&id, -1, 0);
	int fd, rc;

	memset(a, 0x11, sizeof(a));
	memset(b, 0x22, sizeof(b));
	strcpy(eb.key, "w1/conv-nchwc");
	eb.size = sizeof(b);
	snprintf(path, sizeof(path), "%s/../prepack/cache", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	rc = f && fd >= 0 && pack_file_add(f, &ea, a, NULL) == 0 && pack_file_add(f, &eb, b, NULL) == 0 &&
	     pack_file_write(f, fd) == 0 ? 0 : 1;
	if (fd >= 0)
		close(fd);
	pack_file_close(f);
	return rc;
}

int main(int argc, char **argv)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Hello hello = ORTMK__HELLO__INIT;
	Ortmk__Run run = ORTMK__RUN__INIT;
	Ortmk__Result res = ORTMK__RESULT__INIT;
	Ortmk__Error err = ORTMK__ERROR__INIT;
	Ortmk__AddSegment seg = ORTMK__ADD_SEGMENT__INIT;
	Ortmk__LoadSubgraph load = ORTMK__LOAD_SUBGRAPH__INIT;
	Ortmk__Weight w = ORTMK__WEIGHT__INIT, *pw = &w;
	Ortmk__TensorRef t[2] = {ORTMK__TENSOR_REF__INIT, ORTMK__TENSOR_REF__INIT};
	Ortmk__TensorRef *pt[2] = {&t[0], &t[1]};
	int64_t dims[2] = {4, 8};
	uint8_t token[32] = {1, 2, 3};

	if (argc != 2)
		return fprintf(stderr, "usage: gen_seeds DIR\n"), 2;
	dir = argv[1];
	hello.protocol_version = 1;
	hello.token = (ProtobufCBinaryData){sizeof(token), token};
	hello.pid = 1234;
	hello.provider = "cpu";
	hello.detail = "cpu, avx2";
	e.hello = &hello;
	put("hello", &e, ORTMK__KIND__HELLO, ORTMK__ENVELOPE__BODY_HELLO);

	seg.segment_id = 1;
	seg.size = 4096;
	seg.fd_tag = 9;
	e.add_segment = &seg;
	put("add_segment", &e, ORTMK__KIND__ADD_SEGMENT, ORTMK__ENVELOPE__BODY_ADD_SEGMENT);

	for (int i = 0; i < 2; i++) {
		t[i].value = (uint32_t)i;
		t[i].dtype = 1;
		t[i].n_dims = 2;
		t[i].dims = dims;
		t[i].segment_id = (uint64_t)i + 1;
		t[i].offset = 128;
		t[i].nbytes = 4 * 8 * 4;
	}
	run.subgraph_id = 3;
	run.run_id = 11;
	run.n_bindings = 2;
	run.bindings = pt;
	run.has_dyn_segment = run.has_dyn_offset = run.has_dyn_size = 1;
	run.dyn_segment = 2;
	run.dyn_offset = 1024;
	run.dyn_size = 4096;
	run.has_cancel_segment = run.has_cancel_token = 1;
	run.cancel_segment = 1;
	run.cancel_token = 99;
	e.run = &run;
	e.has_session = 1;
	e.session = 5;
	put("run", &e, ORTMK__KIND__RUN, ORTMK__ENVELOPE__BODY_RUN);

	t[1].has_dynamic = 1;
	t[1].dynamic = 1;
	res.run_id = 11;
	res.n_outputs = 1;
	res.outputs = &pt[1];
	e.result = &res;
	e.has_reply_to = 1;
	e.reply_to = 7;
	put("result", &e, ORTMK__KIND__RESULT, ORTMK__ENVELOPE__BODY_RESULT);

	err.code = ORTMK__ERROR_CODE__E_DYN_OVERFLOW;
	err.message = "dynamic outputs need 8192 bytes";
	err.has_needed = 1;
	err.needed = 8192;
	e.error = &err;
	put("error", &e, ORTMK__KIND__ERROR, ORTMK__ENVELOPE__BODY_ERROR);

	w.value = 1;
	w.dtype = 1;
	w.n_dims = 2;
	w.dims = dims;
	w.nbytes = 128;
	w.source_id = 1;
	w.offset = 0;
	load.subgraph_id = 3;
	load.graph = (ProtobufCBinaryData){0, NULL};
	load.n_weights = 1;
	load.weights = &pw;
	load.has_threads = 1;
	load.threads = 2;
	e.load_subgraph = &load;
	put("load_subgraph", &e, ORTMK__KIND__LOAD_SUBGRAPH, ORTMK__ENVELOPE__BODY_LOAD_SUBGRAPH);
	return write_pack();
}
