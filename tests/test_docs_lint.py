"""The docs and the code's citations point at things that exist (no Spark; a fraction of a second).

- Every Markdown link of README.md and docs/**/*.md to a relative file resolves, and its ``#anchor`` names a
  heading of the target page (GitHub's slugs: lower case, punctuation dropped, spaces to hyphens, ``-1``,
  ``-2`` for repeats).
- No page or source text cites notes that are not in the repository (``../shared``, protocol.md, the
  "contract" sections, seed-notes, design.md, engine-notes, golden.md, tool-formats.md), and user-facing
  text (README.md, docs/, sparkkafka/, jobs/, conf/) names no tracker issue ("issue 11"): a reader can open
  neither.
- Every ``docs/<page>.md`` path the code cites exists, and so does every bare ``<page>.md`` the package, jobs
  and configs cite (as docs/<page>.md or at the repository's root).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIRS = ("sparkkafka", "jobs", "conf")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".properties", ".txt", ".ipynb", ".cfg"}
SELF = Path(__file__).resolve()

# Notes kept outside the repository that earlier text cited: nobody who clones it can read them.
OUTSIDE = re.compile("|".join((
    r"\.\./shared", r"\bshared/[\w-]+\.md", r"\bprotocol\.md", r"\bcontract section", "contract \u00a7",
    r"\bseed[- ]notes", r"\bdesign\.md", r"\bengine[- ]notes", r"\bgolden\.md", r"\btool-formats\.md")), re.I)
ISSUE = re.compile(r"\bissues? \d+", re.I)

_LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_IMAGE = re.compile(r"!\[[^\]]*\]\(\s*([^)\s]+)[^)]*\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)
_MD_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def sources(dirs: tuple[str, ...]) -> list[Path]:
    return [p for d in dirs for p in sorted((ROOT / d).rglob("*"))
            if p.is_file() and p.suffix in SUFFIXES and not {".venv", "__pycache__"} & set(p.parts)
            and p.resolve() != SELF]


def prose(text: str, spans: bool = False) -> str:
    """`text` with fenced code blocks blanked (line numbers kept) and, unless `spans`, inline code removed."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else line if spans else re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a link may name in `page`: its headings' slugs (repeats numbered) and its <a name/id>."""
    seen: dict[str, int] = {}
    out = set(_HTML_ANCHOR.findall(page.read_text()))
    for line in prose(page.read_text(), spans=True).splitlines():
        m = _HEADING.match(line)
        if not m:
            continue
        s = slug(m.group(2))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    """`page`'s relative links whose file does not exist or whose anchor its target page lacks."""
    bad = []
    for no, line in enumerate(prose(page.read_text()).splitlines(), 1):
        for target in _LINK.findall(line) + _IMAGE.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{_rel(page)}:{no}: ({target})"
            if not dest.exists():
                bad.append(f"{where} no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{where} no heading #{anchor} in {_rel(dest)}")
    return bad


def mentions(files: list[Path], pattern: re.Pattern) -> list[str]:
    bad = []
    for f in files:
        rel = str(f.relative_to(ROOT))
        for no, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if pattern.search(line):
                bad.append(f"{rel}:{no}: {line.strip()[:160]}")
    return bad


def test_links_resolve() -> None:
    bad = [b for p in pages() for b in broken_links(p)]
    assert not bad, "links to files or headings that do not exist:\n" + "\n".join(bad)


def test_no_citation_of_notes_outside_the_repository() -> None:
    bad = mentions(pages() + sources(SOURCE_DIRS + ("tests",)), OUTSIDE)
    assert not bad, "cites notes that are not in the repository:\n" + "\n".join(bad)


def test_no_issue_numbers_in_user_facing_text() -> None:
    bad = mentions(pages() + sources(SOURCE_DIRS), ISSUE)
    assert not bad, "names a tracker issue a reader cannot open:\n" + "\n".join(bad)


def test_cited_pages_exist() -> None:
    docs = {p.name for p in (ROOT / "docs").glob("*.md")}
    bad = []
    for f in sources(SOURCE_DIRS + ("tests",)):
        in_tests = f.is_relative_to(ROOT / "tests")
        for no, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            for cited in _MD_PATH.findall(line):
                if cited.startswith("docs/"):
                    ok = (ROOT / cited).exists()
                elif in_tests:  # tests make pages of their own ("p.md"): only docs/ paths are citations
                    continue
                else:
                    ok = cited in docs or (ROOT / cited).exists()
                if not ok:
                    bad.append(f"{f.relative_to(ROOT)}:{no}: {cited}")
    assert not bad, "cites pages that do not exist:\n" + "\n".join(bad)


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    """Missing files and missing headings are reported; good links, code and external links are not."""
    (tmp_path / "b.md").write_text("# Title\n\n## Where it `stands`\n\n## Where it `stands`\n")
    (tmp_path / "a.md").write_text(
        "# A\n\n[ok](b.md#where-it-stands) [ok](b.md#where-it-stands-1) [ok](#a)\n[ok](https://x.org/none.md)\n"
        "[gone](c.md) [no heading](b.md#nowhere) [no local heading](#b)\n\n```\n[in code](d.md)\n```\n")
    bad = broken_links(tmp_path / "a.md")
    assert [b.split(": ", 1)[1] for b in bad] == [
        "(c.md) no such file", f"(b.md#nowhere) no heading #nowhere in {tmp_path / 'b.md'}",
        f"(#b) no heading #b in {tmp_path / 'a.md'}"]


def test_the_checks_see_what_they_check() -> None:
    """The slugs and link parser on a known page: a check that parses nothing passes everything."""
    assert slug("Where `bench`'s targets stand (today)") == "where-benchs-targets-stand-today"
    assert slug("An idle hour: 4 rounds, 1.5x") == "an-idle-hour-4-rounds-15x"
    assert "bench" in anchors(ROOT / "docs" / "cli.md")
    assert _LINK.findall("see [the page](docs/a.md#b) and [x](http://y)") == ["docs/a.md#b", "http://y"]
    assert ISSUE.search("names issue 11") and not ISSUE.search("KIP-101")
    assert OUTSIDE.search("see protocol.md 4.2") and OUTSIDE.search("(contract section 4)")
    assert len(pages()) > 5 and len(sources(SOURCE_DIRS)) > 50
