/*
 * vk_spirv: the compute shaders, compiled from the GLSL in shaders/ by glslc at
 * build time and embedded by gen_spirv.py (the generated vk_spirv.c).
 */
#ifndef ORTMK_VK_SPIRV_H
#define ORTMK_VK_SPIRV_H

#include <stddef.h>
#include <stdint.h>

typedef struct vk_spirv {
	const char *name;       /* the shader file's base name: "gemm" */
	const uint32_t *code;
	size_t size;            /* bytes */
} vk_spirv;

extern const vk_spirv vk_spirv_table[];
extern const size_t vk_spirv_count;

#endif
