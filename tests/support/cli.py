"""``sab VERB ...`` as a test runs it where the process is not the point: through the dispatcher a
user's ``sab`` runs (``sab_pytest.__main__.main``), in the test's own process, with what it prints
caught. A new interpreter per command would cost more than the command itself."""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path


def sab_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The exit status and output of ``sab *args``, shaped as ``subprocess.run`` returns them (an
    exception the dispatcher lets through fails the calling test, as a traceback would a user)."""
    from sab_pytest.__main__ import main

    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return subprocess.CompletedProcess(["sab", *argv], status, out.getvalue(), err.getvalue())
