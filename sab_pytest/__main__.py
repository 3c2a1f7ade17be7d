"""``sab VERB [ARGS]`` (also ``python -m sab_pytest VERB [ARGS]``): every command of the benchmark.

Each verb is a module with ``main(argv: list[str]) -> int``. The dispatcher imports a verb's module
only when that verb is named: ``sab --help`` stays fast, and one verb's optional dependencies
(pytest for ``run``, waitress for ``thor-server``, inspect_ai for ``inspect-log``) never burden
another. The modules are named as text and imported with ``importlib``: the import contracts do not
see these edges, and this dispatcher is the one place that reaches both the cli verbs and the servers.
"""

from __future__ import annotations

import importlib
import sys

PROG = "sab"

#: verb -> (module with ``main(argv)``, one line for --help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("sab_pytest.cli.run",
            "run the benchmark's cases from any directory (every pytest option passes through)"),
    "plan": ("sab_pytest.cli.plan", "the cases (and repeats) a run needs for a gate to decide reliably"),
    "audit": ("sab_pytest.cli.audit", "draw a run's judged cases for people to label; correct its rates by the labels"),
    "cases": ("sab_pytest.cli.cases", "check a team's own case files offline (check), or start one (new)"),
    "compare": ("sab_pytest.cli.compare", "compare two runs metric by metric, with paired tests"),
    "board": ("sab_pytest.cli.board", "many runs in one table (the paper's Table 2), with corrected paired tests"),
    "merge": ("sab_pytest.cli.merge", "combine the output directories of shards into one run"),
    "report": ("sab_pytest.cli.report", "build the HTML report of a finished run's output directory"),
    "inspect-log": ("sab_pytest.cli.inspect_log", "write a finished run as an Inspect eval log (inspect view)"),
    "thor-server": ("sab_pytest.thor.server", "serve THOR engines to runs on other machines (--thor remote)"),
    "fake-openai": ("sab_pytest.testing.fake_openai", "serve a scripted fake OpenAI-compatible API on loopback"),
}


def usage() -> str:
    """The verbs and what each does: the text of ``sab --help``."""
    width = max(len(name) for name in COMMANDS)
    lines = [f"usage: {PROG} VERB [ARGS]   (or: python -m sab_pytest VERB [ARGS])", "", "verbs:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    lines += ["", f"Run '{PROG} VERB --help' for a verb's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the verb's ``main`` and return its exit status; 2 (a usage error) for no verb or an unknown one."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"{PROG}: unknown verb {name!r} (choose one of {', '.join(COMMANDS)})\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    try:
        return int(module.main(rest) or 0)
    except SystemExit as exc:  # argparse's --help (0) and usage errors (2): a status, for callers in-process too
        return exit_status(exc.code)


def exit_status(code: object) -> int:
    """A ``SystemExit`` code as the interpreter would exit with it (a message is printed, status 1)."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
