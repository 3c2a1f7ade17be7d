"""Everything sab-pytest uses of pytest's private modules and attributes, and the check that the
installed pytest has it.

Why private parts at all, each for something pytest offers no public way to do:

* the run's JUnit writer (``_pytest.junitxml.xml_key``, ``LogXML``): the gates and the suite's
  properties are written from the controller, under xdist too, where ``record_testsuite_property``
  cannot; and the earlier attempts pytest-rerunfailures left are dropped from its testcases;
* pytest's rootdir and ini search (``_pytest.config.findpaths.determine_setup``): whether a path
  option written after a space changed the configuration pytest settled on before it knew the option;
* the terminal reporter's writer (``TerminalReporter._tw``): how much of the current line pytest's
  progress characters took, which ``ensure_newline`` does not see under xdist;
* the end of an interrupted session (``TerminalReporter._keyboardinterrupt_memo`` and
  ``_report_keyboardinterrupt``): a stop the plugin made (its breaker, its budget, Ctrl-C) ends with
  the plugin's one line, not with pytest's ``!!! Interrupted: ... !!!`` banner and a traceback.

None of this is pytest's public API, so it is reached here alone, and ``missing()`` says what the
installed pytest lacks, naming each piece. Each caller falls back where a piece is gone: no JUnit
properties from the controller, the safe spelling asked for, a plain ``ensure_newline``, pytest's own
banner. ``tests/unit/pytest_layer/test_pytest_adapter.py`` runs the check, so a pytest that changes
them fails CI first, naming the piece.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sab_pytest.pytest_layer.xdist_adapter import Piece, piece_problem

JUNITXML = "_pytest.junitxml"
FINDPATHS = "_pytest.config.findpaths"
TERMINAL = "_pytest.terminal"

PIECES: tuple[Piece, ...] = (
    Piece(JUNITXML, "", "xml_key"),
    Piece(JUNITXML, "LogXML", "add_global_property", "self, name, value"),
    Piece(JUNITXML, "LogXML", "node_reporters_ordered", assigned=True),
    Piece(JUNITXML, "_NodeReporter", "to_xml", "self"),
    Piece(FINDPATHS, "", "determine_setup",
          "*, inifile, override_ini, args, rootdir_cmd_arg, invocation_dir"),
    Piece(TERMINAL, "TerminalReporter", "_tw", assigned=True),
    Piece(TERMINAL, "TerminalReporter", "_keyboardinterrupt_memo", assigned=True),
    Piece(TERMINAL, "TerminalReporter", "_report_keyboardinterrupt", "self"),
)


def missing() -> list[str]:
    """Every piece the installed pytest lacks, each as ``name: what is wrong``; empty when all is there."""
    return [f"{piece}: {problem}" for piece in PIECES if (problem := piece_problem(piece)) is not None]


def junit_writer(config: Any) -> Any:
    """pytest's JUnit writer of this run (``LogXML``), None without ``--junitxml`` (or on an xdist
    worker, or on a pytest without the private key)."""
    try:
        xml_key = importlib.import_module(JUNITXML).xml_key
    except (ImportError, AttributeError):
        return None
    return config.stash.get(xml_key, None)


def determine_setup(config: Any, args: Sequence[str]) -> tuple[Path, Path | None]:
    """The rootdir and ini file pytest would settle on for ``args`` with this run's other options.
    Raises (``ImportError``, ``AttributeError``, ``TypeError``) where pytest's helper changed: the
    caller then asks for the spelling that needs no check."""
    setup: Callable[..., Any] = importlib.import_module(FINDPATHS).determine_setup
    rootpath, inipath, *_ = setup(
        inifile=config.option.inifilename, override_ini=config.option.override_ini, args=list(args),
        rootdir_cmd_arg=config.option.rootdir or None, invocation_dir=config.invocation_params.dir)
    return rootpath, inipath


def current_line_width(reporter: Any) -> int:
    """How many characters the terminal's current line holds (0 where the writer is not there)."""
    writer = getattr(reporter, "_tw", None)
    return int(getattr(writer, "width_of_current_line", 0) or 0) if writer is not None else 0


def can_replace_interrupt_report(reporter: Any) -> bool:
    """Whether this terminal reporter ends an interrupted session the way ``replace_interrupt_report``
    knows how to change."""
    return reporter is not None and hasattr(reporter, "_keyboardinterrupt_memo") and callable(
        getattr(reporter, "_report_keyboardinterrupt", None))


def drop_interrupt_report(reporter: Any) -> None:
    """Nothing about the interruption at the session's end (the plugin said it already)."""
    reporter._keyboardinterrupt_memo = None


def replace_interrupt_report(reporter: Any, write: Callable[[], None]) -> None:
    """At the session's end, ``write`` (the plugin's own closing line) instead of pytest's banner of
    an interruption (``!!! Interrupted: ... !!!``) and the traceback under it. Only this reporter
    object changes; pytest's class is left as it is."""
    reporter._keyboardinterrupt_memo = SimpleNamespace(reprcrash=SimpleNamespace(message=""),
                                                       toterminal=lambda tw: None)
    reporter._report_keyboardinterrupt = write
