"""The vLLM window our `vllm` extra declares stays inside the one TRL's own `vllm` extra admits.

TRL's GRPOTrainer drives vLLM through internal APIs that break between vLLM releases; the
installed TRL's metadata states the window it supports, so this reads it rather than a copy.
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _our_vllm_specifier() -> SpecifierSet:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    (requirement,) = [Requirement(r) for r in extras["vllm"] if Requirement(r).name == "vllm"]
    return requirement.specifier


def _trl_vllm_specifier() -> SpecifierSet:
    try:
        requires = importlib.metadata.requires("trl") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("trl is not installed")
    for text in requires:
        requirement = Requirement(text)
        marker = requirement.marker
        if requirement.name == "vllm" and marker is not None and marker.evaluate({"extra": "vllm"}):
            return requirement.specifier
    pytest.fail("the installed TRL declares no vllm requirement in its `vllm` extra")


def _candidates(*specifiers: SpecifierSet) -> list[Version]:
    """Every boundary either side names, its neighbours, and a grid of releases around them."""
    versions = {Version(f"0.{minor}.{patch}") for minor in range(10, 60) for patch in range(4)}
    for specifier in specifiers:
        for clause in specifier:
            bound = Version(clause.version)
            major, minor, micro = (list(bound.release) + [0, 0])[:3]
            versions |= {bound, Version(f"{major}.{minor}.{micro + 1}")}
            if micro:
                versions.add(Version(f"{major}.{minor}.{micro - 1}"))
    versions |= {Version(f"{m}.0.0") for m in range(1, 4)}
    return sorted(versions)


def test_vllm_extra_is_inside_trls_supported_window() -> None:
    ours, trl = _our_vllm_specifier(), _trl_vllm_specifier()
    allowed = [v for v in _candidates(ours, trl) if ours.contains(v, prereleases=False)]
    assert allowed, f"our vllm extra {ours} admits no release at all"
    outside = [str(v) for v in allowed if not trl.contains(v, prereleases=False)]
    assert not outside, f"pyproject allows vllm {outside[:5]} that TRL's extra ({trl}) does not"


def test_candidate_grid_detects_a_wider_window() -> None:
    """The check itself can fail: a window wider than TRL's is caught."""
    trl = SpecifierSet(">=0.22.0,<=0.31.0")
    wider = SpecifierSet(">=0.22.0")
    outside = [v for v in _candidates(wider, trl) if wider.contains(v) and not trl.contains(v)]
    assert Version("0.32.0") in outside


# vLLM 0.31.0 (the newest release TRL 1.16's extra admits) requires these transformers and torch
# releases: read from its wheel metadata by `pip install --dry-run -e ".[train,vllm]"`.
VLLM_0_31_TRANSFORMERS = SpecifierSet(">=5.10.4,<5.18")
CONSTRAINTS = PYPROJECT.parent / "constraints.txt"


def _pinned(name: str) -> Version:
    for line in CONSTRAINTS.read_text().splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement and Requirement(requirement).name.lower() == name:
            (clause,) = Requirement(requirement).specifier
            return Version(clause.version)
    raise AssertionError(f"constraints.txt pins no {name}")


def test_the_tested_transformers_co_installs_with_vllm() -> None:
    """`.[train,vllm]` must resolve: CI tests a transformers that vLLM 0.31 accepts, and our
    `llm` extra admits it."""
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    (ours,) = [Requirement(r) for r in extras["llm"] if Requirement(r).name == "transformers"]
    tested = _pinned("transformers")
    assert ours.specifier.contains(tested), f"our llm extra {ours} excludes the tested {tested}"
    assert VLLM_0_31_TRANSFORMERS.contains(tested), (
        f"CI tests transformers {tested}, which vLLM 0.31 ({VLLM_0_31_TRANSFORMERS}) refuses"
    )
