"""The driver side of file jobs: launching them as Ray tasks, following
their events, and retrying the jobs of a lost node on another one."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import ray
import ray.exceptions as rex

from .capacity import RESOURCE
from .jobs import JobFailed, NodeLost, file_job
from .node import NodeSettings
from .results import Attempt, Event, JobResult, Partial

Progress = Callable[[Event], None]

#: Ray's errors for work whose process or node went away (retried elsewhere).
SYSTEM_ERRORS: tuple[type[BaseException], ...] = tuple(
    getattr(rex, name) for name in ("WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OwnerDiedError",
                                    "RayActorError", "LocalRayletDiedError", "RaySystemError",
                                    "ObjectFetchTimedOutError", "ObjectReconstructionFailedError")
    if hasattr(rex, name))


def cause(e: BaseException) -> BaseException:
    """The exception a Ray task raised, out of Ray's wrapper."""
    inner = getattr(e, "cause", None)
    return inner if isinstance(e, rex.RayTaskError) and isinstance(inner, BaseException) else e


@dataclass
class Job:
    result: JobResult
    pairs: float
    retries: int
    node: Optional[str] = None


class Runner:
    """Runs file jobs to their end: each one a streaming Ray task asking for
    ``pairs`` of ``diptych_pairs``; a job whose node is lost is launched
    again (up to ``retries`` times), its cut-off output kept."""

    def __init__(self, settings: NodeSettings, progress: Optional[Progress] = None) -> None:
        self.settings = settings
        self.progress = progress
        self._pending: dict[Any, Job] = {}

    def _tell(self, job: Job, kind: str, **fields: Any) -> None:
        if self.progress is None:
            return
        a = job.result.last
        self.progress(Event(job=job.result.index, kind=kind, attempt=a.attempt if a else 0, time=time.time(),
                            node=fields.pop("node", a.node if a else None),
                            address=fields.pop("address", a.address if a else None), **fields))

    def launch(self, job: Job) -> None:
        previous = job.result.last
        attempt = Attempt(attempt=len(job.result.attempts) + 1)
        since = previous.placed if previous and previous.started is not None else None
        job.result.attempts.append(attempt)
        if not job.result.submitted:
            job.result.submitted = time.time()
        options: dict[str, Any] = {"resources": {RESOURCE: job.pairs},
                                   "name": f"diptych job {job.result.index} attempt {attempt.attempt}"}
        if job.node:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=job.node, soft=False)
        gen = file_job.options(**options).remote(job.result.take, self.settings, attempt.attempt, since)
        self._pending[gen] = job

    def run(self, jobs: list[Job]) -> list[JobResult]:
        for job in jobs:
            self.launch(job)
        while self._pending:
            ready, _ = ray.wait(list(self._pending), num_returns=1, timeout=1.0)
            for gen in ready:
                self._step(gen)
        return [j.result for j in jobs]

    def _step(self, gen: Any) -> None:
        job = self._pending[gen]
        try:
            event = ray.get(next(gen))
        except StopIteration:
            del self._pending[gen]
            if job.result.state == "pending":
                self._lost(job, "the job's task ended without a result")
            return
        except BaseException as e:  # noqa: BLE001 - sorted below
            del self._pending[gen]
            inner = cause(e)
            if isinstance(inner, NodeLost) or isinstance(e, SYSTEM_ERRORS):
                self._lost(job, _line(inner))
            elif isinstance(inner, JobFailed):
                self._fail(job, _line(inner), inner.take)
            else:
                self._fail(job, f"{type(inner).__name__}: {_line(inner)}", None)
            return
        self._event(job, event)

    def _event(self, job: Job, e: dict[str, Any]) -> None:
        a = job.result.last
        assert a is not None
        kind = e["event"]
        if kind == "placed":
            a.node, a.address, a.placed = e["node"], e["address"], e["time"]
            self._tell(job, "placed")
        elif kind == "partial":
            self._kept(job, e)
        elif kind == "refused":
            a.refusals = int(e["refusals"])
            self._tell(job, "refused", message=e["reason"])
        elif kind == "started":
            a.started, a.take_id = e["time"], e["take"]["id"]
            a.refusals = int(e["refusals"])
            self._tell(job, "started")
        elif kind == "first_frame":
            a.first_frame = e["time"]
            self._tell(job, "first_frame")
        elif kind == "progress":
            self._tell(job, "progress", frames=e["frames"])
        elif kind == "done":
            a.ended = e["time"]
            job.result.state = "finished"
            job.result.summary = e["take"].get("summary")
            self._tell(job, "done", frames=job.result.frames)

    def _kept(self, job: Job, e: dict[str, Any]) -> None:
        """The new attempt moved the previous one's output aside."""
        previous = job.result.attempts[-2]
        job.result.partials = [p for p in job.result.partials if p.attempt != previous.attempt]
        job.result.partials.append(Partial(path=e["path"], attempt=previous.attempt, node=previous.node,
                                           address=previous.address, frames=e.get("frames"),
                                           decodable=e.get("decodable"), note=e.get("error")))
        self._tell(job, "partial", frames=e.get("frames"), message=e["path"])

    def _lost(self, job: Job, why: str) -> None:
        a = job.result.last
        assert a is not None
        a.ended, a.error = time.time(), why
        self._tell(job, "lost", message=why)
        if a.started is not None:
            # Where the cut-off output is until a retry moves it aside.
            job.result.partials.append(Partial(path=job.result.out, attempt=a.attempt, node=a.node, address=a.address,
                                               note=f"on node {(a.node or '?')[:12]}'s disk"))
        if len(job.result.attempts) <= job.retries and not job.node:
            self._tell(job, "retry", message=f"attempt {a.attempt + 1}")
            self.launch(job)
        else:
            self._fail(job, f"node lost (attempt {a.attempt} of {len(job.result.attempts)}): {why}", None)

    def _fail(self, job: Job, why: str, take: Optional[dict[str, Any]]) -> None:
        a = job.result.last
        if a is not None and a.ended is None:
            a.ended, a.error = time.time(), why
        job.result.state = "failed"
        job.result.error = why
        if take is not None:
            job.result.summary = take.get("summary")
        self._tell(job, "failed", message=why)


def _line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[-1] if text else type(e).__name__
