"""The docs stay true to the repository: links that resolve inside it, commands and options that exist.

README.md and docs/**/*.md are read by people who have only a clone, so every link must lead to a
file in the clone; docs/ARCHITECTURE.md names the commands and options, so each must still be
one `playtester --help` lists. Quick: no game, no model.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
COMMANDS_SECTION = "## Commands and their data paths"

INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.MULTILINE)
HTML_LINK = re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)["']""")
EXTERNAL = re.compile(r"^(?:https?|mailto):", re.IGNORECASE)
OUTSIDE_MENTION = re.compile(r"\.\./shared/|/work/|shared/DESIGN\.md")


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def links(text: str) -> list[str]:
    """Every link target of a Markdown text: inline, reference-style and HTML `href`/`src`."""
    found = INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text) + HTML_LINK.findall(text)
    return [t for t in found if t.strip()]


def bad_links(path: Path, root: Path = ROOT) -> list[str]:
    """The links of `path` that leave the repository or lead to no file in it, each with why."""
    bad = []
    for target in links(path.read_text(encoding="utf-8")):
        if EXTERNAL.match(target) or target.startswith("#"):
            continue
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            bad.append(f"{target}: a {target.split(':')[0]}: link, not a file in the repository")
            continue
        local = target.split("#", 1)[0].split("?", 1)[0]
        if local.startswith("/"):
            bad.append(f"{target}: an absolute path; link relative to the file, inside the repository")
            continue
        resolved = (path.parent / local).resolve()
        if not resolved.is_relative_to(root.resolve()):
            bad.append(f"{target}: leads outside the repository ({resolved})")
        elif not resolved.exists():
            bad.append(f"{target}: no such file in the repository")
    return bad


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_stay_inside_the_repository(path):
    assert bad_links(path) == [], f"{path.relative_to(ROOT)} links to what a clone does not have"
    outside = sorted(set(OUTSIDE_MENTION.findall(path.read_text(encoding="utf-8"))))
    assert outside == [], f"{path.relative_to(ROOT)} names files outside the repository: {outside}"


def test_the_link_check_catches_bad_links(tmp_path):
    """The check itself: links outside, absolute, missing and foreign-scheme are caught; good ones pass."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "there.md").write_text("x")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "[ok](there.md) [ok too](there.md#part) [web](https://example.org) [anchor](#top)\n"
        "[up](../../outside.md) [abs](/etc/passwd) [gone](missing.md) [file](file:///etc/passwd)\n"
        "[ref]: ../../elsewhere.md\n<a href=\"nothere.html\">x</a>\n"
    )
    found = bad_links(page, root=tmp_path)
    assert [b.split(":")[0] for b in found] == [
        "../../outside.md", "/etc/passwd", "missing.md", "file", "../../elsewhere.md", "nothere.html"]


def test_readme_links_the_architecture():
    assert "docs/ARCHITECTURE.md" in links((ROOT / "README.md").read_text(encoding="utf-8"))


def documented_commands() -> list[tuple[str, ...]]:
    """The command paths of ARCHITECTURE.md's command table: the first cell of each row, `playtester …`."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert COMMANDS_SECTION in text, f"{ARCHITECTURE.name} lost its section '{COMMANDS_SECTION}'"
    section = text.split(COMMANDS_SECTION, 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\|\s*`playtester ([a-z][a-z -]*)`\s*\|", section, re.MULTILINE)
    return [tuple(r.split()) for r in rows]


def cli_commands() -> dict[tuple[str, ...], object]:
    """Every command `playtester --help` and its groups' help list (hidden ones left out), by path."""
    import typer

    from playtester.cli import app

    found: dict[tuple[str, ...], object] = {}

    def walk(command, path: tuple[str, ...]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            if not getattr(sub, "hidden", False):
                found[path + (name,)] = sub
                walk(sub, path + (name,))

    walk(typer.main.get_command(app), ())
    return found


def test_documented_commands_exist():
    documented = documented_commands()
    assert len(documented) >= 10, f"{ARCHITECTURE.name}'s command table lost its rows: {documented}"
    listed = cli_commands()
    missing = [" ".join(c) for c in documented if c not in listed]
    assert missing == [], f"{ARCHITECTURE.name} names commands `playtester --help` does not list: {missing}"


def test_every_command_is_documented():
    """A new command gets its row in the table (what it reads, what it writes); groups count by their leaves."""
    documented = set(documented_commands())
    listed = cli_commands()
    leaves = [path for path, cmd in listed.items() if not getattr(cmd, "commands", None)]
    undocumented = [" ".join(p) for p in leaves if p not in documented]
    assert undocumented == [], (f"commands without a row in {ARCHITECTURE.name}'s '{COMMANDS_SECTION}': {undocumented}; "
                                "add what each reads and writes")


def test_documented_options_exist():
    """Every `--option` the page names is an option of some command."""
    import typer

    from playtester.cli import app

    options = {"--help"}

    def walk(command) -> None:
        for param in command.params:
            options.update(param.opts)
            options.update(param.secondary_opts)
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", ARCHITECTURE.read_text(encoding="utf-8")))
    assert sorted(named - options) == [], f"{ARCHITECTURE.name} names options no command has"
