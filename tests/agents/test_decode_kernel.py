"""`agents.llm.decode_kernel`: the compiled decode attention equals torch's products, and a
failed build falls back to them.

The kernel must build here (`make setup` installs ninja; CI machines have a C++ compiler and
the Python headers): a build failure fails these tests rather than skipping them, unless
`TOMGYM_DECODE_KERNEL=0` turns the kernel off for the whole run.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tomgym.agents.llm import attention, decode_kernel  # noqa: E402

TOLERANCE = 1e-5

pytestmark = pytest.mark.skipif(
    not decode_kernel.enabled(), reason=f"{decode_kernel.ENV_SWITCH}=0 turns the kernel off"
)


@pytest.fixture(scope="module")
def module() -> Any:
    built = decode_kernel.kernel()
    assert built is not None, "the decode-attention kernel did not build (see the warning above)"
    return built


def _torch_path(*args: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`attention._grouped_decode` with the kernel switched off."""
    with monkeypatch.context() as patch:
        patch.setenv(decode_kernel.ENV_SWITCH, "0")
        return attention._grouped_decode(*args)


def _inputs(
    batch: int, kv_heads: int, groups: int, length: int, dim: int, capacity: int
) -> tuple[Any, Any, Any]:
    """Query (b, h, 1, d) as a transposed view, as transformers passes it; keys and values as
    the first `length` positions of longer buffers, as the engine's growing caches are."""
    generator = torch.Generator().manual_seed(batch * 1000 + length)
    keys = torch.randn(batch, kv_heads, capacity, dim, generator=generator)
    values = torch.randn(batch, kv_heads, capacity, dim, generator=generator)
    query = torch.randn(batch, 1, kv_heads * groups, dim, generator=generator).transpose(1, 2)
    return query, keys[:, :, :length], values[:, :, :length]


def _holes(batch: int, length: int) -> Any:
    """Left padding of different widths plus a hole mid-row, as a batch of cached games has."""
    keep = torch.ones(batch, 1, 1, length, dtype=torch.bool)
    for row in range(batch):
        keep[row, ..., : (row * 7) % (length // 2)] = False
    keep[0, ..., length // 3 : length // 2] = False
    return keep


@pytest.mark.parametrize(
    ("kv_heads", "groups", "dim"),
    [(3, 3, 64), (2, 4, 64), (2, 2, 16), (1, 3, 24)],
    ids=["smollm2-shape", "four-groups", "small-dim", "odd-dim"],
)
def test_kernel_equals_torch_products(
    module: Any, monkeypatch: pytest.MonkeyPatch, kv_heads: int, groups: int, dim: int
) -> None:
    batch, length = 5, 203
    query, keys, values = _inputs(batch, kv_heads, groups, length, dim, capacity=257)
    assert keys.stride(2) == dim and not keys.is_contiguous()
    for keep in (_holes(batch, length), None, _holes(1, length)):
        expected = _torch_path(query, keys, values, keep, None, monkeypatch=monkeypatch)
        got = attention._grouped_decode(query, keys, values, keep, None)
        assert got.shape == expected.shape == (batch, 1, kv_heads * groups, dim)
        assert got.is_contiguous()
        assert (got - expected).abs().max().item() < TOLERANCE


def test_kernel_runs_in_the_decode_path(module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = module.decode_attention

    class Spy:
        def decode_attention(self, *args: Any) -> Any:
            calls.append(1)
            return real(*args)

    assert decode_kernel.built()
    monkeypatch.setitem(decode_kernel._state, "module", Spy())
    query, keys, values = _inputs(2, 3, 3, 40, 64, capacity=40)
    attention._grouped_decode(query, keys, values, _holes(2, 40), 0.125)
    assert calls == [1]
    # Other dtypes and float masks keep torch's products.
    attention._grouped_decode(query.bfloat16(), keys.bfloat16(), values.bfloat16(), None, 0.125)
    attention._grouped_decode(query, keys, values, torch.zeros(2, 1, 1, 40), 0.125)
    assert calls == [1]


def test_a_fully_masked_row_gives_zeros_not_nan(module: Any) -> None:
    query, keys, values = _inputs(2, 3, 3, 30, 64, capacity=30)
    keep = torch.ones(2, 1, 1, 30, dtype=torch.bool)
    keep[1] = False
    out = decode_kernel.decode_attention(query, keys, values, keep, 0.125, module)
    assert torch.isfinite(out).all()
    assert out[1].abs().max().item() == 0.0


def test_holes_are_never_read(module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    query, keys, values = _inputs(3, 3, 3, 60, 64, capacity=80)
    keep = _holes(3, 60)
    expected = _torch_path(query, keys, values, keep, None, monkeypatch=monkeypatch)
    holes = ~keep.reshape(3, 1, 60, 1).expand_as(keys)
    keys[holes], values[holes] = float("nan"), float("nan")
    got = attention._grouped_decode(query, keys, values, keep, None)
    assert (got - expected).abs().max().item() < TOLERANCE


def test_supports_only_fp32_cpu_row_masks() -> None:
    query, keys, values = _inputs(2, 3, 3, 10, 64, capacity=10)
    row = torch.ones(2, 1, 1, 10, dtype=torch.bool)
    assert decode_kernel.supports(query, keys, values, row)
    assert decode_kernel.supports(query, keys, values, None)
    assert not decode_kernel.supports(query.half(), keys.half(), values.half(), row)
    assert not decode_kernel.supports(query, keys, values, row.float())
    assert not decode_kernel.supports(
        query, keys, values, torch.ones(2, 9, 1, 10, dtype=torch.bool)
    )
    assert not decode_kernel.supports(query, keys.transpose(-1, -2), values, row)


def test_a_failed_build_warns_once_and_keeps_torch_products(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    builds: list[int] = []

    def broken() -> Any:
        builds.append(1)
        raise RuntimeError("Ninja is required to load C++ extensions")

    monkeypatch.setattr(decode_kernel, "_state", {})
    monkeypatch.setattr(decode_kernel, "_build", broken)
    query, keys, values = _inputs(2, 3, 3, 50, 64, capacity=60)
    keep = _holes(2, 50)
    with caplog.at_level(logging.WARNING, logger=decode_kernel.__name__):
        first = attention._grouped_decode(query, keys, values, keep, None)
        second = attention._grouped_decode(query, keys, values, keep, None)
    assert builds == [1] and not decode_kernel.built()
    warnings = [r for r in caplog.records if "kernel unavailable" in r.getMessage()]
    assert len(warnings) == 1 and "Ninja is required" in warnings[0].getMessage()
    assert torch.equal(first, second)
    expected = _torch_path(query, keys, values, keep, None, monkeypatch=monkeypatch)
    assert torch.equal(first, expected)


def test_the_switch_turns_it_off_without_building(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decode_kernel, "_state", {})
    monkeypatch.setattr(decode_kernel, "_build", lambda: pytest.fail("built while switched off"))
    for value in ("0", "false", "OFF"):
        monkeypatch.setenv(decode_kernel.ENV_SWITCH, value)
        assert decode_kernel.kernel() is None


def test_build_name_changes_with_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    here = decode_kernel.build_name()
    monkeypatch.setattr(decode_kernel, "_cpu_signature", lambda: "flags : sse2")
    assert decode_kernel.build_name() != here
    assert here.startswith("tomgym_decode_attention_")


def test_a_stale_build_lock_is_removed_and_a_fresh_one_kept(tmp_path: Any) -> None:
    lock = tmp_path / "lock"
    lock.write_text("")
    assert not decode_kernel.clear_stale_lock(tmp_path, max_age=60)
    assert lock.exists()
    old = lock.stat().st_mtime - 3600
    os.utime(lock, (old, old))
    assert decode_kernel.clear_stale_lock(tmp_path, max_age=60)
    assert not lock.exists()
    assert not decode_kernel.clear_stale_lock(tmp_path, max_age=60)
