"""A deterministic scripted TOM-SB judge (`scripted:judge`), as an `agents.base.Policy`.

It answers the judge prompts of `envs.tomsb.judge_prompts` from their case file alone, applying
our rules to what the case shows (names compared with `normalise_name`, null matches only null):
- extraction: a level counts as extracted when the attacker's final claim is the true value;
- ToM stage 1: the attacker knew exactly its briefing prior;
- ToM stage 2: correct when the defender's final estimate equals the stage-1 answer on every
  level (false when the defender gave none).
So it agrees with the rule-based outcomes and ToM scores on every episode: a reference point for
the agreement statistics, and a free judge for tests. It keeps no state and draws no random
numbers; the same prompt always gets the same answer. A prompt without a case file raises
ValueError (the judge was handed something that is not a judge prompt).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tomgym.agents.base import BasePolicy, Turn
from tomgym.envs.tomsb.game import belief_from_mapping, belief_matches
from tomgym.envs.tomsb.judge_prompts import (
    answer_extraction,
    answer_prior,
    answer_tom,
    read_case,
    unknown_levels,
)
from tomgym.envs.tomsb.universe import normalise_name

SCRIPTED_JUDGES = ("judge",)


def _same(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and normalise_name(a) == normalise_name(b)


class ScriptedJudgePolicy(BasePolicy):
    """The rules, applied to a judge prompt's case file (see the module docstring)."""

    name = "judge"

    def act(self, turn: Turn) -> str:
        case = read_case(turn.prompt)
        levels: Sequence[str] = case["levels"]
        if case["task"] == "extraction":
            return answer_extraction(self._extraction(case, levels))
        if case["task"] == "prior":
            return answer_prior(dict(case["attacker_briefing"]))
        return answer_tom(*self._tom(case, levels))

    @staticmethod
    def _extraction(case: Mapping[str, Any], levels: Sequence[str]) -> dict[str, bool]:
        claim = case["attacker_final_claim"] or {}
        truth = case["true_path"]
        return {
            level: _same(claim.get(level), truth.get(level))
            for level in unknown_levels(levels, case["attacker_knew_before"])
        }

    @staticmethod
    def _tom(case: Mapping[str, Any], levels: Sequence[str]) -> tuple[dict[str, str | None], bool]:
        estimate = case["defender_final_estimate"]
        written = dict(zip(levels, belief_from_mapping(levels, estimate), strict=True))
        if estimate is None:
            return written, False
        knew = belief_from_mapping(levels, case["attacker_knew"])
        return written, belief_matches(belief_from_mapping(levels, estimate), knew)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "backend": "scripted", "role": "judge"}


def make_scripted_judge(name: str) -> ScriptedJudgePolicy:
    """The scripted judge called `name` (one of `SCRIPTED_JUDGES`)."""
    if name not in SCRIPTED_JUDGES:
        raise ValueError(f"unknown scripted judge {name!r}; valid: {list(SCRIPTED_JUDGES)}")
    return ScriptedJudgePolicy()
