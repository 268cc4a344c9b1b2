// elem.glsl: the element type of the tensors a shader reads and writes,
// included right after #version.  Built twice (meson.build): as is, the
// tensors are float32; with -DF16 they are float16 in memory
// (VK_KHR_16bit_storage's storageBuffer16BitAccess: loads and stores
// only) and every shader still computes in float32: LD() widens what it
// reads, ST() narrows what it writes.
#ifdef F16
#extension GL_EXT_shader_16bit_storage : require
#define ELEM float16_t
#else
#define ELEM float
#endif
#define LD(v) float(v)
#define ST(v) ELEM(v)
