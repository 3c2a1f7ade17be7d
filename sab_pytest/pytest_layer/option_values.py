"""The values of the plugin's options in a run that asks for the benchmark, and the ``Settings`` they
give: each value written on the command line (or in ``addopts``), else the release policy file's,
else the ini setting or environment variable the table names, else the default;
``settings.resolution.resolve`` then makes the ``Settings`` and ``run.validate`` checks them.

Apart from ``pytest_layer.options``, which every run of the environment imports to register the
flags: this module builds the settings table and imports the run's checks.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from sab_pytest.errors import UsageError
from sab_pytest.fetch import cache_root
from sab_pytest.pytest_layer import activation
from sab_pytest.pytest_layer.options import given, spellings
from sab_pytest.run.policy import load_policy
from sab_pytest.run.validate import validate
from sab_pytest.settings import Option, Settings, options
from sab_pytest.settings.resolution import resolve


class _Options:
    """Option values: written on the command line (or in addopts), else from the policy file, else the default."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        path = config.getoption("sab_policy")
        self.policy = None
        if path:
            self.policy = load_policy(path)
        self.written = given(config)

    def __call__(self, option: Option) -> Any:
        name = option.flag
        value = self.config.getoption(option.dest)
        if self.policy is not None and name in self.policy.values:
            if option.action == "append":  # gates add up: the policy's, then the command line's
                value = [*self.policy.get(name), *value]
            elif not self._written(name):
                value = self.policy.get(name)
        if option.ini:
            ini = self.config.getini(option.ini)
            value = [*ini, *value] if option.action == "append" else value or ini or None
        if option.env and not value:
            value = os.environ.get(option.env) or None
        return value

    def _written(self, name: str) -> bool:
        return activation.names_option(self.written, spellings(self.config, (name,))) is not None

    def locate(self, exc: UsageError) -> UsageError:
        """An option's error, pointed at the policy line its value came from (when it came from there)."""
        if self.policy is not None:
            for option in self.policy.lines:  # (a gate's own message already quotes the gate)
                if str(exc).startswith(f"{option}:") and option != "--sab-gate" and not self._written(option):
                    return self.policy.located(option, str(exc))
        return exc


def settings_from_config(config: pytest.Config) -> Settings:
    """The run's ``Settings`` from this pytest run's options, validated (a ``UsageError`` names the
    option, or the policy file's line when the value came from there)."""
    opt = _Options(config)
    try:
        settings = resolve({name: opt(option) for name, option in options()},
                           user_cache=lambda: cache_root() / "responses")
        return validate(settings)
    except UsageError as exc:
        raise opt.locate(exc) from None
