"""The compact defender layout: selectable, valid, smaller, and invisible to scripted players."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from tomgym.agents.base import Turn
from tomgym.agents.tomsb_matrix import run_matrix
from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy
from tomgym.envs.tomsb import prompts
from tomgym.envs.tomsb.benchmark import load_benchmark
from tomgym.envs.tomsb.env import ATTACKER, DEFENDER, raw_env
from tomgym.envs.tomsb.parsing import parse_defender
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS
from tomgym.envs.tomsb.universe import DEPTH, Scenario

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def validation() -> list[Scenario]:
    return list(load_benchmark(0).split("validation"))


def play(scenario: Scenario, variant: str, **options: Any) -> dict[str, list[dict[str, Any]]]:
    """tom_heuristic vs base on `scenario`; every observation each agent answered, by agent."""
    env = raw_env(scenarios=[scenario], max_attacker_turns=8)
    policies = {
        ATTACKER: make_scripted_tomsb_policy("base"),
        DEFENDER: make_scripted_tomsb_policy("tom_heuristic"),
    }
    env.reset(seed=0, options={"scenario": scenario, "prompt_variant": variant, **options})
    seen: dict[str, list[dict[str, Any]]] = {ATTACKER: [], DEFENDER: []}
    for agent in env.agent_iter():
        obs, _, terminated, _, _ = env.last()
        if terminated:
            env.step(None)
            continue
        seen[agent].append(obs)
        env.step(policies[agent].act_batch([Turn("g", agent, obs)])[0])
    assert env.summary()["prompt_variant"] == variant
    assert all(o["retry"] == 0 for obs in seen.values() for o in obs)  # no answer was rejected
    return seen


def test_compact_is_registered_and_never_a_default() -> None:
    assert "compact" in prompts.DEFENDER_PROMPT_VARIANTS
    assert prompts.is_compact("compact") and not prompts.is_compact("default")
    # the CLI help calls the last three variants the paper's prompted baselines
    assert prompts.DEFENDER_PROMPT_VARIANTS[-3:] == tuple(prompts.DEFENDER_BASELINE_PROMPTS)
    assert raw_env().prompt_variant == "default"
    for path in sorted((REPO / "training" / "configs").glob("*.yaml")):
        if path.name == "cpu_demo.yaml":  # the small-model demo may choose the compact layout
            continue
        env_config = (yaml.safe_load(path.read_text()) or {}).get("env_config") or {}
        variant = env_config.get("prompt_variant", "default")
        assert not prompts.is_compact(variant), path.name


def test_compact_selectable_by_constructor_and_reset_option(validation) -> None:
    env = raw_env(scenarios=validation[:1], prompt_variant="compact")
    env.reset(seed=0)
    compact = env.observe(DEFENDER)["system"]
    env.reset(seed=0, options={"prompt_variant": "default"})
    assert env.observe(DEFENDER)["system"] != compact
    env.reset(seed=0)
    assert env.observe(DEFENDER)["system"] == compact
    with pytest.raises(ValueError, match="prompt_variant"):
        env.reset(options={"prompt_variant": "tiny"})


def test_compact_observations_are_valid_and_smaller(validation) -> None:
    scenario = next(s for s in validation if s.prior_level == 1)
    default, compact = play(scenario, "default"), play(scenario, "compact")
    # the attacker's side and every machine-readable field are the same
    assert compact[ATTACKER] == default[ATTACKER]
    for d, c in zip(default[DEFENDER], compact[DEFENDER], strict=True):
        for key in ("scenario", "last_message", "turn", "role", "retry", "side_question"):
            assert c[key] == d[key]
    levels = scenario.levels
    first, *later = compact[DEFENDER]
    # the format is stated once, in the system prompt, with the parser's keys
    assert prompts.defender_format(levels).split(": ", 1)[1] in first["system"]
    assert all(prompts.defender_format(levels) not in o["message"] for o in compact[DEFENDER])
    assert all(o["message"].endswith(prompts.COMPACT_REMINDER) for o in compact[DEFENDER])
    # the tree names every universe name once, on its own line, and the true path
    lines = [line.strip() for line in first["message"].splitlines()]
    names = [*scenario.universe.roots, *(c for k in scenario.universe.children.values() for c in k)]
    assert sorted(n for n in lines if n in set(names)) == sorted(names)
    assert "True path: " + " > ".join(scenario.ground_truth) in first["message"]
    assert later and all(o["message"].startswith("The attacker says: ") for o in later)

    def size(observations: list[dict[str, Any]]) -> int:  # what a chat policy reads
        return len(observations[0]["system"]) + sum(len(o["message"]) for o in observations)

    # characters, measured 0.60-0.63 on the 20 validation prior-1 games (tokens: 0.62, see
    # test_compact_saves_tokens); the first standalone prompt measured 0.68-0.73
    assert size(compact[DEFENDER]) <= 0.7 * size(default[DEFENDER])
    assert len(first["prompt"]) <= 0.8 * len(default[DEFENDER][0]["prompt"])


def test_compact_reask_repeats_the_full_format(validation) -> None:
    scenario = validation[0]
    env = raw_env(scenarios=[scenario], prompt_variant="compact")
    env.reset(seed=0)
    attacker = make_scripted_tomsb_policy("base")
    env.step(attacker.act_batch([Turn("g", ATTACKER, env.observe(ATTACKER))])[0])
    env.step("no json here")
    obs = env.observe(DEFENDER)
    assert obs["retry"] == 1
    assert prompts.defender_format(scenario.levels) in obs["message"]
    assert obs["message"].startswith("Your last answer was invalid")


def test_compact_briefing_with_the_oracle_prior(validation) -> None:
    scenario = next(s for s in validation if s.prior_level == 1)
    first = play(scenario, "compact", reveal_prior=True)[DEFENDER][0]
    known = f"{scenario.ground_truth[0]} > ? > ?"
    assert f"Attacker knew beforehand (? = unknown): {known}" in first["message"]
    assert "Attacker knew" not in play(scenario, "compact")[DEFENDER][0]["message"]


def test_decoy_briefing_lists_the_wrong_values_under_the_true_parent(validation) -> None:
    scenario = validation[0]
    universe, (top, middle, leaf) = scenario.universe, scenario.ground_truth
    message = play(scenario, "compact_decoys")[DEFENDER][0]["message"]
    briefing = play(scenario, "compact")[DEFENDER][0]["message"].split("\n\n")[0]
    assert message.startswith(briefing + "\nWrong values beside the true path:\n")
    lines = message.split("Wrong values beside the true path:\n", 1)[1].splitlines()[:3]
    levels = universe.levels
    expected = [
        [n for n in universe.roots if n != top],
        [n for n in universe.children[top] if n != middle],
        [n for n in universe.children[middle] if n != leaf],
    ]
    assert lines[0] == f"- {levels[0]}: {', '.join(expected[0])}"
    assert lines[1] == f"- {levels[1]} under {top}: {', '.join(expected[1])}"
    assert lines[2] == f"- {levels[2]} under {middle}: {', '.join(expected[2])}"
    assert all(len(names) == 2 for names in expected)
    assert prompts.is_compact("compact_decoys")


def test_path_briefing_is_the_decoy_briefing_without_the_tree(validation) -> None:
    scenario = validation[0]
    universe, truth = scenario.universe, list(scenario.ground_truth)
    with_tree = play(scenario, "compact_decoys")[DEFENDER][0]["message"]
    path_only = play(scenario, "compact_path")[DEFENDER][0]["message"]
    tree = prompts.universe_tree(universe)
    assert tree in with_tree and path_only == with_tree.replace(" Universe:\n" + tree, "", 1)
    # The only names left: the true path and the decoys under its parents.
    briefing = path_only.split("\n\n")[0]
    allowed = set(truth) | set(universe.roots)
    allowed |= {name for parent in truth[:-1] for name in universe.children[parent]}
    named = {n for depth in range(DEPTH) for n in universe.nodes(depth) if n in briefing}
    assert named and named <= allowed, named - allowed
    assert prompts.is_compact("compact_path")


def test_branch_briefing_adds_the_names_under_each_wrong_middle_value(validation) -> None:
    # At prior level 1 the teacher lies at the middle level and then names a leaf under its lie:
    # every name it says must be in the briefing (the path-only one lacks those leaves).
    scenario = next(s for s in validation if s.prior_level == 1)
    universe, truth = scenario.universe, list(scenario.ground_truth)
    path_only = play(scenario, "compact_path")[DEFENDER][0]["message"].split("\n\n")[0]
    observed = play(scenario, "compact_branches")[DEFENDER]
    briefing = observed[0]["message"].split("\n\n")[0]
    wrong_middle = [n for n in universe.children[truth[0]] if n != truth[1]]
    assert briefing == path_only + "\n" + "\n".join(
        f"- {universe.levels[2]} under {name}: {', '.join(universe.children[name])}"
        for name in wrong_middle
    )
    assert (
        prompts.branch_lines(universe, truth)
        == briefing.splitlines()[len(path_only.splitlines()) :]
    )
    policy = make_scripted_tomsb_policy("tom_heuristic")
    said = [
        json.loads(policy.act_batch([Turn("g", DEFENDER, obs)])[0])["reply"] for obs in observed
    ]
    lies = {n for depth in (1, 2) for n in universe.nodes(depth) if any(n in r for r in said)}
    lies -= set(truth)
    assert lies and all(name in briefing for name in lies), lies
    assert prompts.is_compact("compact_branches")


def test_scripted_answers_parse_under_compact(validation) -> None:
    scenario = validation[3]
    for obs in play(scenario, "compact")[DEFENDER]:
        view = json.loads(obs["scenario"])
        assert set(view) == {"hierarchy", "universe", "ground_truth"}
    universe = scenario.universe
    policy = make_scripted_tomsb_policy("tom_heuristic")
    answer = policy.act_batch([Turn("g", DEFENDER, play(scenario, "compact")[DEFENDER][0])])[0]
    move, error, _ = parse_defender(answer, universe, universe.name_index())
    assert move is not None, error


def test_behaviour_matrix_is_the_same_under_compact(validation) -> None:
    # The scripted players read the JSON `scenario` field and the attacker's words, never the
    # layout: every episode must end the same way after the same number of turns.
    runs = {
        v: run_matrix(validation, ["tom_heuristic"], ATTACKER_VARIANTS, prompt_variant=v)
        for v in ("default", *prompts.COMPACT_LAYOUTS)
    }
    assert all(runs[v] == runs["default"] for v in prompts.COMPACT_LAYOUTS)
    fooled = sum(r.outcome == "fooled" for r in runs["compact"]["tom_heuristic"]["base"])
    assert fooled == len(validation)  # the reference numbers: tom_heuristic fools base 1.00


def test_compact_saves_tokens() -> None:
    pytest.importorskip("transformers")
    from tomgym.agents.default_model import DefaultModelError, default_model_path
    from transformers import AutoTokenizer

    from bench.prompt_tokens import chat_token_counter, measure

    try:
        tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    except DefaultModelError as exc:
        pytest.skip(str(exc))
    report = measure(["default", "compact"], chat_token_counter(tokenizer), n_scenarios=4)
    ratio = report["compact_over_default"]
    # measured on 10 validation prior-1 games: 0.62 / 0.69 / 0.52
    assert ratio["input_tokens"] <= 0.7
    assert ratio["first_prompt_tokens"] <= 0.75
    assert ratio["later_message_tokens"] <= 0.6
    assert report["compact"]["outcomes"] == report["default"]["outcomes"] == {"fooled": 4}
    # one sequence per episode vs one example per turn re-encoding the dialogue: about 4x
    assert report["default"]["per_turn_over_one_sequence"] >= 3
