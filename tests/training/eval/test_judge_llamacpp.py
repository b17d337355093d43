"""The TOM-SB judge on the served bundled model: a llama.cpp server (`make test-integration`).

Runs only with `-m integration`, with the server fixture of `tests/agents/test_integration_llamacpp.py`
(SmolLM2-135M GGUF, n_ctx 8192). A 135M model is no real judge: its answers are whatever they
are. What must hold is the pipeline: every prompt fits the served context, every episode gets an
entry whose stages hold either a parsed answer or a `judge_error`, the agreement counts add up
to the episodes, and the report shows the table.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tomgym.training.eval.judge import judge_folder
from tomgym.training.eval.report import make_report
from tomgym.training.run_folder import RunFolder

from tests.agents.test_integration_llamacpp import llamacpp_url  # noqa: F401 - fixture
from tests.training.eval.test_judge import play_run_to_judge

pytestmark = pytest.mark.integration


def test_served_model_judges_a_run_folder(llamacpp_url: str, tmp_path: Path) -> None:  # noqa: F811
    out = play_run_to_judge(tmp_path / "run", 2, env_config={"max_attacker_turns": 4})
    spec = (
        f"openai:smollm2,base_url={llamacpp_url},api_key_env=TOMGYM_LLAMACPP_KEY,"
        "max_new_tokens=96,max_retries=2,max_concurrency=4"
    )
    result = judge_folder(out, spec)
    records = RunFolder(out).records()
    assert result["judged"] == len(records) == 4
    for record in records:
        entry = record["judge"][result["judge"]]
        assert entry["judge"]["name"]
        for stage in ("extraction", "prior", "tom"):
            part = entry[stage]
            assert (part["answer"] is None) != (part["judge_error"] is None), stage
    detected = sum(r["outcome"] == "detected" for r in records)
    extraction = result["agreement"]["extraction"]
    assert extraction["n"] + extraction["judge_errors"] + extraction["excluded"] == len(records)
    assert extraction["excluded"] == detected
    tom = result["agreement"]["tom"]
    assert tom["n"] + tom["judge_errors"] == len(records)
    make_report(out)
    table = (out / "tables" / "tomsb_judge_agreement.md").read_text(encoding="utf-8")
    assert result["judge"] in table
