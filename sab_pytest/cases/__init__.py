"""The benchmark's cases as a pytest test module, shipped in the wheel so that
``sab run`` works from any directory; a checkout's top-level ``cases/`` imports it."""
