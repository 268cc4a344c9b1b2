/*
 * vk_copy: the buffer table and the copy engine (see vk_copy.h).
 */
#include "vk_copy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAGE_ALIGN 64

/* ---- the table ----------------------------------------------------------- */

static size_t slot_of(uint64_t id, size_t cap)
{
	id ^= id >> 33;
	id *= UINT64_C(0xff51afd7ed558ccd);
	id ^= id >> 33;
	return (size_t)id & (cap - 1);
}

static vk_dbuf *lookup(const vk_devmem *m, uint64_t id)
{
	if (!m->cap || !id)
		return NULL;
	for (size_t i = slot_of(id, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->tab[i].id == id)
			return &m->tab[i];
		if (!m->tab[i].id)
			return NULL;
	}
}

static int grow(vk_devmem *m)
{
	size_t cap = m->cap ? 2 * m->cap : 64;
	vk_dbuf *nt = calloc(cap, sizeof(*nt));

	if (!nt)
		return -1;
	for (size_t i = 0; i < m->cap; i++) {
		size_t k;

		if (!m->tab[i].id)
			continue;
		for (k = slot_of(m->tab[i].id, cap); nt[k].id; k = (k + 1) & (cap - 1))
			;
		nt[k] = m->tab[i];
	}
	free(m->tab);
	m->tab = nt;
	m->cap = cap;
	return 0;
}

static int insert(vk_devmem *m, uint64_t id, uint64_t nbytes, const vk_buf *b)
{
	size_t i;

	if ((m->n + 1) * 4 > m->cap * 3 && grow(m))
		return -1;
	for (i = slot_of(id, m->cap); m->tab[i].id; i = (i + 1) & (m->cap - 1))
		;
	m->tab[i] = (vk_dbuf){id, nbytes, *b};
	m->n++;
	m->bytes += b->size;
	return 0;
}

/* Removes entry e, shifting back the entries of its probe run. */
static void erase(vk_devmem *m, vk_dbuf *e)
{
	size_t i = (size_t)(e - m->tab), j = i;

	m->bytes -= e->b.size;
	m->n--;
	for (;;) {
		size_t home;

		m->tab[i].id = 0;
		do {
			j = (j + 1) & (m->cap - 1);
			if (!m->tab[j].id)
				return;
			home = slot_of(m->tab[j].id, m->cap);
		} while (i <= j ? (i < home && home <= j) : (i < home || home <= j));
		m->tab[i] = m->tab[j];
		i = j;
	}
}

/* ---- buffers ------------------------------------------------------------- */

void vk_dm_init(vk_devmem *m, vk_dev *d, vk_heap *h)
{
	memset(m, 0, sizeof(*m));
	m->d = d;
	m->heap = h;
	vk_streams_init(&m->streams, d);
}

void vk_dm_fini(vk_devmem *m)
{
	vk_streams_fini(&m->streams);
	for (size_t i = 0; i < m->n_def; i++)
		vk_heap_free(m->heap, &m->def[i].b);
	for (size_t i = 0; i < m->cap; i++)
		if (m->tab[i].id)
			vk_heap_free(m->heap, &m->tab[i].b);
	free(m->def);
	free(m->tab);
	memset(m, 0, sizeof(*m));
}

void vk_dm_collect(vk_devmem *m)
{
	size_t k = 0;

	for (size_t i = 0; i < m->n_def; i++) {
		if (vk_stream_done(m->def[i].s, m->def[i].value))
			vk_heap_free(m->heap, &m->def[i].b);
		else
			m->def[k++] = m->def[i];
	}
	m->n_def = k;
}

static int check_new_id(const vk_devmem *m, uint64_t id, char *err, size_t n)
{
	if (!id)
		return snprintf(err, n, "buffer id 0 is reserved"), -EINVAL;
	if (lookup(m, id))
		return snprintf(err, n, "buffer %llu already exists", (unsigned long long)id), -EINVAL;
	return 0;
}

int vk_dm_alloc(vk_devmem *m, uint64_t id, uint64_t nbytes, char *err, size_t n)
{
	vk_buf b;
	int rc = check_new_id(m, id, err, n);

	if (rc)
		return rc;
	vk_dm_collect(m);
	if (vk_heap_alloc(m->heap, nbytes, &b, err, n))
		return -ENOMEM;
	if (insert(m, id, nbytes, &b)) {
		vk_heap_free(m->heap, &b);
		return snprintf(err, n, "out of memory"), -ENOMEM;
	}
	return 0;
}

int vk_dm_adopt(vk_devmem *m, uint64_t id, uint64_t nbytes, const vk_buf *b, char *err,
		size_t n)
{
	int rc = check_new_id(m, id, err, n);

	if (rc)
		return rc;
	if (insert(m, id, nbytes, b))
		return snprintf(err, n, "out of memory"), -ENOMEM;
	return 0;
}

int vk_dm_free(vk_devmem *m, uint64_t id)
{
	vk_dbuf *e = lookup(m, id);
	vk_buf b;

	if (!e)
		return -ENOENT;
	b = e->b;
	erase(m, e);
	vk_dm_collect(m);
	if (m->last && !vk_stream_done(m->last, m->last_value)) {
		if (m->n_def == m->cap_def) {
			size_t cap = m->cap_def ? 2 * m->cap_def : 16;
			vk_deferred *nd = realloc(m->def, cap * sizeof(*nd));

			if (!nd) {
				/* Cannot remember it: wait instead. */
				vk_stream_sync(m->last);
				vk_heap_free(m->heap, &b);
				return 0;
			}
			m->def = nd;
			m->cap_def = cap;
		}
		m->def[m->n_def++] = (vk_deferred){b, m->last, m->last_value};
		return 0;
	}
	vk_heap_free(m->heap, &b);
	return 0;
}

const vk_dbuf *vk_dm_find(const vk_devmem *m, uint64_t id)
{
	return lookup(m, id);
}

/* 1 when [off, off + len) lies inside [0, size). */
static int inside(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

int vk_dm_range(const vk_devmem *m, uint64_t id, uint64_t off, uint64_t nbytes, vk_buf *out,
		char *err, size_t n)
{
	const vk_dbuf *e = lookup(m, id);
	VkDeviceSize size = (nbytes + 3) / 4 * 4;

	if (!e)
		return snprintf(err, n, "device buffer %llu is unknown", (unsigned long long)id),
		       -EINVAL;
	if (!inside(off, nbytes, e->nbytes))
		return snprintf(err, n, "bytes [%llu, %llu) are outside device buffer %llu (%llu bytes)",
				(unsigned long long)off, (unsigned long long)(off + nbytes),
				(unsigned long long)id, (unsigned long long)e->nbytes), -EINVAL;
	if (off % m->heap->align)
		return snprintf(err, n, "offset %llu in device buffer %llu is not a multiple of %llu",
				(unsigned long long)off, (unsigned long long)id,
				(unsigned long long)m->heap->align), -EINVAL;
	*out = e->b;
	out->off += off;
	out->size = size ? size : 4;
	if (out->size > e->b.size - off)
		out->size = e->b.size - off;
	return 0;
}

/* ---- copies -------------------------------------------------------------- */

static int check_side(const vk_devmem *m, size_t i, const char *side, const void *host,
		      uint64_t buf, uint64_t off, uint64_t len, char *err, size_t n)
{
	const vk_dbuf *e;

	if (host)
		return 0;
	e = lookup(m, buf);
	if (!e)
		return snprintf(err, n, "copy %zu: %s device buffer %llu is unknown", i, side,
				(unsigned long long)buf), -EINVAL;
	if (!inside(off, len, e->nbytes))
		return snprintf(err, n, "copy %zu: %s bytes [%llu, %llu) are outside device buffer %llu "
				"(%llu bytes)", i, side, (unsigned long long)off,
				(unsigned long long)(off + len), (unsigned long long)buf,
				(unsigned long long)e->nbytes), -EINVAL;
	return 0;
}

static int validate(const vk_devmem *m, const vk_copy_op *ops, size_t n_ops, char *err, size_t n)
{
	for (size_t i = 0; i < n_ops; i++) {
		const vk_copy_op *o = &ops[i];
		int rc = check_side(m, i, "source", o->src_host, o->src_buf, o->src_off, o->nbytes,
				    err, n);

		if (!rc)
			rc = check_side(m, i, "destination", o->dst_host, o->dst_buf, o->dst_off,
					o->nbytes, err, n);
		if (rc)
			return rc;
		if (!o->src_host && !o->dst_host && o->src_buf == o->dst_buf && o->nbytes &&
		    o->src_off < o->dst_off + o->nbytes && o->dst_off < o->src_off + o->nbytes)
			return snprintf(err, n, "copy %zu: source and destination overlap in device "
					"buffer %llu", i, (unsigned long long)o->src_buf), -EINVAL;
	}
	return 0;
}

/* The copy in progress: the stream, its open slot, what is left. */
typedef struct copier {
	vk_devmem *m;
	vk_stream *s;
	vk_slot *sl;
	uint64_t staged_left;   /* staging bytes the remaining pieces need */
	char *err;
	size_t errlen;
} copier;

static int open_slot(copier *c)
{
	VkDeviceSize want = c->staged_left < VKX_COPY_CHUNK ? c->staged_left : VKX_COPY_CHUNK;

	c->sl = vk_stream_begin(c->s, c->err, c->errlen);
	if (!c->sl)
		return -ENOMEM;
	if (want && vk_slot_stage(c->s, c->sl, want, c->err, c->errlen)) {
		vk_stream_abort(c->s, c->sl);
		c->sl = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int close_slot(copier *c, const vk_signal *sig)
{
	int rc = vk_stream_submit(c->s, c->sl, sig, c->err, c->errlen);

	c->sl = NULL;
	if (rc)
		return -EIO;
	c->m->last = c->s;
	c->m->last_value = c->s->value;
	return 0;
}

static VkDeviceSize room(const copier *c)
{
	VkDeviceSize cap = c->sl->stage.size < VKX_COPY_CHUNK ? c->sl->stage.size : VKX_COPY_CHUNK;

	return c->sl->stage_used < cap ? cap - c->sl->stage_used : 0;
}

static void cmd_copy(VkCommandBuffer cmd, VkBuffer src, VkDeviceSize so, VkBuffer dst,
		     VkDeviceSize dof, VkDeviceSize len)
{
	VkBufferCopy r = {.srcOffset = so, .dstOffset = dof, .size = len};

	vkCmdCopyBuffer(cmd, src, dst, 1, &r);
}

static void transfer_barrier(VkCommandBuffer cmd)
{
	VkMemoryBarrier mb = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
	};

	vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
			     1, &mb, 0, NULL, 0, NULL);
}

/* Host to device or device to host, through staging, in pieces. */
static int staged(copier *c, const vk_copy_op *o)
{
	int up = o->src_host != NULL;
	const vk_dbuf *e = lookup(c->m, up ? o->dst_buf : o->src_buf);
	uint64_t done = 0;

	while (done < o->nbytes) {
		VkDeviceSize len = o->nbytes - done, at;
		int rc;

		if (room(c) == 0 || (up && c->sl->n_host)) {
			/* Full, or an upload after host-side work: that work
			 * must be done before the upload reads host memory. */
			rc = close_slot(c, NULL);
			if (!rc)
				rc = open_slot(c);
			if (rc)
				return rc;
		}
		if (up)
			vk_stream_host_wait(c->s);
		if (len > room(c))
			len = room(c);
		at = c->sl->stage_used;
		if (up) {
			memcpy(c->sl->stage.map + at, (const uint8_t *)o->src_host + done, len);
			cmd_copy(c->sl->cmd, c->sl->stage.buf, at, e->b.ptr, e->b.off + o->dst_off + done, len);
		} else {
			cmd_copy(c->sl->cmd, e->b.ptr, e->b.off + o->src_off + done, c->sl->stage.buf, at, len);
			if (vk_slot_host(c->sl, (uint8_t *)o->dst_host + done, c->sl->stage.map + at, len))
				return snprintf(c->err, c->errlen, "out of memory"), -ENOMEM;
		}
		c->sl->stage_used += (len + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
		c->staged_left -= (len + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
		done += len;
	}
	return 0;
}

static int one_op(copier *c, const vk_copy_op *o)
{
	if (!o->nbytes)
		return 0;
	if (o->src_host && o->dst_host) {
		/* Host to host: in stream order, by the bridge. */
		if (vk_slot_host(c->sl, o->dst_host, o->src_host, o->nbytes))
			return snprintf(c->err, c->errlen, "out of memory"), -ENOMEM;
		return 0;
	}
	if (!o->src_host && !o->dst_host) {
		const vk_dbuf *s = lookup(c->m, o->src_buf), *d = lookup(c->m, o->dst_buf);

		cmd_copy(c->sl->cmd, s->b.ptr, s->b.off + o->src_off, d->b.ptr, d->b.off + o->dst_off,
			 o->nbytes);
		return 0;
	}
	return staged(c, o);
}

int vk_dm_copy(vk_devmem *m, uint32_t stream, const vk_copy_op *ops, size_t n_ops,
	       const vk_signal *sig, char *err, size_t n)
{
	copier c = {.m = m, .err = err, .errlen = n};
	int rc = validate(m, ops, n_ops, err, n);

	if (rc)
		return rc;
	c.s = vk_stream_get(&m->streams, stream, 1, err, n);
	if (!c.s)
		return -ENOTSUP;
	vk_dm_collect(m);
	for (size_t i = 0; i < n_ops; i++)
		if (!ops[i].src_host != !ops[i].dst_host)
			c.staged_left += (ops[i].nbytes + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
	rc = open_slot(&c);
	for (size_t i = 0; rc == 0 && i < n_ops; i++) {
		if (i)
			transfer_barrier(c.sl->cmd);
		rc = one_op(&c, &ops[i]);
	}
	if (rc == 0)
		return close_slot(&c, sig);
	if (c.sl)
		vk_stream_abort(c.s, c.sl);
	return rc;
}

void vk_dm_stream_free(vk_devmem *m, uint32_t stream)
{
	vk_stream *s = vk_stream_get(&m->streams, stream, 0, NULL, 0);

	if (!s)
		return;
	vk_stream_sync(s);
	/* Buffers freed while its work ran are done with now. */
	vk_dm_collect(m);
	/* Its last submission came after every earlier one on the queue and
	 * is done: nothing submitted so far is in flight. */
	if (m->last == s)
		m->last = NULL;
	vk_streams_drop(&m->streams, stream);
}
