"""The other agents of a training run: opponents built from specs, retried, chosen per route.

- `build_opponent(spec)`: a policy from an opponent spec (`TrainConfig.opponents`): a policy spec
  of `tomgym.agents.specs`, optionally prefixed `decrypto:` / `llm:`, or `frozen`.
- `ResilientPolicy`: retries a failing backend, then gives up on the failing games only; the
  episode player reads `failure(game_id)` when the game ends and drops that episode.
- `PolicyPerRoute`: an opponent that depends on the dataset row's route (a spec with `{route}`,
  e.g. `scripted:{route}` for the TOM-SB attacker variant): one policy per route, built once.
  `opponent_for(opponent, route)` resolves either kind to the policy that plays a game.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tomgym.agents.base import BasePolicy, Policy, Turn
from tomgym.agents.specs import LLM_KINDS
from tomgym.training.rl.train_config import ConfigError, TrainConfig
from tomgym.training.routing import forget_game

logger = logging.getLogger(__name__)


class ResilientPolicy(BasePolicy):
    """Wraps an opponent: retries failed `act_batch` calls, then gives up on those games only.

    A game whose opponent failed `max_retries + 1` times is recorded in `failed_games` and answered
    with `fallback` from then on (the env re-asks and eventually applies its own default), so the
    other games of the batch and the training run go on. The trainer drops failed games from
    their groups (reward None -> TRL excludes them from the group mean, advantage 0).
    """

    def __init__(self, inner: Policy, *, max_retries: int = 2, backoff_s: float = 0.5) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "policy")
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.failed_games: dict[str, str] = {}
        self.errors = 0

    def reset(self, game_id: str) -> None:
        self.failed_games.pop(game_id, None)
        self.inner.reset(game_id)

    def forget(self, game_id: str) -> None:
        self.failed_games.pop(game_id, None)
        forget_game(self.inner, game_id)

    def failure(self, game_id: str) -> str | None:
        """Why the game's opponent gave up, None while it plays (read before `forget`)."""
        return self.failed_games.get(game_id)

    def close(self) -> None:
        self.inner.close()

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        live = [i for i, t in enumerate(turns) if t.game_id not in self.failed_games]
        answers = ["I cannot continue." for _ in turns]
        if not live:
            return answers
        last_error: BaseException | None = None
        for attempt in range(self.max_retries + 1):
            try:
                out = self.inner.act_batch([turns[i] for i in live])
                if len(out) != len(live):
                    raise RuntimeError(f"returned {len(out)} answers for {len(live)} turns")
                for i, answer in zip(live, out, strict=True):
                    answers[i] = answer
                return answers
            except Exception as exc:  # noqa: BLE001 - any backend failure is retried, then contained
                last_error = exc
                self.errors += 1
                logger.warning("opponent %s failed (attempt %d): %s", self.name, attempt + 1, exc)
                if attempt < self.max_retries and self.backoff_s:
                    time.sleep(self.backoff_s * (attempt + 1))
        # Isolate the culprit(s): one failing game must not take the rest of the batch with it.
        for i in live:
            try:
                (answers[i],) = self.inner.act_batch([turns[i]])
            except Exception as exc:  # noqa: BLE001
                self.errors += 1
                error = exc if len(live) > 1 else last_error
                self.failed_games[turns[i].game_id] = f"{type(error).__name__}: {error}"
        return answers


class PolicyPerRoute:
    """One opponent policy per route, built by `factory(route)` on first use."""

    def __init__(self, factory: Callable[[str], Policy]) -> None:
        self.factory = factory
        self.policies: dict[str, Policy] = {}

    def policy_for(self, route: str) -> Policy:
        if route not in self.policies:
            self.policies[route] = self.factory(route)
        return self.policies[route]

    def close(self) -> None:
        for policy in self.policies.values():
            policy.close()


Opponent = Policy | PolicyPerRoute


def opponent_for(opponent: Opponent, route: str) -> Policy:
    """The policy that plays a game of `route` for this opponent."""
    return opponent.policy_for(route) if isinstance(opponent, PolicyPerRoute) else opponent


def game_failure(policies: Iterable[Policy], game_id: str) -> str | None:
    """Why one of a game's opponents gave up on it (None if none did)."""
    for policy in policies:
        if isinstance(policy, ResilientPolicy) and policy.failure(game_id) is not None:
            return policy.failure(game_id)
    return None


def build_opponent(spec: str, *, seed: int, model_path: str) -> Policy:
    """A policy from an opponent spec (see `TrainConfig.opponents`).

    Opponent specs are policy specs (`tomgym.agents.specs`); the prefixes `decrypto:` (a Decrypto
    baseline) and `llm:` (an LLM) only say which kind is expected, and `frozen[,options]` is the
    base model being trained on the HF backend.
    """
    from tomgym.agents.policies import make_policy
    from tomgym.agents.specs import PolicySpec, SpecError, parse_spec

    prefix, _, rest = spec.partition(":")
    expected = {"decrypto": ("random", "embedding"), "llm": LLM_KINDS}.get(prefix)
    what = "Decrypto opponent" if prefix == "decrypto" else "opponent"
    try:
        parsed = parse_spec(rest if expected is not None else spec)
    except SpecError as exc:
        raise ConfigError(f"unknown {what} {spec!r}: {exc}") from None
    if expected is not None and parsed.kind not in expected:
        raise ConfigError(
            f"unknown {what} {spec!r}: {prefix}: expects a {' or '.join(expected)} spec"
        )
    if parsed.kind == "frozen":
        parsed = PolicySpec("hf", model_path, parsed.options)
    if parsed.kind == "human":
        raise ConfigError(f"opponent {spec!r}: a person cannot play during training")
    if parsed.is_llm:
        from tomgym.agents.llm import make_llm_policy

        # LLM opponents sample with their spec's own `seed=` option, not the run seed.
        return make_llm_policy(parsed)
    return make_policy(parsed, seed=seed)


def build_opponents(cfg: TrainConfig, model_path: str) -> dict[str, Opponent]:
    """Every opponent of a run, each behind a `ResilientPolicy` (per route when its spec has
    `{route}`)."""
    opponents: dict[str, Opponent] = {}
    for agent, spec in cfg.opponents.items():
        spec = str(spec)
        if "{route}" in spec:

            def factory(route: str, spec: str = spec) -> Policy:
                inner = build_opponent(
                    spec.format(route=route), seed=cfg.seed, model_path=model_path
                )
                return ResilientPolicy(inner, max_retries=cfg.opponent_retries)

            opponents[agent] = PolicyPerRoute(factory)
        else:
            inner = build_opponent(spec, seed=cfg.seed, model_path=model_path)
            opponents[agent] = ResilientPolicy(inner, max_retries=cfg.opponent_retries)
    return opponents
