"""TOM-SB protocol facts with one owner: attacker variants and what each role sees.

- `ATTACKER_VARIANTS`: the four attacker variants of the paper (`base`, `cross_examiner`,
  `deception_aware`, `bluffing`). The env's `attacker` argument, the attacker system prompts
  (`envs.tomsb.prompts`) and the scripted attackers (`envs.tomsb.attackers`) all use this tuple.
- Role views: the private scenario JSON a role reads, published by the env in the observation's
  `scenario` field and read back by every scripted player.
  - `attacker_view(scenario)` -> `{"hierarchy": [3 levels], "universe": {published layout},
    "prior": {level: name | null}}`. It never holds a `DEFENDER_ONLY_FIELDS` field.
  - `defender_view(scenario, reveal_prior=False)` -> `{"hierarchy", "universe",
    "ground_truth": {level: name}}`, plus `"attacker_prior"` with the oracle switch.
  The person's and the attacker's names are not part of the views: both roles get them in their
  system prompt (`prompts.*_system_prompt`), so the briefing stays lean; scripted players, which
  read only the view, call the person `DEFAULT_PERSON`.
- `view_from_observation(observation)` decodes the view from an observation; `pending_reply`
  tells an attacker which defender reply it must answer (None for the opening message).
- `ROLE_CODES`: the observation's `role` field is the index of the acting role in this tuple
  (0 attacker, 1 defender); `role_from_observation` reads it back (None when absent or unknown).

The answer formats themselves (encoders `answer_*` and parsers `parse_*`) live in
`envs.tomsb.parsing`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tomgym.envs.tomsb.universe import Scenario

ATTACKER_VARIANTS = ("base", "cross_examiner", "deception_aware", "bluffing")
# Fields only the defender's view may hold: an attacker given one would know the answer.
DEFENDER_ONLY_FIELDS = ("ground_truth", "attacker_prior")
DEFAULT_PERSON = "that person"  # how scripted players name the person the views leave unnamed
ROLE_CODES = ("attacker", "defender")


def attacker_view(scenario: Scenario) -> dict[str, Any]:
    """What the attacker knows of `scenario`: levels, universe and its prior (null = unknown)."""
    return {
        "hierarchy": list(scenario.levels),
        "universe": scenario.universe.to_dict(),
        "prior": scenario.prior_dict(),
    }


def defender_view(scenario: Scenario, *, reveal_prior: bool = False) -> dict[str, Any]:
    """What the defender knows: levels, universe, the true path (+ the attacker's prior)."""
    view: dict[str, Any] = {
        "hierarchy": list(scenario.levels),
        "universe": scenario.universe.to_dict(),
        "ground_truth": scenario.truth_dict(),
    }
    if reveal_prior:
        view["attacker_prior"] = scenario.prior_dict()
    return view


def view_from_observation(observation: Mapping[str, Any]) -> dict[str, Any]:
    """The role view in an observation's `scenario` field (JSON text or a mapping).

    Raises ValueError when the field is missing or is not a JSON object.
    """
    raw = observation.get("scenario")
    if raw is None:
        raise ValueError("observation has no 'scenario' field")
    try:
        view = json.loads(raw) if isinstance(raw, str) else dict(raw)
    except (json.JSONDecodeError, TypeError, ValueError) as exc:
        raise ValueError(f"'scenario' is not a JSON object: {exc}") from None
    if not isinstance(view, dict):
        raise ValueError("'scenario' is not a JSON object")
    return view


def role_from_observation(observation: Mapping[str, Any]) -> str | None:
    """The acting role named by an observation's `role` code (`ROLE_CODES`), or None."""
    code = observation.get("role")
    try:
        index = int(code)  # a numpy integer from the Discrete space, or a plain int
    except (TypeError, ValueError):
        return None
    return ROLE_CODES[index] if 0 <= index < len(ROLE_CODES) else None


def pending_reply(attacker_observation: Mapping[str, Any]) -> str | None:
    """The defender reply an attacker must answer now, or None when it opens the conversation.

    The attacker opens at turn 1; from turn 2 on, `last_message` is the defender's last reply.
    """
    if int(attacker_observation.get("turn", 1) or 1) <= 1:
        return None
    return str(attacker_observation.get("last_message") or "")
