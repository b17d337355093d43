"""The one generation function the trainer uses: token ids in, sampled ids and log-probs out.

`GenerateFn(contexts, max_new_tokens) -> [Sampled]` is how the trained policy samples (the
trainer builds it from the model TRL hands the rollout, `hf_generate_fn` over a transformers
model); `ScoreFn` re-scores a finished sequence for the token/log-prob debug check. Nothing here
imports `trl`; `torch` is imported inside the functions that need it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Sampled:
    """One sampled continuation: ids (through the first EOS if any) and their log-probs."""

    ids: list[int]
    logprobs: list[float]


GenerateFn = Callable[[Sequence[Sequence[int]], int], list[Sampled]]
"""`generate(contexts, max_new_tokens)` -> one `Sampled` per context (same order)."""

ScoreFn = Callable[[Sequence[int], Sequence[int]], list[float]]
"""`score(prompt_ids, completion_ids)` -> log-prob of every completion token under the model."""


def hf_generate_fn(
    model: Any,
    tokenizer: Any,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    eos_token_ids: Sequence[int] | None = None,
) -> GenerateFn:
    """A `GenerateFn` over a transformers model (left-padded batch, one `generate` call).

    Log-probs are those of the distribution the tokens were drawn from when `top_p == 1` and
    `top_k == 0`: `log_softmax(logits / temperature)` (greedy: temperature 1), which is what the
    GRPO trainer re-scores.
    """
    import torch

    pad_id = (
        tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    )
    eos_ids = list(eos_token_ids or [tokenizer.eos_token_id])

    def generate(contexts: Sequence[Sequence[int]], max_new_tokens: int) -> list[Sampled]:
        device = next(model.parameters()).device
        width = max(len(c) for c in contexts)
        input_ids = torch.full((len(contexts), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, ctx in enumerate(contexts):
            input_ids[row, width - len(ctx) :] = torch.tensor(list(ctx), dtype=torch.long)
            attention[row, width - len(ctx) :] = 1
        sample = temperature > 0
        kwargs: dict[str, Any] = {
            "do_sample": sample,
            "max_new_tokens": int(max_new_tokens),
            "pad_token_id": pad_id,
            "eos_token_id": eos_ids,
            "output_logits": True,
            "return_dict_in_generate": True,
        }
        if sample:
            kwargs.update(temperature=temperature, top_p=top_p, top_k=top_k)
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        with torch.no_grad():
            out = model.generate(
                input_ids=input_ids.to(device), attention_mask=attention.to(device), **kwargs
            )
        new = out.sequences[:, width:].cpu()
        logits = torch.stack(out.logits, dim=1).float().cpu()  # (B, T, V)
        scale = temperature if sample else 1.0
        logps = torch.log_softmax(logits / scale, dim=-1)
        chosen = logps.gather(-1, new.unsqueeze(-1)).squeeze(-1)
        results: list[Sampled] = []
        for row in range(len(contexts)):
            ids = new[row].tolist()
            end = len(ids)
            for j, tok in enumerate(ids):
                if tok in eos_ids:
                    end = j + 1
                    break
            results.append(Sampled(ids=ids[:end], logprobs=chosen[row, :end].tolist()))
        return results

    return generate


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
