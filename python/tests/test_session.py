"""diptych.Session against the installed libdiptych.so: frames pushed as
NumPy arrays in every format, composited frames and packets checked."""
from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np
import pytest

import diptych
from conftest import decoded_frames
from diptych.frames import NV12Frame, Packet, RGBAFrame
from diptych.session import options as session_options

W, H = 320, 180
RED, BLUE, GREEN = (255, 0, 0), (0, 0, 255), (0, 255, 0)
# BT.709 limited range.
YUV = {RED: (63, 102, 240), BLUE: (32, 240, 118), GREEN: (173, 42, 26)}


def rgba(color: tuple[int, int, int], pad: int = 0, bgra: bool = False) -> np.ndarray:
    """A solid frame whose rows are ``pad`` pixels longer than the picture."""
    buf = np.zeros((H, W + pad, 4), np.uint8)
    px = (color[2], color[1], color[0], 255) if bgra else (*color, 255)
    buf[:, :, :] = px
    return buf[:, :W]


def nv12(color: tuple[int, int, int], pad: int = 0) -> tuple[np.ndarray, np.ndarray]:
    y, u, v = YUV[color]
    ybuf = np.full((H, W + pad), y, np.uint8)
    uv = np.zeros((H // 2, W + pad), np.uint8)
    uv[:, 0::2], uv[:, 1::2] = u, v
    return ybuf[:, :W], uv[:, :W].reshape(H // 2, W // 2, 2)


def i420_packed(color: tuple[int, int, int]) -> np.ndarray:
    y, u, v = YUV[color]
    flat = np.concatenate([np.full(W * H, y, np.uint8), np.full(W * H // 4, u, np.uint8),
                           np.full(W * H // 4, v, np.uint8)])
    return flat.reshape(H * 3 // 2, W)


def near(px: Any, want: tuple[int, ...], tol: int) -> bool:
    return all(abs(int(a) - b) <= tol for a, b in zip(px, want))


def collect(**kwargs: Any) -> tuple[diptych.Session, list[Any]]:
    got: list[Any] = []
    lock = threading.Lock()

    def keep(item: Any) -> None:
        with lock:
            got.append(item)
    s = diptych.Session((W, H), 30, on_rgba=keep, library=os.environ["DIPTYCH_LIBRARY"], **kwargs)
    return s, got


def test_version(library: str) -> None:
    assert diptych.version(library).count(".") == 2


def test_rgba_and_bgra_with_padded_rows(library: str) -> None:
    """Side by side: the primary (RGBA, rows padded) left, the secondary
    (BGRA, other padding) right, exactly as pushed."""
    s, got = collect(layout="side-by-side")
    with s:
        for i in range(6):
            s.push("secondary", rgba(BLUE, pad=7, bgra=True), i * 33_333, format="bgra")
            s.push("primary", rgba(RED, pad=16), i * 33_333)
        summary = s.finish()
    assert summary["frames"] == 6 and len(got) == 6
    for i, f in enumerate(got):
        assert isinstance(f, RGBAFrame) and f.pixels.shape == (H, W, 4)
        assert f.pts == i * 33_333 and f.timescale == 1_000_000
        assert tuple(f.pixels[H // 2, W // 4]) == (*RED, 255)
        assert tuple(f.pixels[H // 2, 3 * W // 4]) == (*BLUE, 255)


def test_nv12_and_i420_with_strides(library: str) -> None:
    """An NV12 primary (planes with padded rows) and an I420 secondary (one
    packed buffer, then separate planes) composited as picture-in-picture;
    the NV12 output agrees with the RGBA one."""
    nv12_out: list[NV12Frame] = []
    s, got = collect(layout="pip", pip_corner="top-right", on_nv12=nv12_out.append, secondary_timeout=5)
    with s:
        for i in range(6):
            secondary: Any = i420_packed(BLUE) if i % 2 == 0 else tuple(
                np.ascontiguousarray(p) for p in (
                    np.full((H, W + 32), YUV[GREEN][0], np.uint8)[:, :W],
                    np.full((H // 2, W // 2 + 8), YUV[GREEN][1], np.uint8)[:, :W // 2],
                    np.full((H // 2, W // 2), YUV[GREEN][2], np.uint8)))
            s.push("secondary", secondary, i * 1000, timescale=30_000, format="i420")
            s.push("primary", nv12(RED, pad=64), i * 1000, timescale=30_000)
        s.finish()
    assert len(got) == 6 and len(nv12_out) == 6
    for i, (f, n) in enumerate(zip(got, nv12_out)):
        inset = BLUE if i % 2 == 0 else GREEN
        assert near(f.pixels[H - 20, 20], RED, 3), (i, f.pixels[H - 20, 20])
        assert near(f.pixels[25, W - 40], inset, 3), (i, f.pixels[25, W - 40])
        assert n.y.shape == (H, W) and n.uv.shape == (H // 2, W // 2, 2) and n.pts == f.pts
        assert near((n.y[H - 20, 20], *n.uv[(H - 20) // 2, 10]), YUV[RED], 3)
        assert near((n.y[25, W - 40], *n.uv[12, (W - 40) // 2]), YUV[inset], 3)


def test_a_layout_transition_moves_the_inset_over_its_frames(library: str) -> None:
    """set_layout with a transition: 200 ms at 30 fps is six frames, the
    first the old picture, the sixth the new, the inset moving one way."""
    s, got = collect(layout="pip", pip_corner="bottom-right")
    with s:
        for i in range(16):
            if i == 4:
                s.set_layout("pip", pip_corner="bottom-left", transition={"ms": 200, "easing": "linear"})
            s.push("secondary", rgba(BLUE), i * 100, timescale=3000)
            s.push("primary", rgba(RED), i * 100, timescale=3000)
        s.finish()
        with pytest.raises(diptych.InvalidArgument):
            s.set_layout("pip", transition="200:wobble")
    row = H - 30
    left = [next(x for x in range(W) if near(f.pixels[row, x], BLUE, 40)) for f in got]
    assert len(left) == 16
    assert left[:5] == [left[0]] * 5 and left[9:] == [left[15]] * 7, left
    assert all(left[15] < x < left[0] for x in left[5:9]), left
    assert all(b <= a for a, b in zip(left, left[1:])), left


def test_packets_and_frames_through_the_iterator_with_a_layout_change(library: str, tmp_path: Any) -> None:
    """Outputs read with the iterator while another thread pushes; the
    layout changes at exactly the frame pushed after set_layout; the packets
    decode to every frame."""
    n, switch = 20, 10
    s = diptych.Session((W, H), 30, layout="pip", pip_corner="top-right", preset="ultrafast",
                        outputs=("rgba", "packets"), queue_limit=4, library=library)

    def feed() -> None:
        for i in range(n):
            if i == switch:
                s.set_layout("side-by-side")
            s.push("secondary", rgba(BLUE), i * 100, timescale=3000)
            s.push("primary", rgba(RED), i * 100, timescale=3000)
        s.finish()
    pusher = threading.Thread(target=feed)
    pusher.start()
    frames: list[RGBAFrame] = []
    packets: list[Packet] = []
    for item in s.outputs(timeout=60):
        (frames if isinstance(item, RGBAFrame) else packets).append(item)  # type: ignore[arg-type]
    pusher.join()
    s.close()
    assert [f.pts for f in frames] == [i * 100 for i in range(n)]
    for i, f in enumerate(frames):
        right = tuple(f.pixels[H // 2, 3 * W // 4][:3])
        # Before the switch the right half is the primary (the inset is top right); after it, the secondary.
        assert right == (RED if i < switch else BLUE), (i, right)
    assert len(packets) == n and packets[0].keyframe
    assert all(p.data.startswith((b"\x00\x00\x00\x01", b"\x00\x00\x01")) for p in packets)
    assert [p.pts for p in packets] == [i * 100 for i in range(n)] and all(p.timescale == 3000 for p in packets)
    stream = tmp_path / "take.h264"
    stream.write_bytes(b"".join(p.data for p in packets))
    assert decoded_frames(str(stream)) == n


def test_file_output(library: str, tmp_path: Any) -> None:
    out = str(tmp_path / "take.mp4")
    with diptych.Session("320x180", "30000/1001", out=out, preset="ultrafast", secondary="none",
                         library=library) as s:
        for i in range(15):
            s.push("primary", rgba(GREEN), i * 1001, timescale=30_000)
        summary = s.finish()
    assert summary["frames"] == 15
    assert decoded_frames(out) == 15


def write_png(path: str, pixels: np.ndarray) -> None:
    """An RGBA PNG (8 bits a channel) from an (h, w, 4) uint8 array."""
    import struct
    import zlib
    h, w = pixels.shape[:2]
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def last_over_blue(**options: Any) -> Any:
    """The pixels of the last of three blue primary frames drawn with `options` (no secondary)."""
    s, got = collect(secondary="none", **options)
    with s:
        for i in range(3):
            s.push("primary", rgba(BLUE), i * 100, timescale=3000)
        s.finish()
    return got[-1].pixels


def test_an_image_overlay_is_drawn_with_its_alpha(library: str, tmp_path: Any) -> None:
    """overlay=[...] is one --overlay an item: a PNG with alpha over the streams."""
    png = str(tmp_path / "logo.png")
    logo = np.zeros((16, 16, 4), np.uint8)
    logo[:, :] = (255, 0, 0, 128)
    write_png(png, logo)
    assert session_options(overlay=[f"{png}@0.25,0.25,0.5,0.5", f"{png}@0,0,0.1,0.1,0.5,bottom"]) == [
        "--overlay", f"{png}@0.25,0.25,0.5,0.5", "--overlay", f"{png}@0,0,0.1,0.1,0.5,bottom"]
    px = last_over_blue(overlay=[f"{png}@0.25,0.25,0.5,0.5,1,top"])
    # Red at alpha 128 over blue, premultiplied: (128, 0, 255 x 127/255); outside it, blue.
    assert near(px[H // 2, W // 2], (128, 0, 127), 1), px[H // 2, W // 2]
    assert near(px[5, 5], BLUE, 1), px[5, 5]


def test_encoder_and_rate_control_options(library: str, tmp_path: Any) -> None:
    assert session_options(encoder="gpu", qp=24, maxrate="4M", bufsize="8M", slices=4) == [
        "--encoder", "gpu", "--qp", "24", "--maxrate", "4M", "--bufsize", "8M", "--slices", "4"]
    out = str(tmp_path / "qp.mp4")
    with diptych.Session("320x180", 30, out=out, encoder="x264", qp=20, preset="ultrafast", secondary="none",
                         slices=2, library=library) as s:
        for i in range(10):
            s.push("primary", rgba(GREEN), i * 33_333)
        assert s.finish()["frames"] == 10
    assert decoded_frames(out) == 10
    # The GPU encoder is H.264 only; a --qp outside 0-51 names itself.
    with pytest.raises(diptych.InvalidArgument) as hevc:
        diptych.Session((W, H), 30, encoder="gpu", codec="hevc", library=library)
    assert "encodes H.264 only, not --codec hevc" in hevc.value.message
    with pytest.raises(diptych.InvalidArgument) as qp:
        diptych.Session((W, H), 30, qp=52, library=library)
    assert "--qp '52'" in qp.value.message
    with pytest.raises(diptych.InvalidArgument) as slices:
        diptych.Session((W, H), 30, slices=0, library=library)
    assert "--slices '0'" in slices.value.message


def test_errors_carry_the_code_and_message(library: str) -> None:
    with pytest.raises(diptych.InvalidArgument) as bad:
        diptych.Session((W, H), 30, layout="diagonal", library=library)
    assert bad.value.code == -1 and "diagonal" in bad.value.message
    with pytest.raises(diptych.InvalidArgument):
        diptych.Session((W, H), 30, frobnicate=1, library=library)

    s = diptych.Session((W, H), 30, secondary="none", library=library)
    with s:
        odd = (np.zeros((H, W - 1), np.uint8), np.zeros((H // 2, W // 2), np.uint8))
        with pytest.raises(diptych.BadFrame) as frame:
            s.push("primary", odd, 0)
        assert frame.value.code == -2 and frame.value.message
        s.push("primary", rgba(RED), 1000)
        with pytest.raises(diptych.TimestampError) as ts:
            s.push("primary", rgba(RED), 1000)
        assert ts.value.code == -3
        with pytest.raises(diptych.StateError) as role:
            s.push("secondary", rgba(BLUE), 2000)
        assert role.value.code == -4
        with pytest.raises(ValueError, match="shape"):
            s.push("primary", np.zeros((H, W, 3), np.uint8), 3000)
        with pytest.raises(diptych.InvalidArgument):
            s.set_layout("pip", pip_corner="middle")
        assert s.finish()["frames"] == 1
        with pytest.raises(diptych.StateError) as after:
            s.push("primary", rgba(RED), 5000)
        assert after.value.code == -4 and "finish" in after.value.message


def test_a_callback_exception_is_raised_by_finish(library: str) -> None:
    class Boom(Exception):
        pass

    def fail(_: RGBAFrame) -> None:
        raise Boom("from the callback")
    with diptych.Session((W, H), 30, secondary="none", on_rgba=fail, library=library) as s:
        s.push("primary", rgba(RED), 0)
        with pytest.raises(Boom):
            s.finish()


def test_a_session_left_open_is_finished_at_exit(library: str, tmp_path: Any) -> None:
    """A script that never closes a session with callbacks exits (the session
    is finished before the interpreter shuts down) and its file is whole."""
    import subprocess
    import sys
    out = str(tmp_path / "left-open.mp4")
    script = (
        "import numpy as np, diptych\n"
        f"s = diptych.Session((64, 64), 30, secondary='none', out={out!r}, preset='ultrafast',\n"
        f"                    on_rgba=lambda f: None, library={library!r})\n"
        "for i in range(10):\n"
        "    s.push('primary', np.full((64, 64, 4), 200, np.uint8), i)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert decoded_frames(out) == 10


FONT = os.path.join(os.path.dirname(__file__), "..", "..", "Tests", "Fixtures", "Fonts", "DejaVuSans.ttf")


def test_a_text_overlay_is_drawn_over_the_streams(library: str) -> None:
    """text=[...] is one --text an item: its box and glyphs over the streams, set from the take's clock."""
    assert session_options(text=["{timecode}@0.05,0.9,40", "Cam 2@0.5,0,align=center"]) == [
        "--text", "{timecode}@0.05,0.9,40", "--text", "Cam 2@0.5,0,align=center"]
    px = last_over_blue(text=[f"{{frame}}@0,0,20,color=00FF00,box=00FF00:8,font={FONT}"])
    # The box's corner (the padding, opaque green); far from it, the primary.
    assert near(px[2, 2], (0, 255, 0), 1), px[2, 2]
    assert near(px[H - 5, W - 5], BLUE, 1), px[H - 5, W - 5]
