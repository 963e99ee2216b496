"""The pre-commit hook (.pre-commit-hooks.yaml), installed from this checkout with the real
`pre-commit` package: it blocks a commit that adds a buggy spec and lets the fixed one through.

Needs `pre-commit` (test extra), git, and this checkout as a git repository with a commit (the
hook is installed from HEAD); pre-commit builds the hook's environment with pip.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def head() -> str:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        pytest.skip("pre-commit is not installed (pip install -e '.[test]')")
    rev = _git(ROOT, "rev-parse", "HEAD")
    if rev.returncode != 0:
        pytest.skip("this checkout is not a git repository with a commit")
    return rev.stdout.strip()


def _repo_with(tmp_path: Path, head: str, spec: Path) -> Path:
    repo = tmp_path / "kernel-repo"
    repo.mkdir()
    assert _git(repo, "init", "-q").returncode == 0
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {ROOT}\n  rev: {head}\n  hooks:\n  - id: syncverify\n")
    shutil.copy(spec, repo / spec.name)
    assert _git(repo, "add", ".").returncode == 0
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path.parent / "pre-commit-cache")}
    subprocess.run([sys.executable, "-m", "pre_commit", "install"], cwd=repo, env=env, check=True,
                   capture_output=True)
    return repo


def _commit(repo: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path.parent / "pre-commit-cache"),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["git", "commit", "-q", "-m", "add spec"], cwd=repo, capture_output=True, text=True,
                          env=env, timeout=900)


def test_hook_blocks_a_buggy_spec(tmp_path, head):
    repo = _repo_with(tmp_path, head, SPECS / "peer_init_race.sync")
    result = _commit(repo, tmp_path)
    assert result.returncode != 0, result.stdout + result.stderr
    assert "SV402" in result.stdout + result.stderr
    assert _git(repo, "log", "-1").returncode != 0  # nothing was committed


def test_hook_lets_the_fixed_spec_through(tmp_path, head):
    repo = _repo_with(tmp_path, head, SPECS / "peer_init_fixed.sync")
    result = _commit(repo, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _git(repo, "log", "-1", "--format=%s").stdout.strip() == "add spec"
