/*
 * ep_load: the requests that hand a provider process its inputs before it
 * runs anything (see ep_host.h): ADD_SEGMENT and ADD_FILE (descriptors
 * passed over the socketpair, kept in the host's tables) and
 * LOAD_SUBGRAPH (weights mapped from segments or external-data files,
 * every range checked, the pre-pack cache files named, then the
 * provider's load).  Called by ep_host.c's dispatcher.
 */
#include "ep_host_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "sysio.h"


#define FD_TIMEOUT_MS 5000

typedef struct sg_priv {
	host_map *maps;
	size_t n_maps;
	Ortmk__Envelope *env;   /* the LOAD_SUBGRAPH message sg->msg points into */
} sg_priv;

/* ---- segments and files ------------------------------------------------ */

int ep_host_on_add_segment(host *h, const Ortmk__Envelope *req)
{
	const Ortmk__AddSegment *a = req->add_segment;
	shm_segment s = {.fd = -1};
	int fd, rc;

	rc = ipc_recv_fd(h->chan.fd_sock, a->fd_tag, FD_TIMEOUT_MS, &fd);
	if (rc == 0)
		rc = shm_segment_map_fd_take(fd, a->size, a->segment_id, &s);
	if (rc == 0)
		rc = ipc_segtab_add(&h->segs, &s);
	if (rc) {
		shm_segment_destroy(&s);
		snprintf(h->err, sizeof(h->err), "segment %llu: cannot map (%s)",
			 (unsigned long long)a->segment_id, strerror(-rc));
		return ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_IO, h->err);
	}
	return ep_host_reply_ack(h, req);
}

static host_file *find_file(host *h, uint64_t id)
{
	for (size_t i = 0; i < h->n_files; i++)
		if (h->files[i].id == id)
			return &h->files[i];
	return NULL;
}

int ep_host_on_add_file(host *h, const Ortmk__Envelope *req)
{
	const Ortmk__AddFile *a = req->add_file;
	host_file *nf;
	int fd, rc;

	rc = ipc_recv_fd(h->chan.fd_sock, a->fd_tag, FD_TIMEOUT_MS, &fd);
	if (rc) {
		snprintf(h->err, sizeof(h->err), "file %llu: descriptor not received (%s)",
			 (unsigned long long)a->file_id, strerror(-rc));
		return ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_IO, h->err);
	}
	nf = find_file(h, a->file_id) ? NULL :
		realloc(h->files, (h->n_files + 1) * sizeof(*h->files));
	if (!nf) {
		close(fd);
		return ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_INVALID, "duplicate or unallocatable file id");
	}
	h->files = nf;
	h->files[h->n_files++] = (host_file){.id = a->file_id, .fd = fd, .size = a->size};
	return ep_host_reply_ack(h, req);
}

/* ---- load -------------------------------------------------------------- */

void ep_host_subgraph_free(host *h, ep_subgraph *sg)
{
	sg_priv *p;

	if (!sg)
		return;
	p = sg->priv;
	if (sg->impl && h->vt->unload)
		h->vt->unload(h->self, sg);
	for (size_t i = 0; p && i < p->n_maps; i++)
		munmap(p->maps[i].addr, p->maps[i].len);
	if (p) {
		free(p->maps);
		ipc_envelope_free(p->env);
		free(p);
	}
	if (sg->graph)
		onnx__graph_proto__free_unpacked(sg->graph, NULL);
	free(sg->values);
	free(sg->weights);
	free(sg);
}

/* External data at an offset kernels cannot load elements from (a float
 * at an odd address is undefined behaviour, and vector loads want more):
 * read into page-aligned private memory instead of mapping the file.
 * `ort-model externalize` writes aligned offsets; the weights embedded in
 * a model file, which the core hands over as external data of the file
 * itself (docs/WEIGHTS.md), mostly are not. */
#define EP_WEIGHT_ALIGN 64   /* what an AVX-512 load of a weight row wants */

/* Weights read at load go on 2 MiB pages while those are cheap to fault
 * in (sysio.h; their whole 2 MiB pages; the mapping starts 2 MiB early so
 * the data can start on one): 512 times fewer faults (ViT-B/16's 330 MB:
 * 80,000). */
#define EP_HUGE ((uint64_t)2 << 20)

static int read_misaligned(sg_priv *p, const host_file *f, const Ortmk__Weight *w, ep_weight *out)
{
	uint64_t len = w->nbytes >= EP_HUGE ? w->nbytes + EP_HUGE : w->nbytes;
	uint8_t *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *buf = map;
	uint64_t done = 0;

	if (map == MAP_FAILED)
		return -ENOMEM;
	if (len > w->nbytes) {
		buf = (uint8_t *)(((uintptr_t)map + EP_HUGE - 1) & ~(uintptr_t)(EP_HUGE - 1));
		sys_huge_advise(buf, w->nbytes & ~(EP_HUGE - 1));
	}
	while (done < w->nbytes) {
		ssize_t r = pread(f->fd, buf + done, w->nbytes - done, (off_t)(w->offset + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? errno : EIO;

			munmap(map, len);
			return -e;
		}
		done += (uint64_t)r;
	}
	p->maps[p->n_maps++] = (host_map){map, len};
	out->data = buf;
	return 0;
}

static int map_external(host *h, ep_subgraph *sg, const Ortmk__Weight *w, ep_weight *out)
{
	sg_priv *p = sg->priv;
	host_file *f = find_file(h, w->source_id);
	long page = sysconf(_SC_PAGESIZE);
	uint64_t start, len;
	host_map *nm;
	void *addr;

	if (!f || w->offset > f->size || w->nbytes > f->size - w->offset)
		return -EINVAL;
	out->fd = f->fd;
	out->file_offset = w->offset;
	if (w->nbytes == 0) {
		out->data = "";
		return 0;
	}
	nm = realloc(p->maps, (p->n_maps + 1) * sizeof(*nm));
	if (!nm)
		return -ENOMEM;
	p->maps = nm;
	if (w->offset % EP_WEIGHT_ALIGN)
		return read_misaligned(p, f, w, out);
	start = w->offset & ~(uint64_t)(page - 1);
	len = w->offset - start + w->nbytes;
	addr = mmap(NULL, len, PROT_READ, MAP_SHARED, f->fd, (off_t)start);
	if (addr == MAP_FAILED)
		return -errno;
	p->maps[p->n_maps++] = (host_map){addr, len};
	out->data = (const uint8_t *)addr + (w->offset - start);
	return 0;
}

int ep_subgraph_drop_weight(ep_subgraph *sg, const void *data)
{
	sg_priv *p = sg ? sg->priv : NULL;

	for (size_t i = 0; p && i < p->n_maps; i++) {
		const uint8_t *a = p->maps[i].addr;

		if ((const uint8_t *)data < a || (const uint8_t *)data >= a + p->maps[i].len)
			continue;
		munmap(p->maps[i].addr, p->maps[i].len);
		p->maps[i] = p->maps[--p->n_maps];
		return 0;
	}
	return -ENOENT;
}

static int map_weight(host *h, ep_subgraph *sg, const Ortmk__Weight *w, ep_weight *out)
{
	shm_segment *s;

	out->value = w->value;
	out->dtype = w->dtype;
	out->rank = (int)w->n_dims;
	if (w->n_dims)
		memcpy(out->dims, w->dims, w->n_dims * sizeof(int64_t));
	out->nbytes = w->nbytes;
	out->fd = -1;
	if (w->external)
		return map_external(h, sg, w, out);
	s = ipc_segtab_find(&h->segs, w->source_id);
	if (!s || !shm_segment_contains(s, w->offset, w->nbytes))
		return -EINVAL;
	out->data = (uint8_t *)s->base + w->offset;
	return 0;
}

static int build_subgraph(host *h, Ortmk__Envelope *req, ep_subgraph *sg)
{
	const Ortmk__LoadSubgraph *l = req->load_subgraph;
	sg_priv *p = calloc(1, sizeof(*p));

	sg->priv = p;
	sg->id = l->subgraph_id;
	sg->msg = l;
	sg->threads = l->has_threads ? (int)l->threads : 1;
	sg->prepack_in_fd = sg->prepack_out_fd = -1;
	if (l->has_prepack_in) {
		host_file *f = find_file(h, l->prepack_in);

		if (f) {
			sg->prepack_in_fd = f->fd;
			sg->prepack_in_size = f->size;
		}
	}
	if (l->has_prepack_out && find_file(h, l->prepack_out))
		sg->prepack_out_fd = find_file(h, l->prepack_out)->fd;
	sg->graph = onnx__graph_proto__unpack(NULL, l->graph.len, l->graph.data);
	sg->values = calloc(l->n_values ? l->n_values : 1, sizeof(*sg->values));
	sg->weights = calloc(l->n_weights ? l->n_weights : 1, sizeof(*sg->weights));
	if (!p || !sg->values || !sg->weights)
		return snprintf(h->err, sizeof(h->err), "out of memory"), -ENOMEM;
	if (!sg->graph)
		return snprintf(h->err, sizeof(h->err), "subgraph %u: undecodable graph", sg->id), -EINVAL;
	sg->n_values = l->n_values;
	for (size_t i = 0; i < l->n_values; i++)
		sg->values[i] = (ep_value){l->values[i]->name, l->values[i]->dtype};
	sg->n_weights = l->n_weights;
	for (size_t i = 0; i < l->n_weights; i++) {
		int rc = map_weight(h, sg, l->weights[i], &sg->weights[i]);

		if (rc)
			return snprintf(h->err, sizeof(h->err),
					"weight '%s': bytes outside their segment or file (%s)",
					sg->values[l->weights[i]->value].name, strerror(-rc)), rc;
	}
	return 0;
}

int ep_host_on_load(host *h, Ortmk__Envelope *req, int *kept)
{
	ep_subgraph *sg = calloc(1, sizeof(*sg)), **nsgs;
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__LoadDone body = ORTMK__LOAD_DONE__INIT;
	uint64_t t0 = ipc_now_ns();
	int rc;

	h->err[0] = 0;
	if (!sg)
		return ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_NOMEM, "out of memory");
	sys_huge_reset();   /* huge pages for this load's weights and packs, while cheap */
	for (size_t i = 0; i < h->n_sgs; i++)
		if (h->sgs[i]->id == req->load_subgraph->subgraph_id) {
			free(sg);
			return ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_INVALID, "subgraph id in use");
		}
	rc = build_subgraph(h, req, sg);
	/* sg->msg points into the request: the subgraph keeps it. */
	if (sg->priv) {
		((sg_priv *)sg->priv)->env = req;
		*kept = 1;
	}
	if (rc == 0)
		rc = h->vt->load(h->self, sg, h->err, sizeof(h->err));
	nsgs = rc ? NULL : realloc(h->sgs, (h->n_sgs + 1) * sizeof(*nsgs));
	if (!nsgs) {
		int code = rc ? ep_host_code(rc) : ORTMK__ERROR_CODE__E_NOMEM;

		if (rc == -EINVAL || rc == -ENOMEM)
			code = rc == -EINVAL ? ORTMK__ERROR_CODE__E_INVALID : ORTMK__ERROR_CODE__E_NOMEM;
		ep_host_reply_error(h, req, code, h->err[0] ? h->err : "load failed");
		ep_host_subgraph_free(h, sg);
		return 0;
	}
	h->sgs = nsgs;
	h->sgs[h->n_sgs++] = sg;
	body.subgraph_id = sg->id;
	body.has_prepack_ns = body.has_prepack_hits = body.has_prepack_misses = 1;
	body.prepack_ns = sg->prepack_ns;
	body.prepack_hits = sg->prepack_hits;
	body.prepack_misses = sg->prepack_misses;
	body.has_prepack_written = 1;
	body.prepack_written = sg->prepack_written;
	(void)t0;
	e.kind = ORTMK__KIND__LOAD_DONE;
	e.body_case = ORTMK__ENVELOPE__BODY_LOAD_DONE;
	e.load_done = &body;
	return ep_host_reply(h, req, &e);
}
