"""Engines that speak AI2-THOR's Controller API, the low-level planner and the state check.

``Engine`` is the subset of ``ai2thor.controller.Controller`` the planner and the agents use. The
embedded symbolic engine (``sab_pytest.thor.sim.Controller``), the in-process ai2thor controller and
the remote client are interchangeable behind it.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

#: width and height of the camera frame, in pixels, of every engine this project starts: the paper's
#: code calls ``Controller(scene=...)`` without a size, and ai2thor 5.0.0's default is 300x300 (the
#: embedded engine's default is the same)
FRAME_SIZE = 300


@runtime_checkable
class Engine(Protocol):
    """What sab-pytest needs from an AI2-THOR controller (ai2thor 5.0.0 semantics)."""

    last_event: Any  # ai2thor.server.Event-like: .metadata (dict-like), .frame (HxWx3 uint8)

    def reset(self, scene: str | None = None, **init_params: Any) -> Any: ...

    def step(self, action: str | dict[str, Any] | None = None, **action_args: Any) -> Any: ...

    def stop(self) -> None: ...
