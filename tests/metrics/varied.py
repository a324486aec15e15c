"""A deterministic generator of varied candidate / reference sets for metric-equality tests.

Each set is ``(candidate, references, source)``. The sets cover what breaks tokenizers and
n-gram bookkeeping: punctuation glued to words, mixed casing, non-ASCII letters, CJK, emoji and
ligatures, numbers with separators, repeated words, synonyms and inflections (for METEOR's stem
and WordNet modules), 1-4 references (a ragged count), very short (0-2 words) and very long
(60-150 words) texts, identical and reversed candidates, and a few multi-line texts (rougeLsum).
"""

from __future__ import annotations

import random

# content words with inflections and WordNet synonyms, so the stem and synonym modules fire
_WORDS_TEXT = (
    "the a an of to in on at by for with from and or but not is are was were be been "
    "cat cats dog dogs car cars automobile auto big large huge small little tiny quick fast "
    "quickly rapid run runs running ran walk walked walking house home houses table tables "
    "man men woman women child children buy bought purchase purchased start begin began "
    "happy glad sad unhappy city town village street road market price prices cost costs "
    "report reported says said tell told think thought answer reply question ask asked "
    "government state nation country people person world year years day days time times"
)
WORDS = tuple(_WORDS_TEXT.split())
PUNCT = (",", ".", "!", "?", ";", ":", "'s", "n't", "(", ")", '"', "-", "—", "...", "%", "$")
UNICODE = (
    "café",
    "naïve",
    "Straße",
    "İstanbul",
    "ﬁne",
    "東京",
    "北京",
    "😀",
    "résumé",
    "Ångström",
    "ça",
    "über",
    "façade",
    "Zoë",
    "μ",
    "Σίσυφος",
    "москва",
)
NUMBERS = ("3", "42", "1,000", "3.14", "2nd", "1999", "0", "10%", "$5", "12:30", "-7", "1e5")
SYNONYMS = {
    "car": "automobile",
    "big": "large",
    "quick": "fast",
    "buy": "purchase",
    "start": "begin",
    "happy": "glad",
    "town": "city",
    "road": "street",
    "answer": "reply",
    "nation": "country",
    "small": "little",
    "house": "home",
    "said": "told",
    "cost": "price",
    "sad": "unhappy",
}
INFLECT = {
    "run": "running",
    "walk": "walked",
    "cat": "cats",
    "dog": "dogs",
    "table": "tables",
    "report": "reported",
    "ask": "asked",
    "price": "prices",
    "day": "days",
    "house": "houses",
}


def _word(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.72:
        w = rng.choice(WORDS)
    elif r < 0.82:
        w = rng.choice(PUNCT)
    elif r < 0.91:
        w = rng.choice(UNICODE)
    else:
        w = rng.choice(NUMBERS)
    c = rng.random()
    if c < 0.08:
        w = w.upper()
    elif c < 0.2:
        w = w.capitalize()
    return w


def _length(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.1:
        return rng.randint(0, 2)  # very short
    if r < 0.17:
        return rng.randint(60, 150)  # very long
    return rng.randint(3, 25)


def _sentence(rng: random.Random, n: int) -> list[str]:
    words = [_word(rng) for _ in range(n)]
    if n >= 4 and rng.random() < 0.25:  # repeated words
        k = rng.randrange(n)
        words[k : k + 1] = [words[k]] * rng.randint(2, 4)
    return words


def _perturb(rng: random.Random, words: list[str]) -> list[str]:
    out = list(words)
    for _ in range(rng.randint(0, max(1, len(out) // 3))):
        op = rng.random()
        if not out:
            out.append(_word(rng))
            continue
        k = rng.randrange(len(out))
        low = out[k].lower()
        if op < 0.2:
            del out[k]
        elif op < 0.35:
            out.insert(k, _word(rng))
        elif op < 0.5 and k + 1 < len(out):
            out[k], out[k + 1] = out[k + 1], out[k]
        elif op < 0.65 and low in SYNONYMS:
            out[k] = SYNONYMS[low]
        elif op < 0.75 and low in INFLECT:
            out[k] = INFLECT[low]
        elif op < 0.85:
            out[k] = out[k].swapcase()
        else:
            out[k] = _word(rng)
    return out


def _join(rng: random.Random, words: list[str]) -> str:
    """Join with spaces, sometimes gluing punctuation to the word before, sometimes a newline."""
    if not words:
        return ""
    parts = [words[0]]
    for w in words[1:]:
        r = rng.random()
        if w in PUNCT and r < 0.5:
            parts[-1] += w
        elif r < 0.02:
            parts.append("\n" + w)
        elif r < 0.04:
            parts.append("  " + w)
        else:
            parts.append(w)
    return " ".join(parts)


def varied_sets(n: int = 240, seed: int = 0) -> list[tuple[str, list[str], str]]:
    """``n`` sets ``(candidate, references, source)``; the same ``seed`` gives the same sets."""
    rng = random.Random(seed)
    out: list[tuple[str, list[str], str]] = []
    for i in range(n):
        src = _sentence(rng, _length(rng))
        refs = [_perturb(rng, src) for _ in range(rng.randint(1, 4))]
        kind = i % 10
        if kind == 0:
            cand = list(refs[0])  # identical to a reference
        elif kind == 1:
            cand = list(reversed(refs[-1]))
        elif kind == 2:
            cand = _sentence(rng, _length(rng))  # unrelated
        elif kind == 3:
            cand = list(src)  # a copy of the source
        else:
            cand = _perturb(rng, rng.choice(refs))
        ref_texts = [_join(rng, r) for r in refs]
        cand_text = _join(rng, cand)
        if kind == 0:
            cand_text = ref_texts[0]
        out.append((cand_text, ref_texts, _join(rng, src)))
    # fixed edge cases at the end: empty candidate, empty reference, one-word texts
    out.append(("", ["a cat is on the table"], "a cat is on the table"))
    out.append(("the cat", ["", "the cat sat"], "the cat"))
    out.append(("cat", ["cat"], "cat"))
    out.append(("Cat!", ["cat ."], "cat"))
    return out


def unzip(
    sets: list[tuple[str, list[str], str]],
) -> tuple[list[str], list[list[str]], list[str]]:
    return [s[0] for s in sets], [s[1] for s in sets], [s[2] for s in sets]
