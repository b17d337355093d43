"""Train a Decrypto interceptor (or decoder) with RLlib PPO against the embedding team.

RLlib's new API stack (RLModule + Learner, EnvRunner), its PettingZoo wrapper
`ParallelPettingZooEnv`, and a multi-agent config whose only trained policy is the learner's:
the env (`envs.wrappers.learner.DecryptoLearnerEnv`) exposes just the learning agent and plays
the encoder and decoder (or encoder and interceptor) with `EmbeddingDecryptoPolicy` inside
`step`. Observations are the numeric features of `tomgym/decrypto-numeric-v0` (GloVe cosines,
per-code scores, codes already played, round/token counts), actions `Discrete(24)`.

After training, the greedy PPO policy and two baselines play the same held-out seeds:
- interceptor: interception rate = interceptions / rounds played, and the interceptor's win rate;
- decoder: miscommunication rate = miscommunications / rounds played, and the team's win rate.

Needs `pip install "tomgym[embeddings,rllib]"` (CPU is enough):

    python examples/rllib_decrypto.py --role interceptor --iterations 40 --eval-games 300
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from tomgym.agents.base import Turn
from tomgym.agents.decrypto_baselines import EmbeddingDecryptoPolicy
from tomgym.envs.wrappers.learner import DecryptoLearnerEnv, numeric_action

ENV_NAME = "tomgym_decrypto_learner"
ROLES = {"interceptor": "interceptor_0", "decoder": "decoder_0"}
EVAL_SEED_OFFSET = 1_000_000  # held-out games: RLlib's training resets never reach these seeds


def make_env(config: dict[str, Any]) -> Any:
    """RLlib env creator: the learner view wrapped by RLlib's `ParallelPettingZooEnv`."""
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    return ParallelPettingZooEnv(learner_env(config))


def learner_env(config: dict[str, Any]) -> DecryptoLearnerEnv:
    learner = ROLES[config.get("role", "interceptor")]
    team = EmbeddingDecryptoPolicy(k=int(config.get("k", 16)), seed=int(config.get("seed", 0)))
    others = {a: team for a in ("encoder_0", "decoder_0", "interceptor_0") if a != learner}
    return DecryptoLearnerEnv(
        learners=(learner,),
        policies=others,
        reward_mode=config.get("reward_mode", "round"),
        flatten=True,
    )


def build_config(
    role: str = "interceptor",
    *,
    train_batch: int = 2000,
    minibatch: int = 250,
    epochs: int = 6,
    lr: float = 1e-3,
    entropy: float = 0.01,
    hidden: tuple[int, ...] = (64, 64),
    seed: int = 0,
    reward_mode: str = "round",
) -> Any:
    """A PPO config (new API stack, CPU, local env runner) for one learning role."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.tune.registry import register_env

    if role not in ROLES:
        raise ValueError(f"role must be one of {sorted(ROLES)}, got {role!r}")
    register_env(ENV_NAME, make_env)
    policy_id = role
    return (
        PPOConfig()
        .environment(ENV_NAME, env_config={"role": role, "seed": seed, "reward_mode": reward_mode})
        .multi_agent(
            policies={policy_id},
            policy_mapping_fn=lambda agent_id, episode, **kwargs: policy_id,
            policies_to_train=[policy_id],
        )
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
        .learners(num_learners=0)
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=list(hidden)))
        .training(
            train_batch_size_per_learner=train_batch,
            minibatch_size=minibatch,
            num_epochs=epochs,
            lr=lr,
            entropy_coeff=entropy,
            gamma=0.99,
        )
        .debugging(seed=seed, log_level="ERROR")
        .reporting(metrics_num_episodes_for_smoothing=100)
    )


def greedy_actor(algo: Any, role: str) -> Callable[[np.ndarray], int]:
    """The trained module's most likely action for one feature vector."""
    import torch

    module = algo.get_module(role)

    def act(features: np.ndarray) -> int:
        with torch.no_grad():
            out = module.forward_inference({"obs": torch.as_tensor(features[None, :])})
        return int(torch.argmax(out["action_dist_inputs"][0]))

    return act


@dataclass
class EvalResult:
    player: str
    games: int
    rounds: int
    interceptions: int
    miscommunications: int
    learner_wins: int

    @property
    def interception_rate(self) -> float:
        return self.interceptions / max(self.rounds, 1)

    @property
    def miscommunication_rate(self) -> float:
        return self.miscommunications / max(self.rounds, 1)

    @property
    def win_rate(self) -> float:
        return self.learner_wins / max(self.games, 1)

    def row(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "interception_rate": round(self.interception_rate, 4),
            "miscommunication_rate": round(self.miscommunication_rate, 4),
            "learner_win_rate": round(self.win_rate, 4),
        }


def evaluate(
    player: str,
    role: str,
    games: int,
    act: Callable[[DecryptoLearnerEnv, np.ndarray], int],
    k: int = 16,
    team_seed: int = 12345,
) -> EvalResult:
    """Play `games` held-out seeds with `act(env, features) -> action` in the learner's seat."""
    env = learner_env({"role": role, "k": k, "seed": team_seed, "reward_mode": "outcome"})
    agent = ROLES[role]
    result = EvalResult(player, games, 0, 0, 0, 0)
    for game in range(games):
        observations, _ = env.reset(seed=EVAL_SEED_OFFSET + game)
        info: dict[str, Any] = {}
        while env.agents:
            action = act(env, observations[agent])
            observations, _, _, _, infos = env.step({agent: action})
            info = infos[agent]
        result.rounds += info["rounds"]
        result.interceptions += info["interceptions"]
        result.miscommunications += info["miscommunications"]
        learner_won = info["team_won"] == (role == "decoder")
        result.learner_wins += int(learner_won)
    env.close()
    return result


def baseline_actors(role: str, seed: int = 7) -> dict[str, Callable[[Any, np.ndarray], int]]:
    rng = np.random.default_rng(seed)
    embedding = EmbeddingDecryptoPolicy(seed=seed)
    agent = ROLES[role]

    def random_act(env: Any, features: np.ndarray) -> int:
        return int(rng.integers(24))

    def embedding_act(env: DecryptoLearnerEnv, features: np.ndarray) -> int:
        turn = Turn(env._players.game_id, agent, env.text_observation(agent))
        return numeric_action(embedding.act_batch([turn])[0])

    return {"random": random_act, "embedding": embedding_act}


def train(config: Any, iterations: int, log: Callable[[str], None] = print) -> tuple[Any, list]:
    """Build the algorithm and run `iterations` training iterations; returns (algo, history)."""
    algo = config.build_algo()
    history = []
    for i in range(iterations):
        result = algo.train()
        runners = result.get("env_runners", {})
        row = {
            "iteration": i + 1,
            "env_steps": int(result.get("num_env_steps_sampled_lifetime", 0)),
            "episodes": int(runners.get("num_episodes_lifetime", 0) or 0),
            "episode_return_mean": float(runners.get("episode_return_mean", float("nan"))),
        }
        history.append(row)
        log(json.dumps(row))
    return algo, history


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", choices=sorted(ROLES), default="interceptor")
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--train-batch", type=int, default=2000)
    parser.add_argument("--eval-games", type=int, default=300)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reward-mode", choices=["round", "outcome"], default="round")
    parser.add_argument("--output", help="write the results as JSON here")
    args = parser.parse_args(argv)

    import ray

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    started = time.time()
    try:
        config = build_config(
            args.role,
            train_batch=args.train_batch,
            minibatch=min(250, args.train_batch),
            epochs=args.epochs,
            lr=args.lr,
            hidden=tuple(args.hidden),
            seed=args.seed,
            reward_mode=args.reward_mode,
        )
        algo, history = train(config, args.iterations)
        train_s = time.time() - started
        ppo = greedy_actor(algo, args.role)
        players = {**baseline_actors(args.role), "ppo": lambda env, features: ppo(features)}
        rows = [
            evaluate(name, args.role, args.eval_games, act).row() for name, act in players.items()
        ]
        algo.stop()
    finally:
        ray.shutdown()
    metric = "interception_rate" if args.role == "interceptor" else "miscommunication_rate"
    print(f"\n{args.role} vs the embedding team, {args.eval_games} held-out games each")
    print(f"{'player':<10} {metric:>22} {'learner win rate':>17} {'rounds':>7}")
    for row in rows:
        print(
            f"{row['player']:<10} {row[metric]:>22.3f} {row['learner_win_rate']:>17.3f} "
            f"{row['rounds']:>7}"
        )
    report = {
        "role": args.role,
        "iterations": args.iterations,
        "train_batch": args.train_batch,
        "env_steps": history[-1]["env_steps"] if history else 0,
        "train_seconds": round(train_s, 1),
        "reward_mode": args.reward_mode,
        "lr": args.lr,
        "epochs": args.epochs,
        "hidden": args.hidden,
        "history": history,
        "evaluation": rows,
    }
    print(f"trained {report['env_steps']} env steps in {train_s:.0f} s")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)
    return report


if __name__ == "__main__":
    main()
