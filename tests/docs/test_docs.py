"""Every command block of README.md and docs/*.md runs as written, or says in a marker why it cannot.

One test per page and tier: the page's blocks run in order in a scratch checkout (tests/docs/runner.py),
in a network namespace of their own where the host allows one. The fast tier is part of ``make test``;
the slow tier (``docs-test: slow``: bench, tune, servers) is ``make test-docs``, which CI runs after it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

import pytest

from tests.docs import markdown

ROOT = Path(__file__).resolve().parents[2]
#: a page's run, all its blocks together, may take this long per tier
PAGE_TIMEOUT_S = {"fast": 900, "slow": 4 * 3600}


@cache
def blocks_of(page: str) -> tuple[markdown.Block, ...]:
    return tuple(markdown.parse((ROOT / page).read_text(encoding="utf-8"), page))


def pages(tier: str) -> list[str]:
    found = []
    for path in markdown.documents(ROOT):
        page = path.relative_to(ROOT).as_posix()
        try:
            blocks = blocks_of(page)
        except markdown.GrammarError:
            found.append(page)  # the run reports it
            continue
        if any(b.runs and (b.tier == tier) for b in blocks):
            found.append(page)
    return found


def session_members(sid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                if int(stat[stat.rindex(")") + 2 :].split()[3]) == sid:
                    pids.append(int(entry.name))
    return pids


def run_page(page: str, tier: str, work: Path) -> list[dict]:
    """The runner on one page; whatever it started is gone when this returns."""
    command = [sys.executable, "-m", "tests.docs.runner", page, "--checkout", str(ROOT)]
    command += ["--work", str(work), "--tier", tier]
    log = work.parent / f"{work.name}.log"
    with log.open("wb") as out:
        runner = subprocess.Popen(
            command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            runner.wait(PAGE_TIMEOUT_S[tier])
        except subprocess.TimeoutExpired:
            pass
        finally:
            # the runner ends what it started; this is for a runner that could not (killed, timed out)
            for sig in (signal.SIGTERM, signal.SIGKILL):
                for pid in session_members(runner.pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, sig)
                time.sleep(2 if sig == signal.SIGTERM else 0)
            runner.wait()
    text = log.read_text(errors="replace")
    results = work / "results.json"
    if runner.returncode != 0 or not results.is_file():
        pytest.fail(
            f"the docs runner failed on {page} (status {runner.returncode}):\n{text[-6000:]}", pytrace=False
        )
    print(text)
    return json.loads(results.read_text())


def judge(page: str, results: list[dict]) -> None:
    """Fail with every block that did not do what its page says."""
    problems = [
        f"{result['where']}: {result['title']}\n    {result['why']}\n" + _indent(result["output"])
        for result in results
        if result["status"] == "failed"
    ]
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def _indent(text: str) -> str:
    return "".join(f"    | {line}\n" for line in text.splitlines()[-30:])


@pytest.mark.parametrize("page", pages("fast"))
def test_page_runs_as_written(page, tmp_path):
    judge(page, run_page(page, "fast", tmp_path / "run"))


@pytest.mark.docs_slow
@pytest.mark.parametrize("page", pages("slow"))
def test_page_runs_as_written_slow_tier(page, tmp_path):
    judge(page, run_page(page, "slow", tmp_path / "run"))


def test_judge_fails_naming_each_block_that_failed_and_nothing_else():
    passed = {"where": "docs/x.md:3", "title": "ge-plugin ok", "status": "passed", "why": "", "output": ""}
    shown = {"where": "docs/x.md:5", "title": "a: 1", "status": "not run", "why": "yaml: shown", "output": ""}
    failed = {
        "where": "docs/x.md:9",
        "title": "ge-plugin new",
        "status": "failed",
        "why": "exit 1",
        "output": "boom",
    }
    judge("docs/x.md", [passed, shown])
    with pytest.raises(pytest.fail.Exception) as caught:
        judge("docs/x.md", [passed, failed, shown])
    assert str(caught.value) == "docs/x.md:9: ge-plugin new\n    exit 1\n    | boom\n"
