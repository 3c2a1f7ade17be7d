"""``--thor local``: ai2thor's own ``Controller`` in the worker process.

By default it starts the real Unity build (CloudRendering, needs a GPU with Vulkan). With an
executable (``--thor-executable PATH``) it starts that instead, through the same client code: the
project's stand-in (``sab-thor-standin``, ``sab_pytest.thor.standin``) answers from the embedded
engine, so the whole ai2thor path runs in CI without a GPU.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ai2thor.controller import Controller
from ai2thor.fifo_server import FifoServer

from sab_pytest.errors import UsageError
from sab_pytest.thor import FRAME_SIZE

WIDTH = HEIGHT = FRAME_SIZE  # ai2thor 5.0.0's own default, which the paper's code runs at


class ExitAwareFifoServer(FifoServer):
    """ai2thor's FIFO server, but a Unity process that is gone is noticed at once.

    When every writer of the pipe has closed it (the Unity process died), ai2thor 5.0.0's read loop
    keeps reading nothing until its timeout (100 s by default), so a crash cost each call on the
    engine 100 s. Here end-of-file ends the read: an empty header takes ai2thor's own "Unity process
    has exited" path, and a message cut short raises at once.
    """

    def _read_with_timeout(self, server_pipe: Any, message_size: int, timeout: float | None) -> bytes:
        deadline = None if timeout is None else time.monotonic() + timeout
        chunks: list[bytes] = []
        while message_size > 0:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([server_pipe], [], [], wait)
            if ready:
                part = os.read(server_pipe.fileno(), message_size)
                if not part:  # end of file: no process writes to the pipe any more
                    if chunks:
                        raise ConnectionError("the Unity process closed its pipe in the middle of a message")
                    return b""
                chunks.append(part)
                message_size -= len(part)
            elif deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"no answer from the Unity process within {timeout} s")
        return b"".join(chunks)


class LocalController(Controller):
    """ai2thor's Controller whose FIFO server notices a dead Unity process (``ExitAwareFifoServer``)
    and whose ``stop()`` also removes the FIFO directory at once.

    ai2thor leaves the ``TemporaryDirectory`` holding its two pipes to the garbage collector; a
    worker that stops and starts engines should not depend on when that runs.
    """

    def _build_server(self, host: Any, port: Any, width: int, height: int) -> None:
        # ai2thor builds exactly FifoServer or WsgiServer (a subclass as server_class is not
        # honoured), so the FIFO server it builds is given the subclass's read afterwards
        super()._build_server(host, port, width, height)
        if type(self.server) is FifoServer:
            self.server.__class__ = ExitAwareFifoServer

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            tmp = getattr(self.server, "tmp_dir", None)
            if tmp is not None:
                tmp.cleanup()


def resolve_executable(value: str) -> str:
    """A path, or a bare command name looked up on PATH (like a shell); a clear error otherwise."""
    if os.sep not in value:
        found = shutil.which(value)
        if found is None:
            raise UsageError(f"--thor-executable: {value!r} is not on PATH (give a path to the executable)")
        value = found
    path = Path(value).expanduser()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise UsageError(f"--thor-executable: {path} is not an executable file")
    if " " in str(path.resolve()):
        raise UsageError(f"--thor-executable: {path}: ai2thor splits the executable path on spaces")
    return str(path.resolve())


#: ai2thor copies os.environ when it launches the executable; engines started at once by the case
#: runner's threads must not see each other's temporary SAB_THOR_SCENES (or its removal)
_LAUNCH_LOCK = threading.Lock()


def start(executable: str | None, scenes_dir: str | None = None, **kwargs: Any) -> Controller:
    """Start ai2thor's Controller: the Unity build (``executable=None``) or the given executable.

    ai2thor 5.0.0 sets ``DISPLAY`` for every external build and fails with a TypeError inside
    ``subprocess`` when no X display exists; the stand-in draws without X, so on a host without
    ``DISPLAY`` it gets ``x_display=":0"``, which it never opens. ``scenes_dir`` reaches the stand-in
    as ``SAB_THOR_SCENES`` in the environment ai2thor copies at launch (set only for the launch).
    """
    kwargs.setdefault("width", WIDTH)
    kwargs.setdefault("height", HEIGHT)
    if executable is None:
        kwargs.setdefault("platform", "CloudRendering")
        return LocalController(**kwargs)
    if not os.environ.get("DISPLAY"):
        kwargs.setdefault("x_display", ":0")
    with _LAUNCH_LOCK, _environment("SAB_THOR_SCENES", scenes_dir):
        return LocalController(local_executable_path=executable, **kwargs)


@contextlib.contextmanager
def _environment(name: str, value: str | None) -> Iterator[None]:
    """``name=value`` in os.environ for the block (nothing when value is None), then as before."""
    if value is None:
        yield
        return
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
