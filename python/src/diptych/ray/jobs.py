"""What runs on the nodes: a file job (a Ray task holding its
``diptych_pairs`` while the take runs) and a live take's lease (a Ray actor
holding them while the take records).

Both reach their node's server through the node's actor, and both treat a
refusal by admission (503) as "wait for capacity": the take is posted again
with backoff until it is admitted.
"""
from __future__ import annotations

import os
import time
from typing import Any, Iterator, Optional

import ray

from .. import media
from ..client import Client
from ..errors import APIError, ServerUnreachable, Unavailable
from .node import NodeSettings, local_client

#: How often a running file job reports its frames.
PROGRESS_INTERVAL = 0.5


class NodeLost(Exception):
    """The node (or its server) went away while the take ran; the job may be
    retried elsewhere."""


class JobFailed(Exception):
    """The take itself failed (bad input, an output that cannot be written):
    retrying elsewhere would fail the same way. ``take`` is its last JSON."""

    def __init__(self, message: str, take: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.take = take


def partial_path(out: str, attempt: int) -> str:
    """Where attempt ``attempt``'s cut-off output is kept: ``take.partial-1.mp4``."""
    stem, ext = os.path.splitext(out)
    return f"{stem}.partial-{attempt}{ext}"


def _keep_partial(out: str, attempt: int, since: Optional[float]) -> Optional[dict[str, Any]]:
    """Moves the previous attempt's output aside (when this node sees it and
    it was written by that attempt) and says what it holds."""
    if attempt <= 1 or "://" in out or not os.path.exists(out):
        return None
    if since is not None and os.path.getmtime(out) < since - 2:
        return None  # older than the attempt: not its output
    kept = partial_path(out, attempt - 1)
    os.replace(out, kept)
    return media.probe(kept).asdict()


def _create(client: Client, take: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Posts the take, waiting for capacity while admission refuses it;
    yields a ``refused`` event now and then and finally ``started``."""
    refusals, last_told = 0, 0.0
    delay = 0.25
    while True:
        try:
            created = client.create(take)
            yield {"event": "started", "take": created, "refusals": refusals, "time": time.time()}
            return
        except Unavailable as e:
            refusals += 1
            if refusals == 1 or time.monotonic() - last_told > 5:
                last_told = time.monotonic()
                yield {"event": "refused", "reason": e.message, "refusals": refusals, "time": time.time()}
            time.sleep(delay)
            delay = min(delay * 1.5, 2.0)
        except ServerUnreachable as e:
            raise NodeLost(str(e)) from None
        except APIError as e:
            raise JobFailed(str(e)) from None


def run_file_job(take: dict[str, Any], settings: NodeSettings, attempt: int = 1,
                 previous_since: Optional[float] = None) -> Iterator[dict[str, Any]]:
    """The body of a file job on its node: events as dicts, the last one ``done``."""
    client, node_id, address = local_client(settings)
    yield {"event": "placed", "node": node_id, "address": address, "attempt": attempt, "time": time.time()}
    out = str(take.get("out", ""))
    kept = _keep_partial(out, attempt, previous_since)
    if kept:
        yield {"event": "partial", **kept, "time": time.time()}
    started: dict[str, Any] = {}
    for event in _create(client, take):
        yield event
        started = event
    tid = started["take"]["id"]
    seen_first, last_report, frames = False, 0.0, -1
    while True:
        try:
            t = client.take(tid)
        except ServerUnreachable as e:
            raise NodeLost(f"node {node_id[:12]} ({address}): {e}") from None
        if not seen_first and t.get("frames", 0) > 0:
            seen_first = True
            yield {"event": "first_frame", "time": time.time()}
        if t.get("frames") != frames and time.monotonic() - last_report >= PROGRESS_INTERVAL:
            frames, last_report = t.get("frames", 0), time.monotonic()
            yield {"event": "progress", "frames": frames, "time": time.time()}
        state = t.get("state")
        if state == "finished":
            reason = str((t.get("summary") or {}).get("stopReason", ""))
            if reason.startswith("server stopped"):
                raise NodeLost(f"node {node_id[:12]} ({address}): the take was cut short: {reason}")
            yield {"event": "done", "take": t, "time": time.time()}
            return
        if state == "failed":
            error = str(t.get("error") or "the take failed")
            if t.get("recovered") is not None or "server stopped" in error:
                raise NodeLost(f"node {node_id[:12]} ({address}): {error}")
            raise JobFailed(error, t)
        time.sleep(settings.poll_interval)


@ray.remote(num_cpus=0, max_retries=0)  # type: ignore[untyped-decorator]
def file_job(take: dict[str, Any], settings: NodeSettings, attempt: int,
             previous_since: Optional[float]) -> Iterator[dict[str, Any]]:
    """A file job as a Ray streaming-generator task (its events stream to the driver)."""
    yield from run_file_job(take, settings, attempt, previous_since)


class LiveLease:
    """A live take on the node Ray placed this actor on; holds the take's
    ``diptych_pairs`` until :meth:`stop`. Every change goes through it, to
    the server that runs the take."""

    def __init__(self, settings: NodeSettings) -> None:
        self.client, self.node_id, self.address = local_client(settings)
        self.take_id: Optional[str] = None
        self.refusals = 0

    def start(self, take: dict[str, Any]) -> dict[str, Any]:
        """Posts the take (waiting for capacity); returns where it runs and its JSON."""
        for event in _create(self.client, take):
            if event["event"] == "started":
                self.take_id = event["take"]["id"]
                self.refusals = event["refusals"]
                return {"node": self.node_id, "address": self.address, "take": event["take"],
                        "refusals": self.refusals}
        raise JobFailed("the take was not created")

    def _tid(self) -> str:
        if self.take_id is None:
            raise JobFailed("the take has not started")
        return self.take_id

    def take(self) -> dict[str, Any]:
        return self.client.take(self._tid())

    def patch(self, layout: dict[str, Any], transition: Optional[dict[str, Any] | str] = None) -> dict[str, Any]:
        return self.client.patch(self._tid(), layout, transition=transition)

    def switch(self, role: str, source: str) -> dict[str, Any]:
        return self.client.switch(self._tid(), role, source)

    def add_output(self, out: str, format: Optional[str], layout: Optional[dict[str, Any]]) -> int:
        return self.client.add_output(self._tid(), out, format=format, layout=layout)

    def remove_output(self, index: int) -> dict[str, Any]:
        return self.client.remove_output(self._tid(), index)

    def stop(self) -> dict[str, Any]:
        return self.client.stop(self._tid())
