"""pyproject.toml's dependency ranges: each lower bound is a version the tests ran on (the one
installed now satisfies it) and each upper bound the next major version; exact pins where a
version is the test oracle."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
# the extras `make test` installs: dev and ray
EXTRAS = PROJECT["optional-dependencies"]["dev"] + PROJECT["optional-dependencies"]["ray"]
REQUIREMENTS = [Requirement(r) for r in PROJECT["dependencies"] + EXTRAS]


@pytest.mark.parametrize("req", REQUIREMENTS, ids=lambda r: r.name)
def test_lower_bound_is_tested_and_upper_bound_the_next_major(req: Requirement) -> None:
    installed = Version(version(req.name))
    assert req.specifier.contains(installed, prereleases=True), f"{req} vs {installed}"
    ops = {s.operator: Version(s.version) for s in req.specifier}
    if "==" in ops:
        return
    assert set(ops) == {">=", "<"}, str(req)
    low, high = ops[">="], ops["<"]
    assert high == Version(f"{low.major + 1}"), f"{req}: the upper bound is not the next major"
    # the lower bound is the tested version, to the precision it is written in
    assert installed.release[: len(low.release)] == low.release, f"{req} vs {installed}"
