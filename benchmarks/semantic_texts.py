"""Generated paraphrase data for the semantic benchmarks: references are template sentences
(10-25 words); each system's candidate is a noisy paraphrase of the reference (word drops, swaps,
substitutions, now and then an unrelated sentence); every fourth item has a second reference."""

from __future__ import annotations

import random

System = tuple[str, list[str], list[list[str]]]

NOUNS = [
    "report",
    "market",
    "village",
    "river",
    "council",
    "teacher",
    "engine",
    "garden",
    "painting",
    "station",
    "letter",
    "court",
    "company",
    "doctor",
    "storm",
    "bridge",
    "museum",
    "student",
    "farmer",
    "budget",
    "window",
    "computer",
    "island",
    "army",
    "song",
    "festival",
    "hospital",
    "contract",
    "train",
    "kitchen",
    "mountain",
]
ADJ = [
    "old",
    "new",
    "small",
    "large",
    "quiet",
    "busy",
    "famous",
    "local",
    "broken",
    "expensive",
    "early",
    "late",
    "red",
    "green",
]
VERBS = [
    "described",
    "visited",
    "repaired",
    "announced",
    "rejected",
    "painted",
    "opened",
    "closed",
    "studied",
    "sold",
    "protected",
    "criticised",
    "celebrated",
    "replaced",
    "discovered",
]
TAILS = [
    "after a long meeting",
    "before the end of the year",
    "despite strong objections from the public",
    "with the help of several volunteers",
    "for the first time in a decade",
    "because nobody else was willing to do it",
    "on a cold morning in early spring",
    "while the rest of the town was asleep",
]
SUBST = {
    "old": "ancient",
    "new": "recent",
    "small": "little",
    "large": "big",
    "quiet": "calm",
    "busy": "crowded",
    "famous": "well-known",
    "broken": "damaged",
    "repaired": "fixed",
    "announced": "declared",
    "rejected": "refused",
    "studied": "examined",
    "sold": "traded",
}


def sentence(rng: random.Random) -> str:
    parts = [
        f"The {rng.choice(ADJ)} {rng.choice(NOUNS)}",
        rng.choice(VERBS),
        f"the {rng.choice(ADJ)} {rng.choice(NOUNS)}",
        rng.choice(TAILS),
    ]
    if rng.random() < 0.5:
        parts.append(f"and the {rng.choice(NOUNS)} {rng.choice(VERBS)} it {rng.choice(TAILS)}")
    return " ".join(parts) + "."


def paraphrase(ref: str, rng: random.Random, unrelated: list[str]) -> str:
    if rng.random() < 0.05:
        return rng.choice(unrelated)
    words = ref.rstrip(".").split()
    for _ in range(rng.randint(1, 4)):
        roll = rng.random()
        i = rng.randrange(len(words))
        if roll < 0.3 and len(words) > 4:
            del words[i]
        elif roll < 0.6 and i + 1 < len(words):
            words[i], words[i + 1] = words[i + 1], words[i]
        else:
            words[i] = SUBST.get(words[i], rng.choice(NOUNS + ADJ))
    return " ".join(words) + "."


def generated(n_systems: int, n_items: int, seed: int = 0) -> list[System]:
    rng = random.Random(seed)
    refs: list[list[str]] = []
    for i in range(n_items):
        first = sentence(rng)
        refs.append([first, paraphrase(first, rng, [first])] if i % 4 == 0 else [first])
    pool = [sentence(rng) for _ in range(200)]
    systems = []
    for s in range(n_systems):
        srng = random.Random(seed * 1000 + s + 1)
        systems.append((f"sys{s}", [paraphrase(r[0], srng, pool) for r in refs], refs))
    return systems
