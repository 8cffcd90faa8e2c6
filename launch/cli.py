"""The `transformer-jax` command line: one verb per step of a researcher's work.

    transformer-jax train     --config=configs/table3.py:B1 --workdir=runs/B1   # no flags: the CPU demo
    transformer-jax describe  --config=configs/base.py [--json]
    transformer-jax compile   --config=big --target=v5e-256 [--json]          # ahead of time, on any CPU
    transformer-jax decode    --workdir=runs/B1 [--checkpoint=latest|STEP|avg5] [FILE | --input=FILE] [--output=-]
    transformer-jax evaluate  --workdir=runs/B1 --split=dev|test
    transformer-jax average   --workdir=runs/B1 --last=5
    transformer-jax export    --workdir=runs/B1 --checkpoint=avg5 --format=ctranslate2 [--quantization=int8]
    transformer-jax attention --workdir=runs/B1 --input="The man ..." [--target="..."] --out=DIR   # Figures 3-5
    transformer-jax sweep     --experiment=table3 [--rows=A,B1] [--base=demo_table3] --workdir=runs/table3
    transformer-jax compare   runs/table3/*

`transformer-jax COMMAND --help` lists the flags of one command. Every command takes only its own flags (and
`--config.SECTION.FIELD=VALUE` overrides where it reads a config); any other flag or a stray argument is a one-line
error with exit status 2.
"""

import importlib
import sys
import textwrap
from types import ModuleType

from absl import app, flags

from transformer_jax import host_memory
from transformer_jax.launch.verbs import USAGE_ERROR, Verb, refuse

COMMANDS = {
    "train": "Train (or resume) a run in --workdir.",
    "describe": "Plan a config: parameters, FLOPs per token, the step plan on a layout (--json, --print_config).",
    "compile": "Compile the training and decode steps for a TPU slice or GPU nodes, on any CPU: fits? GiB per chip.",
    "decode": "Translate text with a trained (or averaged) checkpoint.",
    "evaluate": "Translate a dev/test split and score it (sacreBLEU, tokenized BLEU, chrF).",
    "average": "Average the last N checkpoints of a run (§6.1).",
    "export": "Write a checkpoint (or an average) as a CTranslate2 model, optionally int8, that loads as it is.",
    "attention": "Draw a run's attention weights for one sentence (heat maps, Figure 3 lines, .npz; §3.2).",
    "sweep": "Run, or write launch files for, a named experiment (e.g. Table 3).",
    "compare": "Tabulate runs side by side with the paper's Table 3.",
}
HELP = {"-h", "--help", "-help", "--helpshort", "--helpfull", "-?"}

# Each command module (launch/<command>.py) declares its flags (absl key flags: those it defines, plus shared ones
# named with flags.declare_key_flag) and ``VERB = Verb(...)`` (launch/verbs.py): its arguments, overrides and hints.


def _usage() -> str:
    lines = [__doc__.strip(), "", "Commands:"]
    lines += [f"  {name:<10} {text}" for name, text in COMMANDS.items()]
    return "\n".join(lines)


def _unknown_field(error: Exception) -> str:
    """One line for the KeyError/AttributeError a locked config raises on an override of a field it lacks."""
    while error.args and isinstance(error.args[0], Exception):  # an AttributeError wrapping the KeyError
        error = error.args[0]
    text = error.args[0] if error.args and isinstance(error.args[0], str) else str(error)
    return "unknown config field in an override: " + " ".join(text.split())


def verb_of(module: ModuleType) -> Verb:
    """The ``VERB`` a command module declares.

    Raises:
        TypeError: the module declares none, or declares something else (a mistake in the command, not the user's).
    """
    verb = getattr(module, "VERB", None)
    if not isinstance(verb, Verb):
        raise TypeError(f"{module.__name__} declares no VERB = Verb(...) (launch/verbs.py).")
    return verb


def command_flags(module: ModuleType) -> dict[str, flags.Flag]:
    """The flags ``module`` (a command) takes: its absl key flags, by name."""
    return {flag.name: flag for flag in flags.FLAGS.get_key_flags_for_module(module.__name__)}


def _flag_help(flag: flags.Flag, text: str | None = None) -> list[str]:
    name = f"--[no]{flag.name}" if flag.boolean else f"--{flag.name}"
    lines = textwrap.wrap(f"{name}: {text or flag.help}", width=100, initial_indent="  ", subsequent_indent="      ")
    if text is None and flag.default not in (None, "", []):
        lines.append(f"      (default: {flag.default_as_str})")
    return lines


def help_text(command: str, module: ModuleType) -> str:
    """``transformer-jax COMMAND --help``: the usage line, the command's description and its own flags."""
    verb = verb_of(module)
    usage = f"usage: transformer-jax {command} [flags]" + (f" [{verb.positional}]" if verb.positional else "")
    lines = [usage, "", (module.__doc__ or COMMANDS[command]).strip(), "", "flags:"]
    for flag in sorted(command_flags(module).values(), key=lambda f: f.name):
        lines += _flag_help(flag, verb.flag_help.get(flag.name))
    if verb.overrides:
        lines += textwrap.wrap(f"--config.SECTION.FIELD=VALUE: {verb.overrides}", width=100, initial_indent="  ",
                               subsequent_indent="      ")
    return "\n".join(lines)


def check_arguments(command: str, module: ModuleType, args: list[str]) -> list[str]:
    """Refuses (one line, exit status 2) a flag ``command`` does not take or a stray argument; returns the
    positional arguments.

    absl's flags are global (every imported module defines some), so absl alone would accept `decode --config=...`
    or `train --checkpoint=avg5` and ignore them; this check runs before absl parses.
    """
    verb = verb_of(module)
    known = command_flags(module)
    hints = verb.flag_hints
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            positional += args[i:]
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name = arg.lstrip("-").partition("=")[0]
        if name.startswith("config."):
            if not verb.overrides:
                refuse(command, f"--{name} is not a flag of `transformer-jax {command}`, which reads no config."
                      + (f" {hints['config']}" if "config" in hints else ""))
            # defined by --config for each override (FlagValues.get returns a value, not the Flag)
            flag = flags.FLAGS[name] if name in flags.FLAGS else None  # noqa: SIM401
        else:
            flag = known.get(name)
            if flag is None and name.startswith("no") and getattr(known.get(name[2:]), "boolean", False):
                flag = known[name[2:]]
        if flag is None and not name.startswith("config."):
            hint = hints.get(name) or hints.get(name.removeprefix("no")) or (
                f"`transformer-jax {command} --help` lists its flags.")
            refuse(command, f"--{name} is not a flag of `transformer-jax {command}`; {hint}")
        if "=" not in arg and flag is not None and not flag.boolean:
            i += 1  # `--flag value`: the next argument is the value
    kind = verb.positional
    if positional and kind is None:
        hint = (f" (a config is given as --config={positional[0]})"
                if "config" in known and ".py" in positional[0] else "")
        refuse(command, f"unexpected argument {positional[0]!r}{hint}; `transformer-jax {command}` takes only flags.")
    if len(positional) > 1 and not kind.endswith("..."):
        refuse(command, f"takes one {kind}; got {len(positional)} arguments: {' '.join(positional)}.")
    return positional


def run(argv: list[str] | None = None) -> None:
    """Entry point of the console script: dispatches ``argv[1]`` to ``launch/<command>.py``."""
    argv = list(sys.argv if argv is None else argv)
    if len(argv) < 2 or argv[1] in ("-h", "--help", "help"):
        print(_usage())
        return
    command = argv[1]
    if command not in COMMANDS:
        print(f"transformer-jax: unknown command {command!r}; valid: {', '.join(COMMANDS)} "
              "(`transformer-jax --help` says what each does).", file=sys.stderr)
        sys.exit(USAGE_ERROR)
    try:
        host_memory.keep_freed_memory()  # before JAX starts XLA's threads
    except ValueError as e:
        refuse(command, str(e))
    module = importlib.import_module(f"transformer_jax.launch.{command}")
    verb = verb_of(module)
    args = argv[2:]
    if HELP & set(args[:args.index("--")] if "--" in args else args):
        print(help_text(command, module))
        return
    # (imported with the command's module anyway)
    from transformer_jax.launch.flags import read_config_overrides, with_config_files

    if verb.run_overrides:  # typed by the run's config.json when the command reads it (launch/overrides.py)
        from transformer_jax.launch import overrides

        try:
            args = overrides.take_given(args)
        except ValueError as e:
            refuse(command, str(e))
    elif verb.overrides:  # parsed by --config against its config (defines a flag for each, which absl then parses)
        try:
            read_config_overrides([f"transformer-jax {command}", *args])
        except (AttributeError, KeyError) as e:
            refuse(command, _unknown_field(e))
    check_arguments(command, module, args)
    try:
        args = with_config_files(args)  # --config=base, table3:B1,base=multi30k: the package's configs/
    except ValueError as e:
        refuse(command, str(e))
    app.run(module.main, argv=[f"transformer-jax {command}"] + args, flags_parser=_parse_flags)


def _parse_flags(argv: list[str]) -> list[str]:
    """absl flag parsing with one clear line for a bad value or a bad --config (no traceback)."""
    try:
        rest = flags.FLAGS(argv)
        if "config" in flags.FLAGS and flags.FLAGS["config"].present:
            flags.FLAGS["config"].value.get("name")  # a file that failed to load raises only when first read
        return rest
    except flags.Error as e:  # config_flags embeds get_config's traceback: keep its last line
        print(f"{argv[0]}: {str(e).strip().splitlines()[-1].strip()}", file=sys.stderr)
    except OSError as e:  # --config names a file that cannot be loaded
        print(f"{argv[0]}: --config: {str(e).strip().splitlines()[-1].strip()}", file=sys.stderr)
    except (AttributeError, KeyError) as e:  # an override names a field the locked config lacks
        print(f"{argv[0]}: {_unknown_field(e)}", file=sys.stderr)
    sys.exit(USAGE_ERROR)


if __name__ == "__main__":
    run()
