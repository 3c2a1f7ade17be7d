"""A stand-in for AI2-THOR's Unity process that answers from the embedded engine.

``ai2thor.controller.Controller`` (5.0.0, Linux, its default ``FifoServer``) launches the Unity
executable and talks to it over two named pipes. This module is the other end of that wire, written
from ai2thor's client code (``controller.py``, ``fifo_server.py``, ``server.py``), so that
``Controller(local_executable_path=<launcher>, scene="FloorPlan1")`` runs ai2thor's real client
without a GPU and every ``reset``/``step`` is answered by ``sab_pytest.thor.sim``.

What the client expects, and what this process does:

* **Launch.** ai2thor runs ``<executable> -screen-fullscreen F -screen-quality Q -screen-width W
  -screen-height H`` (or ``-batchmode -nographics`` when headless) with the pipe paths in the
  environment: ``AI2THOR_FIFO_SERVER_PIPE_PATH`` (we write, it reads) and
  ``AI2THOR_FIFO_CLIENT_PIPE_PATH`` (it writes, we read), plus ``AI2THOR_SERVER_TYPE=FIFO``. The
  executable path goes through ``shlex.split``, so it must not contain spaces.
* **Order.** ai2thor first *reads* the hello event, so we open the server pipe and send it before
  opening the client pipe (the reverse order deadlocks: opening a FIFO blocks until both ends exist).
* **Framing.** Every field is a 5-byte header (``!BI``: field type, body length) and the body; a
  message ends with the END_OF_MESSAGE header (type 255, length 0). The client sends one ACTION
  field (JSON); we answer with a METADATA field (msgpack of ``{"agents": [agent metadata],
  "thirdPartyCameras": [], "sequenceId", "activeAgentId": 0}``) and an RGB_IMAGE field (raw
  HxWx3 uint8, bottom row first, as Unity reads its render texture) unless ``renderImage`` is false.
* **Sequence ids.** Each answer echoes the action's ``sequenceId`` (ai2thor checks it; ``Reset``
  restarts it at 0); the hello event carries 0.
* **Control actions** that only the Unity player knows: ``Reset`` (load ``sceneName``),
  ``Initialize`` (agent settings; answers ``{cameraNearPlane, cameraFarPlane}``, which ai2thor reads),
  ``GetScenesInBuild`` (the 120 iTHOR scenes as ``FloorPlanN_physics``), ``ChangeResolution``,
  ``ChangeQuality``. Every other action goes to the embedded engine.
* **Errors.** A failed action is a normal event (``lastActionSuccess`` false, THOR's
  ``errorMessage``/``errorCode``). An unknown action gets Unity's ``errorCode: InvalidAction`` and
  ``errorMessage: "Invalid action: <name>"``; bad or missing arguments get ``InvalidArgument`` /
  ``MissingArguments``: for these codes ai2thor's ``Controller.step`` raises ``ValueError``, as with
  the real player.
* **End.** The process exits when the client closes its pipe, when a pipe breaks, or when its parent
  dies (so a killed pytest worker never leaves a stand-in behind).

Differences from Unity, on purpose: ``Initialize`` and ``ChangeResolution`` reload the current scene
from its pristine state (ai2thor sends them only right after ``Reset``); no depth, segmentation or
third-party camera images. The engine's own rules are documented in ``sab_pytest.thor.sim``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import stat
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

import msgpack
import numpy as np

from sab_pytest.thor.scenes import SceneSource, scene_names
from sab_pytest.thor.sim import Controller
from sab_pytest.thor.sim.handlers import SPECS

HEADER = struct.Struct("!BI")
METADATA, ACTION, RGB_IMAGE, END_OF_MESSAGE = 1, 2, 4, 255
#: what ai2thor's ``Server.set_init_params`` reads from Initialize's actionReturn (Unity's defaults)
CAMERA_PLANES = {"cameraNearPlane": 0.1, "cameraFarPlane": 20.0}
#: ValueError prefixes of the embedded engine -> the errorCode Unity reports (ai2thor raises on these)
_ARGUMENT_CODES = ("InvalidArgument", "MissingArguments", "AmbiguousAction")
ENTRY_POINT = "sab-thor-standin"


class StandIn:
    """The Unity side of one ai2thor ``Controller``: one embedded engine, one scene at a time."""

    def __init__(self, width: int = 300, height: int = 300, scenes: SceneSource | None = None) -> None:
        self.width, self.height = width, height
        self.scenes = scenes if scenes is not None else SceneSource()
        self.engine: Any = None  # started by the first Reset, or the hello event
        self.init_params: dict[str, Any] = {}

    # ---------------------------------------------------------------------------------- answers
    def hello(self) -> tuple[dict[str, Any], np.ndarray | None]:
        """The event Unity sends when it is up: its start scene, before any action."""
        self._load("FloorPlan1")
        return self._agent_metadata(self.engine.last_event, "", True, "", None, None), self._frame()

    def handle(self, action: dict[str, Any]) -> tuple[dict[str, Any], np.ndarray | None]:
        """Run one action; returns (agent metadata, frame or None)."""
        name = action.get("action")
        try:
            if name == "Reset":
                self._load(action.get("sceneName"))
                return self._answer(name, True, "", None, None)
            if name == "Initialize":
                params = {k: v for k, v in action.items() if k not in ("action", "sequenceId", "renderImage")}
                self._load(self.engine.world.scene, params)
                self.init_params = params
                return self._answer(name, True, "", None, dict(CAMERA_PLANES))
            if name == "GetScenesInBuild":
                return self._answer(name, True, "", None, [f"{s}_physics" for s in scene_names()])
            if name == "ChangeResolution":
                x, y = action.get("x"), action.get("y")
                if not (isinstance(x, int) and isinstance(y, int) and x > 0 and y > 0):
                    return self._answer(name, False, f"ChangeResolution: invalid size {x!r}x{y!r}",
                                        "InvalidArgument", None)
                self.width, self.height = x, y
                self._load(self.engine.world.scene, self.init_params)
                return self._answer(name, True, "", None, None)
            if name == "ChangeQuality":
                return self._answer(name, True, "", None, None)
            if not isinstance(name, str) or name not in SPECS:
                return self._answer(name, False, f"Invalid action: {name}", "InvalidAction", None)
            args = {k: v for k, v in action.items() if k != "sequenceId"}
            event = self.engine.step(args)
            return dict(event.metadata), event.frame
        except (ValueError, TypeError) as exc:
            text = str(exc)
            code = next((c for c in _ARGUMENT_CODES if text.startswith(c)), "InvalidArgument")
            return self._answer(name, False, text, code, None)

    def _load(self, scene: Any, params: dict[str, Any] | None = None) -> None:
        """(Re)load ``scene`` pristine with the current size and agent settings."""
        settings = {**(params if params is not None else self.init_params), "width": self.width,
                    "height": self.height}
        if self.engine is None:
            self.engine = Controller(scene=scene, scenes=self.scenes, **settings)
        else:
            self.engine.reset(scene, **settings)

    def _answer(self, name: Any, success: bool, message: str, code: str | None,
                result: Any) -> tuple[dict[str, Any], np.ndarray | None]:
        return self._agent_metadata(self.engine.last_event, name, success, message, code, result), self._frame()

    def _agent_metadata(self, event: Any, name: Any, success: bool, message: str, code: str | None,
                        result: Any) -> dict[str, Any]:
        """The engine's current metadata, relabelled with this action's outcome (state unchanged)."""
        meta = dict(event.metadata)
        meta.update(lastAction=name if isinstance(name, str) else str(name), lastActionSuccess=success,
                    errorMessage=message, errorCode=code, actionReturn=result)
        return meta

    def _frame(self) -> np.ndarray | None:
        return self.engine.last_event.frame


# -------------------------------------------------------------------------------------- the wire

def encode_message(metadata: dict[str, Any], sequence_id: int, frame: np.ndarray | None) -> bytes:
    """One answer as ai2thor's FifoServer reads it: METADATA, optional RGB_IMAGE, END_OF_MESSAGE."""
    wrapped = {"agents": [metadata], "thirdPartyCameras": [], "sequenceId": sequence_id, "activeAgentId": 0}
    body = msgpack.packb(wrapped, use_bin_type=True)
    parts = [HEADER.pack(METADATA, len(body)), body]
    if frame is not None:
        pixels = np.ascontiguousarray(np.asarray(frame, dtype=np.uint8)[::-1]).tobytes()  # bottom row first
        parts += [HEADER.pack(RGB_IMAGE, len(pixels)), pixels]
    parts.append(HEADER.pack(END_OF_MESSAGE, 0))
    return b"".join(parts)


def _read_exact(pipe: BinaryIO, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        part = pipe.read(size - len(data))
        if not part:
            return None  # the client closed its end
        data += part
    return data


def read_action(pipe: BinaryIO) -> dict[str, Any] | None:
    """The next action the client sent, or None when it closed the pipe."""
    action: dict[str, Any] | None = None
    while True:
        header = _read_exact(pipe, HEADER.size)
        if header is None:
            return None
        field, length = HEADER.unpack(header)
        if field == END_OF_MESSAGE:
            if action is None:
                raise ValueError("message without an ACTION field")
            return action
        body = _read_exact(pipe, length) if length else b""
        if body is None:
            return None
        if field != ACTION:
            raise ValueError(f"unexpected field type {field} from the client")
        action = json.loads(body.decode("utf-8"))


def _size_args(argv: list[str]) -> tuple[int, int]:
    """Width and height from Unity's player arguments (``-screen-width W -screen-height H``)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("-screen-width", dest="width", type=int, default=300)
    parser.add_argument("-screen-height", dest="height", type=int, default=300)
    known, _ = parser.parse_known_args(argv)
    return known.width, known.height


def _exit_with_parent() -> None:
    """Exit when the process that launched us is gone (a killed worker must not leave us behind)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def serve(server_pipe_path: str, client_pipe_path: str, width: int, height: int,
          scenes: SceneSource | None = None) -> int:
    """Speak ai2thor's FIFO protocol until the client goes away."""
    standin = StandIn(width, height, scenes)
    try:
        with open(server_pipe_path, "wb") as out:
            meta, frame = standin.hello()
            out.write(encode_message(meta, 0, frame))
            out.flush()
            with open(client_pipe_path, "rb") as inp:
                while True:
                    action = read_action(inp)
                    if action is None:
                        return 0
                    meta, frame = standin.handle(action)
                    if action.get("renderImage", True) is False:
                        frame = None
                    out.write(encode_message(meta, int(action.get("sequenceId", 0)), frame))
                    out.flush()
    except BrokenPipeError:
        return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``sab-thor-standin`` (ai2thor passes Unity's player arguments, which we read)."""
    args = list(sys.argv[1:] if argv is None else argv)
    scenes_dir = None
    if "--scenes" in args:  # set by write_launcher; not a Unity argument
        i = args.index("--scenes")
        scenes_dir = args[i + 1]
        del args[i:i + 2]
    server_type = os.environ.get("AI2THOR_SERVER_TYPE", "FIFO")
    server_pipe = os.environ.get("AI2THOR_FIFO_SERVER_PIPE_PATH")
    client_pipe = os.environ.get("AI2THOR_FIFO_CLIENT_PIPE_PATH")
    if server_type != "FIFO" or not server_pipe or not client_pipe:
        print(f"{ENTRY_POINT}: only ai2thor's FIFO server is supported: start it from "
              "ai2thor.controller.Controller(local_executable_path=...) with the default server_class "
              f"(AI2THOR_SERVER_TYPE={server_type!r}, fifo paths set: {bool(server_pipe and client_pipe)})",
              file=sys.stderr)
        return 2
    _exit_with_parent()
    width, height = _size_args(args)
    return serve(server_pipe, client_pipe, width, height, SceneSource(scenes_dir))


def write_launcher(directory: str | os.PathLike[str], scenes_dir: str | os.PathLike[str] | None = None) -> Path:
    """Write an executable launcher for ``local_executable_path`` and return its path.

    It runs this module with the current interpreter, so it works in an environment whose scripts
    directory is not on PATH; ``scenes_dir`` is passed on (the stand-in otherwise finds the scenes
    as the embedded engine does: ``SAB_THOR_SCENES``, the cache, the pinned download).
    """
    path = Path(directory) / ENTRY_POINT
    if " " in str(path):
        raise ValueError(f"{path}: ai2thor splits the executable path on spaces; choose a directory without them")
    extra = f" --scenes {shlex.quote(str(scenes_dir))}" if scenes_dir else ""
    path.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m sab_pytest.thor.standin{extra} \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


if __name__ == "__main__":
    sys.exit(main())
