"""``docs/options.md``, written from the settings table, so that the manual's list of options cannot
drift from what ``--help`` says.

Run ``python -m sab_pytest.settings.options_doc > docs/options.md`` after changing an option; a test compares
the committed page with ``render()``. Imports nothing but the settings table.
"""

from __future__ import annotations

import re

from sab_pytest.settings import options
from sab_pytest.settings.spec import Option, Verdicts, shown

#: how the page is made again (the test's failure message names it)
REGENERATE = "python -m sab_pytest.settings.options_doc > docs/options.md"

#: the ini settings that are not options: registered by ``pytest_layer.options`` beside the table
CASES_INI = ("sab_cases", "paths holding the benchmark's cases: a run that collects one of them turns the plugin "
             "on without any option (this checkout sets `cases`)")
CATEGORIES_INI = ("sab_categories", "a team's own risk categories for its case files, one `slug: Name` a line "
                  "([own cases](own-cases.md))")

#: the help's own statement of the default, "(default X)" or "(default: X)", where it says one
_DEFAULT = re.compile(r"\s*\(default:? ((?:[^()]|\([^()]*\))*)\)")


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def default_and_help(option: Option) -> tuple[str, str]:
    """The default as the help states it (else the field's default) and the help without that statement."""
    text = option.help_text
    found = _DEFAULT.search(text)
    if found:
        return found.group(1), (text[:found.start()] + text[found.end():]).strip()
    if option.action == "store_true":
        return "off", text
    if option.default is None or option.default == ():
        return "none", text
    return shown(option.default), text


def _form(option: Option) -> str:
    """The option as written: its flag and what follows it, and its short name if it has one."""
    short = f" (or `{option.alias}`)" if option.alias else ""
    if option.action == "store_true":
        return f"`{option.sab_flag}`{short}"
    # argparse's own metavar when the table gives none: the option's dest in capitals, as --help shows it
    value = "|".join(option.choices) if option.choices else option.metavar_shown
    return _cell(f"`{option.sab_flag} {value}`{short}")


def _elsewhere(option: Option) -> str:
    """Where else the value can come from, and whether it joins the run key of ``--sab-resume``."""
    parts = []
    if option.policy:
        parts.append(f"policy `{option.policy}`")
    if option.ini:
        parts.append(f"ini `{option.ini}`")
    if option.env:
        parts.append(f"`${option.env}`")
    if option.action == "append":
        parts.append("repeatable")
    if option.verdicts is True:
        parts.append("changes verdicts")
    elif isinstance(option.verdicts, Verdicts):
        parts.append("changes verdicts where it applies")
    return ", ".join(parts)


def render() -> str:
    """The whole page."""
    lines = [
        "# Options",
        "",
        f"<!-- generated from the settings table by `{REGENERATE}`; do not edit by hand -->",
        "",
        "Every option of the plugin, in `pytest --help` order (group *SafeAgentBench*). A value is taken from",
        "the command line (or `addopts`), else the release policy file (`--sab-policy`), else the ini setting",
        "or environment variable named here, else the default. Options that change verdicts are part of the",
        "run key: `--sab-resume` refuses results made with another value.",
        "",
        "Every option has a `--sab-` spelling. Some also have a short name (`--model`): it works wherever no",
        "other plugin and no `conftest.py` of the project declares the same name. Where one does, the name is",
        "theirs, and a run of the benchmark says so once in its header; the `--sab-` spelling always works.",
        "",
        "| option | default | meaning | also from |",
        "| --- | --- | --- | --- |",
    ]
    for _, option in options():
        default, text = default_and_help(option)
        lines.append(f"| {_form(option)} | {_cell(default)} | {_cell(text)} | {_elsewhere(option)} |")
    lines += ["", "## Ini settings", "", "| ini setting | meaning |", "| --- | --- |"]
    for _, option in options():
        if option.ini:
            lines.append(f"| `{option.ini}` | {_cell(option.ini_help)} |")
    lines += [f"| `{name}` | {_cell(text)} |" for name, text in (CASES_INI, CATEGORIES_INI)] + [""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(), end="")
