"""The Ray actor of one GPU server: it starts a local ``diptych serve`` and
keeps it running.

One actor per node, named after the node and pinned to it. Takes reach the
server through it (the server listens on loopback only, with a token the
actor made). If the server exits while the actor lives it is started again
on the same state folder, so the takes the crash cut off are reported
failed, with what their files hold, and file jobs are retried.
"""
from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ..client import Client
from .capacity import RESOURCE, Reference, max_takes, pairs_from_health
from .server import ServeProcess

NAMESPACE = "diptych"


@dataclass(frozen=True)
class NodeSettings:
    """How node actors start their server: ``binary`` (default: the node's
    ``$DIPTYCH_BINARY`` or ``diptych`` on its PATH), extra ``serve_args``
    (``--max-takes 8``, ``--gpu 0``, ``--output-root /data``), and
    ``directory`` for the token, log and state folder (default: a folder
    under the node's temporary directory)."""
    binary: Optional[str] = None
    serve_args: tuple[str, ...] = ()
    directory: Optional[str] = None
    reference: Reference = field(default_factory=Reference)
    #: How often a file job asks its server how far the take is (seconds).
    poll_interval: float = 0.05


def actor_name(node_id: str) -> str:
    return f"diptych-node-{node_id}"


class DiptychNode:
    """The supervisor of one node's ``diptych serve`` (a Ray actor; see
    :func:`node_actor`)."""

    def __init__(self, settings: NodeSettings, start_timeout: float = 180.0) -> None:
        self.settings = settings
        self.node_id: str = ray.get_runtime_context().get_node_id()
        self.address: str = ray.util.get_node_ip_address()
        self.hostname = socket.gethostname()
        base = settings.directory or os.path.join(tempfile.gettempdir(), "diptych-ray")
        self.directory = os.path.join(base, self.node_id[:16])
        self._lock = threading.Condition()
        self._server: Optional[ServeProcess] = None
        self._stopping = False
        self._error: Optional[str] = None
        self._started_once = False
        self.restarts = 0
        # The thread that starts the server lives as long as the actor: the
        # server's parent-death signal is tied to it.
        threading.Thread(target=self._supervise, name="diptych-serve-supervisor", daemon=True).start()
        self._ready(start_timeout)

    def _supervise(self) -> None:
        backoff = 1.0
        while True:
            with self._lock:
                if self._stopping:
                    return
            server: Optional[ServeProcess] = None
            try:
                server = ServeProcess(self.settings.binary, self.directory, self.settings.serve_args)
                server.start()
                server.client().wait_until_ready()
            except Exception as e:  # noqa: BLE001 - reported through endpoint()
                if server:
                    server.stop()
                with self._lock:
                    self._error = f"node {self.node_id[:12]} ({self.address}): {e}"
                    self._lock.notify_all()
                time.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            with self._lock:
                self._server, self._error, self._started_once = server, None, True
                self._lock.notify_all()
            backoff = 1.0
            code = server.wait()
            with self._lock:
                self._server = None
                if self._stopping:
                    return
                self.restarts += 1
                self._error = f"diptych serve exited with status {code}; restarting: {server.log_tail(2)}"

    def _ready(self, timeout: float) -> ServeProcess:
        """The running server; waits through a restart, including one the
        supervisor has not seen yet (a server that has just died is not
        handed out). A server that never started (a missing binary, a bad
        argument) is an error at once."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._server is None or self._server.exited():
                if self._stopping:
                    raise RuntimeError(f"node {self.node_id[:12]}: the server was shut down")
                if self._error and not self._started_once:
                    raise RuntimeError(self._error)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(self._error or f"node {self.node_id[:12]}: diptych serve not ready "
                                       f"after {timeout} s")
                self._lock.wait(min(left, 0.5))
            return self._server

    # ---- Methods other processes call ---------------------------------------

    def endpoint(self, timeout: float = 180.0) -> tuple[str, str]:
        """(URL, bearer token) of the node's server, once it is running."""
        s = self._ready(timeout)
        assert s.url is not None
        return s.url, s.token

    def info(self) -> dict[str, Any]:
        """Node id, address, host, the server's /healthz and its capacity in pairs."""
        s = self._ready(180.0)
        health = s.client().healthz()
        try:
            pairs: Optional[int] = pairs_from_health(health, self.settings.reference,
                                                     max_takes(self.settings.serve_args))
        except ValueError:
            pairs = None
        resources = ray.nodes()
        advertised = next((n.get("Resources", {}).get(RESOURCE) for n in resources if n.get("NodeID") == self.node_id),
                          None)
        return {"node": self.node_id, "address": self.address, "hostname": self.hostname, "url": s.url,
                "pid": s.pid, "restarts": self.restarts, "health": health, "pairs": pairs,
                "advertised": advertised, "directory": self.directory}

    def shutdown(self) -> None:
        """Stops the server through its finalize path (every take finalized)."""
        with self._lock:
            self._stopping = True
            server = self._server
            self._lock.notify_all()
        if server:
            server.stop()


def node_actor(node_id: str, settings: NodeSettings) -> Any:
    """The node's actor, created (pinned to the node, detached) if it is not running yet."""
    remote = ray.remote(DiptychNode)
    return remote.options(
        name=actor_name(node_id), namespace=NAMESPACE, get_if_exists=True, lifetime="detached",
        num_cpus=0, max_concurrency=64, max_restarts=0,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
    ).remote(settings)


def local_client(settings: NodeSettings) -> tuple[Client, str, str]:
    """From inside a task or actor: a client of this node's server, the node id and its address."""
    node_id = ray.get_runtime_context().get_node_id()
    actor = node_actor(node_id, settings)
    url, token = ray.get(actor.endpoint.remote())
    return Client(url, token=token), node_id, ray.util.get_node_ip_address()
