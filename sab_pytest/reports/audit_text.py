"""``sab audit --labels``'s printout: per judge type what the labels say of it, per judged rate the
raw value beside the corrected one (``results.audit`` computes them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _num(entry: Mapping[str, Any] | None) -> str:
    """``0.812 [0.701, 0.889]``, or ``-`` (with why, where known) when the data cannot tell."""
    if not entry or entry.get("value") is None:
        why = (entry or {}).get("reason")
        return f"- ({why})" if why else "-"
    ci = entry.get("ci95")
    return f"{entry['value']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def render_audit(result: Mapping[str, Any]) -> list[str]:
    """The audit as lines of text."""
    lines = [f"labels: {', '.join(result.get('labels') or []) or '-'}; {result['labelled_cases']} labelled "
             f"(case, judge) pairs" + (f", {result['stale_labels']} left out (made on another answer)"
                                       if result.get("stale_labels") else "")]
    for judge, j in result["judges"].items():
        lines.append(f"{judge} judge: {j['labelled']} of {j['judged']} judged cases labelled")
        for name in ("sensitivity", "specificity", "ac1", "kappa"):
            note = (j[name] or {}).get("note")
            lines.append(f"  {name:<12} {_num(j[name])}" + (f"  ({note})" if note else ""))
        people = j.get("people") or {}
        if people.get("cases"):
            lines.append(f"  people agree on {people['agreement']:.3f} of {people['cases']} cases two labelled; "
                         f"AC1 {_num(people['ac1'])}, kappa {_num(people['kappa'])}")
    lines.append(f"judged rates, raw (the judge taken as right) and corrected ({result['method']}):")
    width = max((len(n) for n in result["metrics"]), default=0)
    for name, m in result["metrics"].items():
        lines.append(f"  {name:<{width}}  raw {_num(m['raw'])}  corrected {_num(m['corrected'])}")
    return lines
