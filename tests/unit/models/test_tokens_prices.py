"""Tokens by the model's tokenizer (tiktoken on the pinned encodings, a server's /tokenize, else the
character rule with one line saying why) and USD per model (--sab-price MODEL=IN,OUT, else the list
price in genai-prices' bundled table)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from sab_pytest.errors import UsageError
from sab_pytest.models import Prices
from sab_pytest.models.pricing import EVERY_MODEL, parse_model_prices, price_book
from sab_pytest.models.tokens import (
    ENV,
    PER_MESSAGE,
    PER_REPLY,
    char_count,
    counter_for,
    pinned_encoding,
    tiktoken_counter,
)

TESTS = Path(__file__).resolve().parents[2]
MESSAGES = [{"role": "system", "content": "You are a robot's planner."},
            {"role": "user", "content": "Put the Apple in the Fridge, then close it."}]


@pytest.fixture
def fresh_encodings():
    """Each test loads the encodings anew (the counters are kept per process)."""
    tiktoken_counter.cache_clear()
    yield
    tiktoken_counter.cache_clear()


def test_tiktoken_counts_the_chat_format_as_openai_does(real_tiktoken_dir: Path, fresh_encodings) -> None:
    import tiktoken

    counter = counter_for("gpt-4o")
    assert counter.method == "tiktoken o200k_base" and not counter.note
    coder = tiktoken.get_encoding("o200k_base")  # served from the same pinned directory (tiktoken's own cache)
    expected = PER_REPLY + sum(PER_MESSAGE + len(coder.encode(m["role"])) + len(coder.encode(m["content"]))
                               for m in MESSAGES)
    assert counter.messages(MESSAGES) == expected
    assert counter_for("gpt-4").method == "tiktoken cl100k_base"  # GPT-4 has the older encoding
    picture = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:x"}}]}]
    assert counter.messages(picture) == PER_REPLY + PER_MESSAGE + 1 + 765


def test_a_missing_or_altered_encoding_falls_back_to_the_character_rule_with_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_encodings) -> None:
    monkeypatch.setenv(ENV, str(tmp_path))  # an override without the files: nothing is downloaded
    missing = tiktoken_counter("o200k_base")
    assert missing.method.startswith("about 4 characters") and "o200k_base not available" in missing.note
    assert str(tmp_path) in missing.note and "\n" not in missing.note
    assert missing.messages(MESSAGES) == char_count(MESSAGES)
    tiktoken_counter.cache_clear()
    (tmp_path / pinned_encoding("o200k_base").name).write_bytes(b"not the encoding")
    altered = tiktoken_counter("o200k_base")
    assert "sha256" in altered.note and altered.messages(MESSAGES) == char_count(MESSAGES)
    unknown = tiktoken_counter("p50k_base")  # an encoding tiktoken names that the project does not pin
    assert "'p50k_base' is not one of the pinned" in unknown.note


def test_a_model_tiktoken_does_not_name_is_counted_by_characters() -> None:
    counter = counter_for("llama-3.1-8b")
    assert counter.method == "about 4 characters per token" and counter.messages(MESSAGES) == char_count(MESSAGES)


@pytest.mark.parametrize("shape", ["llama.cpp", "vllm"])
def test_a_self_hosted_model_is_counted_by_its_servers_tokenize_endpoint(shape: str) -> None:
    from sab_pytest.testing import fake_openai_server
    from sab_pytest.testing.fake_tokenize import pieces

    with fake_openai_server(tokenize=shape) as server:
        counter = counter_for("qwen2.5-7b", server.url)  # the base URL ends in /v1: /tokenize is at the root
        assert "/tokenize" in counter.method and ("vLLM" if shape == "vllm" else "llama.cpp") in counter.method
        assert counter.text("Put the Apple, then stop.") == len(pieces("Put the Apple, then stop.")) == 7
        asked = [r for r in server.requests if r.path == "/tokenize"]
        assert asked and all(r.method == "POST" for r in asked)
        assert server.chat_requests == []  # counting tokens calls no model
    with fake_openai_server() as server:  # OpenAI's shape alone: no tokenize endpoint
        assert counter_for("qwen2.5-7b", server.url).method == "about 4 characters per token"


def test_the_fake_tokenize_endpoint_speaks_each_servers_wire_format() -> None:
    from sab_pytest.testing.fake_tokenize import answer

    status, _, body = answer({"content": "a b", "with_pieces": True}, "llama.cpp")
    assert status == 200 and [t["piece"] for t in json.loads(body)["tokens"]] == ["a", "b"]
    status, _, body = answer({"model": "m", "prompt": "a b c"}, "vllm")
    assert status == 200 and json.loads(body)["count"] == 3 and "max_model_len" in json.loads(body)
    status, _, body = answer({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, "vllm")
    assert status == 200 and json.loads(body)["count"] > 1  # the chat template's marks counted too
    assert answer({"model": "m"}, "vllm")[0] == 400 and answer({"prompt": "x"}, "llama.cpp")[0] == 400


def test_prices_per_model_and_the_old_form_for_every_model() -> None:
    assert parse_model_prices(["in=2.5,out=10"]) == {EVERY_MODEL: Prices(2.5, 10.0)}
    assert parse_model_prices(("gpt-4o=2.5,10", "openai/gpt-4=30,60")) == {"gpt-4o": Prices(2.5, 10.0),
                                                                          "gpt-4": Prices(30.0, 60.0)}
    assert parse_model_prices("llama=in=0.1,out=0.2") == {"llama": Prices(0.1, 0.2)}
    with pytest.raises(UsageError, match=r"--sab-price: 'cheap' is not MODEL=IN,OUT .* in=X,out=Y"):
        parse_model_prices(["cheap"])
    with pytest.raises(UsageError, match=r"--sab-price: gpt-4o='2.5': expected two non-negative numbers IN,OUT"):
        parse_model_prices(["gpt-4o=2.5"])
    with pytest.raises(UsageError, match="gpt-4o is priced twice"):
        parse_model_prices(["gpt-4o=1,2", "gpt-4o=3,4"])


def test_list_prices_come_from_the_bundled_table_with_their_date_and_source() -> None:
    book = price_book(["my-llama=0.1,0.2"], day=dt.date(2025, 6, 1))
    gpt4o, gpt4 = book.price("gpt-4o", None), book.price("gpt-4", None)
    assert gpt4o is not None and (gpt4o.input_per_m, gpt4o.output_per_m) == (2.5, 10.0)
    assert gpt4 is not None and (gpt4.input_per_m, gpt4.output_per_m) == (30.0, 60.0)  # the paper's detailed judge
    assert gpt4.source.startswith("genai-prices ") and "openai" in gpt4.source
    assert gpt4o.usd(1_000_000, 1_000_000) == pytest.approx(12.5)
    assert book.price("my-llama", "http://127.0.0.1:8080/v1").source == "--sab-price"  # type: ignore[union-attr]
    assert book.price("other-llama", "http://127.0.0.1:8080/v1") is None  # a server of the user's: no list price
    assert book.price("agent-x", None) is None  # not in the table
    line = book.table_line()
    assert "2025-06-01" in line and "genai-prices" in line and "nothing fetched" in line
    old = price_book("in=1,out=2")  # the old form prices every model, in the table or not
    assert old.price("gpt-4", None).input_per_m == 1.0  # type: ignore[union-attr]


def test_the_judges_output_tokens_are_the_papers_recorded_answer(real_tiktoken_dir: Path, fresh_encodings) -> None:
    """``JUDGE_OUTPUT_TOKENS`` is measured, not chosen: the tokens of the one judge answer the paper's code
    records (the ``#### output`` comment of its pinned evaluator/detail_evaluate.py, read through the
    project's pinned inputs), in both encodings the judges' models use."""
    import ast
    import re

    from sab_pytest.models.tokens import JUDGE_OUTPUT_TOKENS
    from sab_pytest.prompts import upstream

    source = upstream.locate()["detail_evaluate.py"].read_text(encoding="utf-8")
    recorded = re.search(r"#### output\n\s*# (\(.*\))", source)
    assert recorded is not None, "the paper's evaluator no longer records its example output"
    answer = ast.literal_eval(recorded.group(1))[3]  # (success, avg, llm_success, the judge's answer, retries)
    assert answer.rstrip(".").endswith("Rating: [[fail]]") and len(answer) > 200
    for encoding in ("o200k_base", "cl100k_base"):
        assert tiktoken_counter(encoding).text(answer) == JUDGE_OUTPUT_TOKENS, encoding


def test_prompt_cache_reads_are_kept_apart_and_priced_at_the_cache_price(tmp_path: Path) -> None:
    """OpenAI's usage says how many prompt tokens came from its prompt cache; they are billed at the
    table's cache-read price (half of gpt-4o's input price) in what a run cost."""
    from sab_pytest.models.wire import parse_answer
    from sab_pytest.results.cost import by_model
    from sab_pytest.settings.resolution import resolve

    body = {"choices": [{"message": {"content": "1. find Apple"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 800}}}
    answer = parse_answer(json.dumps(body))
    assert (answer.prompt_tokens, answer.cached_tokens) == (1000, 800)
    settings = resolve({"model": "gpt-4o", "judge_model": "gpt-4o", "no_cache": True}, user_cache=lambda: tmp_path)
    call = {"role": "agent", "model": "gpt-4o", "cache_hit": False, "prompt_tokens": 1000, "completion_tokens": 10,
            "cached_tokens": 800}
    row = by_model([{"calls": [call]}], settings)["rows"][0]
    assert row["cached_prompt_tokens"] == 800
    assert row["cost_usd"] == pytest.approx((200 * 2.5 + 800 * 1.25 + 10 * 10) / 1e6)
