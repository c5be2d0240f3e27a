"""``DiptychCluster``: takes spread over the ``diptych serve`` machines of a
Ray cluster, placed by their capacity in ``diptych_pairs``."""
from __future__ import annotations

import os
import threading
import uuid
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from .batch import Job, Progress, Runner
from .capacity import RESOURCE, Reference
from .live import NAME_PREFIX, LiveTake, lease_class
from .node import NAMESPACE, NodeSettings, actor_name, node_actor
from .results import JobResult

TakeSpec = Mapping[str, Any]
_SOURCE_KEYS = ("primary", "secondary")


def resolve_paths(take: TakeSpec, base: Optional[str] = None) -> dict[str, Any]:
    """The take with relative file paths made absolute (from ``base``, else
    the current folder): nodes see paths as they are given, so outputs and
    inputs should be on storage every node mounts at the same place."""
    out = dict(take)
    root = base or os.getcwd()
    for key in ("out", "preview", *_SOURCE_KEYS):
        v = out.get(key)
        if not isinstance(v, str) or not v or "://" in v or v.startswith(("testsrc:", "/")) or v in ("-", "none"):
            continue
        if key in _SOURCE_KEYS and not os.path.exists(os.path.join(root, v)):
            continue
        out[key] = os.path.normpath(os.path.join(root, v))
    return out


def check_file_job(index: int, take: TakeSpec) -> None:
    """A file job must end by itself and write a file."""
    out = take.get("out")
    if not isinstance(out, str) or not out:
        raise ValueError(f"take {index}: out: required (the file the job writes)")
    primary = str(take.get("primary", ""))
    if take.get("duration") is None and (primary.startswith("testsrc:") or "://" in primary):
        raise ValueError(f"take {index}: primary '{primary}' never ends by itself; give duration, "
                         "or submit it with live=True")


class FileJob:
    """A file job started by :meth:`DiptychCluster.submit`; it runs (and is
    retried on node loss) in the background. :meth:`result` waits for it."""

    def __init__(self, runner: Runner, job: Job) -> None:
        self._result: Optional[JobResult] = None
        self._error: Optional[BaseException] = None
        self._job = job

        def run() -> None:
            try:
                self._result = runner.run([job])[0]
            except BaseException as e:  # noqa: BLE001 - re-raised by result()
                self._error = e
        self._thread = threading.Thread(target=run, name=f"diptych-job-{job.result.index}", daemon=True)
        self._thread.start()

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self, timeout: Optional[float] = None) -> JobResult:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"job {self._job.result.index}: still running after {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


class DiptychCluster:
    """The ``diptych serve`` machines of a Ray cluster.

    Every alive node advertising ``diptych_pairs`` (``ray start
    --resources '{"diptych_pairs": N}'``) gets a node actor running its own
    server (:mod:`diptych.ray.node`). ``address``: the cluster
    (``"auto"``, ``"ray://head:10001"``; None when ``ray.init`` was already
    called). ``binary``, ``serve_args``, ``directory``: how node actors start
    their server; ``poll_interval``: how often a running file job asks its
    server for its progress (see :class:`~diptych.ray.node.NodeSettings`).
    """

    def __init__(self, address: Optional[str] = None, *, binary: Optional[str] = None,
                 serve_args: Sequence[str] = (), directory: Optional[str] = None,
                 reference: Reference = Reference(), poll_interval: float = 0.05, start_nodes: bool = True) -> None:
        if not ray.is_initialized():
            ray.init(address=address, log_to_driver=False)
        self.settings = NodeSettings(binary=binary, serve_args=tuple(serve_args), directory=directory,
                                     reference=reference, poll_interval=poll_interval)
        self._next_index = 0
        self._lock = threading.Lock()
        if start_nodes:
            self.nodes()

    # ---- Nodes -----------------------------------------------------------------------

    @staticmethod
    def capacity_nodes() -> list[dict[str, Any]]:
        """Ray's records of the alive nodes that advertise ``diptych_pairs``."""
        alive = ray.nodes()
        return [n for n in alive if n.get("Alive") and n.get("Resources", {}).get(RESOURCE, 0) > 0]

    def nodes(self, timeout: float = 300.0) -> list[dict[str, Any]]:
        """Starts the node actors that are missing and returns the info of
        each node that answers within ``timeout``: id, address, its server's
        health, its capacity in pairs (measured) and what it advertises."""
        refs = [node_actor(n["NodeID"], self.settings).info.remote() for n in self.capacity_nodes()]
        ray.wait(refs, num_returns=len(refs), timeout=timeout)
        infos: list[dict[str, Any]] = []
        for ref in refs:
            try:
                infos.append(ray.get(ref, timeout=0))
            except ray.exceptions.RayActorError as e:
                if e.actor_init_failed:  # the server cannot start there (a missing binary, a bad argument)
                    lines = [line for line in str(e).splitlines() if line.startswith("RuntimeError: ")]
                    raise RuntimeError(lines[-1][len("RuntimeError: "):] if lines else str(e)) from None
                continue  # a node lost (Ray may still list it as alive for a while)
            except ray.exceptions.GetTimeoutError:
                continue  # not up within the timeout
        return infos

    def shutdown(self, timeout: float = 300.0) -> None:
        """Stops every node's server through its finalize path and ends the node actors."""
        for n in self.capacity_nodes():
            try:
                actor = ray.get_actor(actor_name(n["NodeID"]), namespace=NAMESPACE)
            except ValueError:
                continue
            try:
                ray.get(actor.shutdown.remote(), timeout=timeout)
            except ray.exceptions.RayError:
                pass
            ray.kill(actor)

    # ---- Takes -----------------------------------------------------------------------

    def _job(self, take: TakeSpec, pairs: float, retries: int, node: Optional[str]) -> Job:
        with self._lock:
            index = self._next_index
            self._next_index += 1
        spec = resolve_paths(take)
        check_file_job(index, spec)
        return Job(result=JobResult(index=index, take=spec), pairs=pairs, retries=retries, node=node)

    def submit(self, take: TakeSpec, *, live: bool = False, pairs: float = 1.0, node: Optional[str] = None,
               name: Optional[str] = None, retries: int = 2,
               progress: Optional[Progress] = None) -> Union[FileJob, LiveTake]:
        """Starts one take where Ray finds ``pairs`` of capacity (or on
        ``node``). A file job (``live=False``: it ends by itself) returns a
        :class:`FileJob`; a live take returns a :class:`LiveTake`, pinned to
        its node until stopped."""
        if not live:
            return FileJob(Runner(self.settings, progress), self._job(take, pairs, retries, node))
        spec = resolve_paths(take)
        name = name or uuid.uuid4().hex[:12]
        options: dict[str, Any] = {"name": NAME_PREFIX + name, "namespace": NAMESPACE, "lifetime": "detached",
                                   "num_cpus": 0, "resources": {RESOURCE: pairs}, "max_restarts": 0,
                                   "max_concurrency": 8}
        if node:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
        lease = lease_class().options(**options).remote(self.settings)
        return LiveTake(lease, name, spec, lease.start.remote(spec))

    def live_take(self, name: str) -> LiveTake:
        """A handle on a live take started earlier (by this or another driver)."""
        lease = ray.get_actor(NAME_PREFIX + name, namespace=NAMESPACE)
        return LiveTake(lease, name, {})

    def composite_many(self, takes: Iterable[TakeSpec], *, pairs: float = 1.0, retries: int = 2,
                       progress: Optional[Progress] = None) -> list[JobResult]:
        """Runs a batch of file jobs to their end, each where Ray finds
        ``pairs`` of capacity; returns each job's result (its summary, the
        node, the attempts and any partial file kept), in order. A take may
        be a take's JSON or ``{"take": {...}, "pairs": n}``."""
        jobs = []
        for t in takes:
            if "take" in t and isinstance(t["take"], Mapping):
                jobs.append(self._job(t["take"], float(t.get("pairs", pairs)), retries, None))
            else:
                jobs.append(self._job(t, pairs, retries, None))
        return Runner(self.settings, progress).run(jobs)


_default: Optional[DiptychCluster] = None


def connect(address: Optional[str] = None, **kwargs: Any) -> DiptychCluster:
    """Connects to the cluster (``ray.init``) and makes it the one
    :func:`submit` and :func:`composite_many` use."""
    global _default
    _default = DiptychCluster(address, **kwargs)
    return _default


def _cluster() -> DiptychCluster:
    return _default or connect(None if ray.is_initialized() else "auto")


def submit(take: TakeSpec, **kwargs: Any) -> Union[FileJob, LiveTake]:
    """:meth:`DiptychCluster.submit` on the connected cluster."""
    return _cluster().submit(take, **kwargs)


def composite_many(takes: Iterable[TakeSpec], **kwargs: Any) -> list[JobResult]:
    """:meth:`DiptychCluster.composite_many` on the connected cluster."""
    return _cluster().composite_many(takes, **kwargs)
