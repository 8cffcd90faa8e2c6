"""The checkpoint-name grammar (latest | STEP | avgN, §6.1): one parser, and the commands that take a name agree."""

import ml_collections
import pytest

from transformer_jax.configs import tiny
from transformer_jax.launch import grid
from transformer_jax.launch.flags import check_eval_checkpoint
from transformer_jax.run.checkpoint_spec import CheckpointSpec, parse

GOOD = {"latest": CheckpointSpec("latest"), "40": CheckpointSpec("step", 40), "avg2": CheckpointSpec("avg", 2),
        "avg02": CheckpointSpec("avg", 2)}
BAD = ["best", "last", "Latest", "avg", "avgx", "avg-1", "-1", "4.0", " 40", "avg 2", "5avg", ""]


@pytest.mark.parametrize("text", GOOD)
def test_parse_reads_each_form(text):
    assert parse(text) == GOOD[text]


@pytest.mark.parametrize("text", BAD)
def test_parse_refuses_anything_else_in_one_line(text):
    with pytest.raises(ValueError, match=rf"^Bad checkpoint {text!r}: use latest, a step number, or avgN"):
        parse(text)


@pytest.mark.parametrize("text", [*GOOD, *(b for b in BAD if b.strip() == b and b)])  # grid strips values
def test_eval_checkpoint_and_grid_accept_the_same_names(text):
    """A name --eval_checkpoint takes before training, --grid=checkpoint=... takes after it (and the reverse)."""
    schedule = ml_collections.ConfigDict(dict(checkpoint_every_steps=10, num_steps=40, keep_checkpoints=3))

    def accepted(check) -> bool:
        try:
            check()
            return True
        except ValueError as error:
            assert "use latest, a step number, or avgN" in str(error)
            return False

    by_flag = accepted(lambda: check_eval_checkpoint(text, schedule))
    by_grid = accepted(lambda: grid.parse_axes([f"checkpoint={text}"], tiny.get_config(), {}, False))
    assert by_flag == by_grid == (text in GOOD)
