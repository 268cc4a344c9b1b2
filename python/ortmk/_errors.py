"""The exceptions ortmk raises: one class per ortmk_status, under OrtmkError.

Every exception carries the C library's status (``.status``, the number of
``ortmk_status``; ``.status_name``, e.g. ``"ORTMK_ERR_INPUT"``) and its
one-line message (``str(e)``, what ``ortmk_last_error()`` said on the thread
of the failing call).  Classes also derive from the built-in exception a
Python caller would catch for that kind of failure (ValueError for a bad
argument or input, MemoryError, OSError for I/O, TimeoutError).
"""
from . import _ortmk


class OrtmkError(RuntimeError):
    """Base of every error the ortmk library reports."""

    status = None
    status_name = None

    def __init__(self, message, status=None, status_name=None):
        super().__init__(message)
        if status is not None:
            self.status = status
        if status_name is not None:
            self.status_name = status_name


class InvalidArgument(OrtmkError, ValueError):
    """ORTMK_ERR_INVALID_ARGUMENT: a bad name, option or argument."""


class ModelError(OrtmkError):
    """ORTMK_ERR_MODEL: a malformed model or bad external data."""


class NotImplementedByProviders(OrtmkError, NotImplementedError):
    """ORTMK_ERR_NOT_IMPLEMENTED: an op or type no provider implements."""


NotImplemented_ = NotImplementedByProviders


class InvalidInput(OrtmkError, ValueError):
    """ORTMK_ERR_INPUT: a wrong input name, type or shape."""


class ProviderDied(OrtmkError):
    """ORTMK_ERR_PROVIDER_DIED: the provider process died during the call;
    the session stays usable (the provider restarts on next use)."""


class ProviderError(OrtmkError):
    """ORTMK_ERR_PROVIDER: the provider reported an error."""


class ProtocolError(OrtmkError):
    """ORTMK_ERR_PROTOCOL: a malformed or unexpected message."""


class Timeout(OrtmkError, TimeoutError):
    """ORTMK_ERR_TIMEOUT: a deadline (e.g. run_timeout_ms) passed."""


class NoMemory(OrtmkError, MemoryError):
    """ORTMK_ERR_NO_MEMORY."""


class IOFailure(OrtmkError, OSError):
    """ORTMK_ERR_IO: a file (e.g. the model) or a system call failed."""


class InternalError(OrtmkError):
    """ORTMK_ERR_INTERNAL."""


class Unavailable(OrtmkError):
    """ORTMK_ERR_UNAVAILABLE: a provider asked for with strict placement
    cannot run here."""


class Cancelled(OrtmkError):
    """ORTMK_ERR_CANCELLED: RunOptions.terminate stopped the run."""


# Indexed by ortmk_status (0 is ORTMK_OK).
BY_STATUS = (None, InvalidArgument, ModelError, NotImplementedByProviders, InvalidInput,
             ProviderDied, ProviderError, ProtocolError, Timeout, NoMemory, IOFailure,
             InternalError, Unavailable, Cancelled)

for _st, _cls in enumerate(BY_STATUS):
    if _cls is not None:
        _cls.status = _st
        _cls.status_name = _ortmk.status_name(_st)
_ortmk._set_error_classes(BY_STATUS)
