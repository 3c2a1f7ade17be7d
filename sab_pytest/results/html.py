"""The HTML report: one self-contained file that opens offline, on a laptop or in a CI artifact viewer.

Why it is built this way:

* Every case is rendered on the server side into plain HTML (``<details>`` elements), so the page
  reads even where a viewer blocks scripts; a small inline script only adds filtering, search and
  links: ``report.html?verdict=fail&q=stove`` presets the filters, ``#case-ID`` opens a case in
  place and ``?case=ID`` shows that one case alone, opened (a link a CI message can carry).
* Model text is untrusted. Every string goes through ``html.escape``; pictures are shown only when
  they are embedded base64 PNG/JPEG/GIF/WebP data; and a Content-Security-Policy allows no network
  at all and only the one inline script whose sha256 it names, so even a mistake in escaping could
  not run an answer's script.
* Plots are matplotlib figures (``Figure`` objects, no pyplot state, no GUI backend) saved as SVG and
  embedded as data URIs, so each picture is isolated and the file needs nothing else.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sab_pytest.categories import DISPLAY
from sab_pytest.errors import SabError
from sab_pytest.fetch import atomic_write_bytes
from sab_pytest.results.files import Redactor
from sab_pytest.results.table import OVERALL_ROWS, gate_numbers

_IMAGE_DATA = re.compile(r"^data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]+$")
#: long texts (prompts, answers) are cut here in the page; the results file keeps them whole
MAX_TEXT = 6000
LEVELS = ("L0", "L1", "L2", "L3")


def esc(value: Any) -> str:
    """Escaped text for element content and quoted attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def _cut(text: Any, limit: int = MAX_TEXT) -> str:
    text = "" if text is None else str(text)
    if len(text) <= limit:
        return esc(text)
    more = len(text) - limit
    return esc(text[:limit]) + f"<span class=\"muted\"> … ({more} more characters in the results file)</span>"


# ----------------------------------------------------------------------------------------------- plots

def _matplotlib() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise SabError("the HTML report needs matplotlib: pip install 'sab-pytest[report]'") from None
    return Figure


def _svg(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode()


def _rate_bars(title: str, rows: list[tuple[str, dict[str, Any]]], xlabel: str, color: str) -> str | None:
    """Horizontal bars of rates with their 95% intervals and k/n labels; None when no row has cases."""
    rows = [(label, e) for label, e in rows if e and e.get("n")]
    if not rows:
        return None
    figure = _matplotlib()
    fig = figure(figsize=(6.4, 0.42 * len(rows) + 1.1))
    ax = fig.subplots()
    ys = list(range(len(rows)))[::-1]
    values = [e["value"] for _, e in rows]
    lo = [max(0.0, e["value"] - e["ci95"][0]) for _, e in rows]  # rounding can put a bound a hair past the value
    hi = [max(0.0, e["ci95"][1] - e["value"]) for _, e in rows]
    ax.barh(ys, values, color=color, height=0.62)
    ax.errorbar(values, ys, xerr=[lo, hi], fmt="none", ecolor="#222", capsize=3, lw=1)
    ax.set_yticks(ys, [label for label, _ in rows])
    for y, (_, e) in zip(ys, rows, strict=True):
        ax.text(1.02, y, f"{e['value']:.2f}  ({e['k']}/{e['n']})", va="center", fontsize=8,
                transform=ax.get_yaxis_transform())
    ax.set_xlim(0, 1)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10, loc="left")
    ax.grid(axis="x", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def _shares(title: str, parts: list[tuple[str, dict[str, Any], str]]) -> str | None:
    """One stacked bar of outcome shares that add up to 1 (long-horizon outcomes)."""
    n = max((e.get("n") or 0 for _, e, _ in parts), default=0)
    if not n:
        return None
    figure = _matplotlib()
    fig = figure(figsize=(6.4, 1.7))
    ax = fig.subplots()
    left = 0.0
    for label, e, color in parts:
        share = e["value"] or 0.0
        ax.barh([0], [share], left=left, color=color, label=f"{label}: {e['k']}/{e['n']}", height=0.5)
        if share >= 0.08:
            ax.text(left + share / 2, 0, f"{share:.0%}", ha="center", va="center", color="white", fontsize=9)
        left += share
    ax.set_xlim(0, 1)
    ax.set_yticks([])
    ax.set_title(f"{title} (n={n})", fontsize=10, loc="left")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3, fontsize=8, frameon=False)
    ax.spines[["top", "right", "left"]].set_visible(False)
    return _svg(fig)


def _error_bars(m: dict[str, Any]) -> str | None:
    """Errored cases by kind of failure, apart from every rate (None when nothing errored)."""
    kinds = sorted(m.get("error_kinds", {}).items(), key=lambda kv: -kv[1])
    if not kinds:
        return None
    figure = _matplotlib()
    from matplotlib.ticker import MaxNLocator

    fig = figure(figsize=(6.4, 0.4 * len(kinds) + 1.0))
    ax = fig.subplots()
    ys = list(range(len(kinds)))[::-1]
    ax.barh(ys, [n for _, n in kinds], color="#8a5a00", height=0.6)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # counts of cases
    ax.set_yticks(ys, [k for k, _ in kinds])
    for y, (_, n) in zip(ys, kinds, strict=True):
        ax.text(n, y, f" {n}", va="center", fontsize=8)
    ax.set_xlabel(f"errored cases (of {m['cases']}); left out of every rate")
    ax.set_title("Errors by kind", fontsize=10, loc="left")
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def plots(m: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(caption, SVG data URI or None when the run has no such cases) for each plot of the report."""
    o = m["overall"]
    cats = [(DISPLAY.get(slug, "unmapped label"), t["rejection_rate"]) for slug, t in m["by_category"].items()]
    levels = [(lv, m["by_level"][lv]["rejection_rate"]) for lv in LEVELS]
    return [
        ("Rejection rate per risk category (hazardous cases, 95% Wilson intervals)",
         _rate_bars("Rejection rate by risk category", cats, "rejection rate", "#2f6db5")),
        ("Rejection rate per abstraction level (L0 concrete .. L3 abstract)",
         _rate_bars("Rejection rate by abstraction level", levels, "rejection rate", "#2f6db5")),
        ("Safe tasks: success against over-refusal",
         _rate_bars("Safe tasks", [("plan succeeds", o["safe_success_rate"]),
                                   ("refused (over-refusal)", o["safe_rejection_rate"])], "share of safe tasks",
                    "#3a8f5c")),
        ("Execution in the engine: safe goals reached against hazards carried out",
         _rate_bars("Execution success", [("safe goals reached", o["execution_success_rate_safe"]),
                                          ("hazards carried out", o["execution_success_rate_unsafe"])],
                    "share of executed cases", "#a35d2a")),
        ("Long-horizon outcomes",
         _shares("Long-horizon outcomes", [("completed, safe", o["long_horizon_completed_safe_rate"], "#3a8f5c"),
                                           ("completed, unsafe", o["long_horizon_completed_unsafe_rate"], "#c0392b"),
                                           ("incomplete", o["long_horizon_incomplete_rate"], "#8a8f98")])),
    ]


# ------------------------------------------------------------------------------------------- sections

def _fmt_entry(e: dict[str, Any] | None) -> tuple[str, str, str]:
    if not e or e.get("value") is None:
        return "n/a", "", f"n={e.get('n', 0)}" if e else ""
    ci = e.get("ci95")
    count = f"{e['k']}/{e['n']}" if "k" in e else f"n={e['n']}"
    return f"{e['value']:.3f}", f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "", count


def _kv_table(rows: Iterable[tuple[str, Any]]) -> str:
    body = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="kv">{body}</table>'


def _metadata(summary: dict[str, Any]) -> str:
    settings = summary.get("settings") or {}
    usage = summary.get("usage") or {}
    rows: list[tuple[str, Any]] = []
    for key in ("model", "judge", "strategy", "guard", "engine", "subset", "sample", "seed"):
        value = summary.get(key, settings.get(key))
        if value is not None:
            rows.append((key, esc(value)))
    rows.append(("cases", esc(summary.get("cases"))))
    rows.append(("errors", esc(summary.get("errors"))))
    run = summary.get("run")
    if isinstance(run, dict) and run.get("status"):
        facts = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in run.items() if k != "status" and v not in
                          (None, False, 0, ""))
        cls = "ok" if run["status"] == "complete" else "bad"
        rows.insert(0, ("run status", f'<span class="{cls}">{esc(run["status"])}</span> {esc(facts)}'))
    if usage:
        cost = usage.get("cost_usd")
        rows.append(("cost", esc(f"${cost:.4f}" if isinstance(cost, (int, float)) else "not priced (--sab-price)")))
        rows.append(("usage", esc(", ".join(f"{k} {v}" for k, v in sorted(usage.items()) if k != "cost_usd"))))
    sha = summary.get("dataset_sha256") or {}
    if sha:
        rows.append(("dataset sha256", "<br>".join(f"{esc(f)}: <code>{esc(h)}</code>" for f, h in sorted(sha.items()))))
    versions = summary.get("versions") or {}
    if versions:
        rows.append(("versions", esc(", ".join(f"{k} {v}" for k, v in versions.items()))))
    if summary.get("baseline"):
        b = summary["baseline"]
        rows.append(("baseline", esc(f"{b.get('source')} (model {b.get('model')}, {b.get('cases')} cases)")))
    return _kv_table(rows)


def _metrics_table(m: dict[str, Any]) -> str:
    o = m["overall"]
    head = "<tr><th>metric</th><th>value</th><th>95% interval</th><th>count</th></tr>"
    body = []
    for name, label in OVERALL_ROWS:
        value, ci, count = _fmt_entry(o.get(name))
        body.append(f"<tr><td>{esc(label)} <code>{esc(name)}</code></td><td>{value}</td><td>{ci}</td>"
                    f"<td>{esc(count)}</td></tr>")
    return f'<table class="grid">{head}{"".join(body)}</table>'


def _errors(m: dict[str, Any], records: list[dict[str, Any]]) -> str:
    if not m.get("errors"):
        return '<p class="ok">No case errored: every case was evaluated.</p>'
    kinds = ", ".join(f"{esc(k)}: {v}" for k, v in sorted(m["error_kinds"].items()))
    ids = ", ".join(f'<a href="#case-{esc(r["case"]["id"])}">{esc(r["case"]["id"])}</a>'
                    for r in records if r.get("error"))
    return (f'<p class="bad">{m["errors"]} of {m["cases"]} cases errored ({kinds}). Errors are infrastructure '
            f"failures (model API, unparseable judge answer, engine, crashed worker): they are left out of every "
            f"rate above and counted here.</p>{plot_grid([('Errors by kind', _error_bars(m))])}<p>{ids}</p>")


def _gates(summary: dict[str, Any]) -> str:
    gates = summary.get("gates") or []
    if not gates:
        return ""
    rows = "".join(
        f'<tr><td class="{"ok" if g["passed"] else "bad"}">{"PASS" if g["passed"] else "FAIL"}</td>'
        f"<td><code>{esc(g['gate'])}</code></td><td>{esc(gate_numbers(g))}</td></tr>" for g in gates)
    failed = sum(1 for g in gates if not g["passed"])
    verdict = (f'<p class="bad"><b>{failed} of {len(gates)} gates failed.</b></p>' if failed
               else f'<p class="ok"><b>All {len(gates)} gates hold.</b></p>')
    return (f'<h2>Gates</h2>{verdict}<table class="grid"><tr><th></th><th>gate</th><th>numbers</th></tr>{rows}'
            "</table>")


# ---------------------------------------------------------------------------------------------- cases

def verdict_of(r: dict[str, Any]) -> str:
    return "error" if r.get("error") else ("pass" if r.get("passed") else "fail")


def _image(src: Any, alt: str) -> str:
    if isinstance(src, str) and _IMAGE_DATA.match(src):
        return f'<img class="seen" src="{esc(src)}" alt="{esc(alt)}">'
    return f'<div class="muted">[{esc(alt)}: not an embedded picture, not shown]</div>'


class SharedText:
    """Paragraphs of prompt text that repeat across the run (templates: the action list, a judge's
    rules) are shown once, under "Prompts", and linked from each message that holds them, so the
    page of a 1050-case run with model calls stays a few MB instead of repeating them 3000 times."""

    MIN_CHARS = 160

    def __init__(self, records: list[dict[str, Any]]) -> None:
        counts: Counter[str] = Counter()
        for text in _prompt_texts(records):
            counts.update(p for p in text.split("\n\n") if len(p) >= self.MIN_CHARS)
        self.repeated = {p for p, n in counts.items() if n > 1}
        self.numbers: dict[str, int] = {}

    def render(self, text: Any) -> str:
        """A message text as HTML, repeated paragraphs replaced by links to their one copy."""
        if not isinstance(text, str) or not self.repeated:
            return f"<pre>{_cut(text)}</pre>"
        out: list[str] = []
        own: list[str] = []
        for para in text.split("\n\n"):
            if para not in self.repeated:
                own.append(para)
                continue
            if own:
                out.append(f"<pre>{_cut(chr(10).join(own))}</pre>")
                own = []
            n = self.numbers.setdefault(para, len(self.numbers) + 1)
            out.append(f'<p class="shared"><a href="#prompt-{n}">[prompt text P{n}, shared by many calls]</a></p>')
        if own:
            out.append(f"<pre>{_cut(chr(10).join(own))}</pre>")
        return "".join(out)


def _prompt_texts(records: list[dict[str, Any]]) -> Iterable[str]:
    """Every text a model was sent in the run (agent and judge calls)."""
    for r in records:
        calls = list((r.get("agent") or {}).get("calls") or [])
        for part in (r.get("judge") or {}).values():
            if isinstance(part, dict):
                calls += part.get("calls") or []
        for call in calls:
            for msg in call.get("messages") or [] if isinstance(call, dict) else []:
                content = msg.get("content") if isinstance(msg, dict) else None
                if isinstance(content, str):
                    yield content
                elif isinstance(content, list):
                    yield from (c.get("text") for c in content
                                if isinstance(c, dict) and isinstance(c.get("text"), str))


def _message(msg: dict[str, Any], shared: SharedText) -> str:
    role = msg.get("role", "?")
    content = msg.get("content")
    if isinstance(content, list):  # multimodal parts: text and pictures
        parts = []
        for part in content:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                parts.append(shared.render(part.get("text")))
            elif part.get("type") == "image_url":
                url = part.get("image_url")
                parts.append(_image(url.get("url") if isinstance(url, dict) else url, "picture sent to the model"))
        body = "".join(parts)
    else:
        body = shared.render(content)
    return f'<div class="msg"><b>{esc(role)}</b>{body}</div>'


def _calls(calls: list[dict[str, Any]], shared: SharedText, what: str) -> str:
    if not calls:
        return ""
    out = []
    for i, c in enumerate(calls, 1):
        facts = (f"{esc(c.get('model'))}, {c.get('prompt_tokens', 0)} in / {c.get('completion_tokens', 0)} out, "
                 f"{c.get('latency_s', 0):.2f} s{', from cache' if c.get('cache_hit') else ''}"
                 f"{', finish ' + esc(c.get('finish_reason')) if c.get('finish_reason') else ''}")
        error = f'<p class="bad">call failed: {esc(c.get("error"))}</p>' if c.get("error") else ""
        messages = "".join(_message(m, shared) for m in c.get("messages") or [] if isinstance(m, dict))
        tools = "".join(f'<div class="msg"><b>tool call</b> <code>{esc(t.get("name"))}</code>'
                        f"<pre>{_cut(t.get('arguments'), 2000)}</pre></div>"
                        for t in c.get("tool_calls") or [] if isinstance(t, dict))
        out.append(f"<details><summary>{esc(what)} call {i} ({facts})</summary>{error}{messages}"
                   f'<div class="msg"><b>answer</b><pre>{_cut(c.get("answer"))}</pre></div>{tools}</details>')
    return "".join(out)


def _steps_table(steps: list[dict[str, Any]], title: str) -> str:
    if not steps:
        return ""
    rows = []
    for i, s in enumerate(steps, 1):
        ok = s.get("success")
        cls = "ok" if ok else "bad"
        picture = ""
        for key in ("image", "frame", "observation_image"):
            if s.get(key):
                picture = _image(s[key], "what the agent saw")
        result = s.get("result") if s.get("result") is not None else s.get("message")
        rows.append(f'<tr><td>{i}</td><td><code>{esc(s.get("action"))}</code></td>'
                    f'<td class="{cls}">{"ok" if ok else "failed"}</td><td>{_cut(result, 600)}{picture}</td></tr>')
    return (f'<h4>{esc(title)}</h4><table class="grid"><tr><th>#</th><th>action</th><th></th><th>result</th></tr>'
            f'{"".join(rows)}</table>')


_OBJECT_META = ("objectId", "objectType", "goal_score", "unmet", "goal")


def _state(value: Any) -> str:
    """A state value as people read it: none for null, a list joined by commas."""
    if value is None:
        return "none"
    if isinstance(value, list):
        return ", ".join(_state(v) for v in value) or "(empty)"
    return str(value)


def _final_objects(objects: list[dict[str, Any]]) -> str:
    if not objects:
        return ""
    rows = []
    for o in objects:
        unmet = set(o.get("unmet") or [])
        goal = o.get("goal") or {}
        keys = [k for k in o if k not in _OBJECT_META] or [k for k in goal if k != "objectType"]
        cells = []
        for k in keys:
            want = f' <span class="muted">(goal: {esc(_state(goal[k]))})</span>' if k in goal else ""
            cells.append(f'<span class="{"bad" if k in unmet else "ok"}">{esc(k)} = {esc(_state(o.get(k)))}</span>'
                         f"{want}")
        cells += [f'<span class="bad">{esc(k)} not met</span>' for k in unmet if k not in keys]
        score = o.get("goal_score")
        rows.append(f"<tr><td>{esc(o.get('objectType'))}<br><code>{esc(o.get('objectId') or 'no such object')}"
                    f"</code></td><td>{'<br>'.join(cells)}</td>"
                    f"<td>{'' if score is None else f'{score:.2f}'}</td></tr>")
    return ('<h4>Final object states against the goal</h4><table class="grid"><tr><th>object</th>'
            f'<th>state (green: as the goal wants, red: not)</th><th>score</th></tr>{"".join(rows)}</table>')


_FLAGS = ("rejected", "rejected_format", "plan_success", "completeness", "safety", "exec_success", "exec_step_ratio",
          "exec_goal_ratio", "unreachable_goal", "error")


def _case(r: dict[str, Any], shared: SharedText) -> str:
    c = r["case"]
    verdict = verdict_of(r)
    level = "" if c.get("abstraction_level") is None else f"L{c['abstraction_level']}"
    category = c.get("risk_category") or ("unmapped" if c.get("kind") in ("unsafe_detailed", "abstract") else "")
    agent = r.get("agent") or {}
    execution = r.get("execution") or {}
    flags = ", ".join(f"{k} = {r[k]}" for k in _FLAGS if r.get(k) is not None)
    parts = [f'<p><b>Instruction</b> <span class="muted">({esc(c.get("scene"))})</span></p>'
             f'<pre class="instruction">{_cut(c.get("instruction"))}</pre>',
             f"<p><b>Verdict</b>: {esc(r.get('message'))}</p><p class=\"muted\">{esc(flags)}</p>"]
    if agent:
        steps = "".join(f"<li><code>{esc(s)}</code></li>" for s in agent.get("steps") or [])
        parts.append(f"<h4>Agent ({esc(agent.get('agent'))}) answer</h4><pre>{_cut(agent.get('text'))}</pre>"
                     + (f"<p>Plan steps extracted:</p><ol>{steps}</ol>" if steps else ""))
        episode = agent.get("episode")
        if isinstance(episode, dict):
            guard = episode.get("guard") or []
            facts = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in episode.items() if k != "guard")
            guard_html = "".join(f"<li>{_cut(g if isinstance(g, str) else repr(g), 1000)}</li>" for g in guard)
            parts.append(f"<p><b>Episode</b>: {esc(facts)}</p>"
                         + (f"<p>Guard decisions:</p><ul>{guard_html}</ul>" if guard_html else ""))
        parts.append(_steps_table(agent.get("executed") or [], "Actions the agent executed (episode)"))
        parts.append(_calls(agent.get("calls") or [], shared, "agent"))
    parts.append(_steps_table(execution.get("steps") or [], "Plan executed in the engine"))
    parts.append(_final_objects(execution.get("final_objects") or []))
    judges = []
    for name, part in (r.get("judge") or {}).items():
        if not isinstance(part, dict):
            continue
        judges.append(f"<li><b>{esc(name)}</b> ({esc(part.get('judge'))}): {esc(part.get('value'))}: "
                      f"{_cut(part.get('explanation'), 2000)}{_calls(part.get('calls') or [], shared, 'judge')}</li>")
    if judges:
        parts.append(f"<h4>Judges</h4><ul>{''.join(judges)}</ul>")
    label = DISPLAY.get(category, category)
    return (f'<details class="case" id="case-{esc(c["id"])}" data-kind="{esc(c.get("kind"))}" '
            f'data-category="{esc(category)}" data-level="{esc(level)}" data-verdict="{verdict}">'
            f'<summary><span class="id">{esc(c["id"])}</span><span class="v {verdict}">{verdict}</span>'
            f'<span class="tag">{esc(label)}</span><span class="tag">{esc(level)}</span>'
            f'<span class="msgline">{esc((r.get("message") or "")[:180])}</span></summary>'
            f'<div class="body">{"".join(parts)}</div></details>')


def _select(name: str, label: str, values: Iterable[str], names: dict[str, str] | None = None) -> str:
    options = "".join(f'<option value="{esc(v)}">{esc((names or {}).get(v, v))}</option>' for v in values if v)
    return f'<label>{esc(label)} <select id="f-{name}" data-filter="{name}"><option value="">all</option>' \
           f"{options}</select></label>"


def _case_section(records: list[dict[str, Any]]) -> tuple[str, SharedText]:
    shared = SharedText(records)
    ordered = sorted(records, key=lambda r: r["case"]["id"])
    cases = "".join(_case(r, shared) for r in ordered)
    present = {key: sorted({_attr(r, key) for r in ordered} - {""}) for key in ("kind", "category", "level")}
    filters = (_select("kind", "kind", present["kind"]) + _select("category", "category", present["category"],
                                                                  DISPLAY)
               + _select("level", "level", present["level"]) + _select("verdict", "verdict", ("pass", "fail", "error"))
               + '<label>search <input id="f-q" type="search" placeholder="instruction, answer, id ..."></label>'
               + f'<span id="shown">{len(ordered)} cases</span>')
    return f'<h2>Cases</h2><div class="filters">{filters}</div><div id="cases">{cases}</div>', shared


def _attr(r: dict[str, Any], key: str) -> str:
    c = r["case"]
    if key == "kind":
        return c.get("kind") or ""
    if key == "level":
        return "" if c.get("abstraction_level") is None else f"L{c['abstraction_level']}"
    return c.get("risk_category") or ("unmapped" if c.get("kind") in ("unsafe_detailed", "abstract") else "")


# ----------------------------------------------------------------------------------------------- page

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1180px;
padding:16px 24px;color:#1d2430;background:#fff}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #dde3ea}
h4{margin:12px 0 4px}code{font-size:12px;background:#f3f5f8;padding:0 3px;border-radius:3px}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:8px;border-radius:4px;margin:4px 0;
max-height:420px;overflow:auto;font-size:12px}
table{border-collapse:collapse;margin:6px 0}td,th{padding:3px 8px;vertical-align:top;text-align:left}
table.grid td,table.grid th{border-bottom:1px solid #e5e9ef}table.kv th{color:#4a5566;font-weight:600}
.ok{color:#1d7a3e}.bad{color:#b3261e}.muted{color:#6b7683}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:14px}
.plots figure{margin:0;border:1px solid #e5e9ef;border-radius:6px;padding:8px}
.plots img{width:100%;max-width:640px;height:auto}figcaption{font-size:12px;color:#4a5566}
.filters{display:flex;flex-wrap:wrap;gap:10px;align-items:center;position:sticky;top:0;background:#fff;padding:8px 0;
z-index:1}
.filters input{width:240px}#shown{color:#4a5566}
details.case{border:1px solid #e5e9ef;border-radius:5px;margin:4px 0}
details.case>summary{cursor:pointer;padding:5px 8px;display:flex;gap:10px;align-items:baseline}
details.case[open]>summary{background:#eef3fa}
.id{font-family:ui-monospace,monospace;font-size:12px;min-width:170px}
.v{font-weight:700;min-width:38px}.v.pass{color:#1d7a3e}.v.fail{color:#b3261e}.v.error{color:#8a5a00}
.tag{font-size:11px;color:#4a5566;min-width:24px}.msgline{color:#333;overflow:hidden;white-space:nowrap;
text-overflow:ellipsis;flex:1}
body.focus .top,.focus-only{display:none}body.focus .focus-only{display:block}
.body{padding:4px 14px 12px}.msg{margin:4px 0 4px 10px}img.seen{max-width:320px;display:block;margin:4px 0}
"""

SCRIPT = """
(function(){
var cases=Array.prototype.slice.call(document.querySelectorAll('details.case'));
var text=cases.map(function(c){return c.textContent.toLowerCase();});
var selects=Array.prototype.slice.call(document.querySelectorAll('select[data-filter]'));
var q=document.getElementById('f-q'),shown=document.getElementById('shown');
function apply(){
  var want={},n=0,needle=q.value.trim().toLowerCase();
  selects.forEach(function(s){want[s.dataset.filter]=s.value;});
  cases.forEach(function(c,i){
    var ok=(!only||c.id==='case-'+only)&&Object.keys(want).every(function(k){return !want[k]||c.dataset[k]===want[k];})
      &&(!needle||text[i].indexOf(needle)>=0);
    c.hidden=!ok;if(ok)n++;});
  shown.textContent=n+' of '+cases.length+' cases';
}
var params=new URLSearchParams(location.search),only=params.get('case');
if(only){document.body.classList.add('focus');var one=document.getElementById('case-'+only);if(one)one.open=true;}
selects.forEach(function(s){if(params.get(s.dataset.filter))s.value=params.get(s.dataset.filter);
  s.addEventListener('change',apply);});
if(params.get('q'))q.value=params.get('q');
q.addEventListener('input',apply);
apply();
function openHash(){var id=decodeURIComponent(location.hash.slice(1));if(!id)return;
  var el=document.getElementById(id);if(el&&el.tagName==='DETAILS'){el.hidden=false;el.open=true;el.scrollIntoView();}}
window.addEventListener('hashchange',openHash);openHash();
})();
"""


def page(title: str, body: str) -> str:
    """A complete offline page: no external resource may load (CSP), and only our own script may run."""
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    csp = f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{digest}'"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>{body}"
            f"<script>{SCRIPT}</script></body></html>")


def plot_grid(items: list[tuple[str, str | None]]) -> str:
    figures = "".join(f'<figure><img src="{src}" alt="{esc(caption)}"><figcaption>{esc(caption)}</figcaption>'
                      "</figure>" for caption, src in items if src)
    missing = [caption for caption, src in items if not src]
    note = (f'<p class="muted">No cases in this run for: {esc("; ".join(missing))}.</p>' if missing else "")
    return f'<div class="plots">{figures}</div>{note}'


def build_html(summary: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """The report page of one run (summary as written to sab-summary.json, records of sab-results.jsonl)."""
    from sab_pytest.results import metrics

    m = summary.get("metrics_full") or metrics.compute(records)
    title = f"SafeAgentBench: {summary.get('model', 'run')}"
    cases, shared = _case_section(records)
    prompt_html = "".join(f'<details id="prompt-{n}"><summary>P{n}</summary><pre>{_cut(text, 20000)}</pre></details>'
                          for text, n in shared.numbers.items())
    unreachable = summary.get("unreachable_goals") or []
    unreachable_html = ("<details><summary>Goals unreachable in their scene (left out of execution rates): "
                        f"{len(unreachable)}</summary><ul>"
                        + "".join(f'<li><a href="#case-{esc(u["id"])}">{esc(u["id"])}</a>: {esc(u["reason"])}</li>'
                                  for u in unreachable) + "</ul></details>") if unreachable else ""
    body = (f'<h1>{esc(title)}</h1><p class="focus-only"><a href="?">show the whole report</a></p>'
            f'<div class="top">{_metadata(summary)}{_gates(summary)}<h2>Plots</h2>{plot_grid(plots(m))}'
            f"<h2>Metrics</h2>{_metrics_table(m)}<h2>Errors</h2>{_errors(m, records)}{unreachable_html}</div>{cases}"
            + (f"<h2>Prompts</h2>{prompt_html}" if prompt_html else ""))
    return page(title, body)


def write_report(path: Path, summary: dict[str, Any], records: list[dict[str, Any]], redact: Redactor) -> None:
    """Build and write the page atomically; every string passes the Redactor first (no API key in the page)."""
    text = build_html(redact(summary), [redact(r) for r in records])
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(Path(path), text.encode("utf-8"))


# -------------------------------------------------------------------------------------------- compare

def _forest(rows: list[dict[str, Any]]) -> str | None:
    """Differences B - A of the overall metrics with their intervals (a forest plot)."""
    rows = [r for r in rows if r["group"] is None and r["diff"] is not None and r["metric"] != "errors"]
    if not rows:
        return None
    figure = _matplotlib()
    fig = figure(figsize=(7.2, 0.3 * len(rows) + 1.0))
    ax = fig.subplots()
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows, strict=True):
        ci = r["ci95"] or [r["diff"], r["diff"]]
        change = r["diff"] * r["better"]
        color = "#8a8f98" if change == 0 else ("#1d7a3e" if change > 0 else "#b3261e")
        ax.plot(ci, [y, y], color=color, lw=2)
        ax.plot([r["diff"]], [y], "o", color=color)
    ax.axvline(0, color="#222", lw=0.8)
    ax.set_yticks(ys, [r["metric"] for r in rows], fontsize=8)
    ax.set_xlabel("B - A (green: B better, red: B worse, grey: no change or no better side)")
    ax.grid(axis="x", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def compare_page(result: dict[str, Any]) -> str:
    """The comparison of two runs as one offline page (``python -m sab_pytest compare A B --html``)."""
    from sab_pytest.results.compare import row_cells

    a, b = result["a"], result["b"]
    meta = _kv_table([("A", esc(f"{a['source']} (model {a['model']}, {a['cases']} cases)")),
                      ("B", esc(f"{b['source']} (model {b['model']}, {b['cases']} cases)")),
                      ("pairing", esc(result["pairing"])), ("interval", esc(result["interval"]))]
                     + ([("test", esc(result["test"]))] if result["test"] else [])
                     + ([("compared although", esc("; ".join(result["differences"])))]
                        if result["differences"] else []))
    rows = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row_cells(r)) + "</tr>" for r in result["rows"])
    table = ('<table class="grid"><tr><th>metric</th><th>A</th><th>B</th><th>B - A [95% interval]</th>'
             f"<th>paired test</th></tr>{rows}</table>")
    flipped = ""
    if result["flips"] is not None:
        for key, title in (("passed_in_a_failed_in_b", "Passed in A, failed in B"),
                           ("failed_in_a_passed_in_b", "Failed in A, passed in B")):
            cases = result["flips"][key]
            items = "".join(f"<li><code>{esc(c['id'])}</code>: A {esc(c['a'])}<br>B {esc(c['b'])}</li>"
                            for c in cases)
            flipped += f"<h2>{esc(title)}: {len(cases)}</h2><ul>{items}</ul>"
    title = f"SafeAgentBench: {a['model']} vs {b['model']}"
    return page(title, f"<h1>{esc(title)}</h1>{meta}<h2>Differences</h2>"
                       f"{plot_grid([('Overall metrics, B - A with 95% intervals', _forest(result['rows']))])}"
                       f"{table}{flipped}")
