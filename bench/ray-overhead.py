#!/usr/bin/env python3
"""What Ray adds to a job: submit → first frame through diptych.ray against
the same job posted to the same diptych serve with diptych.Client.

A one-node Ray cluster (ray.cluster_utils.Cluster) whose node advertises
the diptych_pairs its server's admission figure gives; its node actor runs
the server. Jobs run one at a time, alternating between the two paths, so
both see the same machine state. Both poll the take for its first frame at
the same interval (--poll). The first Ray job (which starts a Ray worker
process) is reported on its own.

    swift build -c release --product diptych
    DIPTYCH_BINARY=.build/release/diptych python bench/ray-overhead.py [--jobs 20] [--out bench/results/ray-overhead]

Needs the diptych package with Ray (pip install ./python ray).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # every Ray address on loopback
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import diptych  # noqa: E402
import diptych.ray as dray  # noqa: E402
from diptych.ray.node import NAMESPACE, actor_name  # noqa: E402

SERVE_ARGS = ["--gpu", "software", "--max-takes", "4"]


def take(out: str, realtime: bool) -> dict[str, Any]:
    t = {"primary": "testsrc:counter:320x180@30", "secondary": "testsrc:solid-0000ff:160x90@30", "out": out,
         "duration": 1, "preset": "ultrafast", "audio": "none"}
    if realtime:
        t["realtime"] = "on"
    return t


def direct(client: diptych.Client, spec: dict[str, Any], poll: float) -> dict[str, float]:
    t0 = time.time()
    created = client.create(spec)
    t_started = time.time()
    while True:
        t = client.take(created["id"])
        if t["frames"] > 0 or t["state"] in diptych.client.ENDED:
            t_first = time.time()
            break
        time.sleep(poll)
    client.wait(created, timeout=120)
    return {"first_frame": t_first - t0, "started": t_started - t0}


def via_ray(dc: dray.DiptychCluster, spec: dict[str, Any]) -> dict[str, float]:
    marks: dict[str, float] = {}

    def progress(e: dray.Event) -> None:
        marks.setdefault(e.kind, e.time)
    t0 = time.time()
    [result] = dc.composite_many([spec], progress=progress)
    assert result.ok, result.error
    a = result.attempts[0]
    assert a.placed and a.started and a.first_frame
    return {"first_frame": a.first_frame - t0, "started": a.started - t0, "placed": a.placed - t0}


def summarize(samples: list[dict[str, float]], key: str) -> dict[str, float]:
    values = sorted(s[key] * 1000 for s in samples)
    return {"median_ms": statistics.median(values), "p90_ms": values[int(0.9 * (len(values) - 1))],
            "min_ms": values[0], "max_ms": values[-1]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=20, help="jobs per path (default 20)")
    p.add_argument("--poll", type=float, default=0.005, help="first-frame poll interval, seconds (default 0.005)")
    p.add_argument("--out", default="bench/results/ray-overhead", help="writes OUT.md and OUT.json")
    args = p.parse_args()
    binary = dray.server.find_binary(None)
    realtime = True
    pairs, health = dray.measure_pairs(binary, SERVE_ARGS)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {dray.RESOURCE: pairs},
                                                            "include_dashboard": False})
    ray.init(address=cluster.address, log_to_driver=False)
    work = tempfile.mkdtemp(prefix="diptych-ray-overhead-")
    try:
        dc = dray.DiptychCluster(binary=binary, serve_args=SERVE_ARGS, directory=work, poll_interval=args.poll)
        [node] = dc.nodes()
        url, token = ray.get(ray.get_actor(actor_name(node["node"]), namespace=NAMESPACE).endpoint.remote())
        client = diptych.Client(url, token=token)
        try:
            client.wait(client.create(take(os.path.join(work, "probe.mp4"), True)), timeout=120)
        except diptych.BadRequest:
            realtime = False  # a server without --realtime: jobs run as fast as they can
        cold = via_ray(dc, take(os.path.join(work, "cold.mp4"), realtime))
        rays, directs = [], []
        for i in range(args.jobs):
            directs.append(direct(client, take(os.path.join(work, f"d{i}.mp4"), realtime), args.poll))
            rays.append(via_ray(dc, take(os.path.join(work, f"r{i}.mp4"), realtime)))
        dc.shutdown()
    finally:
        ray.shutdown()
        cluster.shutdown()
    report = {
        "command": " ".join([f"DIPTYCH_BINARY={os.path.relpath(binary)}", os.path.basename(sys.executable), *sys.argv]),
        "jobs": args.jobs, "poll_s": args.poll, "realtime": realtime, "pairs": pairs, "gpu": health.get("gpu"),
        "ray_version": ray.__version__, "cpus": os.cpu_count(),
        "direct": {k: summarize(directs, k) for k in ("started", "first_frame")},
        "ray": {k: summarize(rays, k) for k in ("placed", "started", "first_frame")},
        "ray_cold_first_frame_ms": cold["first_frame"] * 1000,
    }
    d, r = report["direct"]["first_frame"], report["ray"]["first_frame"]
    report["overhead_median_ms"] = r["median_ms"] - d["median_ms"]
    report["ratio_median"] = r["median_ms"] / d["median_ms"]
    # Jobs alternate, so each Ray job has a direct one beside it under the same load.
    paired = sorted((x["first_frame"] - y["first_frame"]) * 1000 for x, y in zip(rays, directs))
    report["overhead_paired_median_ms"] = statistics.median(paired)
    lines = [
        "| path | submit → placed | submit → take started | submit → first frame (median) | p90 | min | max |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| diptych.Client | – | {report['direct']['started']['median_ms']:.1f} ms | {d['median_ms']:.1f} ms | "
        f"{d['p90_ms']:.1f} ms | {d['min_ms']:.1f} ms | {d['max_ms']:.1f} ms |",
        f"| diptych.ray | {report['ray']['placed']['median_ms']:.1f} ms | {report['ray']['started']['median_ms']:.1f} ms "
        f"| {r['median_ms']:.1f} ms | {r['p90_ms']:.1f} ms | {r['min_ms']:.1f} ms | {r['max_ms']:.1f} ms |",
        "",
        f"Ray adds {report['overhead_median_ms']:.1f} ms per job at the median ({report['ratio_median']:.2f}× the "
        f"direct path's submit → first frame; the median of the {len(paired)} Ray − direct differences of "
        f"neighbouring jobs is {report['overhead_paired_median_ms']:.1f} ms). The first job, which starts a Ray "
        f"worker process, took {report['ray_cold_first_frame_ms']:.0f} ms to its first frame.",
    ]
    print("\n".join(lines))
    md = [
        "# What Ray adds to a job (submit → first frame)",
        "",
        f"`{report['command']}` on a {report['cpus']}-core machine without a GPU ({report['gpu']}), "
        f"Ray {report['ray_version']}, {args.jobs} jobs per path, one at a time, alternating.",
        "",
        "Each job: 1 s of a 320×180 30 fps counter with a 160×90 inset, libx264 ultrafast, no audio"
        + (", paced at real time (`\"realtime\": \"on\"`)" if realtime else "") + ". "
        "diptych.Client posts it to the node's `diptych serve` and polls the take until it has a frame; "
        "diptych.ray runs it as a file job (`composite_many([take])`): a Ray task that holds one "
        "`diptych_pairs`, asks the node actor for its server, posts the take and polls it the same way "
        f"(every {args.poll * 1000:g} ms on both paths). Times are from the submitting call.",
        "",
        *lines,
        "",
        "Code path: `diptych.ray.batch.Runner` → `diptych.ray.jobs.file_job` (a streaming Ray task) → "
        "`DiptychNode.endpoint` → `diptych.Client.create` against the same server the direct path uses.",
    ]
    with open(args.out + ".md", "w", encoding="utf-8") as f:
        f.write("\n".join(md) + "\n")
    with open(args.out + ".json", "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
