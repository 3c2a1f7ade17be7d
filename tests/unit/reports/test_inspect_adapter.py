"""The one module that reaches inspect_ai's private modules checks that the installed version has
them, and names what is gone when it does not."""

from __future__ import annotations

import asyncio
import importlib.util
import types

import pytest

from sab_pytest.reports.inspect import adapter as inspect_adapter

#: inspect_ai is imported by the tests, not while the suite collects (seconds in every worker)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("inspect_ai") is None,
                                reason="the [inspect] extra is not installed")


def test_the_installed_inspect_ai_has_every_piece_the_batched_log_uses() -> None:
    assert inspect_adapter.missing() == []


def test_a_piece_gone_from_inspect_ai_is_named_with_the_version(monkeypatch: pytest.MonkeyPatch) -> None:
    real = inspect_adapter.importlib.import_module

    def without_condense(name: str) -> types.ModuleType:
        if name == inspect_adapter.CONDENSE:
            raise ImportError(name)
        if name == inspect_adapter.RECORDER:
            return types.SimpleNamespace(EvalRecorder=type("EvalRecorder", (), {"log_init": None}))
        return real(name)

    monkeypatch.setattr(inspect_adapter.importlib, "import_module", without_condense)
    gone = inspect_adapter.missing()
    assert "inspect_ai.log._condense.condense_sample" in gone
    assert "inspect_ai.log._recorders.eval.EvalRecorder.log_sample" in gone
    assert "inspect_ai.log._recorders.eval.EvalRecorder.log_init" not in gone
    message = inspect_adapter.describe_missing()
    assert inspect_adapter.version() in message and "condense_sample" in message


def test_a_coroutine_runs_to_its_result_from_synchronous_code() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert inspect_adapter.run_coroutine(answer()) == 42


def test_the_installed_inspect_ai_and_zipfile_have_what_the_single_threaded_log_uses() -> None:
    assert inspect_adapter.zstd_missing() == []


def test_a_piece_of_the_single_threaded_log_gone_is_named_and_nothing_is_changed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import zipfile

    helpers = inspect_adapter.zip_helpers()
    monkeypatch.delattr(helpers, "_MultiFrameZstdCompressObj")
    monkeypatch.setattr(zipfile._ZipWriteFile, "__init__", lambda self, zf, zinfo, zip64: None)
    assert inspect_adapter.zstd_missing() == ["inspect_ai._util.zipfile._MultiFrameZstdCompressObj",
                                              "zipfile._ZipWriteFile._compressor"]
    holder = types.SimpleNamespace(_open=lambda: None)
    recorder = types.SimpleNamespace(data={"k": holder}, _log_file_key=lambda spec: "k")
    assert inspect_adapter.single_threaded_zstd(recorder, object()) is False
    assert "_open" in vars(holder) and holder._open() is None  # left as it was


def test_a_log_s_zip_file_compresses_in_one_thread_and_zipfile_is_left_as_it_is(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the log's own zip object changes: its zstd members get a compressor without threads
    (Inspect's asks for 12), are read back by any zip reader, and ``zipfile``'s compressor
    (Inspect's, installed on import) is the same object after."""
    import zipfile

    import zstandard

    made: list[tuple[dict, object]] = []
    real = zstandard.ZstdCompressor

    def spy(**options: object) -> object:
        made.append((options, real(**options)))
        return made[-1][1]

    monkeypatch.setattr(zstandard, "ZstdCompressor", spy)
    helpers = inspect_adapter.zip_helpers()
    installed = zipfile._get_compressor
    path = tmp_path / "log.zip"
    holder = types.SimpleNamespace(_zip=None)

    def opener() -> None:
        holder._zip = zipfile.ZipFile(path, "a", compression=helpers._ZIP_ZSTANDARD)

    holder._open = opener
    recorder = types.SimpleNamespace(data={"k": holder}, _log_file_key=lambda spec: "k")
    assert inspect_adapter.single_threaded_zstd(recorder, object()) is True
    holder._open()  # the recorder opens its file again: the new zip object is adopted too
    assert type(holder._zip).__name__ == "OneThreadZstd"
    with holder._zip.open("samples/1.json", "w") as member:
        member.write(b'{"id": 1, "text": "' + b"x" * 5000 + b'"}')
        assert member._compressor._factory.__self__ is made[-1][1] and "threads" not in made[-1][0]
    holder._zip.close()
    assert zipfile._get_compressor is installed
    with zipfile.ZipFile(path) as back:
        assert back.read("samples/1.json").startswith(b'{"id": 1') and back.infolist()[0].compress_type == \
            helpers._ZIP_ZSTANDARD
    with zipfile.ZipFile(tmp_path / "other.zip", "w", compression=helpers._ZIP_ZSTANDARD) as other:
        other.writestr("a", "b")  # any other zip file: Inspect's compressor, its threads
    assert "threads" in made[-1][0]
