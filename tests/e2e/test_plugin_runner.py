"""End to end: the run-ahead case runner under pytest and xdist, with real clients against the fake
server. Same results and calls with the cache on or off and at any concurrency; the concurrency
bounds the calls in flight; a failure stays on its own item; Ctrl-C and a dying worker lose only
what was running; an idle worker takes over cases another has not started."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.benchmark import CASE_TEST, RunSetup, SharedRun, shared_run
from support.calls import case_calls
from support.results import read_summary, records_by_case
from support.signals import hears_ctrl_c
from support.timing import POLL_S, PROCESS_S
from support.tiny_dataset import N_CASES

from sab_pytest.testing import Reply, fake_openai_server

SLOW = "Throw the Vase"


def responder(request) -> Reply | str:
    text = "\n".join(str(m.get("content")) for m in request.messages)
    if request.body.get("model") == "judge":
        if "COMPLIED" in text:
            return "REFUSED" if "I will not" in text else "COMPLIED"
        if "completeness, safety" in text.lower():  # the project's prompt, or the paper's ("Completeness, Safety")
            return "Rating: [[1, 0]]"
        return "Rating: [[success]]"
    if request.tool_names:  # an interactive strategy: two actions, then done
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        if turn < 2:
            return Reply.tool("execute", action=("find Apple", "pick Apple")[turn])
        return Reply.tool("done", message="The task is complete.")
    if "Throw" in request.last_user_message:
        return "I will not do this."
    return "1. find Apple\n2. pick Apple\n3. find Fridge\n4. open Fridge\n5. put Fridge"


@pytest.fixture
def server_script() -> dict[str, Any]:
    return {"responder": responder, "latency": 0.02}


def _options(url: str) -> tuple[str, ...]:
    """Agent and LLM judge at the fake server ``url``, no retry."""
    return ("--model", "agent", "--judge-model", "judge", f"--sab-base-url={url}", f"--sab-judge-base-url={url}",
            "--sab-retries", "0", "-p", "no:cacheprovider")


@pytest.fixture
def run_setup(server, monkeypatch: pytest.MonkeyPatch) -> RunSetup:
    """``run(*args, out=...)``: the benchmark against the fake server."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return RunSetup(_options(server.url))


def _verdicts(records: dict[str, dict]) -> dict[str, tuple]:
    keys = ("passed", "message", "rejected", "plan_success", "completeness", "safety", "exec_success",
            "exec_step_ratio", "error")
    return {cid: (*(r[k] for k in keys), r["agent"]["text"]) for cid, r in records.items()}


def test_cache_on_and_off_and_any_concurrency_give_the_same_results_and_calls(run, server, pytester) -> None:
    serial = run("-n", "0", "--sab-no-cache", out="serial")
    serial_calls = len(case_calls(server.chat_requests))
    outcomes = serial.parseoutcomes()
    assert server.max_in_flight == 1
    # cache off, three calls in flight in one process; cache on, three in each of two xdist workers
    for name, workers, args in (("off", 1, ("-n", "0", "--sab-no-cache")),
                                ("on", 2, ("-n", "2", f"--sab-cache={pytester.path / 'cache'}"))):
        server.reset()
        result = run("--sab-concurrency", "3", *args, out=name)
        records = records_by_case(pytester.path / name)
        assert result.parseoutcomes() == outcomes
        assert _verdicts(records) == _verdicts(records_by_case(pytester.path / "serial"))
        # every call once, and counted once: the server's count is the run's usage
        assert len(case_calls(server.chat_requests)) == serial_calls
        assert sum(r["usage"]["api_calls"] for r in records.values()) == serial_calls
        assert 1 < server.max_in_flight <= 3 * workers  # run-ahead and items together
        # the installed xdist has every piece the scheduling needs: no fallback warning
        assert not [line for line in result.outlines if "sab: warning: pytest-xdist" in line]
    assert len(records_by_case(pytester.path / "on")) == N_CASES


def test_a_case_failing_while_run_ahead_errors_on_its_own_item(run, pytester, server) -> None:
    pytester.makeconftest("""
import sab_pytest.run.runtime as runtime

_evaluate = runtime.Runtime.evaluate

def evaluate(self, case):
    if case.id == "unsafe_detailed-0004":
        raise RuntimeError("planted failure of " + case.id)
    return _evaluate(self, case)

runtime.Runtime.evaluate = evaluate

def pytest_unconfigure(config):  # the run is in the test's process: later tests get the real one
    runtime.Runtime.evaluate = _evaluate
""")
    server.add_rule(Reply.error(400, "no such deployment"), contains="Spill wine")
    result = run("-n", "0", "--sab-concurrency", "8", "-rE")
    result.stdout.fnmatch_lines(["ERROR test_sab.py::test_case[[]unsafe_detailed-0004[]] - RuntimeError: planted*",
                                 "ERROR test_sab.py::test_case[[]unsafe_detailed-0005[]] - Failed: unsafe_detailed-*"])
    assert result.parseoutcomes()["errors"] == 2
    records = records_by_case(pytester.path / "out")
    assert len(records) == N_CASES  # the crashed one too, as a setup error
    assert records["unsafe_detailed-0005"]["error"].startswith("model_api")
    assert records["unsafe_detailed-0004"]["error"].startswith("setup")
    assert [cid for cid, r in records.items() if r.get("error")] == ["unsafe_detailed-0004", "unsafe_detailed-0005"]


def test_ctrl_c_stops_at_once_and_keeps_what_finished(pytester, tiny_data: Path) -> None:
    pytester.makepyfile(test_sab=CASE_TEST)
    out = pytester.path / "out"
    with fake_openai_server(responder=responder, latency=0.3) as srv:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--sab-data={tiny_data}",
             "--sab-allow-modified-data", "--sab-subset=all",
             f"--sab-out={out}", "--model", "agent", "--judge-model", "judge", f"--sab-base-url={srv.url}",
             f"--sab-judge-base-url={srv.url}", "--sab-no-cache", "--sab-concurrency", "2", "-n", "0"],
            cwd=pytester.path, env={**os.environ, "OPENAI_API_KEY": "sk-test"}, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, preexec_fn=hears_ctrl_c)
        results = out / "sab-results.jsonl"
        deadline = time.monotonic() + PROCESS_S
        while time.monotonic() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 2):
            time.sleep(POLL_S)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        output, _ = proc.communicate(timeout=PROCESS_S)
        calls_at_exit = len(srv.chat_requests)
        time.sleep(0.6)
        assert len(srv.chat_requests) == calls_at_exit  # nothing left running behind the exit
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output
    # one line, the last, says why it ended, in the form of the run's other stops; no banner of pytest's
    # interruption, no piece of a traceback
    assert "Interrupted" not in output and "KeyboardInterrupt" not in output and "!!!" not in output, output
    last = output.splitlines()[-1]
    assert last.startswith("sab: exit status 2: Ctrl-C; the cases that finished are kept"), output
    assert "Traceback" not in output and "--sab-resume runs the rest" in last
    # stopped at once: at most the two calls already on their way (--sab-concurrency 2) came after the
    # signal, where the rest of the run would have made dozens more
    late = [(round(r.received_at - sent, 3), r.body.get("model")) for r in srv.chat_requests if r.received_at > sent]
    assert len(late) <= 2, (late, output[-300:])
    records = records_by_case(out)
    assert 2 <= len(records) < N_CASES and not any(r.get("error") for r in records.values())
    summary = read_summary(out)
    assert summary["cases"] == len(records)


#: the limit of calls in flight stays at ``--sab-concurrency``: on a loaded machine the answers'
#: times can say "queue" and bring it down to one call, which the held call below then takes, so
#: that nothing more runs ahead until that call ends (``run.capacity``); the test is about Ctrl-C
FULL_CAPACITY = """
import sab_pytest.run.capacity as capacity
import sab_pytest.run.runtime as runtime


class FullCapacity(capacity.Capacity):
    def __init__(self, size, start=None):
        super().__init__(size)

    def sample(self, *args, **kwargs):
        pass

    def timed_out(self):
        pass


runtime.Capacity = FullCapacity
"""


def test_ctrl_c_keeps_the_cases_finished_ahead_of_their_items(pytester, tiny_data: Path) -> None:
    """The first item waits for a case whose agent never gets an answer, so no item reports; the
    runner meanwhile finishes every other case ahead. After Ctrl-C all of those are in the results
    (from the run directory, not from any item), and only the waiting case is left to resume."""
    pytester.makepyfile(test_sab=CASE_TEST)
    pytester.makeconftest(FULL_CAPACITY)
    out = pytester.path / "out"
    results = out / "sab-results.jsonl"
    tmp = pytester.mkdir("tmp")  # the run directory (with each finished case's record) is made here
    with fake_openai_server(responder=responder, latency=0.02) as srv:
        srv.add_rule(Reply.slow(60, "never read"),
                     match=lambda r: r.body.get("model") == "agent" and "metal Fork" in r.last_user_message)
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--sab-data={tiny_data}",
             "--sab-allow-modified-data", "--sab-subset=all", f"--sab-out={out}", "--model", "agent",
             "--judge-model", "judge", f"--sab-base-url={srv.url}", f"--sab-judge-base-url={srv.url}", "--sab-no-cache",
             "--sab-concurrency", "8", "-n", "0"],
            cwd=pytester.path, env={**os.environ, "OPENAI_API_KEY": "sk-test", "TMPDIR": str(tmp)},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=hears_ctrl_c)

        def finished_ahead() -> int:
            return sum(len(path.read_text().splitlines()) for path in tmp.glob("sab-run-*/finished-*.jsonl"))

        def reported() -> bool:  # an item has written its record: the held case got an answer after all
            return results.exists() and bool(results.read_text())

        deadline = time.monotonic() + PROCESS_S
        while time.monotonic() < deadline and not reported() and (finished_ahead() < N_CASES - 1
                                                                  or srv.in_flight != 1):
            time.sleep(POLL_S)
        assert not reported() and finished_ahead() == N_CASES - 1, (finished_ahead(), srv.in_flight)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=PROCESS_S)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output
    records = records_by_case(out)
    assert len(records) == N_CASES - 1 and "unsafe_detailed-0000" not in records, output
    assert not any(r.get("error") for r in records.values())
    run_info = read_summary(out)["run"]
    assert run_info["status"] == "interrupted" and run_info["finished"] == N_CASES - 1 and run_info["not_run"] == 1


#: in each xdist worker, one line per report of a case: its phase and whether it carries the record
RECORD_SEEN = """
from pathlib import Path

WORKER = []
SEEN = Path(__file__).with_name("seen.txt")

def pytest_configure(config):
    WORKER.append(hasattr(config, "workerinput"))  # not the environment: this suite may run under xdist

def pytest_runtest_logreport(report):
    if WORKER[0] and "test_case[" in report.nodeid:
        with SEEN.open("a") as fh:
            fh.write(report.when + " " + str(any(k == "sab_record" for k, _ in report.user_properties)) + "\\n")
"""


@dataclass(frozen=True)
class WorkersRun:
    """The run under two workers that the two tests below read, and the bodies of its chat requests."""

    run: SharedRun
    bodies: list[str]


@pytest.fixture(scope="module")
def workers_run(tmp_path_factory: pytest.TempPathFactory) -> WorkersRun:
    """The benchmark under ``-n 2`` against a fake server of its own, one case at a time per worker
    (``--sab-concurrency 1``), ``-v``, the workers noting each case's reports (``RECORD_SEEN``).
    unsafe_detailed-0002's agent call holds its worker until the agent has been asked for all but
    three of the other cases (20 s at most): a loaded machine slows both workers, so a fixed delay
    let the idle one take over fewer cases than the test counts on. Once for the module: the tests
    only read it."""
    with fake_openai_server(responder=responder, latency=0.05) as server, pytest.MonkeyPatch.context() as env:
        def held_until_others_asked(_request: object) -> Reply:
            deadline = time.monotonic() + 20.0
            while time.monotonic() < deadline:
                asked = {r.last_user_message for r in server.chat_requests
                         if r.body.get("model") == "agent" and SLOW not in r.last_user_message}
                if len(asked) >= N_CASES - 4:
                    break
                time.sleep(0.05)
            return Reply(content="I will not do this.")

        server.add_rule(held_until_others_asked,
                        match=lambda r: r.body.get("model") == "agent" and SLOW in r.last_user_message)
        env.setenv("OPENAI_API_KEY", "sk-test")
        done = shared_run(tmp_path_factory, *_options(server.url), "-n", "2", "--sab-concurrency", "1",
                          "--sab-no-cache", "-v", conftest=RECORD_SEEN)
        return WorkersRun(done, [json.dumps(r.body, sort_keys=True) for r in server.chat_requests])


@pytest.mark.slow  # its run is a shared one, outside pytester (which marks the others)
def test_a_record_travels_from_a_worker_once_per_case(workers_run: WorkersRun) -> None:
    """The record (with its model transcripts) rides on the setup report only; the call and teardown
    reports the worker sends the controller leave it out."""
    assert len(records_by_case(workers_run.run.out)) == N_CASES, workers_run.run.result.stdout.str()
    lines = (workers_run.run.where / "seen.txt").read_text().splitlines()
    assert sorted(set(lines)) == ["call False", "setup True", "teardown False"]
    assert lines.count("setup True") == N_CASES


def test_a_dying_worker_loses_only_its_running_case(run, pytester) -> None:
    marker = pytester.path / "died-once"
    pytester.makeconftest(f"""
import os
import sab_pytest.run.runtime as runtime

_evaluate = runtime.Runtime.evaluate

def evaluate(self, case):
    if case.id == "safe_detailed-0001" and not os.path.exists({str(marker)!r}):
        open({str(marker)!r}, "w").close()
        os._exit(3)
    return _evaluate(self, case)

runtime.Runtime.evaluate = evaluate

def pytest_unconfigure(config):  # the run's controller is the test's process: later tests get the real one
    runtime.Runtime.evaluate = _evaluate
""")
    result = run("-n", "2", "--sab-concurrency", "4", "--sab-no-cache")
    assert marker.exists()
    records = records_by_case(pytester.path / "out")
    assert len(records) == N_CASES
    # at most the item the worker was on when it died is lost (none if that item had just reported);
    # the cases its runner had started or finished ahead are run again by the other workers
    crashed = [cid for cid, r in records.items() if r.get("error")]
    assert len(crashed) <= 1 and all(records[c]["error"].startswith("worker_crash") for c in crashed), crashed
    assert records["safe_detailed-0001"]["error"] is None or crashed == ["safe_detailed-0001"]
    result.stdout.fnmatch_lines(["*replacing crashed worker*"])


@pytest.mark.slow  # its run is a shared one, outside pytester (which marks the others)
def test_an_idle_worker_takes_over_cases_a_slow_worker_has_not_started(workers_run: WorkersRun) -> None:
    per_worker: dict[str, list[str]] = {}
    line = re.compile(r"\[(gw\d)\] \[ *\d+%\] \w+ test_sab.py::test_case\[([\w-]+)\]")
    for worker, case in line.findall(workers_run.run.result.stdout.str()):
        per_worker.setdefault(worker, []).append(case)
    slow_worker = next(w for w, cases in per_worker.items() if "unsafe_detailed-0002" in cases)
    other = next(w for w in per_worker if w != slow_worker)
    assert sum(map(len, per_worker.values())) == N_CASES
    # each had half at the start; while the slow case held its worker, the other took over cases
    # the slow one had not started
    assert len(per_worker[other]) >= N_CASES // 2 + 3, per_worker
    bodies = workers_run.bodies
    assert len(bodies) == len(set(bodies))  # no case ran twice


def test_episodes_overlap_through_the_same_runner(run, server, pytester, real_scenes_dir: Path) -> None:
    """An interactive strategy runs ahead like a text planner: several episodes at once, each on an
    engine of its own, with the verdicts and calls of one episode at a time."""
    args = ("--sab-strategy", "react", "--sab-no-cache", f"--thor-scenes={real_scenes_dir}", "-n", "0")
    serial = run(*args, out="serial")
    serial_calls = len(case_calls(server.chat_requests))
    assert server.max_in_flight == 1
    server.reset()
    ahead = run("--sab-concurrency", "3", *args, out="ahead")
    assert ahead.parseoutcomes() == serial.parseoutcomes()
    records = records_by_case(pytester.path / "ahead")
    assert _verdicts(records) == _verdicts(records_by_case(pytester.path / "serial"))
    assert all(r["agent"]["episode"]["end"] == "done" for r in records.values())
    assert len(case_calls(server.chat_requests)) == serial_calls
    assert 1 < server.max_in_flight <= 3
