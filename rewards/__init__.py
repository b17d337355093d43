"""Rewards as pure functions of episode records, shared by evaluation and training.

- `rewards.tomsb`: fooling, tom_prior, stepwise_tom, leak_penalty, misled (TOM-SB defender).
- `rewards.decrypto`: win, miscommunication, interception, rounds_survived, tom_probe_accuracy.
- `rewards.shaping`: format_ok, length_reward (any env).
- `rewards.episode`: the episode record every reward reads (`EpisodeRecord`, accessors).
- `rewards.composer`: `RewardComposer(weights, gate="format")` -> `(total, components)`.
"""

from __future__ import annotations

from tomgym.rewards.composer import COMPONENTS, RewardComposer, RewardContext, default_agent
from tomgym.rewards.decrypto import tom_probe_accuracy
from tomgym.rewards.episode import EpisodeRecord, RecordError
from tomgym.rewards.shaping import format_ok, length_reward
from tomgym.rewards.tomsb import fooling, leak_penalty, misled, stepwise_tom, tom_prior

__all__ = [
    "COMPONENTS",
    "EpisodeRecord",
    "RecordError",
    "RewardComposer",
    "RewardContext",
    "default_agent",
    "fooling",
    "format_ok",
    "leak_penalty",
    "length_reward",
    "misled",
    "stepwise_tom",
    "tom_prior",
    "tom_probe_accuracy",
]
