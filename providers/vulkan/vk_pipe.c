/*
 * vk_pipe: compute pipelines from the embedded SPIR-V (see vk_pipe.h).
 */
#include "vk_pipe.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "vk_spirv.h"

static const struct {
	const char *shader;
	int n_bind;
} pipe_table[VKP_COUNT] = {
	[VKP_UNARY] = {"unary", 2},
	[VKP_BINARY] = {"binary", 3},
	[VKP_GEMM] = {"gemm", 4},
	[VKP_GEMM_DIRECT] = {"gemm_direct", 4},
	[VKP_CONV] = {"conv", 4},
	[VKP_CONV_DIRECT] = {"conv_direct", 4},
	[VKP_POOL] = {"pool", 2},
	[VKP_REDUCE] = {"reduce", 2},
	[VKP_SOFTMAX] = {"softmax", 2},
	[VKP_LAYERNORM] = {"layernorm", 6},
	[VKP_BATCHNORM] = {"batchnorm", 6},
	[VKP_TRANSPOSE] = {"transpose", 2},
	[VKP_COPY] = {"copy", 2},
	[VKP_GATHER] = {"gather", 3},
};

int vk_pipe_bindings(int id)
{
	return id >= 0 && id < VKP_ALL ? pipe_table[id % VKP_COUNT].n_bind : 0;
}

static const vk_spirv *find_spirv(const char *name)
{
	for (size_t i = 0; i < vk_spirv_count; i++)
		if (strcmp(vk_spirv_table[i].name, name) == 0)
			return &vk_spirv_table[i];
	return NULL;
}

static VkResult make_layouts(vk_dev *d, vk_pipe *p, int n_bind)
{
	VkDescriptorSetLayoutBinding b[VKX_MAX_BINDINGS];
	VkDescriptorSetLayoutCreateInfo dci = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
		.bindingCount = (uint32_t)n_bind,
		.pBindings = b,
	};
	VkPushConstantRange pc = {
		.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
		.offset = 0,
		.size = VKX_PUSH_BYTES,
	};
	VkPipelineLayoutCreateInfo lci = {
		.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
		.setLayoutCount = 1,
		.pSetLayouts = &p->dsl,
		.pushConstantRangeCount = 1,
		.pPushConstantRanges = &pc,
	};
	VkResult r;

	for (int i = 0; i < n_bind; i++)
		b[i] = (VkDescriptorSetLayoutBinding){
			.binding = (uint32_t)i,
			.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.descriptorCount = 1,
			.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
		};
	r = vkCreateDescriptorSetLayout(d->dev, &dci, NULL, &p->dsl);
	if (r == VK_SUCCESS)
		r = vkCreatePipelineLayout(d->dev, &lci, NULL, &p->layout);
	return r;
}

static VkResult make_pipeline(vk_dev *d, vk_pipe *p, const vk_spirv *sp)
{
	VkShaderModuleCreateInfo mci = {
		.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
		.codeSize = sp->size,
		.pCode = sp->code,
	};
	VkShaderModule mod;
	VkResult r = vkCreateShaderModule(d->dev, &mci, NULL, &mod);
	VkComputePipelineCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		.stage = {
			.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
			.stage = VK_SHADER_STAGE_COMPUTE_BIT,
			.module = mod,
			.pName = "main",
		},
		.layout = p->layout,
	};

	if (r != VK_SUCCESS)
		return r;
	r = vkCreateComputePipelines(d->dev, d->cache, 1, &ci, NULL, &p->pipe);
	vkDestroyShaderModule(d->dev, mod, NULL);
	if (r == VK_SUCCESS)
		d->cache_dirty = 1;
	return r;
}

const vk_pipe *vk_pipe_get(vk_dev *d, vk_pipes *ps, int id, char *err, size_t n)
{
	vk_pipe *p = &ps->p[id];
	const vk_spirv *sp;
	char name[64];
	VkResult r;

	if (p->pipe)
		return p;
	snprintf(name, sizeof(name), "%s%s", pipe_table[id % VKP_COUNT].shader,
		 id >= VKP_F16 ? "_f16" : "");
	sp = find_spirv(name);
	if (!sp) {
		snprintf(err, n, "shader '%s' is not in this binary", name);
		return NULL;
	}
	p->n_bind = pipe_table[id % VKP_COUNT].n_bind;
	r = p->layout ? VK_SUCCESS : make_layouts(d, p, p->n_bind);
	if (r == VK_SUCCESS)
		r = make_pipeline(d, p, sp);
	if (r != VK_SUCCESS) {
		snprintf(err, n, "pipeline '%s': %s", sp->name, vk_result_name(r));
		return NULL;
	}
	ipc_log(IPC_LOG_DEBUG, "pipeline '%s' ready", sp->name);
	return p;
}

void vk_pipes_fini(vk_dev *d, vk_pipes *ps)
{
	for (int i = 0; i < VKP_ALL; i++) {
		vk_pipe *p = &ps->p[i];

		if (p->pipe)
			vkDestroyPipeline(d->dev, p->pipe, NULL);
		if (p->layout)
			vkDestroyPipelineLayout(d->dev, p->layout, NULL);
		if (p->dsl)
			vkDestroyDescriptorSetLayout(d->dev, p->dsl, NULL);
	}
	memset(ps, 0, sizeof(*ps));
}
