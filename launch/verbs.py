"""What a `transformer-jax` command declares about its command line: ``VERB = Verb(...)`` in its module
(launch/<name>.py), read by launch/cli.py.

The flags a command takes are its absl key flags (those it defines, plus shared ones it names with
``flags.declare_key_flag``); its ``Verb`` says the rest, in one typed place rather than in optional module
attributes: the arguments it takes, whether ``--config.SECTION.FIELD=VALUE`` overrides are allowed, what to use
instead of a flag it does not take, and its own help for a flag it shares with another command.
"""

import dataclasses
import sys
from collections.abc import Mapping
from typing import NoReturn

POSITIONAL_KINDS = (None, "FILE", "RUN_FOLDER...")  # none; at most one argument; any number of arguments
USAGE_ERROR = 2  # exit status of a command line that names a wrong flag or argument (as argparse and absl use)


def refuse(command: str, message: str) -> NoReturn:
    """Exits with :data:`USAGE_ERROR` and one line on stderr: the command line itself is wrong (a flag missing,
    unknown, malformed or contradicting another). Work that cannot be done with what is on disk exits 1 instead."""
    print(f"transformer-jax {command}: {message}", file=sys.stderr)
    sys.exit(USAGE_ERROR)


@dataclasses.dataclass(frozen=True)
class Verb:
    """One command's command-line contract, its flags aside.

    Attributes:
        name: the command as typed, which is also its module's name (launch/<name>.py).
        positional: None (flags only), "FILE" (at most one argument) or "RUN_FOLDER..." (any number).
        overrides: what ``--config.SECTION.FIELD=VALUE`` changes, a sentence for --help; None: overrides are refused.
        run_overrides: the overrides change a trained run's config.json (typed by it; launch/overrides.py), not the
            config built from --config.
        flag_hints: {flag name: what to use instead}, for the error about a flag the command does not take.
        flag_help: {flag name: help}, for a flag shared with another command that means something else here (its
            --help shows this text, without the other command's default).
    """

    name: str
    positional: str | None = None
    overrides: str | None = None
    run_overrides: bool = False
    flag_hints: Mapping[str, str] = dataclasses.field(default_factory=dict)
    flag_help: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.positional not in POSITIONAL_KINDS:
            raise ValueError(f"Verb {self.name!r}: positional is one of {POSITIONAL_KINDS}, not {self.positional!r}.")
