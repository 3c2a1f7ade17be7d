"""Pinned files: find them in an override directory or the user cache, or download, verify and
cache them.

Both the dataset (four JSONL files) and the iTHOR scene dumps (120 JSON files) are public files
pinned by commit and sha256. Nothing of them is committed here; this module fetches them on first
use. A sha256 mismatch keeps nothing on disk and names file, expected and actual hash. Writes are
atomic (temp file + ``os.replace``) so concurrent xdist workers never see half a file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sab_pytest.errors import UsageError

DOWNLOAD_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class PinnedFile:
    """A file known by its relative name, download address and sha256."""

    name: str  # relative path inside the collection (may contain "/")
    url: str
    sha256: str


def cache_root() -> Path:
    """The user cache directory (``SAB_CACHE_HOME``, else ``$XDG_CACHE_HOME/sab-pytest``)."""
    explicit = os.environ.get("SAB_CACHE_HOME")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sab-pytest"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _umask() -> int:
    """The process umask (Python has no getter before 3.13: set and restore it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: read once at import: setting and restoring the umask on every write would race with the files
#: other threads (the case runner's) create in between
_UMASK = _umask()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; a written file gets the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def download(pinned: PinnedFile, dest: Path, *, timeout: float = DOWNLOAD_TIMEOUT_S) -> Path:
    """Download ``pinned`` to ``dest``, verifying its sha256 before anything is kept."""
    import urllib.request  # only when something is missing: every worker imports this module

    try:
        with urllib.request.urlopen(pinned.url, timeout=timeout) as response:
            data = response.read()
    except (OSError, TimeoutError) as exc:  # urllib's URLError is an OSError
        raise UsageError(f"could not download {pinned.name} from {pinned.url}: {exc}") from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != pinned.sha256:
        raise UsageError(
            f"checksum mismatch for {pinned.name} downloaded from {pinned.url}: "
            f"expected sha256 {pinned.sha256}, got {actual}; nothing was kept"
        )
    atomic_write_bytes(dest, data)
    return dest


def resolve(
    files: Iterable[PinnedFile],
    *,
    override: Path | None,
    cache_dir: Path,
    what: str,
    how_to_provide: str,
    verify_override: bool = False,
) -> dict[str, Path]:
    """Return a local path for every pinned file.

    With ``override`` every file must be there (a user-provided directory is trusted; with
    ``verify_override`` its hashes are checked too). Otherwise files come from ``cache_dir``
    (re-verified only by size of trust: the cache was verified when written) or are downloaded.
    """
    files = list(files)
    found: dict[str, Path] = {}
    if override is not None:
        missing = [f.name for f in files if not (override / f.name).is_file()]
        if missing:
            raise UsageError(
                f"{what}: {override} does not hold {', '.join(missing[:5])}"
                + (f" (and {len(missing) - 5} more)" if len(missing) > 5 else "")
                + f". {how_to_provide}"
            )
        for f in files:
            path = override / f.name
            if verify_override:
                actual = sha256_of(path)
                if actual != f.sha256:
                    raise UsageError(
                        f"{what}: {path} has sha256 {actual}, expected {f.sha256} (pinned upstream file)"
                    )
            found[f.name] = path
        return found
    errors: list[str] = []
    for f in files:
        path = cache_dir / f.name
        if path.is_file():
            found[f.name] = path
            continue
        try:
            found[f.name] = download(f, path)
        except UsageError as exc:
            errors.append(str(exc))
            if "checksum mismatch" in str(exc):
                raise
            break  # offline: one failure says enough
    if errors:
        raise UsageError(f"{what} not available offline: {errors[0]}. {how_to_provide}")
    return found
