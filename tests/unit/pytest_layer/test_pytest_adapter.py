"""The pytest adapter (``pytest_layer.pytest_adapter``): the installed pytest has every private piece
the plugin relies on (a pytest that changes one fails here first, naming the piece), a piece removed or
changed is named, and what the adapter does with them works on this pytest."""

from __future__ import annotations

import _pytest.config.findpaths
import _pytest.junitxml
import _pytest.terminal
import pytest

from sab_pytest.pytest_layer import pytest_adapter, terminal


def test_the_installed_pytest_has_every_piece_the_adapter_relies_on() -> None:
    problems = pytest_adapter.missing()
    assert problems == [], (f"pytest {pytest.__version__} is not what sab_pytest/pytest_layer/pytest_adapter.py "
                            "was written for. Missing or changed:\n  " + "\n  ".join(problems))


def test_a_removed_name_a_changed_signature_and_an_unassigned_attribute_are_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(_pytest.junitxml, "xml_key")
    monkeypatch.setattr(_pytest.config.findpaths, "determine_setup", lambda *, inifile, args, rootdir_cmd_arg: None)
    monkeypatch.delattr(_pytest.terminal.TerminalReporter, "_report_keyboardinterrupt")

    def init(self, config, file=None):  # the reporter without its terminal writer
        self.config = config

    monkeypatch.setattr(_pytest.terminal.TerminalReporter, "__init__", init)
    assert pytest_adapter.missing() == [
        "_pytest.junitxml.xml_key: missing",
        "_pytest.config.findpaths.determine_setup(*, inifile, override_ini, args, rootdir_cmd_arg, invocation_dir): "
        "parameters are now (*, inifile, args, rootdir_cmd_arg)",
        "_pytest.terminal.TerminalReporter._tw: never assigned",
        "_pytest.terminal.TerminalReporter._report_keyboardinterrupt(self): missing",
    ]


def test_without_the_private_key_there_is_no_junit_writer(monkeypatch: pytest.MonkeyPatch,
                                                          pytestconfig: pytest.Config) -> None:
    monkeypatch.delattr(_pytest.junitxml, "xml_key")
    assert pytest_adapter.junit_writer(pytestconfig) is None


def test_determine_setup_finds_this_checkout_s_configuration(pytestconfig: pytest.Config) -> None:
    rootpath, inipath = pytest_adapter.determine_setup(pytestconfig, [str(pytestconfig.rootpath / "tests")])
    assert (rootpath, inipath) == (pytestconfig.rootpath, pytestconfig.inipath)


def test_an_interruption_the_plugin_made_ends_with_its_line_instead_of_pytest_s_banner(
        pytestconfig: pytest.Config) -> None:
    """On a real terminal reporter: what its end of session calls writes the plugin's line, never the banner."""
    import io

    written = io.StringIO()
    reporter = _pytest.terminal.TerminalReporter(pytestconfig, written)
    assert pytest_adapter.can_replace_interrupt_report(reporter)
    said: list[str] = []
    pytest_adapter.replace_interrupt_report(reporter, lambda: said.append("ours"))
    assert reporter._keyboardinterrupt_memo is not None  # the end of the session calls the report
    reporter._report_keyboardinterrupt()
    assert said == ["ours"] and written.getvalue() == ""
    assert _pytest.terminal.TerminalReporter._report_keyboardinterrupt is not reporter._report_keyboardinterrupt


def test_closing_lines_name_the_stop_and_leave_other_interruptions_alone() -> None:
    stop = KeyboardInterrupt.__new__(type("Interrupted", (KeyboardInterrupt,), {}))
    stop.args = ("sab-pytest: the priced usage reached --sab-budget $2 ($2.1 spent)",)
    assert terminal.closing_line(stop) == (
        "exit status 2: the priced usage reached --sab-budget $2 ($2.1 spent); the cases that finished are kept in "
        "the results and the summary, and the same command with --sab-resume runs the rest")
    assert terminal.closing_line(KeyboardInterrupt("SIGTERM")).startswith("exit status 2: SIGTERM; ")
    assert terminal.closing_line(KeyboardInterrupt()).startswith("exit status 2: Ctrl-C; ")
    other = type("Interrupted", (KeyboardInterrupt,), {})("1 error during collection")  # pytest's own stop
    assert terminal.closing_line(other) is None and terminal.closing_line(ValueError("x")) is None
    pending = type("Interrupted", (KeyboardInterrupt,), {})("sab-pytest: submitted; run again with --sab-resume")
    assert terminal.closing_line(pending) == "exit status 2: submitted; run again with --sab-resume"
