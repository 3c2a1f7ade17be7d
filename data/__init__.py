"""The project's own data files (pinned manifests, made-up few-shot examples, the fake server's demo
script), installed as the package ``sab_pytest.data`` (see pyproject's package-dir), so that
``importlib.resources.files("sab_pytest.data")`` finds them in a wheel and in an editable install."""
