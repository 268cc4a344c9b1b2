"""The GIL is released while a run waits for its provider: another Python
thread makes progress meanwhile, and runs from several threads on one
session give each its own right answer."""
import threading
import time

import numpy as np

import ortmk
from helpers import matmul_model, save


def test_gil_released_during_run(tmp_path):
    m, w = matmul_model(1024)
    o = ortmk.SessionOptions()
    o.intra_op_num_threads = 1
    s = ortmk.InferenceSession(save(m, tmp_path), o)
    x = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
    s.run(None, {"x": x})                                # warm up
    t0 = time.perf_counter()
    s.run(None, {"x": x})
    single = time.perf_counter() - t0

    stop = threading.Event()
    ticks = []

    def count():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    counter = threading.Thread(target=count)
    counter.start()
    time.sleep(0.05)
    t0 = time.perf_counter()
    y, = s.run(None, {"x": x})
    t1 = time.perf_counter()
    stop.set()
    counter.join()
    np.testing.assert_allclose(y, x @ w, rtol=1e-3, atol=1e-2)
    during = [t for t in ticks if t0 <= t <= t1]
    # Held through the run, the GIL would let the counter tick only at the
    # run's edges; released, it ticks throughout (the last tick near the end).
    assert single > 0.005
    assert len(during) > 1000, (len(during), single)
    assert during[-1] - during[0] > 0.5 * (t1 - t0), (during[0] - t0, t1 - during[-1])


def test_concurrent_runs_one_session(tmp_path):
    m, w = matmul_model(64)
    s = ortmk.InferenceSession(save(m, tmp_path))
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(20):
                x = rng.standard_normal((64, 64)).astype(np.float32)
                y, = s.run(None, {"x": x})
                np.testing.assert_allclose(y, x @ w, rtol=1e-4, atol=1e-3)
        except Exception as e:      # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
