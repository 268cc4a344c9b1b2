"""InferenceSession and what it hands out (NodeArg, ModelMetadata,
OrtValue), shaped like ONNX Runtime's Python API over the _ortmk extension.

The extension does the work (C: python/py_*.c); this file translates names
(provider names, type strings), normalizes feeds to the model's types and
keeps ONNX Runtime's calling conventions.
"""
import os
import warnings

import numpy as np

from . import _ortmk
from ._errors import InvalidArgument
from ._options import RunOptions, SessionOptions

# ONNX Runtime's provider names and ortmk's.
_ORT_NAMES = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider",
              "vulkan": "VulkanExecutionProvider"}
_ORTMK_NAMES = {v: k for k, v in _ORT_NAMES.items()}

# ONNX element type numbers: their ONNX Runtime names and numpy types.
_TYPE_NAMES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
               7: "int64", 8: "string", 9: "bool", 10: "float16", 11: "double",
               12: "uint32", 13: "uint64", 16: "bfloat16"}
_NUMPY = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
          7: np.int64, 8: np.object_, 9: np.bool_, 10: np.float16, 11: np.float64,
          12: np.uint32, 13: np.uint64, 16: np.uint16}
_TENSOR, _SEQUENCE = 0, 1


def ort_provider_name(name):
    return _ORT_NAMES.get(name, name)


def ortmk_provider_name(name):
    """ortmk's name for a provider given either way; None for a provider of
    ONNX Runtime that ortmk does not have."""
    if name in _ORTMK_NAMES:
        return _ORTMK_NAMES[name]
    if name.endswith("ExecutionProvider"):
        return None
    return name.lower()


def _onnx_type(dtype):
    """The ONNX element type number of a numpy dtype."""
    dtype = np.dtype(dtype).newbyteorder("=")
    if dtype.kind in "USO":
        return 8
    for num, t in _NUMPY.items():
        if num != 16 and np.dtype(t) == dtype:
            return num
    raise InvalidArgument("numpy dtype %s has no ONNX type" % dtype)


def _type_string(kind, optional, dtype, map_key=0):
    s = "tensor(%s)" % _TYPE_NAMES.get(dtype, "undefined")
    if map_key:
        s = "map(%s,%s)" % (_TYPE_NAMES.get(map_key, "undefined"), s)
    if kind == _SEQUENCE:
        s = "seq(%s)" % s
    return "optional(%s)" % s if optional else s


class NodeArg:
    """An input or output of the model: name, shape (ints, symbolic dims as
    their name, None for an unknown dim; [] for a scalar, an unknown rank or
    a sequence, as ONNX Runtime gives), type ("tensor(float)", ...)."""

    def __init__(self, meta):
        self.name = meta["name"]
        self.type = _type_string(meta["kind"], meta["optional"], meta["dtype"],
                                 meta.get("map_key_dtype", 0))
        self.shape = []
        if meta["kind"] == _TENSOR and meta["dims"] is not None:
            self.shape = [name if d < 0 and name else (None if d < 0 else d)
                          for d, name in zip(meta["dims"], meta["dim_names"])]
        self._meta = meta

    def __repr__(self):
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


class ModelMetadata:
    """The model's own description (ONNX Runtime's ModelMetadata)."""

    def __init__(self, meta):
        self.producer_name = meta["producer_name"]
        self.producer_version = meta["producer_version"]
        self.graph_name = meta["graph_name"]
        self.domain = meta["domain"]
        self.description = meta["description"]
        self.graph_description = meta["graph_description"]
        self.version = meta["version"]
        self.custom_metadata_map = meta["custom_metadata_map"]


def _device_provider(device_type):
    """ONNX Runtime's device_type ('cpu', 'cuda', ...) as a provider name;
    None for the host."""
    name = str(device_type).lower()
    if name in ("cpu", "host"):
        return None
    if name in ("cuda", "gpu"):
        return "cuda"
    if name == "vulkan":
        return "vulkan"
    raise InvalidArgument("device_type %r: ortmk knows 'cpu', 'cuda' and 'vulkan'" % device_type)


class OrtValue:
    """A value ortmk holds (host or device memory), as ONNX Runtime's OrtValue."""

    def __init__(self, value):
        self._v = value

    @staticmethod
    def ortvalue_from_numpy(array, device_type="cpu", device_id=0):
        return OrtValue(_ortmk.Value(np.asarray(array), 0, _device_provider(device_type)))

    @staticmethod
    def ortvalue_from_shape_and_type(shape, element_type=np.float32, device_type="cpu",
                                     device_id=0):
        return OrtValue(_ortmk.Value.empty(list(shape), _onnx_type(element_type),
                                           _device_provider(device_type)))

    def numpy(self):
        """A copy on the host: ndarray, list of ndarrays (sequence) or None."""
        return self._v.numpy()

    def shape(self):
        return self._v.shape

    def data_type(self):
        return _type_string(self._v.kind, False, self._v.dtype)

    def element_type(self):
        return _NUMPY.get(self._v.dtype)

    def device_name(self):
        loc = self._v.location
        return "cpu" if loc == "host" else loc

    def is_tensor(self):
        return self._v.kind == _TENSOR

    def is_tensor_sequence(self):
        return self._v.kind == _SEQUENCE

    def has_value(self):
        return self._v.kind != 2


def _feed(meta, name, value):
    """value as the extension takes it for input `name` (meta: its
    signature, or None for a name the model does not have)."""
    if isinstance(value, OrtValue):
        return value._v
    if meta is None or value is None:
        return value
    if meta["kind"] == _SEQUENCE:
        if not isinstance(value, (list, tuple)):
            raise InvalidArgument("input '%s': a sequence input takes a list of arrays" % name)
        items = [_tensor(meta, name, v) for v in value]
        return items if items else _ortmk.Value([], meta["dtype"])
    return _tensor(meta, name, value)


def _tensor(meta, name, value):
    want = meta["dtype"]
    if not isinstance(value, np.ndarray):
        return np.asarray(value, dtype=_NUMPY.get(want))
    if want == 8:
        ok = value.dtype.kind in "USO"
    else:
        ok = want not in _NUMPY or value.dtype.newbyteorder("=") == np.dtype(_NUMPY[want])
    if not ok:
        raise InvalidArgument("input '%s': unexpected data type: actual %s, expected %s"
                              % (name, _type_string(0, False, _onnx_type_or_0(value.dtype)),
                                 _type_string(0, False, want)))
    return value


def _onnx_type_or_0(dtype):
    try:
        return _onnx_type(dtype)
    except InvalidArgument:
        return 0


class InferenceSession:
    """ONNX Runtime's InferenceSession on ortmk.

    path_or_bytes: a model file (str or os.PathLike) or a serialized model
    (bytes).  providers: names in priority order, ortmk's ("cpu", "vulkan",
    "cuda") or ONNX Runtime's ("CUDAExecutionProvider", ...), or (name,
    options) tuples; cpu is always the last fallback.  external_data_dir:
    where a model given as bytes finds its external data (None: refused).
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None,
                 external_data_dir=None, **kwargs):
        if kwargs:
            warnings.warn("ortmk ignores %s" % ", ".join(sorted(kwargs)), stacklevel=2)
        self._model = path_or_bytes
        self._ext_dir = external_data_dir
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        self._create(providers, provider_options)

    def _create(self, providers, provider_options):
        names, options = self._parse_providers(providers, provider_options)
        model = self._model
        if isinstance(model, os.PathLike):
            model = os.fspath(model)
        entries = [("providers", ",".join(names))] + self._sess_options.entries()
        ext_dir = os.fspath(self._ext_dir) if self._ext_dir is not None else None
        self._sess = _ortmk.Session(model, entries, ext_dir, self._sess_options.log_severity())
        self._provider_options = options
        self._inputs = [NodeArg(m) for m in self._sess.input_meta()]
        self._outputs = [NodeArg(m) for m in self._sess.output_meta()]
        self._input_meta = {a.name: a._meta for a in self._inputs}

    @staticmethod
    def _parse_providers(providers, provider_options):
        if not providers:
            providers = ["cpu"]
        if provider_options is not None and len(provider_options) != len(providers):
            raise InvalidArgument("provider_options: one dict per provider")
        names, options = [], {}
        for i, p in enumerate(providers):
            opts = provider_options[i] if provider_options is not None else {}
            if isinstance(p, (tuple, list)):
                p, opts = p
            name = ortmk_provider_name(p)
            if name is None:
                warnings.warn("ortmk has no %s: its nodes go to the next provider" % p,
                              stacklevel=3)
                continue
            names.append(name)
            options[ort_provider_name(name)] = {str(k): str(v) for k, v in dict(opts).items()}
        return names or ["cpu"], options

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_overridable_initializers(self):
        return []

    def get_modelmeta(self):
        return ModelMetadata(self._sess.metadata())

    def get_providers(self):
        """The providers the session uses, in ONNX Runtime's naming."""
        return [ort_provider_name(name) for name, _, _ in self._sess.providers()]

    def get_provider_options(self):
        return {p: dict(self._provider_options.get(p, {})) for p in self.get_providers()}

    def get_session_options(self):
        return self._sess_options

    def set_providers(self, providers=None, provider_options=None):
        """Creates the session again with other providers (as ONNX Runtime)."""
        self._create(providers, provider_options)

    def disable_fallback(self):
        pass

    def enable_fallback(self):
        pass

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model: a list with one ndarray (list for a sequence, None
        for an empty optional) per output name (None or []: every output)."""
        _check_run_options(run_options)
        feeds = {name: _feed(self._input_meta.get(name), name, value)
                 for name, value in input_feed.items()}
        return self._sess.run(list(output_names) if output_names else None, feeds,
                              run_options._ro if run_options is not None else None)

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        outs = self.run(output_names, input_dict_ort_values, run_options)
        return [OrtValue(_ortmk.Value(o, 0)) for o in outs]

    def io_binding(self):
        from ._binding import IOBinding
        return IOBinding(self)

    def run_with_iobinding(self, iobinding, run_options=None):
        _check_run_options(run_options)
        iobinding._b.run()

    def _provider_pids(self):
        """{provider: pid} of the processes serving this session (tests)."""
        return {name: pid for name, _, pid in self._sess.providers()}


def _check_run_options(run_options):
    if run_options is not None and not isinstance(run_options, RunOptions):
        raise InvalidArgument("run_options: a RunOptions")
