"""The two-node Ray cluster of the tests and the takes they run."""
from __future__ import annotations

import time
from typing import Any

import ray
from ray.cluster_utils import Cluster

import diptych
import diptych.ray as dray
from diptych.ray.node import NAMESPACE, actor_name

#: Each node's server: software rendering, two takes at once.
SERVE_ARGS = ["--gpu", "software", "--max-takes", "2"]


class Setup:
    """The Ray cluster (head and one worker node) and diptych on it."""

    def __init__(self, cluster: Cluster, diptych_cluster: dray.DiptychCluster, pairs: int) -> None:
        self.cluster, self.dc, self.pairs = cluster, diptych_cluster, pairs

    def client(self, node_id: str) -> diptych.Client:
        """A client of that node's server (from its node actor)."""
        url, token = ray.get(ray.get_actor(actor_name(node_id), namespace=NAMESPACE).endpoint.remote())
        return diptych.Client(url, token=token)


def job(out: str, seconds: float, realtime: bool, **extra: Any) -> dict[str, Any]:
    """A file job: a 30 fps counter with a blue inset for ``seconds``
    (paced at real time where the server can)."""
    take = {"primary": "testsrc:counter:320x180@30", "secondary": "testsrc:solid-0000ff:160x90@30",
            "out": out, "duration": seconds, "preset": "ultrafast", "audio": "none", **extra}
    if realtime:
        take["realtime"] = "on"
    return take


def endless(out: str, realtime: bool) -> dict[str, Any]:
    """A take that runs until it is stopped."""
    take = job(out, 0, realtime)
    del take["duration"]
    return take


def wait_frames(live: dray.LiveTake, frames: int, timeout: float = 120) -> dict[str, Any]:
    """Polls a live take until it has written ``frames``."""
    deadline = time.monotonic() + timeout
    while True:
        t = live.status()
        if t.get("frames", 0) >= frames or time.monotonic() > deadline:
            assert t.get("frames", 0) >= frames, t
            return t
        time.sleep(0.05)
