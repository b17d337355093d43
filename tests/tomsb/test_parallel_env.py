"""TOM-SB env behaviour beyond the API conformance: the benchmark pool of the registered env,
the parallel view against the AEC env, pickling and API misuse.

PettingZoo/Gymnasium conformance of every registered id and variant is
tests/envs/test_registry_conformance.py."""

from __future__ import annotations

import pickle
import warnings

import pytest
from tomgym.envs import tomsb_v0
from tomgym.envs.tomsb.env import ATTACKER, DEFENDER

from tests.tomsb.test_env import AdoptingAttacker, fixture_scenarios, refusing_defender
from tomgym import envs

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _aec(**config):
    return tomsb_v0.env(scenarios=fixture_scenarios(), **config)


def _par(**config):
    return tomsb_v0.parallel_env(scenarios=fixture_scenarios(), **config)


def test_registered_default_env_uses_the_benchmark() -> None:
    pytest.importorskip("tomgym.envs.tomsb.benchmark")
    from pettingzoo import aec_registry, parallel_registry

    assert "tomgym/tomsb-v0" in aec_registry and "tomgym/tomsb-v0" in parallel_registry
    raw = tomsb_v0.env(max_retries=1, max_attacker_turns=3).unwrapped
    raw.reset(seed=5)
    assert raw._scenario.extra["split"] == "train"
    for split in ("validation", "test"):
        raw.reset(seed=5, options={"split": split, "prior_level": 2})
        assert raw._scenario.extra["split"] == split and raw._scenario.prior_level == 2
    scenario_id = raw._scenario.scenario_id
    raw.reset(options={"scenario": scenario_id})
    assert raw._scenario.scenario_id == scenario_id
    with pytest.raises(ValueError, match="unknown scenario id"):
        raw.reset(options={"scenario": "no-such-scenario"})
    assert envs.tomsb_v0 is tomsb_v0


def test_pickle_wrapped_and_parallel() -> None:
    for env in (_aec(), _par()):
        env.reset(seed=1)
        clone = pickle.loads(pickle.dumps(env))
        assert type(clone) is type(env)


def test_parallel_episode_matches_aec() -> None:
    aec, par = _aec().unwrapped, _par()
    aec.reset(seed=7)
    obs, infos = par.reset(seed=7)
    assert set(obs) == {ATTACKER, DEFENDER} and set(infos) == {ATTACKER, DEFENDER}
    att_a, att_p = AdoptingAttacker(), AdoptingAttacker()
    while par.agents:
        actor = par.acting_agent
        assert actor == aec.agent_selection
        assert obs[actor] == aec.observe(actor)
        waiting = DEFENDER if actor == ATTACKER else ATTACKER
        assert obs[waiting]["message"] == ""  # only the agent to move is asked something
        act_p = att_p(obs[actor]) if actor == ATTACKER else refusing_defender(obs[actor])
        act_a = att_a(aec.observe(actor)) if actor == ATTACKER else refusing_defender({})
        obs, rewards, terms, truncs, infos = par.step({actor: act_p, waiting: "ignored"})
        aec.step(act_a)
        assert not any(truncs.values())
    assert terms == {ATTACKER: True, DEFENDER: True}
    assert rewards == {ATTACKER: 1.0, DEFENDER: 0.0}
    assert infos[DEFENDER]["outcome"] == "detected" == aec.summary()["outcome"]


def test_parallel_step_errors() -> None:
    par = _par()
    par.reset(seed=0)
    with pytest.raises(ValueError, match="it is attacker_0's turn"):
        par.step({DEFENDER: "{}"})
    with pytest.raises(ValueError, match="unknown agent"):
        par.step({ATTACKER: "{}", "spy_0": "{}"})


def test_order_enforcing_wrapper_guards_use_before_reset() -> None:
    env = _aec()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception, match="reset"):
            env.step("{}")
