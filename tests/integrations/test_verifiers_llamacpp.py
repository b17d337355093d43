"""A TOM-SB episode through verifiers with the defender seat served by a real llama.cpp server.

Runs only with `-m integration` (`make test-integration`), with the server fixture of
`tests/agents/test_integration_llamacpp.py` (the bundled SmolLM2 GGUF). The model's answers are
whatever they are; the check is that the episode verifiers played is exactly what our env gives
on the same seed when the scripted attacker meets those same defender answers.
"""

from __future__ import annotations

import pytest

pytest.importorskip("verifiers.v1")

from tomgym.integrations.verifiers_envs import RECORD_KEY  # noqa: E402
from tomgym.training.policy_specs import make_policy  # noqa: E402
from tomgym.training.runner import GameSpec, play_games  # noqa: E402
from verifiers.v1.utils.loaders import load_environment, resolve_env_config  # noqa: E402

from tests.agents.test_integration_llamacpp import llamacpp_url  # noqa: E402, F401 - fixture
from tests.integrations.test_verifiers_envs import run_episode  # noqa: E402

pytestmark = pytest.mark.integration


class _Replay:
    """A defender policy that gives the recorded answers in order (to replay the episode)."""

    name = "replay"

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)

    def reset(self, game_id: str) -> None:
        pass

    def forget(self, game_id: str) -> None:
        pass

    def close(self) -> None:
        pass

    def describe(self) -> dict[str, str]:
        return {"name": self.name}

    def act_batch(self, turns: list) -> list[str]:
        return [self.answers.pop(0) for _ in turns]


def test_tomsb_defender_on_llamacpp_replays_on_our_env(llamacpp_url: str) -> None:  # noqa: F811
    config = {
        "taskset": {"id": "tomgym-tomsb", "split": "test", "max_attacker_turns": 2},
        "defender": {
            "model": "smollm2",
            "client": {"type": "eval", "base_url": llamacpp_url, "api_key_var": "NO_KEY"},
            "sampling": {"temperature": 0.0, "max_tokens": 96},
        },
    }
    env = load_environment(resolve_env_config(config))
    task = next(iter(env.taskset))

    class _Server:  # run_episode only needs the run's base URL
        base_url = llamacpp_url

    episode = run_episode(env, task, _Server())
    assert episode.ok, episode.errors
    [trace] = episode.traces
    record = trace.info[RECORD_KEY]
    defender_answers = [t["raw"] for t in record["turns"] if t["agent"] == "defender_0"]
    assert defender_answers and trace.num_turns == len(defender_answers)
    policies = {
        "attacker_0": make_policy("scripted:base", seed=task.data.seed),
        "defender_0": _Replay(defender_answers),
    }
    # Same game id as the verifiers episode: scripted policies key their per-game draws on it.
    [replayed] = play_games(
        "tomgym/tomsb-v0",
        [GameSpec(record["game_id"], task.data.seed, task.data.options)],
        policies,
        env_config=task.data.env_config,
        record_prompts=False,
    )
    assert replayed["turns"] == record["turns"]
    assert replayed["infos"] == record["infos"]
    assert replayed["outcome"] == record["outcome"]
