"""`slim data fetch` against a loopback HTTP server (127.0.0.1, no other network): download, sha256, resume."""

from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import threading
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from shared_paths import RAW, needs

from slimlib.cli.main import main
from slimlib.data import fetch as fetch_mod
from slimlib.data.fetch import PINNED_URLS, fetch, file_url, load_registry, make_registry, select_files
from slimlib.errors import DataError, UnknownNameError

needs_mirror = needs(RAW)
ROOT = Path(__file__).resolve().parents[1]

FILES = {
    "vllm-batching-memory-gap/benchmarks/definitive_results/background/opt-1.3b/_8_/openai-x.json": b'{"a": 1}\n',
    "vllm-batching-memory-gap/benchmarks/definitive_results/background/opt-1.3b/_8_/log_1.err": b"",
    "vidur-profiling/compute/h100/acme/tiny-1b/mlp.csv": b"num_tokens\n1\n",
    "vidur-profiling/legacy-e2d00e9/a100/cpu_overheads.csv": b",batch_size\n0,8\n",
}


class _Server:
    """http.server on 127.0.0.1 (port 0) serving `root`, counting GET requests per path."""

    def __init__(self, root: Path):
        self.requests: list[str] = []
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server API
                server.requests.append(self.path)
                super().do_GET()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Handler, directory=str(root))
        )
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def _write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@pytest.fixture
def served(tmp_path):
    """A small mirror, its registry, and a running loopback server for it."""
    root = tmp_path / "mirror"
    _write_tree(root, FILES)
    (root / "vidur-profiling" / "PROVENANCE.md").write_text("not a data file\n")
    registry = load_registry(make_registry(root))
    with _Server(root) as server:
        yield root, registry, server


def test_make_registry_lists_data_files_with_sha256(served):
    root, registry, _ = served
    assert sorted(registry) == sorted(FILES)  # PROVENANCE.md is not a data file
    for rel, data in FILES.items():
        assert registry[rel] == "sha256:" + hashlib.sha256(data).hexdigest()
    text = make_registry(root)
    assert text == make_registry(root)  # deterministic
    assert text.splitlines() == sorted(text.splitlines())


def test_fetch_downloads_checks_and_resumes(served, tmp_path):
    root, registry, server = served
    dest = tmp_path / "cache"
    out = fetch(dest, base_url=server.url, registry=registry)
    assert out == dest
    for rel, data in FILES.items():
        assert (dest / rel).read_bytes() == data
    assert len(server.requests) == len(FILES)
    # second call: every file is present with a good hash, nothing is requested
    fetch(dest, base_url=server.url, registry=registry)
    assert len(server.requests) == len(FILES)
    # a file damaged locally is downloaded again, and only that one
    damaged = next(iter(FILES))
    (dest / damaged).write_bytes(b"damaged")
    fetch(dest, base_url=server.url, registry=registry)
    assert len(server.requests) == len(FILES) + 1
    assert server.requests[-1].endswith(damaged.rsplit("/", 1)[-1])
    assert (dest / damaged).read_bytes() == FILES[damaged]


def test_fetch_only_glob(served, tmp_path):
    _, registry, server = served
    dest = tmp_path / "cache"
    fetch(dest, base_url=server.url, registry=registry, files=["vidur-profiling/*"])
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == sorted(
        r for r in FILES if r.startswith("vidur-profiling/")
    )
    assert len(server.requests) == 2


def test_corrupted_download_is_an_error_naming_the_file(served, tmp_path):
    root, registry, server = served
    bad = "vidur-profiling/compute/h100/acme/tiny-1b/mlp.csv"
    (root / bad).write_bytes(b"num_tokens\n2\n")  # the server now serves other bytes than the registry says
    dest = tmp_path / "cache"
    with pytest.raises(DataError, match=r"tiny-1b/mlp\.csv: the downloaded file does not match its sha256"):
        fetch(dest, base_url=server.url, registry=registry, files=[bad], retries=0)
    assert not (dest / bad).exists()  # the bad download is not kept


def test_missing_file_on_server_is_an_error(served, tmp_path):
    root, registry, server = served
    gone = "vidur-profiling/legacy-e2d00e9/a100/cpu_overheads.csv"
    (root / gone).unlink()
    with pytest.raises(DataError, match=r"cpu_overheads\.csv: download failed .*404"):
        fetch(tmp_path / "cache", base_url=server.url, registry=registry, files=[gone], retries=0)


def test_cache_dir_from_environment(served, tmp_path, monkeypatch):
    _, registry, server = served
    monkeypatch.setenv("SLIM_CACHE_DIR", str(tmp_path / "envcache"))
    out = fetch(base_url=server.url, registry=registry, files=["*/log_1.err"])
    assert out == tmp_path / "envcache"
    assert (
        out / "vllm-batching-memory-gap/benchmarks/definitive_results/background/opt-1.3b/_8_/log_1.err"
    ).is_file()


def test_selection_errors():
    reg = {"a/b.csv": "sha256:" + "0" * 64, "a/c.json": "sha256:" + "1" * 64}
    assert select_files(reg, None) == ["a/b.csv", "a/c.json"]
    assert select_files(reg, ["*.json", "a/b.csv"]) == ["a/b.csv", "a/c.json"]
    with pytest.raises(DataError, match="matches no file"):
        select_files(reg, ["*.parquet"])
    with pytest.raises(UnknownNameError, match="closest known: a/b.csv"):
        select_files(reg, ["a/b.cs"])


def test_bad_registry_lines():
    with pytest.raises(DataError, match="registry line 2"):
        load_registry("a.csv sha256:" + "0" * 64 + "\nb.csv md5:123\n")


def test_pinned_urls_point_at_the_upstream_commits():
    assert file_url("vllm-batching-memory-gap/benchmarks/x/y.json") == (
        "https://raw.githubusercontent.com/FerranAgulloLopez/vLLMBatchingMemoryGap/"
        "a9186347e6146b4547ed25674b4e9034eb1e9abf/benchmarks/x/y.json"
    )
    assert file_url("vidur-profiling/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv") == (
        "https://raw.githubusercontent.com/microsoft/vidur/7d47513363ec447a741ac5e47241580b47724fbf/"
        "data/profiling/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv"
    )
    assert file_url("vidur-profiling/legacy-e2d00e9/a100/attention.csv").endswith(
        "/e2d00e9afba96cec9f0e7ea560bbfc4a539fae6a/data/profiling/a100/attention.csv"
    )
    assert file_url("aiter/LICENSE") == (
        "https://raw.githubusercontent.com/ROCm/aiter/e4048607a535ace3a2b51ded31b1c8c2d45c0879/LICENSE"
    )  # the licence lies at the repository's root, the tables under aiter/
    assert file_url("aiter/configs/tuned_fmoe.csv") == (
        "https://raw.githubusercontent.com/ROCm/aiter/e4048607a535ace3a2b51ded31b1c8c2d45c0879/aiter/configs/"
        "tuned_fmoe.csv"
    )
    assert file_url("x/y.csv", "http://127.0.0.1:1/m/") == "http://127.0.0.1:1/m/x/y.csv"
    with pytest.raises(DataError, match="no pinned upstream"):
        file_url("other/y.csv")


def test_packaged_registry_covers_every_source():
    registry = load_registry()
    assert len(registry) > 2000
    for prefix in PINNED_URLS:
        assert any(name.startswith(prefix) for name in registry), prefix


@needs_mirror
def test_packaged_registry_matches_the_mirror():
    text = fetch_mod.resources.files("slimlib.data").joinpath("registry.txt").read_text(encoding="utf-8")
    assert text == make_registry(RAW), "regenerate: python -m slimlib.data.fetch make-registry ../shared/data"


@needs_mirror
def test_fetch_real_files_from_a_served_mirror(tmp_path):
    """A few real files through the packaged registry: the sha256s committed match what a mirror serves."""
    names = [
        "vidur-profiling/legacy-e2d00e9/a100/cpu_overheads.csv",
        "vllm-batching-memory-gap/benchmarks/definitive_results/background/opt-2.7b/_8_/cache_config_server_0.txt",
    ]
    for n in names:
        assert (RAW / n).is_file(), n
    subset = tmp_path / "subset"
    for n in names:
        (subset / n).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(RAW / n, subset / n)
    with _Server(subset) as server:
        dest = fetch(tmp_path / "cache", base_url=server.url, files=names)
        assert len(server.requests) == 2
    for n in names:
        assert (dest / n).read_bytes() == (RAW / n).read_bytes()


def test_cli_fetch(served, tmp_path, monkeypatch, capsys):
    _, registry, server = served
    monkeypatch.setattr(fetch_mod, "load_registry", lambda text=None: registry)
    argv = [
        "data",
        "fetch",
        "--dest",
        str(tmp_path / "c"),
        "--base-url",
        server.url,
        "--only",
        "*.csv",
        "--quiet",
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "c")
    assert len(server.requests) == 2


def _wheel(path: Path, members: dict[str, bytes]) -> bytes:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in sorted(members.items()):
            zf.writestr(name, data)
    return path.read_bytes()


@pytest.fixture
def upstream(tmp_path, monkeypatch):
    """A loopback 'upstream': a wheel and a full results file, pinned (URL + sha256) like the real ones."""
    root = tmp_path / "upstream"
    root.mkdir()
    members = {
        "aiconfigurator_core/systems/h100_sxm.yaml": b"gpu: {mem_bw: 1}\n",
        "aiconfigurator_core/systems/data/h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet": b"PAR1 fake",
        "aiconfigurator_core-0.12.0.dist-info/METADATA": b"Name: aiconfigurator-core\n",
        "aiconfigurator_core/not_listed.py": b"x = 1\n",
    }
    wheel = _wheel(root / "aic.whl", members)
    full = (
        b"Hardware,Num of Hardware,Latency\n"
        b"AMD MI300X GPU,1,2.5\n"
        b"Nvidia A100 GPU,1,1.0\n"
        b'"Nvidia H100",2,0.5\n'
        b"Intel Max 1550,1,3.0\n"
    )
    cut = b"Hardware,Num of Hardware,Latency\nAMD MI300X GPU,1,2.5\nIntel Max 1550,1,3.0\n"
    (root / "All_results.csv").write_bytes(full)
    with _Server(root) as server:
        up_wheel = fetch_mod.Upstream(server.url + "/aic.whl", hashlib.sha256(wheel).hexdigest())
        up_csv = fetch_mod.Upstream(server.url + "/All_results.csv", hashlib.sha256(full).hexdigest())
        monkeypatch.setattr(fetch_mod, "BUNDLES", {"aiconfigurator-kernels/": up_wheel})
        derived = {"llm-inference-bench/Plots/All_results.csv": (up_csv, fetch_mod.non_nvidia_rows)}
        monkeypatch.setattr(fetch_mod, "DERIVED", derived)
        expected = {"aiconfigurator-kernels/" + m: d for m, d in members.items() if not m.endswith(".py")}
        expected["llm-inference-bench/Plots/All_results.csv"] = cut
        registry = {n: "sha256:" + hashlib.sha256(d).hexdigest() for n, d in expected.items()}
        yield server, registry, expected


def test_fetch_extracts_wheel_members_and_cuts_the_results_file(upstream, tmp_path):
    server, registry, expected = upstream
    dest = fetch(tmp_path / "cache", registry=registry)
    got = {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    assert got == expected  # only the listed members; Nvidia rows (quoted or not) dropped, the rest verbatim
    assert sorted(server.requests) == ["/All_results.csv", "/aic.whl"]  # one download per upstream file
    fetch(tmp_path / "cache", registry=registry)
    assert len(server.requests) == 2  # everything present with its sha256: nothing downloaded again
    damaged = "aiconfigurator-kernels/aiconfigurator_core/systems/h100_sxm.yaml"
    (dest / damaged).write_bytes(b"damaged")
    fetch(tmp_path / "cache", registry=registry)
    assert server.requests[-1] == "/aic.whl" and len(server.requests) == 3
    assert (dest / damaged).read_bytes() == expected[damaged]


def test_fetch_from_upstream_refuses_a_changed_download_or_member(upstream, tmp_path, monkeypatch):
    server, registry, _ = upstream
    bad = dict(registry)
    member = "aiconfigurator-kernels/aiconfigurator_core/systems/h100_sxm.yaml"
    bad[member] = "sha256:" + "0" * 64
    with pytest.raises(
        DataError, match=r"h100_sxm\.yaml: the file cut from aic\.whl does not match its sha256"
    ):
        fetch(tmp_path / "c1", registry=bad, files=[member])
    assert not (tmp_path / "c1" / member).exists()
    # the wheel itself no longer matches its pin
    monkeypatch.setattr(
        fetch_mod,
        "BUNDLES",
        {"aiconfigurator-kernels/": fetch_mod.Upstream(server.url + "/aic.whl", "1" * 64)},
    )
    with pytest.raises(
        DataError, match=r"aic\.whl \(the upstream of .*\): the downloaded file does not match"
    ):
        fetch(tmp_path / "c2", registry=registry, files=[member], retries=0)


def test_pinned_urls_of_the_wheel_and_the_results_file():
    assert file_url("aiconfigurator-kernels/aiconfigurator_core/systems/h100_sxm.yaml") == (
        "https://files.pythonhosted.org/packages/cp311/a/aiconfigurator-core/"
        "aiconfigurator_core-0.12.0-cp311-abi3-manylinux_2_28_x86_64.whl"
    )
    assert file_url("llm-inference-bench/Plots/All_results.csv") == (
        "https://raw.githubusercontent.com/argonne-lcf/LLM-Inference-Bench/"
        "4211f5d4e9bc0145ed541b6d372d5d8223b44235/Plots/All_results.csv"
    )
    assert file_url("llm-inference-bench/LICENSE").endswith(
        "/4211f5d4e9bc0145ed541b6d372d5d8223b44235/LICENSE"
    )


@needs_mirror
def test_registry_covers_every_raw_file_the_data_build_read():
    """Every file of data/raw_manifest.csv (what `slim data build` read) that is upstream data is fetchable,
    with the same sha256; only the mirror's own notes (PROVENANCE.md, README.md) are not."""
    import csv

    registry = load_registry()
    with (ROOT / "data" / "raw_manifest.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    sources = {r["path"].split("/", 1)[0] for r in rows}
    assert sources == {
        "aiconfigurator-kernels",
        "aiter",
        "llm-inference-bench",
        "vidur-profiling",
        "vllm-batching-memory-gap",
    }
    missing = [r["path"] for r in rows if r["path"] not in registry and not r["path"].endswith(".md")]
    assert missing == []
    for r in rows:
        if r["path"] in registry:
            assert registry[r["path"]] == "sha256:" + r["sha256"], r["path"]


@needs_mirror
def test_real_wheel_members_and_results_cut_match_the_packaged_registry(tmp_path, monkeypatch):
    """The mirror's AIConfigurator files zipped as a wheel and its LLM-Inference-Bench rows with Nvidia rows added
    back: fetch extracts and cuts them to the bytes the packaged registry pins."""
    registry = load_registry()
    root = tmp_path / "up"
    root.mkdir()
    aic = RAW / "aiconfigurator-kernels"
    names = [n for n in registry if n.startswith("aiconfigurator-kernels/")][:3]
    names.append("aiconfigurator-kernels/aiconfigurator_core-0.12.0.dist-info/METADATA")
    members = {n.split("/", 1)[1]: (aic / n.split("/", 1)[1]).read_bytes() for n in names}
    wheel = _wheel(root / "w.whl", members)
    ours = (RAW / "llm-inference-bench" / "Plots" / "All_results.csv").read_bytes()
    head, rest = ours.split(b"\n", 1)
    full = head + b"\nNvidia A100 GPU,1,vLLM,m,128,1,1.0,2.0\n" + rest
    (root / "r.csv").write_bytes(full)
    with _Server(root) as server:
        monkeypatch.setattr(
            fetch_mod,
            "BUNDLES",
            {
                "aiconfigurator-kernels/": fetch_mod.Upstream(
                    server.url + "/w.whl", hashlib.sha256(wheel).hexdigest()
                )
            },
        )
        up = fetch_mod.Upstream(server.url + "/r.csv", hashlib.sha256(full).hexdigest())
        monkeypatch.setattr(
            fetch_mod,
            "DERIVED",
            {"llm-inference-bench/Plots/All_results.csv": (up, fetch_mod.non_nvidia_rows)},
        )
        dest = fetch(tmp_path / "cache", files=[*names, "llm-inference-bench/Plots/All_results.csv"])
    assert (dest / "llm-inference-bench/Plots/All_results.csv").read_bytes() == ours
    for n in names:
        assert (dest / n).read_bytes() == (RAW / n).read_bytes()


@needs_mirror
def test_moe_mla_members_are_fetched_from_the_wheel_and_rebuild_the_same_tables(tmp_path, monkeypatch):
    """Every raw file the MoE/MLA/all-to-all builder reads is in the packaged registry; served as members of a
    loopback wheel, `fetch` extracts them (sha256-checked) and the tables built from the cache equal the mirror's."""
    from slimlib.data.aiconfigurator_moe import build_moe_mla_tables

    registry = load_registry()
    aic = RAW / "aiconfigurator-kernels"
    mirror_tables, used = build_moe_mla_tables(aic)
    names = sorted({"aiconfigurator-kernels/" + f.relative_to(aic).as_posix() for f in used})
    assert [n for n in names if n not in registry] == []
    kinds = {n.split("/")[5] for n in names}
    assert kinds == {"moe", "mla", "mla_bmm", "comm"}
    root = tmp_path / "up"
    root.mkdir()
    members = {n.split("/", 1)[1]: (RAW / n).read_bytes() for n in names}
    members["aiconfigurator_core/not_listed.py"] = b"x = 1\n"
    wheel = _wheel(root / "w.whl", members)
    with _Server(root) as server:
        up = fetch_mod.Upstream(server.url + "/w.whl", hashlib.sha256(wheel).hexdigest())
        monkeypatch.setattr(fetch_mod, "BUNDLES", {"aiconfigurator-kernels/": up})
        dest = fetch(tmp_path / "cache", files=names)
        assert server.requests == ["/w.whl"]  # one download for all members
    got = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert got == names
    fetched_tables, _ = build_moe_mla_tables(dest / "aiconfigurator-kernels")
    for name, table in mirror_tables.items():
        pd.testing.assert_frame_equal(fetched_tables[name], table, obj=name)
