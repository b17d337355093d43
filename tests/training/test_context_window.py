"""A conversation that would outgrow its model's context window ends its game as truncated, with
the reason recorded and counted in summaries and tables; the other games play on untouched."""

from __future__ import annotations

import pytest
from tomgym.agents.base import BasePolicy
from tomgym.rewards.episode import CONTEXT_WINDOW
from tomgym.training.eval import metrics, tables
from tomgym.training.policy_specs import make_policy
from tomgym.training.runner import GameSpec, play_games

kv_cache = pytest.importorskip("tomgym.agents.llm.kv_cache")

OPTIONS = {"attacker": "base", "split": "test"}


class WindowedPolicy(BasePolicy):
    """The scripted defender, except that a game's conversation "outgrows the window" after
    `limit` defender turns: the whole batch is refused like `KVCachedGenerator.check_context`."""

    name = "windowed"

    def __init__(self, limit: dict[str, int], *, name_rows: bool = True) -> None:
        self.inner = make_policy("scripted:tom_heuristic")
        self.limit = limit
        self.name_rows = name_rows
        self.turns: dict[str, int] = {}
        self.batches: list[list[str]] = []

    def reset(self, game_id: str) -> None:
        self.inner.reset(game_id)
        self.turns[game_id] = 0

    def act_batch(self, turns):
        self.batches.append([t.game_id for t in turns])
        over = [
            (i, (t.game_id, t.agent) if self.name_rows else None, 9000)
            for i, t in enumerate(turns)
            if self.turns[t.game_id] >= self.limit.get(t.game_id, 10**6)
        ]
        if over:
            raise kv_cache.ContextWindowExceeded(over, max_new_tokens=256, context_window=8192)
        for turn in turns:
            self.turns[turn.game_id] += 1
        return self.inner.act_batch(turns)


def _play(defender: WindowedPolicy, n: int = 4):
    games = [GameSpec(f"g{i}", i, OPTIONS) for i in range(n)]
    policies = {"attacker_0": make_policy("scripted:base"), "defender_0": defender}
    return {r["game_id"]: r for r in play_games("tomgym/tomsb-v0", games, policies, concurrency=n)}


@pytest.mark.parametrize("name_rows", [True, False])
def test_outgrown_conversation_ends_its_game_as_truncated(name_rows: bool) -> None:
    reference = _play(WindowedPolicy({}))
    records = _play(WindowedPolicy({"g1": 1, "g3": 0}, name_rows=name_rows))
    assert set(records) == set(reference)
    for gid in ("g1", "g3"):
        record = records[gid]
        assert record["truncation_reason"] == CONTEXT_WINDOW and record["outcome"] is None
        defender_turns = [t for t in record["turns"] if t["agent"] == "defender_0"]
        assert len(defender_turns) == {"g1": 1, "g3": 0}[gid]
    for gid in ("g0", "g2"):  # the other games never noticed
        assert records[gid] == reference[gid]
        assert "truncation_reason" not in records[gid]


def test_unnamed_refusal_is_isolated_turn_by_turn() -> None:
    defender = WindowedPolicy({"g2": 0}, name_rows=False)
    records = _play(defender)
    assert records["g2"]["truncation_reason"] == CONTEXT_WINDOW
    # the refused batch of four was retried one turn at a time to find the offender
    assert defender.batches[1:5] == [["g0"], ["g1"], ["g2"], ["g3"]]


def test_truncations_are_counted_in_summaries_and_tables() -> None:
    records = list(_play(WindowedPolicy({"g0": 1, "g1": 1, "g2": 2})).values())
    summary = metrics.summarize(records, ["attacker"])
    overall = summary["overall"]
    assert summary["n"] == 4 and overall["n"] == 1 and overall["truncated"] == 3
    assert overall["truncated_rate"] == 0.75
    assert overall["truncation_reasons"] == {CONTEXT_WINDOW: 3}
    assert summary["groups"]["attacker"]["base"]["truncated_rate"] == 0.75
    made = tables.make_tables(records)
    assert any(c.metric == "truncated_rate" for c in made[0].columns)
    assert "truncated %" in made[0].markdown()
    clean = list(_play(WindowedPolicy({})).values())
    assert metrics.summarize(clean)["overall"]["truncated_rate"] == 0.0
    assert all(c.metric != "truncated_rate" for c in tables.make_tables(clean)[0].columns)


def test_validation_table_counts_truncated_games() -> None:
    from tomgym.training.eval.validation import ScoredGame, format_table, validation_table

    games = [
        ScoredGame("base", 1.0),
        ScoredGame("base", 0.0, truncation_reason=CONTEXT_WINDOW),
        ScoredGame("bluffing", None),
    ]
    result = validation_table(games)
    assert result["truncated"] == {CONTEXT_WINDOW: 1} and result["games"] == 3
    assert format_table(result).splitlines()[-1] == "truncated: 1 of 3 games (1 context_window)"
    assert validation_table(games[:1])["truncated"] == {}
    assert "truncated" not in format_table(validation_table(games[:1]))
