"""Hand-made episode records in the runner's format, for reward tests."""

from __future__ import annotations

import copy
from typing import Any

LEVELS = ("company", "division", "team")
TRUTH = {"company": "Acme", "division": "Rockets", "team": "Thrust Lab"}


def defender_turn(
    estimate: dict[str, Any] | None, reflection: str = "ok", valid: bool = True
) -> dict:
    parsed = (
        {
            "attacker_belief_about_target": estimate,
            "attacker_trust_in_us": 5,
            "reflection": reflection,
            "reply": "Sure.",
        }
        if valid
        else None
    )
    return {
        "agent": "defender_0",
        "message": "q",
        "raw": "not json" if not valid else "{...}",
        "parsed": parsed,
        "valid": valid,
        "error": None if valid else "no JSON object found",
        "retry": 0,
        "side_question": False,
    }


def tomsb_record(
    outcome: str = "fooled",
    prior_level: int = 1,
    final_estimate: dict[str, Any] | None = None,
    stepwise: list[dict[str, Any]] | None = None,
    leaks: list[str] | None = None,
    turns: list[dict[str, Any]] | None = None,
    format_failures: int = 0,
    final_belief: dict[str, Any] | None = None,
) -> dict[str, Any]:
    prior = {lvl: (TRUTH[lvl] if i < prior_level else None) for i, lvl in enumerate(LEVELS)}
    if final_estimate is None:
        final_estimate = dict(prior)
    if stepwise is None:
        stepwise = [
            {
                "attacker_belief": dict(prior),
                "attacker_trust": 5,
                "defender_estimate": dict(final_estimate),
                "defender_trust_estimate": 5,
                "leaks": [],
            }
        ]
    if turns is None:
        turns = [{"agent": "attacker_0", "valid": True, "side_question": False}] + [
            defender_turn(s["defender_estimate"]) for s in stepwise
        ]
    info = {
        "outcome": outcome,
        "turns": len(stepwise) + 1,
        "belief": dict(prior) if final_belief is None else final_belief,
        "prior": prior,
        "ground_truth": dict(TRUTH),
        "scenario_id": "s-1",
        "prior_level": prior_level,
        "attacker_variant": "base",
        "stepwise": stepwise,
        "final_defender_estimate": final_estimate,
        "leaks": leaks or [],
        "format_failures": format_failures,
        "defender_turns_valid": format_failures == 0,
        "retries": 0,
        "fallbacks": 0,
    }
    return {
        "game_id": "g0",
        "env_id": "tomgym/tomsb-v0",
        "seed": 0,
        "options": {},
        "policies": {},
        "turns": turns,
        "infos": {"attacker_0": copy.deepcopy(info), "defender_0": copy.deepcopy(info)},
        "rewards": {"attacker_0": 0.0, "defender_0": float(outcome == "fooled")},
        "outcome": outcome,
    }


def decrypto_record(
    ending: str = "survived",
    miscommunications: int = 0,
    interceptions: int = 0,
    rounds: int = 8,
    tom: dict[str, Any] | None = None,
) -> dict[str, Any]:
    info = {
        "ending": ending,
        "team_won": ending == "survived",
        "miscommunications": miscommunications,
        "interceptions": interceptions,
        "rounds": rounds,
        "retries": 0,
        "fallbacks": 0,
    }
    if tom is not None:
        info["tom"] = tom
    return {
        "game_id": "d0",
        "env_id": "tomgym/decrypto-v0",
        "seed": 0,
        "options": {},
        "policies": {},
        "turns": [
            {"agent": "encoder_0", "valid": True, "side_question": False, "parsed": {}, "raw": "x"},
            {
                "agent": "encoder_0",
                "valid": False,
                "side_question": True,
                "parsed": None,
                "raw": "?",
            },
        ],
        "infos": {a: copy.deepcopy(info) for a in ("encoder_0", "decoder_0", "interceptor_0")},
        "rewards": {},
        "outcome": ending,
    }
