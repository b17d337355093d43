"""`LLMPolicy`: a conversational language-model player over any backend.

Contract (agents.base.Policy):
- One conversation per (game_id, agent): `[system, user(message 1), assistant(answer 1),
  user(message 2), ...]`. The system text is the observation's `system` field (or
  `system_override`); each user turn is the observation's `message` (only what is new since this
  agent's last answer). A re-ask (`retry > 0`) is just the next user turn: its message carries the
  parse error, and it follows the bad answer, so the model sees its own mistake.
- Side questions (`turn.side_question` or `observation["side_question"] == 1`) are answered from
  the current conversation plus the question, and never kept: once the next regular turn of that
  agent arrives, the question, its re-asks and answers are forgotten.
- Observations without a `message` field are answered statelessly from `prompt`.
- `act_batch(turns)` renders every turn's chat and makes ONE backend call per distinct sampling
  setting: regular turns sample at `temperature`, side questions at `side_question_temperature`,
  so a batch costs at most two calls. Conversations are only updated once the backend answered,
  so a failing backend (BackendError) leaves every conversation as it was.
- Context bound: when a chat plus `max_new_tokens` would exceed the backend's `context_window`,
  the oldest exchanges are dropped (from the stored conversation too). The system message, the
  first exchange (it holds the rules) and the pending message are kept as long as possible; the
  first exchange goes last. Drops are counted in `stats["context_trims"]`.
- Sampling is reproducible: every backend call gets a seed derived from `seed` and a per-policy
  call counter.
- Answer constraints: a backend with `constrain_format`, `constrain_beliefs`,
  `constrain_replies`, `constrain_branches`, `constrain_story`, `constrain_plan` or
  `constrain_asked` on (HF, `constrain_format=true`, ...) gets each turn's TOM-SB role and
  names per level (`agents.llm.constraints.answer_options`; None for other games) as
  `answer_options=`, and keeps the answer inside its protocol template, its belief values
  inside the names, the names its reply writes spelled exactly, or a defender's reply off the
  names its stated belief rules out, or on the one path its first decoy opens, or a
  defender's plan naming a value of each level its belief leaves unknown, or its reply
  answering the level the attacker asks for.
- KV-cache reuse: a backend with `accepts_conversation_keys` (the HF backend, `kv_cache=true` by
  default) gets `keys=[(game_id, agent), ...]` (None for stateless turns), so each turn prefills
  only its new tokens; `reset(game_id)` drops that game's cached conversations.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tomgym.agents.base import Turn
from tomgym.agents.llm.backends import Backend, Chat, Message
from tomgym.agents.llm.constraints import answer_options, constrains_answers
from tomgym.agents.specs import (
    POLICY_OPTION_TYPES,
    PolicySpec,
    SpecError,
    convert_option,
    option_types,
    parse_spec,
)

logger = logging.getLogger(__name__)

# Per-message overhead of chat templates (role markers, separators) in tokens, generously.
_TEMPLATE_OVERHEAD_TOKENS = 16


def _retry(turn: Turn) -> int:
    return int(turn.observation.get("retry", 0) or 0)


@dataclass
class _Pending:
    """A rendered turn waiting for its answer, and what to store once it arrives."""

    turn: Turn
    key: tuple[str, str]
    chat: Chat
    side: bool
    stateless: bool


class LLMPolicy:
    """A policy that keeps a chat per (game, agent) and answers with an LLM backend."""

    def __init__(
        self,
        backend: Backend,
        *,
        name: str,
        temperature: float = 0.6,
        top_p: float = 1.0,
        max_new_tokens: int = 256,
        seed: int = 0,
        side_question_temperature: float = 0.0,
        system_override: str | None = None,
    ) -> None:
        if temperature < 0 or side_question_temperature < 0:
            raise ValueError("temperatures must be >= 0")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.backend = backend
        self.name = name
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.max_new_tokens = int(max_new_tokens)
        self.seed = int(seed)
        self.side_question_temperature = float(side_question_temperature)
        self.system_override = system_override
        self._conversations: dict[tuple[str, str], list[Message]] = {}
        self._side_threads: dict[tuple[str, str], list[Message]] = {}
        self._calls = 0
        self.stats: dict[str, int] = {
            "turns": 0,
            "side_questions": 0,
            "backend_calls": 0,
            "context_trims": 0,
        }

    # -- Policy protocol -----------------------------------------------------------------------

    def reset(self, game_id: str) -> None:
        self.forget(game_id)

    def forget(self, game_id: str) -> None:
        """Drop the conversations (and side threads) of every agent of `game_id`."""
        for store in (self._conversations, self._side_threads):
            for key in [k for k in store if k[0] == game_id]:
                del store[key]

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        pending = [self._prepare(turn) for turn in turns]
        seen: set[tuple[str, str]] = set()
        for p in pending:
            if not p.stateless and p.key in seen:
                raise ValueError(f"two turns for game {p.key[0]!r} agent {p.key[1]!r} in one batch")
            seen.add(p.key)
        answers: list[str | None] = [None] * len(pending)
        groups = (
            ([i for i, p in enumerate(pending) if not p.side], self.temperature),
            ([i for i, p in enumerate(pending) if p.side], self.side_question_temperature),
        )
        for indices, temperature in groups:
            if not indices:
                continue
            cache_keys: dict[str, Any] = {}
            if getattr(self.backend, "accepts_conversation_keys", False):
                cache_keys["keys"] = [
                    None if pending[i].stateless else pending[i].key for i in indices
                ]
            if constrains_answers(self.backend):
                cache_keys["answer_options"] = [
                    answer_options(pending[i].turn.observation) for i in indices
                ]
            texts = self.backend.generate(
                [pending[i].chat for i in indices],
                temperature=temperature,
                top_p=self.top_p,
                max_new_tokens=self.max_new_tokens,
                seed=self._next_seed(),
                **cache_keys,
            )
            if len(texts) != len(indices):
                raise RuntimeError(
                    f"backend {self.backend.kind} returned {len(texts)} answers for {len(indices)}"
                )
            self.stats["backend_calls"] += 1
            for i, text in zip(indices, texts, strict=True):
                answers[i] = text
        # Commit only after every call succeeded, so a failure leaves no half-updated history.
        result: list[str] = []
        for p, answer in zip(pending, answers, strict=True):
            assert answer is not None
            self._commit(p, answer)
            result.append(answer)
        return result

    def close(self) -> None:
        self.backend.close()

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"name": self.name}
        info.update(self.backend.describe())
        info["sampling"] = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_new_tokens": self.max_new_tokens,
            "seed": self.seed,
            "side_question_temperature": self.side_question_temperature,
        }
        if self.system_override is not None:
            info["system_override"] = self.system_override
        return info

    # -- inspection ----------------------------------------------------------------------------

    def conversation(self, game_id: str, agent: str) -> list[Message]:
        """A copy of the kept conversation of `agent` in `game_id` (empty if none)."""
        return [dict(m) for m in self._conversations.get((game_id, agent), [])]

    # -- internals -----------------------------------------------------------------------------

    def _next_seed(self) -> int:
        self._calls += 1
        digest = hashlib.blake2b(f"{self.seed}:{self._calls}".encode(), digest_size=4).digest()
        return int.from_bytes(digest, "big") & 0x7FFFFFFF

    def _system_message(self, observation: Mapping[str, Any]) -> list[Message]:
        system = self.system_override
        if system is None:
            system = str(observation.get("system", "") or "")
        return [{"role": "system", "content": system}] if system else []

    def _prepare(self, turn: Turn) -> _Pending:
        obs = turn.observation
        key = (turn.game_id, turn.agent)
        side = turn.is_side_question
        if "message" not in obs:
            chat = [*self._system_message(obs), {"role": "user", "content": turn.prompt}]
            return _Pending(turn, key, self._fit(chat, pinned=len(chat)), side, stateless=True)
        message: Message = {"role": "user", "content": str(obs["message"])}
        conversation = self._conversations.get(key)
        if conversation is None:
            conversation = self._system_message(obs)
        if side:
            thread = self._side_threads.get(key) if _retry(turn) > 0 else None
            chat = [*conversation, *(thread or []), message]
            # The side thread is never trimmed: trimming applies to the kept conversation.
            fitted = self._fit(chat, pinned=len(chat) - len(conversation))
        else:
            fitted = self._fit([*conversation, message], pinned=1)
        return _Pending(turn, key, fitted, side, stateless=False)

    def _commit(self, p: _Pending, answer: str) -> None:
        self.stats["turns"] += 1
        if p.stateless:
            return
        reply: Message = {"role": "assistant", "content": answer}
        if p.side:
            self.stats["side_questions"] += 1
            thread = self._side_threads.get(p.key) if _retry(p.turn) > 0 else None
            self._side_threads[p.key] = [*(thread or []), p.chat[-1], reply]
            return
        self._side_threads.pop(p.key, None)
        self._conversations[p.key] = [*p.chat, reply]

    def _fit(self, chat: Chat, *, pinned: int) -> Chat:
        """Drop the oldest exchanges until `chat` fits the context window.

        `pinned` trailing messages (the pending question and any side thread) are never dropped.
        """
        window = self.backend.context_window
        if window is None:
            return chat
        budget = window - self.max_new_tokens
        # Cheap bound first: a token covers at least one byte for the tokenizers we use.
        upper = sum(len(m["content"].encode()) + _TEMPLATE_OVERHEAD_TOKENS for m in chat)
        if upper <= budget or self.backend.count_tokens(chat) <= budget:
            return chat
        head = [m for m in chat[: len(chat) - pinned] if m["role"] == "system"][:1]
        body = chat[len(head) : len(chat) - pinned]
        tail = chat[len(chat) - pinned :]
        exchanges = _split_exchanges(body)
        # Drop order: second-oldest onwards first (the first exchange holds the rules), then it.
        order = list(range(1, len(exchanges))) + ([0] if exchanges else [])
        dropped: set[int] = set()
        candidate = chat
        for index in order:
            dropped.add(index)
            kept = [m for i, ex in enumerate(exchanges) if i not in dropped for m in ex]
            candidate = [*head, *kept, *tail]
            if self.backend.count_tokens(candidate) <= budget:
                break
        else:
            logger.warning(
                "policy %s: prompt exceeds the %d-token context window even with history dropped",
                self.name,
                window,
            )
        self.stats["context_trims"] += len(dropped)
        return candidate


def _split_exchanges(body: Sequence[Message]) -> list[list[Message]]:
    """Group messages into exchanges, each starting at a user message that follows a reply."""
    exchanges: list[list[Message]] = []
    for message in body:
        starts_new = message["role"] == "user" and (
            not exchanges or exchanges[-1][-1]["role"] != "user"
        )
        if starts_new or not exchanges:
            exchanges.append([message])
        else:
            exchanges[-1].append(message)
    return exchanges


# -- spec strings (grammar: tomgym.agents.specs) ----------------------------------------------


def _default_name(kind: str, model: str, adapter: str | None) -> str:
    if model == "default":
        base = "smollm2-135m-instruct"
    else:
        base = Path(model.rstrip("/")).name if kind != "openai" else model
        base = f"{kind}:{base}"
    return f"{base}+{Path(str(adapter).rstrip('/')).name}" if adapter else base


def make_llm_policy(spec: str | PolicySpec, **overrides: Any) -> LLMPolicy:
    """Build an `LLMPolicy` from an LLM spec (`tomgym.agents.specs`); keyword `overrides` win
    over spec options.

    Specs: `default` (bundled SmolLM2-135M-Instruct on transformers), `hf:<model id or path>`,
    `vllm:<model>`, `openai:<model>`, each optionally followed by `,key=value` options: policy
    keys (`specs.POLICY_OPTION_TYPES`: name, temperature, top_p, max_new_tokens, seed,
    side_question_temperature, system_override) and the backend's keys
    (`specs.BACKEND_OPTION_TYPES`; hf: kv_cache and stop_at_answer default to true).
    """
    parsed = parse_spec(spec)
    if not parsed.is_llm:
        raise SpecError(
            f"not an LLM spec: {parsed.to_string()!r}; expected default, hf:<model>, "
            "vllm:<model> or openai:<model>"
        )
    kind, model = parsed.kind, parsed.target
    allowed = option_types(kind)
    unknown = sorted(set(overrides) - set(allowed))
    if unknown:
        raise SpecError(
            f"unknown option(s) {', '.join(unknown)} for a {kind} LLM spec; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    values = parsed.typed_options()
    values.update({key: convert_option(key, raw, allowed[key]) for key, raw in overrides.items()})
    policy_kwargs = {k: values.pop(k) for k in list(values) if k in POLICY_OPTION_TYPES}
    adapter = values.get("adapter")
    if adapter is not None and not Path(str(adapter)).expanduser().is_dir():
        raise FileNotFoundError(f"LoRA adapter directory not found: {adapter}")
    name = policy_kwargs.pop("name", None) or _default_name(kind, model, adapter)

    backend: Backend
    if kind == "hf":
        from tomgym.agents.llm.backends.hf import HFBackend, looks_like_path

        if model != "default" and looks_like_path(model) and not Path(model).expanduser().exists():
            raise FileNotFoundError(f"model checkpoint not found: {model}")
        backend = HFBackend(model, **values)
    elif kind == "vllm":
        from tomgym.agents.llm.backends.vllm import VLLMBackend

        backend = VLLMBackend(model, **values)
    else:
        from tomgym.agents.llm.backends.openai_compat import OpenAICompatBackend

        backend = OpenAICompatBackend(model, **values)
    return LLMPolicy(backend, name=name, **policy_kwargs)
