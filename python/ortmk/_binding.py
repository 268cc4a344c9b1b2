"""IOBinding: ONNX Runtime's io binding over ortmk_io_binding
(docs/DEVICE.md).  Inputs are numpy arrays (copied into shared memory once,
when bound) or OrtValues (host or device, bound as they are); outputs go to
the host or a provider's device memory ('cuda', 'vulkan') each run, or into
an OrtValue."""
from . import _ortmk
from ._session import OrtValue, _device_provider


class IOBinding:
    def __init__(self, session):
        self._session = session
        self._b = _ortmk.Binding(session._sess)

    def bind_cpu_input(self, name, arr_on_cpu):
        self._b.bind_input(name, arr_on_cpu)

    def bind_input(self, name, device_type, device_id, element_type, shape, buffer_ptr):
        raise NotImplementedError("ortmk cannot bind raw pointers: use bind_cpu_input or "
                                  "bind_ortvalue_input")

    def bind_ortvalue_input(self, name, ortvalue):
        self._b.bind_input(name, ortvalue._v)

    def bind_output(self, name, device_type="cpu", device_id=0, element_type=None, shape=None,
                    buffer_ptr=None):
        """The output goes to device_type's memory ('cpu': the host), in a
        new value of whatever shape each run gives it."""
        if buffer_ptr is not None:
            raise NotImplementedError("ortmk cannot bind raw pointers: use "
                                      "bind_ortvalue_output")
        self._b.bind_output(name, _device_provider(device_type) or "cpu")

    def bind_ortvalue_output(self, name, ortvalue):
        """The output is written into ortvalue (its type and shape must be
        the output's)."""
        self._b.bind_output_value(name, ortvalue._v)

    def get_outputs(self):
        """The last run's outputs as OrtValues (where they were bound)."""
        return [OrtValue(v) for v in self._b.outputs(False)]

    def get_outputs_names(self):
        return self._b.output_names()

    def copy_outputs_to_cpu(self):
        """The last run's outputs copied to the host: ndarrays (lists for
        sequences, None for an empty optional)."""
        return self._b.outputs(True)

    def clear_binding_inputs(self):
        self._b.clear_inputs()

    def clear_binding_outputs(self):
        self._b.clear_outputs()

    def synchronize_inputs(self):
        self._b.synchronize(False)

    def synchronize_outputs(self):
        self._b.synchronize(True)
