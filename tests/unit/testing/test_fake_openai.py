"""The fake OpenAI-compatible server: routes, scripting, faults, recording, CLI.

These go through plain ``urllib`` (what the server sends, byte for byte) and through the real
openai SDK (what the client makes of it), both on loopback only.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest
from support import ROOT
from support.timing import HANG_S, LONG_S, PROCESS_S

from sab_pytest.testing import FakeOpenAIServer, Reply, fake_openai_server
from sab_pytest.testing.fake_openai import load_script

SECRET = "sk-test-PLANTED-SECRET"


def post_chat(url: str, text: str, *, key: str = SECRET,
              timeout: float = HANG_S) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps({"model": "fake-model", "messages": [{"role": "user", "content": text}]}).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    request = urllib.request.Request(f"{url}/chat/completions", data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def content_of(url: str, text: str) -> str:
    """The assistant text of a plain HTTP chat request."""
    return json.loads(post_chat(url, text)[2])["choices"][0]["message"]["content"]


def ask(client: openai.OpenAI, text: str, **options: Any) -> Any:
    return client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": text}],
                                          **options)


def sdk(url: str, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=SECRET, max_retries=0, timeout=options.pop("timeout", 5.0))


def test_binds_loopback_on_a_free_port(server: FakeOpenAIServer) -> None:
    assert server.url.startswith("http://127.0.0.1:")
    assert server.port > 0
    with fake_openai_server() as other:
        assert other.port != server.port


def test_default_answer_is_a_chat_completion_that_depends_on_the_prompt(server: FakeOpenAIServer) -> None:
    client = sdk(server.url)
    first = ask(client, "boil an egg")
    second = ask(client, "slice bread")
    assert "boil an egg" in first.choices[0].message.content
    assert first.choices[0].message.content != second.choices[0].message.content
    assert first.choices[0].finish_reason == "stop"
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    assert first.model == "gpt-4o"


def test_models_endpoint_lists_the_configured_models() -> None:
    with fake_openai_server(models=["m-one", "m-two"]) as srv:
        ids = [m.id for m in sdk(srv.url).models.list()]
    assert ids == ["m-one", "m-two"]


def test_unknown_route_is_a_404(server: FakeOpenAIServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{server.url}/embeddings", timeout=HANG_S)
    assert info.value.code == 404


def test_queue_is_consumed_in_order_before_rules(server: FakeOpenAIServer) -> None:
    server.add_rule("from the rule", contains="x")
    server.enqueue("first", Reply(content="second"))
    answers = [content_of(server.url, "x") for _ in range(3)]
    assert answers == ["first", "second", "from the rule"]


def test_rules_match_the_last_user_message_and_respect_times(server: FakeOpenAIServer) -> None:
    server.add_rule(Reply.error(503), contains="fire", times=1)
    server.add_rule("I refuse", contains="fire")
    server.add_rule(lambda req: f"len={len(req.last_user_message)}",
                    match=lambda req: "count" in req.last_user_message)
    assert post_chat(server.url, "start a fire")[0] == 503
    assert content_of(server.url, "start a fire") == "I refuse"
    assert content_of(server.url, "count me") == "len=8"
    assert "fake answer to: water" in post_chat(server.url, "water")[2].decode()


def test_responder_function_and_usage_numbers(server: FakeOpenAIServer) -> None:
    server.responder = lambda req: Reply(content="R:" + req.last_user_message, prompt_tokens=11,
                                         completion_tokens=7)
    reply = ask(sdk(server.url), "hi")
    assert reply.choices[0].message.content == "R:hi"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (11, 7, 18)


def test_error_reply_carries_retry_headers(server: FakeOpenAIServer) -> None:
    server.enqueue(Reply.rate_limited(retry_after=2, retry_after_ms=150))
    status, headers, body = post_chat(server.url, "x")
    lowered = {k.lower(): v for k, v in headers.items()}
    assert status == 429
    assert lowered["retry-after"] == "2" and lowered["retry-after-ms"] == "150"
    assert json.loads(body)["error"]["message"]


def test_invalid_json_empty_and_length_faults(server: FakeOpenAIServer) -> None:
    server.enqueue(Reply.invalid_json(), Reply.empty(), Reply.truncated("cut"))
    status, _, body = post_chat(server.url, "x")
    assert status == 200
    with pytest.raises(ValueError):
        json.loads(body)
    empty = json.loads(post_chat(server.url, "x")[2])["choices"][0]
    assert empty["message"]["content"] == ""
    cut = json.loads(post_chat(server.url, "x")[2])["choices"][0]
    assert (cut["message"]["content"], cut["finish_reason"]) == ("cut", "length")


def test_dropped_connection_gives_no_response(server: FakeOpenAIServer) -> None:
    server.enqueue(Reply.dropped())
    with pytest.raises(openai.APIConnectionError):
        sdk(server.url).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert len(server.chat_requests) == 1


def test_slow_reply_beyond_client_timeout_and_latency() -> None:
    with fake_openai_server(latency=0.15) as srv:
        client = sdk(srv.url)
        start = time.monotonic()
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert time.monotonic() - start >= 0.15
        srv.enqueue(Reply.slow(LONG_S))
        with pytest.raises(openai.APITimeoutError):
            ask(client, "x", timeout=0.3)
        stop_started = time.monotonic()
    assert time.monotonic() - stop_started < HANG_S  # stopping does not wait for the sleeping reply


def test_records_raw_authorization_but_redacts_it_in_repr(server: FakeOpenAIServer) -> None:
    post_chat(server.url, "hello")
    recorded = server.requests[-1]
    assert recorded.authorization == f"Bearer {SECRET}"
    assert recorded.body["messages"][0]["content"] == "hello"
    assert SECRET not in repr(recorded)
    assert SECRET not in repr(server.requests)
    assert SECRET not in recorded.summary()
    assert "Bearer <redacted>" in repr(recorded)


def test_api_key_enforcement() -> None:
    with fake_openai_server(api_key="sk-right") as srv:
        assert post_chat(srv.url, "x", key="sk-wrong")[0] == 401
        assert post_chat(srv.url, "x", key="sk-right")[0] == 200


def test_broken_script_answers_500_and_is_recorded(server: FakeOpenAIServer) -> None:
    def broken(_req: Any) -> str:
        raise RuntimeError("script bug")

    server.responder = broken
    assert post_chat(server.url, "x")[0] == 500
    assert server.errors == ["RuntimeError: script bug"]


def test_load_script_applies_rules_queue_and_default(server: FakeOpenAIServer) -> None:
    load_script(server, {"latency": 0.0, "queue": [{"status": 500, "body": {"error": {"message": "boom"}}}],
                         "rules": [{"contains": "knife", "reply": {"content": "no knives"}}],
                         "default": {"content": "default!"}})
    assert post_chat(server.url, "knife")[0] == 500
    assert content_of(server.url, "knife") == "no knives"
    assert content_of(server.url, "other") == "default!"
    with pytest.raises(ValueError, match="unknown reply field"):
        load_script(server, {"queue": [{"contnet": "typo"}]})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_cli_serves_a_script(tmp_path: Path) -> None:
    script = tmp_path / "demo.json"
    script.write_text(json.dumps({"rules": [{"contains": "demo", "reply": {"content": "scripted"}}]}))
    port = _free_port()
    command = [sys.executable, "-m", "sab_pytest", "fake-openai",
               "--port", str(port), "--script", str(script)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        banner = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/v1" in banner
        status, _, body = post_chat(f"http://127.0.0.1:{port}/v1", "a demo please")
        assert status == 200
        assert json.loads(body)["choices"][0]["message"]["content"] == "scripted"
        proc.terminate()
        output = proc.communicate(timeout=PROCESS_S)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "/v1/chat/completions" in output
    assert SECRET not in output  # the demo log redacts credentials


def test_max_in_flight_counts_chat_requests_held_at_once() -> None:
    import threading

    with fake_openai_server(latency=0.3) as srv:
        threads = [threading.Thread(target=post_chat, args=(srv.url, f"q{i}")) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        post_chat(srv.url, "alone")
        assert srv.max_in_flight == 3
        srv.reset()
        post_chat(srv.url, "alone again")
        assert srv.max_in_flight == 1


def test_the_readme_demo_script_refuses_exactly_the_fire_and_stove_tasks(real_data_dir: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo of docs/models.md: with the rule judge, the refusals counted are the tasks whose instruction
    mentions fire or a stove, and no other (the fake judge's echo once made every case a refusal)."""
    import re

    from sab_pytest import dataset
    from sab_pytest.run.runtime import Runtime
    from sab_pytest.settings import Settings

    script = json.loads((ROOT / "data" / "fake_openai_demo.json").read_text())
    cases = dataset.select(dataset.load(str(real_data_dir)), "mixed", sample=20)
    monkeypatch.setenv("DEMO_KEY", "fake")
    with fake_openai_server() as server:
        load_script(server, script)
        runtime = Runtime(Settings(model="fake-model", judge_model="rules", base_url=server.url,
                                   api_key_env="DEMO_KEY", execute=False, max_retries=0))
        try:
            verdicts = {c.id: runtime.evaluate(c) for c in cases}
        finally:
            runtime.close()
    mentions = {c.id for c in cases if re.search(r"\b([Ff]ire|[Ss]tove)", c.instruction)}
    refused = {cid for cid, v in verdicts.items() if v.rejected}
    assert mentions and refused == mentions
    assert not any(v.error for v in verdicts.values())


def test_a_megabyte_answer_is_judged_whole_and_stored_cut(real_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """1 MB answers: the plan at their end is still read (the verdict uses the whole text), and the
    record stores each text up to the stated cap, the cut marked."""
    from sab_pytest import dataset
    from sab_pytest.results.files import json_line
    from sab_pytest.results.record import STORED_TEXT_CAP, from_verdict
    from sab_pytest.run.runtime import Runtime
    from sab_pytest.settings import Settings

    case = next(c for c in dataset.load(str(real_data_dir)).cases if c.kind == "unsafe_detailed")
    padding = "Let me think about this household task carefully. " * 20_000  # 1 MB
    monkeypatch.setenv("DEMO_KEY", "fake")
    with fake_openai_server() as server:
        server.default = Reply(content=f"{padding}\n1. find Candle\n2. pick Candle")
        runtime = Runtime(Settings(model="fake-model", judge_model="rules", base_url=server.url,
                                   api_key_env="DEMO_KEY", execute=False, max_retries=0, max_tokens=None))
        try:
            verdict = runtime.evaluate(case)
        finally:
            runtime.close()
    assert verdict.error is None and verdict.outcome.steps[-2:] == ["find Candle", "pick Candle"]
    line = json_line(from_verdict(verdict))
    assert len(line) < 10 * STORED_TEXT_CAP
    assert "[cut by sab-pytest: " in line and "more characters not stored]" in line


def test_a_long_answer_streams_in_at_most_max_pieces_chunks_that_join_to_it_whole() -> None:
    from sab_pytest.testing.fake_stream import MAX_PIECES, UNPACED_PIECES, stream_chunks

    def texts(content: str, paced: bool = True) -> list[str]:
        completion = {"id": "c", "created": 0, "model": "m", "usage": {},
                      "choices": [{"message": {"content": content}, "finish_reason": "stop"}]}
        return [c["choices"][0]["delta"]["content"] for c in stream_chunks(completion, False, paced=paced)[1:-1]]

    short = "find the apple  then\nput it down"
    assert texts(short) == ["find ", "the ", "apple  ", "then\n", "put ", "it ", "down"]
    assert texts(short, paced=False) == ["find the apple  ", "then\nput it ", "down"] and UNPACED_PIECES == 3
    long = "word " * (5 * MAX_PIECES + 3)
    assert len(texts(long)) <= MAX_PIECES and "".join(texts(long)) == long


@pytest.mark.parametrize("token_s", [None, 0.001])
def test_only_a_paced_stream_comes_a_word_a_chunk(token_s: float | None) -> None:
    """Chunks back to back come in a few pieces (the client's work per chunk is all the cut would
    change); chunks a pause apart, as a generating server sends them, a word each."""
    from sab_pytest.testing.fake_stream import UNPACED_PIECES

    words = "1. find Apple 2. pick Apple 3. find Fridge 4. open Fridge 5. put Fridge"
    with fake_openai_server(responder=lambda request: words, token_s=token_s) as server:
        client = openai.OpenAI(api_key=server.api_key or "k", base_url=server.url, max_retries=0)
        stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}],
                                                stream=True)
        texts = [chunk.choices[0].delta.content for chunk in stream if chunk.choices and chunk.choices[0].delta.content]
    assert "".join(texts) == words
    assert len(texts) == (UNPACED_PIECES if token_s is None else len(words.split()))
