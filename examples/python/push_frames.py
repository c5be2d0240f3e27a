#!/usr/bin/env python3
"""Embed Diptych from Python through ctypes (no bindings to build).

Pushes a red primary and a blue secondary (both RGBA), switches from
picture-in-picture to side by side half-way, and checks the composited RGBA
frames that come back. Prints "push_frames.py: OK" and exits 0 on success.

    python3 push_frames.py [PATH/TO/libdiptych.so.0]

Without an argument the library is found through pkg-config (diptych.pc).
"""
import ctypes
import subprocess
import sys
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int32, c_int64, c_size_t, c_uint32, c_uint64,
                    c_void_p, byref)


class Frame(Structure):
    _fields_ = [("width", c_int32), ("height", c_int32), ("format", c_int32), ("reserved", c_int32),
                ("data", c_void_p * 4), ("stride", c_int32 * 4), ("size", c_size_t * 4),
                ("pts", c_int64), ("timescale", c_int32), ("reserved2", c_int32)]


class Packet(Structure):
    _fields_ = [("data", c_void_p), ("size", c_size_t), ("pts", c_int64), ("dts", c_int64),
                ("duration", c_int64), ("timescale", c_int32), ("keyframe", c_int32)]


class DmaBuf(Structure):
    _fields_ = [("width", c_int32), ("height", c_int32), ("fourcc", c_uint32), ("plane_count", c_int32),
                ("modifier", c_uint64), ("fd", c_int32 * 4), ("offset", c_uint32 * 4), ("stride", c_uint32 * 4),
                ("pts", c_int64), ("timescale", c_int32), ("reserved", c_int32)]


FRAME_FN = CFUNCTYPE(None, c_void_p, POINTER(Frame))
PACKET_FN = CFUNCTYPE(None, c_void_p, POINTER(Packet))
DMABUF_FN = CFUNCTYPE(None, c_void_p, POINTER(DmaBuf), c_int32)
LOG_FN = CFUNCTYPE(None, c_void_p, c_char_p)


class Outputs(Structure):
    _fields_ = [("struct_size", c_uint32), ("rgba_interval", c_int32), ("user", c_void_p),
                ("on_rgba", FRAME_FN), ("on_nv12", FRAME_FN), ("on_dmabuf", DMABUF_FN),
                ("on_packet", PACKET_FN), ("on_log", LOG_FN)]


OK, WOULD_BLOCK = 0, 1
PRIMARY, SECONDARY = 0, 1
FORMAT_RGBA = 0
PUSH_NONBLOCK = 1


def load(path=None):
    if path is None:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "diptych"], check=True,
                                capture_output=True, text=True).stdout.strip()
        path = libdir + "/libdiptych.so.0"
    lib = ctypes.CDLL(path)
    lib.diptych_version.restype = c_char_p
    lib.diptych_last_error.restype = c_char_p
    lib.diptych_outputs_init.argtypes = [POINTER(Outputs)]
    lib.diptych_session_create.argtypes = [POINTER(c_char_p), c_int32, POINTER(Outputs), POINTER(c_void_p)]
    lib.diptych_session_push_frame.argtypes = [c_void_p, c_int32, POINTER(Frame), c_int32]
    lib.diptych_session_set_layout.argtypes = [c_void_p, POINTER(c_char_p), c_int32]
    lib.diptych_session_finish.argtypes = [c_void_p, POINTER(c_int64)]
    lib.diptych_session_destroy.argtypes = [c_void_p]
    return lib


def args(*words):
    return (c_char_p * len(words))(*[w.encode() for w in words]), len(words)


def solid(width, height, rgba, pts, timescale=1000):
    buf = ctypes.create_string_buffer(bytes(rgba) * (width * height), width * height * 4)
    f = Frame(width=width, height=height, format=FORMAT_RGBA, pts=pts, timescale=timescale)
    f.data[0] = ctypes.addressof(buf)
    f.stride[0] = width * 4
    f.size[0] = width * height * 4
    return f, buf  # keep buf alive until the push returns (it is copied then)


def main():
    lib = load(sys.argv[1] if len(sys.argv) > 1 else None)
    print("diptych", lib.diptych_version().decode())
    W, H, N, SWITCH = 320, 180, 20, 10
    lock = threading.Lock()
    seen = []  # (pts, pixel at top-right corner, left-half pixel, right-half pixel, top-left pixel)

    def on_rgba(user, frame):
        f = frame.contents
        row = f.stride[0]
        base = f.data[0]

        def px(x, y):
            return tuple(ctypes.string_at(base + y * row + x * 4, 3))
        with lock:
            seen.append((f.pts, px(W - 30, 20), px(W // 4, H // 2), px(3 * W // 4, H // 2), px(8, 8)))

    outputs = Outputs()
    lib.diptych_outputs_init(byref(outputs))
    outputs.on_rgba = FRAME_FN(on_rgba)  # keep a reference: outputs lives until the end
    argv, argc = args("--size", "320x180", "--fps", "30", "--layout", "pip", "--pip-corner", "top-right")
    session = c_void_p()
    if lib.diptych_session_create(argv, argc, byref(outputs), byref(session)) != OK:
        sys.exit("create: " + lib.diptych_last_error().decode())

    # A NULL session is an error code with a message, not a crash.
    f, keep = solid(W, H, (255, 0, 0, 255), 0)
    assert lib.diptych_session_push_frame(None, PRIMARY, byref(f), 0) < 0
    print("NULL session ->", lib.diptych_last_error().decode())

    for i in range(N):
        pts = 1000 + i * 33  # milliseconds
        if i == SWITCH:
            argv, argc = args("--layout", "side-by-side")
            assert lib.diptych_session_set_layout(session, argv, argc) == OK
        s, keep_s = solid(W, H, (0, 0, 255, 255), pts)
        assert lib.diptych_session_push_frame(session, SECONDARY, byref(s), 0) == OK, lib.diptych_last_error()
        p, keep_p = solid(W, H, (255, 0, 0, 255), pts)
        while (st := lib.diptych_session_push_frame(session, PRIMARY, byref(p), PUSH_NONBLOCK)) == WOULD_BLOCK:
            pass
        assert st == OK, lib.diptych_last_error()

    frames = c_int64()
    assert lib.diptych_session_finish(session, byref(frames)) == OK, lib.diptych_last_error()
    lib.diptych_session_destroy(session)

    def near(c, want):
        return all(abs(a - b) <= 40 for a, b in zip(c, want))
    red, blue = (255, 0, 0), (0, 0, 255)
    assert frames.value == N and len(seen) == N, (frames.value, len(seen))
    for i, (pts, corner, left, right, top_left) in enumerate(seen):
        assert pts == 1000 + i * 33, (i, pts)
        if i < SWITCH:
            assert near(corner, blue) and near(top_left, red), (i, corner, top_left)
        else:
            assert near(left, red) and near(right, blue), (i, left, right)
    print(f"{len(seen)} frames checked")
    print("push_frames.py: OK")


if __name__ == "__main__":
    main()
