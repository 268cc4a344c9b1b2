"""SessionOptions, RunOptions and the enums ONNX Runtime code sets on them.

A SessionOptions becomes a list of (key, value) strings for
ortmk_session_options_set (see ``entries()``): the ONNX Runtime attributes
ortmk has a meaning for are translated, ortmk's own keys are attributes too
(``run_timeout_ms``, ``retry``, ...), and ``add_session_config_entry`` passes
any other ortmk key through.  Attributes ortmk has no use for are accepted
and ignored, as docs/PYTHON.md lists.
"""
import enum
import warnings

from . import _ortmk
from ._errors import InvalidArgument


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


_OPT_LEVEL = {0: "disable", 1: "basic", 2: "extended", 99: "all"}

# ortmk's own session option keys, settable as attributes.
_ORTMK_KEYS = ("run_timeout_ms", "retry", "strict_placement", "save_prepacked",
               "crash_loop_n", "crash_loop_window_ms")

# Config keys in ONNX Runtime's namespaces: accepted, with a warning, and
# not passed on (ortmk has no such keys).
_ORT_PREFIXES = ("session.", "ep.", "optimization.", "mlas.", "kernel.")


_SESSION_ATTRS = frozenset((
    "intra_op_num_threads", "inter_op_num_threads", "graph_optimization_level",
    "execution_mode", "log_severity_level", "log_verbosity_level", "logid",
    "enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse",
    "use_deterministic_compute", "enable_profiling", "optimized_model_filepath") + _ORTMK_KEYS)


def _as_option(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


class SessionOptions:
    """ONNX Runtime's SessionOptions, mapped on ortmk's session options."""

    def __init__(self):
        self.intra_op_num_threads = 0      # 0: ortmk's default (the cores)
        self.inter_op_num_threads = 0      # ignored: one run's nodes go in order
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self.enable_profiling = False
        self.optimized_model_filepath = ""
        self._log_set = False
        self._config = {}
        for key in _ORTMK_KEYS:
            object.__setattr__(self, key, None)

    def __setattr__(self, name, value):
        if not name.startswith("_") and name not in _SESSION_ATTRS:
            raise AttributeError("SessionOptions has no attribute %r" % name)
        if name == "log_severity_level":
            if not 0 <= int(value) <= 4:
                raise InvalidArgument("log_severity_level must be 0..4, not %r" % (value,))
            object.__setattr__(self, "_log_set", True)
        elif name == "graph_optimization_level" and int(value) not in _OPT_LEVEL:
            raise InvalidArgument("graph_optimization_level: not a GraphOptimizationLevel: %r"
                                  % (value,))
        elif name == "enable_profiling" and value:
            raise NotImplementedError("ortmk: profiling is not implemented "
                                      "(ort-trace records what crosses the process boundary)")
        elif name == "optimized_model_filepath" and value:
            raise NotImplementedError("ortmk does not write optimized models")
        object.__setattr__(self, name, value)

    def add_session_config_entry(self, key, value):
        """An ortmk session option (ortmk_session_options_set); keys in ONNX
        Runtime's namespaces ("session.", "ep.", ...) are ignored."""
        if key.startswith(_ORT_PREFIXES):
            warnings.warn("ortmk ignores ONNX Runtime's config entry %r" % key, stacklevel=2)
        self._config[key] = _as_option(value)

    def get_session_config_entry(self, key):
        if key not in self._config:
            raise InvalidArgument("SessionOptions: no config entry %r" % key)
        return self._config[key]

    def log_severity(self):
        """The severity for the environment, -1 when never set."""
        return int(self.log_severity_level) if self._log_set else -1

    def entries(self):
        """The (key, value) pairs for ortmk_session_options_set."""
        out = []
        if self.intra_op_num_threads and int(self.intra_op_num_threads) > 0:
            out.append(("threads", str(int(self.intra_op_num_threads))))
        out.append(("graph_optimization_level", _OPT_LEVEL[int(self.graph_optimization_level)]))
        for key in _ORTMK_KEYS:
            value = getattr(self, key)
            if value is not None:
                out.append((key, _as_option(value)))
        for key, value in self._config.items():
            if not key.startswith(_ORT_PREFIXES):
                out.append((key, value))
        return out


class RunOptions:
    """ONNX Runtime's RunOptions over ortmk_run_options: ``terminate = True``
    from another thread makes the runs using these options raise
    ortmk.Cancelled (between nodes; the provider stays up) until it is set
    back to False; ``run_tag`` labels the run in ort-trace; ``timeout_ms``
    (ortmk's) is the run's deadline.  The log levels are kept but not used."""

    def __init__(self):
        self._ro = _ortmk.RunOptions()
        self._tag = ""
        self._terminate = False
        self._timeout_ms = 0
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.only_execute_path_to_fetches = False
        self._config = {}

    @property
    def terminate(self):
        return self._terminate

    @terminate.setter
    def terminate(self, value):
        self._terminate = bool(value)
        self._ro.set_terminate(self._terminate)

    @property
    def run_tag(self):
        return self._tag

    @run_tag.setter
    def run_tag(self, value):
        self._ro.set_tag(str(value))
        self._tag = str(value)

    @property
    def timeout_ms(self):
        return self._timeout_ms

    @timeout_ms.setter
    def timeout_ms(self, value):
        self._ro.set_timeout_ms(int(value))
        self._timeout_ms = int(value)

    def add_run_config_entry(self, key, value):
        self._config[key] = _as_option(value)

    def get_run_config_entry(self, key):
        if key not in self._config:
            raise InvalidArgument("RunOptions: no config entry %r" % key)
        return self._config[key]
