"""The frame of every HTML page sab-pytest writes (the report and the compare page): escaping, the
style, the one inline script and the Content-Security-Policy that names its hash."""

from __future__ import annotations

import base64
import hashlib
import html
import re
from typing import Any

IMAGE_DATA = re.compile(r"^data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]+$")
#: long texts (prompts, answers) are cut here in the page; the results file keeps them whole
MAX_TEXT = 6000
LEVELS = ("L0", "L1", "L2", "L3")


def esc(value: Any) -> str:
    """Escaped text for element content and quoted attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def cut(text: Any, limit: int = MAX_TEXT) -> str:
    text = "" if text is None else str(text)
    if len(text) <= limit:
        return esc(text)
    more = len(text) - limit
    return esc(text[:limit]) + f"<span class=\"muted\"> … ({more} more characters in the results file)</span>"



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
.body{padding:4px 14px 12px}.msg{margin:4px 0 4px 10px}img.seen{width:320px;max-width:100%;display:block;margin:4px 0;
image-rendering:pixelated;cursor:zoom-in}img.seen.zoom{width:960px;cursor:zoom-out}
.strip{display:flex;flex-wrap:wrap;gap:6px}figure.seen{margin:0}figure.seen figcaption{font-size:11px;color:#666}
"""

SCRIPT = """
(function(){
// one script for every page: the report has the case filters, a compare page has none

var cases=Array.prototype.slice.call(document.querySelectorAll('details.case'));
var text=cases.map(function(c){return c.textContent.toLowerCase();});
var selects=Array.prototype.slice.call(document.querySelectorAll('select[data-filter]'));
var q=document.getElementById('f-q'),shown=document.getElementById('shown');
function apply(){
  if(!q)return;
  var want={},n=0,needle=q.value.trim().toLowerCase();
  selects.forEach(function(s){want[s.dataset.filter]=s.value;});
  cases.forEach(function(c,i){
    var ok=(!only||c.id==='case-'+only)&&Object.keys(want).every(function(k){return !want[k]||c.dataset[k]===want[k];})
      &&(!needle||text[i].indexOf(needle)>=0);
    c.hidden=!ok;if(ok)n++;});
  if(shown)shown.textContent=n+' of '+cases.length+' cases';
}
var params=new URLSearchParams(location.search),only=params.get('case');
if(only){document.body.classList.add('focus');var one=document.getElementById('case-'+only);if(one)one.open=true;}
selects.forEach(function(s){if(params.get(s.dataset.filter))s.value=params.get(s.dataset.filter);
  s.addEventListener('change',apply);});
if(q){if(params.get('q'))q.value=params.get('q');q.addEventListener('input',apply);}
apply();
function openHash(){var id=decodeURIComponent(location.hash.slice(1));if(!id)return;
  var el=document.getElementById(id);if(el&&el.tagName==='DETAILS'){el.hidden=false;el.open=true;el.scrollIntoView();}}
window.addEventListener('hashchange',openHash);openHash();
// a picture the agent saw: click to enlarge (the record keeps it at up to 320 pixels), click again to shrink
document.addEventListener('click',function(e){var t=e.target;
  if(t&&t.tagName==='IMG'&&t.classList.contains('seen')){t.classList.toggle('zoom');}});
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
