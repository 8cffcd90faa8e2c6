"""Where a result came from: the code's commit, the machine and the command, recorded with every run.

`transformer-jax train` appends one record per start (a resume is a new start) to ``<workdir>/provenance.jsonl``;
`transformer-jax compare` gathers them into ``provenance.json`` beside its table, so a committed table says
which commit, machine and command produced each row.
"""

import datetime
import json
import os
import platform
import re
import shlex
import socket
import subprocess
import sys

from transformer_jax import host_memory
from transformer_jax.run.folder import PROVENANCE_FILE

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout (or site-packages)


def git_commit(repo: str = REPO) -> str | None:
    """``HEAD``'s commit, with ``-dirty`` when tracked files differ from it; None outside a git checkout."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True,
                              timeout=10).stdout.strip()
    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if dirty else "")


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The CPU's model, family and model numbers from ``cpuinfo`` (Linux), e.g. ``AMD EPYC (family 23, model 1)``:
    wall times are only comparable between runs on the same CPU (a Zen 1 and a Zen 3 EPYC both print "AMD EPYC",
    and run the same training step at very different speeds). None where there is no such file or it
    names no model (an ARM cpuinfo has no "model name")."""
    try:
        with open(cpuinfo) as f:
            text = f.read()
    except OSError:
        return None
    first_cpu = text.split("\n\n")[0]
    fields = dict(re.findall(r"^(model name|cpu family|model)\s*:\s*(.*?)\s*$", first_cpu, re.MULTILINE))
    name = fields.get("model name")
    if name is None:
        return None
    numbers = ", ".join(f"{k} {fields[m]}" for k, m in (("family", "cpu family"), ("model", "model")) if m in fields)
    return f"{name} ({numbers})" if numbers else name


def machine(devices: bool = True) -> dict:
    """The host, its CPU and CPU count; with ``devices``, also the JAX version and the devices JAX sees."""
    info = {"host": socket.gethostname(), "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "processor": platform.processor() or platform.machine(), "cpu_model": cpu_model(),
            "python": platform.python_version(), "host_malloc": host_memory.setting()}
    if devices:
        import jax  # only here: `compare` records its machine without starting a JAX backend

        found = jax.devices()
        info.update(jax=jax.__version__, devices=f"{len(found)} × {found[0].device_kind}",
                    process_count=jax.process_count())
    return info


def record(command: list[str] | None = None, devices: bool = True) -> dict:
    """One provenance record: time, commit, machine and the command (default: this process's command line)."""
    command = command or [os.path.basename(sys.argv[0]), *sys.argv[1:]]
    return {"time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "commit": git_commit(), "machine": machine(devices), "command": shlex.join(command)}


def append(workdir: str, command: list[str] | None = None) -> dict:
    """Appends a record to ``<workdir>/provenance.jsonl`` (process 0 only) and returns it."""
    import jax

    entry = record(command)
    if jax.process_index() == 0:
        os.makedirs(workdir, exist_ok=True)
        with open(os.path.join(workdir, PROVENANCE_FILE), "a") as f:
            f.write(json.dumps(entry) + "\n")
    return entry


def read(workdir: str) -> list[dict]:
    """The run's provenance records, oldest first ([] for runs made before they were recorded)."""
    path = os.path.join(workdir, PROVENANCE_FILE)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
