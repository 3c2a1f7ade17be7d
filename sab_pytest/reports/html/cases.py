"""The report's case view: every case rendered on the server side as a ``<details>`` element (the
instruction, the answer or episode with its pictures, the judges, the final object states), with
the prompts every case shares printed once and linked."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from sab_pytest.categories import DISPLAY
from sab_pytest.reports.html.page import IMAGE_DATA, cut, esc
from sab_pytest.results.record import StoredRecord, sample_id


def verdict_of(r: StoredRecord) -> str:
    return "error" if r.get("error") else ("pass" if r.get("passed") else "fail")


def _image(src: Any, alt: str) -> str:
    if isinstance(src, str) and IMAGE_DATA.match(src):
        return f'<img class="seen" src="{esc(src)}" alt="{esc(alt)}">'
    return f'<div class="muted">[{esc(alt)}: not kept in the record; see "What the agent saw"]</div>'


class SharedText:
    """Paragraphs of prompt text that repeat across the run (templates: the action list, a judge's
    rules) are shown once, under "Prompts", and linked from each message that holds them, so the
    page of a 1050-case run with model calls stays a few MB instead of repeating them 3000 times."""

    MIN_CHARS = 160

    def __init__(self, records: list[StoredRecord]) -> None:
        counts: Counter[str] = Counter()
        self._sources: dict[str, set[str]] = {}
        for text, source in _prompt_texts(records):
            paragraphs = [p for p in text.split("\n\n") if len(p) >= self.MIN_CHARS]
            counts.update(paragraphs)
            for p in paragraphs:
                self._sources.setdefault(p, set()).add(source)
        self.repeated = {p for p, n in counts.items() if n > 1}
        self.numbers: dict[str, int] = {}

    def name(self, text: str) -> str:
        """What a shared paragraph is, for its heading under "Prompts": who was sent it (the agent,
        which judge, in which role) and its opening words, so a reader finds the judge's rules
        without opening every P<n>."""
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        opening = first if len(first) <= 90 else first[:87].rstrip() + "..."
        return f"{', '.join(sorted(self._sources.get(text, ()))) or 'model'}: {opening}"

    def render(self, text: Any) -> str:
        """A message text as HTML, repeated paragraphs replaced by links to their one copy."""
        if not isinstance(text, str) or not self.repeated:
            return f"<pre>{cut(text)}</pre>"
        out: list[str] = []
        own: list[str] = []
        for para in text.split("\n\n"):
            if para not in self.repeated:
                own.append(para)
                continue
            if own:
                out.append(f"<pre>{cut(chr(10).join(own))}</pre>")
                own = []
            n = self.numbers.setdefault(para, len(self.numbers) + 1)
            out.append(f'<p class="shared"><a href="#prompt-{n}">[prompt text P{n}, {esc(self.name(para))}; shared by '
                       "many calls]</a></p>")
        if own:
            out.append(f"<pre>{cut(chr(10).join(own))}</pre>")
        return "".join(out)


def _prompt_texts(records: list[StoredRecord]) -> Iterable[tuple[str, str]]:
    """Every text a model was sent in the run (agent and judge calls), with who was sent it in which
    role ("agent system", "rejection judge user")."""
    for r in records:
        calls = [("agent", c) for c in (r.get("agent") or {}).get("calls") or []]
        for judge, part in (r.get("judge") or {}).items():
            if isinstance(part, dict):
                calls += [(f"{judge} judge", c) for c in part.get("calls") or []]
        for who, call in calls:
            for msg in call.get("messages") or [] if isinstance(call, dict) else []:
                content = msg.get("content") if isinstance(msg, dict) else None
                source = f"{who} {msg.get('role', '')}".strip() if isinstance(msg, dict) else who
                if isinstance(content, str):
                    yield content, source
                elif isinstance(content, list):
                    yield from ((c["text"], source) for c in content
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
                 f"{c.get('latency_s', 0):.2f} s{', answer reused' if c.get('cache_hit') else ''}"
                 f"{', finish ' + esc(c.get('finish_reason')) if c.get('finish_reason') else ''}")
        error = f'<p class="bad">call failed: {esc(c.get("error"))}</p>' if c.get("error") else ""
        messages = "".join(_message(m, shared) for m in c.get("messages") or [] if isinstance(m, dict))
        tools = "".join(f'<div class="msg"><b>tool call</b> <code>{esc(t.get("name"))}</code>'
                        f"<pre>{cut(t.get('arguments'), 2000)}</pre></div>"
                        for t in c.get("tool_calls") or [] if isinstance(t, dict))
        out.append(f"<details><summary>{esc(what)} call {i} ({facts})</summary>{error}{messages}"
                   f'<div class="msg"><b>answer</b><pre>{cut(c.get("answer"))}</pre></div>{tools}</details>')
    return "".join(out)


def _seen(episode: dict[str, Any]) -> str:
    """The pictures the agent was shown, as the episode kept them (scaled down; the first and the
    last ones of a long episode, see ``agents.pictures.keep_some``)."""
    pictures = [p for p in episode.get("pictures") or [] if isinstance(p, dict)]
    if not pictures:
        return ""
    shown = episode.get("pictures_shown", len(pictures))
    figures = "".join(f'<figure class="seen">{_image(p.get("image"), "what the agent saw")}'
                      f"<figcaption>after step {esc(p.get('step'))}</figcaption></figure>" for p in pictures)
    return (f'<p><b>What the agent saw</b> <span class="muted">({len(pictures)} of the {esc(shown)} pictures it was '
            f"shown, at most 320 pixels wide; click one to enlarge it)</span></p><div class=\"strip\">{figures}</div>")


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
                    f'<td class="{cls}">{"ok" if ok else "failed"}</td><td>{cut(result, 600)}{picture}</td></tr>')
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


def _case(r: StoredRecord, shared: SharedText, fractions: dict[str, float] | None = None) -> str:
    c = r["case"]
    verdict = verdict_of(r)
    level = "" if c.get("abstraction_level") is None else f"L{c['abstraction_level']}"
    category = c.get("risk_category") or ("unmapped" if c.get("kind") in ("unsafe_detailed", "abstract") else "")
    agent = r.get("agent") or {}
    execution = r.get("execution") or {}
    flags = ", ".join(f"{k} = {value}" for k in _FLAGS if (value := r.get(k)) is not None)
    parts = [f'<p><b>Instruction</b> <span class="muted">({esc(c.get("scene"))})</span></p>'
             f'<pre class="instruction">{cut(c.get("instruction"))}</pre>',
             f"<p><b>Verdict</b>: {esc(r.get('message'))}</p><p class=\"muted\">{esc(flags)}</p>"]
    if agent:
        steps = "".join(f"<li><code>{esc(s)}</code></li>" for s in agent.get("steps") or [])
        parts.append(f"<h4>Agent ({esc(agent.get('agent'))}) answer</h4><pre>{cut(agent.get('text'))}</pre>"
                     + (f"<p>Plan steps extracted:</p><ol>{steps}</ol>" if steps else ""))
        episode = agent.get("episode")
        if isinstance(episode, dict):
            guard = episode.get("guard") or []
            facts = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in episode.items()
                              if k not in ("guard", "pictures"))
            guard_html = "".join(f"<li>{cut(g if isinstance(g, str) else repr(g), 1000)}</li>" for g in guard)
            parts.append(f"<p><b>Episode</b>: {esc(facts)}</p>"
                         + (f"<p>Guard decisions:</p><ul>{guard_html}</ul>" if guard_html else "")
                         + _seen(episode))
        parts.append(_steps_table(agent.get("executed") or [], "Actions the agent executed (episode)"))
        parts.append(_calls(agent.get("calls") or [], shared, "agent"))
    parts.append(_steps_table(execution.get("steps") or [], "Plan executed in the engine"))
    parts.append(_final_objects(execution.get("final_objects") or []))
    judges = []
    for name, part in (r.get("judge") or {}).items():
        if not isinstance(part, dict):
            continue
        judges.append(f"<li><b>{esc(name)}</b> ({esc(part.get('judge'))}): {esc(part.get('value'))}: "
                      f"{cut(part.get('explanation'), 2000)}{_calls(part.get('calls') or [], shared, 'judge')}</li>")
    if judges:
        parts.append(f"<h4>Judges</h4><ul>{''.join(judges)}</ul>")
    label = DISPLAY.get(category, category)
    sid = sample_id(r)  # the case id, '-r<N>' for a repeat (--sab-repeat)
    return (f'<details class="case" id="case-{esc(sid)}" data-kind="{esc(c.get("kind"))}" '
            f'data-category="{esc(category)}" data-level="{esc(level)}" data-verdict="{verdict}">'
            f'<summary><span class="id">{esc(sid)}</span><span class="v {verdict}">{verdict}</span>'
            f'<span class="tag">{esc(label)}</span><span class="tag">{esc(level)}</span>{_fraction_tag(c, fractions)}'
            f'<span class="msgline">{esc((r.get("message") or "")[:180])}</span></summary>'
            f'<div class="body">{"".join(parts)}</div></details>')


def _select(name: str, label: str, values: Iterable[str], names: dict[str, str] | None = None) -> str:
    options = "".join(f'<option value="{esc(v)}">{esc((names or {}).get(v, v))}</option>' for v in values if v)
    return f'<label>{esc(label)} <select id="f-{name}" data-filter="{name}"><option value="">all</option>' \
           f"{options}</select></label>"


def _fraction_tag(case: Mapping[str, Any], fractions: dict[str, float] | None) -> str:
    """Under repeats: the case's share of passed repeats, on each of its repeats' lines."""
    share = (fractions or {}).get(str(case.get("id", "")))
    return "" if share is None else f'<span class="tag" title="share of its repeats that passed">{share:.0%}</span>'


def case_section(records: list[StoredRecord], fractions: dict[str, float] | None = None) -> tuple[str, SharedText]:
    """The filterable case list; ``fractions`` (``repeats.pass_fraction``) tags each repeat with
    its case's share of passed repeats."""
    shared = SharedText(records)
    ordered = sorted(records, key=lambda r: (r["case"]["id"], r.get("repeat") or 0))
    cases = "".join(_case(r, shared, fractions) for r in ordered)
    present = {key: sorted({_attr(r, key) for r in ordered} - {""}) for key in ("kind", "category", "level")}
    filters = (_select("kind", "kind", present["kind"]) + _select("category", "category", present["category"],
                                                                  DISPLAY)
               + _select("level", "level", present["level"]) + _select("verdict", "verdict", ("pass", "fail", "error"))
               + '<label>search <input id="f-q" type="search" placeholder="instruction, answer, id ..."></label>'
               + f'<span id="shown">{len(ordered)} cases</span>')
    return f'<h2>Cases</h2><div class="filters">{filters}</div><div id="cases">{cases}</div>', shared


def _attr(r: StoredRecord, key: str) -> str:
    c = r["case"]
    if key == "kind":
        return c.get("kind") or ""
    if key == "level":
        return "" if c.get("abstraction_level") is None else f"L{c['abstraction_level']}"
    return c.get("risk_category") or ("unmapped" if c.get("kind") in ("unsafe_detailed", "abstract") else "")
