"""`derive_seed`: the one way tomgym turns names and numbers into a seed.

Every seed that is derived rather than given (a policy's per-game random streams, a game's env
seed from its id, a dataset row's seed) comes from `derive_seed(*parts)`, so the same parts give
the same seed in every process, on every machine and under every Python version: Python's own
`hash()` is salted per process, this is not.

Contract:
- `parts` are any values with a stable `str()`: ints, strings, and tuples or lists of those.
  They are joined with the unit separator U+001F (a character no part contains in practice, so
  `("ab", "c")` and `("a", "bc")` differ), UTF-8 encoded and hashed with BLAKE2b (8-byte digest,
  read little-endian).
- The result is an int in `[0, 2**64)`: accepted by `numpy.random.default_rng`, Gymnasium's
  `reset(seed=...)` and `torch.manual_seed`. A caller that needs a narrower range (a signed
  32-bit seed, say) reduces it with `% 2**31`.
- The order of `parts` matters; by convention it runs from the widest to the narrowest scope,
  e.g. `derive_seed(policy_seed, game_id, agent, purpose)`.
- Golden value, pinned by a test because recorded games and published numbers depend on it:
  `derive_seed(0, "game") == 14580364499385086124`.
"""

from __future__ import annotations

import hashlib

_SEPARATOR = "\x1f"
SEED_BITS = 64


def derive_seed(*parts: object) -> int:
    """A seed in `[0, 2**64)` from `parts`, identical in every process (see the module doc)."""
    text = _SEPARATOR.join(str(part) for part in parts)
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=SEED_BITS // 8).digest()
    return int.from_bytes(digest, "little")
