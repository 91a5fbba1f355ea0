"""The grammar of the docs test: which blocks run, what their markers say, what their output must show; and
every block of README.md and docs/*.md read by it, each run by a tier or marked (tests/docs/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs import markdown
from tests.docs.markdown import Directives, GrammarError, matches, parse

ROOT = Path(__file__).resolve().parents[2]

PAGE = """\
# A page

<!-- docs-test: slow; with ge-plugin serve model_repository -->
```sh
curl -s localhost:8000/v2/health/ready && echo up   # prints up
ge-plugin render specs -o repo                      # writes repo/*/config.pbtxt: one per model
```

<!-- docs-test: exit 1 -->
```console
$ ge-plugin validate broken.yaml \\
    --quiet
broken.yaml:3: … unknown key
```

```python
print("shown, never run")
```

```sh
python bench.py
```

<!-- docs-test: numbers vary -->
```text
lane  c  p50
grpc  1  2.06
```

1. a step
   <!-- docs-test: needs docker -->
   ```sh
   docker build .
   ```
"""


def test_parse_reads_each_block_its_markers_and_what_it_must_show():
    serve, transcript, program, bench, output, docker = parse(PAGE, "docs/page.md")

    assert serve.directives == Directives(slow=True, server="ge-plugin serve model_repository")
    assert (serve.where, serve.tier, serve.runs) == ("docs/page.md:4", "slow", True)
    assert serve.prints == ("up",)
    assert serve.writes == ("repo/*/config.pbtxt",)
    assert transcript.directives.exit == 1
    assert transcript.script == "ge-plugin validate broken.yaml \\\n    --quiet\n"
    assert transcript.expected == ("broken.yaml:3: … unknown key",)
    assert (program.lang, program.runs) == ("python", False)
    assert bench.expected == ("lane  c  p50", "grpc  1  2.06") and bench.directives.numbers_vary
    assert (output.lang, output.runs) == ("text", False)
    assert (docker.directives.needs, docker.text, docker.runs) == ("docker", "docker build .\n", False)


@pytest.mark.parametrize(
    ("page", "said"),
    [
        ("```\nls\n```\n", "a fenced block without a language"),
        ("```shh\nls\n```\n", "unknown language 'shh'"),
        ("<!-- docs-test: slwo -->\n```sh\nls\n```\n", "unknown directive 'slwo'"),
        (
            "<!-- docs-test: needs gpu -->\n```sh\nls\n```\n",
            "needs 'gpu': name one of ascend, cluster, docker",
        ),
        ("<!-- docs-test: slow; slow -->\n```sh\nls\n```\n", "slow given twice"),
        ("<!-- docs-test: serves -->\n```sh\nls\n```\n", "serves starts servers: mark it slow too"),
        ("<!-- docs-test: slow -->\n\n```sh\nls\n```\n", "must be <!-- docs-test: DIRECTIVE"),
        ("<!-- docs-test: slow -->\n```yaml\na: 1\n```\n", "a yaml block is not run"),
        (
            "```sh\nls\n```\nprose\n<!-- docs-test: numbers vary -->\n```text\n1\n```\n",
            "a text block is not run",
        ),
        ("```sh\nls\n", "a fence that is never closed"),
    ],
)
def test_parse_refuses_what_its_grammar_does_not_know(page, said):
    with pytest.raises(GrammarError, match=r"docs/page\.md:[0-9]+: .*") as caught:
        parse(page, "docs/page.md")
    assert said in str(caught.value)


def test_parse_lists_every_problem_of_a_page_at_once():
    with pytest.raises(GrammarError) as caught:
        parse("```\nls\n```\n\n```bogus\nx\n```\n", "docs/page.md")
    assert str(caught.value).splitlines() == [
        "docs/page.md:1: a fenced block without a language: say what it is (sh for commands, console for a "
        "transcript, text for output, or the language of its content)",
        "docs/page.md:5: unknown language 'bogus' (run: bash, console, sh, shell; shown: diff, dockerfile, ini, "
        "json, pbtxt, promql, python, text, toml, yaml)",
    ]


@pytest.mark.parametrize(
    ("expected", "output", "numbers_vary", "missing"),
    [
        (["a  b"], "x\n a b \ny\n", False, None),  # whitespace collapsed
        (["b", "a"], "a\nb\n", False, "a"),  # in order
        (["use one of …, or …"], "use one of bool, int8, or TYPE_BOOL\n", False, None),
        (["grpc 1 2.06 [1.82, 2.53]"], "grpc 16 17.71 [11.29, 30.79]\n", True, None),
        (["grpc 1 2.06"], "grpc 1 2.07\n", False, "grpc 1 2.06"),
        (["openai 1 2.68"], "grpc 1 2.68\n", True, "openai 1 2.68"),
    ],
)
def test_matches_finds_the_lines_a_page_shows_in_what_a_block_printed(
    expected, output, numbers_vary, missing
):
    assert matches(expected, output, numbers_vary=numbers_vary) == missing


def test_every_block_of_the_docs_is_run_by_a_tier_or_marked_with_why_not():
    """The gate: a new block in a language that runs is run (and fails CI if it does not work) unless a
    marker says what it needs that no machine of ours has, or which file of CI runs it."""
    blocks = markdown.parse_all(ROOT)  # GrammarError lists every block the grammar cannot read
    commands = [b for b in blocks if b.is_command]
    assert commands, "no command block found: is the parser looking at the docs?"
    for block in commands:
        covered = block.directives.covered_by
        if covered is None:
            continue
        lines = {" ".join(line.split("#")[0].split()) for line in (ROOT / covered).read_text().splitlines()}
        missing = [command for command in block.commands if command not in lines]
        assert not missing, f"{block.where}: covered by {covered}, which does not run {missing}"
