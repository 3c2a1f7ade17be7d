"""The rules of ``junit-10.xsd`` (the schema of Jenkins' xUnit plugin, which pytest's own tests
validate its default ``xunit2`` output against), written out here as a small validator.

No installable package ships that schema, and nothing fetched from a public repository is committed
to this project, so the rules that decide whether a strict reader accepts a file are restated below
in our own words: which elements may appear under which, which attributes each may carry (and which
it must), that a testsuite's ``time`` is a number of seconds, and that the text elements hold text
only. ``errors(path)`` lists every breach, as a schema validator would report them (an empty list:
the file is valid)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Rule:
    """What one element may hold: its child elements, its attributes, those it must have; ``text``
    says whether it may hold text (the others hold only whitespace between their children)."""

    children: frozenset[str] = frozenset()
    attributes: frozenset[str] = frozenset()
    required: frozenset[str] = frozenset()
    text: bool = False


def _rule(children: str = "", attributes: str = "", required: str = "", text: bool = False) -> Rule:
    return Rule(frozenset(children.split()), frozenset((attributes + " " + required).split()),
                frozenset(required.split()), text)


_OUTCOME = _rule(attributes="type message", text=True)  # failure, error, skipped: a message and a text
_RERUN = _rule(children="stackTrace system-out system-err", attributes="message", required="type", text=True)
RULES: dict[str, Rule] = {
    "testsuites": _rule("testsuite", "name time tests failures errors"),
    "testsuite": _rule("testsuite properties testcase system-out system-err",
                       "group time skipped timestamp hostname id package file log url version",
                       "name tests failures errors"),
    "properties": _rule("property"),
    "property": _rule(required="name value"),
    "testcase": _rule("skipped error failure rerunFailure rerunError flakyFailure flakyError system-out system-err",
                      "time classname group", "name"),
    "failure": _OUTCOME, "error": _OUTCOME, "skipped": _OUTCOME,
    "rerunFailure": _RERUN, "rerunError": _RERUN, "flakyFailure": _RERUN, "flakyError": _RERUN,
    "stackTrace": _rule(text=True), "system-out": _rule(text=True), "system-err": _rule(text=True),
}
#: a duration as Maven Surefire writes it (the schema's type of a suite's ``time``): digits, optional
#: thousands commas, an optional fraction of at most three digits
SUREFIRE_TIME = re.compile(r"(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]{0,3})?")


def errors(path: Path) -> list[str]:
    """Every breach of the rules in the JUnit file at ``path``, one line each, naming the element."""
    root = ET.parse(path).getroot()
    if root.tag not in ("testsuites", "testsuite"):
        return [f"root element <{root.tag}> is neither <testsuites> nor <testsuite>"]
    found: list[str] = []
    _check(root, f"/{root.tag}", found)
    return found


def _check(element: ET.Element, where: str, found: list[str]) -> None:
    rule = RULES[element.tag]
    for name in sorted(set(element.attrib) - rule.attributes):
        found.append(f"{where}: attribute {name!r} is not allowed")
    for name in sorted(rule.required - set(element.attrib)):
        found.append(f"{where}: attribute {name!r} is required")
    if element.tag in ("testsuite", "testsuites") and "time" in element.attrib \
            and not SUREFIRE_TIME.fullmatch(element.attrib["time"]):
        found.append(f"{where}: time {element.attrib['time']!r} is not a duration")
    if not rule.text and (element.text or "").strip():
        found.append(f"{where}: holds text, which <{element.tag}> may not")
    for index, child in enumerate(element):
        here = f"{where}/{child.tag}[{index}]"
        if child.tag not in rule.children:
            found.append(f"{here}: <{child.tag}> is not allowed in <{element.tag}>")
            continue
        if not rule.text and (child.tail or "").strip():
            found.append(f"{here}: text after it, which <{element.tag}> may not hold")
        _check(child, here, found)
