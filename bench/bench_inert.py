"""What the installed plugin costs a project that does not run the benchmark: a bare ``pytest`` of a
one-test project, with the plugin loaded (as in every project of its environment) and with it
turned off (``-p no:safeagentbench``), each run REPEAT times in a new interpreter, alternating;
prints the median and spread of each, wall time and CPU time (user + system, which other processes
on a busy machine disturb less), the difference of the medians and the median of the paired
differences (each loaded run minus the run without the plugin that follows it). Target: within 30 ms.

The plugin's byte code is compiled first, as pip compiles an installed wheel's (pytest's is): where
``PYTHONDONTWRITEBYTECODE`` is set, an editable install would otherwise compile its sources in every
run, a cost no installed plugin has. Other processes share the cores: compare figures measured in
the same minute, with ``--repeat 25`` on a busy machine.

Each run must pass its one test, and the loaded run must show the plugin registered (pytest's
``--trace-config`` names it) while the other does not; else the bench exits 1. ``--smoke``: one run of each.

    python bench/bench_inert.py [--repeat 15] [-n 2]
"""

from __future__ import annotations

import argparse
import compileall
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import Checks, add_smoke

import sab_pytest


def _wall(project: Path, extra: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one pytest run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra], cwd=project,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"pytest {' '.join(extra)} failed:\n{done.stdout}{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def plugin_seen(project: Path, extra: list[str]) -> bool:
    """Whether pytest registered the plugin in a run with ``extra`` (its module in ``--trace-config``)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--trace-config", *extra],
                          cwd=project, capture_output=True, text=True, check=False)
    return "sab_pytest.plugin" in done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("-n", dest="workers", default=None, help="also run under xdist with N workers")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.repeat = 1
    checks = Checks()
    compileall.compile_dir(Path(sab_pytest.__file__).parent, quiet=1)
    print(f"plugin: {Path(sab_pytest.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
        base = ["-n", args.workers] if args.workers else []
        walls: dict[str, list[tuple[float, float]]] = {"plugin loaded": [], "-p no:safeagentbench": []}
        _wall(project, base)  # warm the file system caches and byte code
        checks.need(plugin_seen(project, base), "the plugin is registered in the run that loads it")
        checks.need(not plugin_seen(project, [*base, "-p", "no:safeagentbench"]),
                    "the plugin is not registered under -p no:safeagentbench")
        for _ in range(args.repeat):
            walls["plugin loaded"].append(_wall(project, base))
            walls["-p no:safeagentbench"].append(_wall(project, [*base, "-p", "no:safeagentbench"]))
    runs = f"{args.repeat} runs each{', -n ' + args.workers if args.workers else ''}"
    for index, what in enumerate(("wall", "CPU")):
        medians = {}
        for name, pairs in walls.items():
            values = [pair[index] for pair in pairs]
            medians[name] = statistics.median(values)
            print(f"{what:4s} {name:24s} median {medians[name] * 1000:7.1f} ms   min {min(values) * 1000:7.1f}   "
                  f"max {max(values) * 1000:7.1f}")
        difference = (medians["plugin loaded"] - medians["-p no:safeagentbench"]) * 1000
        print(f"{what:4s} difference of the medians: {difference:+.1f} ms ({runs}; target: within 30 ms)")
        # each loaded run against the run without the plugin right after it: a load that drifts over the
        # minute the bench takes moves both alike
        paired = statistics.median(on[index] - off[index] for on, off in zip(*walls.values(), strict=True)) * 1000
        print(f"{what:4s} median of the paired differences: {paired:+.1f} ms")
    return checks.status()


if __name__ == "__main__":
    raise SystemExit(main())
