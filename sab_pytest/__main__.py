"""``python -m sab_pytest COMMAND [ARGS]``: the benchmark's commands that are not a pytest run.

Each command is a module with ``main(argv: list[str]) -> int`` (under ``sab_pytest.cli``; ``run``, a
pytest front end, in the pytest layer); it is imported only when named, so ``python -m sab_pytest
--help`` stays fast and one command's optional dependencies never burden another.
"""

from __future__ import annotations

import importlib
import sys

#: command -> (module, one line for --help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("sab_pytest.pytest_layer.main",
            "run the benchmark's cases from any directory (every pytest option passes through)"),
    "merge": ("sab_pytest.cli.merge", "combine the output directories of shards into one run"),
    "report": ("sab_pytest.cli.report", "build the HTML report of a finished run's output directory"),
    "compare": ("sab_pytest.cli.compare", "compare two runs metric by metric, with paired tests"),
    "plan": ("sab_pytest.cli.plan", "cases (and repeats) a run needs for no_regression() to see a given drop"),
    "inspect-log": ("sab_pytest.cli.inspect_log", "write a finished run as an Inspect eval log (inspect view)"),
}


def usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: python -m sab_pytest COMMAND [ARGS]", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    lines += ["", "Run 'python -m sab_pytest COMMAND --help' for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"python -m sab_pytest: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
