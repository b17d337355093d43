"""tomgym: theory-of-mind games (Decrypto, TOM-SB) as multi-agent RL environments.

Everything is installed under this one import namespace so that a user's own top-level folders
(`agents/`, `envs/`, `scripts/`, `training/`, ...) can never shadow ours:

- `tomgym.envs`: the games as PettingZoo AEC/Parallel envs (importing it registers the ids)
- `tomgym.agents`: the `Policy` protocol and every player (scripted, embedding, LLM, human)
- `tomgym.rewards`: pure reward functions over episode records
- `tomgym.training`: the batched runner, evaluation jobs and the Dr. GRPO trainer
- `tomgym.scripts`: the `tomgym` command line

The sub-packages live in the repository's top-level folders of the same names; the build maps
them here (`[tool.setuptools.package-dir]` in pyproject.toml).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tomgym")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
