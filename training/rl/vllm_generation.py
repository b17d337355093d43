"""The trainer's `GenerateFn` on a vLLM engine: colocated (`vllm.LLM`) or a `vllm serve` server.

Same contract as `generation.hf_generate_fn`: token ids in, sampled ids (through the first EOS)
and their log-probs out, one `Sampled` per context in order. A multi-turn rollout calls it once
per turn wave; partner turns are spliced by the caller with mask 0, exactly as on the
transformers path, so nothing downstream knows which engine sampled.

How each engine is driven:
- `ColocatedEngine` wraps the `vllm.LLM` that TRL builds in `vllm_mode="colocate"`: one
  `LLM.generate` call per wave with token-id prompts (`{"prompt_token_ids": ids}`) and one
  `SamplingParams` per request, each with its own seed, so the members of a GRPO group that
  share a first-turn context still sample independently and reproducibly.
- `ServerEngine` talks to `vllm serve` (OpenAI-compatible `/v1/completions` with token-id prompts,
  `return_token_ids`, `logprobs=0`), the server TRL 1.16 documents for `vllm_mode="server"`.
  The completions API takes one seed per request, so a wave sends one request per context
  (concurrently; the server batches them) rather than one request with a shared seed.
- Log-probs: TRL starts both engines with `logprobs_mode="processed_logprobs"` (the server must be
  started with `--logprobs-mode processed_logprobs`), i.e. `log_softmax(logits / temperature)`
  after top-p/top-k, the same distribution `hf_generate_fn` reports and the trainer re-scores;
  TRL's importance-sampling correction compares them with the training log-probs.

Weights: TRL pushes the policy's weights into the engine before it calls the rollout (once per
global step; LoRA adapters are merged for the push and unmerged after). `weights_current`, when
given, is asked before every wave and a False answer raises `StaleWeightsError`: a wave must
never sample from weights older than the policy being optimised.

Nothing here imports `vllm` or `trl` at module level: the engines are handed in by
`trl_adapter`, and the stand-in engines of the tests use the same call signatures.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from tomgym.envs.seeding import derive_seed
from tomgym.training.rl.generation import Sampled


class StaleWeightsError(RuntimeError):
    """A generation wave would have sampled from weights older than the policy's."""


class EngineError(RuntimeError):
    """The engine failed or answered something that is not a completion of the request."""


@dataclass(frozen=True)
class Request:
    """One context to continue: its token ids, the token budget and the request's own seed."""

    prompt_ids: list[int]
    max_new_tokens: int
    seed: int


@dataclass(frozen=True)
class SamplingSettings:
    """The sampling distribution every request of a run uses (the trainer's config values)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop_token_ids: tuple[int, ...] = ()


class Engine(Protocol):
    """What `vllm_generate_fn` needs from an engine: one call continues a whole wave."""

    def complete(
        self, requests: Sequence[Request], sampling: SamplingSettings
    ) -> list[Sampled]: ...


class ColocatedEngine:
    """A `vllm.LLM` in this process (TRL's colocate mode); `sampling_params_cls` is vLLM's."""

    def __init__(self, llm: Any, sampling_params_cls: Any | None = None) -> None:
        if sampling_params_cls is None:
            from vllm import SamplingParams

            sampling_params_cls = SamplingParams
        self.llm = llm
        self.sampling_params_cls = sampling_params_cls

    def complete(self, requests: Sequence[Request], sampling: SamplingSettings) -> list[Sampled]:
        params = [
            self.sampling_params_cls(
                n=1,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k,
                max_tokens=r.max_new_tokens,
                logprobs=0,
                seed=r.seed,
                stop_token_ids=list(sampling.stop_token_ids),
            )
            for r in requests
        ]
        prompts = [{"prompt_token_ids": list(r.prompt_ids)} for r in requests]
        outputs = self.llm.generate(prompts, sampling_params=params, use_tqdm=False)
        if len(outputs) != len(requests):
            raise EngineError(f"vLLM returned {len(outputs)} outputs for {len(requests)} prompts")
        return [_sampled_from_output(out) for out in outputs]


def _sampled_from_output(request_output: Any) -> Sampled:
    """`Sampled` from a vLLM `RequestOutput` with `logprobs=0` (the sampled token's entry)."""
    completion = request_output.outputs[0]
    ids = list(completion.token_ids)
    if completion.logprobs is None or len(completion.logprobs) != len(ids):
        raise EngineError("vLLM returned no per-token log-probs (was logprobs=0 passed?)")
    logprobs = [
        float(step[token].logprob) for step, token in zip(completion.logprobs, ids, strict=True)
    ]
    return Sampled(ids=ids, logprobs=logprobs)


class ServerEngine:
    """A `vllm serve` server's `/v1/completions`, one request per context, sent concurrently."""

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        timeout_s: float = 600.0,
        max_workers: int = 64,
        post: Callable[[str, dict], dict] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/v1/completions"
        self._model = model
        self.timeout_s = timeout_s
        self.max_workers = max_workers
        self._post = post or self._http_post

    @property
    def model(self) -> str:
        """The served model's name (asked once from `/v1/models` when not given)."""
        if self._model is None:
            answer = self._send(urllib.request.Request(self.base_url + "/v1/models"))
            try:
                self._model = str(answer["data"][0]["id"])
            except (KeyError, IndexError, TypeError) as exc:
                raise EngineError(f"vLLM server {self.base_url} lists no model ({exc})") from None
        return self._model

    def _http_post(self, url: str, payload: dict) -> dict:
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        return self._send(urllib.request.Request(url, data=body, headers=headers))

    def _send(self, request: urllib.request.Request) -> dict:
        url = request.full_url
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise EngineError(f"vLLM server {url} answered HTTP {exc.code}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise EngineError(f"vLLM server {url} unreachable: {exc}") from None

    def _one(self, request: Request, sampling: SamplingSettings) -> Sampled:
        payload = {
            "model": self.model,
            "prompt": [list(request.prompt_ids)],
            "n": 1,
            "max_tokens": request.max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k if sampling.top_k > 0 else -1,
            "seed": request.seed,
            "logprobs": 0,
            "stop_token_ids": list(sampling.stop_token_ids),
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
        }
        answer = self._post(self.url, payload)
        try:
            choice = answer["choices"][0]
            ids = [int(t) for t in choice["token_ids"]]
            logprobs = [float(x) for x in choice["logprobs"]["token_logprobs"]]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise EngineError(f"vLLM server answer lacks token ids or log-probs ({exc})") from None
        if len(logprobs) != len(ids):
            raise EngineError(f"vLLM server gave {len(logprobs)} log-probs for {len(ids)} tokens")
        return Sampled(ids=ids, logprobs=logprobs)

    def complete(self, requests: Sequence[Request], sampling: SamplingSettings) -> list[Sampled]:
        if not requests:
            return []
        _ = self.model  # resolve the served name once, before the worker threads need it
        workers = max(1, min(self.max_workers, len(requests)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda r: self._one(r, sampling), requests))


class VLLMGenerateFn:
    """A `GenerateFn` over a vLLM `Engine`: one engine call per wave, per-request seeds.

    Request `j` of the `w`-th wave gets seed `derive_seed(seed, w, j) % 2**63` (vLLM seeds are
    signed 64-bit), so a rerun with the same `seed` samples the same tokens. Completions are
    cut after the first EOS (`finish_reason="eos"`), as on the transformers path; with
    `repetition_guard` a completion is cut where the transformers engine would have stopped it
    (the first prefix ending in `agents.llm.kv_cache.repeating_tail`, `"repetition"`); a
    completion that hits the token cap is `"length"`. The engine keeps its own prefix cache (TRL resets it
    with every weight push), so `invalidate` and `forget` have nothing to drop here and
    `accepts_keys` is False.
    """

    accepts_keys = False

    def __init__(
        self,
        engine: Engine,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        eos_token_ids: Sequence[int] = (),
        seed: int = 0,
        weights_current: Callable[[], bool] | None = None,
        repetition_guard: bool = False,
    ) -> None:
        self.engine = engine
        self.repetition_guard = bool(repetition_guard)
        self.sampling = SamplingSettings(temperature, top_p, top_k, tuple(eos_token_ids))
        self.eos = frozenset(eos_token_ids)
        self.seed = seed
        self.weights_current = weights_current
        self.waves = 0
        self.requests = 0

    def __call__(self, contexts: Sequence[Sequence[int]], max_new_tokens: int) -> list[Sampled]:
        if self.weights_current is not None and not self.weights_current():
            raise StaleWeightsError(
                "the vLLM engine holds older weights than the policy; TRL syncs them before the "
                "rollout of each step, so this wave would train on off-policy samples"
            )
        wave = self.waves
        self.waves += 1
        requests = [
            Request(list(ctx), int(max_new_tokens), derive_seed(self.seed, wave, j) % 2**63)
            for j, ctx in enumerate(contexts)
        ]
        self.requests += len(requests)
        results = self.engine.complete(requests, self.sampling) if requests else []
        if len(results) != len(requests):
            raise EngineError(f"engine returned {len(results)} completions for {len(requests)}")
        return [_cut_at_eos(r, self.eos, self.repetition_guard) for r in results]

    def forget(self, game_id: str) -> int:
        return 0

    def invalidate(self) -> None:
        """Nothing to drop: TRL resets the engine's prefix cache when it pushes new weights."""

    def cache_stats(self) -> dict[str, int]:
        return {"prefill_tokens": 0, "reused_tokens": 0, "peak_cached_tokens": 0}


vllm_generate_fn = VLLMGenerateFn
"""The factory name callers use (the counterpart of `generation.hf_generate_fn`)."""


def _cut_at_eos(sampled: Sampled, eos: frozenset[int], repetition_guard: bool = False) -> Sampled:
    looping: Callable[[Sequence[int]], bool] = lambda _ids: False  # noqa: E731
    if repetition_guard:
        from tomgym.agents.llm.kv_cache import repeating_tail as looping
    for j, token in enumerate(sampled.ids):
        if token in eos:
            return Sampled(sampled.ids[: j + 1], sampled.logprobs[: j + 1], "eos")
        if looping(sampled.ids[: j + 1]):
            return Sampled(sampled.ids[: j + 1], sampled.logprobs[: j + 1], "repetition")
    return Sampled(sampled.ids, sampled.logprobs, "length")
