"""A model endpoint that dies, answers garbage or never answers: the preflight catches it before
any case, the breaker stops a run in which it dies (across xdist workers), finished results are
kept and ``--sab-resume`` does only what is missing; Ctrl-C to the controller stops the workers'
calls; the run's files say what kind of run made them. Real openai client, fake server."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.benchmark import RunSetup
from support.calls import case_calls, is_preflight
from support.results import read_records, read_summary
from support.signals import hears_ctrl_c
from support.timing import POLL_S, PROCESS_S
from support.tiny_dataset import N_CASES

from sab_pytest.testing import RecordedRequest, Reply, fake_openai_server

KEY = "sk-test-PLANTED-KEY-0123456789"


class Dies:
    """Answers the preflight and ``healthy`` case calls, then ``broken`` to every call (until healed)."""

    def __init__(self, healthy: int, broken: Reply) -> None:
        self.healthy = healthy
        self.broken = broken
        self.healed = False
        self._lock = threading.Lock()
        self.served = 0

    def __call__(self, request: RecordedRequest) -> Reply | str | None:
        if is_preflight(request) or self.healed:
            return None  # the default answer
        with self._lock:
            self.served += 1
            if self.served <= self.healthy:
                return None
        return self.broken


@pytest.fixture
def run_setup(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> RunSetup:
    """``run(*args, server=server)``: the benchmark on the tiny dataset against ``server`` (agent
    only, rule judge, 1 retry), in this process (under xdist: its controller)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return RunSetup(tuple(_options(pytester.path)))


def _options(root: Path) -> list[str]:
    """Agent ``agent-x`` (1 retry, 2 s a request; its endpoint is the ``server`` a run is given),
    rule judge, a cache of its own."""
    return [f"--sab-cache={root / 'cache'}", "--sab-no-exec", "--model", "agent-x", "--judge-model", "rules",
            "--sab-retries", "1", "--sab-timeout", "2"]


def _case_calls(server) -> list[RecordedRequest]:
    return case_calls(server.chat_requests)


def _wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(POLL_S)
    return False


# -- preflight ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("reply", "needle", "workers"), [
    (Reply.error(500, "internal"), "*answered HTTP 500 to a chat completion for model 'agent-x'*", "2"),
    (Reply(body="garbage, not JSON"), "*with a body that is not a chat completion*", "0"),
    (Reply.slow(20), "*gave no answer to a chat completion for model 'agent-x' within 1s*", "0"),
], ids=["http500", "garbage", "silent"])
def test_dead_endpoint_fails_once_before_any_case(run, reply: Reply, needle: str, workers: str) -> None:
    """Under xdist (``http500``) the check is made in a worker and said once, by the controller."""
    with fake_openai_server(default=reply) as server:
        result = run("-n", workers, "--sab-timeout", "1", server=server)
        url = server.url
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([needle])
    out = result.stdout.str() + result.stderr.str()
    assert url in result.stderr.str() and KEY not in out
    assert out.count("for model 'agent-x'") == 1 and "Traceback" not in out and "INTERNALERROR" not in out
    assert len(server.requests) == 2  # the preflight's two attempts; no case called
    assert not (run.out / "sab-results.jsonl").exists()


#: written into the run's directory: each xdist worker says when it has collected its cases, and the
#: controller whether it imported the model SDK; with SAB_TEST_KILL_CHECKER set, the worker handed
#: the endpoint check dies before it could make it
_SAYS_WHEN_COLLECTED = """
import os
import sys
from pathlib import Path

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    worker = getattr(config, "workerinput", None)
    if worker is not None and worker.get("sab_endpoint_check") and os.environ.get("SAB_TEST_KILL_CHECKER"):
        os._exit(3)


def pytest_collection_finish(session):
    worker = getattr(session.config, "workerinput", None)  # not the environment: a run in this test's
    if worker is not None:                                 # process inherits the suite's own worker's
        (Path(os.environ["SAB_TEST_READY_DIR"]) / worker["workerid"]).touch()


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        Path(os.environ["SAB_TEST_READY_DIR"], "controller-imported-the-sdk").write_text(str("openai" in sys.modules))
"""


class HeldCheck:
    """Holds the endpoint check's answer until ``workers`` xdist workers have collected their
    cases (each leaves a file in ``ready``), then ``hold`` seconds more; other calls are answered
    at once. ``released`` is when the check's answer went out (``time.monotonic``, as the
    server's ``received_at``)."""

    def __init__(self, ready: Path, workers: int, hold: float) -> None:
        self.ready, self.workers, self.hold = ready, workers, hold
        self.released: float | None = None

    def __call__(self, request: RecordedRequest) -> Reply | str | None:
        if not is_preflight(request):
            return None
        _wait_for(lambda: len(list(self.ready.iterdir())) >= self.workers, PROCESS_S)
        time.sleep(self.hold)
        self.released = time.monotonic()
        return None


@pytest.mark.parametrize("workers", [0, 2])
def test_no_case_calls_a_model_before_the_endpoint_check_has_passed(run, pytester: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      workers: int) -> None:
    """The check runs in the background; the first case is scheduled only once it has passed.
    Under xdist the check is held until both workers are ready to run cases, so a worker that did
    not wait for it would call the model first. There the first worker makes the check, since it
    imports the model SDK for its cases anyway: the controller never imports it (1.7 s of CPU)."""
    ready = pytester.mkdir("ready")
    monkeypatch.setenv("SAB_TEST_READY_DIR", str(ready))
    pytester.makeconftest(_SAYS_WHEN_COLLECTED)
    held = HeldCheck(ready, workers, hold=0.5 if workers else 1.5)
    with fake_openai_server(responder=held) as server:
        # under xdist in a process of its own, whose controller's imports are read; without, the cases
        # import the SDK in the run's one process, so this process (which has it) serves as well
        result = run("-n", str(workers), server=server, inprocess=not workers)
        preflight = [r for r in server.chat_requests if is_preflight(r)]
        cases = _case_calls(server)
    assert result.ret == pytest.ExitCode.TESTS_FAILED and len(preflight) == 1 and cases
    assert len(list(ready.iterdir())) == workers + 1  # the workers were ready while the check was held
    assert held.released is not None and min(r.received_at for r in cases) >= held.released
    assert (ready / "controller-imported-the-sdk").read_text() == str(workers == 0)


def test_when_the_worker_making_the_endpoint_check_dies_the_controller_makes_it(
        run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under xdist the first worker makes the check; when it dies before its verdict, the
    controller makes the check itself, still once and before any case, and the run goes on with
    the worker xdist starts in its place."""
    ready = pytester.mkdir("ready")
    monkeypatch.setenv("SAB_TEST_READY_DIR", str(ready))
    monkeypatch.setenv("SAB_TEST_KILL_CHECKER", "1")
    pytester.makeconftest(_SAYS_WHEN_COLLECTED)
    with fake_openai_server() as server:
        # its only worker: the cases wait for the one in its place; a controller of its own, whose imports are read
        result = run("-n", "1", server=server, inprocess=False)
        requests = sorted(server.chat_requests, key=lambda r: r.received_at)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*replacing crashed worker gw0*"])
    assert [is_preflight(r) for r in requests].count(True) == 1 and is_preflight(requests[0])
    assert read_summary(run.out)["run"]["finished"] == N_CASES
    assert (ready / "controller-imported-the-sdk").read_text() == "True"


def test_healthy_run_pays_one_preflight_per_endpoint(sab_run, pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai_server() as server:
        options = _options(pytester.path)
        options[options.index("rules")] = "judge-x"  # the judge on the same endpoint and key
        sab_run(*options)("-k", "unsafe_detailed-0000", server=server)
    assert [is_preflight(r) for r in server.chat_requests].count(True) == 1
    assert [r.body["model"] for r in server.chat_requests if is_preflight(r)] == ["agent-x"]


# -- the breaker ---------------------------------------------------------------------------------------

def test_breaker_stops_a_run_whose_endpoint_dies_and_resume_does_the_rest(run) -> None:
    dies = Dies(healthy=4, broken=Reply.error(500, "backend down"))
    with fake_openai_server(responder=dies) as server:
        result = run("-n", "2", "--sab-max-failures", "3", server=server)
        stopped_calls = len(_case_calls(server))

        summary = read_summary(run.out)
        records = read_records(run.out)
        run_info = summary["run"]
        assert result.ret == pytest.ExitCode.INTERRUPTED
        assert run_info["status"] == "stopped" and run_info["stop_reason"] == "endpoint_down"
        # the third failure in a row trips it; with two workers the other one's call may fail first in
        # the race to write the stop, and the message counts what the writer saw
        failed = re.search(r"failed (\d+) calls in a row", run_info["stop_message"])
        assert failed is not None and failed.group(1) in ("3", "4"), run_info["stop_message"]
        assert run_info["not_run"] > 0 and run_info["finished"] == len(records) == summary["cases"]
        assert run_info["finished"] + run_info["not_run"] == N_CASES
        assert sum(1 for r in records if not r["error"]) == 4  # what finished before the death is kept
        assert summary["error_kinds"] == {"model_api": summary["errors"]} and summary["errors"] >= 3
        # each failed attempt is a request in the usage; the first failing calls were retried once
        assert summary["usage"]["failed_calls"] >= 3 + 1 and summary["usage"]["api_calls"] >= 4 + 3 + 1
        result.stdout.fnmatch_lines([f"*run STOPPED: the model endpoint failed {failed.group(1)} calls in a row*; "
                                     f"{run_info['finished']} of {N_CASES} cases finished (4 with a verdict, "
                                     f"{summary['errors']} errors), {run_info['not_run']} not run*",
                                     "*model calls: 4 (0 from cache, * failed requests)*",
                                     f"{run_info['not_run']} case(s) not run, and {summary['errors']} error(s): run "
                                     f"the same command with --sab-resume to redo those {N_CASES - 4} "
                                     "(4 verdict(s) are reused)"])
        # the plugin's own closing line, the last one, and no banner of pytest's interruption
        assert result.stdout.str().count("sab: exit status 2: the model endpoint failed") == 1
        assert result.stdout.lines[-1].startswith("sab: exit status 2: the model endpoint failed")
        assert "--sab-resume runs the rest" in result.stdout.lines[-1]
        assert "Interrupted" not in result.stdout.str() and "!!!" not in result.stdout.str()
        assert stopped_calls <= 4 + 2 * 4  # each worker stops within its current case

        dies.healed = True
        server.reset()
        again = run("-n", "0", "--sab-resume", server=server)  # the stop was across workers; resuming is not
        redo = len(_case_calls(server))
    assert redo == N_CASES - 4  # only the cases without a verdict are asked again, as the note said
    assert again.ret == pytest.ExitCode.TESTS_FAILED
    final = read_records(run.out)
    assert len(final) == N_CASES and len({r["case"]["id"] for r in final}) == N_CASES
    resumed = read_summary(run.out)["run"]
    assert resumed["status"] == "resumed" and resumed["reused"] == 4 and resumed["not_run"] == 0
    errors = read_summary(run.out)["errors"]
    again.stdout.fnmatch_lines([f"*run RESUMED; {N_CASES} of {N_CASES} cases finished ({N_CASES - errors} with a "
                                f"verdict, {errors} error*), 4 reused*"])


@pytest.mark.parametrize("broken", [Reply(body="<html>oops</html>"), Reply.slow(20), Reply.dropped()],
                         ids=["garbage", "silent", "dropped"])
def test_breaker_stops_a_run_without_xdist(run, broken: Reply) -> None:
    with fake_openai_server(responder=Dies(healthy=2, broken=broken)) as server:
        result = run("-n", "0", "--sab-max-failures", "2", "--sab-retries", "0", "--sab-timeout", "0.5", server=server)
        calls = len(_case_calls(server))
    run_info = read_summary(run.out)["run"]
    assert result.ret == pytest.ExitCode.INTERRUPTED and calls == 2 + 2
    assert run_info["status"] == "stopped" and run_info["finished"] == 4 and run_info["not_run"] == N_CASES - 4
    assert sum(1 for r in read_records(run.out) if not r["error"]) == 2
    result.stdout.fnmatch_lines(["*1 skipped*", "sab: exit status 2: the model endpoint failed 2 calls*"])
    assert "Interrupted" not in result.stdout.str() and "!!!" not in result.stdout.str()


def test_breaker_off_with_zero(run) -> None:
    with fake_openai_server(responder=Dies(healthy=0, broken=Reply.error(500))) as server:
        result = run("--sab-max-failures", "0", "--sab-retries", "0", "--sab-subset=unsafe", server=server)
    summary = read_summary(run.out)
    assert summary["run"]["status"] == "complete" and summary["errors"] == summary["cases"] > 10
    assert result.ret == pytest.ExitCode.TESTS_FAILED


# -- resume and selection ----------------------------------------------------------------------------

def test_resume_with_other_settings_refuses_naming_what_differs(run) -> None:
    with fake_openai_server() as server:
        run("-k", "safe_detailed", server=server)
        before = (run.out / "sab-results.jsonl").read_text()
        result = run("--sab-resume", "--sab-temperature", "0.7", "--model", "agent-y", server=server)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--sab-resume:*sab-results.jsonl holds results made with other settings "
                                 "(model: 'agent-x' there, 'agent-y' now; temperature: 0.0 there, 0.7 now)*"])
    assert (run.out / "sab-results.jsonl").read_text() == before


def refuse_throwing(request: RecordedRequest) -> str | None:
    """The agent refuses the one task that throws something and plans every other (so that all but that one
    case fail under the rule judge)."""
    if is_preflight(request):
        return None
    return "I will not do that." if "Throw" in request.last_user_message else "find Apple\npick Apple"


def test_a_rerun_is_marked_as_one(run) -> None:
    with fake_openai_server(responder=refuse_throwing) as server:
        run(server=server)
        assert read_summary(run.out)["run"]["status"] == "complete"
        result = run("--lf", server=server)
    run_info = read_summary(run.out)["run"]
    assert run_info["status"] == "rerun" and run_info["partial_selection"] is True
    assert run_info["full_selection"] == N_CASES and run_info["selected"] == N_CASES - 1
    result.stdout.fnmatch_lines([f"*RERUN of {run_info['selected']} of the {N_CASES} cases*"])


def test_a_rerun_with_resume_merges_into_the_earlier_results(run) -> None:
    with fake_openai_server(responder=refuse_throwing) as server:
        run(server=server)
        result = run("--lf", "--sab-resume", server=server)
    summary = read_summary(run.out)
    assert summary["cases"] == N_CASES and len(read_records(run.out)) == N_CASES
    assert summary["run"]["status"] == "rerun" and summary["run"]["merged"] == 1
    assert summary["metrics"]["rejection_rate"]["k"] == 1  # the passed case, not rerun, still counts
    result.stdout.fnmatch_lines([f"*RERUN of {N_CASES - 1} of the {N_CASES} cases, merged with 1 earlier*"])


def test_output_files_get_the_usual_permissions(run) -> None:
    old = os.umask(0o022)
    try:
        with fake_openai_server() as server:
            run("-k", "unsafe_detailed-0000", server=server)
    finally:
        os.umask(old)
    for name in ("sab-results.jsonl", "sab-summary.json"):
        assert (run.out / name).stat().st_mode & 0o777 == 0o644, name


# -- Ctrl-C to the controller alone -----------------------------------------------------------------

@pytest.mark.parametrize(("stop", "workers"), [(signal.SIGINT, "2"), (signal.SIGTERM, "1")], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_to_the_controller_stops_the_workers_calls(sab_run, pytester: pytest.Pytester, stop: int,
                                                          workers: str) -> None:
    """Ctrl-C, or the SIGTERM a CI system sends a cancelled job: the same clean stop. Both reach the
    workers the same way, so the second is shown with one worker (each worker starts the model SDK:
    seconds of CPU)."""
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    with fake_openai_server(latency=0.25) as server:
        bench = sab_run(*_options(pytester.path))
        out = bench.out
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", workers, *bench.args(server=server),
                   "--sab-timeout", "5"]
        proc = subprocess.Popen(command, cwd=pytester.path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=hears_ctrl_c)
        try:
            results = out / "sab-results.jsonl"
            got_going = _wait_for(lambda: len(_case_calls(server)) >= 4 and results.exists() and results.stat().st_size,
                                  PROCESS_S)
            assert got_going, "the run never got going"
            os.kill(proc.pid, stop)  # the controller only, not its process group
            signalled = time.monotonic()
            output, _ = proc.communicate(timeout=PROCESS_S)
        finally:
            if proc.poll() is None:
                proc.kill()
        late = [r for r in _case_calls(server) if r.received_at > signalled + 1.0]
    text = output.decode(errors="replace")
    assert late == [], text  # calls in flight may finish, and one may start before the stop is written
    assert proc.returncode == pytest.ExitCode.INTERRUPTED
    assert "--sab-resume" in text
    summary = read_summary(out)
    assert summary["run"]["status"] == "interrupted" and summary["run"]["not_run"] > 0
    assert len(read_records(out)) == summary["run"]["finished"] > 0  # what finished is kept
