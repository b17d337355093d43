"""Property tests: arbitrary text as actions never crashes Decrypto and keeps its state valid."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tomgym.envs import decrypto_v0

ANSWERS = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x1F), max_size=50),
    st.sampled_from(
        [
            "",
            "{",
            "ANSWER: {",
            'ANSWER: {"hints": [1, 2]}',
            'ANSWER: {"guess": "1-1-1"}',
            "ANSWER: [3, 1, 4]",
            "\u202e\u0000",
            'ANSWER: {"keywords": [null, null, null, null]}',
            "x" * 200_000,
            "[" * 5000,
            'ü漢字 ANSWER: {"hints": ["ü", "漢", "字"]}',
        ]
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers=st.lists(ANSWERS, min_size=1, max_size=60), seed=st.integers(0, 10_000))
def test_arbitrary_text_never_crashes(answers, seed):
    env = decrypto_v0.raw_env(tom=["perspective_taking", "false_belief"], max_retries=3)
    env.reset(seed=seed)
    steps = 0
    for answer in answers:
        if all(env.terminations.values()):
            break
        agent = env.agent_selection
        space = env.observation_space(agent)
        assert space.contains(env.observe(agent))
        env.step(answer)
        steps += 1
    total = sum(env.match.logs[a].answers for a in env.possible_agents)
    assert total == steps
    for agent in env.possible_agents:
        log = env.match.logs[agent]
        assert log.retries >= 0 and 0 <= log.fallbacks <= log.answers
    game = env.match.game
    assert game.miscommunications <= len(game.history) and game.interceptions <= len(game.history)
