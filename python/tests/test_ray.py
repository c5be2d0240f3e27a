"""diptych.ray on a real Ray cluster of two nodes on this machine
(``ray.cluster_utils.Cluster``), each node advertising its own
``diptych_pairs`` and running its own ``diptych serve``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

import pytest
import ray

import diptych.ray as dray
from conftest import decoded_frames
from raysetup import Setup, endless, job, wait_frames


def test_nodes_run_their_own_servers(setup: Setup) -> None:
    nodes = setup.dc.nodes()
    assert len(nodes) == 2
    assert len({n["url"] for n in nodes}) == 2 and len({n["pid"] for n in nodes}) == 2
    for n in nodes:
        # Advertised: the scratch server's figure. Measured: each node's own
        # server calibrates again, so on a loaded machine it may admit fewer.
        assert n["advertised"] == setup.pairs and 1 <= n["pairs"] <= 2, n
        assert n["health"]["status"] == "ok"


def test_twelve_jobs_spread_over_both_nodes(setup: Setup, tmp_path: Any, realtime: bool) -> None:
    takes = [job(str(tmp_path / f"job{i}.mp4"), 1 + (i % 3) / 3, realtime) for i in range(12)]
    events: list[dray.Event] = []
    results = setup.dc.composite_many(takes, progress=events.append)
    assert [r.index for r in results] == sorted(r.index for r in results)
    nodes = {r.node for r in results}
    assert len(nodes) == 2, [(r.index, r.node) for r in results]
    for i, r in enumerate(results):
        want = 30 + (i % 3) * 10
        assert r.ok, r.error
        assert r.frames == want and len(r.attempts) == 1 and not r.partials
        assert decoded_frames(r.out) == want
    kinds = {e.kind for e in events}
    assert {"placed", "started", "first_frame", "done"} <= kinds
    table = dray.throughput_table(results)
    assert table.count("\n") == 3 and all(n[:12] in table for n in nodes if n)


def test_a_refused_take_waits_for_capacity(setup: Setup, tmp_path: Any, realtime: bool) -> None:
    """Both servers are full (--max-takes 2, taken by takes posted to them
    directly); the jobs get 503 and wait, then run when room is made."""
    node_ids = [n["node"] for n in setup.dc.nodes()]
    fillers = []
    for k, node in enumerate(node_ids):
        c = setup.client(node)
        for j in range(2):
            t = c.create(endless(str(tmp_path / f"filler{k}{j}.mp4"), realtime))
            fillers.append((c, t["id"]))
    refused = threading.Event()
    seen: list[dray.Event] = []

    def progress(e: dray.Event) -> None:
        seen.append(e)
        # Each job refused at least once (one job's retries alone would not say the other was).
        if len({x.job for x in seen if x.kind == "refused"}) >= 2:
            refused.set()
    results: list[dray.JobResult] = []
    runner = threading.Thread(target=lambda: results.extend(setup.dc.composite_many(
        [job(str(tmp_path / f"waiting{i}.mp4"), 1, realtime) for i in range(2)], progress=progress)))
    runner.start()
    try:
        assert refused.wait(120), [(e.job, e.kind) for e in seen]
        assert not any(e.kind in ("done", "failed") for e in seen)
    finally:
        for c, tid in fillers:
            c.stop(tid)
    runner.join(180)
    assert len(results) == 2
    for r in results:
        assert r.ok, r.error
        assert r.refusals >= 1 and r.frames == 30 and decoded_frames(r.out) == 30
    assert any("--max-takes" in (e.message or "") for e in seen if e.kind == "refused")


def test_a_live_take_is_changed_through_its_actor(setup: Setup, tmp_path: Any, realtime: bool) -> None:
    out = str(tmp_path / "live.mp4")
    live = setup.dc.submit(endless(out, realtime), live=True)
    assert isinstance(live, dray.LiveTake)
    info = live.started(timeout=120)
    assert info["node"] in {n["node"] for n in setup.dc.nodes()}
    wait_frames(live, 30)
    assert live.patch({"kind": "side-by-side"})["layout"]["kind"] == "side-by-side"
    assert live.switch("secondary", "testsrc:solid-00ff00:160x90@30")["role"] == "secondary"
    before = live.status()["frames"]
    wait_frames(live, before + 30)
    final = live.stop()
    assert final["state"] == "finished" and final["summary"]["hotSwaps"] == 1
    assert live.status() == final and live.stop() == final  # the final JSON, not a lost node
    assert decoded_frames(out) == final["summary"]["frames"]
    with pytest.raises(ray.exceptions.RayError):  # the lease ended and gave its pairs back
        ray.get(live._lease.take.remote(), timeout=30)


def test_the_cli_prints_progress_and_a_table(setup: Setup, tmp_path: Any, realtime: bool) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("\n".join(json.dumps(job(f"cli{i}.mp4", 1, realtime)) for i in range(3)) + "\n")
    env = {**os.environ, "DIPTYCH_BINARY": setup.dc.settings.binary or ""}
    cmd = [sys.executable, "-m", "diptych.ray", "submit", str(jobs), "--address", setup.cluster.address,
           "--results", str(tmp_path / "results.json")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 of 3 jobs finished, 90 frames" in r.stdout
    assert "| node | address | jobs | frames |" in r.stdout and "finished on node" in r.stdout
    for i in range(3):
        assert decoded_frames(str(tmp_path / f"cli{i}.mp4")) == 30
    assert [x["state"] for x in json.loads((tmp_path / "results.json").read_text())] == ["finished"] * 3

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(job("a.mp4", 1, realtime)) + "\n{\"primary\": \n")
    r = subprocess.run(cmd[:4] + [str(bad)] + cmd[5:7], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "bad.jsonl:2: not valid JSON" in r.stderr
