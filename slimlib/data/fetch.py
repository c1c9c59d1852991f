"""Download the raw measurement files from their pinned upstream commits, checked against a sha256 registry.

The registry (``registry.txt`` next to this module, one ``<path> sha256:<hex>`` line per file) lists every data file
the parsers read, by its path in the mirror layout ``<source>/<path in the upstream repository>``; it is generated
from a local mirror by :func:`make_registry` (``python -m slimlib.data.fetch make-registry RAW_ROOT``).
The cache folder gets the same layout, so ``slim data build --raw <cache folder>`` reads what was fetched.

Sources and their pins (each folder's PROVENANCE.md in the mirror says more):

- ``vllm-batching-memory-gap/``, ``vidur-profiling/``: one file per URL at a pinned GitHub commit (PINNED_URLS).
- ``llm-inference-bench/``: ``LICENSE`` at the pinned commit; ``Plots/All_results.csv`` is cut from the upstream file
  of that commit (sha256-checked) by keeping the header and every line whose ``Hardware`` does not start with
  ``Nvidia``, verbatim (DERIVED).
- ``aiconfigurator-kernels/``: the files keep their paths inside the PyPI wheel of ``aiconfigurator-core`` 0.12.0;
  the wheel is downloaded once (sha256-checked) and the listed members are extracted (BUNDLES).
- ``aiter/``: one file per URL at the pinned commit of ROCm/aiter, under its ``aiter/`` folder, but for the licence,
  which lies at the repository's root (MOVED).

Every file written is then checked against its sha256 in the registry.
This is the only module of slimlib that uses the network.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import logging
import os
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tqdm import tqdm

from slimlib.data.aiconfigurator import WHEEL, WHEEL_SHA256
from slimlib.errors import DataError, UnknownNameError, close_matches_message
from slimlib.io import write_bytes

REGISTRY_FILE = "registry.txt"
#: File name endings of the data files the parsers read.
DATA_SUFFIXES = (".json", ".csv", ".txt", ".out", ".err", ".log", ".parquet", ".yaml")
#: Data files without a suffix, by file name (the wheel's METADATA: version and licence; the upstream LICENSE).
DATA_NAMES = ("METADATA", "LICENSE")
#: Mirror folder prefix -> raw URL of the same folder at the pinned upstream commit.
PINNED_URLS = {
    "vllm-batching-memory-gap/": "https://raw.githubusercontent.com/FerranAgulloLopez/vLLMBatchingMemoryGap/"
    "a9186347e6146b4547ed25674b4e9034eb1e9abf/",
    "vidur-profiling/compute/": "https://raw.githubusercontent.com/microsoft/vidur/"
    "7d47513363ec447a741ac5e47241580b47724fbf/data/profiling/compute/",
    "vidur-profiling/legacy-e2d00e9/a100/": "https://raw.githubusercontent.com/microsoft/vidur/"
    "e2d00e9afba96cec9f0e7ea560bbfc4a539fae6a/data/profiling/a100/",
    "llm-inference-bench/": "https://raw.githubusercontent.com/argonne-lcf/LLM-Inference-Bench/"
    "4211f5d4e9bc0145ed541b6d372d5d8223b44235/",
    "aiter/": "https://raw.githubusercontent.com/ROCm/aiter/e4048607a535ace3a2b51ded31b1c8c2d45c0879/aiter/",
}


@dataclass(frozen=True)
class Upstream:
    """One pinned upstream download (URL and the sha256 of its bytes) from which mirror files are made."""

    url: str
    sha256: str


#: Mirror folder -> the wheel whose members (same paths) the folder holds.
BUNDLES = {
    "aiconfigurator-kernels/": Upstream(
        # PyPI's documented per-file URL: /packages/<python tag>/<first letter>/<project>/<file name>
        "https://files.pythonhosted.org/packages/cp311/a/aiconfigurator-core/" + WHEEL,
        WHEEL_SHA256,
    ),
}


def non_nvidia_rows(data: bytes) -> bytes:
    """The header and every line whose first field (``Hardware``) does not start with ``Nvidia``, verbatim."""
    lines = data.splitlines(keepends=True)
    return b"".join(lines[:1] + [ln for ln in lines[1:] if not ln.lstrip(b'"').startswith(b"Nvidia")])


#: Mirror path -> (the upstream file, how the mirror file is cut from it); see each PROVENANCE.md.
DERIVED: dict[str, tuple[Upstream, Callable[[bytes], bytes]]] = {
    "llm-inference-bench/Plots/All_results.csv": (
        Upstream(
            PINNED_URLS["llm-inference-bench/"] + "Plots/All_results.csv",
            "631a12e08c786ce2d4bdfdc0f67b93234360682cb4b36c93806270ddcfd58412",
        ),
        non_nvidia_rows,
    ),
}
#: Mirror path -> its pinned upstream URL where the upstream path is not the mirror's (see each PROVENANCE.md).
MOVED = {
    "aiter/LICENSE": "https://raw.githubusercontent.com/ROCm/aiter/e4048607a535ace3a2b51ded31b1c8c2d45c0879/LICENSE",
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
        if not (rel.endswith(DATA_SUFFIXES) or path.name in DATA_NAMES) or _source_prefix(rel) is None:
            continue
        if any(ch.isspace() for ch in rel):
            raise DataError(f"{path}: a file name with white space cannot go into the registry; rename it")
        lines.append(f"{rel} sha256:{_sha256(path)}\n")
    if not lines:
        raise DataError(
            f"{root}: no data files under {', '.join(_prefixes())}; is this the raw data mirror root?"
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
    if name in MOVED:
        return MOVED[name]
    if name in DERIVED:
        return DERIVED[name][0].url
    prefix = _source_prefix(name)
    if prefix is None:
        raise DataError(f"{name}: no pinned upstream for this path; known folders: {', '.join(_prefixes())}")
    if prefix in BUNDLES:
        return BUNDLES[prefix].url
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
    From the pinned upstream, the BUNDLES and DERIVED files are cut from one sha256-checked download each.
    `registry` replaces the packaged registry (``{path: "sha256:<hex>"}``).
    """
    import pooch

    reg = dict(registry) if registry is not None else load_registry()
    names = select_files(reg, files)
    folder = Path(dest) if dest is not None else default_cache_dir()
    groups: dict[Upstream, list[str]] = {}
    plain = []
    for n in names:
        up = _upstream(n) if base_url is None else None
        if up is None:
            plain.append(n)
        else:
            groups.setdefault(up, []).append(n)
    urls = {n: file_url(n, base_url) for n in plain}
    store = pooch.create(
        path=folder, base_url="", registry={n: reg[n] for n in plain}, urls=urls, retry_if_failed=retries
    )
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)  # one log line per file would drown the progress bar
    try:
        iterator: Iterable[str] = (
            tqdm(plain, desc="slim data fetch", unit="file", file=sys.stderr) if progress else plain
        )
        for name in iterator:
            _download(name, urls[name], functools.partial(store.fetch, name))
        for up, members in groups.items():
            _fetch_from_upstream(up, members, folder, reg, retries)
    finally:
        logger.setLevel(level)
    return folder


def _download(name: str, url: str, get: Callable[[], object]) -> None:
    """Run `get` (a pooch download of `url`), turning its failures into a DataError naming `name`."""
    import requests

    try:
        get()
    except ValueError as exc:
        if "hash" not in str(exc).lower():
            raise
        raise DataError(
            f"{name}: the downloaded file does not match its sha256 in the registry ({url}); "
            "it was deleted. The upstream file changed or the mirror is corrupt: use a --base-url that "
            "serves the pinned files"
        ) from None
    except requests.exceptions.HTTPError as exc:
        raise DataError(f"{name}: download failed ({exc}); check --base-url or the network") from None
    except requests.exceptions.RequestException as exc:
        raise DataError(
            f"{name}: cannot download {url} ({type(exc).__name__}); check the network or --base-url"
        ) from None


def _upstream(name: str) -> Upstream | None:
    """The bundle or upstream file registry path `name` is made from, or None when it is downloaded as is."""
    if name in DERIVED:
        return DERIVED[name][0]
    prefix = _source_prefix(name)
    return BUNDLES.get(prefix) if prefix is not None else None


def _fetch_from_upstream(
    up: Upstream, members: list[str], folder: Path, reg: Mapping[str, str], retries: int
) -> None:
    """Download `up` once (sha256-checked, into a temporary folder) and write `members` cut from it into `folder`.

    Members already present with their registry sha256 are kept; when all are, nothing is downloaded.
    """
    import pooch

    todo = [m for m in members if not _has_hash(folder / m, reg[m])]
    if not todo:
        return
    with tempfile.TemporaryDirectory(prefix="slim-fetch-") as tmp:
        fname = up.url.rsplit("/", 1)[-1]
        path = Path(tmp) / fname
        what = f"{fname} (the upstream of {todo[0]})"
        for attempt in range(retries + 1):
            try:
                _download(
                    what,
                    up.url,
                    lambda: pooch.retrieve(up.url, known_hash=f"sha256:{up.sha256}", fname=fname, path=tmp),
                )
                break
            except DataError:
                if attempt == retries:
                    raise
        for m in todo:
            if m in DERIVED:
                data = DERIVED[m][1](path.read_bytes())
            else:
                member = m[len(_source_prefix(m) or "") :]
                try:
                    with zipfile.ZipFile(path) as zf:
                        data = zf.read(member)
                except KeyError:
                    raise DataError(
                        f"{m}: {member} is not in {fname}; the registry and the wheel disagree"
                    ) from None
            got = "sha256:" + hashlib.sha256(data).hexdigest()
            if got != reg[m]:
                raise DataError(
                    f"{m}: the file cut from {fname} does not match its sha256 in the registry; "
                    "nothing was written for it. Regenerate the registry from the mirror or check the pin"
                )
            (folder / m).parent.mkdir(parents=True, exist_ok=True)
            write_bytes(folder / m, data)


def _has_hash(path: Path, want: str) -> bool:
    return path.is_file() and "sha256:" + _sha256(path) == want


def _prefixes() -> list[str]:
    return [*PINNED_URLS, *BUNDLES]


def _source_prefix(rel: str) -> str | None:
    for prefix in _prefixes():
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
