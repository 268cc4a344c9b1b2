// mathf.glsl: float functions GLSL lacks or leaves imprecise, accurate to
// the ONNX test tolerance (rtol 1e-3, atol 1e-7) over the whole range.

// erf: the Maclaurin series for |x| < 0.5 (error < 1e-8, relative accuracy
// near 0 is what the tolerance needs); Abramowitz & Stegun 7.1.26 above
// (absolute error < 1.5e-7 where erf > 0.52).
float erf_f(float x)
{
	float a = abs(x);
	if (a < 0.5) {
		float z = x * x;
		float s = 1.0 / 9360.0;
		s = s * z - 1.0 / 1320.0;
		s = s * z + 1.0 / 216.0;
		s = s * z - 1.0 / 42.0;
		s = s * z + 1.0 / 10.0;
		s = s * z - 1.0 / 3.0;
		s = s * z + 1.0;
		return 1.1283791670955126 * x * s;
	}
	if (a >= 4.0)
		return sign(x);
	float t = 1.0 / (1.0 + 0.3275911 * a);
	float poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t +
		      0.254829592) * t;
	return sign(x) * (1.0 - poly * exp(-a * a));
}

// tanh: Cephes' odd polynomial for |x| < 0.625 (no cancellation near 0),
// 1 - 2 / (exp(2|x|) + 1) above (saturates cleanly to +-1).
float tanh_f(float x)
{
	float a = abs(x);
	if (a < 0.625) {
		float z = x * x;
		return ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z +
			 1.33314422036e-1) * z - 3.33332819422e-1) * z * x + x;
	}
	if (a > 20.0)
		return sign(x);
	return sign(x) * (1.0 - 2.0 / (exp(2.0 * a) + 1.0));
}

float sigmoid_f(float x)
{
	if (x >= 0.0)
		return 1.0 / (1.0 + exp(-x));
	float e = exp(x);
	return e / (1.0 + e);
}

bool odd_integer(float y)
{
	return y == floor(y) && abs(y) < 16777216.0 && (int(abs(y)) & 1) == 1;
}

// pow with C's special cases (x < 0 with an integer y, zeros, y = 0).
float pow_f(float x, float y)
{
	if (y == 0.0)
		return 1.0;
	if (y == 1.0)
		return x;
	if (y == 2.0)
		return x * x;
	if (y == 0.5 && x >= 0.0)
		return sqrt(x);
	if (isnan(x) || isnan(y))
		return x + y;
	if (x == 0.0) {
		if (y > 0.0)
			return odd_integer(y) ? x : 0.0;
		float inf = uintBitsToFloat(0x7f800000u);
		return odd_integer(y) ? (1.0 / x) : inf;
	}
	if (x < 0.0) {
		if (y != floor(y))
			return uintBitsToFloat(0x7fc00000u);
		float r = exp2(y * log2(-x));
		return odd_integer(y) ? -r : r;
	}
	return exp2(y * log2(x));
}

// div_f: x / y to within half an ulp.  Vulkan lets OpFDiv be off by 2.5
// ulp, and NVIDIA's is: a quotient that should land on .5 then rounds the
// other way in a following Round (the expanded DynamicQuantizeLinear case
// gave 25 for 26 on an H200).  One step on the exact FMA residual
// corrects it; infinities, NaN and zero quotients are already exact.
float div_f(float x, float y)
{
	float q = x / y;
	if (isinf(q) || isnan(q) || q == 0.0)
		return q;
	precise float r = fma(-q, y, x);
	return q + r / y;
}
