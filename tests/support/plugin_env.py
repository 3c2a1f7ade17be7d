"""The throw-away environment that ``tests/e2e/test_plugin_matrix.py`` runs pytest in: this
environment's packages and the checkout (on its path), plus the third-party plugins of ``PLUGINS``,
installed from the package index. It is kept in pytest's cache directory, keyed by the plugins and
the interpreter, so that only its first use pays for the installs. The module's fixture builds it
where it is missing; CI builds it in its set-up with the other installs (``python
tests/support/plugin_env.py``, in ``.ci/run``), so that the suite's time is its tests'.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import venv
from pathlib import Path

#: the plugins and why each is here: options named like ours, reruns, timeouts, reporters, reordering, copies
PLUGINS = ("pytest-base-url", "pytest-playwright", "pytest-rerunfailures", "pytest-timeout", "pytest-html",
           "pytest-randomly", "allure-pytest", "pytest-repeat")
#: the folder of pytest's cache directory (``config.cache.mkdir``) that holds the environment
CACHE_NAME = "sab-plugin-matrix"
#: the checkout, whose ``.pytest_cache`` the suite uses
ROOT = Path(__file__).resolve().parents[2]
#: pip's time limit for the installs
INSTALL_S = 300.0


def key() -> str:
    """The environment's name: the plugins and this interpreter's version (a new one gets a new environment)."""
    return hashlib.sha256(f"{PLUGINS}{sys.version}".encode()).hexdigest()[:12]


def link_this_environment(python: Path) -> None:
    """Put this environment's packages and the checkout on ``python``'s path; a plain path line runs
    no ``.pth`` file of that directory (the checkout's editable install), so both are listed."""
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "deps.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n{ROOT}\n")


def ready(kept: Path | None) -> bool:
    return kept is not None and (kept / "ready").exists()


def build(kept: Path | None, scratch: Path | None = None) -> Path | str:
    """The environment, or why the plugins could not be installed. With ``kept``, it is made beside
    it (the same file system) and moved there once complete, so two processes never share a
    half-made one; without, it is made in ``scratch`` for this process alone."""
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".making-", dir=kept.parent))
    assert scratch is not None, "build() needs kept or scratch"
    where = scratch / "venv"
    venv.create(where, with_pip=False, symlinks=True)
    python = where / "bin" / "python"
    link_this_environment(python)
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", *PLUGINS],
                          capture_output=True, text=True, timeout=INSTALL_S, check=False)
    if done.returncode != 0:
        if kept is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        return (f"could not install {', '.join(PLUGINS)} from the package index: "
                f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
    if kept is None:
        return where
    (where / "ready").write_text("")
    with contextlib.suppress(OSError):  # another process's is already there: use that one
        os.replace(where, kept)
    if not ready(kept):
        return where
    shutil.rmtree(scratch, ignore_errors=True)
    return kept


def main() -> int:
    """Build the environment where the suite, run from the checkout, looks for it."""
    kept = ROOT / ".pytest_cache" / "d" / CACHE_NAME / key()
    if ready(kept):
        print(f"plugin environment: {kept} (already made)")
        return 0
    made = build(kept)
    print(f"plugin environment: {made}")
    return 0 if isinstance(made, Path) else 1


if __name__ == "__main__":
    sys.exit(main())
