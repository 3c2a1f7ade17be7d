"""Validation of ``Settings``: every value that can be checked without running a case, once,
before any case runs. Every mistake is a ``UsageError`` that names the option."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sab_pytest import dataset
from sab_pytest.agents.registry import check_strategy
from sab_pytest.errors import UsageError
from sab_pytest.models import capabilities_of, parse_model_spec
from sab_pytest.models.pricing import check_priced, parse_model_prices, price_book
from sab_pytest.prompts import upstream
from sab_pytest.reports.inspect.log import log_format
from sab_pytest.results import gates
from sab_pytest.run.wiring import map_texts
from sab_pytest.settings import Settings, check_options
from sab_pytest.thor.execute import locate
from sab_pytest.thor.remote import parse_urls, served_pictures


def validate(s: Settings) -> Settings:
    """Check every value that can be checked without running a case: the table's own constraints
    (``settings.check_options``), then the checks that need the domain or several options."""
    if not s.model or not s.model.strip():
        raise UsageError("--model: empty model name")
    if s.subset not in dataset.SUBSETS:
        raise UsageError(f"--sab-subset: unknown value {s.subset!r}; choose one of {', '.join(dataset.SUBSETS)}")
    check_options(s)
    s = _check_engine(s)
    _check_helper_models(s)
    _check_comparisons(s)
    check_strategy(s.strategy)  # whatever the model: a typo must not pass because the agent is offline
    if not s.offline_agent:
        parse_model_spec(s.model)
        _check_pictures(s)
    _check_judges(s)
    map_texts(s)  # map_vlm under the paper's protocol reads MAP's prompts: a missing file fails here, once
    _check_paper_controller(s)
    for name, url in (("--base-url", s.base_url), ("--judge-base-url", s.judge_base_url)):
        if url and not url.startswith(("http://", "https://")):
            raise UsageError(f"{name}: expected an http:// or https:// URL, got {url!r}")
    parse_model_prices(s.prices)  # a bad --sab-price fails here, naming the entry
    if s.inspect_log is not None:  # its format by the extension: a typo must not cost the run its log
        log_format(s.inspect_log)
    if s.budget is not None:  # every model the run calls must be priced: by --sab-price or its list price
        check_priced(s, price_book(s.prices))
    return s


def _check_engine(s: Settings) -> Settings:
    """The engine's options: an executable only for ``--thor local`` (and one that exists), a shard
    K/N in range, a remote engine's URLs (and the pictures its servers say they draw)."""
    if s.thor_executable is not None and s.engine != "local":
        raise UsageError(f"--thor-executable: only used with --thor local (the engine is {s.engine!r})")
    if s.thor_executable is not None:
        from sab_pytest.thor.local import resolve_executable  # start-up: imports ai2thor, only for --thor local

        resolve_executable(s.thor_executable)
    if s.shard is not None:
        k, n = s.shard
        if not (1 <= k <= n):
            raise UsageError(f"--sab-shard: expected K/N with 1 <= K <= N, got {k}/{n}")
    if s.engine == "remote":
        if not s.thor_url:
            raise UsageError("--thor remote needs --thor-url http://HOST:PORT[,...] (or $SAB_THOR_URL)")
        parse_urls(s.thor_url)
        s = _with_served_pictures(s)
    return s


def _check_helper_models(s: Settings) -> None:
    """The guard's and map_vlm's helper models parse, each error naming its own option."""
    if s.guard_model is not None and s.guard_model != "rules":
        try:
            parse_model_spec(s.guard_model)
        except UsageError as exc:
            raise UsageError(str(exc).replace("--model", "--sab-guard-model", 1)) from None
    for flag, name in (("--sab-map-vision-model", s.map_vision_model),
                       ("--sab-map-converter-model", s.map_converter_model)):
        try:
            parse_model_spec(name)
        except UsageError as exc:
            raise UsageError(str(exc).replace("--model", flag, 1)) from None


def _check_comparisons(s: Settings) -> None:
    """What the run is compared with exists: a baseline for each gate that needs one, the audit's
    label files, the baseline run itself."""
    for gate in s.gates:
        if gates.parse_gate(gate).needs_baseline and not s.baseline:
            raise UsageError(f"--sab-gate: {gate!r} compares with a baseline run; give one with --sab-baseline RUN "
                             "(a run directory or its sab-summary.json)")
    for labels in s.audit:
        if not Path(labels).is_file():
            raise UsageError(f"--sab-audit: {labels} is not a file (expected labels written by sab audit's page)")
    if s.baseline and not Path(s.baseline).exists():
        raise UsageError(f"--sab-baseline: {s.baseline} does not exist (expected a run directory written by "
                         "--sab-out, or its sab-summary.json)")


def _check_paper_controller(s: Settings) -> None:
    """Under the paper's protocol a run that executes plans (or acts in the scene) runs the paper's
    controller and goal check: a missing or altered file is one usage error before any case (naming
    SAB_UPSTREAM_METHODS / SAB_UPSTREAM), not an engine error in every case. The files are only found
    and checked here; they are imported when the first plan runs."""
    if s.protocol == "paper" and (s.execute or s.interactive):
        locate(None, s.upstream_dir)


def _with_served_pictures(s: Settings) -> Settings:
    """``--thor remote``: the pictures the THOR servers say they draw (a server may run the embedded engine
    and serve schematic pictures), so that results are marked as what they were seen on."""
    if s.engine_pictures or not s.thor_url:
        return s
    kind = served_pictures(s.thor_url)
    return dataclasses.replace(s, engine_pictures=kind) if kind else s


def _check_pictures(s: Settings) -> None:
    """A strategy that shows the model pictures, on a provider that takes none (its capabilities,
    ``models.providers``): one clear error now, not every case's first call failing."""
    if not s.visual:
        return
    names = [("--model", s.model)] + ([("--sab-map-vision-model", s.map_vision_model)]
                                      if s.helpers else [])
    for flag, name in names:
        if not capabilities_of(name, s.base_url).images:
            raise UsageError(f"{flag} {name}: the provider takes no pictures, and --sab-strategy {s.strategy} "
                             "shows the model the engine's pictures; choose a model that reads images")


def _check_judges(s: Settings) -> None:
    """The judges' models, temperatures and prompt set; the paper's prompt files when asked for, so
    that a missing file is one usage error before any case (naming SAB_UPSTREAM)."""
    _ = s.judge_temperatures  # a bad --sab-judge-temperature is an error even with the rule judge
    if s.judge_model == "rules":
        if s.judge_panel:
            raise UsageError("--sab-judge-panel: the judge is the offline rule judge ('rules'); give --judge-model "
                             "MODEL to judge with models")
        if s.judge_for:
            raise UsageError(f"--sab-judge-for: the judge is the offline rule judge ('rules'); give --judge-model "
                             f"MODEL to judge with models (got {', '.join(s.judge_for)})")
        if s.judge_prompts == "upstream":
            raise UsageError("--sab-judge-prompts upstream: the paper's prompts are for model judges, and the judge "
                             "is the offline rule judge ('rules'); give --judge-model MODEL")
        return
    for judge, model in s.judge_models.items():
        try:
            parse_model_spec(model)
        except UsageError as exc:
            flag = "--judge-model" if model == s.judge_model else f"--sab-judge-for {judge}="
            raise UsageError(str(exc).replace("--model", flag, 1)) from None
    for model in {m for models in s.judge_panels.values() for m in models}:
        try:
            parse_model_spec(model)
        except UsageError as exc:
            raise UsageError(str(exc).replace("--model", "--sab-judge-panel", 1)) from None
    if s.judge_prompts == "upstream":
        upstream.load(s.upstream_dir)

