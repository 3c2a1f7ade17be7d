"""The project's own data files (top-level ``data/``: pinned manifests, made-up few-shot examples,
the fake server's demo script).

Installed (a wheel or an editable install) the folder is the package ``sab_pytest.data``
(pyproject's ``package-dir``), found by ``importlib.resources``. A checkout used without installing
(the top-level ``conftest.py`` registers the plugin then) has no such package, so the folder beside
the package directory is read instead.
"""

from __future__ import annotations

from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

PACKAGE = "sab_pytest.data"


def folder(package: str = PACKAGE) -> Traversable:
    """The data folder, wherever this copy of sab_pytest was loaded from."""
    try:
        return resources.files(package)
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / "data"


def read_text(name: str) -> str:
    """The text of one data file, e.g. ``read_text("fewshot_examples.json")``."""
    return folder().joinpath(name).read_text("utf-8")
