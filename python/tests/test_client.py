"""diptych.Client against a real ``diptych serve`` on loopback."""
from __future__ import annotations

import math
import socket
import subprocess
import time
from typing import Any

import pytest

import diptych
from conftest import decoded_frames
from diptych.ray.server import ServeProcess

LIVE = {"primary": "testsrc:counter:320x180@30", "secondary": "testsrc:solid-0000ff:160x90@30",
        "preset": "ultrafast", "audio": "none"}


def test_take_lifecycle(server: ServeProcess, tmp_path: Any) -> None:
    c = server.client()
    out = str(tmp_path / "take.mp4")
    take = c.create({**LIVE, "out": out})
    tid = take["id"]
    assert take["state"] in ("starting", "recording")
    assert [t["id"] for t in c.takes()] == [tid]
    c.wait(tid, until=lambda t: t["frames"] >= 30, timeout=60)

    patched = c.patch(tid, {"kind": "side-by-side"})
    assert patched["layout"]["kind"] == "side-by-side"
    eased = c.patch(tid, {"kind": "pip"}, transition={"ms": 300, "easing": "ease-out"})
    assert eased["layout"]["kind"] == "pip"
    with pytest.raises(diptych.BadRequest) as easing:
        c.patch(tid, {"kind": "stacked"}, transition={"ms": 300, "easing": "bounce"})
    assert easing.value.status == 400 and "transition.easing" in easing.value.message
    c.patch(tid, {"kind": "side-by-side"}, transition="250:linear")
    with pytest.raises(diptych.BadRequest) as bad:
        c.patch(tid, {"kind": "diagonal"})
    assert bad.value.status == 400 and "layout.kind" in bad.value.message
    with pytest.raises(diptych.Conflict) as frozen:
        c.request("PATCH", f"/v1/takes/{tid}", {"size": "640x360"})
    assert frozen.value.status == 409 and frozen.value.message.startswith("size:")

    switched = c.switch(tid, "secondary", "testsrc:solid-00ff00:160x90@30")
    assert switched["role"] == "secondary"
    before = c.take(tid)["frames"]
    c.wait(tid, until=lambda t: t["frames"] >= before + 30, timeout=60)

    final = c.stop(take)
    assert final["state"] == "finished"
    assert final["summary"]["hotSwaps"] == 1
    assert decoded_frames(out) == final["summary"]["frames"] == final["frames"]
    with pytest.raises(diptych.Conflict):
        c.patch(tid, {"kind": "pip"})


def test_refusals_carry_status_and_reason(server: ServeProcess, tmp_path: Any) -> None:
    c = server.client()
    with pytest.raises(diptych.NotFound) as missing:
        c.take("nosuchtake")
    assert missing.value.status == 404 and "nosuchtake" in missing.value.message
    with pytest.raises(diptych.BadRequest) as bad:
        c.create({"primary": "testsrc:smpte", "out": str(tmp_path / "a.mp4"), "bitrate": -5})
    assert "bitrate" in bad.value.message and "\n" not in bad.value.message
    huge = {"primary": "testsrc:counter:320x180@60", "size": "7680x4320", "out": str(tmp_path / "big.mp4")}
    with pytest.raises(diptych.Unavailable) as full:
        c.create(huge)
    assert full.value.status == 503 and "over capacity" in full.value.message
    refused: list[diptych.Unavailable] = []
    t0 = time.monotonic()
    with pytest.raises(diptych.Unavailable):
        c.create(huge, wait_for_capacity=1.5, on_refused=refused.append, retry_interval=0.2)
    assert refused and 1.0 <= time.monotonic() - t0 < 10
    with pytest.raises(diptych.Unauthorized) as token:
        diptych.Client(server.url or "").takes()
    assert token.value.status == 401
    assert diptych.Client(server.url or "", token="wrong").healthz()["status"] == "ok"  # /healthz needs no token
    with pytest.raises(diptych.ServerUnreachable) as gone:
        diptych.Client("http://127.0.0.1:9", timeout=5).healthz()
    assert gone.value.status == 0


def test_metrics_and_healthz(server: ServeProcess, tmp_path: Any) -> None:
    c = server.client()
    health = c.healthz()
    assert health["status"] == "ok" and health["capacity"]["cpuCores"] > 0
    assert health["cost"]["cpuSecondsPerMegapixel"] > 0
    t = c.create({**LIVE, "out": str(tmp_path / "m.mp4"), "duration": 1})
    c.wait(t, timeout=60)
    text = c.metrics()
    assert "# TYPE diptych_takes gauge" in text
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in c.metric_samples()}
    assert samples[("diptych_takes", (("state", "finished"),))] == 1
    assert samples[("diptych_frames_total", ())] == 30
    assert samples[("diptych_admissions_total", ())] == 1
    assert all(math.isfinite(v) for v in samples.values())


def test_source_list_and_reconnect_window(server: ServeProcess, tmp_path: Any) -> None:
    # A list whose first source (a TCP port nothing listens on) does not open:
    # the take shows the pattern after it, and says so. (A UDP source would bind a
    # port of the server's host, which this server does not allow.)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as free:
        free.bind(("127.0.0.1", 0))
        silent = f"tcp://127.0.0.1:{free.getsockname()[1]}"
    c = server.client()
    take = c.create({**LIVE, "primary": [silent, "testsrc:counter:320x180@30"], "primaryTimeout": 1,
                     "sourceReconnectWindow": 20, "sourceFailback": 3, "out": str(tmp_path / "l.mp4")})
    assert take["configuration"]["primary"] == [silent, "testsrc:counter:320x180@30"]
    assert take["configuration"]["sourceReconnectWindow"] == 20 and take["configuration"]["sourceFailback"] == 3
    running = c.wait(take, until=lambda t: t["frames"] >= 15 and t["sources"]["roles"], timeout=60)
    primary = running["sources"]["roles"][0]
    assert primary == {"role": "primary", "source": "testsrc:counter:320x180@30", "index": 1, "listed": 2, "lost": False,
                       "switches": 0}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in c.metric_samples()}
    assert samples[("diptych_take_source_index", (("role", "primary"), ("take", take["id"])))] == 1
    assert samples[("diptych_take_source_switches_total", (("reason", "failover"), ("role", "primary"), ("take", take["id"])))] == 0
    final = c.stop(take)
    assert final["summary"]["sourceSwitches"] == [] and final["sources"]["switches"] == []
    with pytest.raises(diptych.BadRequest) as bad:
        c.create({**LIVE, "sourceReconnectWindow": -1, "out": str(tmp_path / "b.mp4")})
    assert bad.value.message.startswith("sourceReconnectWindow")


def test_audio_fields(server: ServeProcess, tmp_path: Any) -> None:
    # Two streams with tones, mixed with a gain each: the take says so, and its file carries the mix.
    tones: list[str] = []
    for name, hz in (("a.mkv", 440), ("b.mkv", 880)):
        path = str(tmp_path / name)
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x180:rate=30:duration=2",
                        "-f", "lavfi", "-i", f"sine=frequency={hz}:duration=2", "-c:v", "libx264", "-preset", "ultrafast",
                        "-c:a", "aac", "-shortest", path], check=True, timeout=60)
        tones.append(path)
    c = server.client()
    out = str(tmp_path / "mix.mp4")
    take = c.create({"primary": tones[0], "secondary": tones[1], "preset": "ultrafast", "audio": "mix",
                     "primaryGain": -6, "secondaryGain": 3, "out": out})
    assert take["configuration"]["audio"] == "mix"
    assert take["configuration"]["primaryGain"] == -6 and take["configuration"]["secondaryGain"] == 3
    final = c.wait(take, timeout=60)
    assert final["state"] == "finished", final.get("error")
    streams = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_type", "-of", "csv=p=0", out],
                             capture_output=True, text=True, check=True, timeout=60).stdout.split()
    assert streams.count("audio") == 1 and streams.count("video") == 1, streams
    with pytest.raises(diptych.BadRequest) as bad:
        c.create({**LIVE, "audio": "both", "out": str(tmp_path / "b.mp4")})
    assert bad.value.message.startswith("audio")
    with pytest.raises(diptych.BadRequest) as loud:
        c.create({**LIVE, "audio": "mix", "secondaryGain": 40, "out": str(tmp_path / "c.mp4")})
    assert loud.value.message.startswith("secondaryGain")


def test_outputs_with_their_own_encoding(server: ServeProcess, tmp_path: Any) -> None:
    """A ladder from one take: an ``alsoOut`` rung at its own size, bit rate
    and half the rate, and an output added with its own size; each file at its
    size and rate; a bad value is a BadRequest naming the field."""
    c = server.client()
    main, half, small = (str(tmp_path / n) for n in ("main.mp4", "half.mp4", "small.mp4"))
    t = c.create({**LIVE, "out": main,
                  "alsoOut": [{"out": half, "size": "160x90", "bitrate": "200k", "rateDivisor": 2}]})
    [_, rung] = t["outputs"]
    assert rung["size"] == "160x90" and rung["bitrate"] == 200000 and rung["rateDivisor"] == 2, rung
    c.wait(t, until=lambda x: x["frames"] >= 15, timeout=60)
    with pytest.raises(diptych.BadRequest) as odd:
        c.add_output(t, str(tmp_path / "odd.mp4"), size="161x90")
    assert odd.value.message.startswith("output.size"), odd.value.message
    with pytest.raises(diptych.BadRequest) as zero:
        c.add_output(t, str(tmp_path / "zero.mp4"), rate_divisor=0)
    assert zero.value.message.startswith("output.rateDivisor"), zero.value.message
    with pytest.raises(diptych.BadRequest) as unsplit:
        c.add_output(t, str(tmp_path / "x.ts"), segment_time=1)
    assert unsplit.value.message.startswith("output.segmentTime"), unsplit.value.message
    index = c.add_output(t, small, size="96x54", bitrate="100k", preset="ultrafast")
    start = c.take(t)["frames"]
    c.wait(t, until=lambda x: x["frames"] >= start + 30, timeout=60)
    removed = c.remove_output(t, index)
    assert removed["canvas"] == "96x54" and removed["frameRate"] == "30" and removed["bitrate"] == 100000, removed
    final = c.stop(t)
    assert final["state"] == "finished", final.get("error")
    [rung_summary] = [o for o in final["summary"]["outputs"] if o["output"] == half]
    assert rung_summary["canvas"] == "160x90" and rung_summary["frameRate"] == "15", rung_summary

    def probe(path: str) -> list[str]:
        return subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v", "-show_entries",
                               "stream=width,height,avg_frame_rate,nb_read_frames", "-of", "csv=p=0", path],
                              capture_output=True, text=True, check=True, timeout=60).stdout.strip().split(",")

    assert probe(half)[:3] == ["160", "90", "15/1"] and probe(small)[:2] == ["96", "54"]
    assert int(probe(half)[3]) == (final["summary"]["frames"] + 1) // 2 == rung_summary["frames"]


def test_outputs_added_and_removed(server: ServeProcess, tmp_path: Any) -> None:
    c = server.client()
    t = c.create({**LIVE, "out": str(tmp_path / "main.mp4")})
    c.wait(t, until=lambda x: x["frames"] >= 15, timeout=60)
    extra = str(tmp_path / "extra.mp4")
    index = c.add_output(t, extra, layout={"kind": "side-by-side"})
    assert index == 1
    start = c.take(t)["frames"]
    c.wait(t, until=lambda x: x["frames"] >= start + 30, timeout=60)
    png = c.snapshot(t, output=index)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with pytest.raises(diptych.NotFound):
        c.snapshot(t, output=5)
    removed = c.remove_output(t, index)
    assert int(removed["index"]) == index and removed["output"] == extra and removed["frames"] >= 30
    with pytest.raises(diptych.NotFound):
        c.remove_output(t, 7)
    with pytest.raises(diptych.BadRequest) as bad:
        c.add_output(t, "pipe:1")
    assert "pipe:1" in bad.value.message
    final = c.stop(t)
    assert decoded_frames(str(tmp_path / "main.mp4")) == final["summary"]["frames"]
    # This take's events, in order, from the server's event stream (replayed from its start).
    mine = []
    for e in c.events(after=0, timeout=30):
        if e.data.get("take") == t["id"]:
            mine.append(e.type)
        if e.data.get("take") == t["id"] and e.type in ("finished", "failed"):
            break
    assert mine == ["created", "started", "output-added", "output-removed", "finished"], mine
    [added] = [o for o in final["summary"]["outputs"] if o["output"] == extra]
    assert added["frames"] >= 30 and added.get("failure") is None
    assert decoded_frames(extra) == added["frames"]
