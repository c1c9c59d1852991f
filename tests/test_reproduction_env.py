"""The pinned reproduction environment (requirements/constraints.txt) and the CI check for stale outputs."""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements" / "constraints.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line.strip())
        assert m, f"constraints.txt: {line!r} is not 'name==version'"
        pins[canonicalize_name(m[1])] = m[2]
    return pins


def test_constraints_pin_every_dependency_inside_the_pyproject_ranges():
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(proj["dependencies"])
    for extra in ("notebooks", "dev", "profiling", "engine"):
        specs += proj["optional-dependencies"][extra]
    pins = _pins()
    assert "slimlib" not in pins
    for spec in specs:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins, f"{name} is not pinned in requirements/constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (name, pins[name], str(req.specifier))


def test_the_scripts_install_with_the_constraints():
    setup = (ROOT / "scripts" / "_setup.sh").read_text()
    assert 'CONSTRAINTS="$PWD/requirements/constraints.txt"' in setup
    assert re.search(r'pip install -q -c "\$CONSTRAINTS" -e "\.\[dev,notebooks,engine\]"', setup)
    assert (
        'pip install -q -c requirements/constraints.txt "torch=='
        in (ROOT / "scripts" / "torch_cpu.sh").read_text()
    )
    assert "scripts/torch_cpu.sh" in (ROOT / "scripts" / "test.sh").read_text()
    assert "source" in (ROOT / "scripts" / "reproduce.sh").read_text()


def test_ci_reproduces_into_figures_and_fails_on_stale_outputs():
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if not ln.startswith("#")]
    text = "\n".join(lines)
    i_repro = text.index("bash scripts/reproduce.sh")
    i_check = text.index("git status --porcelain --untracked-files=all -- figures/")
    i_tests = text.index("bash scripts/test.sh")
    assert i_repro < i_check < i_tests
    assert "--figures-dir" not in text  # the checkout's own figures/, as scripts/reproduce.sh writes them
    assert re.search(r'if \[ -n "\$stale" \]; then.*?exit 1', text, flags=re.S)


def _ci_sandbox(tmp_path: Path, reproduce_body: str, test_body: str = "echo TESTS-RAN\n") -> Path:
    """A git repository holding the real .ci/run, stub scripts and one committed figure."""
    import subprocess

    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    (repo / "scripts").mkdir()
    (repo / "figures").mkdir()
    (repo / ".ci" / "run").write_text((ROOT / ".ci" / "run").read_text())
    for stub in ("_setup.sh", "test_peers.sh", "engine_env.sh", "torch_cpu.sh"):
        (repo / "scripts" / stub).write_text("true\n")
    (repo / "scripts" / "test.sh").write_text(test_body)
    (repo / "scripts" / "test_engine.sh").write_text("true\n")
    (repo / "scripts" / "reproduce.sh").write_text(reproduce_body)
    (repo / "figures" / "t.csv").write_text("a\n1\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    return repo


def _no_ci() -> dict[str, str]:
    """This environment without ``CI``: the sandbox's .ci/run installs no system package."""
    import os

    return {k: v for k, v in os.environ.items() if k != "CI"}


def test_ci_run_fails_listing_changed_and_new_outputs(tmp_path):
    import subprocess

    same = _ci_sandbox(tmp_path / "a", "printf 'a\\n1\\n' > figures/t.csv\n")
    ok = subprocess.run(["bash", str(same / ".ci" / "run")], capture_output=True, text=True, env=_no_ci())
    assert ok.returncode == 0 and "TESTS-RAN" in ok.stdout
    stale = _ci_sandbox(tmp_path / "b", "printf 'a\\n2\\n' > figures/t.csv\necho new > figures/u.md\n")
    bad = subprocess.run(["bash", str(stale / ".ci" / "run")], capture_output=True, text=True, env=_no_ci())
    assert bad.returncode == 1 and "TESTS-RAN" not in bad.stdout
    assert "figures/t.csv" in bad.stderr and "figures/u.md" in bad.stderr


def test_ci_run_names_the_tree_it_reproduced_only_while_the_checkout_is_that_tree(tmp_path):
    import subprocess

    def tree_seen(repo: Path, inherited: str = "") -> str:
        env = {k: v for k, v in _no_ci().items() if k != "SLIM_REPRODUCED_TREE"}
        if inherited:
            env["SLIM_REPRODUCED_TREE"] = inherited
        out = subprocess.run(["bash", str(repo / ".ci" / "run")], capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
        return out.stdout.split("TESTS-RAN tree=")[1].split()[0]

    show = 'echo "TESTS-RAN tree=${SLIM_REPRODUCED_TREE:-none}"\n'
    clean = _ci_sandbox(tmp_path / "a", "printf 'a\\n1\\n' > figures/t.csv\n", show)
    head = subprocess.run(["git", "-C", str(clean), "rev-parse", "HEAD^{tree}"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    assert tree_seen(clean) == head
    # a file the reproduction left outside figures/: not stale, but not the committed tree: the notebooks run again,
    # whatever tree the caller's environment names
    stray = _ci_sandbox(tmp_path / "b", "printf 'a\\n1\\n' > figures/t.csv\necho x > stray.txt\n", show)
    assert tree_seen(stray) == "none"
    assert tree_seen(stray, inherited=head) == "none"
    # an output the reproduction did not write (a notebook that stopped writing it): the notebooks run again
    unwritten = _ci_sandbox(tmp_path / "c", "true\n", show)
    assert tree_seen(unwritten) == "none"
