"""Prepare WordNet 3.0 for METEOR, offline: an NLTK data folder at ``<repo>/.cache/nltk_data``.

Debian's ``wordnet-base`` and ``wordnet-sense-index`` packages carry the WordNet 3.0 database under
``/usr/share/wordnet``. NLTK reads those files once they sit in ``corpora/wordnet/`` of an NLTK data
folder together with a ``lexnames`` file (which Debian does not ship). The files are copied, not
linked, so that the folder survives the package being removed and can be carried to another machine.

Idempotent: the apt step is skipped when the files are already there (or when apt-get or root is
missing), and files already copied with the same size are left alone. Nothing is downloaded by NLTK.

Usage: ``python scripts/setup_wordnet.py [--source /usr/share/wordnet] [--target DIR]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = Path("/usr/share/wordnet")
DEFAULT_TARGET = REPO / ".cache" / "nltk_data"
APT_PACKAGES = ("wordnet-base", "wordnet-sense-index")

# WordNet 3.0's lexicographer files, numbered 00..44, with their syntactic category
# (1 noun, 2 verb, 3 adjective, 4 adverb), in the format of WordNet's own ``lexnames`` file.
LEXNAMES: tuple[tuple[str, int], ...] = (
    ("adj.all", 3),
    ("adj.pert", 3),
    ("adv.all", 4),
    ("noun.Tops", 1),
    ("noun.act", 1),
    ("noun.animal", 1),
    ("noun.artifact", 1),
    ("noun.attribute", 1),
    ("noun.body", 1),
    ("noun.cognition", 1),
    ("noun.communication", 1),
    ("noun.event", 1),
    ("noun.feeling", 1),
    ("noun.food", 1),
    ("noun.group", 1),
    ("noun.location", 1),
    ("noun.motive", 1),
    ("noun.object", 1),
    ("noun.person", 1),
    ("noun.phenomenon", 1),
    ("noun.plant", 1),
    ("noun.possession", 1),
    ("noun.process", 1),
    ("noun.quantity", 1),
    ("noun.relation", 1),
    ("noun.shape", 1),
    ("noun.state", 1),
    ("noun.substance", 1),
    ("noun.time", 1),
    ("verb.body", 2),
    ("verb.change", 2),
    ("verb.cognition", 2),
    ("verb.communication", 2),
    ("verb.competition", 2),
    ("verb.consumption", 2),
    ("verb.contact", 2),
    ("verb.creation", 2),
    ("verb.emotion", 2),
    ("verb.motion", 2),
    ("verb.perception", 2),
    ("verb.possession", 2),
    ("verb.social", 2),
    ("verb.stative", 2),
    ("verb.weather", 2),
    ("adj.ppl", 3),
)

# files NLTK's WordNetCorpusReader opens; the rest of the Debian folder is copied too
REQUIRED = tuple(
    f"{kind}.{pos}" for kind in ("index", "data") for pos in ("noun", "verb", "adj", "adv")
) + tuple(f"{pos}.exc" for pos in ("noun", "verb", "adj", "adv"))


def lexnames_text() -> str:
    return "".join(f"{i:02d}\t{name}\t{cat}\n" for i, (name, cat) in enumerate(LEXNAMES))


def have_source(source: Path) -> bool:
    return all((source / name).is_file() for name in REQUIRED)


def apt_install(packages: tuple[str, ...]) -> bool:
    """Install the Debian packages when apt-get exists and we are root; False when not possible."""
    if shutil.which("apt-get") is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
            check=True,
            env=env,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        # no package mirror reachable: say so in one line and let the caller report what is missing
        print(f"apt-get could not install {' '.join(packages)}: {exc}", file=sys.stderr)
        return False
    return True


def copy_wordnet(source: Path, target_root: Path) -> Path:
    """Copy the WordNet dict files into ``target_root/corpora/wordnet`` and write ``lexnames``."""
    dest = target_root / "corpora" / "wordnet"
    dest.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.iterdir()):
        if not path.is_file():
            continue
        out = dest / path.name
        if out.is_file() and not out.is_symlink() and out.stat().st_size == path.stat().st_size:
            continue
        if out.is_symlink():
            out.unlink()
        shutil.copyfile(path, out)  # a copy, never a link: NLTK must not depend on /usr/share
    lexnames = dest / "lexnames"
    if not lexnames.is_file() or lexnames.read_text() != lexnames_text():
        lexnames.write_text(lexnames_text())
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--target", type=Path, default=DEFAULT_TARGET)
    parser.add_argument("--no-apt", action="store_true", help="never call apt-get")
    args = parser.parse_args(argv)

    if not have_source(args.source) and not args.no_apt:
        apt_install(APT_PACKAGES)
    if not have_source(args.source):
        print(
            f"WordNet files not found in {args.source}: install the Debian packages "
            f"{' '.join(APT_PACKAGES)} (as root) or pass --source DIR",
            file=sys.stderr,
        )
        return 1
    dest = copy_wordnet(args.source, args.target)
    print(f"WordNet 3.0 ready in {dest} (NLTK data folder: {args.target})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
