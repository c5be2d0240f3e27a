"""``diptych.Session``: the embedding C API (``include/diptych.h``) from Python.

A session is the same one ``diptych record`` runs: the primary is the clock
(each primary frame pushed gives exactly one output frame with its
timestamp), the secondary's latest frame is held, and ``finish`` ends both
streams, waits until every frame is delivered and returns the summary.
"""
from __future__ import annotations

import atexit
import ctypes
import json
import queue
import threading
import weakref
from ctypes import byref, c_int64, c_void_p
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, Union

from . import _capi, frames
from .errors import RuntimeFailure, SessionError, StateError, session_error
from .frames import Image, NV12Frame, Packet, RGBAFrame

Output = Union[RGBAFrame, NV12Frame, Packet]
Role = Union[int, str]

_ROLES = {"primary": _capi.PRIMARY, "secondary": _capi.SECONDARY, _capi.PRIMARY: _capi.PRIMARY,
          _capi.SECONDARY: _capi.SECONDARY}
_OUTPUT_KINDS = ("rgba", "nv12", "packets")
_END = object()


def options(**values: Any) -> list[str]:
    """Keyword options as the C API's words: ``pip_corner="top-right"`` is
    ``--pip-corner top-right``, ``mirror_secondary=True`` is the flag alone,
    False or None leaves it out."""
    words: list[str] = []
    for key, value in values.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            words.append(flag)
        elif isinstance(value, (tuple, list)) and len(value) == 2 and key == "size":
            words += [flag, f"{value[0]}x{value[1]}"]
        elif isinstance(value, (tuple, list)) and key in ("overlay", "text"):
            for item in value:   # overlay=["logo.png@0.8,0.05,0.15,0.1", ...], text=["{timecode}@0.05,0.9", ...]: one flag each
                words += [flag, str(item)]
        elif isinstance(value, float) and value.is_integer():
            words += [flag, str(int(value))]
        else:
            words += [flag, str(value)]
    return words


def version(library: Optional[str] = None) -> str:
    """The library's version, e.g. ``"0.1.0"``."""
    return (_capi.load(library).diptych_version() or b"").decode()


class Session:
    """A compositing session fed with NumPy frames.

    ``size`` (``(width, height)`` or ``"WxH"``) and ``fps`` are required;
    every other option of ``diptych record`` except the inputs is a keyword
    (``layout="pip"``, ``pip_corner="top-right"``, ``out="take.mp4"``,
    ``secondary="none"``, ``queue=8``, ``encoder="gpu"``, ``qp=24``,
    ``maxrate="4M", bufsize="8M"``, ...) or a word in ``args``.

    Outputs, as callbacks (called on the session's threads, with copies):
    ``on_rgba(RGBAFrame)``, ``on_nv12(NV12Frame)``, ``on_packet(Packet)``,
    ``on_log(str)``. Or as an iterator: ``outputs=("rgba", "packets")`` and
    iterate :meth:`outputs`; at most ``queue_limit`` outputs wait there, then
    the session waits for the reader (back-pressure), so read on another
    thread than the one pushing, or read as you push.

    An exception raised by a callback is raised again by :meth:`finish`.
    """

    def __init__(self, size: Union[str, tuple[int, int]], fps: Union[str, float], *, args: Sequence[str] = (),
                 on_rgba: Optional[Callable[[RGBAFrame], None]] = None,
                 on_nv12: Optional[Callable[[NV12Frame], None]] = None,
                 on_packet: Optional[Callable[[Packet], None]] = None,
                 on_log: Optional[Callable[[str], None]] = None,
                 outputs: Iterable[str] = (), rgba_interval: int = 1, queue_limit: int = 64,
                 library: Optional[str] = None, **option_values: Any) -> None:
        self._lib = _capi.load(library)
        self._handle: Optional[int] = None
        self._finished = False
        self._summary: Optional[dict[str, Any]] = None
        self._failure: Optional[BaseException] = None
        self._lock = threading.Lock()
        wanted = set(outputs)
        unknown = wanted - set(_OUTPUT_KINDS)
        if unknown:
            raise ValueError(f"outputs: unknown {sorted(unknown)}; expected some of {', '.join(_OUTPUT_KINDS)}")
        self._queue: Optional[_BoundedQueue] = _BoundedQueue(queue_limit) if wanted else None

        def deliver(user: Optional[Callable[[Any], None]], kind: str) -> Optional[Callable[[Any], None]]:
            sinks = [s for s in (user, self._queue.put if self._queue and kind in wanted else None) if s]
            if not sinks:
                return None

            def call(item: Any) -> None:
                for sink in sinks:
                    sink(item)
            return call

        rgba, nv12, packet = deliver(on_rgba, "rgba"), deliver(on_nv12, "nv12"), deliver(on_packet, "packets")
        out = _capi.Outputs()
        self._lib.diptych_outputs_init(byref(out))
        out.rgba_interval = rgba_interval
        # The ctypes function objects must live as long as the session: kept on self.
        self._callbacks: list[Any] = []
        if rgba:
            out.on_rgba = self._keep(_capi.FRAME_FN(self._guard(lambda _u, f: rgba(frames.rgba_from(f.contents)))))
        if nv12:
            out.on_nv12 = self._keep(_capi.FRAME_FN(self._guard(lambda _u, f: nv12(frames.nv12_from(f.contents)))))
        if packet:
            out.on_packet = self._keep(_capi.PACKET_FN(self._guard(
                lambda _u, p: packet(frames.packet_from(p.contents)))))
        if on_log:
            log = on_log
            out.on_log = self._keep(_capi.LOG_FN(self._guard(
                lambda _u, line: log((line or b"").decode("utf-8", "replace")))))

        words = options(size=size, fps=fps, **option_values) + list(args)
        argv, argc = _capi.argv(words)
        handle = c_void_p()
        status = self._lib.diptych_session_create(argv, argc, byref(out), byref(handle))
        if status != _capi.OK:
            raise session_error(status, _capi.last_error(self._lib), "diptych_session_create")
        self._handle = handle.value
        _open_sessions.add(self)

    def _keep(self, fn: Any) -> Any:
        self._callbacks.append(fn)
        return fn

    def _guard(self, body: Callable[..., None]) -> Callable[..., None]:
        """A callback that records the first exception instead of losing it in ctypes."""
        def run(*a: Any) -> None:
            running = _running_callbacks()
            running.append(id(self))
            try:
                body(*a)
            except BaseException as e:  # noqa: BLE001 - re-raised by finish()
                with self._lock:
                    if self._failure is None:
                        self._failure = e
            finally:
                running.pop()
        return run

    # ---- Calls ----------------------------------------------------------------

    def _live(self) -> int:
        if self._handle is None:
            raise StateError(-4, "the session was closed", "diptych.Session")
        return self._handle

    def _check(self, status: int, call: str) -> int:
        if status < 0:
            raise session_error(status, _capi.last_error(self._lib), call)
        return status

    def push(self, role: Role, image: Image, pts: int, *, timescale: int = 1_000_000, format: Optional[str] = None,
             block: bool = True) -> bool:
        """Pushes one frame of ``role`` (``"primary"`` or ``"secondary"``);
        see :mod:`diptych.frames` for the array shapes. ``pts`` is in
        ``timescale`` ticks per second, strictly increasing per stream.
        Returns True when queued; False when ``block=False`` found the queue
        full (nothing was queued). Raises :class:`~diptych.errors.BadFrame`,
        :class:`~diptych.errors.TimestampError`, :class:`~diptych.errors.StateError`."""
        r = _ROLES.get(role)
        if r is None:
            raise ValueError(f"role {role!r}: expected 'primary' or 'secondary'")
        frame, keep = frames.describe(image, format, pts, timescale)
        flags = _capi.PUSH_BLOCK if block else _capi.PUSH_NONBLOCK
        status = self._check(self._lib.diptych_session_push_frame(self._live(), r, byref(frame), flags),
                             "diptych_session_push_frame")
        del keep
        return status == _capi.OK

    def set_layout(self, layout: str, *, args: Sequence[str] = (),
                   transition: Optional[Mapping[str, Any] | str] = None, **layout_options: Any) -> None:
        """Changes the layout from the next primary frame pushed on:
        ``set_layout("pip", pip_corner="top-left")``. Options not given take
        their defaults. ``transition="400:ease-in-out"`` (or ``{"ms": 400,
        "easing": "ease-in-out"}``) interpolates the frames over those
        milliseconds of the pushed timestamps from the picture as it is;
        without, the session's ``transition`` option applies, if any."""
        if isinstance(transition, Mapping):
            unknown = sorted(set(transition) - {"ms", "easing"})
            if unknown or "ms" not in transition:
                raise ValueError(f"transition {dict(transition)!r}: expected {{'ms': N, 'easing': NAME}}")
            ms = transition["ms"]
            transition = f"{int(ms) if float(ms).is_integer() else ms}:{transition.get('easing', 'ease-in-out')}"
        argv, argc = _capi.argv(options(layout=layout, transition=transition, **layout_options) + list(args))
        self._check(self._lib.diptych_session_set_layout(self._live(), argv, argc), "diptych_session_set_layout")

    def end_stream(self, role: Role) -> None:
        """Ends one stream: its later pushes fail; ending the secondary lets
        primary frames through without waiting for it."""
        r = _ROLES.get(role)
        if r is None:
            raise ValueError(f"role {role!r}: expected 'primary' or 'secondary'")
        self._check(self._lib.diptych_session_end_stream(self._live(), r), "diptych_session_end_stream")

    @property
    def can_import_dmabuf(self) -> bool:
        return self._check(self._lib.diptych_session_can_import_dmabuf(self._live()),
                           "diptych_session_can_import_dmabuf") == 1

    def finish(self) -> dict[str, Any]:
        """Ends both streams, waits until every frame is delivered and the
        file is complete, and returns the summary (frames, duration,
        encoder, GPU, stop reason, warnings). Raises
        :class:`~diptych.errors.RuntimeFailure` (with the summary) when the
        take ended abnormally, or what a callback raised."""
        handle = self._live()
        if self._finished:
            raise StateError(-4, "finish was already called", "diptych_session_finish")
        if id(self) in _running_callbacks():
            # The library refuses it there (it would wait for this callback); the session stays as it is.
            raise StateError(-4, "finish called from one of the session's callbacks; call it from the host's own thread",
                             "diptych_session_finish")
        if self._queue:
            self._queue.unbound()
        count = c_int64()
        status = self._lib.diptych_session_finish(handle, byref(count))
        message = _capi.last_error(self._lib) if status != _capi.OK else ""
        self._finished = True
        raw = self._lib.diptych_session_summary_json(handle)
        if raw:
            try:
                self._summary = json.loads(ctypes.string_at(raw).decode())
            finally:
                self._lib.diptych_free(raw)
        if self._queue:
            self._queue.close()
        if self._failure is not None:
            raise self._failure
        if status == -6:
            raise RuntimeFailure(status, message, "diptych_session_finish", self._summary, count.value)
        if status < 0:
            raise session_error(status, message, "diptych_session_finish")
        summary = dict(self._summary or {})
        summary.setdefault("frames", count.value)
        return summary

    @property
    def summary(self) -> Optional[dict[str, Any]]:
        """The summary once :meth:`finish` has run."""
        return self._summary

    def outputs(self, timeout: Optional[float] = None) -> Iterator[Output]:
        """The outputs asked for with ``outputs=...``, in delivery order,
        until :meth:`finish` has delivered the last one. ``timeout``: longest
        wait for one output (``queue.Empty`` after it)."""
        if self._queue is None:
            raise StateError(-4, "no outputs to iterate: create the session with outputs=('rgba', ...)",
                             "Session.outputs")
        while True:
            item = self._queue.get(timeout)
            if item is _END:
                return
            yield item

    def close(self) -> None:
        """Finishes the session if that has not been done (dropping its
        result) and frees it. Idempotent."""
        if self._handle is None:
            return
        if id(self) in _running_callbacks():
            # From a callback (the garbage collector may run __del__ there) destroying would wait
            # for that callback: left to the host's own close() or to the interpreter's exit.
            return
        handle, self._handle = self._handle, None
        _open_sessions.discard(self)
        if self._queue:
            self._queue.unbound()
        self._lib.diptych_session_destroy(handle)
        if self._queue:
            self._queue.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report to at interpreter exit
            pass


class _BoundedQueue:
    """Outputs waiting for the iterator. ``put`` waits while ``limit`` items
    wait (back-pressure on the session) until :meth:`unbound`: once finish has
    begun no frame is pushed any more, so what is still in flight is bounded
    by the session's own queues and is taken without waiting."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"queue_limit {limit}: must be at least 1")
        self._items: queue.Queue[Any] = queue.Queue()
        self._limit = limit
        self._room = threading.Condition()
        self._bounded = True

    def put(self, item: Any) -> None:
        with self._room:
            while self._bounded and self._items.qsize() >= self._limit:
                self._room.wait(0.1)
        self._items.put(item)

    def get(self, timeout: Optional[float]) -> Any:
        item = self._items.get(timeout=timeout)
        with self._room:
            self._room.notify_all()
        return item

    def unbound(self) -> None:
        with self._room:
            self._bounded = False
            self._room.notify_all()

    def close(self) -> None:
        self._items.put(_END)


__all__ = ["Session", "Output", "options", "version", "SessionError"]


# The sessions whose callbacks this thread is running (innermost last).
_callback_thread = threading.local()


def _running_callbacks() -> list[int]:
    if not hasattr(_callback_thread, "sessions"):
        _callback_thread.sessions = []
    running: list[int] = _callback_thread.sessions
    return running


# Sessions still open when the interpreter exits are finished first, while
# their callbacks can still run: once the interpreter is shutting down, a
# callback waiting for the GIL would block the session's threads for good.
_open_sessions: "weakref.WeakSet[Session]" = weakref.WeakSet()


@atexit.register
def _close_open_sessions() -> None:
    for s in list(_open_sessions):
        try:
            s.close()
        except Exception:  # noqa: BLE001 - nothing to report to at interpreter exit
            pass
