"""The fenced blocks of README.md and docs/*.md, and what their ``<!-- docs-test: ... -->`` markers say.

Every fenced block says what it is by its language: ``sh`` (or ``bash``, ``shell``) is a script run as
written, ``console`` a transcript (``$ `` lines run, the other lines their expected output); the languages
of ``DATA`` are shown, never run. A block without a language is a mistake here (a command block hidden
behind a missing tag would go untested), and so is an unknown language or a marker the grammar does not
know. tests/docs/README.md describes the grammar; ``parse`` is all of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

#: languages of blocks that run
COMMANDS = frozenset({"sh", "bash", "shell", "console"})
#: languages of blocks that only show something: output, a file's content, a program's source
DATA = frozenset({"text", "python", "yaml", "json", "pbtxt", "toml", "ini", "dockerfile", "diff", "promql"})
#: what ``needs`` may name: what no machine of ours has
NEEDS = {
    "ascend": "an Ascend host with CANN (atc, pyACL, an NPU)",
    "cluster": "a Kubernetes cluster",
    "docker": "a Docker engine",
}

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
#: a ``# prints TEXT`` or ``# writes PATH, PATH[: note]`` comment in a command block (a ``#`` that starts the line or
#: follows a blank, as the shell reads a comment)
_COMMENT = re.compile(r"(?:^|\s)#\s+(?P<verb>prints|writes)\s+(?P<what>.+?)\s*$")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


class GrammarError(ValueError):
    """A block or marker this grammar cannot read, as ``FILE:LINE: what``."""


@attrs.frozen
class Directives:
    """What the markers above a block say (tests/docs/README.md)."""

    slow: bool = False
    needs: str | None = None
    covered_by: str | None = None
    #: a server the block talks to, started (its own command line, in the scratch checkout) before it
    server: str | None = None
    #: the block's lines run one by one, and a line still running once its HTTP port answers is a server,
    #: stopped with SIGINT (Ctrl-C) and expected to stop cleanly
    serves: bool = False
    #: the block reaches the network (a package index): it runs on the host's network, outside the page's
    #: namespace
    network: bool = False
    exit: int = 0
    numbers_vary: bool = False


@attrs.frozen
class Block:
    path: str  #: relative to the repository, as ``docs/atc.md``
    line: int  #: the opening fence's line, 1-based
    lang: str
    text: str  #: the body, without the fence's indentation
    directives: Directives
    #: output lines the block must print, in order: a console transcript's, or those of the ``text`` block
    #: right after it; ``…`` stands for anything, and with ``numbers vary`` every number for any number
    expected: tuple[str, ...] = ()
    #: ``# prints TEXT`` comments: substrings of the output, in order
    prints: tuple[str, ...] = ()
    #: ``# writes PATH`` comments: paths (globs) relative to the checkout that exist once the block ran
    writes: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def is_command(self) -> bool:
        return self.lang in COMMANDS

    @property
    def runs(self) -> bool:
        """Run by one of the tiers: a command block not marked as needing what we lack or run elsewhere."""
        return self.is_command and self.directives.needs is None and self.directives.covered_by is None

    @property
    def tier(self) -> str:
        return "slow" if self.directives.slow else "fast"

    @property
    def title(self) -> str:
        """The first command of the block, for reports."""
        for line in self.script.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                return line.strip()[:100]
        return self.text.strip().splitlines()[0][:100] if self.text.strip() else "(empty)"

    @property
    def script(self) -> str:
        """What bash runs: the block as written, or a transcript's ``$ `` commands (continuation lines
        after a trailing backslash included)."""
        if self.lang != "console":
            return self.text
        return "\n".join(_transcript(self.text)[0]) + "\n"

    @property
    def lines(self) -> tuple[str, ...]:
        """The script's commands one by one, a line continued by a trailing backslash joined to it."""
        found, current = [], ""
        for line in self.script.splitlines():
            current += line
            if line.rstrip().endswith("\\"):
                current += "\n"
                continue
            if current.strip() and not current.lstrip().startswith("#"):
                found.append(current)
            current = ""
        if current.strip():
            found.append(current)
        return tuple(found)

    @property
    def commands(self) -> tuple[str, ...]:
        """The script's command lines without their comments, whitespace collapsed (for ``covered by``)."""
        found = []
        for line in self.script.splitlines():
            command = " ".join(re.sub(r"(?:^|\s)#.*$", "", line).split())
            if command:
                found.append(command)
        return tuple(found)


def parse_directives(body: str, where: str) -> Directives:
    """``slow; needs docker`` -> Directives; GrammarError names what it cannot read."""
    fields: dict[str, object] = {}
    for raw in body.split(";"):
        item = " ".join(raw.split())
        if not item:
            raise GrammarError(f"{where}: an empty directive in the marker")
        word, _, rest = item.partition(" ")
        if item in ("slow", "numbers vary", "serves", "network"):
            key, value = item.replace(" ", "_"), True
        elif word == "needs" and rest in NEEDS:
            key, value = "needs", rest
        elif word == "needs":
            raise GrammarError(f"{where}: needs {rest!r}: name one of {', '.join(NEEDS)}")
        elif item.startswith("covered by ") and item[len("covered by ") :]:
            key, value = "covered_by", item[len("covered by ") :]
        elif word == "with" and rest:
            key, value = "server", rest
        elif word == "exit" and rest.isdigit():
            key, value = "exit", int(rest)
        else:
            raise GrammarError(
                f"{where}: unknown directive {item!r} (slow, serves, network, needs WHAT, covered by FILE, with "
                "COMMAND, exit N, numbers vary)"
            )
        if key in fields:
            raise GrammarError(f"{where}: {key.replace('_', ' ')} given twice")
        fields[key] = value
    directives = Directives(**fields)  # type: ignore[arg-type]
    if directives.serves and not directives.slow:
        raise GrammarError(f"{where}: serves starts servers: mark it slow too")
    return directives


@attrs.frozen
class _Raw:
    line: int
    indent: int
    lang: str
    text: str
    directives: Directives
    first_line: int  #: the first line of its markers, or its fence's


def parse(text: str, path: str) -> list[Block]:
    """Every fenced block of a Markdown file, in order; GrammarError on the first thing it cannot read."""
    lines = text.splitlines()
    raws: list[_Raw] = []
    problems: list[str] = []
    marked: set[int] = set()  # marker lines that belong to a block
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, indent = match["fence"], len(match["indent"])
        info = match["info"].strip()
        where = f"{path}:{i + 1}"
        end = i + 1
        closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        if end == len(lines):
            problems.append(f"{where}: a fence that is never closed")
            break
        lang = info.split()[0].lower() if info else ""
        markers, k = [], i - 1
        while k >= 0 and (marker := _MARKER.match(lines[k])):
            markers.insert(0, marker["body"])
            marked.add(k)
            k -= 1
        try:
            if not lang:
                raise GrammarError(
                    f"{where}: a fenced block without a language: say what it is (sh for commands, console "
                    "for a transcript, text for output, or the language of its content)"
                )
            if lang not in COMMANDS | DATA:
                raise GrammarError(
                    f"{where}: unknown language {lang!r} (run: {', '.join(sorted(COMMANDS))}; shown: "
                    f"{', '.join(sorted(DATA))})"
                )
            directives = parse_directives("; ".join(markers), where) if markers else Directives()
        except GrammarError as exc:
            problems.append(str(exc))
        else:
            body = [_dedent(line, indent) for line in lines[i + 1 : end]]
            raws.append(_Raw(i + 1, indent, lang, "\n".join(body) + "\n", directives, k + 2))
        i = end + 1
    for n, line in enumerate(lines):
        if "docs-test" in line and n not in marked:
            problems.append(
                f"{path}:{n + 1}: a docs-test marker must be <!-- docs-test: DIRECTIVE[; DIRECTIVE] --> on the "
                "lines right above a fenced block"
            )
    try:
        blocks = _blocks(raws, lines, path)
    except GrammarError as exc:
        problems.append(str(exc))
    if problems:
        raise GrammarError("\n".join(problems))
    return blocks


def _blocks(raws: Sequence[_Raw], lines: Sequence[str], path: str) -> list[Block]:
    outputs = {n: _output_block(raws, n, lines) for n in range(len(raws))}
    showing = {id(out) for out in outputs.values() if out is not None}
    blocks = []
    for n, raw in enumerate(raws):
        where = f"{path}:{raw.line}"
        d = raw.directives
        shows_output = id(raw) in showing and d == Directives(numbers_vary=True)
        if raw.lang not in COMMANDS and d != Directives() and not shows_output:
            raise GrammarError(
                f"{where}: a {raw.lang} block is not run, so its marker means nothing (numbers vary goes on "
                "the text block right after a command block)"
            )
        if raw.lang in COMMANDS and d.numbers_vary:
            raise GrammarError(f"{where}: numbers vary goes on the text block that shows the output")
        expected: list[str] = []
        if raw.lang == "console":
            expected = _transcript(raw.text)[1]
        output = outputs[n]
        if output is not None:
            expected += [line for line in output.text.splitlines() if line.strip()]
        prints, writes = [], []
        if raw.lang in ("sh", "bash", "shell"):
            for line in raw.text.splitlines():
                comment = _COMMENT.search(line)
                if comment and comment["verb"] == "prints":
                    prints.append(comment["what"])
                elif comment:  # writes PATH[, PATH...][: a note]
                    writes += [p for p in re.split(r"[,\s]+", comment["what"].split(": ")[0]) if p]
        numbers_vary = output is not None and output.directives.numbers_vary
        blocks.append(
            Block(
                path=path,
                line=raw.line,
                lang=raw.lang,
                text=raw.text,
                directives=attrs.evolve(d, numbers_vary=numbers_vary),
                expected=tuple(expected),
                prints=tuple(prints),
                writes=tuple(writes),
            )
        )
    return blocks


def _output_block(raws: Sequence[_Raw], n: int, lines: Sequence[str]) -> _Raw | None:
    """The ``text`` block that shows block ``n``'s output: the next block, with only blank lines (and its
    own markers) between them."""
    if n + 1 >= len(raws) or raws[n].lang not in COMMANDS or raws[n + 1].lang != "text":
        return None
    after = raws[n + 1]
    closing = raws[n].line + raws[n].text.count("\n")  # the closing fence's 0-based index
    between = lines[closing + 1 : after.first_line - 1]
    return after if all(not line.strip() for line in between) else None


def _transcript(text: str) -> tuple[list[str], list[str]]:
    """A console transcript's commands (a ``$ `` line and the lines continuing it after a trailing
    backslash) and its output lines."""
    commands: list[str] = []
    output: list[str] = []
    going_on = False
    for line in text.splitlines():
        if going_on or line.startswith("$ "):
            commands.append(line if going_on else line[2:])
            going_on = line.rstrip().endswith("\\")
        elif line.strip():
            output.append(line)
    return commands, output


def _dedent(line: str, indent: int) -> str:
    stripped = len(line) - len(line.lstrip(" "))
    return line[min(indent, stripped) :]


def matches(expected: Sequence[str], output: str, *, numbers_vary: bool = False) -> str | None:
    """None when every expected line is a line of ``output``, in order (whitespace collapsed; ``…`` is
    anything, and with ``numbers_vary`` any number is any number); else the first line it did not find."""
    got = [" ".join(line.split()) for line in output.splitlines()]
    at = 0
    for want in expected:
        pattern = _pattern(" ".join(want.split()), numbers_vary=numbers_vary)
        while at < len(got) and not pattern.fullmatch(got[at]):
            at += 1
        if at == len(got):
            return want
        at += 1
    return None


def _pattern(line: str, *, numbers_vary: bool) -> re.Pattern[str]:
    parts = []
    for piece in re.split(r"(…)", line):
        if piece == "…":
            parts.append(".*")
        elif numbers_vary:
            chunks = _NUMBER.split(piece)
            parts.append(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?".join(re.escape(c) for c in chunks))
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts))


def documents(root: Path) -> list[Path]:
    """README.md and docs/*.md, the pages a user reads."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def parse_all(root: Path, files: Iterable[Path] | None = None) -> list[Block]:
    """The blocks of every page; GrammarError lists every problem of every page."""
    blocks: list[Block] = []
    problems: list[str] = []
    for file in files if files is not None else documents(root):
        try:
            blocks += parse(file.read_text(encoding="utf-8"), file.relative_to(root).as_posix())
        except GrammarError as exc:
            problems.append(str(exc))
    if problems:
        raise GrammarError("\n".join(problems))
    return blocks
