"""``python -m mutation --mutmut``: run mutmut on the targets of ``mutmut.toml``.

mutmut names a mutant by the module path of its file below ``.``, ``src`` or ``source``, and
puts only those first on ``sys.path``; this repository keeps its package in ``server/``. So the
run happens in a scratch copy with ``server/`` at ``src/`` and the mutants' directory first on
``PYTHONPATH`` too, so that the CLIs and servers the tests start import the mutants as well
(mutmut's ``MUTANT_UNDER_TEST`` reaches them through the environment). Each target is its own
mutmut run, with its own tests.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from mutation.scratch import scratch_copy

TARGETS = Path(__file__).resolve().parent / "mutmut.toml"
_COUNTS = re.compile(r"(\d+)/(\d+)\s+🎉 (\d+) 🫥 (\d+)\s+⏰ (\d+)\s+🤔 (\d+)\s+🙁 (\d+)\s+🔇 (\d+)")


@dataclass(frozen=True)
class Target:
    module: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()  # none: every function of the module

    def patterns(self) -> list[str]:
        """mutmut's names of the mutants of ``functions`` (``Class.method`` for a method)."""
        dotted = self.module.removeprefix("server/").removesuffix(".py").replace("/", ".")
        names = []
        for function in self.functions:
            cls, _, name = function.rpartition(".")
            mangled = f"x\u01c1{cls}\u01c1{name}" if cls else f"x_{name}"
            names.append(f"{dotted}.{mangled}__mutmut_*")
        return names


@dataclass
class Tally:
    module: str
    mutants: int
    killed: int
    no_tests: int
    timeout: int
    suspicious: int
    survived: int
    skipped: int
    survivors: list[str]


def targets(path: Path = TARGETS) -> list[Target]:
    data = tomllib.loads(path.read_text())
    return [
        Target(t["module"], tuple(t["tests"]), tuple(t.get("functions", ())))
        for t in data["target"]
    ]


def _config(target: Target, children: int) -> str:
    module = "src/" + target.module.removeprefix("server/")
    tests = ", ".join(f'"{t}"' for t in target.tests)
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["src/poimen_memory"]\n'
        f'only_mutate = ["{module}"]\n'
        'also_copy = ["tests", "bench", "mutation", "examples", "editors", "docs", '
        '"README.md", "mkdocs.yml"]\n'
        f"pytest_add_cli_args_test_selection = [{tests}]\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider"]\n'
        f"max_children = {children}\n"
        # The tests start servers and git processes; a fork server keeps their exits away from
        # the waits of mutmut's own process (with plain forks it reaps them and stops).
        'process_isolation = "forkserver"\n'
    )


def run_target(work: Path, target: Target, children: int) -> Tally:
    """One mutmut run in ``work`` (made afresh), its counts and surviving mutants."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    scratch_copy(work)
    (work / "server").rename(work / "src")
    with (work / "pyproject.toml").open("a") as handle:
        handle.write(_config(target, children))
    (work / "mutants" / "src").mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(work / "mutants" / "src"))
    done = subprocess.run(
        [sys.executable, "-m", "mutmut", "run", *target.patterns()],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    found = _COUNTS.findall(done.stdout.replace("\r", "\n"))
    if done.returncode != 0 or not found:
        tail = (done.stdout + done.stderr).replace("\r", "\n").strip().splitlines()[-5:]
        raise RuntimeError(f"mutmut failed on {target.module}: " + " | ".join(tail))
    _, total, killed, no_tests, timeout, suspicious, survived, skipped = map(int, found[-1])
    listed = subprocess.run(
        [sys.executable, "-m", "mutmut", "results"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    survivors = [
        line.split(":")[0].strip() for line in listed.splitlines() if line.endswith(": survived")
    ]
    return Tally(
        target.module, total, killed, no_tests, timeout, suspicious, survived, skipped, survivors
    )
