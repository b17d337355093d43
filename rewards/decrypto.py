"""Decrypto per-role rewards: pure functions of one episode record.

Read from the final infos of the scored agent (`record["infos"][agent]`): `ending` (one of
"survived", "miscommunication", "interception", "both"), `team_won`, `miscommunications`,
`interceptions`, `rounds`, and the ToM summary (`tom`: {"perspective_taking": {...},
"false_belief": {...}}) when those experiments ran.

Sign convention: every function returns "higher is better for `agent`'s side".
- `win`: 1.0 if the agent's side won (team = encoder/decoder survived; interceptor otherwise).
- `miscommunication`: team roles -miscommunications/2 (0, -0.5, -1); interceptor +same.
- `interception`: team roles -interceptions/2; interceptor +interceptions/2.
- `rounds_survived`: team roles rounds/max_rounds (a dense survival signal); interceptor
  1 - rounds/max_rounds (a faster win is better).
- `tom_probe_accuracy`: a rate from the ToM summary (default for the encoder: perspective taking,
  prediction == the interceptor's guess; for the interceptor: strong false-belief), 0.0 when the
  probe was asked but no round counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tomgym.rewards.episode import RecordError, final_infos

ENDINGS = ("survived", "miscommunication", "interception", "both")
TEAM = ("encoder_0", "decoder_0")
INTERCEPTOR = "interceptor_0"
MAX_ROUNDS = 8
TOKENS_TO_LOSE = 2
DEFAULT_TOM_PROBE = {
    "encoder_0": "perspective_taking.predicted_interceptor",
    "interceptor_0": "false_belief.strong_fb",
    "decoder_0": "perspective_taking.predicted_interceptor",
}


def _side(agent: str) -> int:
    """+1 for the team, -1 for the interceptor."""
    if agent in TEAM:
        return 1
    if agent == INTERCEPTOR:
        return -1
    raise RecordError(f"{agent!r} is not a Decrypto agent; expected one of {[*TEAM, INTERCEPTOR]}")


def _int(info: Mapping[str, Any], key: str, record: Mapping[str, Any]) -> int:
    if key not in info:
        raise RecordError(
            f"episode record {record.get('game_id')!r}: final infos lack {key!r} "
            "(is this a finished Decrypto episode?)"
        )
    return int(info[key])


def ending(record: Mapping[str, Any], agent: str) -> str:
    info = final_infos(record, agent)
    value = info.get("ending")
    if value not in ENDINGS:
        raise RecordError(
            f"episode record {record.get('game_id')!r}: ending {value!r} is not one of {ENDINGS}"
        )
    return value


def win(record: Mapping[str, Any], agent: str) -> float:
    _side(agent)
    team_won = ending(record, agent) == "survived"
    return float(team_won if _side(agent) > 0 else not team_won)


def miscommunication(record: Mapping[str, Any], agent: str) -> float:
    count = min(_int(final_infos(record, agent), "miscommunications", record), TOKENS_TO_LOSE)
    return -_side(agent) * count / TOKENS_TO_LOSE


def interception(record: Mapping[str, Any], agent: str) -> float:
    count = min(_int(final_infos(record, agent), "interceptions", record), TOKENS_TO_LOSE)
    return -_side(agent) * count / TOKENS_TO_LOSE


def rounds_survived(record: Mapping[str, Any], agent: str, max_rounds: int = MAX_ROUNDS) -> float:
    rounds = min(_int(final_infos(record, agent), "rounds", record), max_rounds)
    fraction = rounds / max_rounds
    return fraction if _side(agent) > 0 else 1.0 - fraction


def tom_probe_accuracy(record: Mapping[str, Any], agent: str, probe: str | None = None) -> float:
    """A ToM rate from `infos[agent]["tom"]`, addressed as "experiment.rate" (see module doc)."""
    path = probe or DEFAULT_TOM_PROBE.get(agent)
    if path is None:
        raise RecordError(f"no default ToM probe for agent {agent!r}; name one")
    info = final_infos(record, agent)
    node: Any = info.get("tom")
    if not isinstance(node, Mapping):
        raise RecordError(
            f"episode record {record.get('game_id')!r}: final infos lack the 'tom' summary "
            "(enable the ToM experiments in the env config)"
        )
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            raise RecordError(
                f"episode record {record.get('game_id')!r}: ToM summary lacks {path!r}"
            )
        node = node[key]
    return 0.0 if node is None else float(node)


def outcome_indicators(record: Mapping[str, Any], agent: str) -> dict[str, float]:
    value = ending(record, agent)
    return {f"outcome/{name}": float(value == name) for name in ENDINGS}
