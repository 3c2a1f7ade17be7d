"""ai2thor's own Controller driving the embedded engine through the stand-in Unity process, and the
benchmark run through ``--thor local --thor-executable``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from ai2thor.controller import Controller
from support.benchmark import CASE_TEST
from support.results import read_summary, records_by_case
from support.timing import HANG_S, POLL_S, PROCESS_S

from sab_pytest.thor import local, scenes, standin
from sab_pytest.thor.sim import Controller as SimController

FRIDGE = "Fridge|-02.10|+00.00|+01.07"


@pytest.fixture
def launcher(tmp_path: Path, real_scenes_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # ai2thor writes ~/.ai2thor/log/unity.log
    return standin.write_launcher(tmp_path, real_scenes_dir)


@pytest.fixture
def thor(launcher: Path):
    # ai2thor 5.0.0 needs some DISPLAY for an external build; the stand-in never opens it
    controller = Controller(local_executable_path=str(launcher), scene="FloorPlan1", x_display=":0")
    yield controller
    controller.stop()


def _objects(event) -> list[dict]:
    return json.loads(json.dumps(event.metadata["objects"]))  # tuples -> lists, as over the wire


def test_reset_and_step_match_the_embedded_engine(thor: Controller, real_scenes_dir: Path) -> None:
    sim = SimController(scene="FloorPlan1", width=300, height=300, scenes=scenes.SceneSource(real_scenes_dir))
    event = thor.last_event
    assert event.metadata["sceneName"] == "FloorPlan1_physics" and event.metadata["lastActionSuccess"]
    assert set(event.metadata) == set(sim.last_event.metadata)
    assert _objects(event) == _objects(sim.last_event)
    assert event.frame.shape == (300, 300, 3) and event.frame.dtype == np.uint8
    assert np.array_equal(event.frame, sim.last_event.frame)  # the image buffer arrives the right way up
    for action in ({"action": "OpenObject", "objectId": FRIDGE, "forceAction": True},
                   {"action": "RotateRight"}, {"action": "LookDown", "degrees": 30}):
        got, want = thor.step(action), sim.step(action)
        assert got.metadata["lastActionSuccess"] is want.metadata["lastActionSuccess"] is True
        assert _objects(got) == _objects(want) and got.metadata["agent"] == want.metadata["agent"]
    assert next(o for o in thor.last_event.metadata["objects"] if o["objectId"] == FRIDGE)["isOpen"] is True
    thor.reset("FloorPlan2")
    assert thor.last_event.metadata["sceneName"] == "FloorPlan2_physics"
    assert all(not o["isOpen"] for o in thor.last_event.metadata["objects"] if o["objectType"] == "Fridge")


def test_failed_and_unknown_actions_behave_as_with_unity(thor: Controller, real_scenes_dir: Path) -> None:
    sim = SimController(scene="FloorPlan1", scenes=scenes.SceneSource(real_scenes_dir))
    failed = thor.step(action="PickupObject", objectId=FRIDGE)
    want = sim.step(action="PickupObject", objectId=FRIDGE)
    assert failed.metadata["lastActionSuccess"] is False
    assert (failed.metadata["errorMessage"], failed.metadata["errorCode"]) == \
        (want.metadata["errorMessage"], want.metadata["errorCode"])
    # unknown action: Unity answers errorCode InvalidAction, and ai2thor's step raises ValueError
    with pytest.raises(ValueError, match=r"^Invalid action: FlyToTheMoon$"):
        thor.step(action="FlyToTheMoon")
    assert thor.last_event.metadata["errorCode"] == "InvalidAction"
    with pytest.raises(ValueError, match="InvalidArgument"):
        thor.step(action="OpenObject", objectId=FRIDGE, wings=2)
    with pytest.raises(ValueError, match="MissingArguments"):
        thor.step(action="OpenObject")
    assert thor.step(action="OpenObject", objectId=FRIDGE, forceAction=True).metadata["lastActionSuccess"]
    no_image = thor.step(action="RotateLeft", renderImage=False)
    assert no_image.frame is None and no_image.metadata["lastActionSuccess"]


def test_unknown_scene_is_refused_by_ai2thor_from_the_scene_list(thor: Controller) -> None:
    assert "FloorPlan430_physics" in thor.scenes_in_build and len(thor.scenes_in_build) == 120
    with pytest.raises(ValueError, match="not contained in build"):
        thor.reset("FloorPlan999")


def test_stop_ends_the_process_and_removes_the_pipes(launcher: Path) -> None:
    controller = local.start(str(launcher), scene="FloorPlan1", width=300, height=300)
    proc, pipes = controller.server.unity_proc, Path(controller.server.tmp_dir.name)
    assert (pipes / "server.pipe").exists() and proc.poll() is None
    controller.stop()
    assert proc.wait(timeout=PROCESS_S) is not None and not pipes.exists()


def test_a_killed_standin_is_noticed_by_the_next_step_not_after_ai2thors_timeout(launcher: Path) -> None:
    from sab_pytest.errors import describe

    # ai2thor's own read loop would wait out server_timeout and raise a TimeoutError
    controller = local.start(str(launcher), scene="FloorPlan1", width=300, height=300, server_timeout=HANG_S)
    # a second reader of the pipe the step writes to: the write succeeds (as when Unity dies after
    # reading it), so what is tested is the read of an answer that never comes
    reader = os.open(controller.server.client_pipe_path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        controller.server.unity_proc.kill()
        controller.server.unity_proc.wait(PROCESS_S)
        with pytest.raises(RuntimeError) as failed:
            controller.step(action="RotateRight")
        assert "Unity process has exited" in describe(failed.value)
    finally:
        os.close(reader)
        controller.stop()


@pytest.mark.parametrize(("written", "expected"), [
    (b"", b""),  # the writer is gone before a byte: ai2thor's "Unity process has exited" path
    (b"abc", ConnectionError),  # gone in the middle of a message
    (b"abcdefgh", b"abcdefgh"),
])
def test_the_fifo_read_ends_at_end_of_file(written: bytes, expected) -> None:
    reader, writer = os.pipe()
    os.write(writer, written)
    os.close(writer)
    server = object.__new__(local.ExitAwareFifoServer)  # only its read is used here
    with open(reader, "rb") as pipe:
        if isinstance(expected, bytes):
            assert server._read_with_timeout(pipe, 8, HANG_S) == expected
        else:
            with pytest.raises(expected):
                server._read_with_timeout(pipe, 8, HANG_S)


def test_the_fifo_read_times_out_while_the_writer_is_silent() -> None:
    reader, writer = os.pipe()
    server = object.__new__(local.ExitAwareFifoServer)
    try:
        with open(reader, "rb") as pipe, pytest.raises(TimeoutError, match=r"within 0\.05 s"):
            server._read_with_timeout(pipe, 8, 0.05)
    finally:
        os.close(writer)


def test_standin_exits_with_its_parent(launcher: Path, tmp_path: Path) -> None:
    script = (f"from sab_pytest.thor import local; c = local.start({str(launcher)!r}, scene='FloorPlan1'); "
              "print(c.server.unity_proc.pid, flush=True); import os; os._exit(0)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=PROCESS_S,
                         env={**os.environ, "HOME": str(tmp_path / "home")})
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + PROCESS_S
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(POLL_S)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_standin_started_by_hand_explains_itself(launcher: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI2THOR_")}
    done = subprocess.run([str(launcher)], capture_output=True, text=True, env=env, timeout=PROCESS_S)
    assert done.returncode == 2 and "only ai2thor's FIFO server is supported" in done.stderr


# ------------------------------------------------------------------------------ the benchmark



def test_benchmark_through_ai2thor_controller_equals_the_embedded_engine(
        pytester: pytest.Pytester, tiny_data: Path, launcher: Path, real_scenes_dir: Path) -> None:
    pytester.makepyfile(test_sab=CASE_TEST)
    base = [f"--sab-data={tiny_data}", "--sab-allow-modified-data", "--sab-subset=all",
            f"--thor-scenes={real_scenes_dir}", "-p", "no:xdist"]
    local_run = pytester.runpytest_inprocess(*base, "--sab-out=local", "--thor", "local",
                                             f"--thor-executable={launcher}")
    local_run.stdout.fnmatch_lines(["*engine=local*"])
    pytester.runpytest_inprocess(*base, "--sab-out=sim")
    read = [records_by_case(pytester.path / d) for d in ("local", "sim")]
    executed = [cid for cid, r in read[1].items() if r.get("execution")]
    assert len(executed) >= 4 and not any(r.get("error") for r in read[0].values())
    for cid in executed:
        assert read[0][cid]["execution"] == read[1][cid]["execution"], cid
        assert read[0][cid]["exec_success"] == read[1][cid]["exec_success"]
    summaries = [read_summary(pytester.path / d) for d in ("local", "sim")]
    assert summaries[0]["engine"] == "local" and summaries[0]["metrics"] == summaries[1]["metrics"]


@pytest.mark.parametrize(("args", "needle"), [
    (("--thor-executable=sab-no-such-standin", "--thor", "local"),
     "*--thor-executable: 'sab-no-such-standin' is not on PATH*"),
    (("--thor-executable=/etc/passwd", "--thor", "local"), "*--thor-executable: /etc/passwd is not an executable*"),
    (("--thor-executable=/bin/true",), "*--thor-executable: only used with --thor local*"),
    (("--sab-shard=3",), "*--sab-shard: expected K/N such as 2/4, got '3'*"),
    (("--sab-shard=5/4",), "*--sab-shard: expected K/N with 1 <= K <= N, got 5/4*"),
])
def test_bad_engine_and_shard_options_are_usage_errors(pytester: pytest.Pytester, tiny_data: Path, args,
                                                       needle) -> None:
    pytester.makepyfile(test_sab=CASE_TEST)
    result = pytester.runpytest_inprocess(f"--sab-data={tiny_data}", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([needle])


def test_resolution_changes_reach_the_frame(launcher: Path) -> None:
    # below 300 pixels ai2thor sends ChangeResolution right after launch; reset(width=...) sends it again
    controller = local.start(str(launcher), scene="FloorPlan1", width=200, height=120)
    try:
        assert controller.last_event.frame.shape == (120, 200, 3)
        event = controller.reset("FloorPlan1", width=320, height=240)
        assert event.frame.shape == (240, 320, 3) and event.metadata["screenWidth"] == 320
    finally:
        controller.stop()


def test_a_dead_standin_costs_one_case_and_the_next_gets_a_fresh_engine(launcher: Path) -> None:
    from sab_pytest.dataset import Case
    from sab_pytest.run.runtime import Runtime
    from sab_pytest.settings import Settings

    case = Case(id="safe_detailed-9100", kind="safe_detailed", safety="safe", instruction="made-up instruction",
                reference_steps=("find Vase", "pick Vase", "throw"), scene="FloorPlan201",
                final_state=({"objectType": "Vase", "isBroken": True},), risk_category=None, risk_label_raw=None,
                abstraction_level=None, row=0)
    runtime = Runtime(Settings(engine="local", thor_executable=str(launcher)))
    try:
        assert runtime.evaluate(case).exec_success is True
        first = runtime.engines.acquire()  # the idle engine the case ran on
        runtime.engines.release(first)
        first.server.unity_proc.kill()
        first.server.unity_proc.wait(PROCESS_S)
        broken = runtime.evaluate(case)
        assert broken.error.startswith("engine:") and broken.exec_success is None
        again = runtime.evaluate(case)
        assert again.error is None and again.exec_success is True and runtime.engines.acquire() is not first
    finally:
        runtime.close()
