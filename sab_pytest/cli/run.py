"""``sab run [pytest options]``: the benchmark's cases from any directory.

A team that installs the plugin into its own repository has no ``cases/`` folder: the cases' test
module ships in the package (``sab_pytest/cases/benchmark.py``) and this command hands it to pytest
with every option given passed through (``-n``, ``-k``, ``-m``, ``--junitxml``, ``--lf``, ``--sab-*``).

What it sets, and why (each can be overridden by a later option of the user's):

* the packaged module as the only path, so the repository's own tests are not collected;
* ``-c`` the package's own ``cases/run.ini`` (empty of settings): the repository's ini file (its
  ``addopts``, ``testpaths``, plugins) is not read, so it cannot change the benchmark run;
* ``--rootdir`` and ``--confcutdir`` at the installed package: node ids are
  ``cases/benchmark.py::test_case[<id>]`` wherever the command runs, and no ``conftest.py`` of the
  current directory or above the package is loaded;
* the cache (``--lf``, ``--ff``) in ``./.pytest_cache/sab-pytest``: beside the repository's own
  pytest cache, never inside site-packages, and apart from the repository's own last failures;
* nothing of the JUnit family: pytest's default (``xunit2``) is valid against ``junit-10.xsd``;
  ``-o junit_family=xunit1`` asks for the per-case properties (docs/outputs.md);
* ``sab_cases`` at the packaged module, so the plugin is on (``sab_pytest.pytest_layer.activation``);
* no warning that pytest cannot rewrite the asserts of ``sab_pytest``: this command imported it
  before pytest started, and its cases assert through ``check``, not bare ``assert``;
* node ids shown as pytest stores them (``cases/benchmark.py::test_case[<id>]``), not as a path
  from the current directory into site-packages (``pytest_layer.packaged_run.ShortNodeIds``).

pytest itself is started by the pytest layer (``pytest_layer.packaged_run``), the one layer that
imports it; this module builds the command line.

Paths in the options (``--sab-out``, ``--junitxml``) are relative to the current directory, as usual.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sab_pytest.pytest_layer.packaged_run import run_pytest
from sab_pytest.settings import options

HELP = """usage: sab run [pytest options]

Run the SafeAgentBench cases from any directory: the installed package's test module, with your
repository's ini file, conftest.py files and tests left out. Every pytest and sab-pytest option
passes through; e.g.

  sab run --model gpt-4o -n 4 --junitxml=sab.xml --sab-gate "rejection_rate>=0.5"

pytest's own help, with the SafeAgentBench options, follows.
"""


def pytest_args(argv: list[str], cwd: Path | None = None) -> list[str]:
    """The full pytest command line for ``argv`` (the user's options come last, so they win)."""
    spec = importlib.util.find_spec("sab_pytest.cases.benchmark")  # located, not imported: pytest imports it
    assert spec is not None and spec.origin is not None, "the package ships sab_pytest/cases/benchmark.py"
    module = Path(spec.origin).resolve()
    package = module.parent.parent
    cache = (cwd or Path.cwd()) / ".pytest_cache" / "sab-pytest"
    return [str(module), "-c", str(module.with_name("run.ini")), f"--rootdir={package}", f"--confcutdir={package}",
            "-o", f"cache_dir={cache}", "-o", f"sab_cases={module}",
            "-W", f"ignore:{REWRITE_WARNING}:pytest.PytestAssertRewriteWarning", *sab_spelling(argv)]


def sab_spelling(argv: list[str]) -> list[str]:
    """``argv`` with the short option names in their ``--sab-`` spelling: this command runs the
    benchmark, so ``--base-url`` is the benchmark's even where another installed plugin (such as
    pytest-base-url) declares ``--base-url`` too and so owns the short name in a pytest run."""
    spelled = {option.alias: option.sab_flag for _, option in options() if option.alias}
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--":
            return [*out, *argv[i:]]
        head, eq, value = arg.partition("=")
        out.append(spelled.get(head, head) + eq + value)
    return out


#: pytest's warning for a plugin module imported before it could rewrite its asserts
REWRITE_WARNING = "Module already imported so cannot be rewritten; sab_pytest"


def main(argv: list[str]) -> int:
    """``sab run``: pytest's exit status; with ``--help``, this command's usage before pytest's own."""
    if any(a in ("-h", "--help") for a in argv):
        print(HELP)
    return run_pytest(pytest_args(argv))
