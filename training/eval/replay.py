"""Decrypto replay: a policy plays the decoder or the interceptor on recorded games.

`replay_decrypto` reads recorded games (our `games.jsonl` or the `human_games.json` format,
`load_recorded_games`), pins the env to the recorded keywords and codes (`strict_guesses=False`,
as human guesses may repeat digits), lets the other roles replay their recorded answers
(`RecordedPlayer`) and reports the policy's per-round miscommunication / interception rate next
to the recorded players' rate on the same rounds (`training.eval.metrics.replay_summary`). The run
folder is like every evaluation's (`training.eval.jobs`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tomgym.agents.base import BasePolicy, Policy, Turn
from tomgym.training.eval import metrics, tables
from tomgym.training.eval.jobs import (
    DECRYPTO_AGENTS,
    DECRYPTO_ENV,
    EvaluationError,
    check_resume,
    play_and_close,
    spec_policy,
)
from tomgym.training.run_folder import RunFolder
from tomgym.training.runner import GameSpec

from tomgym.json_text import json_document, json_lines

REPLAY_ROLES = ("decoder", "interceptor")


def _guess_text(code: Sequence[int]) -> str:
    return "ANSWER: " + json.dumps({"guess": "-".join(str(int(d)) for d in code)})


def _hints_text(hints: Sequence[str]) -> str:
    return "ANSWER: " + json.dumps({"hints": list(hints)})


def load_recorded_games(path: str | Path) -> list[dict[str, Any]]:
    """Recorded Decrypto games as [{"game_id", "seed", "keywords", "play_on", "rounds": [{"code",
    "hints", "decoder_guess", "interceptor_guess"}]}], from our games.jsonl (Decrypto records)
    or the human_games.json format ({"games": [{"keywords", "turns": [...], ...}]})."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EvaluationError(f"cannot read games file {path}: {exc.strerror or exc}") from None
    games: list[dict[str, Any]] = []
    stripped = text.lstrip()
    if stripped.startswith("{") and '"games"' in stripped[:20000] and "\n{" not in stripped:
        data = json_document(text, path, EvaluationError)
        for index, game in enumerate(data.get("games") or []):
            try:
                games.append(
                    {
                        "game_id": f"human-{game.get('game_index', index)}",
                        "seed": int(game.get("env_seed", index)),
                        "keywords": list(game["keywords"]),
                        "play_on": bool(
                            (game.get("outcome") or {}).get("play_continued_after_end")
                        ),
                        "rounds": [
                            {
                                "code": list(t["code"]),
                                "hints": list(t["hints"]),
                                "decoder_guess": list(t["decoder_guess"]),
                                "interceptor_guess": list(t["interceptor_guess"]),
                            }
                            for t in game["turns"]
                        ],
                    }
                )
            except (KeyError, TypeError) as exc:
                raise EvaluationError(f"{path}: game {index} lacks field {exc}") from None
    else:
        for number, record in json_lines(text.splitlines(), path, EvaluationError, what="record"):
            if "decrypto" not in str(record.get("env_id", "")):
                raise EvaluationError(f"{path}:{number}: not a Decrypto episode record")
            info = (record.get("infos") or {}).get("encoder_0") or {}
            detail = info.get("rounds_detail")
            if not detail or "keywords" not in info:
                raise EvaluationError(
                    f"{path}:{number}: record lacks infos.encoder_0.keywords/rounds_detail"
                )
            games.append(
                {
                    "game_id": str(record["game_id"]),
                    "seed": int(record.get("seed") or 0),
                    "keywords": list(info["keywords"]),
                    "play_on": bool((record.get("env_config") or {}).get("play_on", False)),
                    "rounds": [
                        {k: r[k] for k in ("code", "hints", "decoder_guess", "interceptor_guess")}
                        for r in detail
                    ],
                }
            )
    if not games:
        raise EvaluationError(f"{path} holds no games")
    return games


class RecordedPlayer(BasePolicy):
    """Replays the recorded answers of one game per round (hints for the encoder, guesses);
    it reads the recording and keeps no per-game state."""

    name = "recorded"

    def __init__(self, games: Mapping[str, Mapping[str, Any]]) -> None:
        self.games = games

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        answers = []
        for turn in turns:
            rounds = self.games[turn.game_id]["rounds"]
            played = rounds[min(int(turn.observation.get("round", 1)), len(rounds)) - 1]
            if turn.agent == "encoder_0":
                answers.append(_hints_text(played["hints"]))
            else:
                role = turn.agent.split("_")[0]
                answers.append(_guess_text(played[f"{role}_guess"]))
        return answers

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "backend": "recorded"}


def replay_decrypto(
    policy_spec: str,
    role: str = "decoder",
    games_file: str | Path = "",
    out_dir: str | Path = "runs/replay-decrypto",
    *,
    concurrency: int = 8,
    resume: bool = False,
    progress: bool = False,
    policy_factory: Callable[[str, int], Policy] | None = None,
) -> dict[str, Any]:
    """Let `policy_spec` play `role` on recorded games; compare its per-round error rate.

    The env runs at most as many rounds as were recorded (`max_rounds`), so every round has
    recorded hints. A policy whose mistakes end a game earlier than the recording plays fewer
    rounds; the recorded players' rate is therefore given both on the rounds the policy played
    (`recorded_rate_same_rounds`, the fair comparison) and on all recorded rounds.
    """
    if role not in REPLAY_ROLES:
        raise EvaluationError(f"unknown role {role!r}; valid roles: {', '.join(REPLAY_ROLES)}")
    factory = policy_factory or spec_policy
    recorded = load_recorded_games(games_file)
    by_id = {g["game_id"]: g for g in recorded}
    config = {
        "kind": "replay_decrypto",
        "env_id": DECRYPTO_ENV,
        "policy": policy_spec,
        "role": role,
        "games_file": str(Path(games_file).resolve()),
    }
    folder = RunFolder(out_dir)
    check_resume(folder, config, resume)
    policy = factory(policy_spec, 0)
    folder.start(config, resume=resume)
    player = RecordedPlayer(by_id)
    agent = f"{role}_0"
    game_specs: list[GameSpec] = []
    assignments: dict[str, dict[str, Policy]] = {}
    for game in recorded:
        options = {
            "keywords": game["keywords"],
            "codes": [r["code"] for r in game["rounds"]],
            "play_on": game["play_on"],
            "max_rounds": len(game["rounds"]),
        }
        # The recorded rounds travel in the record, so tables regenerate from games.jsonl alone.
        block = {
            "replay_role": role,
            "policy_spec": policy_spec,
            "recorded_rounds": game["rounds"],
        }
        game_specs.append(GameSpec(game["game_id"], game["seed"], options, block))
        assignments[game["game_id"]] = {
            a: (policy if a == agent else player) for a in DECRYPTO_AGENTS
        }
    play_and_close(
        folder,
        DECRYPTO_ENV,
        game_specs,
        assignments,
        [policy],
        agents=DECRYPTO_AGENTS,
        env_config={"strict_guesses": False},
        concurrency=concurrency,
        progress=progress,
        stats=None,
    )
    records = folder.records()
    summary = metrics.replay_summary(records)
    summary["overall"] = metrics.summarize(records)["overall"]
    summary["config"] = folder.config()
    folder.write_summary(summary)
    tables.write_tables(folder.path, records)
    return summary
