"""What a media file holds, through ``ffprobe`` (installed with FFmpeg).

Used to report what a partial or interrupted output holds: Diptych's MP4 is
fragmented, so a file cut off at any moment keeps every complete fragment.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class Probe:
    """The first video stream of a file: ``frames`` counted (packets, or
    decoded frames with ``decode=True``), ``seconds`` of video, whether it
    decodes at all (``decodable``), and ``error`` when it does not."""
    path: str
    frames: Optional[int]
    seconds: Optional[float]
    decodable: bool
    error: Optional[str] = None

    def asdict(self) -> dict[str, Any]:
        return asdict(self)


def probe(path: str, *, decode: bool = False, timeout: float = 120.0, ffprobe: Optional[str] = None) -> Probe:
    """Counts the video frames of ``path``; never raises for a missing or
    broken file (``decodable`` is False and ``error`` says why)."""
    tool = ffprobe or shutil.which("ffprobe")
    if tool is None:
        return Probe(path, None, None, False, "ffprobe not found (install FFmpeg)")
    if not os.path.exists(path):
        return Probe(path, None, None, False, f"{path}: no such file")
    count, field = ("-count_frames", "nb_read_frames") if decode else ("-count_packets", "nb_read_packets")
    try:
        r = subprocess.run([tool, "-v", "error", "-select_streams", "v:0", count, "-show_entries",
                            f"stream={field},duration:format=duration", "-of", "json", path],
                           capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        return Probe(path, None, None, False, f"ffprobe: {e}")
    try:
        info = json.loads(r.stdout or "{}")
    except ValueError:
        info = {}
    streams = info.get("streams") or []
    if r.returncode != 0 or not streams:
        why = (r.stderr.strip().splitlines() or ["no video stream"])[-1]
        return Probe(path, 0 if r.returncode == 0 else None, None, False, why)
    stream = streams[0]
    frames = int(stream.get(field) or 0)
    duration = stream.get("duration") or (info.get("format") or {}).get("duration")
    seconds = float(duration) if duration not in (None, "N/A") else None
    return Probe(path, frames, seconds, frames > 0)
