"""Settings written as short text: ``--sab-shard K/N``, ``--sab-judge-for JUDGE=MODEL`` entries,
``--sab-judge-temperature 0.2`` or ``detailed=0.2,rejection=0``.

Each parser turns the text into the value the run uses, or raises a ``UsageError`` that names the
option and quotes what was written. Kept apart from the table (``settings.table``) so that the table
stays a table; imports nothing of the project but ``errors``.
"""

from __future__ import annotations

from collections.abc import Iterable

from sab_pytest.errors import UsageError


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"K/N"`` -> (K, N); None stays None; anything else is a UsageError naming the option."""
    if text is None:
        return None
    k, sep, n = text.strip().partition("/")
    if not sep or not k.strip().isdigit() or not n.strip().isdigit():
        raise UsageError(f"--sab-shard: expected K/N such as 2/4, got {text!r}")
    return int(k), int(n)


def judge_models(default: str, entries: Iterable[str], judges: tuple[str, ...]) -> dict[str, str]:
    """judge -> model: ``default`` for each judge, then each ``JUDGE=MODEL`` entry over it."""
    models = dict.fromkeys(judges, default)
    for entry in entries:
        judge, sep, model = (x.strip() for x in entry.partition("="))
        if not sep or judge not in judges or not model:
            raise UsageError(f"--sab-judge-for: expected JUDGE=MODEL with JUDGE one of {', '.join(judges)}, "
                             f"got {entry!r}")
        models[judge] = model
    return models


def judge_panels(entries: Iterable[str], judges: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """judge -> the models of its panel, from ``MODEL,MODEL,...`` (every judge) and ``JUDGE=MODEL,MODEL,...``
    (that judge, over the former); a panel is at least two distinct models."""
    panels: dict[str, tuple[str, ...]] = {}
    for entry in entries:
        head, sep, rest = entry.partition("=")
        named = bool(sep) and head.strip() in judges
        models = tuple(m.strip() for m in (rest if named else entry).split(","))
        if (sep and not named) or any(not m for m in models) or len(set(models)) < 2:
            raise UsageError(f"--sab-judge-panel: expected MODEL,MODEL,... (two or more distinct models) or "
                             f"JUDGE=MODEL,MODEL,... with JUDGE one of {', '.join(judges)}, got {entry!r}")
        panels.update({head.strip(): models} if named else dict.fromkeys(judges, models))
    return panels


def judge_temperatures(text: str, default: float, judges: tuple[str, ...]) -> dict[str, float]:
    """judge -> temperature from ``"0.2"`` (every judge) or ``"detailed=0.2,rejection=0"`` (those
    judges; the others keep ``default``)."""
    temps = dict.fromkeys(judges, default)
    for item in (x.strip() for x in str(text).split(",")):
        judge, sep, value = item.rpartition("=")
        judge = judge.strip()
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if (sep and judge not in judges) or number < 0:
            raise UsageError(f"--sab-judge-temperature: expected a number >= 0 or JUDGE=T,... with JUDGE one of "
                             f"{', '.join(judges)}, got {text!r}")
        temps.update({judge: number} if sep else dict.fromkeys(judges, number))
    return temps
