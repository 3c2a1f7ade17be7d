"""The per-process runtime: builds the agent, the judge and the engines from ``Settings`` once, and
evaluates cases with them. Plain Python; the pytest layer holds one per xdist worker.

Everything is built lazily: a run of offline agents never imports the openai SDK, and an engine
is started only when a case needs one: a case with a goal state that is executed, or any case of
an interactive strategy (react, basic, pca, map_vlm), which acts in the engine whatever the goal.
``evaluate`` is thread-safe: the case runner calls it for several cases at once, and a case leases
an engine of its own from a small pool, an episode for its whole length, a text plan only while it
is executed (the pool grows to the most leases ever held at once; the embedded engines share the
parsed scene templates of ``thor.scenes``, one per process and scene directory).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from sab_pytest.cache import ResponseCache
from sab_pytest.errors import STOP_KINDS, ErrorKind, InfraError, UsageError
from sab_pytest.models import (
    PREFLIGHT_TIMEOUT_S,
    CallContext,
    ChatClient,
    ClientOptions,
    RunServices,
    add_failures,
    run_endpoints,
    usage_totals,
)
from sab_pytest.models import for_case as model_for_case
from sab_pytest.models.endpoints import role_endpoint
from sab_pytest.models.pricing import BudgetGate, make_gate
from sab_pytest.models.wire import AGENT_URL_HINT
from sab_pytest.results import StoredRecord, from_verdict
from sab_pytest.results.cost import UNRECORDED_CALLS, priced_fields
from sab_pytest.run.batch_mode import batching_clients, priced_usd, unsupported
from sab_pytest.run.breaker import not_run
from sab_pytest.run.capacity import Capacity
from sab_pytest.run.slots import CallSlots, Pace
from sab_pytest.run.wiring import Wiring, role_models
from sab_pytest.scoring import Verdict, evaluate, failed_verdict
from sab_pytest.settings import PAPER_JUDGE_MAX_TOKENS, Settings
from sab_pytest.thor.remote import RemoteEngine, token_from_env
from sab_pytest.thor.scenes import SceneSource

if TYPE_CHECKING:
    from sab_pytest.agents import Agent
    from sab_pytest.dataset import Case
    from sab_pytest.judge import Judge
    from sab_pytest.models import ChatModel, RunEndpoints
    from sab_pytest.run.breaker import RunState
    from sab_pytest.run.case_runner import CaseRunner
    from sab_pytest.run.wiring import RoleModels
    from sab_pytest.thor import Engine


CASES_PER_CALL_SLOT = 4
#: the options that name the judges' and the agent's endpoints, in the spelling every environment has
JUDGE_URL_OPTION = "--sab-judge-base-url"
AGENT_URL_OPTION = "--sab-base-url"


#: the option that names a role's model, by the role's last word ("detailed judge", "map_vlm vision")
MODEL_OPTIONS = {"judge": "--judge-model / --sab-judge-for JUDGE=MODEL", "guard": "--sab-guard-model",
                 "vision": "--sab-map-vision-model", "converter": "--sab-map-converter-model"}


def unlisted_model(role: str, name: str, server: str, served: list[str]) -> str:
    """The usage error of a role whose model the endpoint does not list, naming both and the ways out."""
    shown = ", ".join(served[:8]) + (f" and {len(served) - 8} more" if len(served) > 8 else "")
    kind = role.split()[-1]
    where = JUDGE_URL_OPTION if kind in ("judge", "guard") else AGENT_URL_OPTION
    which = MODEL_OPTIONS[kind]
    return (f"the {role}'s model {name!r} is not among the models {server} lists ({shown}): that server would "
            f"answer it as another model, or not at all. Give {where} URL of an endpoint that serves {name!r}, or "
            f"{which} a model this one lists; no case was run")


def cases_at_once(settings: Settings) -> int:
    """How many cases a process's runner runs at once.

    With model calls, ``CASES_PER_CALL_SLOT`` times ``--sab-concurrency``: the calls in flight are
    bounded by the call slots, and the more cases wait for a slot, the better the slots are used
    (none idles while a case is between two calls, and a worker's last cases do not start late and
    run their chains alone). But an episode holds its engine from start to end: on a real AI2-THOR
    (``--thor local`` or ``remote``) an engine is a Unity process, so episodes run
    ``--sab-concurrency`` at a time there. Offline a case is CPU only, and ``--sab-concurrency``
    cases at once is already more than enough.
    """
    if not settings.uses_api or (settings.interactive and settings.engine != "sim"):
        return settings.concurrency
    return settings.concurrency * CASES_PER_CALL_SLOT


class EnginePool:
    """Engines for cases running at once: ``acquire`` hands out an idle one or starts a new one, so
    two running cases never share an engine and the pool grows only to the most engines ever
    leased at once. An engine released as broken (it failed mid-case) is stopped, not handed out
    again. With ``keep_idle`` False every engine is stopped when released: an engine leased from a
    THOR server is shared by every process of the run (and other runs), and one kept idle here
    would starve another worker, which then waits for a lease and fails ("every engine is leased")
    while this one sits on two."""

    def __init__(self, make: Callable[[], Engine], *, keep_idle: bool = True) -> None:
        self._make = make
        self._keep_idle = keep_idle
        self._idle: list[Engine] = []
        self._all: list[Engine] = []
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        """Engines started and not stopped (for tests and the bench)."""
        with self._lock:
            return len(self._all)

    def acquire(self) -> Engine:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        engine = self._make()
        with self._lock:
            self._all.append(engine)
        return engine

    @contextlib.contextmanager
    def lease(self) -> Iterator[Engine]:
        """An engine for the block; one that failed in it (an engine ``InfraError``, or any
        exception that is not an ``InfraError``) is released as broken."""
        engine = self.acquire()
        broken = False
        try:
            yield engine
        except InfraError as exc:
            broken = exc.kind == ErrorKind.ENGINE
            raise
        except BaseException:
            broken = True
            raise
        finally:
            self.release(engine, broken=broken)

    def release(self, engine: Engine, *, broken: bool = False) -> None:
        with self._lock:
            if not broken and self._keep_idle:
                self._idle.append(engine)
                return
            if engine in self._all:
                self._all.remove(engine)
        with contextlib.suppress(Exception):
            engine.stop()

    def close(self) -> None:
        with self._lock:
            engines, self._all, self._idle = self._all, [], []
        for engine in engines:
            with contextlib.suppress(Exception):
                engine.stop()


class Runtime:
    """``breaker``: the run's shared breaker and stop signal, handed to every model client.
    ``run_store``: with the response cache off, a directory the run's processes share for the
    length of the run, so that each distinct model call is still made once (see the plugin's
    ``CaseDistribution``)."""

    def __init__(self, settings: Settings, breaker: RunState | None = None, run_store: Path | None = None) -> None:
        self.settings = settings
        self.breaker = breaker
        self.run_store = run_store
        self.engines = EnginePool(self._start_engine, keep_idle=settings.engine != "remote")
        # every model request of this process takes one; how many are open is shared by the run's
        # processes (``pace.json`` in the run directory) and shrinks while the endpoint rate-limits
        self.call_slots = CallSlots(settings.concurrency,
                                    Pace(breaker.directory / "pace.json" if breaker is not None else None),
                                    Capacity(settings.concurrency, start=2))  # grows while the server keeps up
        self.runner: CaseRunner[Case, StoredRecord] | None = None  # set by ``start_runner``
        # set when the run stops (the case runner's ``stop``): each case's model context watches it,
        # so running cases start no new model call or retry
        self.stop = threading.Event()
        #: a wall-clock limit per case and its name (the pytest layer sets pytest-timeout's ``--timeout``),
        #: and when an item began to wait for a case (by sample id): a case started only after its item
        #: asked for it (no runner thread was free) has the rest of the item's time, not the whole limit
        self.case_limit: tuple[float, str] | None = None
        self.waited_since: dict[str, float] = {}

    @property
    def cases_at_once(self) -> int:
        return cases_at_once(self.settings)

    # ----------------------------------------------------------------------------------- building

    @cached_property
    def endpoints(self) -> RunEndpoints:
        """Each role's endpoint, resolved once for the run (``models.endpoints``): the clients, the
        endpoint check and the batching read it."""
        return run_endpoints(self.settings)

    def chat_model(self, role: str, name: str, *, judge: str = "rejection",
                   temperature: float | None = None) -> ChatModel:
        """The client of model ``name`` for the agent (``role="agent"``), a judge or the guard (a
        ``wiring.ModelMaker``: ``wiring.role_models`` says which roles exist), on the role's endpoint
        (``endpoints``: the judges' and the guard's is not the agent's own server unless the user says so).

        Each judge (``settings.JUDGES``) has its own temperature (the paper's by default). map_vlm's
        vision agents and converter are agent models on the agent's endpoint at a ``temperature`` of
        their own.
        """
        s = self.settings
        store = s.cache_dir or self.run_store
        try:
            endpoint = self.endpoints.of(role, name)
        except KeyError:  # a role the run's endpoints do not list (a caller of its own): resolved alike
            endpoint = role_endpoint(s, role, name)
        options = ClientOptions(
            temperature=s.judge_temperatures[judge] if role == "judge" else (
                s.temperature if temperature is None else temperature),
            max_tokens=PAPER_JUDGE_MAX_TOKENS if role == "judge" else s.max_tokens,
            timeout=s.timeout_s, max_retries=s.max_retries, rate_limit_wait=s.rate_limit_wait_s)
        services = RunServices(
            cache=ResponseCache(store) if store else None, breaker=self.breaker, slots=self.call_slots,
            pace_dir=self.breaker.directory if self.breaker is not None else None,
            spending=self.budget_gate)
        return ChatClient(endpoint, options, services)

    @cached_property
    def budget_gate(self) -> BudgetGate | None:
        """``--sab-budget``'s gate, asked before every live request: one for all of the process's clients (the
        spent total is the run state's, shared with the other processes)."""
        return make_gate(self.settings, self.breaker)

    @cached_property
    def models(self) -> RoleModels:
        """The process's clients, by role (none for a run without models)."""
        return role_models(self.settings, self.chat_model)

    @property
    def agent_model(self) -> ChatModel | None:
        return self.models.agent

    @property
    def judge_models(self) -> Mapping[str, ChatModel]:
        """judge -> its client (none with the rule judge)."""
        return self.models.judges

    @property
    def judge_model(self) -> ChatModel | None:
        """The rejection judge's client (the judge a run is named after; under ``paper``, where none is
        asked, the first judge's), none with the rule judge."""
        return self.models.judges.get("rejection") or next(iter(self.models.judges.values()), None)

    @property
    def guard_model(self) -> ChatModel | None:
        return self.models.guard

    @cached_property
    def wiring(self) -> Wiring:
        return Wiring(self.settings)

    @cached_property
    def agent(self) -> Agent:
        """The agent on the process's models, bound to no case (a run without models uses it as it is)."""
        return self.wiring.agent(self.models)

    @cached_property
    def judge(self) -> Judge:
        return self.wiring.judge(self.models)

    def for_case(self, context: CallContext) -> tuple[Agent, Judge]:
        """The agent and the judge of one case: the process's models, each bound to the case's
        ``context`` (its budget, failure log, the run's stop, its repeat). A run without models
        uses ``agent`` and ``judge`` as they are."""
        if not self.models.api:
            return self.agent, self.judge
        return self.wiring.case(self.models.bound(lambda model: model_for_case(model, context)), context)

    def _start_engine(self) -> Engine:
        try:
            return make_engine(self.settings)
        except InfraError:
            raise  # already says what failed (a remote engine: no server reachable, no free engine)
        except Exception as exc:  # a simulator that cannot start is infrastructure
            raise InfraError("engine", f"could not start the {self.settings.engine} engine: {exc}") from exc

    def preflight(self) -> list[str]:
        """Fail once, clearly, before any case, when a model endpoint cannot work (missing or
        rejected key, unreachable URL, HTTP 5xx or garbage to a chat call, no answer at all), or
        serves another model than a role names.

        One tiny chat call per endpoint (base URL + API key), not per model: agent and judge on the
        same endpoint pay one call. Then each endpoint is asked which models it serves (``GET
        /models``, where it answers that): a judge, guard or map_vlm helper model it does not list is
        a usage error naming both, since a server that answers any model name as its own (llama.cpp)
        would have the model under test grade itself under the judge's name. The agent's own model is
        not held to the list (a server may serve it under an alias); each answer's ``model`` field is
        recorded instead. Returns the endpoints checked (URLs, never keys). The THOR server is
        checked apart, by ``run.preflight.check_engines``.
        """
        timeout = min(self.settings.timeout_s, PREFLIGHT_TIMEOUT_S)
        seen: set[tuple[str, str]] = set()
        checked: list[str] = []
        for model in self.models.api:
            if not isinstance(model, ChatClient):  # offline: no endpoint to check
                continue
            endpoint = (model.server, os.environ.get(model.api_key_env) or model.api_key_env)
            if endpoint in seen:
                continue
            seen.add(endpoint)
            try:
                model.preflight(timeout=timeout)
            except UsageError as exc:
                raise self._judges_endpoint_error(model, exc) from None
            checked.append(model.server)
        listed: dict[str, list[str] | None] = {}
        for role, model in self._held_to_the_list():
            if not isinstance(model, ChatClient):
                continue
            if model.server not in listed:
                listed[model.server] = model.list_models(timeout)
            served = listed[model.server]
            if served is not None and model.name not in served:
                raise UsageError(unlisted_model(role, model.name, model.server, served))
        if self.settings.batch:  # a provider without a Batch API: said before the first case
            for problem in unsupported(batching_clients(self)):
                raise UsageError(problem)
        return checked

    def _held_to_the_list(self) -> list[tuple[str, ChatModel]]:
        """(role as a user names it, model) of every model that must be one the endpoint lists: the
        judges (a judge with a panel by its panel's models, its own never being called), the guard and
        map_vlm's helpers (the agent's own model is not held to it)."""
        m = self.models
        held: list[tuple[str, ChatModel]] = [(f"{judge} judge", model) for judge, model in m.called_judges.items()]
        held += [(f"{judge} judge", model) for judge, models in m.panels.items() for model in models]
        held += [(role, model) for role, model in (("guard", m.guard), ("map_vlm vision", m.vision),
                                                    ("map_vlm converter", m.converter)) if model is not None]
        return held

    def _judges_endpoint_error(self, model: ChatModel, exc: UsageError) -> UsageError:
        """A failed check of the judges' endpoint, where it is not the agent's, says so: the URL to check
        is the judges' option, and a user who gave ``--base-url`` alone learns why the judges went elsewhere."""
        s = self.settings  # every model checked but the agent's is a judge's or the guard's
        if model is self.models.agent or s.judges_url == s.base_url:
            return exc
        text = str(exc).replace(f"check {AGENT_URL_HINT}", f"check {JUDGE_URL_OPTION}")
        return UsageError(f"{text} (this is the judges' endpoint: OpenAI's API unless {JUDGE_URL_OPTION} is given, "
                          f"since the paper's judges are OpenAI's models and {AGENT_URL_OPTION} names the agent's "
                          f"endpoint alone; give {JUDGE_URL_OPTION} URL to judge elsewhere)")

    # ---------------------------------------------------------------------------------- running

    def context(self, case: Case) -> CallContext:
        """A new context for ``case``'s model calls (agent, guard and judges): its time budget
        (none for offline runs), its failure log, the run's stop and the case's repeat."""
        budget = self.settings.case_budget_s if self.settings.uses_api else None
        limit_s, limit_name = self.case_limit or (None, "wall-time limit")
        since = self.waited_since.pop(case.sample_id, None)
        if limit_s is not None and since is not None:
            limit_s = max(0.0, limit_s - (time.monotonic() - since))
        return CallContext.start(budget, stop=self.stop, repeat=case.repeat, limit_s=limit_s, limit_name=limit_name)

    def evaluate(self, case: Case) -> Verdict:
        """Run ``case`` end to end (agent or episode, execution, judges) within its time budget,
        on an engine of its own: for the whole episode of an interactive strategy, for the plan's
        execution alone otherwise (a text planner's case holds no engine while it waits for a
        model, so the pool stays as small as the executions at once). Thread-safe; an ``InfraError`` becomes
        ``Verdict.error``, it is never raised. Failed model requests are counted on the verdict."""
        engine = None
        if self.settings.interactive:  # an episode acts in its engine from the first step to the end
            try:
                engine = self.engines.acquire()
            except InfraError as exc:
                return failed_verdict(case, exc)
        verdict: Verdict | None = None
        context = self.context(case)
        try:
            agent, judge = self.for_case(context)
            with self.call_slots.case():
                verdict = evaluate(case, agent, judge, engine, execute=self.settings.execute, lease=self.engines.lease,
                                   paper=self.settings.protocol == "paper", using=self.wiring.spec.limits.using())
            verdict.failures = context.failures
        finally:
            if engine is not None:  # an engine that failed mid-case is stopped, not handed out again
                self.engines.release(engine, broken=verdict is None or verdict.error_kind == ErrorKind.ENGINE)
            self._keep_usage(verdict, context)
        return verdict

    def _keep_usage(self, verdict: Verdict | None, context: CallContext) -> None:
        """A case the run's stop cut short (cancelled, or a stop's error kind) leaves no record: its
        calls' usage goes to the run's state, which the summary adds in: the calls were made and
        billed, and a stopped run must not report fewer calls than the server answered."""
        kind = None if verdict is None else verdict.error_kind or ErrorKind.of_message(verdict.error)
        if self.breaker is None or (verdict is not None and kind not in STOP_KINDS):
            return
        failures = context.failures
        if context.made or failures.failed_attempts or failures.rate_limited or failures.abandoned:
            calls = [c.to_dict() for c in context.made]
            usage = add_failures(usage_totals(calls), failures)
            usage[UNRECORDED_CALLS] = priced_fields(calls)  # what they cost, per role and model, in the summary
            self.breaker.unrecorded(usage)

    def run_case(self, case: Case) -> StoredRecord:
        """``evaluate`` as the record the results file keeps (stamped with the run's key and
        settings, which ``--sab-resume`` checks). A finished case is also kept in the run
        directory (``RunState.keep``): the runner works ahead of pytest's items, and a run that
        stops before this case's item reports it must not lose it."""
        stop = self.breaker.stopped() if self.breaker is not None else None
        # a stopped run starts no case (an offline agent makes no model call that would notice)
        verdict = failed_verdict(case, stop.error()) if stop is not None else self.evaluate(case)
        record = from_verdict(verdict, run_key=self.settings.run_key(), run_settings=self.settings.run_settings())
        if self.breaker is not None and not not_run(record):
            self.breaker.keep(record)
            self._count_engine(case, record)
            if self.settings.budget is not None and self.settings.batch:  # live calls are priced as they are made
                self.breaker.spend(priced_usd(self.settings, record), self.settings.budget)  # at the batch price
        return record

    def _count_engine(self, case: Case, record: StoredRecord) -> None:
        """Feed the engine breaker: an engine error counts, a case that ran on an engine clears it."""
        assert self.breaker is not None
        if record.get("error_kind") == ErrorKind.ENGINE:
            s = self.settings
            where = f" (THOR server {s.thor_url})" if s.engine == "remote" and s.thor_url else f" (--thor {s.engine})"
            self.breaker.engine_failure(f"{case.id}{where}: {record.get('error')}")
        elif record.get("execution") is not None or self.settings.interactive:
            self.breaker.engine_success()

    def close(self) -> None:
        self.engines.close()


def make_engine(settings: Settings) -> Engine:
    """The engine named by ``--thor``: the embedded one (default), or ai2thor's own Controller
    (``local``) running the Unity build or the executable given by ``--thor-executable``."""
    if settings.engine == "sim":
        from sab_pytest.thor.sim import Controller  # start-up: PIL and ai2thor (34 ms), for the embedded engine alone

        return Controller(scenes=SceneSource(settings.thor_scenes))
    if settings.engine == "local":
        from sab_pytest.thor import local  # start-up: ai2thor's controller (165 ms), for --thor local alone

        executable = local.resolve_executable(settings.thor_executable) if settings.thor_executable else None
        return local.start(executable, scenes_dir=settings.thor_scenes)
    if settings.engine == "remote":
        # leases one engine of the pool; stop() releases it
        return RemoteEngine(settings.thor_url or "", token=token_from_env())
    raise UsageError(f"--thor {settings.engine}: unknown engine (use --thor sim, local or remote)")
