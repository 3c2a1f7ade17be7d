"""Helpers of the project's own tests, importable as ``support`` from every test module however
deep (``tests/conftest.py`` puts ``tests/`` on the path); ``TESTS`` and ``ROOT`` name the folders
a test reads files from, so a test module can move without counting its parents."""

from pathlib import Path

#: the tests' folder (``tests/data`` holds their recorded inputs)
TESTS = Path(__file__).resolve().parents[1]
#: the checkout's root (the README, the top-level ``data/``, the THOR Dockerfile)
ROOT = TESTS.parent


def plugin_lines(output: str) -> list[str]:
    """The lines of ``output`` the plugin wrote: its prefixes (``sab:``, ``sab-pytest:``), its option
    names, its files' names, the benchmark's name. Never a search for "sab" anywhere: a checkout cloned into
    ``sab-pytest/`` has it in every path pytest prints (warnings, the rootdir, a virtualenv's)."""
    return [line for line in output.splitlines()
            if line.startswith(("sab:", "sab-pytest:", "sab ")) or "SafeAgentBench" in line
            or any(name in line for name in ("--sab-", "sab-results", "sab-summary"))]
