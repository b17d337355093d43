"""Hugging Face `datasets` exports of the TOM-SB benchmark and of Decrypto seeds, for LLM-RL.

Each row is one episode start that a trainer can replay exactly, in the column layout TRL's
trainers (`GRPOTrainer`, `RLOOTrainer`) and verifiers-style environments read:
- `prompt`: the learner's first chat turn, `[{"role": "system", ...}, {"role": "user", ...}]`,
  exactly what `envs.wrappers.text` envs return from `reset` for this row;
- `task`: "tomsb-defender", "decrypto-encoder", "decrypto-decoder" or "decrypto-interceptor";
- `info`: `{"env_id", "seed", "options"}` (options as a JSON string): `reset(seed, options)` of
  the matching text env reproduces the row (`text_env_for_row(row)` builds and resets it);
- scenario fields, which TRL passes to reward functions as keyword arguments:
  - TOM-SB: `attacker` (scripted variant), and the benchmark's columns (`scenario_id`,
    `universe_id`, `split`, `theme`, `person`, `attacker_name`, `hierarchy`, `universe` as JSON,
    `ground_truth`, `prior_level`, `prior`);
  - Decrypto: `role`, `keywords` (4), `codes` (one [d, d, d] per possible round). These are the
    game's secrets: use them in rewards, never in prompts (the prompt shows each role only what
    it may know).

`tomsb_dataset(...)` gives one row per (scenario x attacker variant) of the chosen split(s);
`decrypto_dataset(seeds, role, policies)` one row per seed (roles other than the encoder need
policies for the roles that act before them, since their first prompt shows the hints).
`datasets` is imported only inside these functions (`pip install "tomgym[train]"`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tomgym.envs.decrypto.match import AGENTS as DECRYPTO_AGENTS
from tomgym.envs.tomsb.benchmark import hf_features, hf_rows, import_datasets, load_benchmark
from tomgym.envs.tomsb.generator import SPLITS
from tomgym.envs.tomsb.prompts import ATTACKER_VARIANTS
from tomgym.envs.wrappers.text import DecryptoTextEnv, TextEnv, TomSBDefenderTextEnv

TOMSB_ENV_ID = "tomgym/tomsb-v0"
DECRYPTO_ENV_ID = "tomgym/decrypto-v0"
DATASET_VERSION = "tomgym-datasets-1"


def row_seed(*parts: object) -> int:
    """A 31-bit seed from `parts`, identical in every process (BLAKE2, not salted `hash()`)."""
    text = "\x1f".join(str(p) for p in parts)
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % (2**31 - 1)


def _episode_features(datasets: Any, **columns: Any) -> Any:
    """The features of a dataset of episode starts: `prompt`, `task`, `info`, then `columns`."""
    text = datasets.Value("string")
    info = {"env_id": text, "seed": datasets.Value("int64"), "options": text}
    return datasets.Features(
        {
            "prompt": datasets.List({"role": text, "content": text}),
            "task": text,
            "info": info,
            **columns,
        }
    )


def tomsb_dataset(
    split: str | None = "train",
    attackers: Sequence[str] = ("base",),
    benchmark_seed: int = 0,
    prompt_variant: str = "default",
    max_scenarios: int | None = None,
    **env_config: Any,
) -> Any:
    """TOM-SB defender episodes: a `datasets.Dataset` (one split) or a `DatasetDict` (None).

    `env_config` goes to `TomSBDefenderTextEnv` (e.g. `max_attacker_turns`, `reveal_prior`).
    """
    datasets = import_datasets()
    bad = [a for a in attackers if a not in ATTACKER_VARIANTS]
    if bad or not attackers:
        raise ValueError(f"attackers must be from {list(ATTACKER_VARIANTS)}, got {list(attackers)}")
    if split is None:
        return datasets.DatasetDict(
            {
                name: tomsb_dataset(
                    name, attackers, benchmark_seed, prompt_variant, max_scenarios, **env_config
                )
                for name in SPLITS
            }
        )
    benchmark = load_benchmark(benchmark_seed)
    scenarios = benchmark.split(split)[: max_scenarios if max_scenarios is not None else None]
    scenario_columns = hf_rows(scenarios)
    columns: dict[str, list[Any]] = {
        "prompt": [],
        "task": [],
        "info": [],
        "attacker": [],
        **{name: [] for name in scenario_columns},
    }
    for variant in attackers:
        env = TomSBDefenderTextEnv(
            attacker=variant,
            benchmark_seed=benchmark_seed,
            prompt_variant=prompt_variant,
            **env_config,
        )
        for i, scenario in enumerate(scenarios):
            seed = row_seed(DATASET_VERSION, benchmark_seed, scenario.scenario_id, variant)
            options = {"scenario": scenario.scenario_id, "attacker": variant}
            columns["prompt"].append(env.reset(seed=seed, options=options))
            columns["task"].append(env.task)
            columns["info"].append(
                {"env_id": TOMSB_ENV_ID, "seed": seed, "options": json.dumps(options)}
            )
            columns["attacker"].append(variant)
            for name, values in scenario_columns.items():
                columns[name].append(values[i])
        env.close()
    features = _episode_features(
        datasets, attacker=datasets.Value("string"), **hf_features(datasets)
    )
    return datasets.Dataset.from_dict(columns, features=features)


def decrypto_dataset(
    seeds: int | Iterable[int] = 256,
    role: str = "encoder_0",
    policies: Mapping[str, Any] | None = None,
    **env_config: Any,
) -> Any:
    """Decrypto episodes of `role`, one per seed (`seeds`: a count from 0, or the seeds).

    `policies` ({agent: Policy}) play the two other roles; the encoder needs none because it
    speaks first (any given are still used in `text_env_for_row`). `env_config` goes to the
    text env (`max_rounds`, `prompt_variant`, `tom`, ...).
    """
    datasets = import_datasets()
    if role not in DECRYPTO_AGENTS:
        raise ValueError(f"role must be one of {DECRYPTO_AGENTS}, got {role!r}")
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise ValueError("no seeds given")
    env = _decrypto_env(role, policies, env_config)
    columns: dict[str, list[Any]] = {
        k: [] for k in ("prompt", "task", "info", "role", "keywords", "codes")
    }
    for seed in seed_list:
        columns["prompt"].append(env.reset(seed=seed))
        game = env.env.match.game
        columns["task"].append(env.task)
        columns["info"].append({"env_id": DECRYPTO_ENV_ID, "seed": seed, "options": "{}"})
        columns["role"].append(role)
        columns["keywords"].append(list(game.keywords))
        columns["codes"].append([list(c) for c in game.codes])
    env.close()
    features = _episode_features(
        datasets,
        role=datasets.Value("string"),
        keywords=datasets.List(datasets.Value("string")),
        codes=datasets.List(datasets.List(datasets.Value("int8"))),
    )
    return datasets.Dataset.from_dict(columns, features=features)


class _SilentPartner:
    """Stands in for roles that never act before the encoder's first question (dataset only)."""

    name = "unused"

    def act_batch(self, turns: Sequence[Any]) -> list[str]:
        raise RuntimeError(
            "this Decrypto role needs policies for the other roles: pass policies={agent: policy}"
        )


def _decrypto_env(
    role: str, policies: Mapping[str, Any] | None, env_config: Mapping[str, Any]
) -> DecryptoTextEnv:
    others = [a for a in DECRYPTO_AGENTS if a != role]
    given = dict(policies or {})
    if role == "encoder_0":
        given = {a: given.get(a, _SilentPartner()) for a in others}
    return DecryptoTextEnv(role, given, **env_config)


def text_env_for_row(
    row: Mapping[str, Any], policies: Mapping[str, Any] | None = None, **env_config: Any
) -> tuple[TextEnv, list[dict[str, str]]]:
    """The text env of a dataset row, reset to it; returns (env, messages == row["prompt"]).

    TOM-SB rows need nothing else; Decrypto rows need `policies` for the other roles (the
    encoder's partners are asked only once the encoder has answered).
    """
    info = row["info"]
    options = json.loads(info["options"]) if info.get("options") else {}
    if info["env_id"] == TOMSB_ENV_ID:
        env: TextEnv = TomSBDefenderTextEnv(attacker=options.get("attacker", "base"), **env_config)
    elif info["env_id"] == DECRYPTO_ENV_ID:
        env = _decrypto_env(row["role"], policies, env_config)
    else:
        raise ValueError(f"row has unknown env_id {info['env_id']!r}")
    messages = env.reset(seed=int(info["seed"]), options=options or None)
    if [dict(m) for m in row["prompt"]] != messages:
        raise ValueError(
            "the env does not reproduce this row's prompt: build it with the same env_config "
            "(prompt_variant, max_rounds, benchmark_seed, ...) as the dataset"
        )
    return env, messages
