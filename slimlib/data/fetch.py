"""Download the raw measurement files from their pinned upstream commits, checked against a sha256 registry.

The registry (``registry.txt`` next to this module, one ``<path> sha256:<hex>`` line per file) lists every data file
the parsers read, by its path in the mirror layout ``<source>/<path in the upstream repository>``; it is generated
from a local mirror by :func:`make_registry` (``python -m slimlib.data.fetch make-registry RAW_ROOT``).
The cache folder gets the same layout, so ``slim data build --raw <cache folder>`` reads what was fetched.
This is the only module of slimlib that uses the network.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import sys
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path

from tqdm import tqdm

from slimlib.errors import DataError, UnknownNameError, close_matches_message

REGISTRY_FILE = "registry.txt"
#: File name endings of the data files the parsers read.
DATA_SUFFIXES = (".json", ".csv", ".txt", ".out", ".err", ".log")
#: Mirror folder prefix -> raw URL of the same folder at the pinned upstream commit.
PINNED_URLS = {
    "vllm-batching-memory-gap/": "https://raw.githubusercontent.com/FerranAgulloLopez/vLLMBatchingMemoryGap/"
    "a9186347e6146b4547ed25674b4e9034eb1e9abf/",
    "vidur-profiling/compute/": "https://raw.githubusercontent.com/microsoft/vidur/"
    "7d47513363ec447a741ac5e47241580b47724fbf/data/profiling/compute/",
    "vidur-profiling/legacy-e2d00e9/a100/": "https://raw.githubusercontent.com/microsoft/vidur/"
    "e2d00e9afba96cec9f0e7ea560bbfc4a539fae6a/data/profiling/a100/",
}
#: `base_url` value meaning "each file from its pinned upstream commit" (PINNED_URLS).
PINNED_URL = None
CACHE_ENV = "SLIM_CACHE_DIR"


def make_registry(raw_root: str | Path) -> str:
    """Registry text for the mirror at `raw_root`: ``<path> sha256:<hex>`` for every data file, sorted by path.

    Only files under a known source folder (PINNED_URLS) with a data suffix are listed; paths use '/'.
    """
    root = Path(raw_root)
    if not root.is_dir():
        raise DataError(f"{root}: no such folder; give the raw data mirror root (e.g. ../shared/data)")
    lines = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if not rel.endswith(DATA_SUFFIXES) or _source_prefix(rel) is None:
            continue
        if any(ch.isspace() for ch in rel):
            raise DataError(f"{path}: a file name with white space cannot go into the registry; rename it")
        lines.append(f"{rel} sha256:{_sha256(path)}\n")
    if not lines:
        raise DataError(
            f"{root}: no data files under {', '.join(PINNED_URLS)}; is this the raw data mirror root?"
        )
    return "".join(lines)


def load_registry(text: str | None = None) -> dict[str, str]:
    """Parse registry text (default: the packaged registry) into ``{path: "sha256:<hex>"}``."""
    if text is None:
        text = resources.files("slimlib.data").joinpath(REGISTRY_FILE).read_text(encoding="utf-8")
    registry = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].startswith("sha256:") or len(parts[1]) != 7 + 64:
            raise DataError(f"registry line {lineno}: expected '<path> sha256:<64 hex digits>', got {line!r}")
        registry[parts[0]] = parts[1]
    return registry


def default_cache_dir() -> Path:
    """``$SLIM_CACHE_DIR`` if set, else pooch's per-user cache folder for "slim"."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    import pooch

    return Path(pooch.os_cache("slim"))


def select_files(registry: Mapping[str, str], patterns: Iterable[str] | None) -> list[str]:
    """Registry paths matching any of the glob `patterns` (all when None), sorted; a pattern matching none raises."""
    names = sorted(registry)
    if patterns is None:
        return names
    chosen: set[str] = set()
    for pattern in patterns:
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        if not hits:
            if not any(ch in pattern for ch in "*?["):
                raise UnknownNameError(close_matches_message("registry file", pattern, names))
            raise DataError(
                f"--only {pattern!r} matches no file of the registry; patterns match the whole path"
            )
        chosen.update(hits)
    return sorted(chosen)


def file_url(name: str, base_url: str | None = PINNED_URL) -> str:
    """Download URL of registry path `name`: its pinned upstream URL, or `base_url` + name for a mirror."""
    if base_url is not None:
        return base_url.rstrip("/") + "/" + name
    prefix = _source_prefix(name)
    if prefix is None:
        raise DataError(f"{name}: no pinned upstream for this path; known folders: {', '.join(PINNED_URLS)}")
    return PINNED_URLS[prefix] + name[len(prefix) :]


def fetch(
    dest: str | Path | None = None,
    *,
    base_url: str | None = PINNED_URL,
    files: Iterable[str] | None = None,
    progress: bool = False,
    registry: Mapping[str, str] | None = None,
    retries: int = 2,
) -> Path:
    """Download the raw files into `dest` (default :func:`default_cache_dir`) and return that folder.

    `base_url` None takes each file from its pinned upstream commit; otherwise a mirror with the layout
    ``<base_url>/<source>/<path>`` (e.g. the shared data folder served over HTTP). `files` are glob patterns over
    registry paths (default: all). Files already present with the right sha256 are not downloaded again; a file
    whose download does not match its sha256 (after `retries` retries) is deleted and raises DataError naming it.
    `registry` replaces the packaged registry (``{path: "sha256:<hex>"}``).
    """
    import pooch
    import requests

    reg = dict(registry) if registry is not None else load_registry()
    names = select_files(reg, files)
    folder = Path(dest) if dest is not None else default_cache_dir()
    urls = {n: file_url(n, base_url) for n in names}
    store = pooch.create(
        path=folder, base_url="", registry={n: reg[n] for n in names}, urls=urls, retry_if_failed=retries
    )
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)  # one log line per file would drown the progress bar
    try:
        iterator: Iterable[str] = (
            tqdm(names, desc="slim data fetch", unit="file", file=sys.stderr) if progress else names
        )
        for name in iterator:
            try:
                store.fetch(name)
            except ValueError as exc:
                if "hash" not in str(exc).lower():
                    raise
                raise DataError(
                    f"{name}: the downloaded file does not match its sha256 in the registry ({urls[name]}); "
                    "it was deleted. The upstream file changed or the mirror is corrupt: use a --base-url that "
                    "serves the pinned files"
                ) from None
            except requests.exceptions.HTTPError as exc:
                raise DataError(f"{name}: download failed ({exc}); check --base-url or the network") from None
            except requests.exceptions.RequestException as exc:
                raise DataError(
                    f"{name}: cannot download {urls[name]} ({type(exc).__name__}); check the network or --base-url"
                ) from None
    finally:
        logger.setLevel(level)
    return folder


def _source_prefix(rel: str) -> str | None:
    for prefix in PINNED_URLS:
        if rel.startswith(prefix):
            return prefix
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) != 3 or sys.argv[1] != "make-registry":
        sys.exit("usage: python -m slimlib.data.fetch make-registry RAW_ROOT > slimlib/data/registry.txt")
    sys.stdout.write(make_registry(sys.argv[2]))
