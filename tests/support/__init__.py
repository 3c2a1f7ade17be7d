"""Helpers of the project's own tests, importable as ``support`` from every test module however
deep (``tests/conftest.py`` puts ``tests/`` on the path); ``TESTS`` and ``ROOT`` name the folders
a test reads files from, so a test module can move without counting its parents."""

from pathlib import Path

#: the tests' folder (``tests/data`` holds their recorded inputs)
TESTS = Path(__file__).resolve().parents[1]
#: the checkout's root (the README, the top-level ``data/``, the THOR Dockerfile)
ROOT = TESTS.parent
