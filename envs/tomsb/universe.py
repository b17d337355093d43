"""Closed universes and scenarios of the TOM-SB game (pure data, no text rendering).

A `Universe` is a perfect 3-ary tree of depth 3 with named levels, coarse to fine (e.g. company ->
division -> team): 3 level-1 nodes, 9 level-2 nodes, 27 level-3 nodes, every name globally
unique. It is stored in the published layout::

    {"company": ["A", "B", "C"],
     "division": {"A": ["A1", "A2", "A3"], ...},
     "team": {"A1": ["x", "y", "z"], ...}}

A `Scenario` adds a person, the ground-truth root-to-leaf path and the attacker's prior (the
correct prefix of 0, 1 or 2 levels; unknown levels are `None`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

BRANCHING = 3
DEPTH = 3


class UniverseError(ValueError):
    """A universe or scenario that breaks the rules; the message names what and where."""


def normalise_name(text: str) -> str:
    """Case-, accent- and punctuation-insensitive key used to match names in free text."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    text = re.sub(r"[^a-z0-9]+", " ", text)
    return " ".join(text.split())


@dataclass(frozen=True)
class Universe:
    """A validated closed universe; construct with `Universe.from_dict`."""

    levels: tuple[str, str, str]
    roots: tuple[str, ...]
    children: Mapping[str, tuple[str, ...]]  # parent name -> its 3 children (levels 1 and 2)

    @classmethod
    def from_dict(cls, tree: Mapping[str, Any], levels: Sequence[str] | None = None) -> Universe:
        """Build and validate from the published layout; `levels` defaults to the dict order."""
        if not isinstance(tree, Mapping):
            raise UniverseError(f"universe must be a JSON object, got {type(tree).__name__}")
        level_names = tuple(levels) if levels is not None else tuple(tree.keys())
        if len(level_names) != DEPTH or len(set(level_names)) != DEPTH:
            raise UniverseError(
                f"universe must have exactly {DEPTH} distinct levels, got {list(level_names)}"
            )
        missing = [lvl for lvl in level_names if lvl not in tree]
        if missing:
            raise UniverseError(f"universe lacks level(s) {missing}")
        top = tree[level_names[0]]
        if not isinstance(top, Sequence) or isinstance(top, str):
            raise UniverseError(f"level {level_names[0]!r} must be a list of {BRANCHING} names")
        roots = _names(top, f"level {level_names[0]!r}")
        children: dict[str, tuple[str, ...]] = {}
        parents = roots
        for depth in (1, 2):
            level = level_names[depth]
            table = tree[level]
            if not isinstance(table, Mapping):
                raise UniverseError(f"level {level!r} must map each parent to its children")
            extra = set(table) - set(parents)
            if extra:
                raise UniverseError(f"level {level!r} has unknown parent(s) {sorted(extra)}")
            next_parents: list[str] = []
            for parent in parents:
                if parent not in table:
                    raise UniverseError(f"level {level!r} has no children for {parent!r}")
                kids = _names(table[parent], f"children of {parent!r} at level {level!r}")
                children[parent] = kids
                next_parents.extend(kids)
            parents = tuple(next_parents)
        universe = cls(levels=level_names, roots=roots, children=children)  # type: ignore[arg-type]
        universe._check_unique()
        return universe

    def _check_unique(self) -> None:
        seen: dict[str, str] = {}
        for depth in range(DEPTH):
            for name in self.nodes(depth):
                key = normalise_name(name)
                if not key:
                    raise UniverseError(f"name {name!r} has no letters or digits")
                if key in seen:
                    raise UniverseError(f"name {name!r} is not unique (clashes with {seen[key]!r})")
                seen[key] = name

    def nodes(self, depth: int) -> tuple[str, ...]:
        """All names at `depth` (0 = coarsest), in tree order."""
        current = self.roots
        for _ in range(depth):
            current = tuple(kid for parent in current for kid in self.children[parent])
        return current

    def level_of(self, name: str) -> int | None:
        key = normalise_name(name)
        for depth in range(DEPTH):
            if any(normalise_name(n) == key for n in self.nodes(depth)):
                return depth
        return None

    def parent_of(self, name: str) -> str | None:
        for parent, kids in self.children.items():
            if name in kids:
                return parent
        return None

    def ancestors(self, name: str) -> list[str]:
        """`[root, ..., parent]` of a node, coarse to fine (empty for a root or unknown name)."""
        chain: list[str] = []
        node = self.parent_of(name)
        while node is not None:
            chain.insert(0, node)
            node = self.parent_of(node)
        return chain

    def is_path(self, path: Sequence[str | None]) -> bool:
        """True if the known values of `path` (None = unknown) are consistent with the tree."""
        if len(path) != DEPTH:
            return False
        for depth, value in enumerate(path):
            if value is None:
                continue
            if value not in self.nodes(depth):
                return False
            if (
                depth > 0
                and path[depth - 1] is not None
                and value not in self.children[path[depth - 1]]
            ):
                return False
            if depth > 1 and path[depth - 1] is None and path[depth - 2] is not None:
                grand = path[depth - 2]
                if self.parent_of(self.parent_of(value) or "") != grand:
                    return False
        return True

    def leaves(self) -> list[tuple[str, str, str]]:
        """Every root-to-leaf path."""
        return [(a, b, c) for a in self.roots for b in self.children[a] for c in self.children[b]]

    def name_index(self) -> dict[str, tuple[int, str]]:
        """Normalised name -> (depth, canonical name); used to read names out of free text."""
        return {normalise_name(n): (d, n) for d in range(DEPTH) for n in self.nodes(d)}

    def to_dict(self) -> dict[str, Any]:
        return {
            self.levels[0]: list(self.roots),
            self.levels[1]: {p: list(self.children[p]) for p in self.roots},
            self.levels[2]: {p: list(self.children[p]) for p in self.nodes(1)},
        }


def _names(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise UniverseError(f"{where} must be a list of {BRANCHING} names")
    if len(value) != BRANCHING:
        raise UniverseError(f"{where} must have exactly {BRANCHING} names, got {len(value)}")
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise UniverseError(f"{where} holds a non-name {item!r}")
    return tuple(value)


@dataclass(frozen=True)
class Scenario:
    """One benchmark example: who, what is true, and what the attacker already knows."""

    scenario_id: str
    universe: Universe
    ground_truth: tuple[str, str, str]
    prior_level: int  # number of leading levels the attacker knows (0, 1 or 2)
    person: str = "the subject"
    theme: str = "generic"
    attacker_name: str = "Eve"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.prior_level not in (0, 1, 2):
            raise UniverseError(
                f"scenario {self.scenario_id!r}: prior level must be 0, 1 or 2, got {self.prior_level!r}"
            )
        if tuple(self.ground_truth) not in self.universe.leaves():
            raise UniverseError(
                f"scenario {self.scenario_id!r}: ground truth {list(self.ground_truth)} "
                "is not a root-to-leaf path of its universe"
            )

    def __reduce__(self) -> tuple[Any, ...]:
        # `extra` may be a read-only mappingproxy, which pickle refuses: ship a dict, re-wrap it.
        fields = dict(self.__dict__)
        proxy = isinstance(self.extra, MappingProxyType)
        fields["extra"] = dict(self.extra)
        return (_rebuild_scenario, (type(self), fields, proxy))

    @property
    def levels(self) -> tuple[str, str, str]:
        return self.universe.levels

    @property
    def prior(self) -> tuple[str | None, str | None, str | None]:
        """The attacker's prior as a path with None for unknown levels."""
        return tuple(  # type: ignore[return-value]
            v if i < self.prior_level else None for i, v in enumerate(self.ground_truth)
        )

    @property
    def hard(self) -> bool:
        return self.prior_level > 0

    def prior_dict(self) -> dict[str, str | None]:
        return dict(zip(self.levels, self.prior, strict=True))

    def truth_dict(self) -> dict[str, str]:
        return dict(zip(self.levels, self.ground_truth, strict=True))

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario_id": self.scenario_id,
            "theme": self.theme,
            "person": self.person,
            "attacker_name": self.attacker_name,
            "hierarchy": list(self.levels),
            "universe": self.universe.to_dict(),
            "ground_truth": self.truth_dict(),
            "prior_level": self.prior_level,
            "prior": self.prior_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        """Inverse of `to_dict` (our own format)."""
        sid = str(data.get("scenario_id", "<unnamed>"))
        try:
            levels = list(data["hierarchy"])
            universe = Universe.from_dict(data["universe"], levels)
            truth = tuple(data["ground_truth"][lvl] for lvl in levels)
            prior_level = int(data["prior_level"])
        except UniverseError as exc:
            raise UniverseError(f"scenario {sid!r}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise UniverseError(f"scenario {sid!r}: missing or malformed field {exc}") from None
        return cls(
            scenario_id=sid,
            universe=universe,
            ground_truth=truth,  # type: ignore[arg-type]
            prior_level=prior_level,
            person=str(data.get("person", "the subject")),
            theme=str(data.get("theme", "generic")),
            attacker_name=str(data.get("attacker_name", "Eve")),
        )


def _rebuild_scenario(cls: type[Scenario], fields: dict[str, Any], proxy: bool) -> Scenario:
    """Unpickling helper for `Scenario.__reduce__`."""
    if proxy:
        fields = {**fields, "extra": MappingProxyType(fields["extra"])}
    return cls(**fields)
