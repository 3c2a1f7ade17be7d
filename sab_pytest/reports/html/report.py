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
* Plots are SVG drawn by hand (``plots``: bars, intervals and labels) and embedded as data URIs, so
  each picture is isolated, the file needs nothing else and the report needs no plotting library.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sab_pytest.fetch import atomic_write_bytes
from sab_pytest.reports.html.cases import case_section
from sab_pytest.reports.html.page import cut, esc, page, plot_grid
from sab_pytest.reports.html.plots import error_bars, forest, plots
from sab_pytest.reports.junit import gate_lines
from sab_pytest.reports.table import OVERALL_ROWS, gate_numbers, panel_lines
from sab_pytest.results import metrics
from sab_pytest.results.compare import flip_titles, row_cells
from sab_pytest.results.cost import cost_lines
from sab_pytest.results.files import Redactor
from sab_pytest.results.judging.served import other_models

if TYPE_CHECKING:
    from sab_pytest.results.record import StoredRecord
    from sab_pytest.results.summary import Summary


def _fmt_entry(e: dict[str, Any] | None) -> tuple[str, str, str]:
    if not e or e.get("value") is None:
        return "n/a", "", f"n={e.get('n', 0)}" if e else ""
    ci = e.get("ci95")
    count = f"{e['k']}/{e['n']}" if "k" in e else f"n={e['n']}"
    missing = "no interval (1 case)" if e.get("cases") == 1 else ""
    return f"{e['value']:.3f}", f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else missing, count


def _kv_table(rows: Iterable[tuple[str, Any]]) -> str:
    body = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="kv">{body}</table>'


def _metadata(summary: Summary) -> str:
    settings = summary.get("settings") or {}
    usage = summary.get("usage") or {}
    rows: list[tuple[str, Any]] = []
    for key in ("model", "judge", "strategy", "guard", "engine", "subset", "sample", "seed"):
        value = summary.get(key, settings.get(key))
        if value is not None:
            rows.append((key, esc(value)))
    shown = summary.get("pictures")
    if isinstance(shown, dict):  # a visual strategy: the pictures it saw decide whether the paper compares
        mark = ('<span class="ok">comparable with the paper\'s</span>' if shown.get("comparable_with_paper")
                else f'<span class="bad">not comparable with the paper\'s</span>: {esc(shown.get("note"))}')
        rows.append(("pictures", f"{esc(shown.get('kind'))}, {mark}"))
    endpoints = summary.get("endpoints") or {}
    rows += [(f"{role} endpoint", esc(url)) for role, url in endpoints.items() if url]
    rows += [("answered by another model", f'<span class="bad">{esc(line)}</span>')
             for line in other_models(summary.get("served_models") or {})]
    rows += [("judge panel", esc(line)) for line in panel_lines(summary.get("panel") or {})[1:]]
    rows.append(("cases", esc(summary.get("cases"))))
    rows.append(("errors", esc(summary.get("errors"))))
    rep = summary.get("repeats")
    if rep:
        agree = "" if rep.get("agreement") is None else f"; agreement of repeats {rep['agreement']:.2f}"
        rows.append(("repeats", esc(f"{rep['k']} per case, {rep['cases']} cases (intervals: Wilson over the effective "
                                    f"samples, repeats that agree counting once{agree})")))
        flaky = rep["flaky_cases"]
        links = ", ".join(f'<a href="#case-{esc(cid)}-r1">{esc(cid)}</a>' for cid in flaky)
        rows.append(("flaky_cases", f"{len(flaky)} (repeats disagree)" + (f": {links}" if flaky else "")))
        rows.append(("pass fraction per case", _pass_fractions(rep)))
    run = summary.get("run")
    if isinstance(run, dict) and run.get("status"):
        facts = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in run.items() if k != "status" and v not in
                          (None, False, 0, ""))
        cls = "ok" if run["status"] == "complete" else "bad"
        rows.insert(0, ("run status", f'<span class="{cls}">{esc(run["status"])}</span> {esc(facts)}'))
    if usage:
        cost = usage.get("cost_usd")
        rows.append(("cost", esc(f"${cost:.4f}" if isinstance(cost, (int, float)) else "not priced (--sab-price)")))
        rows.append(("usage", esc(usage_text(usage))))
        if usage.get("by_model"):
            rows.append(("cost by role and model", "<br>".join(esc(line) for line in cost_lines(usage))))
    sha = summary.get("dataset_sha256") or {}
    if sha:
        rows.append(("dataset sha256", "<br>".join(f"{esc(f)}: <code>{esc(h)}</code>" for f, h in sorted(sha.items()))))
    versions = summary.get("versions") or {}
    if versions:
        rows.append(("versions", esc(", ".join(f"{k} {v}" for k, v in versions.items()))))
    b = summary.get("baseline")
    if b:
        rows.append(("baseline", esc(f"{b.get('source')} (model {b.get('model')}, {b.get('cases')} cases)")))
    return _kv_table(rows)


#: how the usage figures read: their label, and how a value is written (counts with thousands separators)
_USAGE = (("calls", "model calls", "{:,}"), ("api_calls", "sent to the API", "{:,}"),
          ("cache_hits", "answered from the cache", "{:,}"), ("failed_calls", "got no answer", "{:,}"),
          ("errors", "calls that failed", "{:,}"), ("truncated", "answers cut at max tokens", "{:,}"),
          ("prompt_tokens", "tokens in", "{:,}"), ("completion_tokens", "tokens out", "{:,}"),
          ("billed_prompt_tokens", "billed tokens in", "{:,}"),
          ("billed_completion_tokens", "billed tokens out", "{:,}"),
          ("latency_s", "time waiting for answers", "{:,.1f} s"), ("api_latency_s", "of it on API calls", "{:,.1f} s"),
          ("rate_limited", "rate-limited requests", "{:,}"),
          ("rate_limit_wait_s", "waited on rate limits", "{:,.1f} s"))


#: usage keys with rows of their own (the cost, and its lines per role and model)
_SHOWN_APART = ("cost_usd", "by_model", "unpriced", "prices")


def usage_text(usage: dict[str, Any]) -> str:
    """The run's usage as people read it ("81.6 s", "12,345 tokens in"), not a dump of the raw
    floats; a key this list does not know is shown after the known ones, its number rounded."""
    known = {key for key, _, _ in _USAGE}
    parts = [f"{label} {form.format(usage[key])}" for key, label, form in _USAGE
             if isinstance(usage.get(key), (int, float)) and (usage[key] or key in ("calls", "prompt_tokens"))]
    for key, value in sorted(usage.items()):
        if key not in known and key not in _SHOWN_APART and value not in (None, 0, 0.0, {}, []):
            shown = f"{value:,.4g}" if isinstance(value, float) else str(value)
            parts.append(f"{key.replace('_', ' ')} {shown}")
    return ", ".join(parts)


def _pass_fractions(rep: dict[str, Any]) -> str:
    """Each case's share of passed repeats (``repeats.pass_fraction``), grouped by share, with links."""
    fractions: dict[str, float] = rep.get("pass_fraction") or {}
    if not fractions:
        return "not recorded"
    by_share: dict[float, list[str]] = {}
    for cid, share in fractions.items():
        by_share.setdefault(share, []).append(cid)
    rows = "".join(f"<tr><td>{share:.2f}</td><td>{len(ids)}</td><td>"
                   + ", ".join(f'<a href="#case-{esc(cid)}-r1">{esc(cid)}</a>' for cid in ids) + "</td></tr>"
                   for share, ids in sorted(by_share.items(), reverse=True))
    return (f"<details><summary>{len(fractions)} cases, by their share of passed repeats</summary>"
            f'<table class="grid"><tr><th>passed</th><th>cases</th><th></th></tr>{rows}</table></details>')


def _metrics_table(m: dict[str, Any]) -> str:
    o = m["overall"]
    head = "<tr><th>metric</th><th>value</th><th>95% interval</th><th>count</th></tr>"
    body = []
    for name, label in OVERALL_ROWS:
        value, ci, count = _fmt_entry(o.get(name))
        body.append(f"<tr><td>{esc(label)} <code>{esc(name)}</code></td><td>{value}</td><td>{ci}</td>"
                    f"<td>{esc(count)}</td></tr>")
    return f'<table class="grid">{head}{"".join(body)}</table>'


def _suites_table(m: dict[str, Any]) -> str:
    """A team's own suites (``owncases.files``): each one's rows of the metrics table, beside the overall ones."""
    by_suite = m.get("by_suite") or {}
    if not by_suite:
        return ""
    head = "<tr><th>suite</th><th>metric</th><th>value</th><th>95% interval</th><th>count</th></tr>"
    body = []
    for suite, table in by_suite.items():
        for name, label in OVERALL_ROWS:
            entry = table.get(name)
            if not entry or not entry.get("n"):
                continue
            value, ci, count = _fmt_entry(entry)
            body.append(f"<tr><td>{esc(suite)}</td><td>{esc(label)} <code>{esc(name)}[suite={esc(suite)}]</code></td>"
                        f"<td>{value}</td><td>{ci}</td><td>{esc(count)}</td></tr>")
    return f'<h2>Suites</h2><table class="grid">{head}{"".join(body)}</table>'


def _errors(m: dict[str, Any], records: list[StoredRecord]) -> str:
    if not m.get("errors"):
        return '<p class="ok">No case errored: every case was evaluated.</p>'
    kinds = ", ".join(f"{esc(k)}: {v}" for k, v in sorted(m["error_kinds"].items()))
    ids = ", ".join(f'<a href="#case-{esc(r["case"]["id"])}">{esc(r["case"]["id"])}</a>'
                    for r in records if r.get("error"))
    return (f'<p class="bad">{m["errors"]} of {m["cases"]} cases errored ({kinds}). Errors are infrastructure '
            f"failures (model API, unparseable judge answer, engine, crashed worker): they are left out of every "
            f"rate above and counted here.</p>{plot_grid([('Errors by kind', error_bars(m))])}<p>{ids}</p>")


def _deviations(summary: Summary) -> str:
    """The run's protocol and each difference from the paper in force (``protocol.deviations``)."""
    shown = summary.get("deviations")
    if shown is None:  # a summary of before --sab-protocol
        return ""
    items = "".join(f"<li>{esc(d['text'])}{_effect(d)} (<code>{esc(d['option'])}</code>)</li>" for d in shown)
    verdict = summary.get("comparability")
    return ("<h2>Differences from the paper</h2>" + (f"<p><b>{esc(verdict)}</b></p>" if verdict else "")
            + f"<p>protocol: <code>{esc(str(summary.get('protocol')))}</code>; {len(shown)} in force.</p>"
            + (f"<ul>{items}</ul>" if items else ""))


def _effect(d: dict[str, str]) -> str:
    """The metrics a difference moves and which way (summaries of older runs have none)."""
    return f"; <i>affects {esc(d['affects'])}: {esc(d['direction'])}</i>" if d.get("affects") else ""


def _gates(summary: Summary) -> str:
    gates = summary.get("gates") or []
    if not gates:
        return ""

    # the same numbers as the terminal's gate lines and the JUnit file's gate testcases
    rows = "".join(
        f'<tr><td class="{"ok" if g["passed"] else "bad"}">{"PASS" if g["passed"] else "FAIL"}</td>'
        f"<td><code>{esc(g['gate'])}</code></td><td>{esc(gate_numbers(g))}<details><summary>every number"
        f"</summary>{'<br>'.join(esc(line) for line in gate_lines(summary, g))}</details></td></tr>" for g in gates)
    failed = sum(1 for g in gates if not g["passed"])
    errors = summary.get("errors") or 0
    verdict = (f'<p class="bad"><b>{failed} of {len(gates)} gates failed: the run fails (exit status 1).</b></p>'
               if failed else
               f'<p class="bad"><b>All {len(gates)} gates hold, but {errors} case(s) errored: the run fails (exit '
               "status 1).</b></p>" if errors else
               f'<p class="ok"><b>All {len(gates)} gates hold: the run passes (exit status 0).</b></p>')
    return (f'<h2>Gates</h2>{verdict}<table class="grid"><tr><th></th><th>gate</th><th>numbers</th></tr>{rows}'
            "</table>")


def build_html(summary: Summary, records: list[StoredRecord]) -> str:
    """The report page of one run (summary as written to sab-summary.json, records of sab-results.jsonl)."""
    m = summary.get("metrics_full") or metrics.compute(records)
    title = f"SafeAgentBench: {summary.get('model', 'run')}"
    cases, shared = case_section(records, (summary.get("repeats") or {}).get("pass_fraction"))
    prompt_html = "".join(f'<details id="prompt-{n}"><summary>P{n}: {esc(shared.name(text))}</summary>'
                          f"<pre>{cut(text, 20000)}</pre></details>" for text, n in shared.numbers.items())
    unreachable = summary.get("unreachable_goals") or []
    how = "counted as failures in SR(goal)" if summary.get("protocol") == "paper" else "left out of execution rates"
    unreachable_html = (f"<details><summary>Goals unreachable in their scene ({how}): "
                        f"{len(unreachable)}</summary><ul>"
                        + "".join(f'<li><a href="#case-{esc(u["id"])}">{esc(u["id"])}</a>: {esc(u["reason"])}</li>'
                                  for u in unreachable) + "</ul></details>") if unreachable else ""
    body = (f'<h1>{esc(title)}</h1><p class="focus-only"><a href="?">show the whole report</a></p>'
            f'<div class="top">{_metadata(summary)}{_deviations(summary)}{_gates(summary)}'
            f"<h2>Plots</h2>{plot_grid(plots(m))}"
            f"<h2>Metrics</h2>{_metrics_table(m)}{_suites_table(m)}"
            f"<h2>Errors</h2>{_errors(m, records)}{unreachable_html}</div>{cases}"
            + (f"<h2>Prompts</h2>{prompt_html}" if prompt_html else ""))
    return page(title, body)


def write_report(path: Path, summary: Summary, records: list[StoredRecord], redact: Redactor) -> None:
    """Build and write the page atomically; every string passes the Redactor first (no API key in the page)."""
    text = build_html(redact(summary), [redact(r) for r in records])
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(Path(path), text.encode("utf-8"))


# -------------------------------------------------------------------------------------------- compare

def compare_page(result: dict[str, Any]) -> str:
    """The comparison of two runs as one offline page (``sab compare A B --html``)."""
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
        for key, title in flip_titles(result):
            cases = result["flips"][key]
            items = "".join(f"<li><code>{esc(c['id'])}</code>: A passed {esc(c.get('a_passed', ''))}, "
                            f"B passed {esc(c.get('b_passed', ''))}<br>A (last repeat) {esc(c['a'])}<br>"
                            f"B (last repeat) {esc(c['b'])}</li>" for c in cases)
            flipped += f"<h2>{esc(title)}: {len(cases)}</h2><ul>{items}</ul>"
    title = f"SafeAgentBench: {a['model']} vs {b['model']}"
    return page(title, f"<h1>{esc(title)}</h1>{meta}<h2>Differences</h2>"
                       f"{plot_grid([('Overall metrics, B - A with 95% intervals', forest(result['rows']))])}"
                       f"{table}{flipped}")
