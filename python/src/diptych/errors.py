"""The exceptions of the package.

Every error is a :class:`DiptychError`. The embedding API's errors carry the
C API's status code and its one-line message (:class:`SessionError` and one
subclass per code); the HTTP API's carry the status and the server's reason
(:class:`APIError` and one subclass per status the server answers).
"""
from __future__ import annotations

from typing import Any, Optional


class DiptychError(Exception):
    """The base of every error raised by this package."""


# ---- The embedding C API ---------------------------------------------------


class SessionError(DiptychError):
    """A C API call failed: ``code`` is its ``diptych_status`` (negative),
    ``message`` what ``diptych_last_error()`` said."""

    code: int = -1

    def __init__(self, code: int, message: str, call: str = "") -> None:
        self.code = code
        self.message = message
        self.call = call
        super().__init__(f"{call}: {message} (code {code})" if call else f"{message} (code {code})")


class InvalidArgument(SessionError):
    """``DIPTYCH_ERR_INVALID_ARGUMENT``: a bad option, configuration or layout."""


class BadFrame(SessionError):
    """``DIPTYCH_ERR_BAD_FRAME``: a frame that does not match its own description."""


class TimestampError(SessionError):
    """``DIPTYCH_ERR_TIMESTAMP``: a timestamp not after the previous one of its stream."""


class StateError(SessionError):
    """``DIPTYCH_ERR_STATE``: the call does not fit the session's state (after finish, ...)."""


class Unsupported(SessionError):
    """``DIPTYCH_ERR_UNSUPPORTED``: the platform lacks what the call needs (dma-buf)."""


class RuntimeFailure(SessionError):
    """``DIPTYCH_ERR_RUNTIME``: the session failed while starting or running.

    What was written to a file has been finalized; after ``finish`` the
    ``summary`` (a dict, or None) and ``frames`` say what was delivered."""

    def __init__(self, code: int, message: str, call: str = "", summary: Optional[dict[str, Any]] = None,
                 frames: int = 0) -> None:
        super().__init__(code, message, call)
        self.summary = summary
        self.frames = frames


_BY_CODE: dict[int, type[SessionError]] = {
    -1: InvalidArgument, -2: BadFrame, -3: TimestampError, -4: StateError, -5: Unsupported, -6: RuntimeFailure,
}


def session_error(code: int, message: str, call: str = "") -> SessionError:
    """The exception for a ``diptych_status`` below zero."""
    return _BY_CODE.get(code, SessionError)(code, message, call)


# ---- The HTTP API ------------------------------------------------------------


class APIError(DiptychError):
    """``diptych serve`` refused a request: ``status`` is the HTTP status,
    ``message`` the one-line reason from the body's ``error``."""

    def __init__(self, status: int, message: str, method: str = "", path: str = "") -> None:
        self.status = status
        self.message = message
        self.method = method
        self.path = path
        where = f"{method} {path}: " if method else ""
        super().__init__(f"{where}{status} {message}")


class BadRequest(APIError):
    """400: the request names a bad input (the message names the JSON field)."""


class Unauthorized(APIError):
    """401: the bearer token is missing or wrong."""


class NotFound(APIError):
    """404: no such take (or route)."""


class Conflict(APIError):
    """409: the take is not in a state that allows the change, or the output is taken."""


class Unavailable(APIError):
    """503: refused by admission (over capacity, a take lagging, at --max-takes) or
    the server is starting or stopping. Worth retrying later."""


class ServerUnreachable(APIError):
    """No HTTP answer at all (connection refused or reset, timeout); ``status`` is 0."""

    def __init__(self, message: str, method: str = "", path: str = "") -> None:
        super().__init__(0, message, method, path)


_BY_STATUS: dict[int, type[APIError]] = {400: BadRequest, 401: Unauthorized, 404: NotFound, 409: Conflict,
                                          503: Unavailable}


def api_error(status: int, message: str, method: str = "", path: str = "") -> APIError:
    """The exception for an HTTP error status."""
    return _BY_STATUS.get(status, APIError)(status, message, method, path)
