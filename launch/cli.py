"""The `transformer-jax` command line: one verb per step of a researcher's work.

    transformer-jax train     --config=configs/table3.py:B1 --workdir=runs/B1   # no flags: the CPU demo
    transformer-jax describe  --config=configs/base.py [--json]
    transformer-jax decode    --workdir=runs/B1 [--checkpoint=latest|STEP|avg5] [--input=-] [--output=-]
    transformer-jax evaluate  --workdir=runs/B1 --split=dev|test
    transformer-jax average   --workdir=runs/B1 --last=5
    transformer-jax sweep     --experiment=table3 [--rows=A,B1] [--base=demo_table3] --workdir=runs/table3
    transformer-jax compare   runs/table3/*

`transformer-jax COMMAND --help` lists every flag of a command.
"""

import importlib
import sys

from absl import app, flags

COMMANDS = {
    "train": "Train (or resume) a run in --workdir.",
    "describe": "Print the resolved config, parameter counts and FLOPs per target token.",
    "decode": "Translate text with a trained (or averaged) checkpoint.",
    "evaluate": "Translate a dev/test split and score it (sacreBLEU, tokenized BLEU, chrF).",
    "average": "Average the last N checkpoints of a run (§6.1).",
    "sweep": "Run, or write launch files for, a named experiment (e.g. Table 3).",
    "compare": "Tabulate runs side by side with the paper's Table 3.",
}


def _usage() -> str:
    lines = [__doc__.strip(), "", "Commands:"]
    lines += [f"  {name:<10} {text}" for name, text in COMMANDS.items()]
    return "\n".join(lines)


def run(argv: list[str] | None = None) -> None:
    """Entry point of the console script: dispatches ``argv[1]`` to ``launch/<command>.py``."""
    argv = list(sys.argv if argv is None else argv)
    if len(argv) < 2 or argv[1] in ("-h", "--help", "help"):
        print(_usage())
        return
    command = argv[1]
    if command not in COMMANDS:
        sys.exit(f"transformer-jax: unknown command {command!r}; valid: {', '.join(COMMANDS)}.\n\n{_usage()}")
    try:  # importing the command defines --config, whose default config parses the overrides in sys.argv
        module = importlib.import_module(f"launch.{command}")
    except (AttributeError, KeyError) as e:
        sys.exit(f"transformer-jax {command}: unknown config field in an override: {e}")
    # absl's --help lists the key flags of the module named sys.argv[0]: register this command's and the shared.
    for name in (module.__name__, "launch.flags"):
        for flag in flags.FLAGS.get_key_flags_for_module(name):
            flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    app.run(module.main, argv=[f"transformer-jax {command}"] + argv[2:], flags_parser=_parse_flags)


def _parse_flags(argv: list[str]) -> list[str]:
    """absl flag parsing with one clear line for a bad --config (no traceback)."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:  # config_flags embeds get_config's traceback: keep its last line
        sys.exit(f"{argv[0]}: {str(e).strip().splitlines()[-1].strip()}")
    except (AttributeError, KeyError) as e:  # an override names a field the locked config lacks
        sys.exit(f"{argv[0]}: unknown config field in an override: {e}")


if __name__ == "__main__":
    run()
