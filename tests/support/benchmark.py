"""The benchmark as a user runs it, inside a ``pytester`` directory: the one case module every
plugin test collects, and ``SabRun``, which runs pytest on it with the dataset and output options
(``conftest.sab_run`` hands out configured ones)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

#: a test module of the benchmark's cases, as a checkout's ``cases/`` or the packaged one holds it
CASE_TEST = "from sab_pytest.plugin import check\n\n\ndef test_case(sab_verdict):\n    check(sab_verdict)\n"


class SabRun:
    """``run(*args, out=...)``: the benchmark on ``data`` (every case of its four files, the pinned
    hashes not checked) writing to ``out``, with ``base`` options before ``args``; in a subprocess
    like a user's run, or in this process where the test needs no isolation (``inprocess``)."""

    def __init__(self, pytester: pytest.Pytester, data: Path, base: Sequence[str], out: Path, *,
                 inprocess: bool = False) -> None:
        self.pytester, self.data, self.base, self.out, self.inprocess = pytester, data, tuple(base), out, inprocess

    def args(self, *args: str, out: Path | str | None = None) -> list[str]:
        # option=value form: pytest would take a separate path argument into its rootdir/ini search
        where = self.pytester.path / out if out is not None else self.out
        return [f"--sab-data={self.data}", "--sab-allow-modified-data", "--sab-subset=all", f"--sab-out={where}",
                *self.base, *args]

    def __call__(self, *args: str, out: Path | str | None = None) -> pytest.RunResult:
        how = self.pytester.runpytest_inprocess if self.inprocess else self.pytester.runpytest_subprocess
        return how(*self.args(*args, out=out))
