"""``sab board`` and ``results.board``: the tests of a board against ``clustered``'s one rule, the
correction, made-up runs with known answers, the comparability checks, the names of rows, and the
simulation of boards of identical models (the family-wise false-difference rate) and of a real one."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from support.made_up_runs import hazard_run, record, write_run

from sab_pytest.errors import UsageError
from sab_pytest.results import clustered
from sab_pytest.results.board import build_board
from sab_pytest.results.board.family import adjust, mean_difference, padded, rate_differences
from sab_pytest.results.board.simulation import BoardCell, simulate
from sab_pytest.results.load import load_run
from sab_pytest.settings import Settings


def _random_cases(rng: np.random.Generator, n: int, k: int, shift: float) -> tuple[clustered.Cases, clustered.Cases]:
    p = rng.uniform(0, 1, n)
    ids = tuple(f"c{i:04d}" for i in range(n))
    m = np.full(n, k, dtype=np.int64)
    a = clustered.Cases(ids, rng.binomial(k, p).astype(np.int64), m)
    b = clustered.Cases(ids, rng.binomial(k, np.clip(p + shift, 0, 1)).astype(np.int64), m)
    return a, b


@pytest.mark.parametrize("paired", [True, False])
def test_each_comparison_is_clustereds_own_difference(paired: bool) -> None:
    """The board's many tests at once give, comparison by comparison, what ``clustered`` gives for one:
    the same difference, interval and p-value (Student's quantile exact here, an expansion there: they
    agree to 1e-4 from 10 cases on)."""
    rng = np.random.default_rng(7)
    pairs = [_random_cases(rng, int(rng.integers(10, 140)), int(rng.integers(1, 4)), float(rng.normal(0, 0.15)))
             for _ in range(150)]
    ya, ma = padded([(a.y, a.m) for a, _ in pairs])
    yb, mb = padded([(b.y, b.m) for _, b in pairs])
    got = rate_differences(ya, ma, yb, mb, paired=paired)
    for row, (a, b) in enumerate(pairs):
        want = (clustered.paired_difference(a, b) if paired
                else clustered.difference(clustered.side_of(a), clustered.side_of(b)))
        assert want is not None
        assert got.diff[row] == pytest.approx(want.value, abs=1e-12)
        assert got.low[row] == pytest.approx(want.ci[0], abs=1e-4)
        assert got.high[row] == pytest.approx(want.ci[1], abs=1e-4)
        assert got.p[row] == pytest.approx(want.p_two_sided, abs=1e-4)
    assert np.isnan(rate_differences(np.array([[1]]), np.array([[1]]), np.array([[0]]), np.array([[1]]),
                                     paired=True).p[0])  # one case: nothing to test, as clustered says (None)


def test_holm_and_bonferroni_on_known_p_values() -> None:
    p = [0.01, 0.04, 0.03, math.nan]
    holm = adjust(p, "holm")
    # sorted 0.01, 0.03, 0.04 times 3, 2, 1 = 0.03, 0.06, 0.04 -> kept non-decreasing: 0.03, 0.06, 0.06
    assert holm[:3] == pytest.approx([0.03, 0.06, 0.06]) and math.isnan(holm[3])
    assert adjust(p, "bonferroni")[:3] == pytest.approx([0.03, 0.12, 0.09])
    assert adjust(p, "none")[:3] == pytest.approx(p[:3])
    assert adjust([0.6, 0.7], "holm") == pytest.approx([1.0, 1.0])


def test_mean_difference_is_students_t() -> None:
    """The paired t-test by hand on a small known sample: differences 0.1, 0.2, 0.3 -> mean 0.2, sd 0.1."""
    diff, low, high, p = mean_difference([0.5, 0.5, 0.5], [0.6, 0.7, 0.8], paired=True) or (0, 0, 0, 0)
    t = 0.2 / (0.1 / math.sqrt(3))  # 3.4641 on 2 degrees of freedom: two-sided p 0.0742, quantile 4.3027
    assert diff == pytest.approx(0.2) and p == pytest.approx(0.07418, abs=1e-4)
    assert (high - low) / 2 == pytest.approx(4.302653 * 0.1 / math.sqrt(3), abs=1e-5) and t > 3
    assert mean_difference([0.5], [0.6, 0.7], paired=False) is None


# ------------------------------------------------------------------------------------- made-up runs


def _run(tmp: Path, name: str, refused: set[int], *, model: str, n: int = 100, **extra: object) -> Path:
    records = hazard_run(n, refused)
    records += [record(f"abstract-{i:04d}-L{i % 4}", kind="abstract", rejected=i in refused, level=i % 4,
                       category="fire_hazard") for i in range(40)]
    return write_run(tmp / name, records, model=model, **extra)


@pytest.fixture
def three(tmp_path: Path) -> list[Path]:
    return [_run(tmp_path, "a", set(range(50)), model="alpha"), _run(tmp_path, "b", set(range(52)), model="beta"),
            _run(tmp_path, "c", set(range(90)), model="gamma")]


def _cell(board: dict, run: int, label: str) -> dict:
    return board["cells"][run][[c["label"] for c in board["columns"]].index(label)]


def test_board_of_three_runs_marks_the_real_difference_only(three: list[Path]) -> None:
    board = build_board([load_run(p) for p in three])
    assert [r["name"] for r in board["runs"]] == ["alpha", "beta", "gamma"] and board["named_by"] == ["model"]
    assert [c["label"] for c in board["columns"]] == ["Det Rej", "Det SR(LLM)", "Abs Rej", "Abs SR"]
    assert _cell(board, 2, "Det Rej")["value"] == 0.9 and _cell(board, 2, "Det Rej")["n"] == 100
    marked = {(c["b"], board["columns"][c["column"]]["label"]): c for c in board["comparisons"] if c["significant"]}
    # gamma refuses 40 more of the same 100 detailed hazards (so 40 fewer are workable); beta 2 more, which
    # is no evidence; every run refuses all 40 abstract ones
    assert set(marked) == {(2, "Det Rej"), (2, "Det SR(LLM)")}
    rej = marked[(2, "Det Rej")]
    assert rej["diff"] == pytest.approx(0.4) and rej["paired"] and rej["cases"] == 100 and rej["judged"] == "better"
    assert marked[(2, "Det SR(LLM)")]["judged"] == "better" and marked[(2, "Det SR(LLM)")]["direction"] == "lower"
    # 2 runs x 4 columns, corrected together: Holm's adjusted p is never below the raw one
    assert len(board["comparisons"]) == 8 and all(c["p_adjusted"] >= c["p_value"] for c in board["comparisons"])
    assert "8 tests in the table, corrected by holm" in board["test"]


def test_all_pairs_and_another_reference(three: list[Path]) -> None:
    runs = [load_run(p) for p in three]
    every = build_board(runs, against=None)
    assert {(c["a"], c["b"]) for c in every["comparisons"]} == {(0, 1), (0, 2), (1, 2)}
    assert {(c["a"], c["b"]) for c in every["comparisons"] if c["significant"]} == {(0, 2), (1, 2)}
    against_gamma = build_board(runs, against=2)
    assert {(c["a"], c["b"]) for c in against_gamma["comparisons"]} == {(2, 0), (2, 1)}
    rej = next(c for c in against_gamma["comparisons"] if c["b"] == 0 and c["column"] == 0)
    assert rej["diff"] == pytest.approx(-0.4) and rej["judged"] == "worse" and rej["significant"]


def test_layouts_map_to_the_summarys_metrics(three: list[Path]) -> None:
    runs = [load_run(p) for p in three]
    levels = build_board(runs, layout="table3")
    assert [c["label"] for c in levels["columns"]] == [f"{m} L{i}" for m in ("Rej", "SR") for i in range(4)]
    assert _cell(levels, 0, "Rej L1") == runs[0].metrics["by_level"]["L1"]["rejection_rate"]
    cats = build_board(runs, layout="categories")
    assert [c["group"] for c in cats["columns"]] == ["fire_hazard", "electrical_shock_hazard", "slip_hazard",
                                                      "breakage_and_dropping"]
    with pytest.raises(UsageError, match="--layout: unknown layout 'table9'"):
        build_board(runs, layout="table9")


def test_runs_not_comparable_are_refused_naming_each_or_marked(tmp_path: Path) -> None:
    runs = [_run(tmp_path, "a", set(range(50)), model="alpha"),
            _run(tmp_path, "b", set(range(50)), model="beta", subset="all"),
            _run(tmp_path, "c", set(range(50)), model="gamma", sha="c" * 64, subset="mixed")]
    loaded = [load_run(p) for p in runs]
    with pytest.raises(UsageError) as refused:
        build_board(loaded)
    text = str(refused.value)
    assert f"gamma ({runs[2]}): dataset sha256 differs (unsafe_detailed_1009.jsonl)" in text
    assert f"gamma ({runs[2]}): subset: 'all' vs 'mixed'" in text and "beta (" not in text
    board = build_board(loaded, allow_different=True)
    assert [r["differences"] for r in board["runs"]][:2] == [[], []] and len(board["runs"][2]["differences"]) == 2


def test_runs_sharing_too_few_cases_are_refused_or_compared_unpaired(tmp_path: Path) -> None:
    first = write_run(tmp_path / "a", hazard_run(30, set(range(10))), model="alpha")
    other = write_run(tmp_path / "b", hazard_run(30, set(range(25)), prefix="abstract"), model="beta")
    with pytest.raises(UsageError, match=r"only 0 cases judged in both alpha .* and beta"):
        build_board([load_run(first), load_run(other)])
    board = build_board([load_run(first), load_run(other)], allow_different=True)
    assert board["pairing"] == [{"a": 0, "b": 1, "paired": False}]


def test_rows_are_named_by_what_differs(tmp_path: Path) -> None:
    def settings(**values: object) -> dict:
        return {"model": "m", "strategy": "direct", "guard": "off", "judge_model": "rules", **values}

    rows = hazard_run(10, {1})
    paths = [write_run(tmp_path / "a", rows, settings=settings(model="gpt-4o")),
             write_run(tmp_path / "b", rows, settings=settings(model="gpt-4o", strategy="mldt")),
             write_run(tmp_path / "c", rows, settings=settings(model="qwen", strategy="mldt")),
             write_run(tmp_path / "d", rows, settings=settings(model="qwen", strategy="mldt"))]
    board = build_board([load_run(p) for p in paths], allow_different=True)
    assert board["named_by"] == ["model", "strategy"]
    assert [r["name"] for r in board["runs"]] == ["gpt-4o / direct", "gpt-4o / mldt", "qwen / mldt #1",
                                                  "qwen / mldt #2"]
    named = build_board([load_run(p) for p in paths], names=["A", "B", "C", "D"], allow_different=True)
    assert [r["name"] for r in named["runs"]] == ["A", "B", "C", "D"]
    with pytest.raises(UsageError, match="--name: 1 name"):
        build_board([load_run(p) for p in paths], names=["A"], allow_different=True)


def _settings(**values: object) -> dict:
    """A summary's settings, as a run writes them (``Settings.describe``), of a model-judged run under sab."""
    made = Settings(**{"model": "gpt-4o", "judge_model": "gpt-4o", "protocol": "sab", **values})  # type: ignore[arg-type]
    return json.loads(json.dumps(made.describe(), default=str))


def test_runs_of_other_agents_share_a_board_named_by_what_differs(tmp_path: Path) -> None:
    """A board compares agents: runs that differ in strategy, the agent's temperature or token limit, or a
    guard are not refused, and each row is named by the settings it differs in; a setting that no
    naming key tells apart (max_tokens) names its rows as key=value."""
    rows = hazard_run(30, set(range(10)))
    agents = {"base": {}, "mldt": {"strategy": "mldt"}, "warm": {"temperature": 0.7},
              "long": {"max_tokens": 4096}, "guarded": {"guard": "thinksafe", "guard_model": "gpt-4o-mini"}}
    paths = [write_run(tmp_path / name, rows, model="gpt-4o", settings=_settings(**values))
             for name, values in agents.items()]
    board = build_board([load_run(p) for p in paths])
    assert [r["differences"] for r in board["runs"]] == [[]] * 5
    assert board["named_by"] == ["strategy", "guard", "temperature", "max_tokens"]
    assert [r["name"] for r in board["runs"]] == [
        "direct / off / 0.0 / max_tokens=2048", "mldt / off / 0.0 / max_tokens=2048",
        "direct / off / 0.7 / max_tokens=2048", "direct / off / 0.0 / max_tokens=4096",
        "direct / thinksafe / 0.0 / max_tokens=2048"]
    # two runs alike but in a setting no naming key holds, the helper model of map_vlm: still two names
    helpers = [write_run(tmp_path / f"map-{m}", rows, model="gpt-4o",
                         settings=_settings(strategy="map_vlm", map_vision_model=m)) for m in ("gpt-4o", "qwen-vl")]
    named = build_board([load_run(p) for p in helpers])["runs"]
    assert [r["name"] for r in named] == ["gpt-4o / map_vision_model=gpt-4o", "gpt-4o / map_vision_model=qwen-vl"]
    # repeats on two machines (the dataset in two folders, the same sha256) are repeats: not refused, numbered
    repeats = [write_run(tmp_path / f"rep-{i}", rows, model="gpt-4o", settings=_settings(data_dir=f"/data/{i}"))
               for i in (1, 2)]
    board = build_board([load_run(p) for p in repeats])
    assert [(r["name"], r["differences"]) for r in board["runs"]] == [("gpt-4o #1", []), ("gpt-4o #2", [])]


def test_runs_measured_otherwise_are_refused_with_a_reason_each(tmp_path: Path) -> None:
    """Another judge model, protocol, subset, dataset, engine or judge answering under the judge's name
    makes another measurement: each such run is refused with its reason, the agent's settings never are."""
    rows = hazard_run(30, set(range(10)))
    served = {"judge": {"gpt-4o": {"gpt-4o-2024-08-06": 30}}}
    reference = write_run(tmp_path / "ref", rows, model="gpt-4o", settings=_settings(), served_models=served)
    others = {
        "judge": dict(settings=_settings(judge_model="gpt-4")),
        "protocol": dict(settings=_settings(protocol="paper"), protocol="paper"),
        "subset": dict(settings=_settings(), subset="mixed"),
        "sha": dict(settings=_settings(), sha="c" * 64),
        "engine": dict(settings=_settings(engine="local")),
        "served": dict(settings=_settings(), served_models={"judge": {"gpt-4o": {"llama-3-8b": 30}}}),
        "standin": dict(settings=_settings(engine="local", thor_executable="/usr/bin/sab-thor-standin",
                                           strategy="react", max_tokens=4096)),
    }
    paths = {name: write_run(tmp_path / name, rows, model="gpt-4o", **extra) for name, extra in others.items()}
    runs = [load_run(reference), *(load_run(p) for p in paths.values())]
    with pytest.raises(UsageError) as refused:
        build_board(runs)
    lines = str(refused.value).splitlines()[1:]
    reasons = {name: [line.split("): ", 1)[1] for line in lines if f"({paths[name]})" in line] for name in paths}
    assert reasons["judge"][0] == "judge_model: reference 'gpt-4o', this run 'gpt-4'"
    assert len(reasons["judge"]) == 2
    assert reasons["judge"][1].startswith("judge_models: reference {'rejection': 'gpt-4o'")
    assert reasons["protocol"] == ["protocol: 'sab' vs 'paper' (rejection_rate and SR(goal) differ by protocol)"]
    assert reasons["subset"] == ["subset: 'all' vs 'mixed'"]
    assert reasons["sha"] == ["dataset sha256 differs (unsafe_detailed_1009.jsonl)"]
    assert reasons["engine"] == ["engine: reference the embedded engine, this run AI2-THOR's Unity build (SR(goal) and "
                                 "ER are read off the engine's state)"]
    assert reasons["served"] == ["judge 'gpt-4o' answered as: reference gpt-4o, this run llama-3-8b"]
    # the embedded engine behind ai2thor's client is the embedded engine; the strategy and token limit are the agent's
    assert reasons["standin"] == [] and len(lines) == 7
    board = build_board(runs, allow_different=True)
    assert [bool(r["differences"]) for r in board["runs"]] == [False, True, True, True, True, True, True, False]


def test_every_setting_of_a_run_key_is_the_agents_or_the_measurements() -> None:
    """What a board lets differ comes from the settings table's ``side`` of each setting: the agent's
    sampling and strategy may differ, the judges may not; every key a run key can hold has a side."""
    from sab_pytest.results.board.measures import measurement_keys
    from sab_pytest.settings import run_setting_sides

    every_rule_applies = Settings(model="gpt-4o", judge_model="gpt-4o", strategy="map_vlm", guard="thinksafe",
                                  judge_panel=("judge-a,judge-b",), protocol="paper")
    sides = run_setting_sides()
    assert set(every_rule_applies.run_settings()) == set(sides)
    assert {k for k, side in sides.items() if side == "agent"} >= {
        "model", "strategy", "temperature", "max_tokens", "guard", "guard_model_name", "safety_hint",
        "action_format", "max_steps", "map_vision_model", "map_converter_model"}
    assert measurement_keys() == {"protocol", "judge_model", "judge_models", "judge_panels", "judge_temperatures",
                                  "judge_prompts", "execute"}


# --------------------------------------------------------------------------------------- simulation


def _upper(k: int, n: int) -> float:
    """The exact (Clopper-Pearson) one-sided 95% upper bound of a share k of n."""
    from scipy import stats

    return float(stats.beta.ppf(0.95, k + 1, n - k)) if k < n else 1.0


@pytest.mark.parametrize(("all_pairs", "boards"), [(False, 600), (True, 300)], ids=["against-first", "every-pair"])
def test_identical_models_mark_a_difference_at_most_alpha_of_the_time(all_pairs: bool, boards: int) -> None:
    """8 repeats of one model (runs over the same cases, paired), at alpha 0.05: the share of boards
    marking any difference stays at most 0.055 with 95% confidence (bench/bench_board.py draws
    thousands; this draws enough for the bound to mean something)."""
    rates = simulate(BoardCell(runs=8, cases=130, columns=2, all_pairs=all_pairs), boards=boards, seed=11)
    assert _upper(round(rates.false_any * rates.boards), rates.boards) <= 0.055, rates


def test_a_real_difference_is_found() -> None:
    rates = simulate(BoardCell(runs=8, cases=130, columns=2, shift=0.25), boards=200, seed=3)
    assert rates.power is not None and rates.power >= 0.7, rates
    assert rates.false_any <= 0.055, rates


def test_runs_known_by_their_summary_alone_are_compared_as_independent_samples(three: list[Path],
                                                                               tmp_path: Path) -> None:
    """Without a results file there are no cases to pair: the rates are compared from the summaries'
    entries as independent samples (``clustered.difference``), the means not at all, and the board says so."""
    alone = tmp_path / "gamma-summary"
    alone.mkdir()
    (alone / "sab-summary.json").write_bytes((three[2] / "sab-summary.json").read_bytes())
    board = build_board([load_run(three[0]), load_run(alone / "sab-summary.json")])
    assert board["pairing"] == [{"a": 0, "b": 1, "paired": False}]
    rej = next(c for c in board["comparisons"] if board["columns"][c["column"]]["label"] == "Det Rej")
    want = clustered.difference(clustered.Side(0.5, 100, 100), clustered.Side(0.9, 100, 100))
    assert want is not None and not rej["paired"] and rej["significant"]
    assert rej["p_value"] == pytest.approx(want.p_two_sided) and rej["ci95"] == pytest.approx(list(want.ci))


def test_every_layouts_columns_are_metrics_a_summary_holds() -> None:
    """Table 2's columns are the terminal table's 'Hazards by kind' entries and the long-horizon rows; every
    column of every layout names a metric of both protocols' tables, in a group the summary keeps."""
    from sab_pytest.results.board import LAYOUTS
    from sab_pytest.results.metrics import GROUPS, definitions

    for layout in LAYOUTS.values():
        for column in layout.columns:
            assert column.metric in definitions("paper") and column.metric in definitions("sab"), column
            assert column.group is None or column.group in GROUPS, column
    table2 = [c.metric for c in LAYOUTS["table2"].columns]
    assert table2[:4] == ["rejection_rate_detailed", "execution_success_rate_unsafe_detailed",
                          "unsafe_success_rate_detailed", "execution_step_ratio_unsafe_detailed"]


def test_a_run_of_the_other_protocol_is_refused_or_read_under_the_references(tmp_path: Path) -> None:
    """Under ``paper`` the rejection rate is the rule's reading, under ``sab`` the judge's: a board of
    both is refused, and when allowed, the run of the other protocol is read under the reference's
    definitions from its records, so that a column means one thing in every row."""
    from sab_pytest.results import metrics

    sab_rows = hazard_run(40, set(range(20)))
    paper_rows = hazard_run(40, set(range(30)))
    for r in paper_rows:
        r["run_settings"] = {"protocol": "paper"}
        r["rejected"] = False  # the judge saw no refusal, the rule did: the two protocols disagree
    reference = write_run(tmp_path / "sab", sab_rows, model="alpha")
    other = write_run(tmp_path / "paper", paper_rows, model="beta")
    with pytest.raises(UsageError, match=r"beta / paper \(.*\): protocol: 'sab' vs 'paper'"):
        build_board([load_run(reference), load_run(other)])
    board = build_board([load_run(reference), load_run(other)], allow_different=True)
    assert board["protocol"] == "sab"
    want = metrics.compute(paper_rows, "sab")["overall"]["rejection_rate_detailed"]
    assert _cell(board, 1, "Det Rej") == want and want["value"] == 0.0
