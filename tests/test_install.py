"""`pip install .` (not -e) installs like a library: one name in site-packages (transformer_jax; the repository's
configs/, launch/ and experiments/ go inside it), and the CLI resolves configs by name from any folder, even where
the user has a `configs` package of their own."""

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # a pip install into a fresh virtualenv (~30 s): the slow step
def test_pip_install_outside_the_checkout(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    packages = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    before = set(os.listdir(packages))
    # The dependencies come from this environment: a .pth line puts its site-packages on the path (without running
    # that folder's own .pth files, so this checkout's editable install stays out of the new venv).
    (packages / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # `pip install .` = build the wheel (pip's isolated build, as the README's install does), then install it
    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)],
                           check=False, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                              *map(str, wheels.glob("*.whl"))], check=False, capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    added = set(os.listdir(packages)) - before - {"deps.pth"}
    assert {name for name in added if not name.endswith(".dist-info")} == {"transformer_jax"}, added
    installed = packages / "transformer_jax"
    assert (installed / "configs" / "base.py").is_file() and (installed / "launch" / "cli.py").is_file()
    # the GPU target descriptions `compile --target=h100x8` reads are package data
    assert {p.name for p in (installed / "gpu_targets").glob("*.txtpb")} == {"a100.txtpb", "h100.txtpb", "h200.txtpb"}

    # From an empty folder, with a user's own (broken) `configs` package on the path.
    empty = tmp_path / "elsewhere"
    (empty / "mine" / "configs").mkdir(parents=True)
    (empty / "mine" / "configs" / "__init__.py").write_text("raise ImportError('the user package was imported')\n")
    env = {**os.environ, "PYTHONPATH": str(empty / "mine"), "JAX_PLATFORMS": "cpu"}
    runs = {args[0]: subprocess.Popen([str(venv / "bin" / "transformer-jax"), "describe", *args, "--json"], cwd=empty,
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for args in (["--config=base"], ["--config=table3:B1,base=multi30k"], ["--config=configs/tiny.py"])}
    results = {}
    for name, proc in runs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        results[name] = out.strip().splitlines()[-1]
    assert '"name": "base_ende"' in results["--config=base"]
    assert '"name": "multi30k/B1"' in results["--config=table3:B1,base=multi30k"]
    assert '"name": "tiny"' in results["--config=configs/tiny.py"]  # a checkout path, resolved outside it
    assert str(REPO) not in "".join(results.values())  # nothing came from the checkout
