"""Running the `transformer-jax` console script from tests, as a user's shell would: one command line, or several
started together (each pays the JAX import, so a test module starts its command lines at once)."""

import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def command(*args: str) -> list[str]:
    """``transformer-jax ARGS``: the installed console script of this interpreter's environment (else ``-c``)."""
    exe = shutil.which("transformer-jax") or os.path.join(os.path.dirname(sys.executable), "transformer-jax")
    if not os.access(exe, os.X_OK):
        return [sys.executable, "-c", "from transformer_jax.launch.cli import run; run()", *args]
    return [exe, *args]


def run_all(commands: dict[str, list[str]], cwd: str = REPO, env: dict | None = None,
            timeout: float = 600) -> dict[str, subprocess.CompletedProcess]:
    """Runs ``transformer-jax ARGS`` for every named ``ARGS`` at once (CPU JAX); their results by name.

    ``timeout`` is generous: the machine running the tests may be loaded. A command still running then is killed
    and its (partial) result returned, so the test fails on its status rather than hanging."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", **(env or {})}
    procs = {name: subprocess.Popen(command(*args), cwd=cwd, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for name, args in commands.items()}
    results = {}
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        results[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return results
