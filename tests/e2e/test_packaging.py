"""The wheel carries what an installed plugin needs (the cases' module, ``sab_pytest.data``), and
``sab run`` (and ``python -m sab_pytest run``) works from a fresh environment in another repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import tomllib
from support import ROOT, junit_schema
from support.timing import BUILD_S


def test_every_package_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "sab_pytest").rglob("__init__.py")}
    assert listed == found | {"sab_pytest.data"}


def test_editable_install_finds_the_data_folder() -> None:
    from importlib import resources

    manifest = resources.files("sab_pytest.data").joinpath("thor_scenes_manifest.json")
    assert Path(str(manifest)).resolve() == (ROOT / "data" / "thor_scenes_manifest.json").resolve()


def test_checkout_without_install_reads_the_data_folder() -> None:
    from sab_pytest import datafiles

    assert Path(str(datafiles.folder("sab_pytest.not_installed"))) == ROOT / "data"
    assert "examples" in datafiles.read_text("fewshot_examples.json")


def _run(*cmd: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=BUILD_S, **kw)


def test_run_command_from_a_built_wheel(tmp_path: Path, real_data_dir: Path, real_scenes_dir: Path) -> None:
    dist = tmp_path / "dist"
    # with this environment's build backend (the dev extras hold the floor pyproject's build-system asks
    # for): an isolated build would install setuptools into a new environment first, most of the test's time
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                 str(ROOT))
    assert built.returncode == 0, built.stderr
    wheel = next(dist.glob("sab_pytest-*.whl"))
    with zipfile.ZipFile(wheel) as archive:  # the license as an SPDX expression (PEP 639), which setuptools keeps
        metadata = next(archive.read(n).decode() for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: MIT" in metadata.splitlines() and "license" not in built.stderr.lower()
    venv = tmp_path / "venv"
    assert _run(sys.executable, "-m", "venv", "--without-pip", str(venv)).returncode == 0
    python = venv / "bin" / "python"
    site = Path(_run(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    # the dependencies come from this environment; a plain path line does not run its .pth files, so the
    # editable install of the checkout stays out and only the wheel provides sab_pytest
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = _run(sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q",
                     str(wheel))
    assert installed.returncode == 0, installed.stderr
    repo = tmp_path / "their-repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_theirs.py").write_text("def test_theirs():\n    raise SystemExit('must not run')\n")
    (repo / "conftest.py").write_text("raise SystemExit('their conftest must not load')\n")
    (repo / "pytest.ini").write_text("[pytest]\naddopts = --maxfail=1\ntestpaths = tests\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env.update(SAB_DATA=str(real_data_dir), SAB_THOR_SCENES=str(real_scenes_dir))
    where = _run(str(python), "-c", "import sab_pytest, importlib.resources as r; print(sab_pytest.__file__); "
                 "print(r.files('sab_pytest.data').joinpath('fewshot_examples.json').is_file())", cwd=repo, env=env)
    assert where.stdout.split() == [str(site / "sab_pytest" / "__init__.py"), "True"], where.stderr
    # the wheel's console script, as a user types it; the rerun below goes through python -m sab_pytest
    result = _run(str(venv / "bin" / "sab"), "run", "-n", "2", "--sab-sample", "10", "--junitxml=sab.xml",
                  "-k", "not long_horizon", cwd=repo, env=env)
    assert result.returncode == 1, result.stdout + result.stderr  # the offline reference agent complies
    assert "test_theirs" not in result.stdout and "must not" not in result.stdout + result.stderr
    assert "configfile: cases/run.ini" in result.stdout and "PytestAssertRewriteWarning" not in result.stdout
    assert "FAILED cases/benchmark.py::test_case[" in result.stdout
    long_paths = [line for line in result.stdout.splitlines() if "site-packages" in line]
    assert long_paths == [f"rootdir: {site / 'sab_pytest'}"]
    # the example release policy docs/ci-and-gates.md names ships in the wheel
    assert (site / "sab_pytest" / "data" / "release-policy.yaml").is_file()
    summary = json.loads((repo / "sab-summary.json").read_text())
    from sab_pytest import dataset

    sample = dataset.select(dataset.load(str(real_data_dir)), "mixed", sample=10)
    assert summary["cases"] == sum(1 for c in sample if c.kind != "long_horizon")  # -k "not long_horizon"
    assert (repo / "sab.xml").is_file() and (repo / ".pytest_cache" / "sab-pytest").is_dir()
    # pytest's default family, valid against junit-10.xsd's rules, and no path of this machine in it
    written = (repo / "sab.xml").read_text()
    assert junit_schema.errors(repo / "sab.xml") == [] and "<system-out>case: " in written
    assert not [p for p in (str(tmp_path), str(real_data_dir), str(site)) if p in written]
    rerun = _run(str(python), "-m", "sab_pytest", "run", "--lf", "--sab-sample", "10", "-q", cwd=repo, env=env)
    assert rerun.returncode == 1 and "deselected" in rerun.stdout, rerun.stdout


@pytest.mark.parametrize("argv", [["--lf", "-k", "L3"]])
def test_run_passes_options_through_last(argv: list[str], tmp_path: Path) -> None:
    from sab_pytest.cli.run import pytest_args

    args = pytest_args(argv, cwd=tmp_path)
    assert args[-len(argv):] == argv
    assert args[0].endswith(os.path.join("sab_pytest", "cases", "benchmark.py"))
    assert f"cache_dir={tmp_path / '.pytest_cache' / 'sab-pytest'}" in args and "-c" in args
    assert not [a for a in args if a.startswith("junit_family")]  # pytest's default, the strict schema's
