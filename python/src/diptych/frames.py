"""NumPy arrays in and out of the C API's ``diptych_frame``.

In (pushed frames, copied by the library during the push):

- RGBA or BGRA: one ``uint8`` array of shape ``(height, width, 4)``; rows may
  be padded (any row stride), pixels must be packed.
- NV12: ``(y, uv)`` with ``y`` of shape ``(height, width)`` and ``uv`` of
  shape ``(height/2, width/2, 2)`` or ``(height/2, width)``; or one array of
  shape ``(height * 3/2, width)`` holding Y then UV (as FFmpeg lays it out).
- I420: ``(y, u, v)`` with ``u`` and ``v`` of shape ``(height/2, width/2)``;
  or one C-contiguous array of shape ``(height * 3/2, width)`` holding the
  three planes back to back.

Each plane's rows may have any stride (a view into a larger buffer works);
the bytes within a row must be contiguous.

Out (composited frames): copies, valid after the callback returns.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Sequence, Union

import numpy as np
from numpy.typing import NDArray

from . import _capi

Plane = NDArray[np.uint8]
#: What ``Session.push`` takes: one array, or a sequence of planes.
Image = Union[NDArray[np.uint8], Sequence[NDArray[np.uint8]]]

FORMATS = {"rgba": _capi.FORMAT_RGBA, "bgra": _capi.FORMAT_BGRA, "nv12": _capi.FORMAT_NV12,
           "i420": _capi.FORMAT_I420}


@dataclass(frozen=True)
class RGBAFrame:
    """A composited frame read back from the render target: ``pixels`` is
    ``(height, width, 4)`` RGBA, top row first."""
    pixels: NDArray[np.uint8]
    pts: int
    timescale: int

    @property
    def seconds(self) -> float:
        return self.pts / self.timescale


@dataclass(frozen=True)
class NV12Frame:
    """A composited frame as the encoder gets it (BT.709 limited range):
    ``y`` is ``(height, width)``, ``uv`` is ``(height/2, width/2, 2)``."""
    y: NDArray[np.uint8]
    uv: NDArray[np.uint8]
    pts: int
    timescale: int

    @property
    def seconds(self) -> float:
        return self.pts / self.timescale


@dataclass(frozen=True)
class Packet:
    """One encoded access unit: H.264 or HEVC in Annex B, parameter sets
    before every keyframe; ``dts == pts``, in presentation order."""
    data: bytes
    pts: int
    dts: int
    duration: int
    timescale: int
    keyframe: bool


def _check_plane(name: str, a: object, ndim: tuple[int, ...]) -> Plane:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a numpy array, got {type(a).__name__}")
    if a.dtype != np.uint8:
        raise TypeError(f"{name}: expected dtype uint8, got {a.dtype}")
    if a.ndim not in ndim:
        raise ValueError(f"{name}: expected {' or '.join(f'{n}-D' for n in ndim)}, got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name}: the picture is empty (shape {a.shape})")
    if a.shape[0] > 1 and a.strides[0] <= 0:
        raise ValueError(f"{name}: rows must be laid out top to bottom (positive row stride), got {a.strides[0]}")
    inner = 1
    for axis in range(a.ndim - 1, 0, -1):
        if a.shape[axis] > 1 and a.strides[axis] != inner:
            raise ValueError(f"{name}: the bytes of a row must be contiguous (strides {a.strides}, shape {a.shape})")
        inner *= a.shape[axis]
    return a


def _row_bytes(a: Plane) -> int:
    return int(np.prod(a.shape[1:])) if a.ndim > 1 else int(a.shape[0])


def _fill(frame: _capi.Frame, index: int, a: Plane) -> None:
    rows, row = a.shape[0], _row_bytes(a)
    stride = a.strides[0] if rows > 1 else row
    frame.data[index] = a.ctypes.data
    frame.stride[index] = stride
    frame.size[index] = stride * (rows - 1) + row if rows > 0 else 0


def _split_packed(a: Plane, fmt: str) -> list[Plane]:
    """Planes of a single ``(height * 3/2, width)`` 4:2:0 array."""
    rows, width = a.shape
    if rows % 3:
        raise ValueError(f"{fmt}: a single array must have height * 3/2 rows, got shape {a.shape}")
    height = rows * 2 // 3
    if fmt == "nv12":
        return [a[:height], a[height:]]
    if not a.flags.c_contiguous:
        raise ValueError("i420: a single array must be C-contiguous; pass (y, u, v) planes for other layouts")
    cw, ch = width // 2, height // 2
    flat = a.reshape(-1)
    y_end = width * height
    u = flat[y_end:y_end + cw * ch].reshape(ch, cw)
    v = flat[y_end + cw * ch:y_end + 2 * cw * ch].reshape(ch, cw)
    return [a[:height], u, v]


def describe(image: Image, fmt: str | None, pts: int, timescale: int) -> tuple[_capi.Frame, list[Plane]]:
    """The ``diptych_frame`` for ``image`` and the arrays it points into
    (keep them alive until the push returns). Shapes are checked here; sizes
    and strides against the format are checked by the library."""
    # The C fields are int64 and int32: a value beyond them is refused, never wrapped.
    if isinstance(pts, bool) or not isinstance(pts, (int, np.integer)) or not -2**63 <= int(pts) < 2**63:
        raise ValueError(f"pts {pts!r}: expected an integer within the 64-bit range")
    if isinstance(timescale, bool) or not isinstance(timescale, (int, np.integer)) or not 0 < int(timescale) < 2**31:
        raise ValueError(f"timescale {timescale!r}: expected ticks per second from 1 to 2147483647")
    if image is None:
        raise TypeError("image: expected a NumPy array (RGBA/BGRA, packed NV12/I420) or a sequence of planes, got None")
    if fmt is None:
        if isinstance(image, np.ndarray):
            if image.ndim == 3:
                fmt = "rgba"
            elif image.ndim == 2:
                raise ValueError("format: a 2-D array is NV12 or I420; pass format='nv12' or format='i420'")
            else:
                raise ValueError(f"image: expected an array of shape (height, width, 4) or a 2-D packed NV12/I420 one, "
                                 f"got shape {image.shape}")
        else:
            fmt = {2: "nv12", 3: "i420"}.get(len(image))
            if fmt is None:
                raise ValueError(f"planes: expected 2 (NV12) or 3 (I420) planes, got {len(image)}")
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise ValueError(f"format '{fmt}': expected one of {', '.join(FORMATS)}")
    planes: list[Plane]
    if fmt in ("rgba", "bgra"):
        if not isinstance(image, np.ndarray):
            raise TypeError(f"{fmt}: expected one array of shape (height, width, 4)")
        p = _check_plane(fmt, image, (3,))
        if p.shape[2] != 4:
            raise ValueError(f"{fmt}: expected shape (height, width, 4), got {p.shape}")
        planes = [p]
        width, height = p.shape[1], p.shape[0]
    else:
        if isinstance(image, np.ndarray):
            planes = _split_packed(_check_plane(fmt, image, (2,)), fmt)
        else:
            planes = list(image)
        want = 2 if fmt == "nv12" else 3
        if len(planes) != want:
            raise ValueError(f"{fmt}: expected {want} planes, got {len(planes)}")
        names = ["y", "uv"] if fmt == "nv12" else ["y", "u", "v"]
        planes = [_check_plane(f"{fmt} {n} plane", p, (2, 3) if n == "uv" else (2,)) for n, p in zip(names, planes)]
        height, width = planes[0].shape
    frame = _capi.Frame(width=width, height=height, format=FORMATS[fmt], pts=pts, timescale=timescale)
    for i, p in enumerate(planes):
        _fill(frame, i, p)
    return frame, planes


def _view(address: int, stride: int, rows: int, row_shape: tuple[int, ...]) -> NDArray[np.uint8]:
    """A copy of ``rows`` rows of ``row_shape`` bytes each, ``stride`` apart, at ``address``."""
    row = int(np.prod(row_shape))
    if rows == 0 or row == 0:
        return np.zeros((rows, *row_shape), dtype=np.uint8)
    total = stride * (rows - 1) + row
    raw = np.ctypeslib.as_array(ctypes.cast(address, ctypes.POINTER(ctypes.c_uint8)), shape=(total,))
    inner = tuple(int(np.prod(row_shape[i + 1:])) for i in range(len(row_shape)))
    view = np.lib.stride_tricks.as_strided(raw, shape=(rows, *row_shape), strides=(stride, *inner))
    return np.array(view, copy=True)


def rgba_from(f: _capi.Frame) -> RGBAFrame:
    return RGBAFrame(pixels=_view(f.data[0], f.stride[0], f.height, (f.width, 4)), pts=f.pts, timescale=f.timescale)


def nv12_from(f: _capi.Frame) -> NV12Frame:
    cw, ch = (f.width + 1) // 2, (f.height + 1) // 2
    return NV12Frame(y=_view(f.data[0], f.stride[0], f.height, (f.width,)),
                     uv=_view(f.data[1], f.stride[1], ch, (cw, 2)), pts=f.pts, timescale=f.timescale)


def packet_from(p: _capi.Packet) -> Packet:
    return Packet(data=ctypes.string_at(p.data, p.size) if p.size else b"", pts=p.pts, dts=p.dts,
                  duration=p.duration, timescale=p.timescale, keyframe=bool(p.keyframe))
