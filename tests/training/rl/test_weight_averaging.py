"""Averaging LoRA adapters: the average's weight change is exactly the weighted sum of theirs, and
the averaged adapter loads and acts like the model with the averaged weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

from tomgym.training.rl.weight_averaging import SOUP_FILE, average_adapters  # noqa: E402


def _adapter(base_dir: Path, out: Path, seed: int, alpha: int = 16, **config) -> Path:
    model = transformers.AutoModelForCausalLM.from_pretrained(base_dir)
    torch.manual_seed(seed)
    lora = peft.LoraConfig(
        r=4,
        lora_alpha=alpha,
        target_modules=config.pop("target_modules", ["q_proj", "v_proj", "down_proj"]),
        init_lora_weights=False,
        **config,
    )
    peft.get_peft_model(model, lora).save_pretrained(out)
    return out


def _merged(base_dir: Path, adapter: Path) -> dict[str, torch.Tensor]:
    model = transformers.AutoModelForCausalLM.from_pretrained(base_dir)
    merged = peft.PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    return {k: v.detach().clone() for k, v in merged.state_dict().items()}


def test_average_is_the_weighted_mean_of_weight_changes(tiny_model_dir: Path, tmp_path: Path):
    first = _adapter(tiny_model_dir, tmp_path / "a", seed=1)
    # Another LoRA scaling, and the same modules named in another order (PEFT stores a set).
    second = _adapter(
        tiny_model_dir,
        tmp_path / "b",
        seed=2,
        alpha=8,
        target_modules=["down_proj", "v_proj", "q_proj"],
    )
    base = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    merged = [_merged(tiny_model_dir, a) for a in (first, second)]

    for weights in (None, [0.25, 0.75]):
        out = tmp_path / f"soup-{weights}"
        average_adapters([first, second], tiny_model_dir, out, weights=weights)
        w = [0.5, 0.5] if weights is None else weights
        got = _merged(tiny_model_dir, out)
        changed = 0
        for key, value in base.items():
            want = value + sum(wi * (m[key] - value) for wi, m in zip(w, merged, strict=True))
            torch.testing.assert_close(got[key], want, atol=1e-6, rtol=1e-5)
            changed += not torch.equal(got[key], value)
        assert changed == 2 * 3  # q, v and down projections of both layers
        assert json.loads((out / SOUP_FILE).read_text())["weights"] == w

    # The averaged adapter is an ordinary adapter folder: a policy spec loads it, and the policy's
    # model computes what the model with the mean weights computes.
    from tomgym.agents.llm.policy import make_llm_policy

    soup = tmp_path / "soup-None"
    policy = make_llm_policy(
        f"hf:{tiny_model_dir},adapter={soup}", temperature=0.0, max_new_tokens=3, device="cpu"
    )
    assert policy.describe()["adapter"] == str(soup)
    mean_model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    mean_model.load_state_dict(_merged(tiny_model_dir, soup))
    ids = torch.tensor([[1, 5, 9, 200, 17]])
    with torch.no_grad():
        torch.testing.assert_close(
            policy.backend.model(ids).logits, mean_model(ids).logits, atol=1e-5, rtol=1e-4
        )
    policy.close()


def test_average_refuses_what_it_cannot_average_exactly(tiny_model_dir: Path, tmp_path: Path):
    first = _adapter(tiny_model_dir, tmp_path / "a", seed=1)
    with pytest.raises(ValueError, match="at least one"):
        average_adapters([], tiny_model_dir, tmp_path / "none")
    with pytest.raises(ValueError, match="one finite weight per adapter"):
        average_adapters([first], tiny_model_dir, tmp_path / "w", weights=[0.5, 0.5])
    with pytest.raises(FileNotFoundError, match="not a PEFT adapter"):
        average_adapters([first, tmp_path], tiny_model_dir, tmp_path / "x")
    other = _adapter(tiny_model_dir, tmp_path / "c", seed=3, target_modules=["q_proj"])
    with pytest.raises(ValueError, match="target_modules"):
        average_adapters([first, other], tiny_model_dir, tmp_path / "y")
    foreign = tmp_path / "d"
    _adapter(tiny_model_dir, foreign, seed=4)
    config = json.loads((foreign / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(tmp_path / "another-model")
    (foreign / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="different models"):
        average_adapters([first, foreign], tiny_model_dir, tmp_path / "z")
    (tmp_path / "another-model").mkdir()
    with pytest.raises(ValueError, match="not on the base model given"):
        average_adapters([foreign], tiny_model_dir, tmp_path / "z")

    # An existing folder: the same average is reused, anything else is never overwritten.
    out = average_adapters([first], tiny_model_dir, tmp_path / "soup")
    stamp = (out / "adapter_model.safetensors").stat().st_mtime_ns
    assert average_adapters([first], tiny_model_dir, out) == out
    assert (out / "adapter_model.safetensors").stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match="holds another average"):
        average_adapters([first], tiny_model_dir, out, weights=[2.0])
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an adapter average"):
        average_adapters([first], tiny_model_dir, tmp_path / "busy")
