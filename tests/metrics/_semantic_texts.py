"""Deterministic English-like sentences for the semantic-metric tests (no data files needed)."""

from __future__ import annotations

import random

SUBJECTS = [
    "The old man",
    "A young girl",
    "My neighbour",
    "The committee",
    "Our teacher",
    "The dog",
    "A tired nurse",
    "The small company",
    "Everyone in the village",
    "The café owner",
]
VERBS = [
    "walked to",
    "looked at",
    "painted",
    "talked about",
    "repaired",
    "visited",
    "ignored",
    "cleaned",
    "photographed",
    "sold",
]
OBJECTS = [
    "the red house",
    "a broken bicycle",
    "the river bank",
    "an expensive painting",
    "the garden",
    "the new library",
    "a wooden boat",
    "the city council",
    "the morning train",
    "a quiet street",
]
TAILS = [
    "",
    " yesterday",
    " after lunch",
    " before the storm arrived",
    " with great care",
    " for the third time this week",
    " because nobody else would do it",
    " in Zürich",
]
UNRELATED = [
    "Stock prices fell sharply on Monday.",
    "Quantum computers use qubits.",
    "Please remember to water the plants!",
    "Is this the right way to the airport?",
    "Thirty-two degrees Celsius was recorded at noon.",
    "She plays the violin beautifully.",
]


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}{rng.choice(TAILS)}."


def paraphrase(text: str, rng: random.Random) -> str:
    """A crude paraphrase: word drops, swaps, a case change or an unrelated sentence."""
    roll = rng.random()
    if roll < 0.15:
        return rng.choice(UNRELATED)
    words = text.rstrip(".").split()
    if roll < 0.45 and len(words) > 3:
        del words[rng.randrange(1, len(words))]
    elif roll < 0.7 and len(words) > 3:
        i = rng.randrange(0, len(words) - 1)
        words[i], words[i + 1] = words[i + 1], words[i]
    elif roll < 0.8:
        words = [w.upper() for w in words]
    return " ".join(words) + rng.choice([".", "!", "", " ."])


def pairs(n: int, seed: int = 0, multi_every: int = 4) -> tuple[list[str], list[list[str]]]:
    """n candidates with 1 reference each, and 2-3 references on every ``multi_every``-th item."""
    rng = random.Random(seed)
    cands: list[str] = []
    refs: list[list[str]] = []
    for i in range(n):
        ref = sentence(rng)
        cands.append(paraphrase(ref, rng))
        group = [ref]
        if multi_every and i % multi_every == 0:
            group += [paraphrase(ref, rng) for _ in range(rng.choice([1, 2]))]
        refs.append(group)
    return cands, refs
