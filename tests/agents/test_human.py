"""Human terminal play: pure answer builders, the policy in-process, and the real CLI in a pty."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pettingzoo
import pytest
import tomgym.envs  # noqa: F401 - registers the env ids
from tomgym.agents.base import Turn
from tomgym.agents.human import (
    CLEAR_SCREEN,
    HumanPolicy,
    HumanQuit,
    decrypto_guess_answer,
    decrypto_hints_answer,
    decrypto_keywords_answer,
    level_options,
    read_guess,
    read_level_name,
    read_signal,
    read_trust,
    readable,
    scenario_universe,
    tomsb_attacker_answer,
    tomsb_defender_answer,
)
from tomgym.envs.decrypto.parsing import parse_guess, parse_hints, parse_keywords
from tomgym.envs.tomsb.parsing import parse_attacker, parse_defender

REPO_ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- builders


def test_decrypto_builders_round_trip_through_env_parsers() -> None:
    hints = decrypto_hints_answer(["  sun ", "salt  water", "crème brûlée"])
    assert hints.startswith("ANSWER: ")
    assert parse_hints(hints) == (("sun", "salt water", "crème brûlée"), None)
    for typed in ("3-1-4", "3 1 4", "314", "3,1,4"):
        assert parse_guess(decrypto_guess_answer(typed)) == ((3, 1, 4), None)
    assert decrypto_guess_answer([2, 4, 1]) == 'ANSWER: {"guess": "2-4-1"}'
    words = decrypto_keywords_answer(["a", "b", "c", "d"])
    assert parse_keywords(words) == (("a", "b", "c", "d"), None)


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        (lambda: decrypto_hints_answer(["a", "", "c"]), "non-empty"),
        (lambda: decrypto_hints_answer(["a", "b"]), "exactly 3"),
        (lambda: decrypto_hints_answer(["a", "b", "x" * 61]), "at most"),
        (lambda: decrypto_keywords_answer(["a", "b", "c"]), "exactly 4"),
        (lambda: read_guess("1-1-2"), "distinct"),
        (lambda: read_guess("1-2-5"), "digits 1, 2, 3 and 4"),
        (lambda: read_guess(""), "three distinct digits"),
        (lambda: read_guess("hello"), "no guess"),
    ],
)
def test_decrypto_builders_reject_bad_input_with_the_reason(call, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        call()


@pytest.fixture(scope="module")
def tomsb_view() -> dict:
    env = pettingzoo.make("aec", "tomgym/tomsb-v0")
    env.reset(seed=3)
    return json.loads(env.observe("attacker_0")["scenario"])


def test_tomsb_builders_are_accepted_by_the_env_parsers(tomsb_view: dict) -> None:
    universe = scenario_universe(tomsb_view)
    assert universe is not None
    path = dict(zip(universe.levels, universe.leaves()[4], strict=True))
    unknown = dict.fromkeys(universe.levels)
    defender = tomsb_defender_answer(
        " Hi! ", {**unknown, universe.levels[0]: path[universe.levels[0]]}, 3, universe=universe
    )
    move, error, parsed = parse_defender(defender, universe)
    assert error is None and move is not None
    assert parsed["reply"] == "Hi!" and parsed["attacker_trust_in_us"] == 3
    attacker = tomsb_attacker_answer(0, path, "defender detected", "You lied.", universe=universe)
    move, error, parsed = parse_attacker(attacker, universe)
    assert error is None and parsed["belief"] == path and parsed["signal"] == "defender detected"


def test_tomsb_builders_reject_what_the_env_would(tomsb_view: dict) -> None:
    universe = scenario_universe(tomsb_view)
    unknown = dict.fromkeys(universe.levels)
    with pytest.raises(ValueError, match="only allowed at trust_score 0"):
        tomsb_attacker_answer(3, unknown, "defender detected", "x", universe=universe)
    with pytest.raises(ValueError, match="reply must not be empty"):
        tomsb_defender_answer("  ", unknown, 3, universe=universe)
    with pytest.raises(ValueError, match="between 0 and 5"):
        tomsb_defender_answer("hi", unknown, 7, universe=universe)


def test_field_readers(tomsb_view: dict) -> None:
    universe = scenario_universe(tomsb_view)
    root = universe.roots[1]
    middle = universe.children[root][2]
    assert level_options(universe, 0, []) == universe.roots
    assert level_options(universe, 1, [root]) == universe.children[root]
    # a chosen grandparent narrows the last level even when the middle level is unknown
    assert len(level_options(universe, 2, [root, None])) == 9
    assert len(level_options(universe, 2, [None, None])) == 27
    options = level_options(universe, 1, [root])
    assert read_level_name("3", universe, 1, options, None) == middle
    assert read_level_name(middle.upper(), universe, 1, options, None) == middle
    assert read_level_name("", universe, 1, options, middle) == middle
    assert read_level_name("-", universe, 1, options, middle) is None
    with pytest.raises(ValueError, match="from 1 to 3"):
        read_level_name("4", universe, 1, options, None)
    with pytest.raises(ValueError, match=f"is a {universe.levels[0]}, not a {universe.levels[1]}"):
        read_level_name(root, universe, 1, options, None)
    with pytest.raises(ValueError, match="not a"):
        read_level_name("Atlantis", universe, 1, options, None)
    assert read_trust("", 4) == 4 and read_trust(" 0 ") == 0
    with pytest.raises(ValueError, match="0 to 5"):
        read_trust("6")
    assert read_signal("") == "query again"
    assert read_signal("S") == "attack successful" and read_signal("3") == "defender detected"
    with pytest.raises(ValueError, match="signal"):
        read_signal("maybe")


def test_readable_draws_the_scenario_as_a_tree(tomsb_view: dict) -> None:
    text = (
        "Briefing:\n" + json.dumps(tomsb_view, separators=(",", ":")) + "\nOpen the conversation."
    )
    shown = readable(text)
    assert '{"hierarchy"' not in shown
    assert shown.startswith("Briefing:\nUniverse (") and shown.endswith("Open the conversation.")
    for name in tomsb_view["universe"][tomsb_view["hierarchy"][0]]:
        assert f"\n  {name}\n" in shown
    assert "What you already know:" in shown
    assert readable("no json here\n{not json") == "no json here\n{not json"


# --------------------------------------------------------------------------- policy in-process


def _scripted(lines: list[str]):
    feed = iter(lines)

    def input_fn(prompt: str) -> str:
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    return input_fn


def _decrypto_turn(agent: str = "decoder_0") -> Turn:
    env = pettingzoo.make("aec", "tomgym/decrypto-v0", max_rounds=2)
    env.reset(seed=1)
    env.step('ANSWER: {"hints": ["a", "b", "c"]}')
    assert env.agent_selection == agent
    return Turn("g1", agent, env.observe(agent))


def test_policy_confirm_start_again_and_show() -> None:
    out = io.StringIO()
    policy = HumanPolicy(_scripted(["1-2-3", "n", ":show", "2-1-4", "y"]), out)
    assert policy.act_batch([_decrypto_turn()]) == ['ANSWER: {"guess": "2-1-4"}']
    text = out.getvalue()
    assert text.count("You are the Decoder") == 2  # first view + :show
    assert 'ANSWER: {"guess": "1-2-3"}' in text  # shown for confirmation, then rejected with n
    assert policy.describe()["backend"] == "human"


def test_policy_quit_and_end_of_input_raise_human_quit() -> None:
    with pytest.raises(HumanQuit):
        HumanPolicy(_scripted([":quit"]), io.StringIO()).act(_decrypto_turn())
    with pytest.raises(HumanQuit):
        HumanPolicy(_scripted(["1-2-3"]), io.StringIO()).act(_decrypto_turn())


def test_policy_without_confirm_sends_at_once() -> None:
    policy = HumanPolicy(_scripted(["4 3 2"]), io.StringIO(), confirm=False)
    assert policy.act(_decrypto_turn()) == 'ANSWER: {"guess": "4-3-2"}'


def _human_tomsb_game(
    seat: str, human: HumanPolicy, opponent: str, game: tuple[str, int], attacker_turns: int
) -> dict:
    """The record of one TOM-SB game (`game`: its id and seed, which fix the scripted
    opponent's moves) played in process: `human` in `seat`, the `opponent` spec in the other."""
    from tomgym.agents.policies import make_policy
    from tomgym.training.runner import GameSpec, play_games

    other = "defender_0" if seat == "attacker_0" else "attacker_0"
    (record,) = play_games(
        "tomgym/tomsb-v0",
        [GameSpec(*game)],
        {seat: human, other: make_policy(opponent)},
        env_config={"max_attacker_turns": attacker_turns},
    )
    return record


def test_defender_estimates_default_to_the_previous_turn(tomsb_view: dict) -> None:
    # turn 1 names a root and trust 2; turn 2 keeps both with Enter
    lines = ["Hello.", "1", "", "", "2", "", "Sure.", "", "", "", "", ""]
    policy = HumanPolicy(_scripted(lines), io.StringIO())
    record = _human_tomsb_game("defender_0", policy, "scripted:base", ("t", 5), attacker_turns=3)
    turns = [t for t in record["turns"] if t["agent"] == "defender_0"]
    assert [t["valid"] for t in turns] == [True, True]
    first, second = (t["parsed"] for t in turns)
    assert first["attacker_trust_in_us"] == 2 and second["attacker_trust_in_us"] == 2
    assert first["attacker_belief_about_target"] == second["attacker_belief_about_target"]
    assert next(iter(first["attacker_belief_about_target"].values())) is not None
    assert [first["reply"], second["reply"]] == ["Hello.", "Sure."]


def test_a_long_reply_is_asked_again_not_typed_as_raw_json() -> None:
    from tomgym.envs.tomsb.parsing import MAX_REPLY_CHARS

    long_reply = "word " * (MAX_REPLY_CHARS // 4)
    out = io.StringIO()
    policy = HumanPolicy(
        _scripted([long_reply, "Short.", "Fine."]), out, confirm=False, ask_estimates=False
    )
    record = _human_tomsb_game("defender_0", policy, "scripted:base", ("t", 5), attacker_turns=2)
    turns = [t for t in record["turns"] if t["agent"] == "defender_0"]
    assert turns and all(t["valid"] for t in turns)
    assert turns[0]["parsed"]["reply"] == "Short."
    assert f"the limit is {MAX_REPLY_CHARS}" in out.getvalue()
    assert "raw text" not in out.getvalue()


def test_attacker_plays_a_game_in_process() -> None:
    # turn 1: trust 3, keep the prior, "d" is refused at trust 3, then query again
    # turn 2: trust 0 (Enter keeps the belief), defender detected
    lines = [
        "3",
        "",
        "",
        "",
        "d",
        "q",
        "Where does she work?",
        "",
        "0",
        "",
        "",
        "",
        "d",
        "Gotcha.",
        "",
    ]
    out = io.StringIO()
    policy = HumanPolicy(_scripted(lines), out)
    record = _human_tomsb_game(
        "attacker_0", policy, "scripted:tom_heuristic", ("a", 7), attacker_turns=5
    )
    mine = [t["parsed"] for t in record["turns"] if t["agent"] == "attacker_0"]
    assert [(m["trust_score"], m["signal"], m["prompt"]) for m in mine] == [
        (3, "query again", "Where does she work?"),
        (0, "defender detected", "Gotcha."),
    ]
    assert mine[0]["belief"] == mine[1]["belief"] == record["infos"]["attacker_0"]["prior"]
    assert record["outcome"] == "detected"
    assert "only allowed at trust 0" in out.getvalue()
    assert policy.unfinished_games() == {}  # the runner forgot the finished game


# --------------------------------------------------------------------------- real CLI in a pty

pexpect = pytest.importorskip("pexpect")
TIMEOUT = 30
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _spawn(args: list[str], log: io.StringIO):
    child = pexpect.spawn(
        sys.executable,
        ["-m", "tomgym.scripts.cli", "human", *args],
        cwd=str(REPO_ROOT),
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(50, 200),
    )
    child.logfile_read = log
    return child


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "games.jsonl").read_text().splitlines() if line]


def test_cli_decoder_plays_a_whole_decrypto_game(tmp_path: Path) -> None:
    out = tmp_path / "run"
    log = io.StringIO()
    child = _spawn(
        ["decrypto", "--as", "decoder_0", "--seed", "1", "--max-rounds", "2", "--out", str(out)],
        log,
    )
    guess = r"Your guess \(three distinct digits"
    child.expect(guess)
    child.sendline("1-1-2")  # refused on entry, never reaches the env
    child.expect("3 distinct digits")
    child.expect(guess)
    child.sendline("1-2-3")
    child.expect(r"send\? \[Y/n/edit\]")
    child.sendline("edit")  # a malformed raw answer: the env must re-ask
    child.expect("Raw answer")
    child.sendline("ANSWER: I am not sure")
    child.expect(r"send\? \[Y/n/edit\]")
    child.sendline("")
    child.expect("could not be used: no guess found")
    child.expect(guess)
    child.sendline("1-2-3")
    child.expect(r"send\? \[Y/n/edit\]")
    child.sendline("y")
    child.expect("Round 1 result")
    child.expect(guess)
    child.sendline("4 3 2")
    child.expect(r"send\? \[Y/n/edit\]")
    child.sendline("")
    child.expect(r"Game over \(human-decrypto-s1-00000\)")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, log.getvalue()[-2000:]
    (record,) = _records(out)
    assert record["policies"]["decoder_0"]["backend"] == "human"
    assert record["policies"]["encoder_0"]["name"] != "human"
    mine = [t for t in record["turns"] if t["agent"] == "decoder_0"]
    assert [t["raw"] for t in mine] == [
        "ANSWER: I am not sure",
        'ANSWER: {"guess": "1-2-3"}',
        'ANSWER: {"guess": "4-3-2"}',
    ]
    assert [(t["valid"], t["retry"]) for t in mine] == [(False, 0), (True, 1), (True, 0)]
    assert record["infos"]["decoder_0"]["retries"] == 1
    assert (out / "config.yaml").exists() and (out / "summary.json").exists()


def test_cli_tomsb_defender_game_is_saved(tmp_path: Path) -> None:
    out = tmp_path / "run"
    log = io.StringIO()
    child = _spawn(
        [
            "tomsb",
            "--as",
            "defender_0",
            "--seed",
            "2",
            "--max-attacker-turns",
            "3",
            "--out",
            str(out),
        ],
        log,
    )
    for reply in ("Who is asking?", "I really could not say."):
        child.expect("Your reply to the attacker: ")
        child.sendline(reply)
        for _ in range(3):  # estimate per level: keep the default
            child.expect(r"\[[^\]]*\]: ")
            child.sendline("")
        child.expect(r"trust in you, 0-5 \[\d\]: ")
        child.sendline("4")
        child.expect(r"send\? \[Y/n/edit\]")
        child.sendline("")
    child.expect("Game over")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, log.getvalue()[-2000:]
    (record,) = _records(out)
    mine = [t for t in record["turns"] if t["agent"] == "defender_0"]
    assert [t["parsed"]["reply"] for t in mine] == ["Who is asking?", "I really could not say."]
    assert all(t["valid"] and t["parsed"]["attacker_trust_in_us"] == 4 for t in mine)
    assert record["policies"]["attacker_0"]["name"] == "base"
    # the defender's screen drew the universe as a tree, not raw JSON
    assert "The true path (secret):" in log.getvalue() and '{"hierarchy"' not in log.getvalue()


def test_cli_hot_seat_clears_between_players_and_hides_keywords(tmp_path: Path) -> None:
    out = tmp_path / "run"
    log = io.StringIO()
    child = _spawn(
        [
            "decrypto",
            "--as",
            "encoder_0",
            "--as",
            "interceptor_0",
            "--seed",
            "4",
            "--max-rounds",
            "2",
            "--out",
            str(out),
        ],
        log,
    )
    hints = iter(["lighthouse", "saxophone", "glacier", "pyramid", "velvet", "compass"])
    while True:
        index = child.expect(
            [
                r"Hint \d of 3",
                r"Your guess \(",
                r"send\? \[Y/n/edit\]",
                "Press Enter when ready",
                "Game over",
            ]
        )
        if index == 0:
            child.sendline(next(hints))
        elif index == 1:
            child.sendline("1-2-3")
        elif index in (2, 3):
            child.sendline("")
        else:
            break
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, log.getvalue()[-2000:]
    (record,) = _records(out)
    keywords = record["infos"]["encoder_0"]["keywords"]
    screen = log.getvalue()
    screens = [s.split("Game over (")[0] for s in screen.split(CLEAR_SCREEN)]
    encoder_screens = [s for s in screens if "=== Encoder (encoder_0)" in s]
    interceptor_screens = [s for s in screens if "=== Interceptor (interceptor_0)" in s]
    assert len(encoder_screens) == 2 and len(interceptor_screens) == 2  # one per round each
    # no screen ever shows both players, and only the encoder's shows the keywords
    assert not [s for s in screens if s in encoder_screens and s in interceptor_screens]
    for s in encoder_screens:
        assert all(word in s for word in keywords)
    for s in interceptor_screens:
        lowered = ANSI.sub("", s).lower()
        assert not [w for w in keywords if re.search(rf"\b{re.escape(w.lower())}\b", lowered)], s
    mine = [t for t in record["turns"] if t["agent"] in ("encoder_0", "interceptor_0")]
    assert [t["agent"] for t in mine] == ["encoder_0", "interceptor_0"] * 2
    assert json.loads(mine[0]["raw"].removeprefix("ANSWER: "))["hints"] == [
        "lighthouse",
        "saxophone",
        "glacier",
    ]


def test_cli_quit_keeps_the_answers_of_the_unfinished_game(tmp_path: Path) -> None:
    out = tmp_path / "run"
    log = io.StringIO()
    child = _spawn(["decrypto", "--as", "decoder_0", "--seed", "1", "--out", str(out)], log)
    child.expect(r"Your guess \(")
    child.sendline("2-1-3")
    child.expect(r"send\? \[Y/n/edit\]")
    child.sendline("")
    child.expect(r"Your guess \(")
    child.sendline(":quit")
    child.expect("Stopped: 0 finished game")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    assert (out / "games.jsonl").read_text() == ""  # only complete episode records go there
    (entry,) = [json.loads(line) for line in (out / "unfinished.jsonl").read_text().splitlines()]
    assert entry["finished"] is False and entry["seed"] == 1
    assert [t["raw"] for t in entry["human_turns"]] == ['ANSWER: {"guess": "2-1-3"}']


# --------------------------------------------------------------------------- argument plan


def _plan(argv: list[str]):
    from tomgym.scripts.cli import build_parser
    from tomgym.scripts.human_cmd import plan

    return plan(build_parser().parse_args(["human", *argv]))


def test_plan_defaults_and_human_roles() -> None:
    specs, env_config, options = _plan(["tomsb", "--as", "defender_0", "--max-attacker-turns", "4"])
    assert specs == {"attacker_0": "scripted:base", "defender_0": "human"}
    assert env_config == {"max_attacker_turns": 4} and options["attacker"] == "base"
    specs, _, _ = _plan(["tomsb", "--as", "attacker_0"])
    assert specs == {"attacker_0": "human", "defender_0": "scripted:tom_heuristic"}
    # --agent X=human is one more hot-seat role
    specs, env_config, options = _plan(
        [
            "decrypto",
            "--as",
            "encoder_0",
            "--agent",
            "decoder_0=human",
            "--max-rounds",
            "3",
            "--tom",
            "perspective_taking",
        ]
    )
    assert specs == {"encoder_0": "human", "decoder_0": "human", "interceptor_0": "embedding"}
    assert env_config == {"max_rounds": 3} and options == {"tom": ["perspective_taking"]}


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["decrypto", "--as", "encoder_0", "--agent", "encoder_0=random"], "played by you"),
        (["decrypto", "--as", "encoder_0", "--agent", "attacker_0=random"], "unknown agent"),
        (["decrypto", "--as", "encoder_0", "--tom", "telepathy"], "unknown --tom"),
        (["decrypto", "--as", "encoder_0", "--games", "0"], "--games"),
    ],
)
def test_plan_rejects_bad_arguments(argv: list[str], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        _plan(argv)
