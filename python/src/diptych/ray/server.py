"""A local ``diptych serve`` process: started on a free loopback port with
a bearer token only its owner knows, stopped through its finalize path.

Started through ``setpriv --pdeathsig KILL`` where util-linux has it, so the
server dies with the thread that started it: a node whose Ray worker dies
leaves no server behind writing files a retry on another node is about to
take over.
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
import time
from typing import IO, Optional, Sequence

from ..client import Client

_LISTENING = re.compile(r"listening on (http://\S+)")


def find_binary(binary: Optional[str] = None) -> str:
    """The ``diptych`` executable: ``binary``, else ``$DIPTYCH_BINARY``, else ``diptych`` on PATH."""
    candidate = binary or os.environ.get("DIPTYCH_BINARY") or shutil.which("diptych")
    if not candidate:
        raise FileNotFoundError("diptych: not found; put it on PATH or set DIPTYCH_BINARY "
                                "(swift build -c release --product diptych)")
    if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
        raise FileNotFoundError(f"{candidate}: not an executable file")
    return os.path.abspath(candidate)


class ServeProcess:
    """``diptych serve --listen 127.0.0.1:0 --token-file … [--state-dir …] ARGS``.

    ``directory`` holds the token file, the server's log (``serve.log``) and,
    with ``state=True``, its state folder (``state/``), so a restarted server
    reports the takes a crash cut off as failed, with what their files hold.
    """

    def __init__(self, binary: Optional[str], directory: str, args: Sequence[str] = (), *, state: bool = True,
                 gpu: Optional[str] = None) -> None:
        self.binary = find_binary(binary)
        self.directory = directory
        self.args = list(args)
        self.state = state
        self.gpu = gpu
        self.token = secrets.token_hex(24)
        self.url: Optional[str] = None
        self._process: Optional[subprocess.Popen[str]] = None
        self._log: Optional[IO[str]] = None

    @property
    def pid(self) -> Optional[int]:
        return self._process.pid if self._process else None

    def command(self) -> list[str]:
        cmd = [self.binary, "serve", "--listen", "127.0.0.1:0", "--token-file", os.path.join(self.directory, "token")]
        if self.state:
            cmd += ["--state-dir", os.path.join(self.directory, "state")]
        if self.gpu and "--gpu" not in self.args:
            cmd += ["--gpu", self.gpu]
        cmd += self.args
        setpriv = shutil.which("setpriv")
        return [setpriv, "--pdeathsig", "KILL", "--"] + cmd if setpriv else cmd

    def start(self, timeout: float = 120.0) -> str:
        """Starts the server and returns its URL once it listens."""
        os.makedirs(self.directory, exist_ok=True)
        token_path = os.path.join(self.directory, "token")
        fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.token + "\n")
        self._log = open(os.path.join(self.directory, "serve.log"), "a", encoding="utf-8")
        self._process = subprocess.Popen(self.command(), cwd=self.directory, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=self._log, text=True, errors="replace")
        found = threading.Event()
        out = self._process.stdout
        assert out is not None

        def read() -> None:
            for line in out:  # drained to the end, so the pipe never fills
                m = _LISTENING.search(line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()
        threading.Thread(target=read, name="diptych-serve-stdout", daemon=True).start()
        deadline = time.monotonic() + timeout
        while not found.wait(0.05):
            if self._process.poll() is not None or time.monotonic() > deadline:
                code = self._process.poll()
                self.stop()
                raise RuntimeError(f"diptych serve did not start ({'exit ' + str(code) if code is not None else 'timeout'}): "
                                   f"{self.log_tail()}")
        assert self.url is not None
        return self.url

    def client(self, **kwargs: float) -> Client:
        if self.url is None:
            raise RuntimeError("diptych serve is not running")
        return Client(self.url, token=self.token, **kwargs)  # type: ignore[arg-type]

    def log_tail(self, lines: int = 5) -> str:
        try:
            with open(os.path.join(self.directory, "serve.log"), encoding="utf-8", errors="replace") as f:
                return " | ".join(f.read().strip().splitlines()[-lines:])
        except OSError:
            return ""

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def exited(self) -> bool:
        """Whether the server has ended, reaped or not. Unlike ``alive`` it
        does not depend on reaping: while another thread waits for the
        process, ``poll`` cannot tell (it answers None), so this reads the
        process state (a zombie has ended)."""
        p = self._process
        if p is None or p.returncode is not None:
            return True
        try:
            with open(f"/proc/{p.pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        return state in ("Z", "X")

    def wait(self) -> int:
        """Blocks until the server exits; returns its exit status."""
        assert self._process is not None
        return self._process.wait()

    def stop(self, timeout: float = 120.0) -> Optional[int]:
        """SIGTERM (every take is finalized), SIGKILL after ``timeout``."""
        p = self._process
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self._log:
            self._log.close()
            self._log = None
        return p.returncode
