"""Policy specs per agent: `--agent AGENT=SPEC` over a game's defaults, and the policies they name.

The grammar and the single parser are `tomgym.agents.specs` (`make_policy` is re-exported here
for the callers that build one policy from a spec). Heavy backends are imported only when their
spec is used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tomgym.agents.base import Policy
from tomgym.agents.policies import make_policy
from tomgym.agents.specs import SpecError, check_role, parse_spec

__all__ = ["build_policies", "make_policy", "parse_agent_specs"]


def parse_agent_specs(
    items: Sequence[str] | None,
    defaults: Mapping[str, str],
    agents: Sequence[str],
    *,
    game: str | None = None,
) -> dict[str, str]:
    """`["encoder_0=embedding", ...]` over `defaults`, each spec in its canonical form.

    Unknown agent ids, malformed specs and (when `game` is given) specs that cannot play their
    agent raise a one-line SpecError.
    """
    specs = dict(defaults)
    for item in items or []:
        agent, sep, spec = item.partition("=")
        agent = agent.strip()
        if not sep or not spec.strip():
            raise SpecError(f"--agent expects AGENT=SPEC, got {item!r}")
        if agent not in agents:
            raise SpecError(f"unknown agent {agent!r}; this game's agents are {list(agents)}")
        specs[agent] = spec
    canonical = {agent: parse_spec(spec).to_string() for agent, spec in specs.items()}
    if game is not None:
        for agent, spec in canonical.items():
            check_role(spec, agent, game)
    return canonical


def build_policies(specs: Mapping[str, str], *, seed: int = 0) -> dict[str, Policy]:
    """One policy object per distinct spec, shared by the agents that use it (one batch per tick)."""
    built: dict[str, Policy] = {}
    for spec in specs.values():
        if spec not in built:
            built[spec] = make_policy(spec, seed=seed)
    return {agent: built[spec] for agent, spec in specs.items()}
