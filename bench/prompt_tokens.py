"""Defender tokens per TOM-SB episode, by prompt variant, with the bundled SmolLM2 tokenizer.

    python -m bench.prompt_tokens [--variants default compact] [--scenarios 10] [--turns 8]
                                  [--prior-level 1] [--split validation]

Plays the first `--scenarios` scenarios of the split at `--prior-level` (benchmark seed 0) with
the scripted `tom_heuristic` defender against the scripted `base` attacker, `--turns` attacker
turns at most, once per variant, through the PettingZoo env. The defender's side of each game is
the chat an LLM policy keeps (`agents.llm.policy`: `[system, user(message 1), assistant(answer
1), user(message 2), ...]`, each user turn the observation's `message`), rendered with the
tokenizer's chat template. Prints one JSON line: per variant

- `first_prompt_tokens`: the first turn's prompt (system + briefing + question, generation prompt);
- `later_message_tokens`: a later user message (the attacker's words + the question);
- `standalone_prompt_tokens`: the observation's `prompt` field (what a stateless policy reads);
- `input_tokens`: an episode's system prompt and user messages, each rendered alone (everything
  the defender reads, its own answers left out);
- `one_sequence_tokens`: the whole episode rendered once (system and briefing once, then every
  turn; what the trainer's one-sequence-per-episode layout costs);
- `per_turn_examples_tokens`: one example per defender turn, each re-encoding the dialogue so
  far plus that turn's answer (the prompt/completion layout of the SFT warm start today);

each a mean over episodes (per turn for the first three), plus `per_turn_over_one_sequence` and,
when both variants are measured, `compact_over_default` for every mean. The scripted outcomes are
reported too: the variant changes only what a model reads, never how scripted players play.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

from tomgym.agents.base import Turn
from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy
from tomgym.envs.tomsb.benchmark import load_benchmark
from tomgym.envs.tomsb.env import DEFENDER, raw_env
from tomgym.envs.tomsb.prompts import DEFENDER_PROMPT_VARIANTS
from tomgym.envs.tomsb.universe import Scenario

Chat = list[dict[str, str]]
CountFn = Callable[[Chat, bool], int]  # (messages, add_generation_prompt) -> tokens


def defender_episodes(
    variant: str,
    scenarios: Sequence[Scenario],
    *,
    max_attacker_turns: int = 8,
    defender: str = "tom_heuristic",
    attacker: str = "base",
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One game per scenario: `{"chat", "prompts", "outcome"}` of the defender's side.

    `prompts` are the defender observations' standalone `prompt` fields, one per answered turn.
    """
    env = raw_env(
        scenarios=list(scenarios), max_attacker_turns=max_attacker_turns, prompt_variant=variant
    )
    games: list[dict[str, Any]] = []
    for scenario in scenarios:
        policies = {
            agent: make_scripted_tomsb_policy(name, seed)
            for agent, name in (("attacker_0", attacker), (DEFENDER, defender))
        }
        game_id = scenario.scenario_id
        env.reset(seed=seed, options={"scenario": scenario, "attacker": attacker})
        chat: Chat = []
        standalone: list[str] = []
        for agent in env.agent_iter():
            obs, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            answer = policies[agent].act_batch([Turn(game_id, agent, obs)])[0]
            if agent == DEFENDER:
                if not chat and obs["system"]:
                    chat.append({"role": "system", "content": obs["system"]})
                chat.append({"role": "user", "content": obs["message"]})
                chat.append({"role": "assistant", "content": answer})
                standalone.append(obs["prompt"])
            env.step(answer)
        games.append({"chat": chat, "prompts": standalone, "outcome": env.summary()["outcome"]})
    return games


def token_counts(games: Sequence[dict[str, Any]], count: CountFn) -> dict[str, Any]:
    """The token means of the module doc for `games` (from `defender_episodes`)."""
    first, later, standalone, inputs, one_sequence, per_turn = [], [], [], [], [], []
    for game in games:
        chat = game["chat"]
        answers = [i for i, m in enumerate(chat) if m["role"] == "assistant"]
        first.append(count(chat[: answers[0]], True))
        later.extend(count([chat[i - 1]], False) for i in answers[1:])
        standalone.extend(count([{"role": "user", "content": p}], True) for p in game["prompts"])
        inputs.append(sum(count([m], False) for m in chat if m["role"] != "assistant"))
        one_sequence.append(count(chat, False))
        per_turn.append(sum(count(chat[: i + 1], False) for i in answers))
    outcomes: dict[str, int] = {}
    for game in games:
        outcomes[game["outcome"]] = outcomes.get(game["outcome"], 0) + 1
    means = {
        "first_prompt_tokens": statistics.fmean(first),
        "later_message_tokens": statistics.fmean(later) if later else 0.0,
        "standalone_prompt_tokens": statistics.fmean(standalone),
        "input_tokens": statistics.fmean(inputs),
        "one_sequence_tokens": statistics.fmean(one_sequence),
        "per_turn_examples_tokens": statistics.fmean(per_turn),
    }
    return {
        "episodes": len(games),
        "defender_turns": sum(len(g["prompts"]) for g in games) / len(games),
        "outcomes": outcomes,
        **{k: round(v, 1) for k, v in means.items()},
        "per_turn_over_one_sequence": round(
            means["per_turn_examples_tokens"] / means["one_sequence_tokens"], 2
        ),
    }


def chat_token_counter(tokenizer: Any) -> CountFn:
    """Tokens of a chat as the trainer renders it (chat template text, then encoded)."""

    def count(messages: Chat, add_generation_prompt: bool) -> int:
        text = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return count


def bundled_tokenizer() -> Any:
    """The default model's tokenizer (converts the bundled checkpoint once if needed)."""
    from tomgym.agents.default_model import default_model_path
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(default_model_path())


def measure(
    variants: Sequence[str],
    count: CountFn,
    *,
    split: str = "validation",
    prior_level: int = 1,
    n_scenarios: int = 10,
    max_attacker_turns: int = 8,
) -> dict[str, Any]:
    """The report of the module doc for `variants`, tokens counted by `count`."""
    scenarios = list(load_benchmark(0).filter(split=split, prior_level=prior_level))[:n_scenarios]
    if not scenarios:
        raise ValueError(f"no {split} scenario at prior level {prior_level}")
    report: dict[str, Any] = {
        "split": split,
        "prior_level": prior_level,
        "scenarios": len(scenarios),
        "max_attacker_turns": max_attacker_turns,
        "defender": "tom_heuristic",
        "attacker": "base",
    }
    for variant in variants:
        games = defender_episodes(variant, scenarios, max_attacker_turns=max_attacker_turns)
        report[variant] = token_counts(games, count)
    if "default" in variants and "compact" in variants:
        report["compact_over_default"] = {
            k: round(report["compact"][k] / report["default"][k], 2)
            for k, v in report["default"].items()
            if k.endswith("_tokens") and v
        }
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=["default", "compact"])
    parser.add_argument("--split", default="validation", choices=("train", "validation", "test"))
    parser.add_argument("--prior-level", type=int, default=1, choices=(0, 1, 2))
    parser.add_argument("--scenarios", type=int, default=10)
    parser.add_argument("--turns", type=int, default=8, help="max attacker turns")
    args = parser.parse_args(argv)
    unknown = [v for v in args.variants if v not in DEFENDER_PROMPT_VARIANTS]
    if unknown:
        parser.error(f"unknown --variants {unknown}; choose from {list(DEFENDER_PROMPT_VARIANTS)}")
    if args.scenarios < 1 or args.turns < 1:
        parser.error("--scenarios and --turns must be positive")
    report = measure(
        args.variants,
        chat_token_counter(bundled_tokenizer()),
        split=args.split,
        prior_level=args.prior_level,
        n_scenarios=args.scenarios,
        max_attacker_turns=args.turns,
    )
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
