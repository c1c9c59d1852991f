"""The notebook tests trust a reproduction only of the very tree they run on, unchanged."""

from __future__ import annotations

import subprocess

from reproduced import reproduced_tree


def _git(root, *args):
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_only_the_reproduced_tree_unchanged_counts(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("a\n")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a")
    tree = _git(tmp_path, "rev-parse", "HEAD^{tree}")
    assert reproduced_tree(tmp_path, tree) == tree
    assert reproduced_tree(tmp_path, "0" * 40) is None
    assert reproduced_tree(tmp_path, "") is None
    (tmp_path / "a.txt").write_text("b\n")  # a change since the reproduction
    reproduced_tree.cache_clear()
    assert reproduced_tree(tmp_path, tree) is None
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / "new.txt").write_text("x\n")  # a file added since
    reproduced_tree.cache_clear()
    assert reproduced_tree(tmp_path, tree) is None
    (tmp_path / "new.txt").unlink()
    reproduced_tree.cache_clear()
    assert reproduced_tree(tmp_path, tree) == tree
    assert reproduced_tree(tmp_path / "not-a-repo", tree) is None
