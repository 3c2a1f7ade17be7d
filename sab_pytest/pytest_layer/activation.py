"""When the pytest plugin is on, and command lines pytest would misread. Plain functions of the
command line, so the rule can be read and tested without running pytest.

The plugin is installed with an entry point, so it loads in every pytest run of its environment,
including projects that never run the benchmark. There it must change nothing. One rule decides,
on the controller at configure time (before any collection, which an xdist controller never does)
and identically on every xdist worker (workers get the same arguments, environment and ini file):

    The plugin is on when the run asks for the benchmark: one of its own options is given (on the
    command line, in ``PYTEST_ADDOPTS`` or in the ini file's ``addopts``), or the run collects a
    path listed in the ini setting ``sab_cases`` (a bare ``pytest`` whose ``testpaths`` name it,
    ``pytest cases``, ``pytest .``, a node id inside it), or a path written on its command line is
    or holds a team's own case file (``*.sab.yaml``, ``*.sab.jsonl``).

As a fallback, a collected test that requests the ``sab_case`` fixture in a run where the rule said
off turns the plugin on in that process (late: the checks made before any case are skipped).
"""

from __future__ import annotations

import contextlib
import fnmatch
import itertools
import os
import shlex
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path


def names_option(args: Iterable[str], option_names: Iterable[str]) -> str | None:
    """The first of ``option_names`` written in ``args`` (``--opt`` or ``--opt=value``), else None.

    pytest turns argparse's abbreviations off, so an option is only ever spelled in full.
    """
    names = tuple(option_names)
    for arg in args:
        if arg == "--":
            return None
        head = arg.split("=", 1)[0]
        if head in names:
            return head
    return None


def _collect_path(arg: str, invocation_dir: Path) -> Path:
    return (invocation_dir / arg.split("::", 1)[0]).resolve()


def collects_cases(collect_args: Iterable[str], invocation_dir: Path, case_paths: Iterable[Path]) -> bool:
    """Whether collecting ``collect_args`` reaches one of ``case_paths`` (a path equal to, inside, or
    above one of them)."""
    cases = [Path(p).resolve() for p in case_paths]
    for arg in collect_args:
        path = _collect_path(arg, invocation_dir)
        for case in cases:
            if path == case or case in path.parents or path in case.parents:
                return True
    return False


def split_path_options(args: Sequence[str], path_options: Iterable[str]) -> list[tuple[str, str]]:
    """``(option, value)`` for each path option written with a space (``--sab-out DIR``)."""
    names = set(path_options)
    return [(opt, value) for opt, value in itertools.pairwise(args) if opt in names and not value.startswith("-")]


def split_path_message(split: list[tuple[str, str]], found: Path | None, expected: Path | None, *,
                       known: bool = True, created: bool = False) -> str:
    """The usage error for a path option written with a space that changed pytest's rootdir or ini
    file (``known=False``: this pytest does not let us tell, so the safe spelling is asked for;
    ``created``: the change comes once the run has created the path, as xdist's workers see it)."""
    opt, value = split[0]
    spelled = " ".join(f"{o}={v}" for o, v in split)
    when = "once the run creates that path, it changes" if created else "here that changed"
    effect = (f"{when} its configuration (rootdir or ini file: {found or 'no ini file'} instead of "
              f"{expected or 'no ini file'}), so it would collect other tests" if known
              else "that can change which tests it collects")
    return (f"{opt} {value}: pytest takes a path written after a space into its search for the rootdir and "
            f"ini file before it knows the option, and {effect}. Write {spelled} (with '=').")


@contextlib.contextmanager
def made_for_a_moment(paths: Iterable[Path]) -> Iterator[list[Path]]:
    """Create the missing ``paths`` as directories for the block, then remove what was created.

    pytest leaves a path that does not exist out of its rootdir and ini search; the run creates its
    output paths before xdist starts the workers, which then search again and see them. To tell
    what they will see, the check looks while the paths exist. Yields the paths that were missing.
    """
    missing = [path for path in paths if not path.exists()]
    made: list[Path] = []
    try:
        for path in missing:
            for folder in [*reversed(path.parents), path]:
                if not folder.exists():
                    folder.mkdir()
                    made.append(folder)
        yield missing
    finally:
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()


def env_addopts() -> list[str]:
    """``PYTEST_ADDOPTS`` split as pytest splits it."""
    return shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))


#: how a team's own case file is named (``owncases.files.SUFFIXES``, written again here: this module is
#: imported in every pytest run of the environment, the reader of the files only in runs that have some)
CASE_FILE_SUFFIXES = (".sab.yaml", ".sab.yml", ".sab.jsonl")
#: folders never searched for case files (pytest's own defaults of ``norecursedirs`` and the like)
_NOT_SEARCHED = frozenset({"node_modules", "__pycache__", "venv", "build", "dist", "CVS", "_darcs"})


def holds_case_files(path: Path, skip_dirs: Iterable[str] = ()) -> bool:
    """Whether ``path`` is a team's own case file or a folder holding one (searched below, hidden
    folders and ``skip_dirs`` left out); stops at the first found."""
    if path.is_file():
        return path.name.endswith(CASE_FILE_SUFFIXES)
    patterns = [*_NOT_SEARCHED, *skip_dirs]
    try:
        for _root, dirs, names in os.walk(path):
            if any(name.endswith(CASE_FILE_SUFFIXES) for name in names):
                return True
            dirs[:] = [d for d in dirs if not searched_not(d, patterns)]
    except OSError:
        return False
    return False


def searched_not(name: str, patterns: Iterable[str]) -> bool:
    """Whether a folder of this name is left out of the search for case files: hidden, or matching one
    of ``patterns`` (pytest's ``norecursedirs`` globs)."""
    return name.startswith(".") or any(fnmatch.fnmatch(name, p) for p in patterns)


def own_cases_only(path: Path) -> bool:
    """Whether ``path`` holds a team's own cases and no test module: a case file, or a folder with
    case files and no ``.py`` file of its own (a ``sab_cases`` entry that is not the paper's module)."""
    if path.is_file():
        return path.name.endswith(CASE_FILE_SUFFIXES)
    try:
        names = [child.name for child in path.iterdir()]
    except OSError:
        return False
    return not any(n.endswith(".py") for n in names) and holds_case_files(path)


def collects_case_files(collect_args: Iterable[str], invocation_dir: Path, skip_dirs: Iterable[str] = ()) -> bool:
    """Whether one of the paths written on the command line is, or holds, a team's own case file."""
    return any(holds_case_files(_collect_path(arg, invocation_dir), skip_dirs) for arg in collect_args)
