"""Universe and Scenario validation: valid trees pass, every broken tree fails with one clear line."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tomgym.envs.tomsb.universe import Scenario, Universe, UniverseError, normalise_name


def make_tree() -> dict[str, Any]:
    roots = ["Acme", "Borealis", "Cinder"]
    mids = {r: [f"{r} {s}" for s in ("North", "South", "East")] for r in roots}
    leaves = {m: [f"{m} Team {i}" for i in (1, 2, 3)] for r in roots for m in mids[r]}
    return {"company": roots, "division": mids, "team": leaves}


def test_valid_tree_has_39_unique_names_and_27_leaves() -> None:
    universe = Universe.from_dict(make_tree())
    assert universe.levels == ("company", "division", "team")
    assert [len(universe.nodes(d)) for d in range(3)] == [3, 9, 27]
    assert len(universe.leaves()) == 27
    names = [n for d in range(3) for n in universe.nodes(d)]
    assert len({normalise_name(n) for n in names}) == 39
    assert Universe.from_dict(universe.to_dict()) == universe


def test_paths_and_levels() -> None:
    universe = Universe.from_dict(make_tree())
    assert universe.is_path(("Acme", "Acme North", "Acme North Team 1"))
    assert universe.is_path(("Acme", None, None))
    assert universe.is_path(("Acme", None, "Acme South Team 2"))
    assert not universe.is_path(("Acme", "Borealis North", None))
    assert not universe.is_path(("Acme", None, "Cinder East Team 3"))
    assert not universe.is_path(("Acme", "Acme North"))
    assert universe.level_of("acme north team 1") == 2
    assert universe.level_of("Nowhere") is None
    assert universe.parent_of("Acme North") == "Acme"


def _break(tree: dict[str, Any], how: str) -> dict[str, Any]:
    tree = copy.deepcopy(tree)
    if how == "two_roots":
        tree["company"] = tree["company"][:2]
    elif how == "four_children":
        tree["division"]["Acme"].append("Acme West")
    elif how == "two_leaves":
        tree["team"]["Borealis South"].pop()
    elif how == "duplicate_leaf":
        tree["team"]["Cinder East"][0] = "Acme North Team 1"
    elif how == "duplicate_case":
        tree["team"]["Cinder East"][0] = "ACME  north team-1"
    elif how == "leaf_equals_root":
        tree["team"]["Cinder East"][0] = "Borealis"
    elif how == "unknown_parent":
        tree["team"]["Nowhere"] = ["x", "y", "z"]
    elif how == "missing_parent":
        del tree["team"]["Acme South"]
    elif how == "missing_level":
        del tree["team"]
    elif how == "string_children":
        tree["division"]["Acme"] = "Acme North"
    elif how == "empty_name":
        tree["team"]["Acme North"][1] = "  "
    elif how == "number_name":
        tree["team"]["Acme North"][1] = 7
    elif how == "level_not_mapping":
        tree["division"] = [1, 2, 3]
    elif how == "extra_depth":
        tree["squad"] = {}
    return tree


BREAKAGES = {
    "two_roots": "exactly 3",
    "four_children": "exactly 3",
    "two_leaves": "exactly 3",
    "duplicate_leaf": "not unique",
    "duplicate_case": "not unique",
    "leaf_equals_root": "not unique",
    "unknown_parent": "unknown parent",
    "missing_parent": "no children",
    "missing_level": "exactly 3 distinct levels",
    "string_children": "list of 3",
    "empty_name": "non-name",
    "number_name": "non-name",
    "level_not_mapping": "map each parent",
    "extra_depth": "exactly 3 distinct levels",
}


@pytest.mark.parametrize("how", sorted(BREAKAGES))
def test_broken_trees_fail_with_one_clear_line(how: str) -> None:
    with pytest.raises(UniverseError) as info:
        Universe.from_dict(_break(make_tree(), how))
    message = str(info.value)
    assert BREAKAGES[how] in message
    assert "\n" not in message


def test_not_a_mapping() -> None:
    with pytest.raises(UniverseError, match="must be a JSON object"):
        Universe.from_dict([1, 2, 3])  # type: ignore[arg-type]


def test_scenario_rejects_non_path_truth_and_bad_prior() -> None:
    universe = Universe.from_dict(make_tree())
    with pytest.raises(UniverseError, match="not a root-to-leaf path"):
        Scenario("s1", universe, ("Acme", "Borealis North", "Borealis North Team 1"), 0)
    with pytest.raises(UniverseError, match="prior level must be 0, 1 or 2"):
        Scenario("s1", universe, ("Acme", "Acme North", "Acme North Team 1"), 3)
    scenario = Scenario("s1", universe, ("Acme", "Acme North", "Acme North Team 1"), 1)
    assert scenario.prior == ("Acme", None, None)
    assert scenario.hard
    assert Scenario.from_dict(scenario.to_dict()) == scenario


@st.composite
def mutations(draw: st.DrawFn) -> dict[str, Any]:
    """A valid tree with one structural defect: a resized sibling list or a duplicated name."""
    tree = make_tree()
    universe = Universe.from_dict(tree)
    kind = draw(st.sampled_from(["resize", "duplicate"]))
    if kind == "resize":
        parent = draw(st.sampled_from([None, *universe.nodes(0), *universe.nodes(1)]))
        size = draw(st.sampled_from([0, 1, 2, 4, 5]))
        if parent is None:
            tree["company"] = (tree["company"] * 2)[:size]
        else:
            level = "division" if parent in universe.roots else "team"
            tree[level][parent] = [f"{parent} extra {i}" for i in range(size)]
    else:
        names = [n for d in range(3) for n in universe.nodes(d)]
        source = draw(st.sampled_from(names))
        target_parent = draw(st.sampled_from(universe.nodes(1)))
        slot = draw(st.integers(0, 2))
        if tree["team"][target_parent][slot] == source:
            slot = (slot + 1) % 3
        variant = draw(st.sampled_from([source, source.upper(), f" {source}!"]))
        tree["team"][target_parent][slot] = variant
    return tree


@settings(max_examples=60, deadline=None)
@given(mutations())
def test_any_single_defect_is_rejected(tree: dict[str, Any]) -> None:
    with pytest.raises(UniverseError) as info:
        Universe.from_dict(tree)
    assert "\n" not in str(info.value)


def test_ancestors_run_root_first() -> None:
    from tests.tomsb.test_env import fixture_scenarios

    scenario = fixture_scenarios()[0]
    root, middle, leaf = scenario.ground_truth
    universe = scenario.universe
    assert universe.ancestors(leaf) == [root, middle]
    assert universe.ancestors(middle) == [root]
    assert universe.ancestors(root) == [] == universe.ancestors("no such name")
