"""Every relative link and picture in the README, the guide (docs/) and the measured results
(benchmarks/) names a file that exists: four pictures of benchmarks/results/ pointed at their
old place, beside the file, after the results were split into that folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("benchmarks/**/*.md")])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _relative_targets(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks are not links
    targets = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a web address, a mail address or an anchor in the page
        targets.append(target.split("#", 1)[0])
    return targets


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_relative_link_names_a_file(page):
    missing = [target for target in _relative_targets(page) if not (page.parent / target).exists()]
    assert missing == [], f"{page.relative_to(ROOT)}: {missing}"
