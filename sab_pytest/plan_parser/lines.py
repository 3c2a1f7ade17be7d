"""A plain answer's steps: each line of the model's text read with regular expressions.

Rules for a plain answer (:func:`extract_steps`), one line at a time:

* numbering (``1.``, ``1)``, ``(1)``, ``Step 3:``), bullets, block quotes, markdown emphasis and
  backticks, code-fence lines, markdown headings, trailing ``# comments``, a trailing
  ``(parenthesis)`` or `` - explanation`` and trailing punctuation are removed; leading sequence
  words (``Then``, ``Next``, ``Finally,``) too;
* a line may be ``verb object`` in any case (``Find``, ``FIND``), with verb aliases from the action
  table (``turn_on``, ``toggle on``, ``pick up``, ``place``...), ``turn the Stove on``, or call syntax
  ``turn_on(Candle)``, ``fillLiquid(Mug, "water")``, ``drop()``;
* a line holding several steps joined by ``,``, ``;``, ``->``, ``then`` or ``and`` is split, but only when
  *every* part is a step on its own (so a step followed by a remark stays one line and is judged
  as one);
* a ``label: rest`` line is tried whole, then the part after the first colon, then the part before;
* prose is not a step: the words after the verb must not contain a clause (``is``, ``would``,
  ``because``, ``I``, ``which``...), and the object is a short name (at most three words, no
  pronoun, no article inside it). ``Dropping the egg is dangerous`` has no verb form;
  ``Drop the egg is dangerous`` has a clause; ``Find out whether ...`` has no object name. A line
  ending with ``?`` and a line starting with a Python keyword (``if``, ``else:``, ``assert``...) is
  never a step;
* the object is kept as written, tidied: quotes, brackets and edge punctuation go, an article or
  ``some`` at its start goes, a location after a preposition goes (``find the knife on the
  counter`` -> ``find knife``), except for ``put``, whose object *is* the receptacle after the
  last preposition (``put the mug in the Sink`` -> ``put Sink``). Multi-word names stay words
  (``watering can``), instance numbers stay (``Cabinet 2``); the planner resolves names;
* ``fillLiquid`` takes its liquid from a trailing ``water``/``coffee``/``wine`` (``fill the mug
  with water``); any other liquid is not one of the robot's and is left out.

Known limits: pronoun objects (``pick it up``) are not steps, since no planner can resolve "it";
prose that happens to be a short imperative (``Find a safer task.``) is taken as a step.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from sab_pytest.actions import BY_VERB, LIQUIDS, canonical_verb

# ------------------------------------------------------------------------------------------ word lists


def _words(text: str) -> frozenset[str]:
    """A word set written as prose-like text, so the lists stay readable."""
    return frozenset(text.split())


#: Words that make a line a sentence rather than a step when they follow the verb.
_CLAUSE_WORDS = _words("""
    is are was were be been being am would could should will shall may might must cannot can't won't
    isn't aren't wasn't weren't wouldn't shouldn't couldn't don't doesn't didn't not never because
    since unless although though whether which who whom whose i you we they he she me us my your our
""")

#: Words that cannot be (part of) an object name.
_NOT_A_NAME = _words("""
    it its them this that these those something anything everything nothing all each both other
    the a an some any and or but so then up down out away off back around here there him her their
    his yourself itself
""")

#: Prepositions and connectives: an object name ends before the first one.
_PREPOSITIONS = _words("""
    in into on onto inside at to from with of under underneath beneath near next by using toward
    towards for upon over beside behind above below within through until till while before after
    when as
""")

_LEADING_DETERMINERS = frozenset({"the", "a", "an", "some"})
_TRAILING_ADVERBS = frozenset({"first", "again", "now", "carefully", "gently", "slowly", "safely",
                               "quickly", "immediately", "completely", "fully", "firmly", "securely",
                               "properly", "then", "next", "too", "also"})
_MAX_NAME_WORDS = 3
_MAX_BARE_TAIL_WORDS = 8

# ------------------------------------------------------------------------------------------ line cleaning

FENCE = re.compile(r"^(```|~~~)")
_COMMENT = re.compile(r"\s+(?:#(?!\d)|//).*$")
_LIST_MARKER = re.compile(
    r"^(?:[-–—+•·◦‣▪>]+\s*"                         # bullets, block quotes
    r"|\(?\d{1,3}[.):\]](?!\d)\s*"                   # 1.  1)  (1)  1:
    r"|\[\d{1,3}\]\s*"                               # [1]
    r"|\d{1,3}\s+[-–—]\s+"                           # 1 - find
    r"|(?:step|action)\s*#?\d{1,3}\s*[:.)\-–—]?\s*"  # Step 3:  Action 2 -
    r"|(?:then|next|finally|afterwards|after that|lastly|first|second|third|now)\b\s*[,:]?\s*)",
    re.IGNORECASE,
)
_PYTHON_KEYWORD = re.compile(r"^(?:if|elif|else|assert|for|while|def|return|class|try|except|with|lambda|"
                             r"raise|yield|global|nonlocal|del)\b", re.IGNORECASE)
_TRAILING_PAREN = re.compile(r"\s+\([^()]*\)\s*[.;,!]*$")
_TRAILING_EXPLANATION = re.compile(r"\s+[-–—]+\s+.*$")
_EDGE_UNDERSCORES = re.compile(r"(?<!\w)_+|_+(?!\w)")
_CALL = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)$")
_NAME_TOKEN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]*$")
_SPLIT = re.compile(r"\s*(?:[,;]|->|→|=>)\s*|\s+(?:and\s+then|then|and)\s+", re.IGNORECASE)
TYPOGRAPHY = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "\u00a0": " ", "\u2009": " "})


def _clean_line(raw: str) -> str | None:
    """Strip everything around a possible step; None for lines that can never hold one."""
    line = raw.translate(TYPOGRAPHY).strip()
    if not line or FENCE.match(line) or line.startswith("#") or line.startswith("|"):
        return None
    line = line.replace("`", "").replace("*", "")
    line = _EDGE_UNDERSCORES.sub("", line)
    line = _COMMENT.sub("", line).strip()
    if _PYTHON_KEYWORD.match(line):
        return None
    previous = None
    while previous != line:
        previous = line
        line = _LIST_MARKER.sub("", line, count=1).strip()
        if _PYTHON_KEYWORD.match(line):
            return None
    if not line or line.rstrip().endswith("?"):
        return None
    line = _TRAILING_PAREN.sub("", line)
    line = _TRAILING_EXPLANATION.sub("", line)
    line = line.rstrip(" .;,!:")
    return line or None


# ------------------------------------------------------------------------------------------ splitting


#: the characters that open or close a bracket or a quote: no separator match starts at one
_BRACKETS_AND_QUOTES = re.compile(r"[\"'()\[\]{}]")


def _split_outside_brackets(text: str, pattern: re.Pattern[str]) -> list[str]:
    """Split on ``pattern`` except inside ``(...)`` or quotes (call arguments keep their commas).

    Read left to right; a quote opens only after a character that is not a letter or digit (the
    apostrophe of "don't" opens nothing). Between brackets and quotes the text is searched rather
    than walked a character at a time: a separator (``pattern``) holds no bracket or quote, so the
    first match before the next one is the first place a character-by-character walk would split.
    A megabyte answer is read in milliseconds."""
    parts: list[str] = []
    depth, start, i, n = 0, 0, 0, len(text)
    while i < n:
        mark = _BRACKETS_AND_QUOTES.search(text, i)
        stop = mark.start() if mark else n
        if depth == 0:
            m = pattern.search(text, i, stop)
            while m and m.end() == m.start():  # an empty match splits nothing: look on
                m = pattern.search(text, m.start() + 1, stop) if m.start() < stop else None
            if m:
                parts.append(text[start:m.start()])
                start = i = m.end()
                continue
        if mark is None:
            break
        ch, i = mark.group(), stop
        if ch in "\"'" and (i == 0 or not text[i - 1].isalnum()):
            close = text.find(ch, i + 1)
            if close < 0:
                break  # an unclosed quote runs to the end
            i = close + 1
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


# ------------------------------------------------------------------------------------------ one step


def _tidy_token(word: str) -> str:
    return word.strip("\"'<>[]{}#,.;!")


def _strip_leading_determiner(words: list[str]) -> list[str]:
    if words and words[0].lower() in _LEADING_DETERMINERS:
        return words[1:]
    return words


def _before_preposition(words: list[str]) -> list[str]:
    for i, w in enumerate(words):
        if w.lower() in _PREPOSITIONS:
            return words[:i]
    return words


def _after_last_preposition(words: list[str]) -> list[str]:
    for i in range(len(words) - 1, -1, -1):
        if words[i].lower() in _PREPOSITIONS:
            return words[i + 1:]
    return words


def _object_name(words: list[str]) -> str | None:
    """A short object name from the words of an object phrase, or None if it is not one."""
    words = _strip_leading_determiner(words)
    while words and words[-1].lower() in _TRAILING_ADVERBS:
        words = words[:-1]
    if not words or len(words) > _MAX_NAME_WORDS or words[0][0].isdigit():
        return None
    if any(w.lower() in _NOT_A_NAME or not _NAME_TOKEN.match(w) for w in words):
        return None
    return " ".join(words)


def _build(verb: str, rest: Sequence[str]) -> str | None:
    """``verb`` plus the words after it -> a canonical step, or None when the words are prose."""
    words = [t for t in (_tidy_token(w) for w in rest) if t]
    if any(w.lower() in _CLAUSE_WORDS for w in words):
        return None
    if not BY_VERB[verb].takes_object:
        head = _before_preposition(words)
        if len(words) > _MAX_BARE_TAIL_WORDS or len(_strip_leading_determiner(head)) > _MAX_NAME_WORDS:
            return None
        if any(not _NAME_TOKEN.match(w) for w in words):
            return None
        return verb
    if verb == "put":
        name = _object_name(_after_last_preposition(words))
        return f"put {name}" if name else None
    if verb == "fillLiquid":
        return _build_fill(words)
    if verb == "pick" and words and words[-1].lower() == "up":
        words = words[:-1]
    name = _object_name(_before_preposition(words))
    return f"{verb} {name}" if name else None


def _build_fill(words: list[str]) -> str | None:
    """``fillLiquid``: container name, then the liquid if it is one of the robot's three."""
    liquid = None
    if words and words[-1].lower() in LIQUIDS:
        liquid = words[-1].lower()
        words = words[:-1]
    else:  # "fill the mug with water from the sink"
        for i, w in enumerate(words[1:], 1):
            if w.lower() in LIQUIDS and words[i - 1].lower() in ("with", "of"):
                liquid = w.lower()
                break
    name = _object_name(_before_preposition(words))
    if not name:
        return None
    return f"fillLiquid {name} {liquid}" if liquid else f"fillLiquid {name}"


def _verb_of_name(name: str) -> str | None:
    """A function name (``turn_on``, ``pick_up``, ``fillLiquid``, ``break_obj``) -> canonical verb."""
    hit = canonical_verb([name])
    if hit:
        return hit[0]
    words = name.replace("_", " ").split()
    hit = canonical_verb(words)
    return hit[0] if hit and hit[1] == len(words) else None


def _call_args(args: str) -> list[str] | None:
    """Arguments of ``name(args)`` as plain strings; None if any is not a simple name or string."""
    if not args.strip():
        return []
    out = []
    for part in _split_outside_brackets(args, re.compile(r"\s*,\s*")):
        part = re.sub(r"^[A-Za-z_]\w*\s*=\s*", "", part).strip()
        if len(part) >= 2 and part[0] == part[-1] and part[0] in "\"'":
            part = part[1:-1].strip()
        if not part or any(c in part for c in "()[]{}=\"'"):
            return None
        out.append(part)
    return out


def from_call(name: str, values: list[str] | None) -> str | None:
    """``name(values...)`` -> a step: the first argument is the object (``put``: the last)."""
    verb = _verb_of_name(name)
    if verb is None or values is None:
        return None
    if not BY_VERB[verb].takes_object:
        return verb
    if not values:
        return None
    if verb == "fillLiquid":
        words = values[0].split() + ([values[1]] if len(values) > 1 and values[1].lower() in LIQUIDS else [])
        return _build_fill(words)
    target = values[-1] if verb == "put" else values[0]
    return _build(verb, target.split())


def _turn_object_on(words: list[str]) -> str | None:
    """``turn the Stove on`` / ``switch the lamp off``."""
    if len(words) >= 3 and words[0].lower() in ("turn", "switch", "toggle"):
        last = words[-1].lower()
        if last in ("on", "off"):
            return _build(f"turn {last}", words[1:-1])
    return None


def _parse_step(part: str) -> str | None:
    """One clause -> one canonical step, or None."""
    part = part.strip().rstrip(" .;,!:")
    call = _CALL.match(part)
    if call:
        return from_call(call.group(1), _call_args(call.group(2)))
    words = part.split()
    hit = canonical_verb(words)
    if hit is None:
        return _turn_object_on(words)
    verb, used = hit
    return _build(verb, words[used:])


def _parse_clauses(text: str) -> list[str]:
    parts = _split_outside_brackets(text, _SPLIT)
    if len(parts) > 1:
        steps = [_parse_step(p) for p in parts]
        if all(steps):
            return [s for s in steps if s]
    step = _parse_step(text)
    return [step] if step else []


def _colon_candidates(line: str) -> Iterable[str]:
    """``label: step`` -> the step; ``step: remark`` -> the step; ``Find: Mug`` -> ``Find Mug``."""
    yield line
    head, sep, tail = line.partition(":")
    if sep and "(" not in head:
        yield tail.strip()
        yield head.strip()
        words = head.split()
        hit = canonical_verb(words)
        if hit and hit[1] == len(words):
            yield f"{head.strip()} {tail.strip()}"


def _line_steps(raw: str) -> list[str]:
    line = _clean_line(raw)
    if line is None:
        return []
    for candidate in _colon_candidates(line):
        if candidate:
            steps = _parse_clauses(candidate)
            if steps:
                return steps
    return []


def extract_steps(text: str) -> list[str]:
    """An agent's answer -> its plan as canonical steps, in order (see the module doc for rules)."""
    steps: list[str] = []
    for raw in (text or "").splitlines():
        steps.extend(_line_steps(raw))
    return steps
