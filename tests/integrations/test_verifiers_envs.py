"""Whole TOM-SB and Decrypto episodes through verifiers' own `Env.run_episode` -> `Env.run`.

The model seats are served by an in-process OpenAI-compatible stand-in (127.0.0.1, port 0) that
replays what scripted tomgym policies answered when the batched runner played the same seed, so
the verifiers episode must reproduce the runner's record turn for turn: same agents in the same
order, same messages shown to each model, same infos, outcome and rewards. Policy seats are built
from policy specs inside the env, seeded with the task's seed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

vf = pytest.importorskip("verifiers.v1")

from tomgym.integrations.verifiers_envs import (  # noqa: E402
    RECORD_KEY,
    REWARD_NAME,
    DecryptoEnv,
    TomgymChatHarness,
    TomgymTask,
    TomgymTaskData,
    TomSBEnv,
)
from tomgym.rewards import RewardComposer  # noqa: E402
from tomgym.training.policy_specs import make_policy  # noqa: E402
from tomgym.training.runner import GameSpec, play_games  # noqa: E402
from verifiers.v1.utils.loaders import load_environment, resolve_env_config  # noqa: E402

from tests.integrations.standin import StandInServer  # noqa: E402

KEY_VAR = "TOMGYM_STANDIN_KEY"


def reference_record(env_id: str, task: TomgymTask, specs: dict[str, str]) -> dict[str, Any]:
    """The runner's record of the task's game, every agent a freshly seeded tomgym policy."""
    policies = {agent: make_policy(spec, seed=task.data.seed) for agent, spec in specs.items()}
    [record] = play_games(
        env_id,
        [GameSpec(task.data.name or "g", task.data.seed, task.data.options)],
        policies,
        env_config=task.data.env_config,
        record_prompts=False,
    )
    return record


def answers_of(record: dict[str, Any], agent: str) -> list[str]:
    return [turn["raw"] for turn in record["turns"] if turn["agent"] == agent]


def seat_config(model: str, server: StandInServer) -> dict[str, Any]:
    return {
        "model": model,
        "client": {"type": "eval", "base_url": server.base_url, "api_key_var": KEY_VAR},
    }


def run_episode(env: Any, task: TomgymTask, server: StandInServer) -> Any:
    async def main() -> Any:
        ctx = vf.ModelContext(
            model="unused-run-model",
            client=vf.EvalClientConfig(base_url=server.base_url, api_key_var=KEY_VAR),
        )
        async with env.serving():
            return await env.run_episode(task, ctx)

    return asyncio.run(main())


def same_game(record: dict[str, Any], reference: dict[str, Any]) -> None:
    assert record["outcome"] == reference["outcome"]
    assert record["turns"] == reference["turns"]
    assert record["infos"] == reference["infos"]
    assert record["rewards"] == reference["rewards"]


def check_model_requests(server: StandInServer, model: str, record: dict, agent: str) -> None:
    """Each request of a model seat is its conversation: system, then one user turn per answer."""
    requests = server.requests_for(model)
    turns = [turn for turn in record["turns"] if turn["agent"] == agent]
    assert len(requests) == len(turns)
    for index, (body, turn) in enumerate(zip(requests, turns, strict=True)):
        messages = body["messages"]
        assert messages[0]["role"] == "system" and messages[0]["content"]
        assert messages[-1] == {"role": "user", "content": turn["message"]}
        # the whole conversation so far: system + (user, assistant) per earlier turn + this user
        assert len(messages) == 2 + 2 * index
        if index:
            assert messages[-2] == {"role": "assistant", "content": turns[index - 1]["raw"]}


def test_plugins_load_by_verifiers_id() -> None:
    tomsb = load_environment(resolve_env_config({"taskset": {"id": "tomgym-tomsb"}}))
    decrypto = load_environment(resolve_env_config({"taskset": {"id": "tomgym-decrypto"}}))
    assert isinstance(tomsb, TomSBEnv) and isinstance(decrypto, DecryptoEnv)
    for env in (tomsb, decrypto):
        assert {type(h) for h in env._harnesses.values()} == {TomgymChatHarness}
    assert set(tomsb._agent_specs) == {"attacker", "defender"}
    assert set(decrypto._agent_specs) == {"encoder", "decoder", "interceptor"}


def test_tomsb_splits_are_the_benchmark_splits() -> None:
    from tomgym.envs.tomsb.benchmark import load_benchmark

    env = load_environment(resolve_env_config({"taskset": {"id": "tomgym-tomsb", "split": "test"}}))
    tasks = list(env.taskset)
    expected = [s.scenario_id for s in load_benchmark(0).filter(split="test")]
    assert [t.data.options["scenario"] for t in tasks] == expected
    assert [t.data.seed for t in tasks] == list(range(len(expected)))


def test_every_seat_a_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one seat to a model"):
        resolve_env_config(
            {
                "taskset": {"id": "tomgym-tomsb"},
                "policies": {"attacker": "scripted:base", "defender": "scripted:naive"},
            }
        )
    with pytest.raises(ValueError, match="unknown seat"):
        resolve_env_config({"taskset": {"id": "tomgym-tomsb"}, "policies": {"spy": "random"}})


def test_tomsb_episode_through_verifiers_matches_the_runner() -> None:
    config = {"taskset": {"id": "tomgym-tomsb", "split": "test"}}
    task = next(iter(load_environment(resolve_env_config(config)).taskset))
    reference = reference_record(
        "tomgym/tomsb-v0", task, {"attacker_0": "scripted:base", "defender_0": "scripted:naive"}
    )
    with StandInServer({"defender-model": answers_of(reference, "defender_0")}) as server:
        env = load_environment(
            resolve_env_config({**config, "defender": seat_config("defender-model", server)})
        )
        episode = run_episode(env, task, server)
        check_model_requests(server, "defender-model", reference, "defender_0")
    assert episode.ok, episode.errors
    [trace] = episode.traces
    assert trace.agent.name == "defender"
    record = trace.info[RECORD_KEY]
    same_game(record, reference)
    expected, components = RewardComposer({"fooling": 1.0}, gate="format", agent="defender_0")(
        reference
    )
    assert trace.rewards[REWARD_NAME].score == expected
    assert trace.metrics["fooling"] == components["fooling"]
    assert record["policies"]["defender_0"]["model"] == "defender-model"
    assert record["policies"]["attacker_0"]["spec"] == "scripted:base"


def test_decrypto_episode_through_verifiers_matches_the_runner() -> None:
    task = TomgymTask(TomgymTaskData(name="decrypto/7", seed=7, env_config={"max_rounds": 8}))
    reference = reference_record(
        "tomgym/decrypto-v0",
        task,
        {"encoder_0": "random", "decoder_0": "random", "interceptor_0": "random"},
    )
    replies = {
        "encoder-model": answers_of(reference, "encoder_0"),
        "decoder-model": answers_of(reference, "decoder_0"),
    }
    with StandInServer(replies) as server:
        env = load_environment(
            resolve_env_config(
                {
                    "taskset": {"id": "tomgym-decrypto"},
                    "encoder": seat_config("encoder-model", server),
                    "decoder": seat_config("decoder-model", server),
                    "policies": {"interceptor": "random"},
                }
            )
        )
        episode = run_episode(env, task, server)
        check_model_requests(server, "encoder-model", reference, "encoder_0")
        check_model_requests(server, "decoder-model", reference, "decoder_0")
    assert episode.ok, episode.errors
    traces = episode.by_agent
    assert set(traces) == {"encoder", "decoder"}
    for seat in ("encoder", "decoder"):
        same_game(traces[seat][0].info[RECORD_KEY], reference)
    encoder_weights = {"decrypto_win": 1.0, "decrypto_rounds": 0.5, "decrypto_interception": 0.5}
    expected, _ = RewardComposer(encoder_weights, gate="format", agent="encoder_0")(reference)
    assert traces["encoder"][0].rewards[REWARD_NAME].score == expected
    # no weights for the decoder: its reward is the game's own
    assert traces["decoder"][0].rewards[REWARD_NAME].score == reference["rewards"]["decoder_0"]
