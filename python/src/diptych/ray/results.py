"""What a file job reports: its events while it runs, its result, and the
per-node throughput table of a batch."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence


@dataclass(frozen=True)
class Event:
    """One thing that happened to job ``job``: ``kind`` is ``placed`` (Ray
    put it on ``node``), ``refused`` (admission said 503; it waits for
    capacity), ``started``, ``first_frame``, ``progress`` (``frames``),
    ``partial`` (a cut-off output kept), ``lost`` (its node went away),
    ``retry``, ``done`` or ``failed``."""
    job: int
    kind: str
    attempt: int
    time: float
    node: Optional[str] = None
    address: Optional[str] = None
    frames: Optional[int] = None
    message: Optional[str] = None


@dataclass
class Attempt:
    """One run of a job on one node."""
    attempt: int
    node: Optional[str] = None
    address: Optional[str] = None
    placed: Optional[float] = None
    started: Optional[float] = None
    first_frame: Optional[float] = None
    ended: Optional[float] = None
    take_id: Optional[str] = None
    refusals: int = 0
    error: Optional[str] = None


@dataclass
class Partial:
    """The output of an attempt cut off by the loss of its node, kept at
    ``path`` (``take.partial-1.mp4`` when the retry's node could see it and
    moved it aside; else still at the job's ``out`` on that node's disk),
    with the frames it holds where they could be counted."""
    path: str
    attempt: int
    node: Optional[str] = None
    address: Optional[str] = None
    frames: Optional[int] = None
    decodable: Optional[bool] = None
    note: Optional[str] = None


@dataclass
class JobResult:
    """How a file job ended: ``state`` is ``finished`` or ``failed``;
    ``summary`` is the take's summary (frames, duration, encoder, stop
    reason, ...), ``error`` why it failed."""
    index: int
    take: dict[str, Any]
    state: str = "pending"
    summary: Optional[dict[str, Any]] = None
    error: Optional[str] = None
    attempts: list[Attempt] = field(default_factory=list)
    partials: list[Partial] = field(default_factory=list)
    submitted: float = 0.0

    @property
    def refusals(self) -> int:
        """Times admission refused the take (503) before it started, over all attempts."""
        return sum(a.refusals for a in self.attempts)

    @property
    def out(self) -> str:
        return str(self.take.get("out", ""))

    @property
    def last(self) -> Optional[Attempt]:
        return self.attempts[-1] if self.attempts else None

    @property
    def node(self) -> Optional[str]:
        """The node of the attempt that ended the job."""
        return self.last.node if self.last else None

    @property
    def frames(self) -> int:
        return int((self.summary or {}).get("frames", 0))

    @property
    def ok(self) -> bool:
        return self.state == "finished"

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict
        d = asdict(self)
        d["out"], d["node"], d["frames"], d["refusals"] = self.out, self.node, self.frames, self.refusals
        return d


def throughput_rows(results: Sequence[JobResult]) -> list[dict[str, Any]]:
    """Per node: jobs finished there, frames, media seconds, wall span (first
    start to last end), frames per second and × real time over that span,
    attempts lost there and admission refusals."""
    nodes: dict[str, dict[str, Any]] = {}

    def row(node: Optional[str], address: Optional[str]) -> dict[str, Any]:
        key = node or "?"
        return nodes.setdefault(key, {"node": key, "address": address or "?", "jobs": 0, "frames": 0,
                                      "media_seconds": 0.0, "start": None, "end": None, "lost": 0,
                                      "refusals": 0})

    for r in results:
        for a in r.attempts[:-1]:
            row(a.node, a.address)["lost"] += 1
        last = r.last
        if last is None:
            continue
        n = row(last.node, last.address)
        n["refusals"] += r.refusals
        if not r.ok:
            continue
        n["jobs"] += 1
        n["frames"] += r.frames
        n["media_seconds"] += float((r.summary or {}).get("durationSeconds", 0.0))
        begin, end = last.started or last.placed, last.ended
        if begin is not None:
            n["start"] = begin if n["start"] is None else min(n["start"], begin)
        if end is not None:
            n["end"] = end if n["end"] is None else max(n["end"], end)
    rows = []
    for n in sorted(nodes.values(), key=lambda n: str(n["node"])):
        span = (n["end"] - n["start"]) if n["start"] is not None and n["end"] is not None else 0.0
        n["seconds"] = span
        n["fps"] = n["frames"] / span if span > 0 else 0.0
        n["realtime"] = n["media_seconds"] / span if span > 0 else 0.0
        rows.append(n)
    return rows


def throughput_table(results: Sequence[JobResult]) -> str:
    """The per-node rows as a Markdown table."""
    lines = ["| node | address | jobs | frames | media s | wall s | frames/s | × real time | lost | refused |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for n in throughput_rows(results):
        lines.append(f"| {n['node'][:12]} | {n['address']} | {n['jobs']} | {n['frames']} | {n['media_seconds']:.1f} "
                     f"| {n['seconds']:.2f} | {n['fps']:.1f} | {n['realtime']:.2f} | {n['lost']} | {n['refusals']} |")
    return "\n".join(lines)
