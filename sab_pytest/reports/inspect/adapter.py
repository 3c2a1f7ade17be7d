"""Everything sab-pytest uses of inspect_ai's private modules, and the check that the installed
inspect_ai has it.

Why private modules at all: a log written a batch of samples at a time (``inspect_log.EvalFile``),
and fed while the run goes (``inspect_live``), needs Inspect's own recorder and sample condenser;
their async API needs Inspect's way of running a coroutine from synchronous code (it sets up the
async filesystem the recorder writes through); and a log's zstd members compress faster with
Inspect's compressor made single-threaded (``inspect_log._zstd_single_threaded``). None of these is
public API, so they are reached here alone, and ``missing()`` says which of them this inspect_ai
lacks (with its version): the callers then write the log with the public ``write_eval_log``
(slower, the same file) or leave the compressor as it is. The rest of the Inspect modules use only
``inspect_ai``'s public packages.

inspect_ai is an optional extra: this module imports it only when one of its functions is called.
"""

from __future__ import annotations

import importlib
from collections.abc import Coroutine
from importlib import metadata
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")

ASYNC = "inspect_ai._util._async"
RECORDER = "inspect_ai.log._recorders.eval"
CONDENSE = "inspect_ai.log._condense"
ZIPFILE = "inspect_ai._util.zipfile"
CHECKED_WITH = "0.3.285"  # the inspect_ai whose private modules this adapter was written against

#: (module, name) pairs the batched log relies on, and the methods it calls on the recorder.
PIECES = ((ASYNC, "run_coroutine"), (RECORDER, "EvalRecorder"), (CONDENSE, "condense_sample"))
RECORDER_METHODS = ("log_init", "log_start", "log_sample", "flush", "log_finish")


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
