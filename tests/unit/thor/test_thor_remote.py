"""The THOR server and its client on loopback, with the embedded engine as the server's backend:
leases, exclusive engines, tokens, reclaimed leases, crashes, retries, frames, and the same
metadata as a local engine."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.thor_host import free_port
from support.timing import HANG_S, POLL_S

from sab_pytest.errors import InfraError, UsageError
from sab_pytest.run.preflight import check_engines
from sab_pytest.run.validate import validate
from sab_pytest.settings import Settings
from sab_pytest.thor import FRAME_SIZE, Engine
from sab_pytest.thor.remote import RemoteEngine, _Http, health, parse_urls
from sab_pytest.thor.server import ServerConfig, ThorServer, check_bind, main
from sab_pytest.thor.sim import Controller


@pytest.fixture
def start(real_scenes_dir: Path):
    servers: list[ThorServer] = []

    def _start(**kw) -> ThorServer:
        config = ServerConfig(port=0, backend="sim", scenes_dir=str(real_scenes_dir), **kw)
        server = ThorServer(config).start()
        servers.append(server)
        return server

    yield _start
    for server in servers:
        server.close()


@pytest.fixture
def engines():
    made: list[RemoteEngine] = []

    def _make(url: str, **kw) -> RemoteEngine:
        engine = RemoteEngine(url, **kw)
        made.append(engine)
        return engine

    yield _make
    for engine in made:
        engine.stop()


def _raw(url: str, method: str, path: str, body=None, token: str | None = None) -> tuple[int, dict]:
    status, data = _Http(url, token, 10).once(method, path, body)
    return status, json.loads(data)


def test_remote_engine_gives_the_same_events_as_a_local_engine(start, engines) -> None:
    server = start(engines=1)
    remote = engines(server.url)
    local = Controller(width=FRAME_SIZE, height=FRAME_SIZE)
    assert isinstance(remote, Engine)
    assert dict(remote.reset("FloorPlan1").metadata) == dict(local.reset("FloorPlan1").metadata)
    knife = next(o["objectId"] for o in local.last_event.metadata["objects"] if o["objectType"] == "Knife")
    tomato = next(o["objectId"] for o in local.last_event.metadata["objects"] if o["objectType"] == "Tomato")
    plan = [dict(action="RotateRight"), dict(action="PickupObject", objectId=knife, forceAction=True),
            dict(action="SliceObject", objectId=tomato, forceAction=True),  # creates objects
            dict(action="LookDown", degrees=30), dict(action="DropHandObject", forceAction=True),
            dict(action="GetReachablePositions")]
    for args in plan:
        a, b = remote.step(**args), local.step(**args)
        assert dict(a.metadata) == dict(b.metadata), args["action"]
    assert any(o["objectType"] == "TomatoSliced" for o in remote.last_event.metadata["objects"])
    # the dict form and keyword arguments are merged as ai2thor does
    assert remote.step({"action": "RotateLeft"}).metadata["lastAction"] == "RotateLeft"


def test_unknown_action_or_argument_raises_value_error_and_changes_nothing(start, engines) -> None:
    remote = engines(start().url)
    before = remote.reset("FloorPlan1").metadata["objects"]
    with pytest.raises(ValueError, match="Fly"):
        remote.step(action="Fly")
    with pytest.raises(ValueError, match="wings"):
        remote.step(action="RotateRight", wings=2)
    after = remote.step(action="RotateRight")  # the episode goes on
    assert after.metadata["lastActionSuccess"] and len(after.metadata["objects"]) == len(before)
    with pytest.raises(RuntimeError):
        remote.step(action="PickupObject", objectId="Nothing|1|2|3", raise_for_failure=True)


def test_frame_round_trip_and_a_stale_frame_is_refused(start, engines) -> None:
    remote = engines(start().url)
    local = Controller(width=FRAME_SIZE, height=FRAME_SIZE)
    remote.reset("FloorPlan201")
    local.reset("FloorPlan201")
    old = remote.step(action="RotateRight")
    local.step(action="RotateRight")
    frame = old.frame
    assert frame.shape == (FRAME_SIZE, FRAME_SIZE, 3) and frame.dtype == np.uint8
    assert np.array_equal(frame, local.last_event.frame) and frame.any()
    unseen = remote.step(action="RotateRight")
    remote.step(action="RotateRight")
    with pytest.raises(InfraError, match="frame of event"):
        _ = unseen.frame  # never read while it was the last event: the server no longer has it


def test_health_lease_and_release(start) -> None:
    server = start(engines=2)
    status, info = _raw(server.url, "GET", "/health")
    assert status == 200 and (info["engines"], info["free"], info["backend"]) == (2, 2, "sim")
    status, lease = _raw(server.url, "POST", "/leases", {"client": "t"})
    assert status == 201 and _raw(server.url, "GET", "/health")[1]["free"] == 1
    # a leased engine refuses to step before a reset: it may hold another client's old scene
    status, err = _raw(server.url, "POST", f"/leases/{lease['lease']}/step", {"seq": 1, "action": {"action": "Pass"}})
    assert status == 409 and "reset" in err["error"]["message"]
    assert _raw(server.url, "DELETE", f"/leases/{lease['lease']}")[0] == 200
    assert _raw(server.url, "GET", "/health")[1]["free"] == 2
    status, err = _raw(server.url, "POST", f"/leases/{lease['lease']}/reset", {"seq": 1, "scene": "FloorPlan1"})
    assert status == 404 and err["error"]["type"] == "unknown_lease"


def test_n_plus_one_clients_the_last_gets_a_clear_no_free_engine(start, engines) -> None:
    server = start(engines=2)
    a, b = engines(server.url), engines(server.url)
    status, err = _raw(server.url, "POST", "/leases", {})
    assert status == 503 and err["error"]["type"] == "no_free_engine" and "2 of 2 leased" in err["error"]["message"]
    with pytest.raises(InfraError, match="no free engine") as info:
        engines(server.url, lease_wait=0.3)
    assert info.value.kind == "engine"  # after its own wait (0.3 s), not the default minute
    # a waiting client gets the engine as soon as one is released
    threading.Timer(0.3, a.stop).start()
    c = engines(server.url, lease_wait=10)
    assert c.reset("FloorPlan1").metadata["sceneName"] == "FloorPlan1_physics"
    assert b.url == c.url


def test_two_clients_never_share_an_engine_even_when_interleaved(start, engines) -> None:
    server = start(engines=2)
    clients = {"FloorPlan1": engines(server.url), "FloorPlan301": engines(server.url)}
    assert len({id(server.pool.leases[c._lease].slot) for c in clients.values()}) == 2
    seen: dict[str, set[str]] = {scene: set() for scene in clients}
    errors: list[BaseException] = []

    def drive(scene: str, engine: RemoteEngine) -> None:
        try:
            for _ in range(15):
                engine.reset(scene)
                for _ in range(3):
                    seen[scene].add(engine.step(action="RotateRight").metadata["sceneName"])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=drive, args=item) for item in clients.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert seen == {"FloorPlan1": {"FloorPlan1_physics"}, "FloorPlan301": {"FloorPlan301_physics"}}


def test_token_required_and_refused_when_wrong(start, engines) -> None:
    server = start(token="s3cret-token")
    assert _raw(server.url, "GET", "/health")[0] == 200  # for container health checks
    assert _raw(server.url, "POST", "/leases", {})[0] == 401
    assert _raw(server.url, "POST", "/leases", {}, token="wrong")[0] == 401
    assert _raw(server.url, "GET", "/health", token="wrong")[0] == 401
    with pytest.raises(UsageError, match="requires a token"):
        health(server.url, None)
    with pytest.raises(UsageError, match="refused the token"):
        health(server.url, "wrong")
    engine = engines(server.url, token="s3cret-token")
    assert engine.reset("FloorPlan1").metadata["objects"]


def test_binding_beyond_loopback_needs_a_token(real_scenes_dir: Path, capsys) -> None:
    with pytest.raises(UsageError, match="needs a token"):
        check_bind("0.0.0.0", None)
    with pytest.raises(UsageError, match="needs a token"):
        check_bind("gpu-host.example", "")
    check_bind("0.0.0.0", "t")  # allowed with a token
    check_bind("127.0.0.2", None)
    check_bind("::1", None)
    assert main(["--backend", "sim", "--host", "0.0.0.0", "--port", "0", "--thor-scenes", str(real_scenes_dir)]) == 2
    assert "needs a token" in capsys.readouterr().err


def test_a_silent_client_loses_its_lease_and_a_heartbeat_keeps_it(start, engines) -> None:
    server = start(engines=1, ttl=0.4)
    status, lease = _raw(server.url, "POST", "/leases", {"client": "vanishes"})
    assert status == 201
    deadline = time.monotonic() + HANG_S
    while _raw(server.url, "GET", "/health")[1]["free"] == 0 and time.monotonic() < deadline:
        time.sleep(POLL_S)
    assert _raw(server.url, "GET", "/health")[1]["free"] == 1  # reclaimed by the reaper
    assert _raw(server.url, "POST", f"/leases/{lease['lease']}/heartbeat")[0] == 404
    engine = engines(server.url)  # heartbeats while idle, longer than the TTL
    engine.reset("FloorPlan1")
    time.sleep(0.8)  # two TTLs: a lease without heartbeats would be reclaimed by now
    assert engine.step(action="RotateRight").metadata["lastActionSuccess"]


def test_a_crashed_engine_is_restarted_and_its_holder_told(start, engines) -> None:
    server = start(engines=1)
    engine = engines(server.url)
    engine.reset("FloorPlan1")
    slot = server.pool.slots[0]
    dying = slot.engine

    def crash(*args, **kwargs):
        raise BrokenPipeError("Unity process exited")

    dying.step = crash
    with pytest.raises(InfraError, match="restarted") as info:
        engine.step(action="RotateRight")
    assert info.value.kind == "engine" and slot.engine is not dying and slot.restarts == 1
    with pytest.raises(InfraError, match="episode is lost"):
        engine.step(action="RotateRight")  # never a silent answer from the fresh engine
    assert engine.reset("FloorPlan1").metadata["objects"]  # the next case goes on
    assert engine.step(action="RotateRight").metadata["lastActionSuccess"]


def _kill_unity(slot) -> Any:
    """Give the engine in ``slot`` a Unity process that has exited with status 3, as ai2thor's
    Controller keeps it (``server.unity_proc``); returns that engine."""
    import subprocess
    import sys
    from types import SimpleNamespace

    dead = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    dead.wait()
    slot.engine.server = SimpleNamespace(unity_proc=dead)
    return slot.engine


def test_an_idle_engine_whose_process_died_is_restarted_by_the_reaper(start, engines) -> None:
    server = start(engines=1, ttl=0.4)  # the reaper looks every 0.1 s
    engine = engines(server.url)
    engine.reset("FloorPlan1")
    slot = server.pool.slots[0]
    first = _kill_unity(slot)
    deadline = time.monotonic() + HANG_S
    while slot.engine is first and time.monotonic() < deadline:
        time.sleep(POLL_S)
    assert slot.engine is not first and slot.restarts == 1
    with pytest.raises(InfraError, match="exited with status 3"):
        engine.step(action="RotateRight")
    assert engine.reset("FloorPlan1").metadata["objects"]


def _alter_events(slot, change) -> Callable[..., Any]:
    """Make the server's engine in ``slot`` pass each event through ``change`` (a misbehaving
    engine); returns its own ``step``, to put back."""
    real_step = slot.engine.step

    def altered(*args, **kwargs):
        event = real_step(*args, **kwargs)
        change(event.metadata)
        return event

    slot.engine.step = altered
    return real_step


def test_an_event_without_objects_is_an_error_not_a_silent_zero(start, engines) -> None:
    server = start(engines=1)
    engine = engines(server.url)
    engine.reset("FloorPlan1")
    _alter_events(server.pool.slots[0], lambda metadata: metadata.update(objects=[]))
    with pytest.raises(InfraError, match="no objects"):
        engine.step(action="RotateRight")


def test_an_event_that_is_not_json_loses_the_episode_not_the_engine(start, engines) -> None:
    server = start(engines=1)
    engine = engines(server.url)
    engine.reset("FloorPlan1")
    slot = server.pool.slots[0]
    real_step = _alter_events(slot, lambda metadata: metadata.update(actionReturn={1j}))  # nothing JSON can carry
    with pytest.raises(InfraError, match="could not be encoded"):
        engine.step(action="RotateRight")
    slot.engine.step = real_step
    with pytest.raises(InfraError, match="reset"):
        engine.step(action="RotateRight")  # not a second run of an action whose answer was never sent
    assert slot.restarts == 0 and engine.reset("FloorPlan1").metadata["objects"]
    assert engine.step(action="RotateRight").metadata["lastActionSuccess"]


def test_a_step_whose_answer_was_lost_is_not_run_twice(start, engines, monkeypatch) -> None:
    server = start(engines=1)
    engine = engines(server.url)
    start_x = engine.reset("FloorPlan1").metadata["agent"]["position"]
    local = Controller(width=FRAME_SIZE, height=FRAME_SIZE)
    local.reset("FloorPlan1")
    once = _Http.once
    dropped: list[str] = []

    def lose_first_step_answer(self, method, path, body=None):
        answer = once(self, method, path, body)
        if path.endswith("/step") and not dropped:
            dropped.append(path)
            self.close()
            raise ConnectionResetError("connection dropped before the answer arrived")
        return answer

    monkeypatch.setattr(_Http, "once", lose_first_step_answer)
    event = engine.step(action="MoveAhead")
    moved = local.step(action="MoveAhead").metadata["agent"]["position"]
    assert dropped and event.metadata["agent"]["position"] == moved
    assert event.metadata["agent"]["position"] != start_x
    # the server answered the repeat from its record: the world moved once
    _, meta = _raw(server.url, "GET", f"/leases/{engine._lease}/metadata")
    assert meta["metadata"]["agent"]["position"] == event.metadata["agent"]["position"]


def test_server_restart_between_cases_leases_again(start, engines, real_scenes_dir: Path) -> None:
    server = start(engines=1)
    engine = engines(server.url)
    engine.reset("FloorPlan1")
    server.pool.release(engine._lease)  # what a restarted server or a reclaimed lease looks like
    with pytest.raises(InfraError, match="lost this engine's lease"):
        engine.step(action="RotateRight")  # mid-episode: cannot be repaired
    assert engine.reset("FloorPlan1").metadata["objects"]  # a reset is: it leases again
    assert engine.step(action="RotateRight").metadata["lastActionSuccess"]


def test_pool_spreads_over_urls_by_free_capacity(start, engines) -> None:
    small, big = start(engines=1), start(engines=2)
    urls = f"{small.url},{big.url}"
    first = engines(urls)
    assert first.url == big.url  # 2 free beats 1 free
    second, third = engines(urls), engines(urls)
    assert sorted([first.url, second.url, third.url]) == sorted([small.url, big.url, big.url])


def test_urls_and_settings_are_checked() -> None:
    assert parse_urls("127.0.0.1:9100, http://h:1/") == ["http://127.0.0.1:9100", "http://h:1"]
    for bad in ("ftp://h:1", "http://h:1/api", "http://h:notaport", " , "):
        with pytest.raises(UsageError, match="--thor-url"):
            parse_urls(bad)
    with pytest.raises(UsageError, match="--thor remote needs --thor-url"):
        validate(Settings(engine="remote"))
    with pytest.raises(UsageError, match="--thor-url"):
        validate(Settings(engine="remote", thor_url="gopher://x"))
    validate(Settings(engine="remote", thor_url="http://127.0.0.1:9100"))


def test_preflight_fails_once_clearly_when_the_server_is_down() -> None:
    port = free_port()
    with pytest.raises(UsageError, match=f"127.0.0.1:{port}: the THOR server cannot be reached"):
        check_engines(Settings(engine="remote", thor_url=f"http://127.0.0.1:{port}"))
    assert check_engines(Settings(engine="sim")) is None  # nothing to check


def test_http_errors_are_json_and_bad_bodies_refused(start) -> None:
    server = start()
    lease = _raw(server.url, "POST", "/leases", {})[1]["lease"]
    conn = http.client.HTTPConnection("127.0.0.1", server.http.effective_port, timeout=HANG_S)
    conn.request("POST", f"/leases/{lease}/reset", body=b"{not json")
    response = conn.getresponse()
    assert response.status == 400 and json.loads(response.read())["error"]["type"] == "bad_request"
    conn.request("GET", "/nowhere")
    response = conn.getresponse()
    assert response.status == 404 and "error" in json.loads(response.read())
    conn.close()


def test_a_case_whose_engine_cannot_be_leased_errors_as_engine(start, real_scenes_dir: Path, monkeypatch) -> None:
    from sab_pytest.dataset import Case
    from sab_pytest.run.runtime import Runtime

    server = start(engines=1)
    holder = RemoteEngine(server.url)  # the only engine is taken
    monkeypatch.setattr("sab_pytest.thor.remote.LEASE_WAIT_S", 0.2)
    case = Case(id="safe_detailed-9100", kind="safe_detailed", safety="safe", instruction="made-up",
                reference_steps=("find Vase",), scene="FloorPlan201", final_state=({"objectType": "Vase"},),
                risk_category=None, risk_label_raw=None, abstraction_level=None, row=0)
    runtime = Runtime(Settings(engine="remote", thor_url=server.url, thor_scenes=str(real_scenes_dir)))
    try:
        verdict = runtime.evaluate(case)
        assert verdict.error.startswith("engine: no free engine") and not verdict.passed
        holder.stop()
        assert runtime.evaluate(case).error is None  # the next case gets the engine
    finally:
        runtime.close()
        holder.stop()


def test_metadata_delta_round_trip_and_resync(start, engines) -> None:
    from sab_pytest.thor import wire

    base = [{"objectId": "A", "x": 1, "box": {"p": [1, 2]}}, {"objectId": "B", "x": 2, "box": None}]
    new = [{"objectId": "B", "x": 3, "box": None}, {"objectId": "C", "x": 0},  # B changed, C new, A gone
           {"objectId": "A", "x": 1, "box": {"p": [1, 2]}, "extra": True}]  # a key more: sent whole
    entries = wire.encode_objects(new, wire.index_objects(base))
    assert entries[0] == {"id": "B", "d": {"x": 3}} and "o" in entries[1] and "o" in entries[2]
    assert wire.decode_objects(entries, wire.index_objects(base)) == new
    renamed = [{"objectId": "B", "y": 2, "box": None}]  # same size, another key: sent whole
    assert wire.encode_objects(renamed, wire.index_objects(base)) == [{"o": renamed[0]}]
    with pytest.raises(KeyError):
        wire.decode_objects([{"id": "Z", "d": {}}], {})
    # a client out of step with the server takes the full metadata instead of patching the wrong base
    server = start()
    remote = engines(server.url)
    remote.reset("FloorPlan1")
    remote._index = {}  # its base emptied: the next delta cannot apply
    local = Controller(width=FRAME_SIZE, height=FRAME_SIZE)
    local.reset("FloorPlan1")
    assert dict(remote.step(action="RotateRight").metadata) == dict(local.step(action="RotateRight").metadata)



def test_a_slow_step_is_retried_once_and_a_hung_engine_is_an_engine_error(start, engines) -> None:
    server = start(engines=1)
    engine = engines(server.url, timeout=0.2)
    engine.reset("FloorPlan1")
    slot = server.pool.slots[0]
    real_step = slot.engine.step
    calls: list[float] = []

    def slow(*args, **kwargs):
        calls.append(time.monotonic())
        time.sleep(0.3 if len(calls) == 1 else 0)
        return real_step(*args, **kwargs)

    slot.engine.step = slow
    assert engine.step(action="MoveAhead").metadata["lastActionSuccess"]
    assert len(calls) == 1  # the retry after the timeout got the recorded answer: moved once

    def hung(*args, **kwargs):
        time.sleep(0.6)
        return real_step(*args, **kwargs)

    slot.engine.step = hung
    with pytest.raises(InfraError, match=r"TimeoutError.* after 2 tries") as info:  # two timeouts, not five
        engine.step(action="RotateRight")
    assert info.value.kind == "engine"


def test_reset_passes_initialization_parameters_and_refuses_unknown_ones(start, engines) -> None:
    server = start()
    remote = engines(server.url)
    assert remote.reset("FloorPlan1", width=320, height=240).metadata["screenWidth"] == 320
    assert remote.step(action="RotateRight").frame.shape == (240, 320, 3)
    with pytest.raises(TypeError, match="wingspan"):
        remote.reset("FloorPlan1", wingspan=3)
    with pytest.raises(ValueError, match="unknown iTHOR scene"):
        remote.reset("FloorPlan999")
    assert server.pool.slots[0].restarts == 0  # the caller's mistakes do not restart the engine
    assert remote.reset("FloorPlan2").metadata["sceneName"] == "FloorPlan2_physics"



def test_preflight_counts_free_engines_over_every_url(start) -> None:
    a, b = start(engines=1), start(engines=2)
    settings = Settings(engine="remote", thor_url=f"{a.url},{b.url}")
    assert check_engines(settings, workers=3) is None
    assert "3 THOR engine(s) free for 4 worker(s)" in check_engines(settings, workers=4)
    # an episode holds its engine all along: a worker running two at once wants two
    acting = Settings(engine="remote", thor_url=f"{a.url},{b.url}", model="agent", model_given=True,
                      strategy="react", concurrency=2)
    assert "3 THOR engine(s) free for 2 worker(s) x 2 episodes at once" in check_engines(acting, workers=2)


def test_cases_at_once_fill_the_call_slots_but_episodes_on_real_thor_hold_an_engine_each() -> None:
    from sab_pytest.run.runtime import CASES_PER_CALL_SLOT, cases_at_once

    text = Settings(model="agent", model_given=True, concurrency=3)
    assert cases_at_once(text) == 3 * CASES_PER_CALL_SLOT
    acting = Settings(model="agent", model_given=True, concurrency=3, strategy="react")
    assert cases_at_once(acting) == 3 * CASES_PER_CALL_SLOT
    assert cases_at_once(Settings(model="agent", model_given=True, concurrency=3, strategy="react",
                                  engine="remote", thor_url="http://h:1")) == 3
    assert cases_at_once(Settings(model="reference", judge_model="rules", concurrency=3)) == 3  # offline


def test_the_ai2thor_backend_starts_cloud_rendering_controllers(monkeypatch) -> None:
    import ai2thor.platform

    from sab_pytest.thor import local
    from sab_pytest.thor.server import engine_factory

    made: list[dict] = []  # the engines start through thor.local.start, as --thor local does
    monkeypatch.setattr(local, "LocalController", lambda **kw: made.append(kw) or object())
    engine_factory("ai2thor", width=640, height=480)()
    first = made[-1]
    assert first["platform"] is ai2thor.platform.CloudRendering and (first["width"], first["height"]) == (640, 480)
    assert "local_executable_path" not in first
    engine_factory("ai2thor", executable="/opt/thor/stand-in", platform="Linux64")()
    assert made[-1]["platform"] is ai2thor.platform.Linux64
    assert made[-1]["local_executable_path"] == "/opt/thor/stand-in"
    with pytest.raises(UsageError, match="--platform"):
        engine_factory("ai2thor", platform="Amiga")
    with pytest.raises(UsageError, match="--backend"):
        engine_factory("unity")


def test_a_step_on_an_engine_whose_process_died_fails_at_once_and_reset_starts_a_new_one(start, engines) -> None:
    """Found by the call itself, not the reaper (stopped here): ai2thor would otherwise wait its full
    server timeout (100 s) on the pipe of a Unity process that is gone."""
    server = start(engines=1)
    server.reaper.stop()
    engine = engines(server.url)
    engine.reset("FloorPlan1")
    slot = server.pool.slots[0]
    first = _kill_unity(slot)
    with pytest.raises(InfraError, match=r"exited with status 3.*restarted"):
        engine.step(action="RotateRight")
    assert slot.engine is not first and slot.restarts == 1
    assert engine.reset("FloorPlan1").metadata["objects"]
    assert engine.step(action="RotateRight").metadata["lastActionSuccess"]


def test_remote_pictures_are_what_the_server_says_it_draws(start, monkeypatch: pytest.MonkeyPatch) -> None:
    """A THOR server running the embedded engine serves schematic pictures, and the run marks them so;
    Unity's build is rendered; a server that cannot be asked leaves the old assumption (rendered)."""
    from sab_pytest.results.summary import build_summary
    from sab_pytest.thor.remote import served_pictures
    from sab_pytest.thor.server import pictures_of

    monkeypatch.delenv("SAB_THOR_TOKEN", raising=False)
    server = start()
    assert _raw(server.url, "GET", "/health")[1]["pictures"] == "schematic"
    assert served_pictures(server.url) == "schematic"
    s = validate(Settings(engine="remote", thor_url=server.url, strategy="basic"))
    assert s.pictures == "schematic" and build_summary([], s)["pictures"]["comparable_with_paper"] is False
    assert pictures_of("ai2thor") == "rendered" and pictures_of("ai2thor", "/usr/bin/sab-thor-standin") == "schematic"
    dead = f"http://127.0.0.1:{free_port()}"
    assert served_pictures(dead) is None
    assert Settings(engine="remote", thor_url=dead).pictures == "rendered"
    assert served_pictures(f"{server.url},{dead}") is None  # not every server says: unknown
