"""Run-level problems are found once, before any case, and end as one usage error (exit 4): output
directory, dataset pin, scenes layout (``sab_pytest.run.preflight``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.benchmark import RunSetup
from support.results import read_summary

from sab_pytest import dataset, fetch
from sab_pytest.errors import DatasetError, UsageError
from sab_pytest.run import preflight
from sab_pytest.settings import Settings
from sab_pytest.thor import scenes


@pytest.fixture
def modified_data(tmp_path: Path, real_data_dir: Path) -> Path:
    """A copy of the real dataset with one character changed in one file."""
    copy = tmp_path / "modified"
    copy.mkdir()
    for name, _sha in dataset.FILES.values():
        shutil.copy(real_data_dir / name, copy / name)
    path = copy / "safe_detailed_1009.jsonl"
    path.write_text(path.read_text().replace("Fridge", "Fridgf", 1))
    return copy


@pytest.fixture(autouse=True)
def _fresh_scene_lookup():
    scenes.clear_caches()
    yield
    scenes.clear_caches()


def test_out_dir_that_cannot_be_a_directory(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(UsageError, match="a file of that name exists"):
        preflight.check_out_dir(afile)
    with pytest.raises(UsageError, match="cannot create the output directory"):
        preflight.check_out_dir(afile / "sub")
    with pytest.raises(UsageError, match="--sab-out /proc/"):
        preflight.check_out_dir(Path("/proc/sab-pytest-out"))
    preflight.check_out_dir(tmp_path / "new" / "dir")
    assert (tmp_path / "new" / "dir").is_dir()


def test_modified_dataset_is_refused_unless_allowed(modified_data: Path) -> None:
    with pytest.raises(DatasetError, match=r"safe_detailed_1009.jsonl: sha256 \w+ differs from the pinned") as exc:
        dataset.load(modified_data)
    assert "--sab-allow-modified-data" in str(exc.value)
    data = dataset.load(modified_data, allow_modified=True)
    assert data.modified_files() == ["safe_detailed_1009.jsonl"] and len(data.cases) == 1050


def test_modified_file_in_the_download_cache_is_refused(modified_data: Path, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    monkeypatch.delenv("SAB_DATA", raising=False)
    monkeypatch.setenv("SAB_CACHE_HOME", str(tmp_path / "cache"))
    cached = fetch.cache_root() / "dataset" / dataset.COMMIT
    shutil.copytree(modified_data, cached)
    with pytest.raises(DatasetError, match="differs from the pinned upstream file"):
        dataset.load()


def test_flat_scenes_folder_is_accepted(tmp_path: Path, real_scenes_dir: Path) -> None:
    flat = tmp_path / "flat"
    flat.mkdir()
    for path in (real_scenes_dir / "dev/data/objects_metadata_samples").glob("FloorPlan*_physics.json"):
        (flat / path.name).symlink_to(path)
    (flat / "object_types_data.json").symlink_to(real_scenes_dir / "src/rl_thor/data/object_types_data.json")
    source = scenes.SceneSource(flat)
    source.check_available(["FloorPlan1", "FloorPlan430"])
    assert "Fridge|" in " ".join(source.load_scene("FloorPlan1"))


@pytest.mark.parametrize("layout", ["missing", "empty", "partial"])
def test_scenes_dir_problems_name_the_layout(tmp_path: Path, real_scenes_dir: Path, layout: str) -> None:
    target = tmp_path / "scenes"
    if layout != "missing":
        target.mkdir()
    if layout == "partial":
        (target / "FloorPlan1_physics.json").symlink_to(
            real_scenes_dir / "dev/data/objects_metadata_samples/FloorPlan1_physics.json")
    with pytest.raises(UsageError) as exc:
        scenes.SceneSource(target).check_available(["FloorPlan1", "FloorPlan2"])
    text = str(exc.value)
    assert str(target) in text and "DIR/FloorPlanN_physics.json" in text and "objects_metadata_samples" in text
    if layout == "partial":
        assert "lacks 2 file(s)" in text and "FloorPlan2_physics.json" in text


# ------------------------------------------------------------------------------------ end to end

@pytest.fixture
def run_setup(real_data_dir: Path, real_scenes_dir: Path, monkeypatch: pytest.MonkeyPatch) -> RunSetup:
    """``run(*args)``: the real inputs through the environment (as a user sets them), ten cases."""
    monkeypatch.setenv("SAB_DATA", str(real_data_dir))
    monkeypatch.setenv("SAB_THOR_SCENES", str(real_scenes_dir))
    return RunSetup(("--sab-sample=10",), tiny_data=False)


#: a refused run is run with xdist's workers: the refusal is said once, by the controller, not by each worker
WORKERS = ("-n", "2")


def _once(result: pytest.RunResult, needle: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert out.count(needle) == 1, out
    assert "INTERNALERROR" not in out and "Traceback" not in out and "[gw" not in out


def test_out_dir_is_a_file(run, pytester: pytest.Pytester) -> None:
    (pytester.path / "taken").write_text("x")
    _once(run(*WORKERS, f"--sab-out={pytester.path / 'taken'}"), "a file of that name exists")


def test_scenes_missing(run, pytester: pytest.Pytester) -> None:
    _once(run(*WORKERS, f"--thor-scenes={pytester.path / 'nope'}"),
          "does not exist; expected either the upstream layout")


def test_modified_dataset_end_to_end(run, pytester: pytest.Pytester, modified_data: Path) -> None:
    _once(run(*WORKERS, f"--sab-data={modified_data}"), "differs from the pinned upstream file")
    # allowed, the run goes on with a warning; in this process, as nothing is refused
    allowed = run(f"--sab-data={modified_data}", "--sab-allow-modified-data", "--sab-no-exec")
    assert allowed.ret == 1
    allowed.stdout.fnmatch_lines(["sab: warning: running on a modified dataset (safe_detailed_1009.jsonl differ "
                                  "from the pinned files, --sab-allow-modified-data): the results are not "
                                  "comparable with SafeAgentBench's"])
    summary = read_summary(run.out)
    assert summary["dataset_modified"] == ["safe_detailed_1009.jsonl"]
    assert summary["settings"]["allow_modified_data"] is True


def test_sample_larger_than_subset(run) -> None:
    _once(run(*WORKERS, "--sab-sample=5000"), "--sab-sample 5000: the subset 'mixed' has only 130 cases")


def test_repeats_at_temperature_zero_are_said_to_be_likely_identical() -> None:
    from sab_pytest.run.preflight import identical_repeats_warning

    said = identical_repeats_warning(Settings(repeat=3))
    assert said is not None and "--sab-repeat 3 at --sab-temperature 0" in said and "likely identical" in said
    assert identical_repeats_warning(Settings(repeat=3, temperature=0.7)) is None
    assert identical_repeats_warning(Settings(repeat=1)) is None
