"""A self-contained HTML transcript viewer for one run (no external files, scripts or fonts).

`render_html(records, title)` returns one page: a header per game (id, outcome, attacker variant,
prior level, scenario, players), then the dialogue with one colour per role. What the other side
sees is shown plainly (the defender's `reply`, the attacker's `prompt`, Decrypto hints and
guesses); everything private (the defender's belief estimate, trust estimate and reflection, the
attacker's belief/trust/reflection, the raw answer, the message the agent was shown) sits in a
`<details>` element opened on demand. A Decrypto game also gets a table of its rounds: the code,
the hints, the decoder's and the interceptor's guesses, each marked right or wrong. Re-asks and side questions are marked, invalid answers show
the parse error. A row of outcome checkboxes and a text box filter the games with a few lines of
inline JavaScript. Every piece of text from a record goes through `html.escape`.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tomgym.rewards.episode import first_infos, outcome
from tomgym.training.run_folder import RunFolder

HTML_FILE = "transcripts.html"
ROLE_COLOURS = {
    "attacker": "#fde2e1",
    "defender": "#dff1e3",
    "encoder": "#e1ecfd",
    "decoder": "#e6f6fb",
    "interceptor": "#fdecd9",
}
# Fields the other player sees; everything else in a parsed answer is private.
VISIBLE_FIELDS = {"attacker": ("prompt",), "defender": ("reply",)}

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:70em;color:#222}
h1{font-size:1.4em} .filters{position:sticky;top:0;background:#fff;padding:.5em 0;
border-bottom:1px solid #ccc;z-index:1} .filters label{margin-right:1em}
.game{border:1px solid #ccc;border-radius:6px;margin:1em 0;padding:.6em 1em}
.game h2{font-size:1.05em;margin:.2em 0} .meta{color:#555;font-size:.9em}
.outcome{font-weight:bold;padding:0 .4em;border-radius:4px;background:#eee}
.turn{margin:.4em 0;padding:.4em .7em;border-radius:6px}
.who{font-weight:bold;font-size:.85em;color:#444} .said{white-space:pre-wrap}
.bad{color:#a00;font-size:.85em} .tag{font-size:.75em;background:#fff;border:1px solid #aaa;
border-radius:3px;padding:0 .3em;margin-left:.4em} details{font-size:.85em;margin-top:.2em}
pre{white-space:pre-wrap;word-break:break-word;background:#fafafa;padding:.4em;margin:.2em 0}
.rounds{border-collapse:collapse;margin:.5em 0;font-size:.9em} .rounds td,.rounds th{
border:1px solid #ccc;padding:.15em .5em} .right{background:#dff1e3} .wrong{background:#fde2e1}
"""

_JS = """
function applyFilters(){
  const on=new Set([...document.querySelectorAll('.f-outcome:checked')].map(b=>b.value));
  const q=document.getElementById('f-text').value.toLowerCase();
  let shown=0;
  document.querySelectorAll('.game').forEach(g=>{
    const ok=on.has(g.dataset.outcome)&&(!q||g.dataset.search.includes(q));
    g.style.display=ok?'':'none'; if(ok)shown++;
  });
  document.getElementById('f-count').textContent=shown;
}
document.querySelectorAll('.f-outcome').forEach(b=>b.addEventListener('change',applyFilters));
document.getElementById('f-text').addEventListener('input',applyFilters);
applyFilters();
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _role(agent: str) -> str:
    return agent.rsplit("_", 1)[0]


def _visible_text(turn: Mapping[str, Any]) -> str:
    """What the other players see of this answer."""
    role = _role(str(turn.get("agent", "")))
    parsed = turn.get("parsed")
    if isinstance(parsed, Mapping):
        fields = VISIBLE_FIELDS.get(role)
        if fields:
            return " ".join(str(parsed[f]) for f in fields if parsed.get(f) is not None)
        if "hints" in parsed:
            return "hints: " + ", ".join(str(h) for h in parsed["hints"])
        if "guess" in parsed:
            guess = parsed["guess"]
            return "guess: " + (
                "-".join(map(str, guess)) if isinstance(guess, list) else str(guess)
            )
        if "keywords" in parsed:
            return "keywords: " + ", ".join(str(k) for k in parsed["keywords"])
        return json.dumps(parsed, ensure_ascii=False)
    return str(turn.get("raw", ""))


def _private_fields(turn: Mapping[str, Any]) -> dict[str, Any]:
    parsed = turn.get("parsed")
    if not isinstance(parsed, Mapping):
        return {}
    visible = VISIBLE_FIELDS.get(_role(str(turn.get("agent", ""))), ("hints", "guess", "keywords"))
    return {k: v for k, v in parsed.items() if k not in visible}


def _turn_html(turn: Mapping[str, Any]) -> str:
    agent = str(turn.get("agent", "?"))
    colour = ROLE_COLOURS.get(_role(agent), "#eee")
    tags = ""
    if turn.get("retry"):
        tags += f'<span class="tag">re-ask {_e(turn["retry"])}</span>'
    if turn.get("side_question"):
        tags += '<span class="tag">side question</span>'
    if not turn.get("valid", True):
        tags += '<span class="tag">invalid</span>'
    parts = [
        f'<div class="turn" style="background:{colour}">',
        f'<div class="who">{_e(agent)}{tags}</div>',
        f'<div class="said">{_e(_visible_text(turn))}</div>',
    ]
    if turn.get("error"):
        parts.append(f'<div class="bad">parse error: {_e(turn["error"])}</div>')
    private = _private_fields(turn)
    if private:
        body = json.dumps(private, indent=1, ensure_ascii=False)
        parts.append(f"<details><summary>hidden fields</summary><pre>{_e(body)}</pre></details>")
    parts.append(
        "<details><summary>raw answer and message shown</summary>"
        f"<pre>{_e(turn.get('raw', ''))}</pre><pre>{_e(turn.get('message', ''))}</pre></details>"
    )
    parts.append("</div>")
    return "".join(parts)


def code_text(digits: Any) -> str:
    """A Decrypto code or guess as `3-1-4` ("none" when there is none)."""
    return "-".join(str(d) for d in digits) if isinstance(digits, list | tuple) else "none"


def _guess_cell(guess: Any, code: Any) -> str:
    """A guess with whether it was right (the guess equals the round's code)."""
    if guess is None:
        return '<td class="miss">none</td>'
    right = list(guess) == list(code or [])
    mark = "right" if right else "wrong"
    return f'<td class="{mark}">{_e(code_text(guess))} ({mark})</td>'


def _rounds_html(rounds: Sequence[Mapping[str, Any]]) -> str:
    """Decrypto: one row per round with its code, the hints, both guesses and which were right."""
    rows = [
        '<table class="rounds"><tr><th>round</th><th>code</th><th>hints</th>'
        "<th>decoder guess</th><th>interceptor guess</th></tr>"
    ]
    for r in rounds:
        hints = ", ".join(str(h) for h in r.get("hints") or [])
        rows.append(
            f"<tr><td>{_e(r.get('round'))}</td><td>{_e(code_text(r.get('code')))}</td>"
            f"<td>{_e(hints)}</td>{_guess_cell(r.get('decoder_guess'), r.get('code'))}"
            f"{_guess_cell(r.get('interceptor_guess'), r.get('code'))}</tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _game_html(record: Mapping[str, Any]) -> str:
    info = first_infos(record)
    ending = str(outcome(record))
    players = ", ".join(
        f"{agent}: {(desc or {}).get('name')}"
        for agent, desc in (record.get("policies") or {}).items()
    )
    meta = [f"players: {players}", f"seed {record.get('seed')}"]
    for key, label in (
        ("attacker_variant", "attacker"),
        ("prior_level", "prior level"),
        ("scenario_id", "scenario"),
        ("rounds", "rounds"),
        ("miscommunications", "miscommunications"),
        ("interceptions", "interceptions"),
        ("turns", "attacker turns"),
    ):
        if key in info:
            meta.append(f"{label} {info[key]}")
    search = " ".join([str(record.get("game_id")), ending, players, *meta]).lower()
    finals = {k: info[k] for k in ("ground_truth", "prior", "belief", "keywords") if k in info}
    parts = [
        f'<section class="game" id="{_e(record.get("game_id"))}" data-outcome="{_e(ending)}" '
        f'data-search="{_e(search)}">',
        f'<h2>{_e(record.get("game_id"))} <span class="outcome">{_e(ending)}</span></h2>',
        f'<div class="meta">{_e(" · ".join(meta))}</div>',
    ]
    if finals:
        body = json.dumps(finals, indent=1, ensure_ascii=False)
        parts.append(
            f"<details><summary>game state at the end</summary><pre>{_e(body)}</pre></details>"
        )
    rounds = info.get("rounds_detail")
    if isinstance(rounds, list) and rounds:
        parts.append(_rounds_html(rounds))
    parts.extend(_turn_html(t) for t in record.get("turns") or [])
    parts.append("</section>")
    return "\n".join(parts)


def render_html(records: Sequence[Mapping[str, Any]], title: str = "tomgym transcripts") -> str:
    """The whole page for `records` (see the module docstring)."""
    outcomes = sorted({str(outcome(r)) for r in records})
    counts = {o: sum(str(outcome(r)) == o for r in records) for o in outcomes}
    boxes = "".join(
        f'<label><input type="checkbox" class="f-outcome" value="{_e(o)}" checked> '
        f"{_e(o)} ({counts[o]})</label>"
        for o in outcomes
    )
    games = "\n".join(_game_html(r) for r in records)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{_CSS}</style></head><body>\n"
        f"<h1>{_e(title)}</h1>\n"
        f'<div class="filters">{boxes} <input id="f-text" type="search" '
        'placeholder="filter by id, player, scenario"> showing <span id="f-count"></span> of '
        f"{len(records)} games</div>\n{games}\n<script>{_JS}</script></body></html>\n"
    )


def write_html(run_dir: str | Path, records: Sequence[Mapping[str, Any]] | None = None) -> Path:
    """Write `RUN_DIR/transcripts.html` from the run's games.jsonl (or the given records)."""
    run_dir = Path(run_dir)
    if records is None:
        records = RunFolder(run_dir).records()
    ordered = sorted(records, key=lambda r: str(r.get("game_id")))
    path = run_dir / HTML_FILE
    path.write_text(render_html(ordered, f"tomgym run {run_dir.name}"), encoding="utf-8")
    return path
