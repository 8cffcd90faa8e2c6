"""Evaluating on more data-parallel devices than the batch has rows (decode.batch_size 64 on a v5e-256): the
batch is padded with empty rows, and the translations and dev loss are those of one device. Before the padding,
`sharding.global_eval_batch` could not split such a batch and decoding on the pod failed."""

import numpy as np
from test_train_sharding import SCRIPTS, run_script


def test_three_sentences_on_eight_devices_decode_as_on_one():
    out = run_script([str(SCRIPTS / "eval_on_many_devices.py")])
    one, eight = out["one"], out["eight"]
    assert (one["rows"], eight["rows"]) == (3, 8) and eight["padding_rows_zero"]
    assert one["ids"] == eight["ids"]
    assert one["tokens"] == eight["tokens"] > 0  # padding rows carry no target tokens
    np.testing.assert_allclose(eight["loss"], one["loss"], rtol=1e-5)
