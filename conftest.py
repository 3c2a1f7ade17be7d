"""Lets a checkout run without installing: register the plugin unless the installed entry point
already did (no double registration)."""

import importlib.util


def _plugin_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.value == "sab_pytest.plugin" for ep in entry_points(group="pytest11"))


if importlib.util.find_spec("sab_pytest") is not None and not _plugin_installed():
    pytest_plugins = ["sab_pytest.plugin"]
