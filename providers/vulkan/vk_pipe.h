/*
 * vk_pipe: one compute pipeline per shader, created on first use from the
 * embedded SPIR-V through the device's pipeline cache.  Every pipeline
 * takes its tensors as storage buffers at bindings 0..n-1 of set 0 and its
 * parameters as up to VKX_PUSH_BYTES of push constants.
 */
#ifndef ORTMK_VK_PIPE_H
#define ORTMK_VK_PIPE_H

#include "vk_device.h"

#define VKX_PUSH_BYTES 128

enum vk_pipe_id {
	VKP_UNARY, VKP_BINARY, VKP_GEMM, VKP_GEMM_DIRECT, VKP_CONV, VKP_CONV_DIRECT, VKP_POOL, VKP_REDUCE, VKP_SOFTMAX,
	VKP_LAYERNORM, VKP_BATCHNORM, VKP_TRANSPOSE, VKP_COPY, VKP_GATHER, VKP_COUNT,
	/* id + VKP_F16: the same shader over float16 tensors (NAME_f16) */
	VKP_F16 = VKP_COUNT, VKP_ALL = 2 * VKP_COUNT
};

typedef struct vk_pipe {
	VkDescriptorSetLayout dsl;
	VkPipelineLayout layout;
	VkPipeline pipe;
	int n_bind;
} vk_pipe;

typedef struct vk_pipes {
	vk_pipe p[VKP_ALL];
} vk_pipes;

/* The pipeline `id` (< VKP_ALL), created if needed; NULL with the reason in err. */
const vk_pipe *vk_pipe_get(vk_dev *d, vk_pipes *ps, int id, char *err, size_t n);
/* Storage buffers pipeline `id` binds. */
int vk_pipe_bindings(int id);
void vk_pipes_fini(vk_dev *d, vk_pipes *ps);

#endif
