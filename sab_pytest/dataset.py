"""SafeAgentBench dataset: locate, download, verify, load, validate, expand and sample -> ``Case``.

The four JSONL files are pinned to the original repository at one commit and checked by sha256 on
download; they are never committed here. Every record is validated; a bad line is reported with
file, line and field. Abstract records expand to four cases (levels 0..3, concrete to abstract).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from sab_pytest import categories, fetch
from sab_pytest.errors import DatasetError, UsageError

KINDS = ("unsafe_detailed", "safe_detailed", "abstract", "long_horizon")
SUBSETS = ("mixed", "unsafe", "safe", "all")

COMMIT = "38ca3ab27eb8a5f5034a50bdcc5cbab23ce8f089"
URL_PATTERN = "https://raw.githubusercontent.com/shengyin1224/SafeAgentBench/{commit}/dataset/{name}"
FILES: dict[str, tuple[str, str]] = {  # kind -> (file name, sha256 at COMMIT)
    "unsafe_detailed": ("unsafe_detailed_1009.jsonl",
                        "3ac0f9a3ec3ff80ffdc0870e102e15aca7f7ee2092cebde12be7096d1ade4500"),
    "safe_detailed": ("safe_detailed_1009.jsonl",
                      "891368d2dac63ba2587e56eec8f02f45a68c4fa8fa2cc02629951dd5f00b58ca"),
    "abstract": ("abstract_1009.jsonl", "9e82e82509912227df4b9c8386c919bc2cc46c7077cf0b3e57fb06d2c68cc862"),
    "long_horizon": ("long_horizon_1009.jsonl",
                     "af5e78b1a6faca8b420480406464299f93886aa40fbafafd6770ae7ab957f434"),
}
LAYOUT = "a directory holding the four files " + ", ".join(name for name, _ in FILES.values()) + (
    " (the upstream repository's dataset/ folder, unchanged)")
HOW_TO_PROVIDE = (
    f"Provide {LAYOUT} with --sab-data=DIR or SAB_DATA=DIR, "
    "or run once with network access so they are downloaded and cached"
)
ALLOW_MODIFIED_OPTION = "--sab-allow-modified-data"

#: the default mix (reference port's composition): per-category unsafe, safe, abstract records, LH
MIX = {"unsafe_per_category": 5, "safe": 30, "abstract_records": 10, "long_horizon": 10}

_SCENE = re.compile(r"^FloorPlan\d+$")
_STATE_KEYS = {
    "objectType", "isToggled", "isBroken", "isFilledWithLiquid", "isDirty", "isUsedUp", "isCooked",
    "isSliced", "isOpen", "isPickedUp", "isMoving", "parentReceptacles", "receptacleObjectIds",
}


@dataclass(frozen=True)
class Case:
    """One evaluation case.

    ``id`` is ``<kind>-<row:04d>`` (``-L<level>`` for abstract), the row being the 0-based record
    number in its file, so the same record has the same id in every subset and on every worker.
    ``final_state`` is the task's goal (list of per-object property dicts) or None.
    """

    id: str
    kind: str  # one of KINDS
    safety: str  # "unsafe" (unsafe_detailed, abstract, long_horizon) or "safe"
    instruction: str
    reference_steps: tuple[str, ...]
    scene: str  # "FloorPlan12"
    final_state: tuple[dict[str, Any], ...] | None
    risk_category: str | None  # a slug of categories.SLUGS or None
    risk_label_raw: str | None
    abstraction_level: int | None  # 0 (concrete) .. 3 (most abstract) for abstract cases
    row: int
    #: with ``--sab-repeat K`` (K > 1) the sample's number, 1..K; 0 when the case runs once
    repeat: int = 0
    #: where the case is written: its dataset file (an absolute path) and 1-based line, which reporters
    #: show as the test's location; not part of what the case is (the same record read from another
    #: directory is the same case)
    source: tuple[str, int] | None = field(default=None, compare=False)
    #: the suite of a team's own case (``owncases.files``: its file's name), None for the paper's cases
    suite: str | None = None
    #: the hazard's objects as the record names them (``objects``), kept for own cases' checks
    objects: tuple[str, ...] = field(default=(), compare=False)

    @property
    def sample_id(self) -> str:
        """The id of this run of the case: the case id, with ``-r<N>`` for a repeat (``--sab-repeat``)."""
        return f"{self.id}-r{self.repeat}" if self.repeat else self.id

    def __repr__(self) -> str:
        """The sample id: reporters that show a test's parameters (allure's ``sab_case``) show this, and
        the dataclass's own repr (every field, the goal state included) runs to hundreds of characters."""
        return f"Case({self.sample_id})"

    @property
    def expects_refusal(self) -> bool:
        """True where refusing is the right behaviour (hazardous detailed and abstract tasks)."""
        return self.kind in ("unsafe_detailed", "abstract")

    def meta(self) -> dict[str, Any]:
        """The JSON-safe description of the case that goes into every result record."""
        return {
            "id": self.id, "kind": self.kind, "safety": self.safety, "scene": self.scene,
            "risk_category": self.risk_category, "risk_label_raw": self.risk_label_raw,
            "abstraction_level": self.abstraction_level, "row": self.row,
            "instruction": self.instruction, "has_final_state": self.final_state is not None,
            # a team's own case: its suite, and its reference plan, which no dataset file holds for a
            # reader of the records (the Inspect sample's target, the audit page)
            **({"suite": self.suite, "reference_steps": list(self.reference_steps)} if self.suite is not None else {}),
        }


@dataclass(frozen=True)
class Dataset:
    """All cases of the four files plus provenance (directory and per-file sha256)."""

    directory: Path
    cases: tuple[Case, ...]
    sha256: dict[str, str]
    unmapped_labels: dict[str, int]  # raw label -> number of records not in the 10 categories

    def by_id(self) -> dict[str, Case]:
        return {c.id: c for c in self.cases}

    def modified_files(self) -> list[str]:
        """Names of the files whose sha256 differs from the pinned upstream file."""
        pins = dict(FILES.values())
        return sorted(name for name, digest in self.sha256.items() if pins.get(name) != digest)


# ---------------------------------------------------------------------------------------------- locate

def pinned_files() -> list[fetch.PinnedFile]:
    return [fetch.PinnedFile(name, URL_PATTERN.format(commit=COMMIT, name=name), sha)
            for name, sha in FILES.values()]


def locate(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Directory holding the four files: explicit option, ``SAB_DATA``, the cache, or a download."""
    override = data_dir or os.environ.get("SAB_DATA")
    if override:
        path = Path(override).expanduser()
        if not path.is_dir():
            what = "is not a directory" if path.exists() else "does not exist"
            raise DatasetError(f"dataset directory {path} (from --sab-data/SAB_DATA) {what}; expected {LAYOUT}")
    else:
        path = None
    found = fetch.resolve(pinned_files(), override=path, cache_dir=fetch.cache_root() / "dataset" / COMMIT,
                          what="SafeAgentBench dataset", how_to_provide=HOW_TO_PROVIDE)
    return next(iter(found.values())).parent


# ------------------------------------------------------------------------------------------- validate

def _fail(path: Path, line: int, message: str) -> DatasetError:
    return DatasetError(f"{path}:{line}: {message}")


def _require(record: dict[str, Any], field: str, kind: type | tuple[type, ...], path: Path, line: int,
             *, nullable: bool = False) -> Any:
    if field not in record:
        raise _fail(path, line, f"missing field '{field}'")
    value = record[field]
    if value is None and nullable:
        return None
    if not isinstance(value, kind) or isinstance(value, bool):
        expected = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise _fail(path, line, f"field '{field}': expected {expected}, got {type(value).__name__}")
    return value


def _str_list(record: dict[str, Any], field: str, path: Path, line: int, *, length: int | None = None) -> list[str]:
    value = _require(record, field, list, path, line)
    if not all(isinstance(v, str) for v in value):
        raise _fail(path, line, f"field '{field}': expected a list of strings")
    if length is not None and len(value) != length:
        raise _fail(path, line, f"field '{field}': expected {length} entries, got {len(value)}")
    return value


def _final_state(record: dict[str, Any], path: Path, line: int) -> tuple[dict[str, Any], ...] | None:
    value = record.get("final_state")
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise _fail(path, line, "field 'final_state': expected a non-empty list of objects or null")
    for i, entry in enumerate(value):
        if not isinstance(entry, dict) or not isinstance(entry.get("objectType"), str):
            raise _fail(path, line, f"field 'final_state[{i}]': expected an object with a string 'objectType'")
        unknown = set(entry) - _STATE_KEYS
        if unknown:
            raise _fail(path, line, f"field 'final_state[{i}]': unknown properties {sorted(unknown)}")
    return tuple(value)


def _records(path: Path) -> Iterable[tuple[int, int, dict[str, Any]]]:
    """(row, line number, record) for each non-blank line; blank lines and a missing final newline are fine."""
    row = 0
    with open(path, encoding="utf-8") as fh:
        for lineno, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                what = exc.msg.removesuffix(" at")  # "Unterminated string starting at" names no place itself
                raise _fail(path, lineno, f"invalid JSON ({what} at column {exc.colno})") from None
            if not isinstance(record, dict):
                raise _fail(path, lineno, f"expected a JSON object, got {type(record).__name__}")
            yield row, lineno, record
            row += 1


def parse_file(kind: str, path: Path) -> list[Case]:
    """Validate one file and turn its records into cases."""
    cases: list[Case] = []
    for row, line, rec in _records(path):
        scene = _require(rec, "scene_name", str, path, line)
        if not _SCENE.match(scene):
            raise _fail(path, line, f"field 'scene_name': {scene!r} is not an iTHOR scene name (FloorPlanN)")
        steps: tuple[str, ...] = ()
        if kind != "long_horizon":
            steps = tuple(_str_list(rec, "step", path, line))
        raw_label = None
        if kind in ("unsafe_detailed", "abstract"):
            raw_label = _require(rec, "risk_category", str, path, line)
        final_state = None if kind == "long_horizon" else _final_state(rec, path, line)
        common = dict(kind=kind, reference_steps=steps, scene=scene, final_state=final_state,
                      risk_category=categories.normalise(raw_label), risk_label_raw=raw_label, row=row,
                      source=(str(path.absolute()), line))
        safety = "safe" if kind == "safe_detailed" else "unsafe"
        if kind == "abstract":
            for level, text in enumerate(_str_list(rec, "instruction", path, line, length=4)):
                cases.append(Case(id=f"abstract-{row:04d}-L{level}", safety=safety, instruction=text.strip(),
                                  abstraction_level=level, **common))
        else:
            text = _require(rec, "instruction", str, path, line)
            cases.append(Case(id=f"{kind}-{row:04d}", safety=safety, instruction=text.strip(),
                              abstraction_level=None, **common))
    return cases


@lru_cache(maxsize=4)
def _load_dir(directory: Path) -> Dataset:
    cases: list[Case] = []
    digests: dict[str, str] = {}
    unmapped: dict[str, int] = defaultdict(int)
    for kind, (name, _sha) in FILES.items():
        path = directory / name
        if not path.is_file():
            raise DatasetError(f"{path}: file not found. {HOW_TO_PROVIDE}")
        digests[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        parsed = parse_file(kind, path)
        cases.extend(parsed)
        for case in parsed:
            if case.risk_label_raw is not None and case.risk_category is None and case.abstraction_level in (None, 0):
                unmapped[case.risk_label_raw] += 1
    return Dataset(directory=directory, cases=tuple(cases), sha256=digests, unmapped_labels=dict(unmapped))


def load(data_dir: str | os.PathLike[str] | None = None, *, allow_modified: bool = False) -> Dataset:
    """Locate (download if needed) and load the whole dataset: 1050 cases for the pinned files.

    Every file must be the pinned upstream file, wherever it comes from (``--sab-data``, ``SAB_DATA``,
    the download cache): results on a changed copy are not SafeAgentBench results. ``allow_modified``
    accepts such a copy on purpose (own test data, a corrected record); the summary says so.
    """
    data = _load_dir(locate(data_dir).resolve())
    modified = data.modified_files()
    if modified and not allow_modified:
        name = modified[0]
        raise DatasetError(
            f"{data.directory / name}: sha256 {data.sha256[name]} differs from the pinned upstream file "
            f"({dict(FILES.values())[name]})" + (f"; {len(modified) - 1} more file(s) differ" if len(modified) > 1
                                                  else "")
            + f". Restore the pinned files, or pass {ALLOW_MODIFIED_OPTION} to run on a modified copy")
    return data


# ------------------------------------------------------------------------------------------- sampling

def _order(cases: Iterable[Case]) -> list[Case]:
    rank = {k: i for i, k in enumerate(KINDS)}
    return sorted(cases, key=lambda c: (rank[c.kind], c.row, c.abstraction_level or 0))


def _mixed(cases: Sequence[Case], rng: random.Random) -> list[Case]:
    """5 unsafe detailed per category, 30 safe, 10 abstract records x 4 levels, 10 long-horizon."""
    picked: list[Case] = []
    unsafe = [c for c in cases if c.kind == "unsafe_detailed"]
    for slug in categories.SLUGS:
        bucket = [c for c in unsafe if c.risk_category == slug]
        picked += rng.sample(bucket, min(MIX["unsafe_per_category"], len(bucket)))
    safe = [c for c in cases if c.kind == "safe_detailed"]
    picked += rng.sample(safe, min(MIX["safe"], len(safe)))
    abstract_rows = sorted({c.row for c in cases if c.kind == "abstract"})
    rows = set(rng.sample(abstract_rows, min(MIX["abstract_records"], len(abstract_rows))))
    picked += [c for c in cases if c.kind == "abstract" and c.row in rows]
    lh = [c for c in cases if c.kind == "long_horizon"]
    picked += rng.sample(lh, min(MIX["long_horizon"], len(lh)))
    return picked


def _largest_remainder(sizes: dict[Any, int], n: int, rng: random.Random, floor: int = 0) -> dict[Any, int]:
    """``n`` split over groups of the given sizes in proportion to them (largest remainder), each
    group first given ``floor`` (or all it has, if less) when ``n`` allows that for every group.
    Equal remainders are ordered by ``rng``: by name, a small sample would always take the same
    categories whatever the seed."""
    keys = sorted(sizes)
    base = {k: min(floor, sizes[k]) for k in keys}
    if sum(base.values()) > n:
        base = dict.fromkeys(keys, 0)
    rest = n - sum(base.values())
    room = {k: sizes[k] - base[k] for k in keys}
    total = sum(room.values())
    quotas = {k: rest * room[k] / total if total else 0.0 for k in keys}
    alloc = {k: base[k] + int(quotas[k]) for k in keys}
    ties = {k: rng.random() for k in keys}
    by_remainder = sorted(keys, key=lambda k: (-round(quotas[k] - int(quotas[k]), 9), ties[k]))
    for k in by_remainder[: n - sum(alloc.values())]:
        alloc[k] += 1
    return alloc


def _stratified(cases: Sequence[Case], n: int, rng: random.Random) -> list[Case]:
    """A proportional sample of ``n`` cases: first over kinds, at least one case of every kind when
    ``n`` allows it (a 12-case sample of the mixed subset would otherwise hold no abstract case: its
    40 cases are spread over 40 small strata, each losing the rounding), then within each kind over
    its strata (category, abstraction level), largest remainder."""
    by_kind: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        by_kind[case.kind].append(case)
    per_kind = _largest_remainder({k: len(v) for k, v in by_kind.items()}, n, rng, floor=1)
    picked: list[Case] = []
    for kind in sorted(by_kind):
        strata: dict[tuple[str, int], list[Case]] = defaultdict(list)
        for case in by_kind[kind]:
            strata[(case.risk_category or "", case.abstraction_level or 0)].append(case)
        alloc = _largest_remainder({k: len(v) for k, v in strata.items()}, per_kind[kind], rng)
        for key in sorted(strata):
            picked += rng.sample(strata[key], alloc[key])
    return picked


def select(dataset: Dataset, subset: str = "mixed", *, sample: int | None = None, seed: int = 42) -> list[Case]:
    """The cases of a subset, optionally sampled, in a stable order (identical on every xdist worker)."""
    if subset not in SUBSETS:
        raise UsageError(f"--sab-subset: unknown value {subset!r}; choose one of {', '.join(SUBSETS)}")
    if sample is not None and sample < 1:
        raise UsageError(f"--sab-sample: expected a positive number of cases, got {sample}")
    rng = random.Random(seed)
    cases = _order(dataset.cases)
    if subset == "mixed":
        chosen = _mixed(cases, rng)
    elif subset == "safe":
        chosen = [c for c in cases if c.safety == "safe"]
    elif subset == "unsafe":
        chosen = [c for c in cases if c.safety == "unsafe"]
    else:
        chosen = cases
    chosen = _order(chosen)
    if sample is not None and sample > len(chosen):
        raise UsageError(f"--sab-sample {sample}: the subset {subset!r} has only {len(chosen)} cases; give "
                         f"--sab-sample {len(chosen)} or less, or a larger --sab-subset")
    if sample is not None and sample < len(chosen):
        chosen = _order(_stratified(chosen, sample, rng))
    return chosen
