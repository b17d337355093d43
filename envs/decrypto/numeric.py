"""Decrypto with numeric observations for the guessers (`tomgym/decrypto-numeric-v0`).

# Description
The same game, turn order, endings and rewards as `envs.decrypto.env` (read its docstring), with
an observation and action mode that a standard MARL library (RLlib, Tianshou, CleanRL-style PPO)
can learn from without reading text: `observation_mode="numeric"`. Only the decoder and the
interceptor change; the encoder keeps the text interface.

# Action Space
- `decoder_0`, `interceptor_0`: `Discrete(24)`, an index into `envs.decrypto.game.ALL_CODES`
  (`action_mode="structured"` of the text env, which this mode implies). Text answers
  (`ANSWER: {"guess": "3-1-4"}`) are still accepted, so scripted text policies can play these
  roles through `text_observation(agent)`.
- `encoder_0`: text (`FreeText`), exactly as in the text env.

# Observation Space
- `decoder_0`, `interceptor_0`: `Dict` with
  - `features`: `Box(float32, (105,))`, the feature vector of `envs.decrypto.features` (layout
    version `decrypto-numeric-1`; `FEATURE_NAMES[i]` names index i): hint-keyword cosines
    (decoder only), hint vs public hint-history cosines, per-code scores of both matrices, codes
    already played, round and token counts, and whether this agent must guess now (`asked`);
  - `action_mask`: `Box(int8, (24,))`, 1 for codes not yet played (a played code never recurs,
    so guessing it cannot score; every index stays a legal action).
  Cosines come from GloVe 6B 50d (`pip install "tomgym[embeddings]"`; building the env without
  it raises `EmbeddingsUnavailableError`). The `Dict` (not a bare `Box`) keeps PettingZoo's
  `api_test` able to compare these observations with the encoder's text `Dict`.
- `encoder_0`: the text env's `Dict` observation.
`text_observation(agent)` returns any agent's full text observation (for scripted teammates).

# Rewards, Episode End, reset options
As in the text env: +1/-1 at the end, no truncation, the same reset options and seeding (the same
seed gives the same keywords and codes in both modes). `infos[agent]["observation_version"]`
is `decrypto-numeric-1`.

# Arguments
`numeric_raw_env(render_mode=None, observation_mode="numeric", vectors=None, **config)` and
`numeric_parallel_env(...)`, where `config` is the text env's (`max_rounds`, `max_retries`,
`prompt_variant`, `play_on`, `tom` without "false_belief", `strict_guesses`, `keyword_list`;
`action_mode` may only be "structured"), and `vectors` an optional `envs.word_vectors.WordVectors`
(default: GloVe, loaded once per process). `observation_mode="text"` gives the plain
structured-action text env (so one factory serves both modes in parametrised code).

# Version History
* v0: initial release (features `decrypto-numeric-1`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from tomgym.envs.decrypto.env import DecryptoCore, parallel_env, raw_env
from tomgym.envs.decrypto.features import (
    FEATURES_VERSION,
    decrypto_features,
    feature_bounds,
)
from tomgym.envs.decrypto.game import ALL_CODES, RoundResult
from tomgym.envs.word_vectors import WordVectors, load_word_vectors

NUMERIC_ENV_ID = "tomgym/decrypto-numeric-v0"
NUMERIC_AGENTS = ("decoder_0", "interceptor_0")
OBSERVATION_MODES = ("numeric", "text")


def unplayed_codes(history: list[RoundResult]) -> np.ndarray:
    """(24,) int8 mask: 1 for each code of `ALL_CODES` not played in an earlier round.

    Codes never repeat within a game, so a played code can never be right; every code stays a
    legal action (the mask is advice, as PettingZoo classic envs' masks are for their agents).
    """
    mask = np.ones(len(ALL_CODES), dtype=np.int8)
    for result in history:
        mask[ALL_CODES.index(tuple(result.code))] = 0
    return mask


class NumericObservations(DecryptoCore):
    """Mixin over `DecryptoCore`: numeric observations for the guessers (see module doc)."""

    def _configure(
        self,
        render_mode: str | None = None,
        observation_mode: str = "numeric",
        vectors: WordVectors | None = None,
        **config: Any,
    ) -> None:
        if observation_mode not in OBSERVATION_MODES:
            raise ValueError(
                f"observation_mode must be one of {OBSERVATION_MODES}, got {observation_mode!r}"
            )
        action_mode = config.setdefault("action_mode", "structured")
        if action_mode != "structured":
            raise ValueError(
                f"the numeric Decrypto env needs action_mode='structured', got {action_mode!r}"
            )
        super()._configure(render_mode, **config)
        self.observation_mode = observation_mode
        self.config["observation_mode"] = observation_mode
        # Custom vectors are kept; GloVe is fetched from the process-wide cache on use, so
        # pickling an env never copies the 80 MB matrix. Loading here fails early and clearly.
        self._custom_vectors = vectors
        if observation_mode == "numeric":
            self._vectors()
            low, high = feature_bounds(self._max_round_space)
            numeric = spaces.Dict(
                {
                    "features": spaces.Box(low=low.copy(), high=high.copy(), dtype=np.float32),
                    "action_mask": spaces.Box(0, 1, shape=(len(ALL_CODES),), dtype=np.int8),
                }
            )
            for agent in NUMERIC_AGENTS:
                self.observation_spaces[agent] = numeric

    def _vectors(self) -> WordVectors:
        return self._custom_vectors if self._custom_vectors is not None else load_word_vectors()

    def text_observation(self, agent: str) -> dict[str, Any]:
        """The text env's full observation of `agent` (for text/scripted policies)."""
        return DecryptoCore._observation(self, agent)

    def numeric_observation(self, agent: str) -> dict[str, np.ndarray]:
        """`{"features", "action_mask"}` of a guesser (`decoder_0` or `interceptor_0`)."""
        if agent not in NUMERIC_AGENTS:
            raise ValueError(f"numeric observations exist for {NUMERIC_AGENTS}, not {agent!r}")
        match = self.match
        assert match is not None, "call reset() first"
        game = match.game
        request = match.request_for(agent)
        features = decrypto_features(
            hints=game.hints,
            keywords=game.keywords if agent == "decoder_0" else None,
            past_codes=[r.code for r in game.history],
            past_hints=[r.hints for r in game.history],
            round_number=game.round,
            max_rounds=game.max_rounds,
            miscommunications=game.miscommunications,
            interceptions=game.interceptions,
            asked=request is not None and request.kind == "guess",
            vectors=self._vectors(),
        )
        return {"features": features, "action_mask": unplayed_codes(game.history)}

    def _observation(self, agent: str) -> Any:
        if self.observation_mode == "numeric" and agent in NUMERIC_AGENTS:
            return self.numeric_observation(agent)
        return self.text_observation(agent)

    def _step_info(self, agent: str) -> dict[str, Any]:
        info = super()._step_info(agent)
        info["observation_version"] = (
            FEATURES_VERSION if self.observation_mode == "numeric" else "text"
        )
        return info


class numeric_raw_env(NumericObservations, raw_env):  # noqa: N801 - PettingZoo naming
    """Decrypto AEC env with numeric guesser observations; see the module docstring."""

    metadata = {**raw_env.metadata, "name": "decrypto_numeric_v0"}


class numeric_parallel_env(NumericObservations, parallel_env):  # noqa: N801 - PettingZoo naming
    """Decrypto Parallel env (one step per phase) with numeric guesser observations."""

    metadata = {**parallel_env.metadata, "name": "decrypto_numeric_v0"}


def numeric_env(render_mode: str | None = None, **config: Any) -> Any:
    """The numeric AEC env with PettingZoo's order-enforcing wrapper (as `decrypto_v0.env`)."""
    from pettingzoo.utils import wrappers

    return wrappers.OrderEnforcingWrapper(numeric_raw_env(render_mode=render_mode, **config))
