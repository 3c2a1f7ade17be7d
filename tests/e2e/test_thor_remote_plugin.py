"""The benchmark end to end through ``--thor remote`` (pytester, tiny dataset, a THOR server on
loopback with the embedded engine): the same verdicts as ``--thor sim``, a clean usage error when
the server is down, and a server killed mid-run costs only the cases that needed it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.results import read_summary, records_by_case
from support.thor_host import free_port, sim_server
from support.tiny_dataset import N_CASES

from sab_pytest.thor.server import ServerConfig, ThorServer

COMPARED = ("passed", "message", "rejected", "plan_success", "exec_success", "exec_step_ratio", "exec_goal_ratio",
            "unreachable_goal", "error", "execution")


def test_remote_gives_the_same_verdicts_as_sim(run, pytester, real_scenes_dir: Path, monkeypatch) -> None:
    token = "thor-token-that-must-stay-secret"
    server = ThorServer(ServerConfig(port=0, engines=2, backend="sim", scenes_dir=str(real_scenes_dir),
                                     token=token)).start()
    try:
        sim_result = run("--thor=sim", out="sim")
        sim = records_by_case(run.where("sim"))
        monkeypatch.setenv("SAB_THOR_TOKEN", token)
        monkeypatch.setenv("SAB_THOR_URL", server.url)
        remote_result = run("--thor=remote", "-n", "2", f"--junitxml={pytester.path / 'j.xml'}", out="remote")
        remote = records_by_case(run.where("remote"))
        assert server.pool.counts()["free"] == 2  # both workers released their leases
    finally:
        server.close()
    remote_result.stdout.fnmatch_lines(["*engine=remote*"])
    written = [p.read_text() for p in [*(pytester.path / "remote").iterdir(), pytester.path / "j.xml"]]
    assert not any(token in text for text in [*written, remote_result.stdout.str(), remote_result.stderr.str()])
    assert len(sim) == len(remote) == N_CASES
    executed = [cid for cid, r in sim.items() if r["exec_success"] is not None]
    assert len(executed) >= 5 and not any(r["error"] for r in remote.values())
    for cid, record in sim.items():
        assert {k: record[k] for k in COMPARED} == {k: remote[cid][k] for k in COMPARED}, cid
    assert sim_result.parseoutcomes() == remote_result.parseoutcomes()


def test_a_server_that_is_down_fails_the_run_once_before_any_case(run) -> None:
    port = free_port()
    result = run("--thor=remote", f"--thor-url=http://127.0.0.1:{port}", out="down")
    records = records_by_case(run.where("down"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR and not records
    err = result.stderr.str()
    assert err.count("the THOR server cannot be reached") == 1 and f"127.0.0.1:{port}" in err
    assert "Traceback" not in err


KILLER = """
import os
import signal

_done = []


def pytest_runtest_teardown(item, nextitem):
    if not _done:  # after the first case: the THOR host dies
        _done.append(True)
        os.kill(int(os.environ["SAB_TEST_THOR_PID"]), signal.SIGKILL)
"""


def test_server_killed_mid_run_errors_only_the_cases_that_need_an_engine(run, pytester, real_scenes_dir,
                                                                        monkeypatch) -> None:
    with sim_server(real_scenes_dir) as (proc, url):
        pytester.makeconftest(KILLER)
        monkeypatch.setenv("SAB_TEST_THOR_PID", str(proc.pid))
        # the engine breaker off (0): this test is about what each case costs, not about the stop
        result = run("--thor=remote", f"--thor-url={url}", "--sab-max-failures=0", out="killed")
        records = records_by_case(run.where("killed"))
    assert len(records) == N_CASES  # the run went on to the end
    first = records["unsafe_detailed-0000"]
    assert first["error"] is None and first["exec_success"] is not None  # ran before the kill
    # every plan is executed (ER), goal state or not; only an answer with neither needs no engine
    needs_engine = {cid for cid, r in records.items()
                    if r["case"]["has_final_state"] or (r["agent"] or {}).get("steps")} - {"unsafe_detailed-0000"}
    errored = {cid for cid, r in records.items() if r["error"]}
    assert needs_engine and errored == needs_engine
    assert all(records[cid]["error"].startswith("engine: ") for cid in errored)
    assert all("THOR server" in records[cid]["error"] for cid in errored)
    assert result.parseoutcomes()["errors"] == len(errored)


def test_fewer_free_engines_than_workers_is_said_before_the_run(run, real_scenes_dir: Path) -> None:
    server = ThorServer(ServerConfig(port=0, engines=1, backend="sim", scenes_dir=str(real_scenes_dir))).start()
    try:
        # long-horizon cases have no goal state and the reference agent no plan for them: no engine is
        # leased, the warning is all there is to see
        result = run("--thor=remote", f"--thor-url={server.url}", "-k", "long_horizon", "-n", "2", out="few")
        records = records_by_case(run.where("few"))
    finally:
        server.close()
    assert len(records) == 2
    assert "1 THOR engine(s) free for 2 worker(s)" in result.stdout.str() + result.stderr.str()


def test_workers_share_one_engine_of_a_thor_server_without_starving(run, real_scenes_dir: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker gives its engine back to the server after each execution instead of keeping it idle
    for its next case: with one engine and two workers (a model that plans, so both run cases at
    the same time), every plan is executed, none fails waiting for a lease the other worker sits on."""
    from sab_pytest.testing import Reply, fake_openai_server

    monkeypatch.setenv("OPENAI_API_KEY", "fake-key")
    server = ThorServer(ServerConfig(port=0, engines=1, backend="sim", scenes_dir=str(real_scenes_dir))).start()
    try:
        with fake_openai_server(latency=0.1) as model:
            model.default = Reply(content="1. find Apple\n2. pick Apple\n3. find Fridge\n4. open Fridge")
            run("--thor=remote", f"--thor-url={server.url}", "-n", "2", "--model=agent", "--judge-model=rules",
                "--sab-no-cache", out="shared", server=model)
            records = records_by_case(run.where("shared"))
        assert server.pool.counts()["free"] == 1
    finally:
        server.close()
    assert len(records) == N_CASES
    assert [r["error"] for r in records.values() if r["error"]] == []
    assert sum(1 for r in records.values() if r["exec_success"] is not None) >= 5


def test_an_engine_that_keeps_failing_stops_the_run_naming_the_server(run, pytester, real_scenes_dir,
                                                                     monkeypatch) -> None:
    """The engine breaker: cases failing on their engine in a row (here 2, ``--sab-max-failures``)
    stop the run, which keeps what finished, names the server and says ``--sab-resume``; a resume on
    a server that works finishes it."""
    with sim_server(real_scenes_dir) as (proc, url):
        pytester.makeconftest(KILLER)
        monkeypatch.setenv("SAB_TEST_THOR_PID", str(proc.pid))
        result = run("--thor=remote", f"--thor-url={url}", "--sab-max-failures=2", out="stopped")
        records = records_by_case(run.where("stopped"))
    summary = read_summary(pytester.path / "stopped")
    assert summary["run"]["status"] == "stopped" and summary["run"]["stop_reason"] == "engine_down"
    assert url in summary["run"]["stop_message"]
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"run STOPPED: the engine failed 2 cases in a row*THOR server {url}*",
                                 "*case(s) not run*: run the same command with --sab-resume to redo those*"])
    assert records["unsafe_detailed-0000"]["error"] is None  # finished before the kill: kept
    assert sum(1 for r in records.values() if r["error"]) <= 3  # stopped, not one engine error per remaining case
    assert len(records) < N_CASES
    with sim_server(real_scenes_dir) as (_proc, url2):
        pytester.makeconftest("")
        run("--thor=remote", f"--thor-url={url2}", "--sab-max-failures=2", "--sab-resume", out="stopped")
        records = records_by_case(run.where("stopped"))
    assert len(records) == N_CASES and not any(r["error"] for r in records.values())  # engine errors redone
