"""A pseudo-terminal driver for omnigent's interactive CLI (its REPL refuses to run without a TTY).

Stdlib only (``os.openpty``, ``select``), so the test process itself drives the child and
can check skyloop and the mock between keystrokes. Matching reads the output with
terminal escape sequences removed; prompt_toolkit takes Enter as ``\\r``, and its
cursor-position requests are answered, as a real terminal does.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path
from typing import Self

CPR = b"\x1b[6n"  # "where is the cursor?"
ESCAPES = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


class TtyTimeout(AssertionError):
    pass


class Tty:
    """One child process on a pseudo-terminal; ``expect`` consumes its output in order."""

    def __init__(
        self, argv: list[str], *, env: dict[str, str], cwd: Path, rows: int = 50, cols: int = 200
    ) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = subprocess.Popen(
            argv,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**env, "TERM": "xterm", "COLUMNS": str(cols), "LINES": str(rows)},
            cwd=cwd,
            start_new_session=True,
        )
        os.close(slave)
        self.raw = b""
        self.cursor = 0  # offset in ``text`` after the last match

    @property
    def text(self) -> str:
        return ESCAPES.sub("", self.raw.decode("utf-8", errors="replace"))

    def _read(self, timeout: float) -> bool | None:
        """True if output arrived, None if none in ``timeout``, False once the terminal closed."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return None
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: every process holding the terminal has exited
            return False
        self.raw += chunk
        for _ in range(chunk.count(CPR)):  # answer as a terminal would: prompt_toolkit waits for it
            os.write(self.master, b"\x1b[1;1R")
        return bool(chunk)

    def expect(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """Wait for ``pattern`` (a regex) in the output after the previous match."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            found = regex.search(self.text, self.cursor)
            if found:
                self.cursor = found.end()
                return found
            left = deadline - time.monotonic()
            if left <= 0 or self._read(min(left, 0.2)) is False:
                raise TtyTimeout(
                    f"{pattern!r} not seen in {timeout}s; output since last match:\n{self.tail()}"
                )

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def line(self, text: str) -> None:
        """Type a line and press Enter."""
        self.send(text + "\r")

    def wait(self, timeout: float = 30) -> int:
        """Drain the output until the child exits; its exit code."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            exited = self.proc.poll() is not None
            if self._read(0.2) is False or (exited and self._read(0) is None):
                break
        try:
            return self.proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            raise TtyTimeout(f"still running after {timeout}s:\n{self.tail()}") from None

    def tail(self, chars: int = 4000) -> str:
        return self.text[self.cursor :][-chars:]

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            os.close(self.master)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
