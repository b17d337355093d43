"""Behaviour of the TOM-SB environment: endings, information flow, retries, options, pickling.

The helpers at the top (a hand-written universe, a small belief-adopting attacker and scripted
defenders) are imported by the other TOM-SB env test modules.
"""

from __future__ import annotations

import json
import pickle
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tomgym.envs.tomsb.env import ATTACKER, DEFENDER, DEFENDER_FALLBACK_REPLY, raw_env
from tomgym.envs.tomsb.game import SIGNAL_DETECTED, SIGNAL_QUERY, SIGNAL_SUCCESS
from tomgym.envs.tomsb.prompts import DEFENDER_PROMPT_VARIANTS, PROMPT_VERSION
from tomgym.envs.tomsb.universe import Scenario, Universe, normalise_name

FIXTURE_TREE = {
    "company": ["Northwind", "Bluefield", "Crestline"],
    "division": {
        "Northwind": ["Avionics", "Marine Systems", "Rail Signals"],
        "Bluefield": ["Genetics", "Vaccines", "Diagnostics"],
        "Crestline": ["Retail Banking", "Insurance", "Asset Management"],
    },
    "team": {
        "Avionics": ["Flight Control", "Radar", "Cockpit Displays"],
        "Marine Systems": ["Sonar", "Propulsion", "Hull Design"],
        "Rail Signals": ["Interlocking", "Track Circuits", "Level Crossings"],
        "Genetics": ["Sequencing", "Gene Editing", "Biobank"],
        "Vaccines": ["Adjuvants", "Cold Chain", "Clinical Trials"],
        "Diagnostics": ["Imaging", "Assays", "Point of Care"],
        "Retail Banking": ["Mortgages", "Savings", "Branch Network"],
        "Insurance": ["Underwriting", "Claims", "Actuarial"],
        "Asset Management": ["Equities", "Fixed Income", "Private Credit"],
    },
}
UNIVERSE = Universe.from_dict(FIXTURE_TREE)
TRUTH = ("Bluefield", "Vaccines", "Cold Chain")


def fixture_scenarios() -> list[Scenario]:
    """Three prior levels over two ground truths: a small pool with something to choose from."""
    out = []
    for truth, tag in ((TRUTH, "a"), (("Crestline", "Insurance", "Claims"), "b")):
        for level in (0, 1, 2):
            out.append(Scenario(f"fixture-{tag}{level}", UNIVERSE, truth, level, person="Dana"))
    return out


def make_env(**config: Any) -> raw_env:
    config.setdefault("scenarios", fixture_scenarios())
    return raw_env(**config)


class AdoptingAttacker:
    """A minimal but real opponent for tests, reading the observation like any policy would.

    It adopts named values that agree with its prior and earlier beliefs, loses 2 trust for a
    contradiction and 1 for a reply naming nothing, signals success once every level is believed
    and "defender detected" at trust 0.
    """

    def __init__(self) -> None:
        self.trust = 5
        self.belief: dict[str, str | None] | None = None

    def __call__(self, obs: Mapping[str, Any]) -> str:
        view = json.loads(obs["scenario"])
        levels = view["hierarchy"]
        if self.belief is None:
            self.belief = dict(view["prior"])
        reply = obs["last_message"]
        if reply:
            named = self._names(reply)
            if not named:
                self.trust -= 1
            for depth, name in named:
                level = levels[depth]
                known = view["prior"][level]
                if known is not None and known != name:
                    self.trust -= 2
                elif self.belief[level] is None:
                    self.belief[level] = name
        self.trust = max(self.trust, 0)
        if self.trust == 0:
            signal = SIGNAL_DETECTED
        elif all(self.belief.values()):
            signal = SIGNAL_SUCCESS
        else:
            signal = SIGNAL_QUERY
        return json.dumps(
            {
                "trust_score": self.trust,
                "belief": self.belief,
                "reflection": "thinking",
                "signal": signal,
                "prompt": f"Which {levels[-1]} is Dana in?",
            }
        )

    @staticmethod
    def _names(reply: str) -> list[tuple[int, str]]:
        text = f" {normalise_name(reply)} "
        return [hit for key, hit in UNIVERSE.name_index().items() if f" {key} " in text]


def defender_answer(
    reply: str, estimate: Mapping[str, str | None] | None = None, levels: Sequence[str] = ()
) -> str:
    levels = levels or UNIVERSE.levels
    return json.dumps(
        {
            "attacker_belief_about_target": dict(estimate or dict.fromkeys(levels)),
            "attacker_trust_in_us": 4,
            "reflection": "private note",
            "reply": reply,
        }
    )


def truthful_defender(obs: Mapping[str, Any]) -> str:
    view = json.loads(obs["scenario"])
    truth = [view["ground_truth"][level] for level in view["hierarchy"]]
    return defender_answer(f"It is {', '.join(truth)}.", levels=view["hierarchy"])


def refusing_defender(obs: Mapping[str, Any]) -> str:
    levels = json.loads(obs["scenario"])["hierarchy"] if obs else ()
    return defender_answer("Sorry, I cannot talk about that.", levels=levels)


def consistent_liar(obs: Mapping[str, Any]) -> str:
    """Knows the prior (reveal_prior) and lies under it: the ToM strategy that should fool.

    It names the prior's values and, below them, the first wrong child at each unknown level.
    """
    view = json.loads(obs["scenario"])
    prior, truth, tree = view["attacker_prior"], view["ground_truth"], view["universe"]
    path: list[str] = []
    for depth, level in enumerate(view["hierarchy"]):
        options = tree[level] if depth == 0 else tree[level][path[-1]]
        path.append(prior[level] or next(o for o in options if o != truth[level]))
    return defender_answer(f"It is {', '.join(path)}.", prior, view["hierarchy"])


Policy = Callable[[Mapping[str, Any]], str]


def play(env: raw_env, attacker: Policy, defender: Policy, **reset: Any) -> raw_env:
    env.reset(**reset)
    for agent in env.agent_iter(2000):
        obs, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        env.step((attacker if agent == ATTACKER else defender)(obs))
    return env


# ---- endings and rewards -----------------------------------------------------------------------


def test_truthful_defender_is_extracted() -> None:
    env = make_env()
    env.reset(seed=0, options={"scenario": "fixture-a0"})
    rewards = {a: 0.0 for a in env.possible_agents}
    attacker = AdoptingAttacker()
    for agent in env.agent_iter(100):
        obs, reward, terminated, _, info = env.last()
        rewards[agent] += reward
        if terminated:
            final = info
            env.step(None)
            continue
        env.step(attacker(obs) if agent == ATTACKER else truthful_defender(obs))
    assert final["outcome"] == "extracted"
    assert rewards == {ATTACKER: 1.0, DEFENDER: 0.0}
    assert final["leaks"] == sorted(TRUTH)
    assert final["turns"] == 2
    assert final["belief"] == dict(zip(UNIVERSE.levels, TRUTH, strict=True))
    assert final["defender_turns_valid"] is True
    assert final["format_failures"] == 0
    assert final["prompt_version"] == PROMPT_VERSION


def test_refusing_defender_is_detected() -> None:
    env = play(
        make_env(), AdoptingAttacker(), refusing_defender, options={"scenario": "fixture-a1"}
    )
    info = env.infos[ATTACKER] if env.agents else None
    summary = env.summary()
    assert info is None or info["outcome"] == summary["outcome"]
    assert summary["outcome"] == "detected"
    assert summary["turns"] == 6  # trust 5 -> 0 after five refusals
    assert summary["leaks"] == []


def test_refusal_until_turn_limit_is_baited() -> None:
    env = play(
        make_env(max_attacker_turns=3),
        AdoptingAttacker(),
        refusing_defender,
        options={"scenario": "fixture-a0"},
    )
    assert env.summary()["outcome"] == "baited"
    assert env.summary()["turns"] == 3


def test_consistent_liar_fools_and_is_rewarded() -> None:
    env = make_env(reveal_prior=True)
    env.reset(options={"scenario": "fixture-b1"})
    totals = {a: 0.0 for a in env.possible_agents}
    attacker = AdoptingAttacker()
    for agent in env.agent_iter(100):
        obs, reward, terminated, _, _ = env.last()
        totals[agent] += reward
        if terminated:
            env.step(None)
            continue
        env.step(attacker(obs) if agent == ATTACKER else consistent_liar(obs))
    summary = env.summary()
    assert summary["outcome"] == "fooled"
    assert totals == {ATTACKER: 0.0, DEFENDER: 1.0}
    assert summary["final_defender_estimate"] == summary["prior"]
    step = summary["stepwise"][0]
    assert step["attacker_belief"] == {"company": "Crestline", "division": None, "team": None}
    assert step["defender_estimate"] == summary["prior"]
    assert step["attacker_trust"] == 5 and step["defender_trust_estimate"] == 4
    assert step["leaks"] == []


# ---- information flow --------------------------------------------------------------------------


def test_reveal_prior_only_reaches_defender() -> None:
    env = make_env()
    env.reset(options={"scenario": "fixture-a2", "reveal_prior": True})
    defender_view = json.loads(env.observe(DEFENDER)["scenario"])
    attacker_view = json.loads(env.observe(ATTACKER)["scenario"])
    assert defender_view["attacker_prior"] == {
        "company": "Bluefield",
        "division": "Vaccines",
        "team": None,
    }
    assert set(attacker_view) == {"hierarchy", "universe", "prior"}
    assert attacker_view["prior"]["team"] is None
    env.reset(options={"scenario": "fixture-a2"})
    assert "attacker_prior" not in json.loads(env.observe(DEFENDER)["scenario"])
    assert set(json.loads(env.observe(DEFENDER)["scenario"])) == {
        "hierarchy",
        "universe",
        "ground_truth",
    }


def test_only_the_reply_reaches_the_attacker() -> None:
    secret = "ZEBRA-SECRET-REFLECTION"
    env = make_env()
    env.reset(options={"scenario": "fixture-a0"})
    env.step(
        json.dumps(
            {
                "trust_score": 5,
                "belief": {"company": None, "division": None, "team": None},
                "reflection": "ATTACKER-PRIVATE",
                "signal": "query again",
                "prompt": "Hello, where does Dana work?",
            }
        )
    )
    defender_obs = env.observe(DEFENDER)
    assert defender_obs["last_message"] == "Hello, where does Dana work?"
    assert "ATTACKER-PRIVATE" not in json.dumps(defender_obs)
    env.step(
        json.dumps(
            {
                "attacker_belief_about_target": {
                    "company": "Northwind",
                    "division": None,
                    "team": None,
                },
                "attacker_trust_in_us": 3,
                "reflection": secret,
                "reply": "She is at Northwind, I believe.",
            }
        )
    )
    obs = env.observe(ATTACKER)
    assert obs["last_message"] == "She is at Northwind, I believe."
    assert secret not in json.dumps(obs)
    assert "attacker_trust_in_us" not in obs["prompt"].split("Conversation so far")[-1]
    assert json.loads(obs["scenario"])["prior"] == {"company": None, "division": None, "team": None}
    # the ground truth never reaches the attacker's observation
    assert "ground_truth" not in json.dumps(obs)


def test_observation_fields_and_waiting_agent() -> None:
    env = make_env()
    env.reset(options={"scenario": "fixture-a0"})
    acting, waiting = env.observe(ATTACKER), env.observe(DEFENDER)
    for obs in (acting, waiting):
        assert env.observation_space(ATTACKER).contains(obs)
    assert acting["role"] == 0 and waiting["role"] == 1
    assert acting["turn"] == 1 and acting["retry"] == 0 and acting["side_question"] == 0
    assert acting["message"].startswith("Your briefing") and waiting["message"] == ""
    assert acting["prompt"].startswith(acting["system"])
    env.step(AdoptingAttacker()(acting))
    second = env.observe(DEFENDER)
    assert second["message"].startswith("Private information")
    assert "Which team is Dana in?" in second["message"]
    env.step(refusing_defender(second))
    again = env.observe(ATTACKER)
    assert again["turn"] == 2
    # a later message holds only what is new, not the briefing again
    assert "Your briefing" not in again["message"]
    assert "Sorry, I cannot talk about that." in again["message"]


# ---- retries and fallbacks ---------------------------------------------------------------------


def test_invalid_answers_are_reasked_then_fall_back() -> None:
    env = make_env(max_retries=2)
    env.reset(options={"scenario": "fixture-a0"})
    env.step(AdoptingAttacker()(env.observe(ATTACKER)))
    env.step("not json")
    obs = env.observe(DEFENDER)
    assert env.agent_selection == DEFENDER
    assert obs["retry"] == 1 and "no JSON object found" in obs["message"]
    assert "no JSON object found" in obs["prompt"]
    assert env.infos[DEFENDER]["last_parse"]["valid"] is False
    assert env.infos[DEFENDER]["retries"] == 1
    env.step('{"reply": 3}')
    assert env.observe(DEFENDER)["retry"] == 2
    env.step("{}")  # third failure with max_retries=2 -> fallback
    assert env.agent_selection == ATTACKER
    assert env.observe(ATTACKER)["last_message"] == DEFENDER_FALLBACK_REPLY
    info = env.infos[DEFENDER]
    assert (info["retries"], info["fallbacks"]) == (2, 1)
    env.step("")  # attacker fails three times too
    env.step("[]")
    env.step("{'trust_score': 9}")
    assert env.infos[ATTACKER]["fallbacks"] == 1 and env.infos[ATTACKER]["retries"] == 2
    assert env.agent_selection == DEFENDER
    assert env._game.attacker_moves[-1].signal == SIGNAL_QUERY
    assert env._game.attacker_moves[-1].belief == (None, None, None)


def test_format_failures_and_first_try_validity() -> None:
    env = make_env(max_attacker_turns=2)
    answers = iter(["oops", refusing_defender({}), refusing_defender({})])
    play(env, AdoptingAttacker(), lambda obs: next(answers), options={"scenario": "fixture-a0"})
    summary = env.summary()
    assert summary["format_failures"] == 1
    assert summary["defender_turns_valid"] is False
    assert summary["outcome"] == "baited"


def test_non_string_action_raises() -> None:
    env = make_env()
    env.reset()
    with pytest.raises(TypeError, match="must be a str"):
        env.step({"trust_score": 5})


# ---- options, seeding -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"split": "dev"}, "split"),
        ({"prior_level": 3}, "prior_level"),
        ({"prior_level": True}, "prior_level"),
        ({"attacker": "sneaky"}, "attacker"),
        ({"prompt_variant": "nope"}, "prompt_variant"),
        ({"reveal_prior": "yes"}, "reveal_prior"),
        ({"scenario": "no-such-id"}, "unknown scenario id"),
        ({"scenario": 42}, "scenario"),
        ({"scenario": {"scenario_id": "x", "hierarchy": ["a"]}}, "option 'scenario'"),
        ({"scenario": "fixture-a0", "prior_level": 2}, "conflicts"),
    ],
)
def test_bad_options_raise_clear_errors(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_env().reset(options=options)


def test_unknown_option_warns() -> None:
    with pytest.warns(UserWarning, match="unknown reset option"):
        make_env().reset(options={"scenaro": "fixture-a0"})


def test_bad_config_raises() -> None:
    with pytest.raises(ValueError, match="split"):
        raw_env(split="dev")
    with pytest.raises(ValueError, match="max_attacker_turns"):
        raw_env(max_attacker_turns=0)
    with pytest.raises(ValueError, match="scenarios"):
        raw_env(scenarios=[])


def test_scenario_options_dict_and_object() -> None:
    env = make_env()
    scenario = fixture_scenarios()[4]
    env.reset(options={"scenario": scenario.to_dict()})
    assert env.observe(DEFENDER)["scenario"] == make_env_view(scenario)
    env.reset(options={"scenario": scenario})
    assert env._scenario is scenario


def test_scenario_option_accepts_published_formats(shared_data) -> None:
    raw = json.loads((shared_data / "tomsb" / "raw_example_0.json").read_text())
    env = make_env()
    env.reset(options={"scenario": raw})
    view = json.loads(env.observe(DEFENDER)["scenario"])
    assert view["ground_truth"] == raw["sensitive_fact"]["ground_truth"]
    assert env._scenario.scenario_id == raw["scenario_id"]
    transformed = json.loads((shared_data / "tomsb" / "transformed_examples.json").read_text())
    first = transformed[0] if isinstance(transformed, list) else next(iter(transformed.values()))
    env.reset(options={"scenario": first})
    assert env.observation_space(DEFENDER).contains(env.observe(DEFENDER))


def make_env_view(scenario: Scenario) -> str:
    env = make_env(scenarios=[scenario])
    env.reset()
    return env.observe(DEFENDER)["scenario"]


def test_seed_picks_scenario_deterministically_and_filters() -> None:
    env = make_env()
    picks = []
    for seed in range(30):
        env.reset(seed=seed)
        picks.append(env._scenario.scenario_id)
    again = []
    for seed in range(30):
        env.reset(seed=seed)
        again.append(env._scenario.scenario_id)
    assert picks == again
    assert len(set(picks)) > 3  # the seed actually varies the scenario
    for seed in range(10):
        env.reset(seed=seed, options={"prior_level": 2})
        assert env._scenario.prior_level == 2


def test_attacker_variant_and_prompt_variant_options() -> None:
    env = make_env()
    systems = set()
    for variant in DEFENDER_PROMPT_VARIANTS:
        env.reset(options={"prompt_variant": variant, "attacker": "bluffing"})
        env.step(AdoptingAttacker()(env.observe(ATTACKER)))
        # Every variant reads differently: its system prompt or its briefing (the decoy layouts).
        observation = env.observe(DEFENDER)
        systems.add((observation["system"], observation["message"]))
    assert len(systems) == len(DEFENDER_PROMPT_VARIANTS)
    env = play(
        make_env(max_attacker_turns=1),
        AdoptingAttacker(),
        refusing_defender,
        options={"attacker": "cross_examiner"},
    )
    assert env.summary()["attacker_variant"] == "cross_examiner"


# ---- rendering, pickling, speed ----------------------------------------------------------------


def test_render_ansi_shows_dialogue() -> None:
    env = play(
        make_env(render_mode="ansi"),
        AdoptingAttacker(),
        truthful_defender,
        options={"scenario": "fixture-a0"},
    )
    text = env.render()
    assert isinstance(text, str)
    assert "Which team is Dana in?" in text and "outcome: extracted" in text


def test_pickle_mid_episode_continues_identically() -> None:
    env = make_env()
    env.reset(seed=3)
    attacker = AdoptingAttacker()
    env.step(attacker(env.observe(ATTACKER)))
    clone = pickle.loads(pickle.dumps(env))
    for e in (env, clone):
        e.step(refusing_defender({}))
    assert clone.observe(ATTACKER) == env.observe(ATTACKER)
    assert clone.infos == env.infos


def test_scripted_episodes_are_fast() -> None:
    env = make_env()
    start = time.perf_counter()
    n = 100
    for seed in range(n):
        play(env, AdoptingAttacker(), refusing_defender, seed=seed)
    rate = n / (time.perf_counter() - start)
    # ~6 attacker turns per episode; hundreds per second on one core, generous bound for CI
    assert rate > 50, f"only {rate:.0f} episodes/s"


# ---- arbitrary text --------------------------------------------------------------------------

_fragments = st.sampled_from(
    [
        "",
        "{",
        "}",
        '{"trust_score": 5',
        '"belief": {"company": null}',
        "```json\n",
        "```",
        "null",
        "\x00\x1b[31m",
        "Cold Chain",
        "défenseur ✓ 日本",
        '{"reply": "hi"}',
        "<think>",
        "</think>",
    ]
)
_texts = st.one_of(
    st.text(max_size=200),
    st.lists(_fragments, max_size=12).map("".join),
    st.sampled_from(["x" * 1_000_000, "{" * 50_000, '{"a": "' * 5_000]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(_texts, min_size=1, max_size=40))
def test_arbitrary_text_never_crashes(actions: list[str]) -> None:
    env = make_env(max_retries=3, max_attacker_turns=4)
    env.reset(seed=0)
    steps = 0
    for action in actions:
        if not env.agents or env.terminations[env.agent_selection]:
            break
        agent = env.agent_selection
        before = env.infos[agent]["retries"] + env.infos[agent]["fallbacks"]
        env.step(action)
        steps += 1
        for a in env.agents:
            assert env.observation_space(a).contains(env.observe(a))
        info = env.infos[agent]
        if not info["last_parse"]["valid"]:
            assert info["last_parse"]["error"]
            assert info["retries"] + info["fallbacks"] == before + 1
    game = env._game
    assert len(game.attacker_moves) - len(game.defender_moves) in (0, 1)
    assert steps > 0


def test_fallback_estimates_earn_no_tom_credit():
    """A defender that never answers validly must not score ToM via the fallback's null estimate."""
    from tomgym.rewards.tomsb import stepwise_tom, tom_prior
    from tomgym.training.runner import GameSpec, play_games

    class Garbage:
        name = "garbage"

        def reset(self, game_id):
            pass

        def act_batch(self, turns):
            return ["no idea"] * len(turns)

        def close(self):
            pass

        def describe(self):
            return {"name": self.name}

    from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy

    record = play_games(
        "tomgym/tomsb-v0",
        [GameSpec("fb", 0, {"prior_level": 0, "split": "test"})],
        {"attacker_0": make_scripted_tomsb_policy("base"), "defender_0": Garbage()},
        env_config={"max_attacker_turns": 2, "max_retries": 0},
    )[0]
    info = record["infos"]["defender_0"]
    assert info["final_defender_estimate"] is None
    assert all(step["fallback"] for step in info["stepwise"])
    assert tom_prior(record) == 0.0 and stepwise_tom(record) == 0.0
