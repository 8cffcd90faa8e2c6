"""The README and docs/ print commands that run as written.

Every ``transformer-jax ...`` line of their bash blocks and every inline ``transformer-jax ...`` example is checked
the way the CLI checks a command line before any work: the verb exists, it takes each flag given (launch/cli.py's
``check_arguments``, which exits 2 otherwise), ``--config`` resolves and its ``--config.SECTION.FIELD`` overrides
name fields of that config (decode/evaluate: of the saved config's ``decode`` section), ``--target`` names a
target. Optional parts written ``[...]`` are dropped and ``a|b`` alternatives checked by their first choice;
examples with placeholders in capitals (``--config=CONFIG``) are checked for their flags only, and an example of
a refused command (followed by "says", "fails" or "is refused") is skipped. The README's test
command must be the one `.ci/run` runs, and every relative link of these files must lead to a file and heading
that exist. (The commands that train are run at a tiny scale by the end-to-end tests.)
"""

import glob
import importlib
import os
import re
import shlex

import pytest
from absl import flags
from ml_collections import config_flags

from transformer_jax import target as targets
from transformer_jax.configs import base
from transformer_jax.launch import cli
from transformer_jax.launch.flags import with_config_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCUMENTS = ["README.md", *sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))]
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]*(\.\.\.)?$|^[A-Z][A-Z_]*:|=[A-Z][A-Z_]+$")


def _read(document: str) -> str:
    with open(os.path.join(ROOT, document)) as f:
        return f.read()


def _commands(text: str) -> list[str]:
    """The ``transformer-jax`` command lines of ``text``: in ```bash blocks (continuations joined, comments and a
    leading ``echo ... |`` dropped) and in inline code spans."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" | ")[-1].strip() if "| transformer-jax" in line else line.strip()
            if line.startswith("transformer-jax "):
                found.append(shlex.join(shlex.split(line, comments=True)))
    for span in re.findall(r"`(transformer-jax [^`]+)`(?! says| fails| is refused)", text):  # not an error shown
        span = re.sub(r"\s*\[[^\]]*\]", "", span.replace("\\|", "|"))  # optional parts
        found.append(span)
    return found


def _cases():
    return [pytest.param(document, command, id=f"{document}: {command[:90]}")
            for document in DOCUMENTS for command in dict.fromkeys(_commands(_read(document)))]


def _first_choice(arg: str) -> str:
    return arg.split("|")[0] if arg.startswith("--") and "|" in arg else arg


def _load_config(config_args: list[str]):
    argv = ["prog", *config_args]
    values = flags.FlagValues()
    holder = config_flags.DEFINE_config_file("config", flag_values=values, sys_argv=argv)
    values(argv)
    return holder.value


@pytest.mark.parametrize("document,command", _cases())
def test_documented_command_is_a_valid_command_line(document, command, capsys):
    words = shlex.split(command)
    verb, args = words[1], [_first_choice(a) for a in words[2:]]
    if verb == "COMMAND" or verb.startswith("-"):
        return  # `transformer-jax COMMAND --help`, `transformer-jax --help`
    assert verb in cli.COMMANDS, f"{document}: `{command}` names no command"
    if cli.HELP & set(args):
        return
    module = importlib.import_module(f"transformer_jax.launch.{verb}")
    try:
        cli.check_arguments(verb, module, args)
    except SystemExit:
        pytest.fail(f"{document}: `{command}` is refused: {capsys.readouterr().err.strip()}")
    values = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
    if "target" in values and not PLACEHOLDER.search("=" + values["target"]):
        targets.parse(values["target"])
    overrides = [f"--{k}={v}" for k, v in values.items() if k.startswith("config.")]
    if "config" in values:
        if PLACEHOLDER.search("=" + values["config"]) or PLACEHOLDER.search(values["config"]):
            return
        _load_config(with_config_files([f"--config={values['config']}", *overrides]))
    elif overrides and verb in ("decode", "evaluate", "average"):  # applied to the run's saved config
        decode = base.get_config().decode
        for override in overrides:
            section, _, field = override[len("--config."):].partition("=")[0].partition(".")
            assert section == "decode" and field in decode, f"{document}: `{command}`: no field {override}"
    elif overrides:
        _load_config(with_config_files(overrides))  # the default config (demo)


def test_the_readme_test_command_is_what_ci_runs():
    readme = _read("README.md")
    command = re.search(r"^(pip install -q -e \"\.\[test\]\" && python -m pytest.*)$", readme, re.MULTILINE)
    assert command, "README.md has no test command"
    assert command.group(1) in _read(".ci/run").splitlines()


def _slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _links():
    cases = []
    for document in DOCUMENTS + ["experiments/results/README.md"]:
        text = re.sub(r"```.*?```", "", _read(document), flags=re.DOTALL)
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            if not re.match(r"[a-z]+://", link):
                cases.append(pytest.param(document, link, id=f"{document} -> {link}"))
    return cases


@pytest.mark.parametrize("document,link", _links())
def test_relative_links_lead_to_files_and_headings(document, link):
    path, _, anchor = link.partition("#")
    file = os.path.normpath(os.path.join(ROOT, os.path.dirname(document), path)) if path else \
        os.path.join(ROOT, document)
    assert os.path.exists(file), f"{document}: link to missing {path}"
    if anchor and file.endswith(".md"):
        with open(file) as f:
            headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", f.read(), flags=re.DOTALL), re.MULTILINE)
        assert anchor in {_slug(h) for h in headings}, f"{document}: no heading #{anchor} in {path or document}"
