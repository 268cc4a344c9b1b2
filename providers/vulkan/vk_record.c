/*
 * vk_record: turns a planned run into one command buffer (uploads, then
 * the dispatches with barriers where needed, then downloads), submits it
 * and waits; and uploads weights at load through the staging buffer in
 * chunks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "vk_exec.h"

#define STAGE_ALIGN 64
#define WEIGHT_CHUNK ((VkDeviceSize)16 << 20)

static void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src, VkAccessFlags src_access,
		    VkPipelineStageFlags dst, VkAccessFlags dst_access)
{
	VkMemoryBarrier mb = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = src_access,
		.dstAccessMask = dst_access,
	};

	vkCmdPipelineBarrier(cmd, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

static void copy(VkCommandBuffer cmd, VkBuffer src, VkDeviceSize src_off, VkBuffer dst,
		 VkDeviceSize dst_off, VkDeviceSize n)
{
	VkBufferCopy region = {.srcOffset = src_off, .dstOffset = dst_off, .size = n};

	vkCmdCopyBuffer(cmd, src, dst, 1, &region);
}

static int overlaps(const vk_buf *a, const vk_buf *b)
{
	return a->ptr == b->ptr && a->off < b->off + b->size && b->off < a->off + a->size;
}

/* Buffers written by dispatches since the last barrier. */
typedef struct hazards {
	vk_buf *w;
	size_t n, cap;
} hazards;

static int needs_barrier(const hazards *h, const vk_dispatch *d)
{
	for (int i = 0; i < d->n_bufs; i++)
		for (size_t k = 0; k < h->n; k++)
			if (overlaps(&d->bufs[i], &h->w[k]))
				return 1;
	return 0;
}

static int note_writes(hazards *h, const vk_dispatch *d)
{
	for (int i = 0; i < d->n_bufs; i++) {
		if (!(d->writes & (1u << i)))
			continue;
		if (h->n == h->cap) {
			size_t cap = h->cap ? 2 * h->cap : 16;
			vk_buf *nw = realloc(h->w, cap * sizeof(*nw));

			if (!nw)
				return -1;
			h->w = nw;
			h->cap = cap;
		}
		h->w[h->n++] = d->bufs[i];
	}
	return 0;
}

static int bind_set(vk_dev *d, const vk_pipe *p, const vk_dispatch *dp, char *err, size_t n)
{
	VkDescriptorSetAllocateInfo ai = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
		.descriptorPool = d->dpool,
		.descriptorSetCount = 1,
		.pSetLayouts = &p->dsl,
	};
	VkDescriptorBufferInfo bi[VKX_MAX_BINDINGS];
	VkWriteDescriptorSet w[VKX_MAX_BINDINGS];
	VkDescriptorSet set;
	VkResult r = vkAllocateDescriptorSets(d->dev, &ai, &set);

	if (r != VK_SUCCESS)
		return snprintf(err, n, "vkAllocateDescriptorSets: %s", vk_result_name(r)), -1;
	for (int i = 0; i < dp->n_bufs; i++) {
		bi[i] = (VkDescriptorBufferInfo){dp->bufs[i].ptr, dp->bufs[i].off, dp->bufs[i].size};
		w[i] = (VkWriteDescriptorSet){
			.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
			.dstSet = set,
			.dstBinding = (uint32_t)i,
			.descriptorCount = 1,
			.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.pBufferInfo = &bi[i],
		};
	}
	vkUpdateDescriptorSets(d->dev, (uint32_t)dp->n_bufs, w, 0, NULL);
	vkCmdBindDescriptorSets(d->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0,
				NULL);
	return 0;
}

/* ORTMK_VULKAN_PROFILE=1: a timestamp after every dispatch, and a debug
 * line per dispatch with its pipeline and device time. */
static VkQueryPool profile_pool(dk_exec *ex)
{
	static int on = -1;
	VkQueryPoolCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
		.queryType = VK_QUERY_TYPE_TIMESTAMP,
		.queryCount = (uint32_t)ex->work.n + 1,
	};
	VkQueryPool qp;

	if (on < 0) {
		const char *e = getenv("ORTMK_VULKAN_PROFILE");

		on = e && strcmp(e, "1") == 0 && vk_ep_of(ex)->dev.props.limits.timestampComputeAndGraphics;
	}
	if (!on || vkCreateQueryPool(vk_ep_of(ex)->dev.dev, &ci, NULL, &qp) != VK_SUCCESS)
		return VK_NULL_HANDLE;
	vkCmdResetQueryPool(vk_ep_of(ex)->dev.cmd, qp, 0, ci.queryCount);
	vkCmdWriteTimestamp(vk_ep_of(ex)->dev.cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qp, 0);
	return qp;
}

static void profile_report(dk_exec *ex, VkQueryPool qp)
{
	static const char *const names[VKP_COUNT] = {"unary", "binary", "gemm", "gemm_direct", "conv", "conv_direct", "pool",
		"reduce", "softmax", "layernorm", "batchnorm", "transpose", "copy", "gather"};
	uint64_t *t = calloc(ex->work.n + 1, sizeof(uint64_t));
	double ns = vk_ep_of(ex)->dev.props.limits.timestampPeriod;

	if (t && vkGetQueryPoolResults(vk_ep_of(ex)->dev.dev, qp, 0, (uint32_t)ex->work.n + 1,
				       (ex->work.n + 1) * sizeof(uint64_t), t, sizeof(uint64_t),
				       VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) == VK_SUCCESS)
		for (size_t i = 0; i < ex->work.n; i++) {
			const vk_dispatch *d = &((vk_dispatch *)ex->work.v)[i];

			ipc_log(IPC_LOG_DEBUG, "dispatch %zu %-9s %5ux%ux%u groups %9.3f ms", i,
				names[d->pipe % VKP_COUNT], d->groups[0], d->groups[1], d->groups[2],
				(double)(t[i + 1] - t[i]) * ns / 1e6);
		}
	free(t);
	vkDestroyQueryPool(vk_ep_of(ex)->dev.dev, qp, NULL);
}

static int record_dispatches(dk_exec *ex, VkQueryPool qp, char *err, size_t n)
{
	vk_ep *ep = vk_ep_of(ex);
	hazards h = {0};
	int last = -1, rc = 0;

	for (size_t i = 0; i < ex->work.n && rc == 0; i++) {
		const vk_dispatch *dp = &((vk_dispatch *)ex->work.v)[i];
		const vk_pipe *p = vk_pipe_get(&ep->dev, &ep->pipes, dp->pipe, err, n);

		if (!p) {
			rc = -1;
			break;
		}
		if (needs_barrier(&h, dp)) {
			barrier(ep->dev.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
				VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
				VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
			h.n = 0;
		}
		if (dp->pipe != last)
			vkCmdBindPipeline(ep->dev.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipe);
		last = dp->pipe;
		rc = bind_set(&ep->dev, p, dp, err, n);
		if (rc == 0) {
			vkCmdPushConstants(ep->dev.cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
					   VKX_PUSH_BYTES, dp->push);
			vkCmdDispatch(ep->dev.cmd, dp->groups[0], dp->groups[1], dp->groups[2]);
			if (qp)
				vkCmdWriteTimestamp(ep->dev.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp,
						    (uint32_t)i + 1);
			rc = note_writes(&h, dp) ? snprintf(err, n, "out of memory"), -1 : 0;
		}
	}
	free(h.w);
	return rc;
}

/* Bytes of a transfer on the device (and in staging). */
static VkDeviceSize dev_bytes(const dk_xfer *x)
{
	return x->f16 ? 2 * x->nbytes : x->nbytes;
}

/* Places every transfer in the staging buffer; returns the bytes needed. */
static VkDeviceSize layout_staging(dk_list *l, VkDeviceSize at)
{
	for (size_t i = 0; i < l->n; i++) {
		dk_xfer *x = &((dk_xfer *)l->v)[i];

		x->stage_off = at;
		at += (dev_bytes(x) + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
	}
	return at;
}

static void record_copies(dk_exec *ex, int download)
{
	const dk_list *l = download ? &ex->down : &ex->up;
	vk_staging *s = &vk_ep_of(ex)->staging;

	for (size_t i = 0; i < l->n; i++) {
		const dk_xfer *x = &((const dk_xfer *)l->v)[i];

		if (download)
			copy(vk_ep_of(ex)->dev.cmd, x->dev.ptr, x->dev.off, s->buf, x->stage_off, dev_bytes(x));
		else
			copy(vk_ep_of(ex)->dev.cmd, s->buf, x->stage_off, x->dev.ptr, x->dev.off, dev_bytes(x));
	}
}

int vk_record_and_run(dk_exec *ex, char *err, size_t n)
{
	vk_ep *ep = vk_ep_of(ex);
	VkCommandBuffer cmd = ep->dev.cmd;
	VkDeviceSize need = layout_staging(&ex->down, layout_staging(&ex->up, 0));
	VkQueryPool qp;

	if (vk_staging_reserve(&ep->dev, &ep->staging, need, err, n) ||
	    vk_dev_reset_descriptors(&ep->dev, (uint32_t)ex->work.n, err, n) ||
	    vk_dev_begin(&ep->dev, err, n))
		return EP_E_NOMEM;
	/* What earlier submissions on the queue wrote (other streams' copies
	 * included) is visible to this one. */
	barrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
		VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
	for (size_t i = 0; i < ex->up.n; i++) {
		const dk_xfer *x = &((const dk_xfer *)ex->up.v)[i];

		if (x->f16)
			vk_f16_widen((float *)(ep->staging.map + x->stage_off), x->host, x->nbytes / 2);
		else
			memcpy(ep->staging.map + x->stage_off, x->host, x->nbytes);
	}
	record_copies(ex, 0);
	if (ex->up.n)
		barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
			VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
			VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
			VK_ACCESS_TRANSFER_READ_BIT);
	qp = profile_pool(ex);
	if (record_dispatches(ex, qp, err, n)) {
		vkEndCommandBuffer(cmd);
		if (qp)
			vkDestroyQueryPool(ep->dev.dev, qp, NULL);
		return EP_E_INTERNAL;
	}
	if (ex->down.n || ex->d2d.n) {
		barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
			VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
			VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
		for (size_t i = 0; i < ex->d2d.n; i++) {
			const dk_d2d *c = &((const dk_d2d *)ex->d2d.v)[i];

			copy(cmd, c->src.ptr, c->src.off, c->dst.ptr, c->dst.off, c->nbytes);
		}
	}
	if (ex->down.n) {
		record_copies(ex, 1);
		barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
			VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
	}
	if (vk_dev_submit_wait_on(&ep->dev, (VkSemaphore)ex->wait, ex->wait_value, err, n)) {
		if (qp)
			vkDestroyQueryPool(ep->dev.dev, qp, NULL);
		return EP_E_INTERNAL;
	}
	if (qp)
		profile_report(ex, qp);
	for (size_t i = 0; i < ex->down.n; i++) {
		const dk_xfer *x = &((const dk_xfer *)ex->down.v)[i];

		if (x->f16)
			vk_f16_narrow(x->host, (const float *)(ep->staging.map + x->stage_off),
				      x->nbytes / 2);
		else
			memcpy(x->host, ep->staging.map + x->stage_off, x->nbytes);
	}
	return 0;
}

/* ---- weights at load ------------------------------------------------------ */

/* n bytes of weight w from `off` into dst: from the external-data file
 * with pread (the core hands over the descriptor, never the bytes), else
 * from the shared-memory segment. */
static int read_weight(const ep_weight *w, uint64_t off, void *dst, size_t len)
{
	size_t done = 0;

	if (w->fd < 0) {
		memcpy(dst, (const uint8_t *)w->data + off, len);
		return 0;
	}
	while (done < len) {
		ssize_t r = pread(w->fd, (uint8_t *)dst + done, len - done,
				  (off_t)(w->file_offset + off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

int vk_upload_flush(vk_uploader *u, char *err, size_t n)
{
	vk_dev *d = &u->ep->dev;

	if (!u->pending.n)
		return 0;
	if (vk_dev_begin(d, err, n))
		return -1;
	for (size_t i = 0; i < u->pending.n; i++) {
		const dk_xfer *x = &((const dk_xfer *)u->pending.v)[i];

		copy(d->cmd, u->ep->staging.buf, x->stage_off, x->dev.ptr, x->dev.off, x->nbytes);
	}
	u->pending.n = 0;
	u->used = 0;
	return vk_dev_submit_wait(d, err, n);
}

int vk_upload_chunked(vk_uploader *u, const ep_weight *w, const vk_buf *dst, char *err, size_t n)
{
	uint64_t off = 0;

	if (vk_staging_reserve(&u->ep->dev, &u->ep->staging, WEIGHT_CHUNK, err, n))
		return -1;
	while (off < w->nbytes) {
		uint64_t len = w->nbytes - off;
		dk_xfer *x;

		if (u->used >= WEIGHT_CHUNK && vk_upload_flush(u, err, n))
			return -1;
		if (len > WEIGHT_CHUNK - u->used)
			len = WEIGHT_CHUNK - u->used;
		if (read_weight(w, off, u->ep->staging.map + u->used, len))
			return snprintf(err, n, "cannot read %llu bytes of external data",
					(unsigned long long)len), -1;
		x = dk_list_push(&u->pending);
		if (!x)
			return snprintf(err, n, "out of memory"), -1;
		x->dev = *dst;
		x->dev.off += off;
		x->stage_off = u->used;
		x->nbytes = len;
		u->used += (len + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
		off += len;
	}
	return 0;
}
