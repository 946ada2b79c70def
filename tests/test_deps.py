"""`nerve deps` checks requirements.txt where the workers run; `nerve deps install` installs it there (offline)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from enginekit import nerve, write_instance


def test_check_lists_what_is_missing_and_exits_1(home: Path) -> None:
    write_instance(home, "senses: {}\n", {})
    (home / "requirements.txt").write_text(
        "# what the senses import\npsutil>=5\nnerve-no-such-package==1.0\n"
        "rich<1\nfoo ; python_version < '3'\n")
    result = nerve("deps", "--json", home=home)
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["python"] == sys.executable and data["ok"] is False
    states = {r["name"]: r["state"] for r in data["requirements"]}
    assert states == {"psutil": "ok", "nerve-no-such-package": "missing", "rich": "wrong-version", "foo": "not-needed"}
    table = nerve("deps", home=home)
    assert "2 of 4 not satisfied: nerve-no-such-package==1.0, rich<1; run `nerve deps install`" in table.stderr
    (home / "requirements.txt").write_text("psutil\n")
    assert nerve("deps", home=home).returncode == 0


def wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel, so pip installs it with no network and no build step."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(text.encode())}" for path, text in files.items()]
    files[f"{dist}/RECORD"] = "\n".join(record + [f"{dist}/RECORD,,"]) + "\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name_, text in files.items():
            zf.writestr(name_, text)
    return path


def test_install_puts_the_packages_where_the_workers_run(home: Path, tmp_path: Path) -> None:
    # A throwaway interpreter environment that sees Nerve (and pip) through a .pth file:
    # what `deps install` adds lands in it, never in the test suite's own venv.
    env_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "nerve-under-test.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel(wheels, "nerve_test_dep", "1.0")
    write_instance(home, "senses: {}\n", {})
    (home / "requirements.txt").write_text(f"--no-index\n--find-links {wheels}\nnerve-test-dep==1.0\n")
    env = {**os.environ, "NO_COLOR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("NERVE_HOME", None)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(python), "-m", "nerve_cli", "deps", *args, "--home", str(home)],
                              capture_output=True, text=True, env=env, timeout=180)

    before = run()
    assert before.returncode == 1 and "nerve-test-dep" in before.stdout and "missing" in before.stdout
    installed = run("install")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "every requirement is satisfied" in installed.stdout
    assert run().returncode == 0
    assert subprocess.run([sys.executable, "-c", "import nerve_test_dep"], capture_output=True).returncode != 0
