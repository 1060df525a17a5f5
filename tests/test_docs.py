"""The documentation holds together: the README stays short enough to read, every relative link
and image in README.md and docs/*.md points at a file that exists (and an #anchor at a heading
that exists), and data files live under docs/data/, not among the pages.

Links are checked the way GitHub renders them: a link's path is relative to the page that holds
it, and an anchor is the heading's slug (lowercase, spaces to '-', punctuation other than '-'
and '_' dropped, a repeated heading getting -1, -2, ...)."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README_MAX_LINES = 200

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"`+[^`]*?`+", re.S)
# [text](target "title") and ![alt](target); the text may hold one level of brackets.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+[\"'(][^)]*)?\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # https:, mailto:, ...


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def prose(text: str) -> str:
    """The page without fenced code blocks (links and headings there are not rendered as such)."""
    out, in_fence = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            out.append("")
            continue
        out.append("" if in_fence else line)
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(page.read_text(encoding="utf-8")).splitlines():
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    text = prose(page.read_text(encoding="utf-8"))
    # Code spans are not links, but a link's text may be a code span: blank the span's content.
    text = CODE_SPAN.sub(lambda m: "`" + "x" * (len(m.group(0)) - 2) + "`", text)
    return INLINE_LINK.findall(text) + REFERENCE_DEF.findall(text)


def broken_links(page: Path) -> list[str]:
    """Every relative link of ``page`` that does not resolve, with the reason."""
    problems = []
    for target in links(page):
        if not target or EXTERNAL.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not dest.exists():
            problems.append(f"{target}: {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest} does not exist")
            continue
        if anchor and dest.suffix == ".md" and unquote(anchor) not in anchors(dest):
            problems.append(f"{target}: no heading with the anchor #{anchor} in {dest.name}")
    return problems


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines; keep it at most {README_MAX_LINES} and move detail to a page in docs/")


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page):
    assert broken_links(page) == []


def test_no_data_files_among_the_pages():
    strays = sorted(p.name for p in DOCS.iterdir() if p.is_file() and p.suffix != ".md")
    assert strays == [], f"data files belong under docs/data/, not docs/: {strays}"


def test_the_checker_finds_a_broken_link(tmp_path):
    """The checks above can fail: a missing file, a missing heading and a link in code."""
    (tmp_path / "other.md").write_text("# A heading: with `code`\n\n## A heading: with `code`\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-heading-with-code) [ok too](other.md#a-heading-with-code-1)\n"
                    "[gone](missing.md) ![gone](img/missing.png) [bad anchor](other.md#nope)\n"
                    "`[in code](not-a-link.md)`\n\n```\n[in a fence](not-a-link-either.md)\n```\n"
                    "[here](#nowhere) [web](https://example.com/x.md)\n")
    problems = broken_links(page)
    assert len(problems) == 4, problems
    assert any("missing.md" in p for p in problems)
    assert any("missing.png" in p for p in problems)
    assert any("#nope" in p for p in problems)
    assert any("#nowhere" in p for p in problems)


def test_make_train_installs_what_training_needs_and_make_test_adds_the_test_extras(tmp_path):
    """The README's two set-up commands: `make train` installs the package alone (torch, the
    games, the encoder), `make test` the test extras too (pytest, Ray, W&B, huggingface_hub),
    which training never imports. Read from make's own dry run into an empty venv folder."""
    import shutil
    import subprocess
    import tomllib

    if shutil.which("make") is None:
        pytest.skip("make is not installed")

    def installs(target: str) -> list[str]:
        out = subprocess.run(["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True,
                             text=True, timeout=60, check=True).stdout
        return [line.split(" install --quiet ", 1)[1] for line in out.splitlines() if "pip install --quiet -e" in line]

    assert installs("train") == ["-e ."]
    assert installs("test") == ['-e ".[test]"']
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = " ".join(project["dependencies"])
    for extra in ("pytest", "ray", "wandb", "huggingface_hub"):
        assert extra not in needed and any(d.startswith(extra) for d in project["optional-dependencies"]["test"])
    assert "imageio-ffmpeg" in needed  # --video and flag.mp4 belong to training's install


def test_every_pong_target_of_18_in_the_docs_plays_without_sticky_actions():
    """+18 is reached without sticky actions (results.md: under -v5's, best +16.85 by 1.3M agent
    steps): a command that aims there says --sticky-actions 0."""
    aims = 0
    for page in pages():
        for line in page.read_text(encoding="utf-8").splitlines():
            if "Pong" in line and re.search(r"--target-score 18\b|target_score=18\b", line):
                aims += 1
                assert "--sticky-actions 0" in line or "sticky_actions=0" in line, f"{page.name}: {line}"
    assert aims >= 2  # the README's command and usage.md's train() example


def test_the_readmes_training_commands_parse():
    """Each `mario_rl_optimized.py` command of the README's command list parses as typed and asks
    for one mode at most (nothing is run)."""
    import shlex

    from mario_rl_optimized import check_mode
    from pipeline.settings.cli import parse_args

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [line.split("#")[0] for line in text.splitlines() if line.startswith(".venv/bin/python mario_rl_optimized.py")]
    assert len(commands) >= 8
    for command in commands:
        argv = shlex.split(command)[2:]
        if "--help" not in argv:
            check_mode(parse_args(argv))
