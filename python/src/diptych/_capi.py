"""ctypes mirrors of ``include/diptych.h`` and the loading of ``libdiptych.so``.

The structs below follow the header field by field (``DIPTYCH_API_VERSION``
1); the header documents ownership, blocking and threads for each call.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int32, c_int64, c_size_t, c_uint32, c_uint64,
                    c_void_p)
from typing import Optional

OK = 0
WOULD_BLOCK = 1

PRIMARY = 0
SECONDARY = 1

FORMAT_RGBA = 0
FORMAT_BGRA = 1
FORMAT_NV12 = 2
FORMAT_I420 = 3

PUSH_BLOCK = 0
PUSH_NONBLOCK = 1


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


_loaded: dict[str, ctypes.CDLL] = {}


def library_path(path: Optional[str] = None) -> str:
    """Where ``libdiptych.so.0`` is: ``path``, else ``$DIPTYCH_LIBRARY``, else
    the libdir of ``diptych.pc`` (pkg-config, as ``scripts/install`` writes it),
    else the dynamic linker's search path."""
    if path:
        return path
    env = os.environ.get("DIPTYCH_LIBRARY")
    if env:
        return env
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "diptych"], check=True, capture_output=True,
                                text=True, timeout=10).stdout.strip()
        candidate = os.path.join(libdir, "libdiptych.so.0")
        if libdir and os.path.exists(candidate):
            return candidate
    except (OSError, subprocess.SubprocessError):
        pass
    found = ctypes.util.find_library("diptych")
    if found:
        return found
    raise OSError("libdiptych.so.0 not found: install it with scripts/install PREFIX and set DIPTYCH_LIBRARY "
                  "(or PKG_CONFIG_PATH=PREFIX/lib/pkgconfig)")


def load(path: Optional[str] = None) -> ctypes.CDLL:
    """The library with every function's signature declared (loaded once per path)."""
    where = library_path(path)
    lib = _loaded.get(where)
    if lib is not None:
        return lib
    lib = ctypes.CDLL(where)
    lib.diptych_version.restype = c_char_p
    lib.diptych_version.argtypes = []
    lib.diptych_last_error.restype = c_char_p
    lib.diptych_last_error.argtypes = []
    lib.diptych_free.restype = None
    lib.diptych_free.argtypes = [c_void_p]
    lib.diptych_outputs_init.restype = None
    lib.diptych_outputs_init.argtypes = [POINTER(Outputs)]
    lib.diptych_session_create.restype = c_int32
    lib.diptych_session_create.argtypes = [POINTER(c_char_p), c_int32, POINTER(Outputs), POINTER(c_void_p)]
    lib.diptych_session_push_frame.restype = c_int32
    lib.diptych_session_push_frame.argtypes = [c_void_p, c_int32, POINTER(Frame), c_int32]
    lib.diptych_session_set_layout.restype = c_int32
    lib.diptych_session_set_layout.argtypes = [c_void_p, POINTER(c_char_p), c_int32]
    lib.diptych_session_end_stream.restype = c_int32
    lib.diptych_session_end_stream.argtypes = [c_void_p, c_int32]
    lib.diptych_session_finish.restype = c_int32
    lib.diptych_session_finish.argtypes = [c_void_p, POINTER(c_int64)]
    # A char * the caller frees: kept as a void pointer so it can be handed back to diptych_free.
    lib.diptych_session_summary_json.restype = c_void_p
    lib.diptych_session_summary_json.argtypes = [c_void_p]
    lib.diptych_session_can_import_dmabuf.restype = c_int32
    lib.diptych_session_can_import_dmabuf.argtypes = [c_void_p]
    lib.diptych_session_destroy.restype = None
    lib.diptych_session_destroy.argtypes = [c_void_p]
    _loaded[where] = lib
    return lib


def argv(words: list[str]) -> tuple[ctypes.Array[c_char_p], int]:
    """An ``argv``/``argc`` pair of the words, UTF-8 encoded."""
    return (c_char_p * max(1, len(words)))(*[w.encode() for w in words]), len(words)


def last_error(lib: ctypes.CDLL) -> str:
    message: Optional[bytes] = lib.diptych_last_error()
    return (message or b"").decode("utf-8", "replace")
