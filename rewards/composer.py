"""Weighted, optionally gated sums of reward components over episode records.

`RewardComposer(weights, gate="format")` turns one episode record into `(total, components)`:

    total = gate_value * sum(weights[name] * component[name])      (gate_value in [0, 1])

With `gate=None` the total is the plain weighted sum (e.g. an *additive* format reward, which a
small model learns from more easily than a gate). `components` holds every weighted component,
the gate and, for logging, the outcome one-hot (`outcome/<name>`), all as floats. Any NaN or
infinite component raises `ValueError` naming it, so a broken reward can never reach the optimiser.

Components (name -> what it scores; the scored agent defaults to the env's trainable role):
    TOM-SB:   fooling, tom_prior, stepwise_tom, leak_penalty, misled (graded fooling)
    Decrypto: decrypto_win, decrypto_miscommunication, decrypto_interception,
              decrypto_rounds, decrypto_tom
    Any env:  format, length (needs `tokenizer`)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tomgym.rewards import decrypto, shaping, tomsb


@dataclass(frozen=True)
class RewardContext:
    """What a component may need beyond the record."""

    agent: str
    tokenizer: Any = None


Component = Callable[[Mapping[str, Any], RewardContext], float]

COMPONENTS: dict[str, Component] = {
    "fooling": lambda r, c: tomsb.fooling(r, c.agent),
    "tom_prior": lambda r, c: tomsb.tom_prior(r, c.agent),
    "stepwise_tom": lambda r, c: tomsb.stepwise_tom(r, c.agent),
    "leak_penalty": lambda r, c: tomsb.leak_penalty(r, c.agent),
    "misled": lambda r, c: tomsb.misled(r, c.agent),
    "format": lambda r, c: shaping.format_ok(r, c.agent),
    "length": lambda r, c: shaping.length_reward(r, c.tokenizer, c.agent),
    "decrypto_win": lambda r, c: decrypto.win(r, c.agent),
    "decrypto_miscommunication": lambda r, c: decrypto.miscommunication(r, c.agent),
    "decrypto_interception": lambda r, c: decrypto.interception(r, c.agent),
    "decrypto_rounds": lambda r, c: decrypto.rounds_survived(r, c.agent),
    "decrypto_tom": lambda r, c: decrypto.tom_probe_accuracy(r, c.agent),
}

DEFAULT_AGENT = {"tomsb": "defender_0", "decrypto": "encoder_0"}


def default_agent(env_id: str) -> str:
    """The role trained by default in `env_id` (defender in TOM-SB, encoder in Decrypto)."""
    for key, agent in DEFAULT_AGENT.items():
        if key in env_id:
            return agent
    raise ValueError(f"no default trained agent for env {env_id!r}; pass agent=")


def outcome_indicators(record: Mapping[str, Any], agent: str) -> dict[str, float]:
    """One-hot outcome of the episode for `agent`'s env (empty for unknown envs)."""
    env_id = str(record.get("env_id", ""))
    if "tomsb" in env_id:
        return tomsb.outcome_indicators(record, agent)
    if "decrypto" in env_id:
        return decrypto.outcome_indicators(record, agent)
    return {}


class RewardComposer:
    """`composer(record) -> (total, components)`; see the module docstring."""

    def __init__(
        self,
        weights: Mapping[str, float],
        gate: str | None = "format",
        *,
        agent: str | None = None,
        tokenizer: Any = None,
    ) -> None:
        if not weights:
            raise ValueError("RewardComposer needs at least one weighted component")
        for name, weight in weights.items():
            if name not in COMPONENTS:
                raise ValueError(f"unknown reward component {name!r}; known: {sorted(COMPONENTS)}")
            if not isinstance(weight, int | float) or not math.isfinite(weight):
                raise ValueError(
                    f"weight of reward component {name!r} must be finite, got {weight!r}"
                )
        if gate is not None and gate not in COMPONENTS:
            raise ValueError(f"unknown gate component {gate!r}; known: {sorted(COMPONENTS)}")
        if "length" in weights and tokenizer is None:
            raise ValueError(
                "the 'length' component needs a tokenizer (or a token-counting callable)"
            )
        self.weights = {k: float(v) for k, v in weights.items()}
        self.gate = gate
        self.agent = agent
        self.tokenizer = tokenizer

    @property
    def names(self) -> list[str]:
        """Components computed for every record (weighted ones, then the gate)."""
        names = list(self.weights)
        if self.gate is not None and self.gate not in names:
            names.append(self.gate)
        return names

    def context(self, record: Mapping[str, Any]) -> RewardContext:
        agent = self.agent or default_agent(str(record.get("env_id", "")))
        return RewardContext(agent=agent, tokenizer=self.tokenizer)

    def components(self, record: Mapping[str, Any]) -> dict[str, float]:
        ctx = self.context(record)
        values = {name: float(COMPONENTS[name](record, ctx)) for name in self.names}
        for name, value in values.items():
            _check_finite(name, value, record)
        return values

    def __call__(self, record: Mapping[str, Any]) -> tuple[float, dict[str, float]]:
        values = self.components(record)
        total = sum(self.weights[name] * values[name] for name in self.weights)
        if self.gate is not None:
            gate_value = values[self.gate]
            if not 0.0 <= gate_value <= 1.0:
                raise ValueError(
                    f"gate component {self.gate!r} must lie in [0, 1], got {gate_value}"
                )
            total *= gate_value
        _check_finite("total", total, record)
        out = dict(values)
        out.update(outcome_indicators(record, self.context(record).agent))
        return float(total), out

    def describe(self) -> dict[str, Any]:
        return {"weights": dict(self.weights), "gate": self.gate, "agent": self.agent}


def _check_finite(name: str, value: float, record: Mapping[str, Any]) -> None:
    if not math.isfinite(value):
        raise ValueError(
            f"reward component {name!r} is {value} for episode {record.get('game_id')!r}; "
            "rewards must be finite"
        )
