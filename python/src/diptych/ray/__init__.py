"""Compositing takes spread over a Ray cluster of ``diptych serve`` machines.

Each GPU server joins the cluster advertising its capacity as the custom
resource ``diptych_pairs`` (measured from its server's admission figure:
``python -m diptych.ray resources``). A node actor on each starts and
supervises its local ``diptych serve``. A file job is a Ray task holding
its pairs while its take runs, so Ray places takes by capacity; a live take
is held by a lease actor pinned to its node, and changed through it.

- :func:`submit` one take, :func:`composite_many` a batch of file jobs.
- A node lost mid-job: its file jobs are run again on another node (the
  cut-off file is kept, ``take.partial-1.mp4``, and named in the result);
  its live takes are reported failed with what their files hold.
- A take refused by admission (503) waits for capacity instead of failing.

``python -m diptych.ray submit jobs.jsonl --address auto`` runs a batch
from the command line.
"""
from __future__ import annotations

from .capacity import RESOURCE, Reference, measure_pairs, pairs_from_health
from .cluster import DiptychCluster, FileJob, composite_many, connect, submit
from .jobs import JobFailed, NodeLost, partial_path
from .live import LiveTake, LiveTakeLost
from .node import NodeSettings
from .results import Attempt, Event, JobResult, Partial, throughput_rows, throughput_table

__all__ = [
    "RESOURCE", "Reference", "measure_pairs", "pairs_from_health",
    "DiptychCluster", "FileJob", "LiveTake", "connect", "submit", "composite_many",
    "NodeSettings", "JobFailed", "NodeLost", "LiveTakeLost", "partial_path",
    "Attempt", "Event", "JobResult", "Partial", "throughput_rows", "throughput_table",
]
