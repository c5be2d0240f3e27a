"""``python -m diptych.ray``: run file jobs on a Ray cluster of diptych servers.

    python -m diptych.ray submit jobs.jsonl --address auto [--results results.json]
    python -m diptych.ray resources [--reference 1280x720@30] [-- SERVE ARGS]
    python -m diptych.ray nodes --address auto

``jobs.jsonl`` holds one take per line, in the JSON form ``diptych record
--config`` reads (``{"primary": ..., "secondary": ..., "out": ..., ...}``),
or ``{"take": {...}, "pairs": N}``. Relative paths are taken from the
jobs file's folder. Exit status: 0 when every job finished, 1 when one
failed, 2 for bad usage or a bad jobs file.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Optional, Sequence, TextIO

from .capacity import RESOURCE, Reference, measure_pairs
from .cluster import check_file_job, resolve_paths
from .results import Event, JobResult, throughput_table


class BadInput(Exception):
    """A bad jobs file or argument (exit status 2)."""


def read_jobs(path: str) -> list[dict[str, Any]]:
    """The jobs of a JSON Lines file, relative paths taken from its folder."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror or e}") from None
    base = os.path.dirname(os.path.abspath(path))
    jobs: list[dict[str, Any]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            raise BadInput(f"{path}:{n}: not valid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(value, dict):
            raise BadInput(f"{path}:{n}: expected a JSON object (a take), got {type(value).__name__}")
        take = value.get("take", value) if isinstance(value.get("take"), dict) else value
        pairs = value.get("pairs", None) if take is not value else None
        take = resolve_paths(take, base)
        try:
            check_file_job(len(jobs), take)
        except ValueError as e:
            raise BadInput(f"{path}:{n}: {str(e).split(': ', 1)[1]}") from None
        if pairs is not None and (not isinstance(pairs, (int, float)) or pairs <= 0):
            raise BadInput(f"{path}:{n}: pairs {pairs!r}: must be a positive number")
        jobs.append({"take": take, "pairs": pairs} if pairs is not None else {"take": take})
    if not jobs:
        raise BadInput(f"{path}: no jobs")
    return jobs


class ProgressPrinter:
    """One line per job event, and a totals line every ``interval`` seconds."""

    def __init__(self, total: int, out: TextIO = sys.stdout, interval: float = 2.0) -> None:
        self.total, self.out, self.interval = total, out, interval
        self.done = self.failed = 0
        self.frames: dict[int, int] = {}
        self.running: set[int] = set()
        self.last = time.monotonic()
        self.t0 = time.monotonic()

    def __call__(self, e: Event) -> None:
        node = f"node {(e.node or '?')[:8]} ({e.address or '?'})"
        head = f"[{self.done + self.failed}/{self.total}] job {e.job}"
        if e.kind == "placed":
            self.say(f"{head}: placed on {node}" + (f", attempt {e.attempt}" if e.attempt > 1 else ""))
        elif e.kind == "refused":
            self.say(f"{head}: {node} is full ({e.message}); waiting for capacity")
        elif e.kind == "started":
            self.running.add(e.job)
        elif e.kind == "progress" and e.frames is not None:
            self.frames[e.job] = e.frames
        elif e.kind == "partial":
            self.say(f"{head}: kept the cut-off output {e.message} ({e.frames} frames)")
        elif e.kind == "lost":
            self.running.discard(e.job)
            self.say(f"{head}: {node} lost: {e.message}")
        elif e.kind == "retry":
            self.say(f"{head}: retrying ({e.message})")
        elif e.kind == "done":
            self.running.discard(e.job)
            self.done += 1
            self.frames[e.job] = e.frames or 0
            self.say(f"[{self.done + self.failed}/{self.total}] job {e.job}: finished on {node}, {e.frames} frames")
        elif e.kind == "failed":
            self.running.discard(e.job)
            self.failed += 1
            self.say(f"[{self.done + self.failed}/{self.total}] job {e.job}: FAILED: {e.message}")
        if time.monotonic() - self.last >= self.interval:
            self.last = time.monotonic()
            self.say(f"progress: {self.done} finished, {self.failed} failed, {len(self.running)} running, "
                     f"{sum(self.frames.values())} frames, {time.monotonic() - self.t0:.0f} s")

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)


def submit(args: argparse.Namespace) -> int:
    jobs = read_jobs(args.jobs)
    from .cluster import DiptychCluster
    cluster = DiptychCluster(args.address, binary=args.binary, serve_args=args.serve_arg or ())
    nodes = cluster.nodes()
    if not nodes:
        print(f"diptych.ray: no alive node advertises {RESOURCE}; start workers with "
              f"ray start --resources '{{\"{RESOURCE}\": N}}'", file=sys.stderr)
        return 1
    for n in nodes:
        print(f"node {n['node'][:8]} ({n['address']}): {n['advertised']:g} {RESOURCE} advertised, "
              f"{n['pairs']} measured, {n['health'].get('gpu', '?')}")
    printer = ProgressPrinter(len(jobs))
    t0 = time.time()
    results = cluster.composite_many(jobs, pairs=args.pairs, retries=args.retries, progress=printer)
    wall = time.time() - t0
    print()
    print(throughput_table(results))
    print()
    finished = sum(r.ok for r in results)
    frames = sum(r.frames for r in results)
    print(f"{finished} of {len(results)} jobs finished, {frames} frames in {wall:.1f} s")
    for r in results:
        for p in r.partials:
            print(f"job {r.index}: attempt {p.attempt} on node {(p.node or '?')[:8]} was cut off; "
                  f"kept {p.path} ({p.frames if p.frames is not None else '?'} frames)")
        if not r.ok:
            print(f"job {r.index} ({r.out}): failed: {r.error}")
    if args.results:
        write_results(args.results, results)
    return 0 if finished == len(results) else 1


def write_results(path: str, results: Sequence[JobResult]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump([r.as_dict() for r in results], f, indent=2, sort_keys=True)
        f.write("\n")


def resources(args: argparse.Namespace) -> int:
    pairs, health = measure_pairs(args.binary, args.serve_args, Reference.parse(args.reference))
    print(json.dumps({RESOURCE: pairs}))
    print(f"diptych.ray: {pairs} pairs of {args.reference} at real time on {health.get('gpu', '?')} "
          f"(cost {health['cost']['source']})", file=sys.stderr)
    return 0


def nodes(args: argparse.Namespace) -> int:
    from .cluster import DiptychCluster
    cluster = DiptychCluster(args.address, binary=args.binary, serve_args=args.serve_arg or ())
    print("| node | address | advertised | measured | restarts | takes | GPU |")
    print("| --- | --- | ---: | ---: | ---: | --- | --- |")
    for n in cluster.nodes():
        takes = ", ".join(f"{k} {v}" for k, v in sorted(n["health"].get("takes", {}).items())) or "none"
        print(f"| {n['node'][:12]} | {n['address']} | {n['advertised']:g} | {n['pairs']} | {n['restarts']} | "
              f"{takes} | {n['health'].get('gpu', '?')} |")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m diptych.ray", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def server_options(s: argparse.ArgumentParser) -> None:
        s.add_argument("--binary", help="the diptych executable on the nodes (default: $DIPTYCH_BINARY or PATH)")
        s.add_argument("--serve-arg", action="append", metavar="ARG",
                       help="an argument for each node's diptych serve (repeatable: --serve-arg=--max-takes "
                            "--serve-arg=8)")

    s = sub.add_parser("submit", help="run the file jobs of a JSON Lines file")
    s.add_argument("jobs", help="one take per line (JSON)")
    s.add_argument("--address", default="auto", help="the Ray cluster (default: auto)")
    s.add_argument("--pairs", type=float, default=1.0, help=f"{RESOURCE} each job holds (default 1)")
    s.add_argument("--retries", type=int, default=2, help="runs again after a node is lost (default 2)")
    s.add_argument("--results", help="write each job's result here (JSON)")
    server_options(s)
    s.set_defaults(run=submit)

    r = sub.add_parser("resources", help=f"measure this machine's {RESOURCE} for ray start --resources")
    r.add_argument("--binary", help="the diptych executable (default: $DIPTYCH_BINARY or PATH)")
    r.add_argument("--reference", default=str(Reference()), help="the take one pair stands for (default 1280x720@30)")
    r.add_argument("serve_args", nargs=argparse.REMAINDER, help="diptych serve arguments after --")
    r.set_defaults(run=resources)

    n = sub.add_parser("nodes", help="each node's server, capacity and takes")
    n.add_argument("--address", default="auto", help="the Ray cluster (default: auto)")
    server_options(n)
    n.set_defaults(run=nodes)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "serve_args", None) and args.serve_args[0] == "--":
        args.serve_args = args.serve_args[1:]
    try:
        code: int = args.run(args)
        return code
    except BadInput as e:
        print(f"diptych.ray: {e}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError) as e:
        print(f"diptych.ray: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        print(f"diptych.ray: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
