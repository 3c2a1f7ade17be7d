"""Children that a test stops with Ctrl-C."""

from __future__ import annotations

import signal


def hears_ctrl_c() -> None:
    """``Popen(preexec_fn=hears_ctrl_c)``: the child takes SIGINT as Ctrl-C, also where the suite
    itself runs with SIGINT ignored (a background job: ``nohup pytest ... &``), a disposition every
    new process inherits and Python then leaves alone, so the signal would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
