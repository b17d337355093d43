"""Policy specs: the one grammar that names a player, on the command line, in eval and in training.

A spec parses to a `PolicySpec(kind, target, options)`; `to_string()` writes it back, and
`parse_spec(spec.to_string()) == spec` for every spec (the canonical form keeps option order).

    random                            Decrypto random player
    embedding[:k=16,vectors=glove]    Decrypto word-embedding baseline; `embedding:16` = `embedding:k=16`
    scripted:<name>                   TOM-SB scripted attacker (ATTACKER_VARIANTS) or defender
                                      (agents.tomsb_defenders.DEFENDER_STRATEGIES)
    default[,key=value...]            the bundled SmolLM2-135M-Instruct (= `hf:default`)
    hf:<model id or path>[,key=value...]   HF transformers
    vllm:<model>[,key=value...]       vLLM offline engine
    openai:<model>[,key=value...]     any OpenAI-compatible server (key from an env variable only)
    human                             a person at this terminal
    frozen[,key=value...]             training only: a frozen copy of the model being trained

LLM option keys and their types are `POLICY_OPTION_TYPES` (every backend) and
`BACKEND_OPTION_TYPES[kind]`; unknown keys and badly typed values are rejected when the spec is
parsed, so a mistyped spec fails before anything is loaded or written.

Lists: `split_specs("hf:m,temperature=0.7,default")` -> `["hf:m,temperature=0.7", "default"]`: a
comma part `key=value` whose key has no `:` belongs to the spec before it (attacker-variant
names are not option keys, so `base=SPEC` starts a new entry).

Attacker entries (`tomgym eval tomsb --attackers`): a variant name (`base`), `scripted:<variant>`,
any policy spec (played with the base attacker prompt) or `VARIANT=SPEC` -> `AttackerEntry`.

`tomgym.agents.policies.make_policy(spec)` builds the policy a spec names (heavy backends are
imported only then; it lives apart so that the LLM policy can read its options here without a circle).
`check_role(spec, agent)` says, in one line, when a spec cannot play an agent (a scripted
attacker as `defender_0`, a Decrypto baseline in TOM-SB).

Every error is a `SpecError` (a ValueError) with one line naming the bad part.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS

LLM_KINDS = ("hf", "vllm", "openai")
SIMPLE_KINDS = ("random", "human")
KINDS = ("random", "embedding", "scripted", "human", "frozen", *LLM_KINDS)
DEFAULT_MODEL = "default"
EMBEDDING_OPTION_TYPES: dict[str, type] = {"k": int, "vectors": str}

POLICY_OPTION_TYPES: dict[str, type] = {
    "name": str,
    "temperature": float,
    "top_p": float,
    "max_new_tokens": int,
    "seed": int,
    "side_question_temperature": float,
    "system_override": str,
}
BACKEND_OPTION_TYPES: dict[str, dict[str, type]] = {
    "hf": {
        "adapter": str,
        "device": str,
        "dtype": str,
        "device_map": str,
        "max_batch_size": int,
        "num_threads": int,
        "kv_cache": bool,
        "kv_cache_max_tokens": int,
        "kv_cache_share_prefixes": bool,
        "stop_at_answer": bool,
        "constrain_format": bool,
        "constrain_beliefs": bool,
        "constrain_replies": bool,
        "constrain_branches": bool,
        "constrain_story": bool,
        "constrain_plan": bool,
        "constrain_asked": bool,
        "packed_linear": bool,
    },
    "vllm": {
        "adapter": str,
        "dtype": str,
        "tensor_parallel_size": int,
        "gpu_memory_utilization": float,
        "max_model_len": int,
        "max_lora_rank": int,
        "enforce_eager": bool,
    },
    "openai": {
        "base_url": str,
        "api_key_env": str,
        "max_concurrency": int,
        "timeout": float,
        "max_retries": int,
        "response_format_json": bool,
        "on_failure": str,
        "context_window": int,
    },
}
# `frozen` is the trained model on the HF backend.
BACKEND_OPTION_TYPES["frozen"] = BACKEND_OPTION_TYPES["hf"]
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}
GRAMMAR_HINT = (
    "random, embedding[:k=K,vectors=V], scripted:<name>, default, hf:<model>, vllm:<model>, "
    "openai:<model>, human"
)


class SpecError(ValueError):
    """A malformed or unusable policy spec; the message is one line naming the bad part."""


def convert_option(key: str, raw: Any, kind: type) -> Any:
    """`raw` (a spec's text, or an already typed override) as `kind`; SpecError names the key."""
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    if kind is bool:
        if text.lower() not in _TRUE | _FALSE:
            raise SpecError(f"option {key}={raw!r} must be true or false")
        return text.lower() in _TRUE
    try:
        return kind(text)
    except ValueError:
        name = {int: "an integer", float: "a number"}.get(kind, kind.__name__)
        raise SpecError(f"option {key}={raw!r} must be {name}") from None


def option_types(kind: str) -> dict[str, type]:
    """The option keys a spec of `kind` accepts, with their types."""
    if kind == "embedding":
        return EMBEDDING_OPTION_TYPES
    if kind in BACKEND_OPTION_TYPES:
        return {**POLICY_OPTION_TYPES, **BACKEND_OPTION_TYPES[kind]}
    return {}


@dataclass(frozen=True)
class PolicySpec:
    """One parsed spec: `kind` (one of KINDS), `target` (model, scripted name; "" if none),
    `options` (ordered (key, text value) pairs, validated against `option_types(kind)`)."""

    kind: str
    target: str = ""
    options: tuple[tuple[str, str], ...] = field(default=())

    @property
    def is_llm(self) -> bool:
        return self.kind in LLM_KINDS

    @property
    def role(self) -> str | None:
        """The TOM-SB role a scripted spec plays ("attacker" / "defender"), else None."""
        if self.kind != "scripted":
            return None
        return "attacker" if self.target in ATTACKER_VARIANTS else "defender"

    @property
    def game(self) -> str | None:
        """The only game this spec can play ("decrypto" / "tomsb"), None if it plays any."""
        if self.kind in ("random", "embedding"):
            return "decrypto"
        if self.kind == "scripted":
            return "tomsb"
        return None

    def option_dict(self) -> dict[str, str]:
        return dict(self.options)

    def typed_options(self) -> dict[str, Any]:
        """The options converted to their declared types."""
        types = option_types(self.kind)
        return {key: convert_option(key, value, types[key]) for key, value in self.options}

    def with_options(self, **options: Any) -> PolicySpec:
        """A copy with `options` set (replacing same-named ones, appending new ones)."""
        merged = dict(self.options)
        merged.update({k: _text(v) for k, v in options.items()})
        return _validated(PolicySpec(self.kind, self.target, tuple(merged.items())), None)

    def to_string(self) -> str:
        """The canonical spec text; parsing it gives this spec back."""
        options = ",".join(f"{key}={value}" for key, value in self.options)
        if self.kind in SIMPLE_KINDS:
            return self.kind
        if self.kind == "embedding":
            return f"embedding:{options}" if options else "embedding"
        if self.kind == "scripted":
            return f"scripted:{self.target}"
        if self.kind == "frozen" or (self.kind == "hf" and self.target == DEFAULT_MODEL):
            head = self.kind if self.kind == "frozen" else DEFAULT_MODEL
        else:
            head = f"{self.kind}:{self.target}"
        return f"{head},{options}" if options else head

    def __str__(self) -> str:
        return self.to_string()


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _options(parts: list[str], spec: str) -> tuple[tuple[str, str], ...]:
    pairs: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SpecError(f"bad policy spec {spec!r}: expected key=value, got {part.strip()!r}")
        if key in pairs:
            raise SpecError(f"bad policy spec {spec!r}: option {key!r} given twice")
        pairs[key] = value.strip()
    return tuple(pairs.items())


def _validated(parsed: PolicySpec, spec: str | None) -> PolicySpec:
    where = f"policy spec {spec!r}" if spec is not None else f"a {parsed.kind} spec"
    keys = [key for key, _ in parsed.options]
    if "api_key" in keys:
        # Never echo the spec: it holds the secret.
        raise SpecError(
            "inline api_key is not accepted in a policy spec; put the key in an environment "
            "variable and name it with api_key_env=VAR"
        )
    types = option_types(parsed.kind)
    unknown = [key for key in keys if key not in types]
    if unknown:
        allowed = ", ".join(sorted(types)) or "none"
        raise SpecError(
            f"unknown option(s) {', '.join(unknown)} in {where}; {parsed.kind} accepts: {allowed}"
        )
    parsed.typed_options()  # every value must convert
    if parsed.kind == "embedding":
        _check_embedding(parsed, where)
    if parsed.kind == "scripted":
        _check_scripted(parsed.target, where)
    return parsed


def _check_embedding(parsed: PolicySpec, where: str) -> None:
    from tomgym.agents.vectors import VECTOR_NAMES

    options = parsed.typed_options()
    if options.get("k", 1) < 1:
        raise SpecError(f"bad {where}: k must be >= 1")
    if options.get("vectors", VECTOR_NAMES[0]) not in VECTOR_NAMES:
        raise SpecError(f"bad {where}: vectors must be one of {', '.join(VECTOR_NAMES)}")


def _check_scripted(name: str, where: str) -> None:
    from tomgym.agents.tomsb_defenders import DEFENDER_STRATEGIES

    if name not in ATTACKER_VARIANTS and name not in DEFENDER_STRATEGIES:
        raise SpecError(
            f"unknown scripted TOM-SB policy {name!r} in {where}; attackers: "
            f"{', '.join(ATTACKER_VARIANTS)}; defenders: {', '.join(DEFENDER_STRATEGIES)}"
        )


def parse_spec(spec: str | PolicySpec) -> PolicySpec:
    """Parse one spec (see the module docstring); SpecError names what is wrong, in one line."""
    if isinstance(spec, PolicySpec):
        return spec
    if not isinstance(spec, str):
        raise SpecError(f"a policy spec must be a string, got {type(spec).__name__}")
    text = spec.strip()
    if not text:
        raise SpecError("empty policy spec")
    head, sep, rest = text.partition(":")
    head = head.strip()
    if head == "embedding" and sep:
        if rest.strip().isdigit():  # the short form `embedding:16`
            rest = f"k={rest.strip()}"
        parts = [p for p in rest.split(",") if p.strip()]
        return _validated(PolicySpec("embedding", "", _options(parts, text)), text)
    first, *option_parts = text.split(",")
    first = first.strip()
    if first in (*SIMPLE_KINDS, "embedding"):
        if option_parts:
            hint = " (embedding options follow a colon: embedding:k=16)" * (first == "embedding")
            raise SpecError(f"bad policy spec {text!r}: {first} takes no ,key=value options{hint}")
        return PolicySpec(first)
    if first in ("frozen", DEFAULT_MODEL):
        kind, target = ("frozen", "") if first == "frozen" else ("hf", DEFAULT_MODEL)
        return _validated(PolicySpec(kind, target, _options(option_parts, text)), text)
    kind, sep, target = first.partition(":")
    kind, target = kind.strip(), target.strip()
    if kind == "scripted" and sep:
        if option_parts:
            raise SpecError(f"bad policy spec {text!r}: scripted policies take no options")
        if not target:
            raise SpecError(f"bad policy spec {text!r}: scripted:<name> needs a name")
        return _validated(PolicySpec("scripted", target), text)
    if kind in LLM_KINDS and sep:
        if not target:
            raise SpecError(f"bad policy spec {text!r}: {kind}:<model> needs a model")
        return _validated(PolicySpec(kind, target, _options(option_parts, text)), text)
    raise SpecError(f"unknown policy spec {text!r}; expected {GRAMMAR_HINT}")


def split_specs(text: str) -> list[str]:
    """A comma list of specs (or attacker entries) as one string per entry (see module doc)."""
    items: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, _ = part.partition("=")
        if sep and ":" not in key and key.strip() not in ATTACKER_VARIANTS:
            if not items:
                raise SpecError(f"option {part!r} comes before any policy spec in {text!r}")
            items[-1] += "," + part
        else:
            items.append(part)
    return items


@dataclass(frozen=True)
class AttackerEntry:
    """One attacker of a TOM-SB evaluation: its table `label`, the attacker prompt `variant`
    given to the env, and the policy that plays it."""

    label: str
    variant: str
    spec: PolicySpec


def parse_attacker(entry: str) -> AttackerEntry:
    """`base` | `scripted:<variant>` | any policy spec (base prompt) | `VARIANT=SPEC`."""
    entry = entry.strip()
    if not entry:
        raise SpecError("empty attacker entry")
    if entry in ATTACKER_VARIANTS:
        return AttackerEntry(entry, entry, PolicySpec("scripted", entry))
    head, sep, rest = entry.partition("=")
    if sep and head.strip() in ATTACKER_VARIANTS:
        variant = head.strip()
        spec = parse_spec(rest)
        return AttackerEntry(f"{variant}={spec.to_string()}", variant, spec)
    spec = parse_spec(entry)
    if spec.kind == "scripted":
        if spec.role != "attacker":
            raise SpecError(
                f"{entry!r} is a scripted defender; attackers: {', '.join(ATTACKER_VARIANTS)}"
            )
        return AttackerEntry(spec.target, spec.target, spec)
    return AttackerEntry(spec.to_string(), "base", spec)


def agent_role(agent: str) -> str:
    """`defender_0` -> `defender`: the role part of a PettingZoo agent id."""
    return agent.rsplit("_", 1)[0] if agent.rsplit("_", 1)[-1].isdigit() else agent


def check_role(spec: str | PolicySpec, agent: str, game: str) -> None:
    """SpecError (one line) when `spec` cannot play `agent` of `game` ("decrypto" / "tomsb")."""
    parsed = parse_spec(spec)
    text = parsed.to_string()
    if parsed.game is not None and parsed.game != game:
        what = "a Decrypto baseline" if parsed.game == "decrypto" else "a scripted TOM-SB player"
        raise SpecError(f"{agent}={text}: {what} cannot play {game}")
    if parsed.role is not None and parsed.role != agent_role(agent):
        if agent_role(agent) == "attacker":
            fitting = ", ".join(f"scripted:{v}" for v in ATTACKER_VARIANTS)
        else:
            from tomgym.agents.tomsb_defenders import DEFENDER_STRATEGIES

            fitting = ", ".join(f"scripted:{d}" for d in DEFENDER_STRATEGIES)
        raise SpecError(
            f"{text} is a TOM-SB {parsed.role}, but {agent} is the {agent_role(agent)}: "
            f"give it {fitting} or an LLM spec"
        )
    if parsed.kind == "frozen":
        raise SpecError(f"{agent}=frozen: 'frozen' names the trained model, only in training")
