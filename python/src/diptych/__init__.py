"""Diptych from Python.

- :class:`Session`: the embedding C API (``libdiptych.so``, installed by
  ``scripts/install``) through ctypes: push NumPy frames, take composited
  RGBA/NV12 frames and encoded packets out.
- :class:`Client`: the ``diptych serve`` HTTP API (standard library only).
- :mod:`diptych.ray`: takes spread over a Ray cluster of ``diptych serve``
  machines, placed by their measured capacity (needs ``ray``).
"""
from __future__ import annotations

from .client import Client, Event, Sample, parse_metrics
from .errors import (APIError, BadFrame, BadRequest, Conflict, DiptychError, InvalidArgument, NotFound,
                     RuntimeFailure, ServerUnreachable, SessionError, StateError, TimestampError, Unauthorized,
                     Unavailable, Unsupported)
from .frames import NV12Frame, Packet, RGBAFrame
from .session import Session, version

PRIMARY = "primary"
SECONDARY = "secondary"

__version__ = "0.1.0"

__all__ = [
    "Session", "Client", "Event", "RGBAFrame", "NV12Frame", "Packet", "Sample", "parse_metrics", "version",
    "PRIMARY", "SECONDARY",
    "DiptychError", "SessionError", "InvalidArgument", "BadFrame", "TimestampError", "StateError", "Unsupported",
    "RuntimeFailure", "APIError", "BadRequest", "Unauthorized", "NotFound", "Conflict", "Unavailable",
    "ServerUnreachable",
]
