"""The package type-checks under mypy --strict (it ships py.typed)."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "src", "diptych")


def test_mypy_strict(tmp_path: Any) -> None:
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file", os.path.join(ROOT, "pyproject.toml"),
                        "--cache-dir", str(tmp_path), SOURCE],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.path.exists(os.path.join(SOURCE, "py.typed"))
