"""Everything sab-pytest uses of inspect_ai's private modules, and the check that the installed
inspect_ai has it.

Why private modules at all: a log written a batch of samples at a time (``inspect_log.EvalFile``),
and fed while the run goes (``inspect_live``), needs Inspect's own recorder and sample condenser;
their async API needs Inspect's way of running a coroutine from synchronous code (it sets up the
async filesystem the recorder writes through); and a log's zstd members compress faster without the
pool of 12 threads Inspect's compressor starts for each member (``single_threaded_zstd``: for the
zip file of one log alone, nothing patched in ``zipfile`` or Inspect). None of these is public API,
so they are reached here alone, and ``missing()`` / ``zstd_missing()`` say which of them this
inspect_ai (or Python's ``zipfile``) lacks: the callers then write the log with the public
``write_eval_log`` (slower, the same file) or leave the compressor as it is. The rest of the Inspect
modules use only ``inspect_ai``'s public packages.

inspect_ai is an optional extra: this module imports it only when one of its functions is called.
"""

from __future__ import annotations

import importlib
import zipfile
from collections.abc import Callable, Coroutine
from importlib import metadata
from types import ModuleType
from typing import Any, Literal, TypeVar

T = TypeVar("T")

ASYNC = "inspect_ai._util._async"
RECORDER = "inspect_ai.log._recorders.eval"
CONDENSE = "inspect_ai.log._condense"
ZIPFILE = "inspect_ai._util.zipfile"
CHECKED_WITH = "0.3.285"  # the inspect_ai whose private modules this adapter was written against

#: (module, name) pairs the batched log relies on, and the methods it calls on the recorder.
PIECES = ((ASYNC, "run_coroutine"), (RECORDER, "EvalRecorder"), (CONDENSE, "condense_sample"))
RECORDER_METHODS = ("log_init", "log_start", "log_sample", "flush", "log_finish")
#: what ``single_threaded_zstd`` relies on: Inspect's zstd member type and frame writer, how its
#: recorder keeps a log's zip file (``data`` by ``_log_file_key``; ``ZipLogFile._open`` sets ``_zip``),
#: and the compressor a zip member's writer holds (``zipfile._ZipWriteFile._compressor``)
ZSTD_PIECES = ((ZIPFILE, "_ZIP_ZSTANDARD"), (ZIPFILE, "_MultiFrameZstdCompressObj"),
               (RECORDER, "EvalRecorder._log_file_key"), (RECORDER, "ZipLogFile._open"))


def version() -> str:
    """The installed inspect_ai's version (``?`` when its metadata cannot be read)."""
    try:
        return metadata.version("inspect_ai")
    except metadata.PackageNotFoundError:
        return "?"


def missing() -> list[str]:
    """What of ``PIECES`` (and the recorder's methods) the installed inspect_ai lacks; empty when
    the batched log can be written."""
    gone: list[str] = []
    for module_name, name in PIECES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            gone.append(f"{module_name}.{name}")
            continue
        if not hasattr(module, name):
            gone.append(f"{module_name}.{name}")
        elif name == "EvalRecorder":
            gone += [f"{module_name}.{name}.{m}" for m in RECORDER_METHODS if not hasattr(getattr(module, name), m)]
    return gone


def describe_missing() -> str:
    """One line naming what broke, for a log that cannot be written in batches."""
    return (f"inspect_ai {version()} lacks what the batched Inspect log relies on (checked with "
            f"{CHECKED_WITH}): {', '.join(missing()) or 'nothing'}")


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end from synchronous code, as Inspect runs its own (its async
    filesystem open around it)."""
    return importlib.import_module(ASYNC).run_coroutine(coroutine)


def recorder(log_dir: str) -> Any:
    """Inspect's ``.eval`` recorder writing into ``log_dir``."""
    return importlib.import_module(RECORDER).EvalRecorder(log_dir)


def condense_sample(sample: Any) -> Any:
    """``sample`` condensed as ``write_eval_log`` condenses it (repeated content stored once)."""
    return importlib.import_module(CONDENSE).condense_sample(sample)


def zip_helpers() -> ModuleType | None:
    """Inspect's ``zipfile`` helpers (the zstd compressor it installs), None where it has none."""
    try:
        return importlib.import_module(ZIPFILE)
    except ImportError:
        return None


def zstd_missing() -> list[str]:
    """What of ``ZSTD_PIECES`` (and ``zipfile``'s member writer) is missing; empty when the zip file
    of a log can compress its members single-threaded."""
    gone = []
    for module_name, dotted in ZSTD_PIECES:
        try:
            found: Any = importlib.import_module(module_name)
        except ImportError:
            found = None
        for part in dotted.split("."):
            found = getattr(found, part, None)
        if found is None:
            gone.append(f"{module_name}.{dotted}")
    try:
        import zstandard  # noqa: F401 - inspect_ai's own dependency, for its .eval logs
    except ImportError:
        gone.append("zstandard")
    writer_init = getattr(getattr(zipfile, "_ZipWriteFile", None), "__init__", None)
    if "_compressor" not in getattr(getattr(writer_init, "__code__", None), "co_names", ()):
        gone.append("zipfile._ZipWriteFile._compressor")
    return gone


class _OneThreadZstd(zipfile.ZipFile):
    """A log's zip file whose zstd members are compressed without a pool of threads (frames in
    Inspect's format, which any zstd reader reads). Only the log's own zip object is given this
    class (``single_threaded_zstd``); ``zipfile`` and every other zip file are left as they are."""

    zstd_type: int = -1
    frames: Callable[[Any], Any] | None = None

    def open(self, name: Any, mode: Literal["r", "w"] = "r", pwd: bytes | None = None, *,
             force_zip64: bool = False) -> Any:
        handle: Any = super().open(name, mode, pwd, force_zip64=force_zip64)
        kind = name.compress_type if isinstance(name, zipfile.ZipInfo) else self.compression
        if mode == "w" and kind == self.zstd_type and self.frames is not None:
            import zstandard

            level = 3 if self.compresslevel is None else self.compresslevel
            handle._compressor = self.frames(zstandard.ZstdCompressor(level=level).compressobj)
        return handle


def single_threaded_zstd(recorder: Any, spec: Any) -> bool:
    """Make the zip file the recorder keeps for ``spec``'s log compress its members in this thread.

    Why: Inspect's zstd compressor starts a pool of 12 threads for each member of the zip, and a
    log's members are its samples, a few kB each: starting the threads costs more than compressing
    (0.65 s of 2.0 s of CPU for 1050 samples, measured). The log's zip object alone changes class
    (now, and each time the recorder opens it again); False, and nothing changed, where a piece is
    missing (``zstd_missing``)."""
    helpers = zip_helpers()
    if helpers is None or zstd_missing():
        return False
    log_file = getattr(recorder, "data", {}).get(recorder._log_file_key(spec))
    opener = getattr(log_file, "_open", None)
    if log_file is None or not callable(opener):
        return False
    one_thread = type("OneThreadZstd", (_OneThreadZstd,), {
        "zstd_type": helpers._ZIP_ZSTANDARD, "frames": staticmethod(helpers._MultiFrameZstdCompressObj)})

    def adopt() -> None:
        if type(getattr(log_file, "_zip", None)) is zipfile.ZipFile:
            log_file._zip.__class__ = one_thread

    def reopen() -> None:
        opener()
        adopt()

    log_file._open = reopen
    adopt()
    return True
