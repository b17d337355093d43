"""Decrypto in TextArena's own game loop, registered as `tomgym/decrypto-v0`.

`import tomgym.integrations.textarena_envs` registers the tomgym ids in TextArena's registry; the
loop below is TextArena's standard one (`make`, `reset(num_players, seed)`, `get_observation`,
`step`, `close`). Players are TextArena-style callables `observation text -> answer`; here the
team and the interceptor are tomgym policies (the word-embedding baseline by default), which read
the structured observation the env also offers (`pending_observation()`), so the example runs
offline. Swap any of them for a `textarena.agents` LLM agent: it gets the prompt text.

    python examples/textarena_decrypto.py --seed 3
    python examples/textarena_decrypto.py --seed 3 --interceptor random
"""

from __future__ import annotations

import argparse
import json

import textarena as ta
import tomgym.integrations.textarena_envs  # noqa: F401 - registers tomgym/decrypto-v0
from tomgym.agents.base import Turn
from tomgym.training.policy_specs import make_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--team", default="embedding", help="policy spec of encoder and decoder")
    parser.add_argument("--interceptor", default="embedding", help="policy spec")
    args = parser.parse_args()

    env = ta.make("tomgym/decrypto-v0")
    specs = [args.team, args.team, args.interceptor]  # player ids 0, 1, 2
    policies = [make_policy(spec, seed=args.seed) for spec in specs]
    game_id = f"textarena-{args.seed}"

    env.reset(num_players=3, seed=args.seed)
    done = False
    while not done:
        player_id, observation_text = env.get_observation()
        turn = Turn(game_id, env.players[player_id], env.pending_observation())
        action = policies[player_id].act_batch([turn])[0]
        done, _ = env.step(action=action)
    rewards, game_info = env.close()
    info = game_info[0]
    print(
        json.dumps(
            {
                "rewards": rewards,
                "outcome": info["outcome"],
                "rounds": info["tomgym_record"]["infos"]["encoder_0"].get("rounds"),
            }
        )
    )


if __name__ == "__main__":
    main()
