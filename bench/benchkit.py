"""What every script in ``bench/`` shares: a smoke size, and the checks that its runs did what it measures.

A bench whose runs measured nothing still prints figures: a run whose judge calls went to another
server, a run that wrote no results, a division by the zero calls it made. So each bench checks,
after its runs, that they ran the cases, made the calls and ended as they were meant to (``Checks``),
says what did not hold, and exits 1 then.

``--smoke`` (or ``SAB_BENCH_SMOKE=1``) runs a bench at a size that takes seconds: its figures then mean
nothing and no target is judged, but every check holds all the same. ``tests/e2e/test_benches.py`` runs
each bench so, so that a change that breaks one fails CI. A bench that needs what a machine may not
have (a llama.cpp server and its model file) says which and exits 0 (``skip``), for that reason alone.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

#: the environment variable that asks every bench for its smoke size
SMOKE_ENV = "SAB_BENCH_SMOKE"


def smoke_asked() -> bool:
    """Whether ``SAB_BENCH_SMOKE`` asks for the smoke size."""
    return os.environ.get(SMOKE_ENV, "") not in ("", "0")


def add_smoke(parser: argparse.ArgumentParser) -> None:
    """``--smoke`` on a bench's command line (default: ``SAB_BENCH_SMOKE``)."""
    parser.add_argument("--smoke", action="store_true", default=smoke_asked(),
                        help=f"a size that runs in seconds, figures not judged, checks kept (also ${SMOKE_ENV}=1)")


class Checks:
    """The facts a bench's runs must show for its figures to mean anything; ``status`` says them."""

    def __init__(self, bench: str | None = None) -> None:
        self.bench = bench or Path(sys.argv[0]).stem
        self.held = 0
        self.failed: list[str] = []

    def need(self, ok: object, what: str) -> bool:
        """Record one check: ``what`` is the fact, said as it should hold."""
        if ok:
            self.held += 1
        else:
            self.failed.append(what)
            print(f"{self.bench}: CHECK FAILED: {what}", flush=True)
        return bool(ok)

    def status(self) -> int:
        """The bench's exit status: 0 when every check held, 1 otherwise (each failure named again)."""
        if self.failed:
            print(f"{self.bench}: {len(self.failed)} check(s) failed, its figures measure nothing: "
                  + "; ".join(self.failed), flush=True)
            return 1
        print(f"{self.bench}: every check held ({self.held})", flush=True)
        return 0


def skip(bench: str, missing: list[str]) -> int:
    """Say what the machine lacks for this bench, and exit 0: the one end without checks."""
    print(f"{bench}: SKIPPED, this machine lacks what it needs:")
    for what in missing:
        print(f"  - {what}")
    return 0
