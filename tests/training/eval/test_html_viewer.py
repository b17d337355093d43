"""`training.eval.html_viewer`: the Decrypto rounds table (code, hints, guesses, right/wrong)."""

from __future__ import annotations

import re

from tomgym.agents.policies import make_policy
from tomgym.training.eval.html_viewer import code_text, render_html
from tomgym.training.runner import GameSpec, play_games


def test_decrypto_view_shows_each_round_code_guesses_and_which_were_right() -> None:
    policy = make_policy("random", seed=3)
    (record,) = play_games(
        "tomgym/decrypto-v0",
        [GameSpec("d0", 5)],
        {a: policy for a in ("encoder_0", "decoder_0", "interceptor_0")},
        env_config={"max_rounds": 3},
    )
    rounds = record["infos"]["encoder_0"]["rounds_detail"]
    page = render_html([record])
    table = page[page.index('<table class="rounds">') : page.index("</table>")]
    rows = re.findall(r"<tr><td>(\d+)</td>(.*?)</tr>", table)
    assert len(rows) == len(rounds) >= 1
    for (number, cells), r in zip(rows, rounds, strict=True):
        assert int(number) == r["round"]
        assert f"<td>{code_text(r['code'])}</td>" in cells
        for who in ("decoder_guess", "interceptor_guess"):
            guess = r[who]
            if guess is None:
                assert "none" in cells
                continue
            mark = "right" if guess == r["code"] else "wrong"
            assert f"{code_text(guess)} ({mark})" in cells
    assert code_text(None) == "none" and code_text([3, 1, 4]) == "3-1-4"
