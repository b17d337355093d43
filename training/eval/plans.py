"""Game plans for `tomgym play` and `tomgym human`: the games by name, their settings, one run.

- `GAMES`: the game names of the command line (`decrypto`, `tomsb`) with their env id, agents
  and default players (`defaults` for `play`; `human_defaults` for `human`, where the TOM-SB
  defender is the scripted ToM heuristic rather than the model).
- `GameSettings` + `game_plan(game, settings, specs)` -> (env_config, reset options shared by
  every game), after `check_settings` rejected, in one line each, settings of the other game
  (`--tom` for TOM-SB, `--reveal-prior` for Decrypto), out-of-range values and unknown names.
  Prompt variants: Decrypto wordings are integers `0 .. NUM_PROMPT_VARIANTS-1`; TOM-SB defender
  prompts are names (`envs.tomsb.prompts.DEFENDER_PROMPT_VARIANTS`, the prompted baselines
  `refusal`, `naive_misleading`, `tom_misleading` included).
- `resolve_agents(game, items)`: `--agent AGENT=SPEC` over the defaults, every spec parsed and
  checked against its role (`tomgym.agents.specs.check_role`); also says which agents kept a
  default that is a language model, so the command can say so.
- `PlayJob` + `run_job(job, policies, folder)`: the games of a run (game `i` has id
  `{prefix}{game}-s{seed}-{i:05d}` and env seed `seed + i`), played through
  `training.eval.jobs.play_into_folder` (the step every evaluation uses), so a resumed run plays
  only the games its folder lacks.

Every error is a `PlanError` (a ValueError) with one line naming the setting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from tomgym.agents.base import Policy
from tomgym.agents.specs import parse_spec
from tomgym.envs.decrypto.match import TOM_EXPERIMENTS
from tomgym.envs.decrypto.prompts import NUM_PROMPT_VARIANTS
from tomgym.envs.tomsb.env import SPLITS
from tomgym.envs.tomsb.prompts import DEFENDER_PROMPT_VARIANTS
from tomgym.rewards.episode import EpisodeRecord
from tomgym.training.eval.jobs import DECRYPTO_AGENTS, DECRYPTO_ENV, TOMSB_ENV, play_into_folder
from tomgym.training.policy_specs import parse_agent_specs
from tomgym.training.run_folder import RunFolder
from tomgym.training.runner import GameSpec, RunStats

TOM_SHORT_NAMES = {"pt": "perspective_taking", "fb": "false_belief"}


class PlanError(ValueError):
    """A setting that does not fit the chosen game; the message is one line."""


@dataclass(frozen=True)
class GameInfo:
    """One game of the command line."""

    name: str
    env_id: str
    agents: tuple[str, ...]
    defaults: Mapping[str, str]
    human_defaults: Mapping[str, str]


GAMES: dict[str, GameInfo] = {
    "decrypto": GameInfo(
        "decrypto",
        DECRYPTO_ENV,
        DECRYPTO_AGENTS,
        dict.fromkeys(DECRYPTO_AGENTS, "embedding"),
        dict.fromkeys(DECRYPTO_AGENTS, "embedding"),
    ),
    "tomsb": GameInfo(
        "tomsb",
        TOMSB_ENV,
        ("attacker_0", "defender_0"),
        {"attacker_0": "scripted:base", "defender_0": "default"},
        {"attacker_0": "scripted:base", "defender_0": "scripted:tom_heuristic"},
    ),
}


def game_info(name: str) -> GameInfo:
    try:
        return GAMES[name]
    except KeyError:
        raise PlanError(f"unknown game {name!r}; games: {', '.join(GAMES)}") from None


@dataclass(frozen=True)
class GameSettings:
    """Per-game settings of a run; None / False / () means not given (the env's default).

    `game` names the game each setting belongs to in `metadata`; a setting of the other game is
    rejected by `check_settings`.
    """

    max_rounds: int | None = field(default=None, metadata={"game": "decrypto"})
    tom: tuple[str, ...] = field(default=(), metadata={"game": "decrypto"})
    play_on: bool = field(default=False, metadata={"game": "decrypto"})
    split: str | None = field(default=None, metadata={"game": "tomsb"})
    prior_level: int | None = field(default=None, metadata={"game": "tomsb"})
    max_attacker_turns: int | None = field(default=None, metadata={"game": "tomsb"})
    max_retries: int | None = field(
        default=None,
        metadata={
            "game": "tomsb",
            "help": "re-asks after an invalid answer before the env sends its fallback (env "
            "default 10; the learning benchmark plays with 1)",
        },
    )
    reveal_prior: bool = field(default=False, metadata={"game": "tomsb"})
    # Both games: a Decrypto wording index, or a TOM-SB defender prompt name.
    prompt_variant: str | int | None = None


def setting_help(name: str) -> str | None:
    """The command-line help of a `GameSettings` field, where it has one."""
    return next(f.metadata.get("help") for f in fields(GameSettings) if f.name == name)


def flag(name: str) -> str:
    """The command-line flag of a `GameSettings` field (`reveal_prior` -> `--reveal-prior`)."""
    return "--" + name.replace("_", "-")


def parse_tom(text: str | Sequence[str]) -> tuple[str, ...]:
    """ToM experiments from `pt,fb` or full names; unknown ones raise PlanError."""
    items = text.split(",") if isinstance(text, str) else list(text)
    names = [TOM_SHORT_NAMES.get(t.strip(), t.strip()) for t in items if t.strip()]
    unknown = [t for t in names if t not in TOM_EXPERIMENTS]
    if unknown:
        raise PlanError(
            f"unknown --tom experiment(s) {unknown}; choose from {list(TOM_EXPERIMENTS)} "
            f"(short: {', '.join(TOM_SHORT_NAMES)})"
        )
    return tuple(dict.fromkeys(names))


def prompt_variant(game: str, value: str | int) -> str | int:
    """A prompt variant checked for `game`: an int in range (Decrypto) or a name (TOM-SB)."""
    text = str(value).strip()
    if game == "decrypto":
        if not text.lstrip("-").isdigit() or not 0 <= int(text) < NUM_PROMPT_VARIANTS:
            raise PlanError(
                f"--prompt-variant for decrypto must be 0..{NUM_PROMPT_VARIANTS - 1}, got {value!r}"
            )
        return int(text)
    if text not in DEFENDER_PROMPT_VARIANTS:
        raise PlanError(
            f"--prompt-variant for tomsb is a defender prompt name, got {value!r}; "
            f"choose from {', '.join(DEFENDER_PROMPT_VARIANTS)}"
        )
    return text


def check_settings(game: str, settings: GameSettings) -> None:
    """PlanError naming the first setting that does not apply to `game` or is out of range."""
    for spec in fields(settings):
        owner = spec.metadata.get("game")
        value = getattr(settings, spec.name)
        if owner is not None and owner != game and value not in (None, False, ()):
            raise PlanError(f"{flag(spec.name)} is a {owner} option; it does not apply to {game}")
    for name in ("max_rounds", "max_attacker_turns"):
        value = getattr(settings, name)
        if value is not None and value < 1:
            raise PlanError(f"{flag(name)} must be >= 1, got {value}")
    if settings.max_retries is not None and settings.max_retries < 0:
        raise PlanError(f"{flag('max_retries')} must be >= 0, got {settings.max_retries}")
    if settings.split is not None and settings.split not in SPLITS:
        raise PlanError(f"unknown split {settings.split!r}; splits: {', '.join(SPLITS)}")
    if settings.prior_level is not None and settings.prior_level not in (0, 1, 2):
        raise PlanError(f"--prior-level must be 0, 1 or 2, got {settings.prior_level}")
    parse_tom(settings.tom)
    if settings.prompt_variant is not None:
        prompt_variant(game, settings.prompt_variant)


ENV_CONFIG_SETTINGS = {"decrypto": ("max_rounds",), "tomsb": ("max_attacker_turns", "max_retries")}
"""The `GameSettings` fields that are env constructor arguments, per game (the rest are reset
options)."""


def env_config_of(game: str, settings: GameSettings) -> dict[str, Any]:
    """The env constructor arguments `settings` gives (`ENV_CONFIG_SETTINGS`), those set only."""
    values = {name: getattr(settings, name) for name in ENV_CONFIG_SETTINGS[game]}
    return {name: value for name, value in values.items() if value is not None}


def game_plan(
    game: str, settings: GameSettings, specs: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(env_config, reset options shared by every game) for `settings` (checked first).

    TOM-SB games default to the test split; a scripted attacker's variant becomes the env's
    `attacker` option (recorded in infos), any other attacker plays the base prompt.
    """
    check_settings(game, settings)
    env_config = env_config_of(game, settings)
    options: dict[str, Any] = {}
    if game == "decrypto":
        if settings.tom:
            options["tom"] = list(parse_tom(settings.tom))
        if settings.play_on:
            options["play_on"] = True
    else:
        options["split"] = settings.split or "test"
        if settings.prior_level is not None:
            options["prior_level"] = settings.prior_level
        if settings.reveal_prior:
            options["reveal_prior"] = True
        attacker = parse_spec(specs["attacker_0"])
        if attacker.role == "attacker":
            options["attacker"] = attacker.target
    if settings.prompt_variant is not None:
        options["prompt_variant"] = prompt_variant(game, settings.prompt_variant)
    return env_config, options


def resolve_agents(
    game: GameInfo,
    items: Sequence[str] | None,
    *,
    defaults: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], list[str]]:
    """(agent -> canonical spec, agents that kept a default that is a language model)."""
    base = game.defaults if defaults is None else defaults
    specs = parse_agent_specs(items, base, game.agents, game=game.name)
    given = {item.partition("=")[0].strip() for item in items or []}
    llm_defaults = [a for a in game.agents if a not in given and parse_spec(specs[a]).is_llm]
    return specs, llm_defaults


@dataclass(frozen=True)
class PlayJob:
    """The games of one `play` / `human` run (see the module docstring for ids and seeds)."""

    game: GameInfo
    specs: Mapping[str, str]
    env_config: Mapping[str, Any]
    options: Mapping[str, Any]
    count: int
    seed: int
    prefix: str = ""

    def __post_init__(self) -> None:
        if self.count < 1:
            raise PlanError(f"--games must be >= 1, got {self.count}")
        if self.seed < 0:
            raise PlanError(f"--seed must be >= 0, got {self.seed}")

    def games(self) -> list[GameSpec]:
        return [
            GameSpec(
                f"{self.prefix}{self.game.name}-s{self.seed}-{i:05d}", self.seed + i, self.options
            )
            for i in range(self.count)
        ]

    def config(self, command: str, **extra: Any) -> dict[str, Any]:
        """The run folder's config.yaml content."""
        return {
            "command": command,
            "env_id": self.game.env_id,
            "agents": dict(self.specs),
            "games": self.count,
            "seed": self.seed,
            **extra,
            "env_config": dict(self.env_config),
            "options": dict(self.options),
        }


def run_job(
    job: PlayJob,
    policies: Mapping[str, Policy],
    folder: RunFolder | None,
    *,
    concurrency: int,
    progress: bool,
    record_prompts: bool = True,
    on_record: Callable[[EpisodeRecord], None] | None = None,
    stats: RunStats | None = None,
) -> list[EpisodeRecord]:
    """Play the job's games the folder lacks (every game without a folder); the records played.

    The folder must be started (`RunFolder.start`) by the caller.
    """
    games = job.games()
    return play_into_folder(
        folder,
        job.game.env_id,
        games,
        {g.game_id: policies for g in games},
        agents=job.game.agents,
        env_config=job.env_config,
        concurrency=concurrency,
        progress=progress,
        stats=stats,
        record_prompts=record_prompts,
        on_record=on_record,
    )
