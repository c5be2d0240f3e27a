"""Failures: a node lost mid-batch (its file jobs finish on the other nodes,
the cut-off file kept and named; its live take reported failed with what
its file holds) and a server that crashes (started again by its node actor,
its job run again)."""
from __future__ import annotations

import os
import signal
import threading
from typing import Any

import diptych.ray as dray
from conftest import decoded_frames
from raysetup import Setup, endless, job, wait_frames


def test_a_node_lost_mid_batch(setup: Setup, tmp_path: Any, realtime: bool) -> None:
    node = setup.cluster.add_node(num_cpus=1, resources={dray.RESOURCE: setup.pairs})
    setup.cluster.wait_for_nodes()
    lost = node.node_id
    assert lost in {n["node"] for n in setup.dc.nodes()}  # its node actor and server are up
    # Two takes fit each node (--max-takes 2): each asks for half the node's pairs.
    unit = setup.pairs / 2
    live = setup.dc.submit(endless(str(tmp_path / "live.mp4"), realtime), live=True, node=lost, pairs=unit)
    assert isinstance(live, dray.LiveTake)
    assert live.started(timeout=120)["node"] == lost

    # Long enough that the job on the lost node is still running when the
    # progress event (polled) reaches this thread on a loaded machine.
    seconds = 10 if realtime else 120
    takes = [job(str(tmp_path / f"job{i}.mp4"), seconds, realtime) for i in range(5)]  # one slot left on each
    on_lost_node = threading.Event()
    events: list[dray.Event] = []

    def progress(e: dray.Event) -> None:
        events.append(e)
        if e.kind == "progress" and e.node == lost and (e.frames or 0) >= 45:
            on_lost_node.set()
    results: list[dray.JobResult] = []
    runner = threading.Thread(target=lambda: results.extend(
        setup.dc.composite_many(takes, pairs=unit, progress=progress)))
    runner.start()
    assert on_lost_node.wait(120), [(e.job, e.kind, e.node) for e in events]
    wait_frames(live, 45)
    setup.cluster.remove_node(node, allow_graceful=False)
    runner.join(300)
    assert not runner.is_alive() and len(results) == 5

    moved = [r for r in results if r.attempts[0].node == lost]
    assert len(moved) == 1, [(r.index, [a.node for a in r.attempts]) for r in results]
    for r in results:
        assert r.ok, r.error
        assert r.frames == 30 * seconds and decoded_frames(r.out) == 30 * seconds
        assert r.node != lost
    r = moved[0]
    assert len(r.attempts) == 2 and r.attempts[0].error
    assert [p.attempt for p in r.partials] == [1]
    partial = r.partials[0]
    assert partial.node == lost and partial.path == dray.partial_path(r.out, 1)
    assert partial.decodable and partial.frames is not None and 30 <= partial.frames < 30 * seconds
    assert decoded_frames(partial.path) >= partial.frames
    assert any(e.kind == "lost" for e in events) and any(e.kind == "retry" for e in events)

    report = live.status()
    assert report["state"] == "failed" and lost[:12] in report["error"]
    assert report["recovered"]["decodable"] and report["recovered"]["frames"] >= 30
    assert decoded_frames(str(tmp_path / "live.mp4")) >= report["recovered"]["frames"]


def test_a_crashed_server_is_started_again_and_its_job_retried(setup: Setup, tmp_path: Any, realtime: bool) -> None:
    # Long enough that the server is still writing when the progress event
    # (polled) reaches this thread and the kill lands, on a loaded machine.
    seconds = 10 if realtime else 120
    running = threading.Event()
    where: dict[str, str] = {}

    def progress(e: dray.Event) -> None:
        if e.kind == "progress" and (e.frames or 0) >= 45 and e.node and not running.is_set():
            where["node"] = e.node
            running.set()
    results: list[dray.JobResult] = []
    runner = threading.Thread(target=lambda: results.extend(
        setup.dc.composite_many([job(str(tmp_path / "crash.mp4"), seconds, realtime)], progress=progress)))
    runner.start()
    assert running.wait(120)
    [before] = [n for n in setup.dc.nodes() if n["node"] == where["node"]]
    os.kill(before["pid"], signal.SIGKILL)
    runner.join(300)
    [r] = results
    assert r.ok, r.error
    assert r.frames == 30 * seconds and decoded_frames(r.out) == 30 * seconds
    assert len(r.attempts) == 2 and r.attempts[0].node == where["node"]
    [partial] = r.partials
    assert partial.path == dray.partial_path(r.out, 1) and partial.decodable and (partial.frames or 0) >= 30
    [after] = [n for n in setup.dc.nodes() if n["node"] == where["node"]]
    assert after["restarts"] == before["restarts"] + 1 and after["pid"] != before["pid"]
    assert after["health"]["status"] == "ok"
