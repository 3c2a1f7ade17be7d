"""The benchmark's cases as a pytest test module, shipped in the wheel so that
``python -m sab_pytest run`` works from any directory; a checkout's top-level ``cases/`` imports it."""
