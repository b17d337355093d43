"""The one generation function the trainer uses: token ids in, sampled ids and log-probs out.

`GenerateFn(contexts, max_new_tokens) -> [Sampled]` is how the trained policy samples. On the
transformers path it is an `HFGenerateFn` (`hf_generate_fn`) over the model TRL hands the rollout,
driving the same engine as the `hf:` policy backend (`agents.llm.kv_cache.CachedGenerator`), so
play, evaluation and training sample one way:

- Conversation keys: an `HFGenerateFn` declares `accepts_keys = True` and takes
  `keys=[...]` (the trained policy passes each context's game id); with a `KVCacheStore` each
  game's KV cache is kept between its turns, so a turn prefills only its new tokens. Greedy
  answers and log-probs are the same with and without the store (fp32, tested). The caches are
  valid only for the weights that computed them: the trainer calls `invalidate()` when a rollout
  ends, before the step's optimisation, and `forget(game_id)` drops one finished game.
- `stop_at_answer`: a row stops once its decoded text holds a whole protocol answer
  (`agents.llm.stopping.answer_stop`); it comes back without EOS, `finish_reason="answer"`.
- `repetition_guard`: a row stops once its ids end in a runaway loop
  (`agents.llm.kv_cache.repeating_tail`); it comes back without EOS,
  `finish_reason="repetition"`, and the trained policy treats it as a capped turn.
- `constrain_format`, `constrain_beliefs`, `constrain_replies`, `constrain_branches`,
  `constrain_story`, `constrain_plan`, `constrain_asked`: the generate function declares
  them, and the trained policy passes each context's TOM-SB role and names per level as
  `answer_options=` (None for other games): the answer stays inside its protocol template, or
  only its belief values inside the universe's names, and/or the names written in the reply
  are spelled exactly, and/or on the branch the defender's stated belief allows, and/or on the
  one path its first decoy opens, and/or the plan names a value of each level the belief
  leaves unknown, and/or the reply answers the level the attacker asks for
  (`agents.llm.constraints`).
- Log-probs are those of the distribution the tokens were drawn from when `top_p == 1` and
  `top_k == 0`: `log_softmax(logits / temperature)` (greedy: temperature 1), which is what the
  GRPO trainer re-scores.
- A context that would outgrow the model's context window raises
  `agents.llm.kv_cache.ContextWindowExceeded` before anything is generated.

`ScoreFn` re-scores a finished sequence for the token/log-prob debug check. Nothing here imports
`trl`; `torch` and the engine are imported inside the functions that need them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tomgym.agents.llm.constraints import AnswerOptions
    from tomgym.agents.llm.kv_cache import KVCacheStore


@dataclass(frozen=True)
class Sampled:
    """One sampled continuation: ids (through the first EOS if any) and their log-probs.

    `finish_reason`: `"eos"` (the ids end with it), `"answer"` (stopped at the close of a
    protocol answer, no EOS), `"repetition"` (stopped in a runaway loop, no EOS) or `"length"`
    (the token cap). `forced` marks the ids a decoding constraint left no choice about (empty:
    none); the trained policy gives them mask 0.
    """

    ids: list[int]
    logprobs: list[float]
    finish_reason: str = "length"
    forced: list[bool] = field(default_factory=list)  # per id: a constraint allowed nothing else


GenerateFn = Callable[[Sequence[Sequence[int]], int], list[Sampled]]
"""`generate(contexts, max_new_tokens)` -> one `Sampled` per context (same order). A callable
with `accepts_keys = True` also takes `keys=` (one conversation key per context)."""

ScoreFn = Callable[[Sequence[int], Sequence[int]], list[float]]
"""`score(prompt_ids, completion_ids)` -> log-prob of every completion token under the model."""


class HFGenerateFn:
    """A `GenerateFn` over a transformers model (see the module doc for the contract)."""

    accepts_keys = True

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        temperature: float,
        top_p: float = 1.0,
        top_k: int = 0,
        eos_token_ids: Sequence[int] | None = None,
        store: KVCacheStore | None = None,
        stop_at_answer: bool = False,
        repetition_guard: bool = False,
        constrain_format: bool = False,
        constrain_beliefs: bool = False,
        constrain_replies: bool = False,
        constrain_branches: bool = False,
        constrain_story: bool = False,
        constrain_plan: bool = False,
        constrain_asked: bool = False,
        packed_linear: bool = True,
    ) -> None:
        from tomgym.agents.llm.kv_cache import CachedGenerator
        from tomgym.agents.llm.stopping import answer_stop

        pad_id = tokenizer.pad_token_id
        if pad_id is None:
            pad_id = tokenizer.eos_token_id
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.top_k = int(top_k)
        self.stop_when = answer_stop(tokenizer) if stop_at_answer else None
        self.repetition_guard = bool(repetition_guard)
        self.constrain_format = bool(constrain_format)
        self.constrain_beliefs = bool(constrain_beliefs)
        self.constrain_replies = bool(constrain_replies)
        self.constrain_branches = bool(constrain_branches)
        self.constrain_story = bool(constrain_story)
        self.constrain_plan = bool(constrain_plan)
        self.constrain_asked = bool(constrain_asked)
        self.tokenizer = tokenizer
        self.engine = CachedGenerator(
            model,
            eos_token_ids=list(eos_token_ids or [tokenizer.eos_token_id]),
            pad_token_id=int(pad_id),
            context_window=getattr(model.config, "max_position_embeddings", None),
            store=store,
            packed_linear=packed_linear,
        )

    def __call__(
        self,
        contexts: Sequence[Sequence[int]],
        max_new_tokens: int,
        keys: Sequence[Hashable | None] | None = None,
        answer_options: Sequence[AnswerOptions | None] | None = None,
    ) -> list[Sampled]:
        from tomgym.agents.llm.constraints import generator_rules

        constraints = generator_rules(self, answer_options)
        completions = self.engine.generate(
            contexts,
            keys,
            max_new_tokens=int(max_new_tokens),
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            logprob_temperature=self.temperature if self.temperature > 0 else 1.0,
            stop_when=self.stop_when,
            repetition_guard=self.repetition_guard,
            constraints=constraints,
        )
        return [
            Sampled(list(c.ids), list(c.logprobs), c.finish_reason, list(c.forced))
            for c in completions
        ]

    def forget(self, game_id: str) -> int:
        """Drop the cached conversations of one game (keys `game_id` or `(game_id, ...)`)."""
        return self.engine.forget(
            lambda key: key == game_id or (isinstance(key, tuple) and key[:1] == (game_id,))
        )

    def invalidate(self) -> None:
        """Drop every cached conversation: the weights are about to change (or did)."""
        self.engine.invalidate()

    def cache_stats(self) -> dict[str, float]:
        return self.engine.stats.as_dict()


hf_generate_fn = HFGenerateFn
"""The factory name callers use (the counterpart of `vllm_generation.vllm_generate_fn`)."""


def hf_score_fn(model: Any, *, temperature: float = 1.0) -> ScoreFn:
    """Re-score a sequence: log-prob of every completion token (same scaling as the trainer)."""
    import torch

    def score(prompt_ids: Sequence[int], completion_ids: Sequence[int]) -> list[float]:
        device = next(model.parameters()).device
        ids = torch.tensor([list(prompt_ids) + list(completion_ids)], device=device)
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
        logps = torch.log_softmax(logits / (temperature or 1.0), dim=-1)
        target = torch.tensor(list(completion_ids), device=device)
        return logps.gather(-1, target.unsqueeze(-1)).squeeze(-1).cpu().tolist()

    return score
