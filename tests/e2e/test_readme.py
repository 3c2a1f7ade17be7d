"""Every command in the ```bash blocks of the README and of docs/*.md runs, exactly as written, and
produces what it is there to produce.

How: each block runs in a copy of the checkout, one command after another, with the real inputs
(``SAB_DATA``, ``SAB_THOR_SCENES``) and ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` pointing at the fake
OpenAI server on loopback, so model runs are cheap. ``pytest`` and ``sab``'s verbs run in the test's
own process through the functions their scripts call (``pytest.main``, as every in-process run of
this suite goes: ``support.benchmark.run_pytest``, whose xdist workers, under ``-n``, are processes
of their own; ``sab_pytest.__main__.main``), with the command's words, working directory and
environment (``VAR=value`` before a command included): a new interpreter per command would cost
more than most commands themselves. A command whose point is a process of its own runs in
``bash -c LINE`` with a timeout: ``sab run`` (pytest from any directory), ``python``. A command ending in
``&`` is started in the background for the rest of its block (the test waits for the ``--port`` it
names) and stopped afterwards. A command passes when it ends with status 0 or 1 (a benchmark whose
cases or gates fail exits 1) without a traceback, an internal error or a usage error, and leaves what
it promises (``expect``): a benchmark run its table and a fresh summary of the cases it selected,
every file an option names, a report, a merged run, a plan. A command this file cannot tell the
product of fails the test, so a new command in a page needs a line in ``expect``.

Commands that ``.ci/run`` runs literally (the set-up, ``python3 -m venv .venv && . .venv/bin/activate``
and ``pip install -e ".[dev]"``, and the test suite itself) are covered by CI running them: the test
checks they are there, word for word and in the README's order. The pages'
commands use small samples (``--sab-sample``) so that the test stays quick; the README's bare
``pytest`` is the offline default, whole.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import ROOT
from support.benchmark import SUITE_VARIABLES, run_pytest
from support.cli import sab_cli
from support.timing import POLL_S, PROCESS_S

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
CI_RUN = ROOT / ".ci" / "run"
TIMEOUT_S = 300
#: the cases of the default subset (``--sab-subset mixed``)
MIXED_CASES = 130
#: what the copy of the checkout leaves out: the environment and the tools' caches (CI's mypy cache alone
#: is tens of MB), builds, and any run's outputs in the checkout
_IGNORE = shutil.ignore_patterns(".git", ".venv", ".ci-cache", ".pytest_cache", "__pycache__", ".mypy_cache",
                                 ".ruff_cache", ".import_linter_cache", ".grimp_cache", "*.egg-info", "build", "dist",
                                 "sab-results.jsonl*", "sab-summary.json", "sab.xml")


def bash_blocks(text: str) -> list[list[str]]:
    """The commands of each ```bash block (comment-only and blank lines dropped)."""
    blocks = re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)
    return [[line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]
            for block in blocks]


def _command(line: str) -> str:
    """The command without its trailing comment (how .ci/run writes it)."""
    return re.sub(r"\s+#.*$", "", line).strip()


def _ci_lines() -> set[str]:
    return {line.strip() for line in CI_RUN.read_text().splitlines()}


BLOCKS = [(page.relative_to(ROOT).as_posix(), block) for page in PAGES for block in bash_blocks(page.read_text())]
README_LINES = [_command(line) for page, block in BLOCKS if page == "README.md" for line in block]


def test_readme_shows_the_three_commands() -> None:
    assert "pytest" in README_LINES and "pytest tests -n 2" in README_LINES
    assert any(line.startswith("pytest --model ") for line in README_LINES)
    assert len(README.read_text().splitlines()) <= 150


#: the README's commands that .ci/run runs literally, in the README's order: the set-up, the project's tests
CI_RUNS = ["python3 -m venv .venv && . .venv/bin/activate", 'pip install -e ".[dev]"', "pytest tests -n 2"]


def test_commands_run_by_ci_are_there_literally() -> None:
    assert set(CI_RUNS) <= set(README_LINES) & _ci_lines()


def test_ci_runs_the_readme_set_up_in_the_readmes_order() -> None:
    """The install goes into the environment the line before it made, and the tests run in it: the
    order the README shows, which CI keeps."""
    ci = [line.strip() for line in CI_RUN.read_text().splitlines()]
    assert [line for line in README_LINES if line in CI_RUNS] == CI_RUNS
    assert sorted(CI_RUNS, key=ci.index) == CI_RUNS


# ------------------------------------------------------------------------------------ what a command leaves


def _option(words: list[str], *names: str) -> str | None:
    """The value of the first of ``names`` among ``words`` (``--name=value`` or ``--name value``)."""
    for i, word in enumerate(words):
        for name in names:
            if word == name and i + 1 < len(words):
                return words[i + 1]
            if word.startswith(name + "="):
                return word.split("=", 1)[1]
    return None


def _fresh(path: Path, started: float) -> Path:
    assert path.is_file() and path.stat().st_size > 0, f"{path} was not written"
    assert path.stat().st_mtime >= started - 1, f"{path} is an earlier command's"
    return path


def _benchmark_run(words: list[str], cwd: Path, out: str, started: float) -> None:
    """A benchmark run: its table, a fresh summary of the cases it selected, and every file it was asked for."""
    summary = json.loads(_fresh(cwd / (_option(words, "--sab-out") or ".") / "sab-summary.json", started).read_text())
    assert f"cases: {summary['cases']}" in out and "summary: " in out
    selects = any(w in ("-k", "-m", "--lf") or w.startswith("--sab-shard") for w in words)
    own = _own_cases(words, cwd)
    if not selects:  # nothing deselects: the summary holds the sample, or the whole default subset, or own cases
        assert summary["cases"] == (own or int(_option(words, "--sab-sample") or MIXED_CASES))
        assert summary["run"]["status"] == "complete"
    if own:
        assert set(summary["suites"]) and f"{'Suite':<22}" in out
    if "--lf" in words:  # the failures again: every answer comes from the response cache
        assert summary["run"]["status"] == "rerun" and summary["usage"]["api_calls"] == 0
    elif _option(words, "--model") not in (None, "reference", "refuse"):
        assert summary["usage"]["api_calls"] > 0, "the model run sent no request"
    assert summary["gates"] if _option(words, "--sab-gate", "--sab-policy") else not summary["gates"]
    for name in ("--junitxml", "--sab-html", "--sab-inspect-log"):
        if (path := _option(words, name)) is not None:
            _fresh(cwd / path, started)
    if (xml := _option(words, "--junitxml")) is not None:
        assert "<testcase" in (cwd / xml).read_text()
    if (html := _option(words, "--sab-html")) is not None:
        assert "<html" in (cwd / html).read_text()


#: ``sab board``'s options that take a value (the words after them are no runs)
BOARD_VALUED = ("--against", "--layout", "--name", "--correction", "--alpha", "--format", "--markdown", "--csv",
                "--latex", "--html", "--json")


def _row_names(cwd: Path, runs: list[str]) -> list[str]:
    """The models of the runs a board shows (each row is named by the model where only the model differs)."""
    return [json.loads((cwd / run / "sab-summary.json").read_text())["model"] for run in runs]


def _own_cases(words: list[str], cwd: Path) -> int:
    """How many cases the team's own case files a command names (or folders of them) hold (0: none)."""
    from sab_pytest.owncases import files

    paths = [cwd / w for w in words[1:] if not w.startswith("-") and (cwd / w).exists()]
    return sum(len(files.cases(files.read(p))) for p in files.find(paths))


def _verb(verb: str, words: list[str], cwd: Path, out: str, started: float) -> None:
    """What each ``sab VERB`` (or ``python -m sab_pytest VERB``) leaves."""
    if verb == "run":
        _benchmark_run(words, cwd, out, started)
    elif verb == "report":
        page = _option(words, "--out") or f"{words[words.index('report') + 1]}/sab-report.html"
        assert "<html" in _fresh(cwd / page, started).read_text()
    elif verb == "compare":
        assert "rejection_rate" in out
        for name in ("--html", "--json"):
            if (path := _option(words, name)) is not None:
                _fresh(cwd / path, started)
    elif verb == "board":
        start = words.index("board") + 1
        runs = [w for i, w in enumerate(words[start:], start)
                if not w.startswith("-") and words[i - 1] not in BOARD_VALUED]
        assert "significant differences:" in out and all(f"{name} " in out for name in _row_names(cwd, runs))
        for name in ("--markdown", "--csv", "--latex", "--html", "--json"):
            if (path := _option(words, name)) is not None:
                _fresh(cwd / path, started)
        if (page := _option(words, "--html")) is not None:
            assert (cwd / page).read_text().count("<figure>") >= 1
    elif verb == "merge":
        merged_dir = cwd / (_option(words, "--sab-out") or ".")
        merged = json.loads(_fresh(merged_dir / "sab-summary.json", started).read_text())
        shards = [words[i] for i in range(words.index("merge") + 1, len(words))
                  if not words[i].startswith("-") and words[i - 1] not in ("--sab-out", "--junitxml")]
        assert merged["cases"] == sum(json.loads((cwd / s / "sab-summary.json").read_text())["cases"] for s in shards)
        if (xml := _option(words, "--junitxml")) is not None:
            assert _fresh(cwd / xml, started).read_text().count("<testcase") >= merged["cases"]
    elif verb == "inspect-log":
        _fresh(cwd / str(_option(words, "-o", "--out")), started)
    elif verb == "cases" and words[2] == "check":
        assert " 0 error(s), 0 warning(s) in " in f" {out}" and f"({_own_cases(words[1:], cwd)} case(s))" in out
    elif verb == "cases" and words[2] == "new":
        assert "- kind: safe_detailed" in _fresh(cwd / f"{words[3]}.sab.yaml", started).read_text()
    elif verb == "plan":
        assert "--sab-sample" in out or "power" in out or "labels needed" in out
    elif verb == "audit":
        run = words[words.index("audit") + 1]
        made = "sab-audit.json" if "--labels" in words else "sab-audit.html"
        _fresh(cwd / (_option(words, "--json", "--page") or f"{run}/{made}"), started)
    else:
        raise AssertionError(f"no expectation for the verb {verb!r}: add one to tests/e2e/test_readme.py")


def _words(line: str) -> tuple[dict[str, str], list[str]]:
    """The ``VAR=value`` words before a command, and the command's own words."""
    words = shlex.split(_command(line))
    assigned: dict[str, str] = {}
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        assigned[name] = value
    return assigned, words


def expect(line: str, cwd: Path, out: str, started: float) -> None:
    """Assert what ``line`` (a foreground command that ended with status 0 or 1) left in ``cwd``."""
    _, words = _words(line)
    program = words[0]
    if program == "export":
        return  # sets the key for the commands that follow; the test's environment has one already
    if program == "pytest":
        _benchmark_run(words, cwd, out, started)
    elif program == "python3" and words[1:3] == ["-m", "venv"]:
        assert (cwd / words[3] / "bin" / "python").exists()
    elif program == "sab":
        _verb(words[1], words, cwd, out, started)
    elif program == "python" and words[1:3] == ["-m", "sab_pytest"]:
        _verb(words[3], words, cwd, out, started)
    elif program == "python" and words[1] == "-c":
        assert out.strip(), "the snippet printed nothing"
    else:
        raise AssertionError(f"no expectation for {line!r}: add one to tests/e2e/test_readme.py")


# ------------------------------------------------------------------------------------------ the blocks run


def _wait_for_port(line: str, proc: subprocess.Popen) -> None:
    port = re.search(r"--port[ =](\d+)", line)
    assert port is not None, f"a background command must name its --port: {line}"
    deadline = time.monotonic() + PROCESS_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"background command ended early: {line}"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", int(port.group(1)))) == 0:
                return
        time.sleep(POLL_S)
    raise AssertionError(f"background command never listened: {line}")


def _block_id(item: tuple[str, list[str]]) -> str:
    page, block = item
    first = next(_command(line) for line in block if _command(line) not in _ci_lines())
    return f"{page}:{first[:40]}"


def _run(line: str, checkout: Path, env: dict[str, str], pytester: pytest.Pytester) -> tuple[int, str]:
    """Run the foreground command ``line`` in ``checkout``: its exit status and what it printed."""
    assigned, words = _words(line)
    program = words[0] if words else ""
    in_process = program == "pytest" or (program == "sab" and words[1:2] != ["run"])
    if not in_process:
        done = subprocess.run(["bash", "-c", line], cwd=checkout, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        return done.returncode, done.stdout + done.stderr
    with pytest.MonkeyPatch.context() as patch:
        for name, value in assigned.items():
            patch.setenv(name, value)
        if program == "pytest":
            result = run_pytest(pytester, *words[1:])
            return int(result.ret), "\n".join(result.outlines + result.errlines)
        command = sab_cli(*words[1:])
        return command.returncode, command.stdout + command.stderr


@pytest.mark.parametrize("item", [(p, b) for p, b in BLOCKS if any(_command(line) not in _ci_lines() for line in b)],
                         ids=_block_id)
def test_block_runs(item: tuple[str, list[str]], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                    real_data_dir: Path, real_scenes_dir: Path, server) -> None:
    _, block = item
    checkout = pytester.path / "checkout"
    shutil.copytree(ROOT, checkout, ignore=_IGNORE, symlinks=True)
    inputs = {"SAB_DATA": str(real_data_dir), "SAB_THOR_SCENES": str(real_scenes_dir),
              "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-readme-test-key"}
    for name, value in inputs.items():  # the commands run in this process see what the others do
        monkeypatch.setenv(name, value)
    for name in SUITE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(checkout)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    background: list[subprocess.Popen] = []
    try:
        for line in block:
            if _command(line) in _ci_lines():
                continue  # run by .ci/run (checked above)
            # an install would replace the environment running these tests: it must be one .ci/run runs
            assert not re.match(r"(python -m )?pip install", line), f"not in .ci/run literally: {line}"
            if _command(line).endswith("&"):
                proc = subprocess.Popen(["bash", "-c", _command(line)[:-1]], cwd=checkout, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                background.append(proc)
                _wait_for_port(line, proc)
                continue
            started = time.time()
            status, out = _run(line, checkout, env, pytester)
            assert status in (0, 1), f"{line}\nexit {status}\n{out[-3000:]}"
            assert "INTERNALERROR" not in out and "Traceback" not in out, f"{line}\n{out[-3000:]}"
            expect(line, checkout, out, started)
    finally:
        for proc in background:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=PROCESS_S)
