"""``diptych.Client``: the ``diptych serve`` HTTP API, standard library only.

Routes (JSON bodies in the form ``diptych record --config`` reads):

=======================================  ====================================
``POST /v1/takes``                        :meth:`Client.create`
``GET /v1/takes``                         :meth:`Client.takes`
``GET /v1/takes/{id}``                    :meth:`Client.take`
``PATCH /v1/takes/{id}``                  :meth:`Client.patch`
``POST /v1/takes/{id}/switch``            :meth:`Client.switch`
``POST /v1/takes/{id}/outputs``           :meth:`Client.add_output`
``DELETE /v1/takes/{id}/outputs/{n}``     :meth:`Client.remove_output`
``DELETE /v1/takes/{id}``                 :meth:`Client.stop`
``GET /v1/takes/{id}/snapshot``           :meth:`Client.snapshot`
``GET /v1/sources``                       :meth:`Client.sources`
``GET /v1/events``                        :meth:`Client.events`
``GET /metrics``                          :meth:`Client.metrics`
``GET /healthz``                          :meth:`Client.healthz`
=======================================  ====================================

Every route, body and answer is described in ``docs/openapi.yaml`` (OpenAPI
3.1); ``tests/test_openapi.py`` checks this table against it.

A refused request raises :class:`~diptych.errors.APIError` (one subclass per
status: 400, 401, 404, 409, 503) with the server's one-line reason.
"""
from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterator, Mapping, Optional

from .errors import APIError, ServerUnreachable, Unavailable, api_error

Take = dict[str, Any]


@dataclass(frozen=True)
class Event:
    """One of ``GET /v1/events``: its number, type (``created``, ``started``,
    ``layout-changed``, ``source-switched``, ``output-added``,
    ``output-removed``, ``finished``, ``failed``) and data (``take``,
    ``time`` and the type's fields)."""
    id: int
    type: str
    data: dict[str, Any]
#: States in which a take has ended.
ENDED = frozenset({"finished", "failed"})
DEFAULT_URL = "http://127.0.0.1:8737"


@dataclass(frozen=True)
class Sample:
    """One sample of the ``/metrics`` exposition."""
    name: str
    labels: dict[str, str]
    value: float


_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str) -> list[Sample]:
    """The samples of a Prometheus text exposition (comments skipped)."""
    out: list[Sample] = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = {k: v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
                  for k, v in _LABEL.findall(m.group(2) or "")}
        out.append(Sample(m.group(1), labels, float(m.group(3))))
    return out


class Client:
    """A client of one ``diptych serve``.

    ``url``: the server's base address (``http://127.0.0.1:8737``, what
    ``--listen`` prints). ``token`` or ``token_file``: the bearer token of
    ``--token-file``. ``timeout``: seconds for one request (``stop`` waits
    for the take to finalize, so it has its own, ``stop_timeout``).
    """

    def __init__(self, url: str = DEFAULT_URL, *, token: Optional[str] = None, token_file: Optional[str] = None,
                 timeout: float = 60.0, stop_timeout: Optional[float] = 600.0) -> None:
        if "://" not in url:
            url = "http://" + url
        self.url = url.rstrip("/")
        if token is None and token_file is not None:
            with open(token_file, encoding="utf-8") as f:
                token = f.read().strip()
        self._token = token
        self.timeout = timeout
        self.stop_timeout = stop_timeout

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # ---- Transport -------------------------------------------------------------

    def request(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None,
                timeout: Optional[float] = None) -> tuple[int, bytes]:
        """One request; returns (status, body) for 2xx answers and raises
        :class:`~diptych.errors.APIError` for the others."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self._token:
            req.add_header("Authorization", f"Bearer {self._token}")
        try:
            with urllib.request.urlopen(req, timeout=timeout if timeout is not None else self.timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                message = json.loads(raw).get("error") or raw.decode("utf-8", "replace")
            except (ValueError, AttributeError):
                message = raw.decode("utf-8", "replace").strip() or e.reason
            raise api_error(e.code, str(message), method, path) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ServerUnreachable(f"{self.url}: {reason}", method, path) from None

    def _json(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None,
              timeout: Optional[float] = None) -> Any:
        _, raw = self.request(method, path, body, timeout)
        return json.loads(raw) if raw else None

    @staticmethod
    def _id(take: str | Mapping[str, Any]) -> str:
        tid = take if isinstance(take, str) else take.get("id")
        if not isinstance(tid, str) or not tid:
            raise ValueError(f"take {take!r}: expected a take id or a take's JSON")
        return urllib.parse.quote(tid, safe="")

    # ---- Takes -------------------------------------------------------------------

    def create(self, config: Mapping[str, Any], *, wait_for_capacity: Optional[float] = None,
               on_refused: Optional[Callable[[Unavailable], None]] = None, retry_interval: float = 0.5) -> Take:
        """Starts a take (``POST /v1/takes``) and returns its JSON once it is
        recording. ``config`` is what ``--config`` reads (``primary``,
        ``secondary``, ``out``, ``layout``, ``duration``, ...); a role's
        source may be a priority list (``"primary": ["srt://a:9000",
        "testsrc:smpte"]``), with ``sourceReconnectWindow`` and
        ``sourceFailback`` in seconds; the take's JSON says what each role
        shows in ``sources``. ``audio`` is ``"primary"``, ``"secondary"``,
        ``"mix"`` or ``"none"``, with ``primaryGain`` and ``secondaryGain``
        in dB; a source may listen for a publisher
        (``"srt://:9000?mode=listener"``, ``"rtmp://0.0.0.0:1935/live/key"``)
        for ``listenTimeout`` seconds, on the ports the server's
        ``--allow-source-listen`` lists.

        A take refused by admission (503) raises
        :class:`~diptych.errors.Unavailable`, unless ``wait_for_capacity``
        gives seconds (``math.inf``: no limit) to retry it with backoff until
        it is admitted; ``on_refused`` is told of each refusal."""
        deadline = None if wait_for_capacity is None else time.monotonic() + wait_for_capacity
        delay = retry_interval
        while True:
            try:
                take: Take = self._json("POST", "/v1/takes", config)
                return take
            except Unavailable as e:
                now = time.monotonic()
                if deadline is None or now >= deadline:
                    raise
                if on_refused:
                    on_refused(e)
                time.sleep(min(delay, deadline - now))
                delay = min(delay * 1.5, 5.0)

    def takes(self) -> list[Take]:
        """Every take the server knows (``GET /v1/takes``)."""
        listed: list[Take] = self._json("GET", "/v1/takes")["takes"]
        return listed

    def sources(self) -> dict[str, Any]:
        """The server host's V4L2 cameras, best first (``GET /v1/sources``):
        ``{"cameras": [...], "camerasAllowed": bool}``; a take names one as
        ``camera:N`` or ``v4l2:/dev/videoN`` where ``diptych serve
        --allow-cameras`` allows it."""
        listed: dict[str, Any] = self._json("GET", "/v1/sources")
        return listed

    def take(self, take: str | Mapping[str, Any]) -> Take:
        """One take's JSON: state, frames, fps, outputs, cost, summary once ended."""
        got: Take = self._json("GET", f"/v1/takes/{self._id(take)}")
        return got

    def patch(self, take: str | Mapping[str, Any], layout: Mapping[str, Any], *,
              transition: Optional[Mapping[str, Any] | str] = None) -> Take:
        """Changes a running take's layout (merged into the current one) from
        one frame on: ``patch(id, {"kind": "side-by-side"})``. With
        ``transition={"ms": 400, "easing": "ease-in-out"}`` (or
        ``"400:ease-in-out"``) the frames over those milliseconds of the
        take are interpolated from the picture as it is (easing ``linear``,
        ``ease-in``, ``ease-out`` or ``ease-in-out``); without, the take's own
        ``transition`` applies, if any. Fields fixed once a take started
        (``size``, ``audio``) are 409."""
        body: dict[str, Any] = {"layout": dict(layout)}
        if transition is not None:
            body["transition"] = transition if isinstance(transition, str) else dict(transition)
        got: Take = self._json("PATCH", f"/v1/takes/{self._id(take)}", body)
        return got

    def switch(self, take: str | Mapping[str, Any], role: str, source: str) -> dict[str, Any]:
        """Hot-swaps a stream's source (``role`` primary or secondary; for the
        secondary ``source`` may be ``none``)."""
        got: dict[str, Any] = self._json("POST", f"/v1/takes/{self._id(take)}/switch",
                                         {"role": role, "source": source})
        return got

    def add_output(self, take: str | Mapping[str, Any], out: str, *, format: Optional[str] = None,
                   layout: Optional[Mapping[str, Any]] = None, size: Optional[str] = None,
                   codec: Optional[str] = None, bitrate: Optional[int | str] = None,
                   maxrate: Optional[int | str] = None, bufsize: Optional[int | str] = None,
                   preset: Optional[str] = None, rate_divisor: Optional[int] = None,
                   segment_time: Optional[float] = None, hls_list_size: Optional[int] = None) -> int:
        """Adds an output (a file or live URL, with its own layout) to a
        running take; returns its index. It may have its own encoding (a rung
        of a ladder): ``size`` (``"640x360"``), ``codec``, ``bitrate``,
        ``maxrate``, ``bufsize`` (bits, or ``"800k"``, ``"4M"``), ``preset``,
        and ``rate_divisor`` N (every Nth frame of the take: its rate over N);
        what it leaves out is the take's. ``segment_time`` splits an MP4 or
        Matroska output into files of that many seconds (an HLS output's
        segment length), ``hls_list_size`` is an HLS output's live playlist size."""
        body: dict[str, Any] = {"out": out}
        if format is not None:
            body["format"] = format
        if layout is not None:
            body["layout"] = dict(layout)
        for key, value in (("size", size), ("codec", codec), ("bitrate", bitrate), ("maxrate", maxrate),
                           ("bufsize", bufsize), ("preset", preset), ("rateDivisor", rate_divisor),
                           ("segmentTime", segment_time), ("hlsListSize", hls_list_size)):
            if value is not None:
                body[key] = value
        return int(self._json("POST", f"/v1/takes/{self._id(take)}/outputs", body)["index"])

    def remove_output(self, take: str | Mapping[str, Any], index: int) -> dict[str, Any]:
        """Closes output ``index`` (an added one; the main output is 0 and
        ends with the take) of a running take, its file complete; returns the
        server's answer. The take's summary lists every output's frames."""
        got: dict[str, Any] = self._json("DELETE", f"/v1/takes/{self._id(take)}/outputs/{int(index)}",
                                         timeout=self.stop_timeout)
        return got

    def snapshot(self, take: str | Mapping[str, Any], output: int = 0) -> bytes:
        """``GET /v1/takes/{id}/snapshot``: output ``output``'s current picture
        (0 the main output, then the declared ``alsoOut`` outputs and the added
        ones in order, as the take's ``outputs`` list them) as PNG bytes, read from its render
        target when its next frame is drawn."""
        _, raw = self.request("GET", f"/v1/takes/{self._id(take)}/snapshot?output={int(output)}")
        return raw

    def events(self, after: Optional[int] = None, timeout: float = 60.0) -> Iterator[Event]:
        """``GET /v1/events``: the takes' events as they happen (server-sent
        events), each an :class:`Event`; from ``after`` (an event's ``id``:
        the ones after it the server still keeps first) or from now on. Ends
        when the server ends the stream (it stops); ``timeout`` bounds a wait
        for the next line (the server sends one at least every 10 s)."""
        path = "/v1/events" + (f"?after={int(after)}" if after is not None else "")
        req = urllib.request.Request(self.url + path, headers={"Accept": "text/event-stream"})
        if self._token:
            req.add_header("Authorization", f"Bearer {self._token}")
        try:
            r = urllib.request.urlopen(req, timeout=timeout)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                message = json.loads(raw).get("error") or raw.decode("utf-8", "replace")
            except (ValueError, AttributeError):
                message = raw.decode("utf-8", "replace")
            raise api_error(e.code, str(message), "GET", path) from None
        except (urllib.error.URLError, OSError) as e:
            raise ServerUnreachable(f"{self.url}: {getattr(e, 'reason', e)}", "GET", path) from None
        with r:
            fields: dict[str, str] = {}
            for raw_line in r:
                line = raw_line.decode("utf-8").rstrip("\n")
                if line == "":
                    if "id" in fields:
                        yield Event(id=int(fields["id"]), type=fields.get("event", "message"),
                                    data=json.loads(fields.get("data", "{}")))
                    fields = {}
                elif not line.startswith(":") and ": " in line:
                    name, value = line.split(": ", 1)
                    fields[name] = value

    def stop(self, take: str | Mapping[str, Any]) -> Take:
        """Stops a take through its finalize path and returns its final JSON
        (with the summary). Stopping an ended take returns it as it is."""
        got: Take = self._json("DELETE", f"/v1/takes/{self._id(take)}", timeout=self.stop_timeout)
        return got

    def wait(self, take: str | Mapping[str, Any], *, until: Callable[[Take], bool] | None = None,
             states: Collection[str] = ENDED, timeout: Optional[float] = None, interval: float = 0.1) -> Take:
        """Polls a take until ``until(take)`` holds (default: its state is one
        of ``states``); returns its JSON. Raises ``TimeoutError`` after
        ``timeout`` seconds."""
        condition = until or (lambda t: t.get("state") in states)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            t = self.take(take)
            if condition(t):
                return t
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"take {t.get('id')}: still {t.get('state')} with {t.get('frames')} frames "
                                   f"after {timeout} s")
            time.sleep(interval)

    # ---- Server ------------------------------------------------------------------

    def healthz(self) -> dict[str, Any]:
        """``GET /healthz``: status (``ok`` or ``calibrating``), GPU, takes by
        state, the capacity admission fills and the measured cost model."""
        got: dict[str, Any] = self._json("GET", "/healthz")
        return got

    def metrics(self) -> str:
        """``GET /metrics``: the Prometheus text exposition."""
        _, raw = self.request("GET", "/metrics")
        return raw.decode()

    def metric_samples(self) -> list[Sample]:
        """``/metrics`` parsed into samples."""
        return parse_metrics(self.metrics())

    def wait_until_ready(self, timeout: float = 120.0, interval: float = 0.1) -> dict[str, Any]:
        """Waits until the server answers and has calibrated (``status`` ok)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                h = self.healthz()
                if h.get("status") == "ok":
                    return h
            except (ServerUnreachable, Unavailable):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.url}: not ready after {timeout} s")
            time.sleep(interval)


__all__ = ["Client", "Take", "Sample", "parse_metrics", "ENDED", "DEFAULT_URL", "APIError"]
