"""The episode record: one finished game, as the runner writes it and every reader reads it.

One JSON object per game (a line of a run folder's `games.jsonl`, a row the trainer scores):

    game_id      str   unique within a run
    env_id       str   registered env id ("tomgym/tomsb-v0", "tomgym/decrypto-v0")
    env_config   dict  env constructor keyword arguments
    seed         int   env seed of this game
    options      dict  env reset options (scenario, attacker variant, pinned keywords ...)
    policies     dict  agent -> the policy's `describe()` (the policy that played this game)
    turns        list  one entry per answered observation: agent, message, raw, parsed, valid,
                       error, retry, side_question (and prompt when recorded)
    infos        dict  agent -> the env's final infos for that agent
    rewards      dict  agent -> summed env reward
    outcome      str   how the game ended: the env's `outcome` (TOM-SB: fooled, extracted,
                       detected, baited) or `ending` (Decrypto: survived, miscommunication,
                       interception, both), under one key for every env
    eval         dict  optional: what the job that asked for the game knows and the runner
                       cannot (evaluation seed, attacker label, matchup, recorded rounds ...)
    truncation_reason  str  optional: why the runner ended the game before the env did
                       ("context_window": a policy's conversation outgrew its model's window);
                       the game then has no env ending (`outcome` is None)
    judge        dict  optional, TOM-SB: LLM judges' answers per judge (`training.eval.judge`);
                       the rules' outcome and scores stay those of `infos`

A record's unique key (`record_key`) is its `game_id` plus a digest of its `policies`: a run
holds each game id once, and folders merged from runs of different players (a checkpoint sweep
replays the same game ids) keep one record per game and players. Readers keep the first record
of a key (`dedupe`), so a folder written twice over by an older version that had no run-folder
lock still counts every game once.

`new_record` builds a record in one go (nothing patches it afterwards); `load_record` reads one
back, from this version or an older one (records written before `outcome` existed get it from
their infos). The accessors below are the only code that reaches into `infos`: rewards, metrics,
tables and the HTML viewer all read through them. This module imports nothing of ours, so both
`rewards/` and `training/` may use it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NotRequired, TypedDict, TypeVar

R = TypeVar("R", bound=Mapping[str, Any])


class RecordError(ValueError):
    """An episode record that lacks what a reader needs; the message names the missing field."""


class EpisodeRecord(TypedDict):
    """The JSON form of one finished game (see the module docstring for every key)."""

    game_id: str
    env_id: str
    env_config: dict[str, Any]
    seed: int
    options: dict[str, Any]
    policies: dict[str, dict[str, Any]]
    turns: list[dict[str, Any]]
    infos: dict[str, dict[str, Any]]
    rewards: dict[str, float]
    outcome: str | None
    eval: NotRequired[dict[str, Any]]
    truncation_reason: NotRequired[str]
    judge: NotRequired[dict[str, dict[str, Any]]]


CONTEXT_WINDOW = "context_window"
"""`truncation_reason` of a game whose conversation outgrew a policy's context window."""


def ending_of(info: Mapping[str, Any]) -> Any:
    """How a game ended according to one agent's final infos (TOM-SB `outcome`, Decrypto
    `ending`); None while the game runs."""
    return info.get("outcome", info.get("ending"))


def new_record(
    *,
    game_id: str,
    env_id: str,
    env_config: Mapping[str, Any],
    seed: int,
    options: Mapping[str, Any],
    policies: Mapping[str, Mapping[str, Any]],
    turns: Sequence[Mapping[str, Any]],
    infos: Mapping[str, Mapping[str, Any]],
    rewards: Mapping[str, float],
    eval_block: Mapping[str, Any] | None = None,
    truncation_reason: str | None = None,
) -> EpisodeRecord:
    """A complete record; every value must already be plain JSON (the runner converts them)."""
    first = next(iter(infos.values()), {})
    record = EpisodeRecord(
        game_id=game_id,
        env_id=env_id,
        env_config=dict(env_config),
        seed=int(seed),
        options=dict(options),
        policies={agent: dict(desc) for agent, desc in policies.items()},
        turns=[dict(turn) for turn in turns],
        infos={agent: dict(info) for agent, info in infos.items()},
        rewards={agent: float(value) for agent, value in rewards.items()},
        outcome=ending_of(first),
    )
    if eval_block:
        record["eval"] = dict(eval_block)
    if truncation_reason is not None:
        record["truncation_reason"] = str(truncation_reason)
    return record


def record_key(record: Mapping[str, Any]) -> str:
    """The record's unique key: `<game_id>@<digest of the policies that played it>`."""
    players = json.dumps(record.get("policies") or {}, sort_keys=True, default=str)
    digest = hashlib.blake2b(players.encode(), digest_size=6).hexdigest()
    return f"{record['game_id']}@{digest}"


def dedupe(records: Iterable[R]) -> tuple[list[R], list[str]]:
    """(records with the first of each key kept, in order; the game ids of keys that occurred
    more than once, each named once)."""
    seen: set[str] = set()
    kept: list[R] = []
    repeated: dict[str, None] = {}
    for record in records:
        key = record_key(record)
        if key in seen:
            repeated[str(record["game_id"])] = None
            continue
        seen.add(key)
        kept.append(record)
    return kept, list(repeated)


def load_record(data: Any, where: str = "record") -> EpisodeRecord:
    """A record read from JSON (any version); `where` names it in the error message.

    Only `game_id` is required here (what a run folder needs to resume); readers that need more
    raise `RecordError` naming the field they miss.
    """
    if not isinstance(data, dict) or "game_id" not in data:
        raise RecordError(f"{where}: not an episode record")
    if "outcome" not in data:
        data = {**data, "outcome": ending_of(first_infos(data))}
    return data  # type: ignore[return-value] - a checked dict is the TypedDict at run time


# ---- accessors -----------------------------------------------------------------------------------


def final_infos(record: Mapping[str, Any], agent: str) -> Mapping[str, Any]:
    """`record["infos"][agent]`, with a clear error when the record is not a finished episode."""
    infos = record.get("infos")
    if not isinstance(infos, Mapping):
        raise RecordError(f"episode record {record.get('game_id')!r} has no 'infos' mapping")
    info = infos.get(agent)
    if not isinstance(info, Mapping):
        raise RecordError(
            f"episode record {record.get('game_id')!r} has no final infos for agent {agent!r}"
        )
    return info


def first_infos(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """The first agent's final infos ({} when there are none): the game-wide fields every agent's
    infos share (attacker variant, prior level, scenario id, rounds ...)."""
    for info in (record.get("infos") or {}).values():
        if isinstance(info, Mapping):
            return info
    return {}


def outcome(record: Mapping[str, Any]) -> Any:
    """How the game ended (see `outcome` in the module docstring); None when unknown."""
    value = record.get("outcome")
    return value if value is not None else ending_of(first_infos(record))


def eval_block(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """The job's annotations of the game (`eval`), {} when none."""
    return record.get("eval") or {}


def truncation_reason(record: Mapping[str, Any]) -> str | None:
    """Why the runner cut the game short (`CONTEXT_WINDOW` ...), None for a game the env ended."""
    reason = record.get("truncation_reason")
    return None if reason is None else str(reason)


def policy_name(record: Mapping[str, Any], agent: str) -> Any:
    """The `name` the agent's policy described itself with, None when absent."""
    return ((record.get("policies") or {}).get(agent) or {}).get("name")
