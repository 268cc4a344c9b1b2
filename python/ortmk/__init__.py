"""ortmk: an ONNX inference runtime whose execution providers run as
separate processes, with ONNX Runtime's Python interface.

    import ortmk as ort
    s = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    y, = s.run(None, {"x": x})

docs/PYTHON.md says what maps to what and what differs.
"""
import atexit as _atexit

from . import _ortmk
from ._errors import (OrtmkError, InvalidArgument, ModelError, NotImplementedByProviders,
                      NotImplemented_, InvalidInput, ProviderDied, ProviderError, ProtocolError,
                      Timeout, NoMemory, IOFailure, InternalError, Unavailable, Cancelled)
from ._options import ExecutionMode, GraphOptimizationLevel, RunOptions, SessionOptions
from ._session import InferenceSession, ModelMetadata, NodeArg, OrtValue, ort_provider_name
from ._binding import IOBinding

__version__ = _ortmk.version()

__all__ = [
    "InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel",
    "ExecutionMode", "IOBinding", "OrtValue", "NodeArg", "ModelMetadata",
    "get_available_providers", "get_all_providers", "get_version", "get_device",
    "set_default_logger_severity", "OrtmkError", "InvalidArgument", "ModelError",
    "NotImplementedByProviders", "NotImplemented_", "InvalidInput", "ProviderDied",
    "ProviderError", "ProtocolError", "Timeout", "NoMemory", "IOFailure", "InternalError",
    "Unavailable",
    "Cancelled",
]


def get_available_providers():
    """The providers this installation can start, in ONNX Runtime's naming
    and priority order (device providers first, cpu last), so that
    ``providers=get_available_providers()`` prefers a GPU as it does with
    ONNX Runtime.  Whether a device is present is known once one starts."""
    names = [ort_provider_name(p) for p in _ortmk.available_providers()]
    order = get_all_providers()
    return sorted(names, key=lambda n: order.index(n) if n in order else len(order))


def get_all_providers():
    return ["CUDAExecutionProvider", "VulkanExecutionProvider", "CPUExecutionProvider"]


def get_version():
    return _ortmk.version()


def get_device():
    return "CPU"


def set_default_logger_severity(level):
    """The log severity (0 verbose .. 4 fatal) of the process-wide
    environment; it applies when the environment is created (with the
    first session), so call this first."""
    if not _ortmk.set_log_severity(int(level)):
        import warnings
        warnings.warn("ortmk: the environment exists already; its log severity stays",
                      stacklevel=2)


# One environment per process, as ONNX Runtime's OrtEnv: dropped at exit,
# destroyed once the last session or value using it is gone.
_atexit.register(_ortmk._shutdown)
