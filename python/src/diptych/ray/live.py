"""A live take on the cluster: pinned to the node Ray placed it on, changed
through its lease actor there, reported failed (with what its files hold)
when that node is lost."""
from __future__ import annotations

from typing import Any, Optional

import ray
import ray.exceptions as rex

from .. import media
from ..errors import Conflict
from .batch import cause
from .jobs import LiveLease, NodeLost

NAME_PREFIX = "diptych-live-"


class LiveTakeLost(NodeLost):
    """The live take's node went away; ``report`` is the take's failure
    report (state ``failed``, the error, what its files hold)."""

    def __init__(self, message: str, report: dict[str, Any]) -> None:
        super().__init__(message)
        self.report = report


class LiveTake:
    """A handle on a live take (from ``DiptychCluster.submit(take, live=True)``).

    Its lease actor holds the take's ``diptych_pairs`` on its node until
    :meth:`stop`. Every change goes through that actor to the node's server.
    """

    def __init__(self, lease: Any, name: str, take: dict[str, Any], start_ref: Any = None) -> None:
        self._lease = lease
        self.name = name
        self.config = dict(take)
        self._start_ref = start_ref
        self._info: Optional[dict[str, Any]] = None
        self._outputs: list[str] = [str(take["out"])] if take.get("out") else []
        self._report: Optional[dict[str, Any]] = None
        # The take's final JSON once stop() has returned it (the lease actor is gone then).
        self._final: Optional[dict[str, Any]] = None

    def __repr__(self) -> str:
        return f"LiveTake({self.name!r}, node={self.node!r})"

    def _call(self, method: str, *args: Any, timeout: Optional[float] = None) -> Any:
        if self._final is not None:
            if method == "take":
                return self._final
            raise Conflict(409, f"take '{self._final.get('id')}': is {self._final.get('state')}; it was stopped")
        if self._report is not None:
            raise LiveTakeLost(str(self._report["error"]), self._report)
        try:
            return ray.get(getattr(self._lease, method).remote(*args), timeout=timeout)
        except rex.RayActorError as e:
            report = self._lost(e)
            raise LiveTakeLost(str(report["error"]), report) from None
        except rex.RayTaskError as e:
            raise cause(e) from None

    def started(self, timeout: Optional[float] = None) -> dict[str, Any]:
        """Waits until the take records (admission may make it wait for
        capacity); returns ``{"node", "address", "take", "refusals"}``."""
        if self._info is None:
            if self._start_ref is None:
                self._info = {"take": self._call("take"), "node": None, "address": None, "refusals": 0}
            else:
                try:
                    self._info = ray.get(self._start_ref, timeout=timeout)
                except rex.RayActorError as e:
                    report = self._lost(e)
                    raise LiveTakeLost(str(report["error"]), report) from None
                except rex.RayTaskError as e:
                    raise cause(e) from None
        return self._info

    @property
    def node(self) -> Optional[str]:
        return self._info["node"] if self._info else None

    @property
    def address(self) -> Optional[str]:
        return self._info["address"] if self._info else None

    def status(self) -> dict[str, Any]:
        """The take's JSON from its server (its final JSON once :meth:`stop`
        has returned); once its node is lost, the failure report instead
        (``state`` failed, ``error``, ``recovered`` with the frames its
        output holds, ``outputs`` for each file)."""
        try:
            got: dict[str, Any] = self._call("take")
            return got
        except LiveTakeLost as e:
            return e.report

    def patch(self, layout: dict[str, Any], *, transition: Optional[dict[str, Any] | str] = None) -> dict[str, Any]:
        """Changes the layout from one frame on (``{"kind": "side-by-side"}``),
        animated with ``transition`` (``{"ms": 400, "easing": "ease-in-out"}``) if given."""
        got: dict[str, Any] = self._call("patch", dict(layout), transition)
        return got

    def switch(self, role: str, source: str) -> dict[str, Any]:
        """Hot-swaps the primary's or secondary's source."""
        got: dict[str, Any] = self._call("switch", role, source)
        return got

    def add_output(self, out: str, *, format: Optional[str] = None, layout: Optional[dict[str, Any]] = None) -> int:
        """Adds an output to the running take; returns its index."""
        index = int(self._call("add_output", out, format, dict(layout) if layout else None))
        self._outputs.append(out)
        return index

    def remove_output(self, index: int) -> dict[str, Any]:
        got: dict[str, Any] = self._call("remove_output", int(index))
        return got

    def stop(self) -> dict[str, Any]:
        """Stops the take through its finalize path, returns its final JSON
        and gives its capacity back (the lease actor ends)."""
        if self._final is not None:
            return self._final
        try:
            final: dict[str, Any] = self._call("stop")
        except Exception as e:
            if self._report is None:
                # The lease goes anyway; what status() says from here on is this failed stop, not a lost node.
                ray.kill(self._lease)
                take = (self._info or {}).get("take") or {}
                self._final = {"id": take.get("id"), "name": self.name, "state": "failed", "error": f"stop failed: {e}"}
            raise
        if self._report is None:
            ray.kill(self._lease)
        self._final = final
        return final

    def _lost(self, error: BaseException) -> dict[str, Any]:
        """The failure report of a take whose node went away: what its file
        outputs hold, read from here (on shared storage) with ffprobe."""
        if self._report is not None:
            return self._report
        info = self._info or {}
        where = f"node {(info.get('node') or '?')[:12]} ({info.get('address') or '?'})"
        outputs: list[dict[str, Any]] = []
        for url in self._outputs:
            if "://" in url:
                outputs.append({"url": url, "frames": None, "decodable": None, "note": "a live stream"})
                continue
            p = media.probe(url)
            outputs.append({"url": url, "frames": p.frames, "seconds": p.seconds, "decodable": p.decodable,
                            "note": p.error})
        main = outputs[0] if outputs else {}
        take = info.get("take") or {}
        self._report = {
            "id": take.get("id"), "name": self.name, "state": "failed", "node": info.get("node"),
            "address": info.get("address"),
            "error": f"{where} was lost while the take was live: {str(error).strip().splitlines()[0] if str(error) else type(error).__name__}",
            "recovered": {"frames": main.get("frames"), "durationSeconds": main.get("seconds"),
                          "decodable": main.get("decodable")} if main else None,
            "outputs": outputs,
        }
        return self._report


def lease_class() -> Any:
    return ray.remote(LiveLease)
