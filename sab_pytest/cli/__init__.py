"""The ``python -m sab_pytest`` commands, one module each (see ``sab_pytest.__main__``)."""
