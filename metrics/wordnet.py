"""Find and load WordNet for METEOR without ever downloading it.

The first complete WordNet wins, searched in: the metric's ``wordnet_dir``; ``NLTK_DATA`` and
``PARAEVAL_NLTK_DATA``; ``<repo>/.cache/nltk_data`` (``scripts/setup_wordnet.py``);
``~/.cache/paraeval/nltk_data``; ``nltk.data.path``. Missing, it raises
:class:`metrics.base.MissingResourceError` naming the setup command.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from paraeval.metrics.base import MissingResourceError

REPO = Path(__file__).resolve().parents[1]
SETUP_HINT = (
    "run `python scripts/setup_wordnet.py` (or `apt-get install wordnet-base wordnet-sense-index`, "
    "copy /usr/share/wordnet to <nltk_data>/corpora/wordnet with a lexnames file and set NLTK_DATA)"
)
# a dict folder is usable only with these; Debian's copy lacks lexnames until setup adds it
_NEEDED = ("lexnames", "index.noun", "data.noun", "index.verb", "data.verb")

# read from start to end by the reader's constructor (``index.sense`` is searched by offset)
_SEQUENTIAL = frozenset(("lexnames", "index.noun", "index.verb", "index.adj", "index.adv"))


def candidate_roots(wordnet_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Folders searched, in order (see the module docstring)."""
    import nltk.data

    env = [os.environ.get(var, "") for var in ("NLTK_DATA", "PARAEVAL_NLTK_DATA")]
    given = [wordnet_dir, *(p for value in env for p in value.split(os.pathsep))]
    roots = [Path(p).expanduser() for p in given if p]
    roots += [REPO / ".cache" / "nltk_data", Path.home() / ".cache" / "paraeval" / "nltk_data"]
    return roots + [Path(p) for p in nltk.data.path]


def _pointer(root: Path) -> Any | None:
    """A complete WordNet dict folder in ``root`` (itself, or ``corpora/wordnet``), else its
    ``corpora/wordnet.zip``; None when there is neither."""
    from nltk.data import FileSystemPathPointer, ZipFilePathPointer

    for folder in (root, root / "corpora" / "wordnet"):
        if all((folder / name).is_file() for name in _NEEDED):
            return FileSystemPathPointer(str(folder))
    archive = root / "corpora" / "wordnet.zip"
    return ZipFilePathPointer(str(archive), "wordnet/") if archive.is_file() else None


def _allow(root: Path) -> None:
    """NLTK (>= 3.9.3) refuses to read corpora outside ``nltk.data.path``; a folder found by this
    module is trusted by the user's own setting, so it joins that list."""
    import nltk.data

    resolved = str(root.resolve())
    if resolved not in nltk.data.path:
        nltk.data.path.append(resolved)


def find_wordnet(wordnet_dir: str | os.PathLike[str] | None = None) -> Any:
    """A path pointer to the first usable WordNet; MissingResourceError when there is none."""
    roots = candidate_roots(wordnet_dir)
    # an explicit setting is authoritative: do not silently fall back to another copy
    searched = roots[:1] if wordnet_dir else roots
    for root in searched:
        pointer = _pointer(root)
        if pointer is not None:
            _allow(root)
            return pointer
    where = ", ".join(str(r) for r in searched)
    raise MissingResourceError(f"WordNet 3.0 not found (searched: {where}); {SETUP_HINT}")


def load_wordnet(wordnet_dir: str | os.PathLike[str] | None = None) -> Any:
    """An NLTK ``WordNetCorpusReader`` for the first usable WordNet, reading the same data in a
    fraction of NLTK's start-up: it skips the Open Multilingual WordNet offset map (``map30``, for
    the multilingual functions only) and reads the files NLTK scans line by line (``lexnames``,
    ``index.<pos>``, ``*.exc``) as Python's buffered text files (``newline=""``: the same lines)."""
    from nltk.corpus.reader.wordnet import WordNetCorpusReader
    from nltk.data import FileSystemPathPointer

    class _Reader(WordNetCorpusReader):
        def map_wn(self, version: str = "wordnet") -> None:
            return None

        def open(self, file: str) -> Any:
            sequential = file in _SEQUENTIAL or file.endswith(".exc")
            if sequential and isinstance(self.root, FileSystemPathPointer):
                path = self.root.join(file).path
                return open(path, encoding=self.encoding(file), newline="")
            return super().open(file)

    pointer = find_wordnet(wordnet_dir)
    with warnings.catch_warnings():
        # without the Open Multilingual WordNet NLTK warns once; METEOR is English-only
        warnings.simplefilter("ignore", UserWarning)
        return _Reader(pointer, None)


def wordnet_version(reader: Any) -> str:
    try:
        return str(reader.get_version())
    except Exception:  # a reader without a version header still works; say so
        return "unknown"
