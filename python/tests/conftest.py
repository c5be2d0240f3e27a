"""Fixtures: the library and the ``diptych`` executable under test (given by
``DIPTYCH_LIBRARY`` and ``DIPTYCH_BINARY``; missing ones fail the tests),
and ``diptych serve`` processes on loopback."""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING, Iterator

import pytest

# Every Ray process of the test cluster talks over loopback (one machine).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from diptych import media  # noqa: E402
from diptych.ray.server import ServeProcess  # noqa: E402

if TYPE_CHECKING:
    import raysetup


def _required(var: str) -> str:
    path = os.environ.get(var, "")
    if not path or not os.path.exists(path):
        pytest.fail(f"{var}={path!r}: not set to an existing file (the tests run against a built Diptych)",
                    pytrace=False)
    return path


@pytest.fixture(scope="session")
def library() -> str:
    return _required("DIPTYCH_LIBRARY")


@pytest.fixture(scope="session")
def binary() -> str:
    return _required("DIPTYCH_BINARY")


@pytest.fixture(scope="session")
def realtime(binary: str) -> bool:
    """Whether takes can be paced at the primary's rate (``"realtime": "on"``)."""
    r = subprocess.run([binary, "record", "--help"], capture_output=True, text=True, timeout=60)
    return "--realtime" in r.stdout + r.stderr


@pytest.fixture(scope="session", autouse=True)
def ffprobe() -> str:
    tool = shutil.which("ffprobe")
    if tool is None:
        pytest.fail("ffprobe not found (scripts/setup installs FFmpeg)", pytrace=False)
    return tool


@pytest.fixture
def server(binary: str, tmp_path: object) -> Iterator[ServeProcess]:
    """A ``diptych serve --gpu software`` on a free loopback port, with a token."""
    s = ServeProcess(binary, str(tmp_path), ["--gpu", "software"], state=False)
    s.start()
    try:
        s.client().wait_until_ready()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def setup(binary: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator["raysetup.Setup"]:
    """A Ray cluster of two nodes on this machine, each advertising the
    diptych_pairs its own server's admission figure gives, and diptych on it."""
    import ray
    from ray.cluster_utils import Cluster

    import diptych.ray as dray
    import raysetup

    pairs, health = dray.measure_pairs(binary, raysetup.SERVE_ARGS)
    assert 1 <= pairs <= 2, health  # at least one reference take fits; at most --max-takes
    head = {"num_cpus": 1, "resources": {dray.RESOURCE: pairs}, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    try:
        cluster.add_node(num_cpus=1, resources={dray.RESOURCE: pairs})
        ray.init(address=cluster.address, log_to_driver=False)
        dc = dray.DiptychCluster(binary=binary, serve_args=raysetup.SERVE_ARGS,
                                 directory=str(tmp_path_factory.mktemp("nodes")))
        yield raysetup.Setup(cluster, dc, pairs)
        dc.shutdown()
    finally:
        ray.shutdown()
        cluster.shutdown()


def decoded_frames(path: str) -> int:
    """Frames of ``path`` counted by decoding them."""
    p = media.probe(path, decode=True)
    assert p.decodable, f"{path}: {p.error}"
    assert p.frames is not None
    return p.frames
