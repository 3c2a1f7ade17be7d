"""Response cache (keys, files, cross-process locks), through the real client and the fake server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.timing import HANG_S, LONG_S, POLL_S, PROCESS_S

from sab_pytest.cache import ResponseCache, default_cache_dir, normalise_base_url, request_key
from sab_pytest.errors import InfraError
from sab_pytest.models import CallContext, ChatClient, chat_client
from sab_pytest.testing import FakeOpenAIServer, Reply, fake_openai_server

SECRET = "sk-test-PLANTED-SECRET"
USER = [{"role": "user", "content": "Turn on the stove and leave."}]




@pytest.fixture
def cache(tmp_path: Path) -> ResponseCache:
    return ResponseCache(tmp_path / "responses")


def make_model(server: FakeOpenAIServer, cache: ResponseCache | None, **options: Any) -> ChatClient:
    settings: dict[str, Any] = {"base_url": server.url, "api_key": SECRET, "timeout": 2.0, "max_retries": 2,
                                "backoff_base": 0.01, "backoff_max": 0.05, "cache": cache}
    settings.update(options)
    return chat_client(settings.pop("model", "gpt-4o"), **settings)


def files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def key_of(model: ChatClient, messages: list[dict[str, Any]]) -> str:
    return request_key(model._key_material(model._request_params(messages, None)))


# -- keys and files ------------------------------------------------------------------------------------

def test_second_identical_call_is_a_hit_with_no_request(server: FakeOpenAIServer,
                                                        cache: ResponseCache) -> None:
    model = make_model(server, cache)
    first = model.complete(USER)
    second = model.complete(USER, role="judge")
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert second.answer == first.answer and second.role == "judge"
    assert (second.prompt_tokens, second.completion_tokens) == (first.prompt_tokens, first.completion_tokens)
    assert len(server.chat_requests) == 1


def test_one_file_per_key_and_no_leftovers(server: FakeOpenAIServer, cache: ResponseCache) -> None:
    model = make_model(server, cache)
    model.complete(USER)
    key = key_of(model, USER)
    assert files(cache.root) == [cache.root / key[:2] / f"{key}.json"]
    entry = json.loads((cache.root / key[:2] / f"{key}.json").read_text())
    assert entry["key"] == key and entry["request"]["messages"] == USER
    assert entry["request"]["base_url"] == normalise_base_url(server.url)


def test_key_ignores_timeout_retries_and_credentials(server: FakeOpenAIServer, cache: ResponseCache) -> None:
    make_model(server, cache, timeout=1.0, max_retries=0, api_key="sk-one-aaaaaaaa").complete(USER)
    again = make_model(server, cache, timeout=9.0, max_retries=7, api_key="sk-two-bbbbbbbb",
                       backoff_base=3.0).complete(USER)
    assert again.cache_hit and len(server.chat_requests) == 1


@pytest.mark.parametrize("change", [
    {"model": "gpt-4o-mini"}, {"temperature": 0.7}, {"max_tokens": 12}, {"extra": {"seed": 3}},
    {"extra": {"top_p": 0.5}}, {"extra": {"stop": ["\n"]}}, {"cache_salt": "repeat-1"},
])
def test_key_includes_what_decides_the_answer(server: FakeOpenAIServer, cache: ResponseCache,
                                              change: dict[str, Any]) -> None:
    make_model(server, cache).complete(USER)
    assert not make_model(server, cache, **change).complete(USER).cache_hit
    assert len(server.chat_requests) == 2


def test_key_includes_messages_and_server(server: FakeOpenAIServer, cache: ResponseCache) -> None:
    make_model(server, cache).complete(USER)
    assert not make_model(server, cache).complete([{"role": "user", "content": "other"}]).cache_hit
    with fake_openai_server() as other:
        assert not make_model(other, cache).complete(USER).cache_hit
        assert len(other.chat_requests) == 1


def test_normalise_base_url() -> None:
    assert normalise_base_url("HTTP://User:Pass@LocalHost:8000/v1/?x=1#f") == "http://localhost:8000/v1"
    assert normalise_base_url("https://api.example.com:443/v1") == "https://api.example.com/v1"
    assert normalise_base_url(None) == "https://api.openai.com/v1"
    assert request_key({"a": 1, "b": [1, 2]}) == request_key({"b": [1, 2], "a": 1})


def test_default_dir_follows_the_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SAB_CACHE_HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / "responses"


def test_failures_are_not_cached(server: FakeOpenAIServer, cache: ResponseCache) -> None:
    server.enqueue(Reply.error(400))
    with pytest.raises(InfraError):
        make_model(server, cache).complete(USER)
    assert files(cache.root) == []  # neither an entry nor a lock is left
    assert not make_model(server, cache).complete(USER).cache_hit
    assert len(server.chat_requests) == 2


def test_corrupt_entry_is_a_miss_and_is_replaced(server: FakeOpenAIServer, cache: ResponseCache) -> None:
    model = make_model(server, cache)
    model.complete(USER)
    path = cache.path_for(key_of(model, USER))
    path.write_text("{not json")
    assert not model.complete(USER).cache_hit
    assert model.complete(USER).cache_hit


def test_interrupted_run_makes_only_the_missing_calls(server: FakeOpenAIServer, cache: ResponseCache) -> None:
    prompts = [[{"role": "user", "content": f"case {i}"}] for i in range(6)]
    for messages in prompts[:4]:  # the run is interrupted after four cases
        make_model(server, cache).complete(messages)
    server.reset()
    calls = [make_model(server, cache).complete(m) for m in prompts]
    assert [c.cache_hit for c in calls] == [True] * 4 + [False] * 2
    assert sorted(r.last_user_message for r in server.chat_requests) == ["case 4", "case 5"]


# -- in-flight locks --------------------------------------------------------------------------------

CHILD = r"""
import json, sys, time
from pathlib import Path
from sab_pytest.cache import ResponseCache
from sab_pytest.models import ChatClient, chat_client
url, root, flags, index = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]
model = chat_client("gpt-4o", base_url=url, api_key="sk-test-PLANTED-SECRET", timeout=10,
                        cache=ResponseCache(root))
model.transport.sdk()
(flags / f"ready-{index}").touch()
while not (flags / "go").exists():
    time.sleep(0.002)
call = model.complete([{"role": "user", "content": "the same question"}])
print(json.dumps({"answer": call.answer, "hit": call.cache_hit}))
"""


def test_concurrent_processes_make_one_call_for_one_key(tmp_path: Path) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    root = tmp_path / "responses"
    with fake_openai_server(latency=0.5) as srv:
        commands = [[sys.executable, "-c", CHILD, srv.url, str(root), str(flags), str(i)] for i in range(4)]
        procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for c in commands]
        try:
            deadline = time.monotonic() + PROCESS_S
            while len(list(flags.glob("ready-*"))) < 4 and time.monotonic() < deadline:
                time.sleep(POLL_S)
            (flags / "go").touch()
            outputs = [p.communicate(timeout=PROCESS_S) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outputs]
        results = [json.loads(out) for out, _ in outputs]
        assert len(srv.chat_requests) == 1
    assert len({r["answer"] for r in results}) == 1
    assert sorted(r["hit"] for r in results) == [False, True, True, True]
    assert not list(root.rglob("*.lock"))


def test_waiter_gets_the_owners_answer_without_calling(server: FakeOpenAIServer,
                                                       cache: ResponseCache) -> None:
    model = make_model(server, cache)
    key = key_of(model, USER)
    claim = cache.try_claim(key, budget_s=30)
    assert claim is not None
    assert cache.try_claim(key, budget_s=30) is None  # held by a live owner

    def owner() -> None:
        time.sleep(0.3)
        cache.put(key, {"text": "from the owner", "finish_reason": "stop", "prompt_tokens": 3,
                        "completion_tokens": 2})
        claim.release()

    threading.Thread(target=owner).start()
    call = model.complete(USER)
    assert (call.answer, call.cache_hit, call.prompt_tokens) == ("from the owner", True, 3)
    assert call.latency_s >= 0.25
    assert server.chat_requests == []


def test_waiter_calls_itself_when_the_owner_gives_up(server: FakeOpenAIServer, cache: ResponseCache) -> None:
    model = make_model(server, cache)
    claim = cache.try_claim(key_of(model, USER), budget_s=30)
    assert claim is not None
    threading.Timer(0.2, claim.release).start()  # the owner failed: no entry, lock released
    call = model.complete(USER)
    assert not call.cache_hit and len(server.chat_requests) == 1


def test_waiter_respects_the_case_budget(server: FakeOpenAIServer, cache: ResponseCache) -> None:
    model = make_model(server, cache)
    claim = cache.try_claim(key_of(model, USER), budget_s=LONG_S)
    assert claim is not None
    start = time.monotonic()
    with pytest.raises(InfraError) as info:
        model.for_case(CallContext.start(0.3)).complete(USER)
    # it gave up waiting for the other owner's answer when its own budget ran out: no request made
    assert info.value.kind == "model_timeout" and not server.chat_requests
    assert time.monotonic() - start < HANG_S
    claim.release()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _plant_lock(cache: ResponseCache, key: str, **fields: Any) -> Path:
    lock = cache.lock_path_for(key)
    lock.parent.mkdir(parents=True, exist_ok=True)
    info = {"pid": os.getpid(), "host": os.uname().nodename, "nonce": "planted", "created": time.time(),
            "expires_at": time.time() + 3600, **fields}
    lock.write_text(json.dumps(info))
    return lock


def _zombie() -> subprocess.Popen[bytes]:
    """A child that has exited but is not reaped yet: kill(pid, 0) still succeeds for it."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + PROCESS_S
    while time.monotonic() < deadline:
        if Path(f"/proc/{proc.pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            break
        time.sleep(POLL_S)
    return proc


@pytest.mark.parametrize("stale", ["dead-owner", "zombie-owner", "expired"])
def test_stale_lock_is_taken_over(server: FakeOpenAIServer, cache: ResponseCache, stale: str) -> None:
    model = make_model(server, cache)
    key = key_of(model, USER)
    zombie = None
    if stale == "dead-owner":
        _plant_lock(cache, key, pid=_dead_pid())
    elif stale == "zombie-owner":
        if not Path("/proc/self/stat").exists():
            pytest.skip("zombie detection needs /proc")
        zombie = _zombie()
        _plant_lock(cache, key, pid=zombie.pid)
    else:
        _plant_lock(cache, key, expires_at=time.time() - 1)  # owner alive (us) but past its budget
    # a lock wrongly judged alive fails the test (the budget ends the wait) instead of hanging it
    call = model.for_case(CallContext.start(3.0)).complete(USER)
    assert not call.cache_hit and len(server.chat_requests) == 1  # the budget above fails a wait on the lock
    assert not cache.lock_path_for(key).exists()
    assert [p.name for p in files(cache.root)] == [f"{key}.json"]
    if zombie is not None:
        zombie.wait()


def test_a_process_exiting_normally_releases_its_locks(tmp_path: Path) -> None:
    code = ("import sys; from sab_pytest.cache import ResponseCache; "
            "c = ResponseCache(sys.argv[1]); assert c.try_claim('ab' * 32, 60) is not None")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=PROCESS_S)
    assert not list(tmp_path.rglob("*.lock"))

