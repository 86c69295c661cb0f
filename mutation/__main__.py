"""``python -m mutation``: break each rule of ``mutation/breaks.toml`` in a scratch copy of the
tree, run the tests named for it there, and report which breaks the tests caught.

Each entry names a file, an exact piece of it (found exactly once, or the entry is reported
stale: the code moved and the entry must follow it), what to put instead, and the tests that
must fail. The tests first run on the unbroken copy (they must pass); then each break is
applied alone, its tests run with the copy first on ``PYTHONPATH`` (so servers and CLIs the
tests start run the broken code too), and the file is restored.

    python -m mutation                 # every entry
    python -m mutation --only cursor   # entries whose rule or file contains "cursor"
    python -m mutation --json          # the results as JSON
    python -m mutation --mutmut        # mutmut's mutants of mutation/mutmut.toml's modules

Exit status: 0 when every break was caught, 1 when one survived or an entry is stale, 2 for a
usage error or tests that fail unbroken.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

from mutation.scratch import scratch_copy

BREAKS = Path(__file__).resolve().parent / "breaks.toml"


@dataclass(frozen=True)
class Break:
    rule: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]


@dataclass
class Outcome:
    rule: str
    file: str
    status: str  # caught, survived, stale, error
    seconds: float
    detail: str = ""


def load(path: Path = BREAKS) -> list[Break]:
    data = tomllib.loads(path.read_text())
    return [
        Break(b["rule"], b["file"], b["find"], b["replace"], tuple(b["tests"]))
        for b in data["break"]
    ]


def run_tests(copy: Path, tests: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(copy / "server"), str(copy), *filter(None, [env.get("PYTHONPATH")])]
    )
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    """pytest's summary line (the last non-blank line of its output, else of its errors)."""
    for text in (done.stdout, done.stderr):
        lines = [line for line in text.splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return ""


def check(copy: Path, entry: Break) -> Outcome:
    path = copy / entry.file
    original = path.read_text()
    found = original.count(entry.find)
    if found != 1:
        return Outcome(entry.rule, entry.file, "stale", 0.0, f"the piece is found {found} times")
    started = time.monotonic()
    path.write_text(original.replace(entry.find, entry.replace))
    try:
        done = run_tests(copy, entry.tests)
    finally:
        path.write_text(original)
    seconds = round(time.monotonic() - started, 1)
    if done.returncode == 1:
        return Outcome(entry.rule, entry.file, "caught", seconds, _last_line(done))
    if done.returncode == 0:
        return Outcome(entry.rule, entry.file, "survived", seconds, _last_line(done))
    return Outcome(entry.rule, entry.file, "error", seconds, _last_line(done))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mutation", description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="entries whose rule or file contains this text")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--breaks", type=Path, default=BREAKS, help="the list of breaks")
    parser.add_argument(
        "--mutmut", action="store_true", help="run mutmut on mutation/mutmut.toml's modules"
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=Path(tempfile.gettempdir()) / "poimen-mutmut",
        help="with --mutmut: where its scratch copies go (kept, for `mutmut browse`)",
    )
    parser.add_argument("--children", type=int, default=1, help="with --mutmut: processes")
    args = parser.parse_args(argv)
    if args.mutmut:
        return _mutmut(args)
    entries = [
        e for e in load(args.breaks) if not args.only or args.only in e.rule or args.only in e.file
    ]
    if not entries:
        print("no entry matches", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="poimen-breaks-") as scratch:
        copy = scratch_copy(Path(scratch))
        every = tuple(dict.fromkeys(t for e in entries for t in e.tests))
        baseline = run_tests(copy, every)
        if baseline.returncode != 0:
            print(f"the tests fail unbroken: {_last_line(baseline)}", file=sys.stderr)
            return 2
        outcomes = []
        for entry in entries:
            outcome = check(copy, entry)
            outcomes.append(outcome)
            if not args.json:
                print(f"{outcome.status:8} {outcome.seconds:6.1f}s  {entry.rule}", flush=True)
    caught = sum(o.status == "caught" for o in outcomes)
    if args.json:
        print(json.dumps([asdict(o) for o in outcomes], indent=2))
    else:
        print(f"\n{caught} of {len(outcomes)} breaks caught")
        for o in outcomes:
            if o.status != "caught":
                print(f"  {o.status}: {o.rule} ({o.file}): {o.detail}")
    return 0 if caught == len(outcomes) else 1


def _mutmut(args: argparse.Namespace) -> int:
    from mutation.mutmut_run import run_target, targets

    tallies = []
    for target in targets():
        if args.only and args.only not in target.module:
            continue
        work = args.work / Path(target.module).stem
        tally = run_target(work, target, args.children)
        tallies.append(tally)
        if not args.json:
            print(
                f"{tally.module}: {tally.mutants} mutants, {tally.killed} killed, "
                f"{tally.survived} survived, {tally.no_tests} without a test that runs them, "
                f"{tally.timeout} timed out ({work})",
                flush=True,
            )
            for name in tally.survivors:
                print(f"  survived: {name}")
    if args.json:
        print(json.dumps([asdict(t) for t in tallies], indent=2))
    return 0 if all(t.survived == 0 for t in tallies) else 1


if __name__ == "__main__":
    sys.exit(main())
