"""Acceptance: the pre-commit snippet of the README and docs/LINT.md works as written.

A new user pastes the README's ``.pre-commit-config.yaml`` block, runs the command the README
names next to it (``pre-commit autoupdate --freeze``) and commits. The real pre-commit runs
all of it against a snapshot of this working tree (``hook_repo``, the same one
tests/test_lint_precommit.py installs from), whose ``main`` branch stands for the published
repository's.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from test_lint_precommit import git, hook_repo, init_repo, precommit, precommit_home  # noqa: F401

from conftest import raw

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER = "https://github.com/<owner>/slotdiff"


def _yaml_blocks(path: Path) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", path.read_text(encoding="utf-8"), re.DOTALL)


def _snippet(path: Path) -> dict:
    block = next(b for b in _yaml_blocks(path) if "hooks:" in b)
    return yaml.safe_load(block)


def _revs() -> dict[str, str]:
    out = {name: _snippet(ROOT / name)["repos"][0]["rev"] for name in ("README.md", "docs/LINT.md")}
    manifest = (ROOT / ".pre-commit-hooks.yaml").read_text()
    out[".pre-commit-hooks.yaml"] = re.search(r"^#\s+rev: (\S+)", manifest, re.MULTILINE).group(1)
    return out


def test_every_snippet_names_a_rev_that_exists() -> None:
    """A release tag the repository has, or ``main`` with the freeze step said beside it."""
    revs = _revs()
    assert len(set(revs.values())) == 1, revs
    rev = revs["README.md"]
    tags = git("tag", "--list", cwd=ROOT).split()
    if rev not in tags:
        assert rev == "main", f"rev {rev!r} is not a tag of this repository ({tags or 'none'})"
        for name in ("README.md", "docs/LINT.md"):
            assert "pre-commit autoupdate --freeze" in (ROOT / name).read_text(), name


def test_readme_snippet_runs_as_documented(
    tmp_path: Path,
    hook_repo: tuple[Path, str],  # noqa: F811
    precommit_home: Path,  # noqa: F811
) -> None:
    repo, sha = hook_repo
    git("branch", "-f", "main", "HEAD", cwd=repo)  # the published repository's branch
    config = _snippet(ROOT / "README.md")
    assert config["repos"][0]["repo"] == PLACEHOLDER
    text = yaml.safe_dump(config).replace(PLACEHOLDER, str(repo))
    init_repo(tmp_path)
    (tmp_path / "configs").mkdir()
    shutil.copyfile(raw("meta-llama/Llama-3.2-1B"), tmp_path / "configs" / "config.json")
    (tmp_path / ".pre-commit-config.yaml").write_text(text)
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "a config", cwd=tmp_path)

    res = precommit(["autoupdate", "--freeze"], tmp_path, precommit_home)
    assert res.returncode == 0, res.stdout + res.stderr
    pinned = yaml.safe_load((tmp_path / ".pre-commit-config.yaml").read_text())["repos"][0]["rev"]
    assert pinned == sha, (pinned, sha)  # the commit main names, not a moving branch

    git("add", "-A", cwd=tmp_path)
    res = precommit(["run", "--all-files"], tmp_path, precommit_home)
    assert res.returncode == 0, res.stdout
    assert re.search(r"^slotdiff lint\.+Passed$", res.stdout, re.MULTILINE), res.stdout
    assert "mutable reference" not in res.stdout + res.stderr


@pytest.mark.parametrize("name", ["README.md", "docs/LINT.md"])
def test_snippet_hooks_are_in_the_manifest(name: str) -> None:
    manifest = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    ids = {h["id"] for h in manifest}
    named = {h["id"] for r in _snippet(ROOT / name)["repos"] for h in r["hooks"]}
    assert named and named <= ids, (named, ids)
