"""Weight averaging of LoRA adapters trained from one model (a "soup" of Dr. GRPO replicates).

Replicates of one Dr. GRPO setting, each with its own training seed, share what the reward
teaches and differ in what their few sampled episodes happened to push: averaging their weight
changes is meant to keep the first and shrink the second (model soups, Wortsman et al. 2022; for
RL fine-tuned policies, WARP, Ramé et al. 2024). Measured with the bundled 135M model (README,
"Does Dr. GRPO make a better double agent?"), the average of three guided replicates moved no
held-out game: their shared part was too small to flip a greedy decision. For LoRA the average
of the weight changes `mean_i(s_i B_i A_i)` is exact as one adapter of rank `sum_i r_i`: the A
matrices stacked (each scaled by its weight and LoRA scaling), the B matrices side by side,
scaling 1 (PEFT's `add_weighted_adapter(..., combination_type="cat")`). The result loads like any
adapter (`hf:MODEL,adapter=OUT`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

ADAPTER_CONFIG = "adapter_config.json"
SOUP_FILE = "soup.json"
"""Written beside the averaged adapter: the adapters and weights it averages."""


def _adapter_config(adapter: Path) -> dict[str, object]:
    config = adapter / ADAPTER_CONFIG
    if not config.is_file():
        raise FileNotFoundError(f"{adapter} is not a PEFT adapter folder (no {ADAPTER_CONFIG})")
    return json.loads(config.read_text(encoding="utf-8"))


def _comparable(value: object) -> str:
    # A list of target modules is a set to PEFT (saved in any order): its order is not part of the
    # config. The configs are read from JSON, so a list is the only collection they hold.
    if isinstance(value, list):
        return repr(sorted(map(str, value)))
    return repr(value)


def average_adapters(
    adapters: Sequence[str | Path],
    base_model: str | Path,
    out: str | Path,
    weights: Sequence[float] | None = None,
) -> Path:
    """Write to `out` one LoRA adapter whose weight change is the `weights`-weighted sum (default:
    the mean) of those of `adapters`, all trained on `base_model`; returns `out`.

    Raises `ValueError` for no adapters, weights of another length, adapters of other base
    models (among themselves or than `base_model`), target modules or LoRA variants;
    `FileNotFoundError` for a folder that is not an adapter. An existing `out` holding the same
    soup is returned as it is; one holding another is refused (nothing is overwritten)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    paths = [Path(a) for a in adapters]
    if not paths:
        raise ValueError("average_adapters needs at least one adapter")
    weights = [1.0 / len(paths)] * len(paths) if weights is None else [float(w) for w in weights]
    if len(weights) != len(paths) or not all(math.isfinite(w) for w in weights):
        raise ValueError(f"need one finite weight per adapter, got {weights} for {len(paths)}")
    # Checked on the adapters' configs, before any model is loaded.
    configs = [_adapter_config(p) for p in paths]
    bases = {
        str(Path(b).resolve()) if b else None
        for b in (c.get("base_model_name_or_path") for c in configs)
    }
    if len(bases) > 1:
        raise ValueError(
            f"the adapters were trained on different models: {sorted(map(str, bases))}"
        )
    recorded = next(iter(bases))
    # A relative base path recorded elsewhere may not resolve from here: checked where it does.
    known = recorded is not None and Path(recorded).exists() and Path(base_model).exists()
    if known and not Path(recorded).samefile(base_model):
        raise ValueError(
            f"the adapters were trained on {recorded}, not on the base model given: {base_model}"
        )
    for field in ("target_modules", "use_rslora", "use_dora", "modules_to_save"):
        if len({_comparable(c.get(field)) for c in configs}) > 1:
            raise ValueError(f"the adapters differ in {field}: cannot average them exactly")
    out = Path(out)
    record = {"adapters": [str(p.resolve()) for p in paths], "weights": weights}
    if (out / SOUP_FILE).is_file():
        stored = json.loads((out / SOUP_FILE).read_text(encoding="utf-8"))
        if stored == record and (out / ADAPTER_CONFIG).is_file():
            return out
        raise ValueError(f"{out} holds another average ({stored}); choose another folder")
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} exists and is not an adapter average; choose another folder")

    model = AutoModelForCausalLM.from_pretrained(str(base_model), dtype=torch.float32)
    names = [f"replicate_{i}" for i in range(len(paths))]
    peft_model = PeftModel.from_pretrained(model, str(paths[0]), adapter_name=names[0])
    for name, path in zip(names[1:], paths[1:], strict=True):
        peft_model.load_adapter(str(path), adapter_name=name)
    peft_model.add_weighted_adapter(names, weights, "default", combination_type="cat")
    peft_model.set_adapter("default")
    for name in names:
        peft_model.delete_adapter(name)
    out.mkdir(parents=True, exist_ok=True)
    peft_model.save_pretrained(str(out), selected_adapters=["default"])
    (out / SOUP_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return out
