"""A machine's capacity in ``diptych_pairs``, from its server's admission figure.

``diptych serve`` admits a take when the running takes plus its estimate
fit the CPU cores and GPU milliseconds per second it may fill (times its
headroom), at the cost per output megapixel it measured. One pair is one
reference take at real time (1280x720 at 30 fps by default, the size the
server calibrates at); the machine's figure is how many fit, at most
``--max-takes``. Ray's custom resources are fixed when a node starts, so
the figure is measured first and given to ``ray start --resources``.
"""
from __future__ import annotations

import math
import re
import tempfile
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from .server import ServeProcess

#: The custom resource a take holds while it runs.
RESOURCE = "diptych_pairs"
DEFAULT_MAX_TAKES = 32


@dataclass(frozen=True)
class Reference:
    """The take one pair stands for."""
    width: int = 1280
    height: int = 720
    fps: float = 30.0

    @classmethod
    def parse(cls, text: str) -> Reference:
        m = re.fullmatch(r"(\d+)x(\d+)(?:@(\d+(?:\.\d+)?))?", text.strip())
        if not m:
            raise ValueError(f"reference '{text}': expected WxH or WxH@FPS, e.g. 1280x720@30")
        return cls(int(m.group(1)), int(m.group(2)), float(m.group(3) or 30))

    @property
    def megapixels_per_second(self) -> float:
        return self.width * self.height * self.fps / 1e6

    def __str__(self) -> str:
        return f"{self.width}x{self.height}@{self.fps:g}"


def _number(value: Any) -> float:
    if value is None:  # the server writes an unlimited budget as null
        return math.inf
    return float(value)


def max_takes(serve_args: Sequence[str]) -> int:
    """The ``--max-takes`` among the server's arguments (its default otherwise)."""
    args = list(serve_args)
    for i, a in enumerate(args):
        if a == "--max-takes" and i + 1 < len(args):
            return int(args[i + 1])
        if a.startswith("--max-takes="):
            return int(a.split("=", 1)[1])
    return DEFAULT_MAX_TAKES


def pairs_from_health(health: Mapping[str, Any], reference: Reference = Reference(),
                      limit: int = DEFAULT_MAX_TAKES) -> int:
    """How many reference takes the server behind ``health`` (its
    ``/healthz``) admits at once."""
    cost = health.get("cost")
    if not cost:
        raise ValueError("the server has no cost model yet (still calibrating)")
    cap = health["capacity"]
    headroom = _number(cap.get("headroom", 0.9))
    mps = reference.megapixels_per_second
    fits = [float(limit)]
    cpu = _number(cost["cpuSecondsPerMegapixel"]) * mps
    if cpu > 0:
        fits.append(_number(cap["cpuCores"]) * headroom / cpu)
    gpu = _number(cost.get("gpuMsPerMegapixel", 0)) * mps
    gpu_limit = _number(cap.get("gpuMsPerSecond", math.inf))
    if gpu > 0 and math.isfinite(gpu_limit):
        fits.append(gpu_limit * headroom / gpu)
    return max(0, math.floor(min(fits) + 1e-9))


def measure_pairs(binary: Optional[str] = None, serve_args: Sequence[str] = (), reference: Reference = Reference(),
                  timeout: float = 180.0) -> tuple[int, dict[str, Any]]:
    """Starts a scratch ``diptych serve`` with ``serve_args``, waits for its
    calibration and returns (pairs, its /healthz)."""
    with tempfile.TemporaryDirectory(prefix="diptych-capacity-") as d:
        server = ServeProcess(binary, d, serve_args, state=False)
        server.start(timeout)
        try:
            health = server.client().wait_until_ready(timeout)
        finally:
            server.stop()
    return pairs_from_health(health, reference, max_takes(serve_args)), health
