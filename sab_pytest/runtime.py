"""The per-process runtime: builds the agent, the judge and the engine from ``Settings`` once, and
evaluates cases with them. Plain Python; the pytest layer holds one per xdist worker.

Everything is built lazily: a run of offline agents never imports the openai SDK, and the engine
is started only when a case with a goal state is executed.
"""

from __future__ import annotations

import contextlib
import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .errors import InfraError, UsageError
from .scoring import Verdict, evaluate
from .settings import Settings

if TYPE_CHECKING:
    from .agents import Agent
    from .dataset import Case
    from .judge import Judge
    from .models import ChatModel
    from .thor import Engine


class Runtime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._engine: Engine | None = None
        self._engine_lock = threading.Lock()
        self.prefetcher: Any = None  # set by the pytest layer when --sab-concurrency > 1

    # ----------------------------------------------------------------------------------- building

    def chat_model(self, role: str) -> ChatModel:
        """An OpenAI-compatible client for the agent (``role="agent"``) or the judge."""
        from . import models
        from .cache import ResponseCache

        s = self.settings
        name = s.model if role == "agent" else s.judge_model
        base_url = s.base_url if role == "agent" else (s.judge_base_url or s.base_url)
        key_env = s.api_key_env if role == "agent" else s.judge_api_key_env
        return models.OpenAIChatModel(
            models.parse_model_spec(name),
            base_url=base_url,
            api_key_env=key_env,
            temperature=s.temperature,
            max_tokens=s.max_tokens,
            timeout=s.timeout_s,
            max_retries=s.max_retries,
            cache=ResponseCache(s.cache_dir) if s.cache_dir else None,
        )

    @cached_property
    def agent_model(self) -> ChatModel | None:
        return None if self.settings.offline_agent else self.chat_model("agent")

    @cached_property
    def agent(self) -> Agent:
        from .agents.registry import make_agent

        s = self.settings
        return make_agent(s.model, strategy=s.strategy, chat_model=self.agent_model, safety_hint=s.safety_hint)

    @cached_property
    def judge_model(self) -> ChatModel | None:
        return None if self.settings.judge_model == "rules" else self.chat_model("judge")

    @cached_property
    def judge(self) -> Judge:
        from .judge import LLMJudge, RuleJudge

        return RuleJudge() if self.judge_model is None else LLMJudge(self.judge_model)

    def engine(self) -> Engine:
        """The worker's one engine, started on first use (thread-safe)."""
        with self._engine_lock:
            if self._engine is None:
                try:
                    self._engine = make_engine(self.settings)
                except InfraError:
                    raise  # already says what failed (a remote engine: no server reachable, no free engine)
                except Exception as exc:  # a simulator that cannot start is infrastructure
                    raise InfraError("engine", f"could not start the {self.settings.engine} engine: {exc}") from exc
            return self._engine

    def preflight(self) -> None:
        """Fail once, clearly, when the model endpoint cannot work (missing key, unreachable URL).

        The THOR server is checked apart, by ``sab_pytest.thor.remote.preflight(settings)``."""
        for model in (self.agent_model, self.judge_model):
            check = getattr(model, "preflight", None)
            if check is not None:
                check()

    # ---------------------------------------------------------------------------------- running

    def needs_engine(self, case: Case) -> bool:
        return self.settings.execute and case.final_state is not None

    def _budget(self) -> Any:
        """The per-case time budget of model calls (agent and judge), none for offline runs."""
        if self.settings.offline_agent and self.settings.judge_model == "rules":
            return contextlib.nullcontext()
        from .models import case_budget

        return case_budget(self.settings.case_budget_s)

    def evaluate(self, case: Case) -> Verdict:
        try:
            engine = self.engine() if self.needs_engine(case) else None
        except InfraError as exc:  # no engine (a THOR server gone, every engine leased): this case errors
            error = f"{exc.kind}: {exc.args[0]}"
            return Verdict(case=case, error=error, message=f"could not be evaluated ({error})")
        with self._budget():
            return evaluate(case, self.agent, self.judge, engine, execute=self.settings.execute)

    def warm(self, case: Case) -> None:
        """Make this case's model calls without an engine, only to fill the response cache.

        Used by the prefetcher so that model latency overlaps across cases; the real evaluation
        that follows replays the calls from the cache.
        """
        with self._budget():
            evaluate(case, self.agent, self.judge, None, execute=False)

    def close(self) -> None:
        if self._engine is not None:
            try:
                self._engine.stop()
            finally:
                self._engine = None

    def describe(self) -> dict[str, Any]:
        s = self.settings
        return {"model": s.model, "strategy": s.strategy if not s.offline_agent else "-",
                "judge": s.judge_model, "engine": s.engine if s.execute else "off"}


def make_engine(settings: Settings) -> Engine:
    """The engine named by ``--thor``: the embedded one (default) or a real AI2-THOR."""
    if settings.engine == "sim":
        from .thor import scenes
        from .thor.sim import Controller

        if settings.thor_scenes:
            scenes.configure(settings.thor_scenes)
        return Controller()
    if settings.engine == "local":
        try:
            from ai2thor.controller import Controller as ThorController
        except ImportError as exc:  # pragma: no cover - ai2thor is a dependency
            raise UsageError(f"--thor local needs the ai2thor package: {exc}") from exc
        return ThorController(platform="CloudRendering", width=600, height=600)
    if settings.engine == "remote":
        from .thor.remote import RemoteEngine

        return RemoteEngine.from_settings(settings)  # leases one engine of the pool; stop() releases it
    raise UsageError(f"--thor {settings.engine}: unknown engine (use --thor sim, local or remote)")
