"""The plugin is inert unless the run asks for the benchmark (``sab_pytest.pytest_layer.activation``), and path
options written with a space never change which tests pytest collects.

End to end through pytester runs: the plugin is loaded by its installed entry point, as in any
other project of the environment. In this process (``support.benchmark.run_pytest``) except where
xdist's workers are the point: one run shows the plugin stays off under ``-n``, the others that
activation and path options come out the same on the workers, which search for the ini file anew.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import plugin_lines
from support.benchmark import CASE_TEST, pytest_in_this_process, run_pytest
from support.results import read_records, read_summary
from support.tiny_dataset import N_CASES, write_tiny_dataset

from sab_pytest.pytest_layer import activation

TRIVIAL = "def test_one():\n    assert 1 + 1 == 2\n"


def _files(root: Path) -> set[str]:
    """Files under ``root`` except pytest's own (cache, byte code, its temporary directories)."""
    skip = (".pytest_cache", "__pycache__", "runpytest-")
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and not any(part.startswith(skip) for part in p.relative_to(root).parts)
            and str(p.relative_to(root)) not in ("stdout", "stderr")}  # pytester's capture of the run


def _assert_no_sab(result: pytest.RunResult) -> None:
    lines = (result.stdout.str() + result.stderr.str()).splitlines()
    out = "\n".join(line for line in lines if not line.startswith("plugins:"))  # pytest lists what is installed
    assert plugin_lines(out) == [], out
    assert "INTERNALERROR" not in out and "Traceback" not in out


# ------------------------------------------------------------------------------------------ inert

@pytest.mark.parametrize("args", [(), ("-n", "2"), ("-q",), ("-p", "no:cacheprovider")])
def test_other_project_runs_untouched(pytester: pytest.Pytester, args) -> None:
    pytester.makepyfile(test_other=TRIVIAL)
    before = _files(pytester.path)
    result = run_pytest(pytester, *args)
    assert result.ret == 0
    result.assert_outcomes(passed=1)
    _assert_no_sab(result)
    assert _files(pytester.path) == before


WORKERS_WRITE = """
import os

def pytest_configure(config):
    if hasattr(config, "workerinput"):
        os.write(2, ("said by " + config.workerinput["workerid"] + " on its standard error\\n").encode())
"""


def test_an_in_process_run_under_xdist_has_its_workers_stderr(pytester: pytest.Pytester) -> None:
    """The runs above read under ``-n`` have their controller in this process and their workers in
    processes of their own, which write to the standard error they inherit: what a worker said
    there must be in the run's ``stderr``, or an assertion that the plugin said nothing could not fail."""
    pytester.makepyfile(test_other=TRIVIAL)
    pytester.makeconftest(WORKERS_WRITE)
    result = run_pytest(pytester, "-n", "1")
    result.assert_outcomes(passed=1)
    assert [line for line in result.errlines if line.startswith("said by")] == ["said by gw0 on its standard error"]


def test_other_project_help_and_markers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_other=TRIVIAL)
    before = _files(pytester.path)
    helped = run_pytest(pytester, "-h")
    assert helped.ret == 0 and "sab:" not in helped.stdout.str()
    markers = run_pytest(pytester, "--markers")
    assert markers.ret == 0 and "SafeAgentBench" not in markers.stdout.str()
    assert _files(pytester.path) == before


def test_other_project_with_strict_config_and_markers(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\naddopts = --strict-markers --strict-config\n")
    pytester.makepyfile(test_other=TRIVIAL)
    result = run_pytest(pytester)  # under -n: test_other_project_runs_untouched
    assert result.ret == 0
    result.assert_outcomes(passed=1)
    _assert_no_sab(result)


#: what the plugin may import in a run that does not ask for the benchmark: its options' flags and the
#: activation rule (``pytest_layer.entry``), nothing of the benchmark itself, nor the table's dataclasses
LIGHT = {"sab_pytest", "sab_pytest.plugin", "sab_pytest.pytest_layer", "sab_pytest.pytest_layer.activation",
         "sab_pytest.pytest_layer.aliases", "sab_pytest.pytest_layer.entry", "sab_pytest.pytest_layer.options",
         "sab_pytest.pytest_layer.state", "sab_pytest.settings", "sab_pytest.settings.flags"}

IMPORTS_TEST = f"""
import sys

def test_imports():
    loaded = set(sys.modules)
    assert not {{"numpy", "openai", "PIL", "yaml", "scipy"}} & loaded
    assert {{m for m in loaded if m.startswith("sab_pytest")}} <= set({sorted(LIGHT)!r})
"""


@pytest.mark.parametrize("args", [(), ("-n", "1")], ids=["no-xdist", "xdist-worker"])
def test_other_project_imports_only_the_option_table(pytester: pytest.Pytester, args: tuple[str, ...]) -> None:
    """In a new interpreter (the process's imports are the point): the test itself reads them, in the
    process that runs it (an xdist worker with -n)."""
    pytester.makepyfile(test_imports=IMPORTS_TEST)
    result = run_pytest(pytester, *args, inprocess=False)
    result.assert_outcomes(passed=1)


# ------------------------------------------------------------------------------------ turning on

def _tiny_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_other=TRIVIAL)


@pytest.mark.parametrize("where", ["argv", "PYTEST_ADDOPTS", "addopts"])
def test_an_option_turns_it_on_wherever_given(pytester: pytest.Pytester, tiny_data: Path, where: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _tiny_project(pytester)
    opts = f"--sab-data={tiny_data} --sab-allow-modified-data --sab-no-exec"
    args: list[str] = []
    if where == "argv":
        args = opts.split()
    elif where == "PYTEST_ADDOPTS":
        monkeypatch.setenv("PYTEST_ADDOPTS", opts)
    else:
        pytester.makeini(f"[pytest]\naddopts = {opts}\n")
    result = run_pytest(pytester, *args)
    result.stdout.fnmatch_lines(["sab: model=reference*"])
    assert result.ret == 0  # no benchmark test collected: nothing to report, nothing written
    assert not (pytester.path / "sab-results.jsonl").exists()


def test_ini_cases_path_turns_it_on_only_when_collected(pytester: pytest.Pytester, real_data_dir: Path,
                                                        real_scenes_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAB_DATA", str(real_data_dir))
    monkeypatch.setenv("SAB_THOR_SCENES", str(real_scenes_dir))
    pytester.makeini("[pytest]\ntestpaths = cases\nsab_cases = cases\n")
    pytester.mkdir("cases")
    (pytester.path / "cases" / "test_bench.py").write_text(CASE_TEST)
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_own.py").write_text(TRIVIAL)
    bare = run_pytest(pytester, "--co", "-q")
    bare.stdout.fnmatch_lines(["130 tests collected*"])
    assert bare.ret == 0
    header = run_pytest(pytester, "--co")
    header.stdout.fnmatch_lines(["sab: model=reference (offline default*"])
    own = run_pytest(pytester, "tests")  # xdist's workers take the controller's arguments and ini
    assert own.ret == 0
    own.assert_outcomes(passed=1)
    _assert_no_sab(own)


def test_late_activation_under_xdist(pytester: pytest.Pytester, real_data_dir: Path, real_scenes_dir: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """No option, no ini: a test that requests the benchmark's fixture still gets counted."""
    monkeypatch.setenv("SAB_DATA", str(real_data_dir))
    monkeypatch.setenv("SAB_THOR_SCENES", str(real_scenes_dir))
    pytester.makepyfile(test_bench=CASE_TEST)
    result = run_pytest(pytester, "-n", "2", "-k", "abstract and L3")
    result.stdout.fnmatch_lines(["*SafeAgentBench*"])
    summary = read_summary(pytester.path)
    assert summary["cases"] == 10 == result.parseoutcomes()["failed"]


# ---------------------------------------------------------------------------- path options, space

def _write_project(root: Path) -> None:
    """A project with benchmark cases under testpaths and other tests beside them."""
    (root / "tox.ini").write_text("[pytest]\ntestpaths = cases\n")
    (root / "cases").mkdir()
    (root / "cases" / "test_bench.py").write_text(CASE_TEST)
    (root / "test_other.py").write_text(TRIVIAL)


@pytest.fixture
def project(pytester: pytest.Pytester, tiny_data: Path) -> pytest.Pytester:
    """``_write_project``'s project in this test's pytester directory."""
    _write_project(pytester.path)
    return pytester


def _tiny_args(tiny_data: Path, *args: str) -> tuple[str, ...]:
    return (f"--sab-data={tiny_data}", "--sab-allow-modified-data", "--sab-no-exec", "--sab-subset=all", *args)


def _run_tiny(project: pytest.Pytester, tiny_data: Path, *args: str) -> pytest.RunResult:
    return run_pytest(project, *_tiny_args(tiny_data, *args))


@dataclass(frozen=True)
class SpacedRun:
    """A run of ``_write_project``'s project under ``-n 2``, its path options written with a space."""

    project: Path
    elsewhere: Path  # beside the project, outside it
    result: pytest.RunResult


@pytest.fixture(scope="module")
def spaced_under_xdist(tmp_path_factory: pytest.TempPathFactory) -> SpacedRun:
    """--sab-out, --sab-cache, --sab-html and --junitxml, each with a space, to places that do not
    exist yet: directories and a file inside the project (``a/out``, ``b/cache``, ``d/junit.xml``),
    a file outside it (``elsewhere/report.html``), under ``-n 2``. Once for the module: the tests
    below only read it."""
    root = tmp_path_factory.mktemp("spaced")
    project, elsewhere = root / "project", root / "project-elsewhere"
    project.mkdir()
    _write_project(project)
    tiny_data = write_tiny_dataset(root / "data")
    result = pytest_in_this_process(project, *_tiny_args(tiny_data, "-n", "2", "--sab-out", "a/out", "--sab-cache",
                                                         "b/cache", "--junitxml", "d/junit.xml", "--sab-html",
                                                         str(elsewhere / "report.html"), "-v"))
    return SpacedRun(project, elsewhere, result)


def test_path_option_outside_with_space_is_refused(project: pytest.Pytester, tiny_data: Path) -> None:
    results = project.path.parent / f"{project.path.name}-results"
    results.mkdir()
    spaced = _run_tiny(project, tiny_data, "--sab-out", str(results))
    assert spaced.ret == pytest.ExitCode.USAGE_ERROR
    spaced.stderr.fnmatch_lines([f"*Write --sab-out={results} (with '=')*"])
    assert not (results / "sab-results.jsonl").exists()
    equal = _run_tiny(project, tiny_data, f"--sab-out={results}")
    assert len(read_records(results)) == N_CASES
    assert "test_other.py" not in equal.stdout.str()


def test_path_option_inside_with_space_works_like_equals(project: pytest.Pytester, tiny_data: Path) -> None:
    (project.path / "results").mkdir()
    spaced = _run_tiny(project, tiny_data, "--sab-out", "results", "-v")
    equal = _run_tiny(project, tiny_data, "--sab-out=results", "-v")
    assert spaced.ret == equal.ret == 1
    ids = [re.findall(r"::test_case\[[^\]]+\]", r.stdout.str()) for r in (spaced, equal)]
    assert ids[0] == ids[1] and len(set(ids[0])) == N_CASES
    assert "test_other" not in spaced.stdout.str()


def test_a_new_directory_written_with_a_space_is_judged_as_the_workers_will_see_it(
        project: pytest.Pytester, tiny_data: Path, spaced_under_xdist: SpacedRun) -> None:
    """The run creates --sab-out before xdist starts its workers, and they search for the ini file
    again: outside the project they would collect other tests, so it is refused before anything is
    made; inside, the workers collect the same cases as without -n."""
    outside = project.path.parent / f"{project.path.name}-new" / "results"
    # judged at configure time, alike with and without -n: the refusal needs no workers
    spaced = _run_tiny(project, tiny_data, "--sab-out", str(outside), "-n", "0")
    assert spaced.ret == pytest.ExitCode.USAGE_ERROR
    spaced.stderr.fnmatch_lines([f"*once the run creates that path*Write --sab-out={outside} (with '=')*"])
    assert not outside.parent.exists()
    inside = spaced_under_xdist  # --sab-out a/out, a new directory inside the project, with -n 2
    inside.result.stdout.fnmatch_lines([f"*2 workers [[]{N_CASES} items[]]*"])
    assert len(read_records(inside.project / "a" / "out")) == N_CASES


def test_paths_made_for_a_moment_are_removed_and_nothing_else(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.mkdir()
    wanted = [kept, tmp_path / "a" / "b" / "c", tmp_path / "d"]
    with activation.made_for_a_moment(wanted) as missing:
        assert missing == wanted[1:] and all(path.is_dir() for path in wanted)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]


def test_data_option_with_space_outside_is_refused(project: pytest.Pytester, tiny_data: Path) -> None:
    result = run_pytest(project, "--sab-data", str(tiny_data), "--sab-allow-modified-data")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*Write --sab-data={tiny_data} (with '=')*"])


# ---------------------------------------------------------------------------------------- the rule

def test_rule_pieces() -> None:
    names = ["--model", "--sab-out"]
    assert activation.names_option(["-q", "--sab-out=x"], names) == "--sab-out"
    assert activation.names_option(["-q", "--model", "m"], names) == "--model"
    assert activation.names_option(["-k", "model", "--", "--model"], names) is None
    assert activation.names_option(["--models"], names) is None
    root = Path("/p")
    assert activation.collects_cases(["cases"], root, [root / "cases"])
    assert activation.collects_cases(["."], root, [root / "cases"])
    assert activation.collects_cases(["cases/test_x.py::test_case[a]"], root, [root / "cases"])
    assert not activation.collects_cases(["tests"], root, [root / "cases"])
    assert activation.split_path_options(["--sab-out", "d", "--sab-data=e", "--thor-scenes", "-q"],
                                         ["--sab-out", "--sab-data", "--thor-scenes"]) == [("--sab-out", "d")]


def test_split_message_names_both_configurations() -> None:
    text = activation.split_path_message([("--sab-out", "../r")], None, Path("/p/pyproject.toml"))
    assert "no ini file instead of /p/pyproject.toml" in text and text.endswith("Write --sab-out=../r (with '=').")
    assert "can change which tests" in activation.split_path_message([("--sab-out", "r")], None, None, known=False)


def test_help_shows_every_default_and_the_engines(pytester: pytest.Pytester) -> None:
    text = run_pytest(pytester, "--help").stdout.str()
    section = text.split("SafeAgentBench (sab-pytest):", 1)[1].split("\n\n", 1)[0]
    entries = re.split(r"\n  (?=--)", "\n" + section)
    entries = [" ".join(e.split()) for e in entries if e.strip()]
    from sab_pytest.pytest_layer.options import OPTION_NAMES

    assert len(entries) == len(OPTION_NAMES)
    for entry in entries:
        assert "default" in entry, entry
    assert any(e.startswith("--sab-thor={sim,local,remote}, --thor={sim,local,remote}") for e in entries)


def test_every_path_option_written_with_a_space_to_new_places_collects_the_same_cases_under_xdist(
        project: pytest.Pytester, tiny_data: Path, spaced_under_xdist: SpacedRun) -> None:
    """--sab-out, --sab-cache, --sab-html and --junitxml, each with a space, to places that do not
    exist yet: directories and a file inside the project, a file outside it (a file is written at
    the end, after collection): the workers collect the cases and nothing else, as with '=' and
    without -n; a new directory outside the project is refused before any worker starts."""
    spaced = spaced_under_xdist.result
    equal = _run_tiny(project, tiny_data, "--sab-out=e/out", "--sab-cache=f/cache", "-v")
    ids = [sorted(set(re.findall(r"::test_case\[[^\]]+\]", r.stdout.str()))) for r in (spaced, equal)]
    assert ids[0] == ids[1] and len(ids[0]) == N_CASES
    spaced.stdout.fnmatch_lines([f"*2 workers [[]{N_CASES} items[]]*"])
    assert "test_other" not in spaced.stdout.str()
    assert len(read_records(spaced_under_xdist.project / "a" / "out")) == N_CASES
    assert (spaced_under_xdist.project / "d" / "junit.xml").is_file()
    assert (spaced_under_xdist.elsewhere / "report.html").is_file()
    # judged at configure time, alike with and without -n: the refusal needs no workers
    elsewhere = project.path.parent / f"{project.path.name}-elsewhere"
    refused = _run_tiny(project, tiny_data, "-n", "0", "--sab-cache", str(elsewhere / "cache"))
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"*Write --sab-cache={elsewhere / 'cache'} (with '=')*"])
