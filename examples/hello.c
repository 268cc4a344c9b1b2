/* hello: the README's C example, built so that it stays true. */
#include <ortmk/ortmk.h>
#include <stdio.h>

int main(void)
{
	ortmk_env *env; ortmk_session *s; ortmk_value *x, *y;
	int64_t shape[4] = {1, 3, 32, 32};
	const char *in[] = {"image"}, *out[] = {"probs"};

	if (ortmk_env_create(&env) ||
	    ortmk_session_create(env, "build/examples/cnn_example.onnx", NULL, &s) ||
	    ortmk_value_create(env, ORTMK_FLOAT, shape, 4, &x))
		return fprintf(stderr, "%s\n", ortmk_last_error()), 1;
	float *px = ortmk_value_data(x);          /* shared memory: zero copy */
	for (int i = 0; i < 3 * 32 * 32; i++) px[i] = (i % 7) / 7.0f;
	if (ortmk_session_run(s, in, (const ortmk_value *const[]){x}, 1, out, 1, &y))
		return fprintf(stderr, "%s\n", ortmk_last_error()), 1;
	printf("p[0] = %f\n", ((const float *)ortmk_value_data_const(y))[0]);
	ortmk_value_destroy(y); ortmk_value_destroy(x);
	ortmk_session_destroy(s); ortmk_env_destroy(env);
	return 0;
}
