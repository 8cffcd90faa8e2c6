"""Tests for the data sources (§5.1) and the whole pipeline: source → tokenizer → batches, offline."""

import gzip
from pathlib import Path

import numpy as np
import pytest

from transformer_jax.configs import base
from transformer_jax.data import pipeline, translation
from transformer_jax.data.sources import DataError, get_source

MULTI30K = Path(__file__).resolve().parents[1] / "../shared/data/multi30k"  # always there (CI too): no fallback


def make_config(source="text", **data):
    c = base.get_config()
    c.data.source = source
    c.data.update(data)
    return c


def write(path, lines, raw=None):
    data = raw if raw is not None else "".join(f"{line}\n" for line in lines).encode()
    path.write_bytes(gzip.compress(data) if str(path).endswith(".gz") else data)
    return str(path)


# -- registry and bad input --------------------------------------------------------------------------------------


def test_unknown_source_lists_known_ones():
    with pytest.raises(DataError) as e:
        get_source(make_config("wmt15").data)
    for name in ("wmt14_ende", "wmt14_enfr", "multi30k_ende", "text", "synthetic"):
        assert name in str(e.value)


def test_wrong_languages_for_source():
    with pytest.raises(DataError, match="en and de"):
        get_source(make_config("multi30k_ende", target_lang="fr").data)


def test_mismatched_line_counts_names_both_files_and_counts(tmp_path):
    src = write(tmp_path / "a.en", ["a", "b", "c"])
    tgt = write(tmp_path / "a.de.gz", ["x", "y"])
    for spec, counts in ((f"{src},{tgt}", ("3 lines", "2 lines")), (f"{tgt},{src}", ("2 lines", "3 lines"))):
        with pytest.raises(DataError) as e:
            get_source(make_config(train_files=spec).data).load("train")
        message = str(e.value)
        assert src in message and tgt in message
        assert message.index(counts[0]) < message.index(counts[1])


def test_invalid_utf8_names_file_and_line(tmp_path):
    src = write(tmp_path / "b.en", [], raw=b"fine\nalso fine\nbad \xff\xfe byte\n")
    tgt = write(tmp_path / "b.de", ["x", "y", "z"])
    with pytest.raises(DataError, match=r"b\.en, line 3: invalid UTF-8"):
        get_source(make_config(dev_files=f"{src},{tgt}").data).load("dev")


def test_missing_file_and_missing_spec(tmp_path):
    tgt = write(tmp_path / "c.de", ["x"])
    with pytest.raises(DataError, match="File not found: .*nope.en"):
        get_source(make_config(test_files=f"{tmp_path}/nope.en,{tgt}").data).load("test")
    bad_gz = tmp_path / "c.en.gz"
    bad_gz.write_bytes(b"not gzip\n")
    with pytest.raises(DataError, match="c.en.gz: cannot read"):
        get_source(make_config(test_files=f"{bad_gz},{tgt}").data).load("test")
    with pytest.raises(DataError, match="train_files"):
        get_source(make_config().data).load("train")
    with pytest.raises(DataError, match="Unknown split"):
        get_source(make_config().data).load("valid")


def test_empty_lines_skipped_in_train_kept_in_eval(tmp_path):
    src = write(tmp_path / "d.en", ["one", "", "three", "four"])
    tgt = write(tmp_path / "d.de", ["eins", "zwei", "drei", " "])
    spec = f"{src},{tgt}"
    source = get_source(make_config(train_files=spec, dev_files=spec).data)
    assert source.load("train") == [("one", "eins"), ("three", "drei")]
    assert source.num_skipped_empty["train"] == 2
    assert source.load("dev") == [("one", "eins"), ("", "zwei"), ("three", "drei"), ("four", "")]
    assert source.num_skipped_empty["dev"] == 0


# -- Multi30k ----------------------------------------------------------------------------------------------------


def test_multi30k_counts_and_first_lines():
    source = get_source(make_config("multi30k_ende", data_dir=str(MULTI30K)).data)
    train = source.load("train")
    assert len(train) == 29000 and source.num_skipped_empty["train"] == 0
    assert train[0] == (
        "Two young, White males are outside near many bushes.",
        "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    )
    dev, test = source.load("dev"), source.load("test")
    assert (len(dev), len(test)) == (1014, 1000)
    assert dev[0][0] == "A group of men are loading cotton onto a truck"
    assert test[0][0] == "A man in an orange hat starring at something."
    reverse = get_source(make_config("multi30k_ende", data_dir=str(MULTI30K), source_lang="de", target_lang="en").data)
    assert next(reverse.pairs("test")) == test[0][::-1]


def test_multi30k_download_verifies_checksums(tmp_path, monkeypatch):
    monkeypatch.setattr(translation, "MULTI30K_URL", MULTI30K.resolve().as_uri() + "/")
    monkeypatch.setattr(translation, "MULTI30K_CACHE_DIR", str(tmp_path / "cache"))
    source = get_source(make_config("multi30k_ende").data)  # data_dir "" → download into the cache
    assert len(source.load("test")) == 1000
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [
        "test_2016_flickr.de.gz",
        "test_2016_flickr.en.gz",
    ]
    monkeypatch.setattr(translation, "MULTI30K_SHA256", {**translation.MULTI30K_SHA256, "val.en.gz": "0" * 64})
    with pytest.raises(DataError, match="Checksum mismatch .*val.en.gz"):
        source.load("dev")
    assert not list((tmp_path / "cache").glob("val*"))  # nothing half-written


# -- tensorflow-datasets WMT 2014 (mock data) --------------------------------------------------------------------


def test_wmt14_mock_data_through_the_whole_pipeline(tmp_path):
    import tensorflow_datasets as tfds  # a dependency: its absence is a failure, not a skip
    config = make_config("wmt14_enfr", target_lang="fr", data_dir=str(tmp_path / "tfds"), tokens_per_batch=512)
    config.data.max_length, config.model.vocab_size, config.model.max_len = 64, 300, 64
    with tfds.testing.mock_data(num_examples=64):
        source = get_source(config.data)
        train = source.load("train")
        assert len(train) == 64 and all(isinstance(s, str) and isinstance(t, str) for s, t in train)
        tokenizer = pipeline.build_tokenizer(config, tmp_path)
        batches = pipeline.train_iterator(config, tokenizer, row_multiple=2, cache_dir=tmp_path)
        src_texts, refs, dev_batches = pipeline.eval_data(config, tokenizer, "dev", batch_size=16)
    assert (tmp_path / "vocab.model").is_file() and tokenizer.vocab_size == 300
    batch = next(batches)
    assert batch["inputs"].dtype == np.int32 and batch["inputs"].shape[0] % 2 == 0
    assert (batch["inputs"] > 0).sum() > 0 and 0 < batches.stats["fill_rate"] <= 1
    assert len(src_texts) == len(refs) == 64 and sum((b["index"] >= 0).sum() for b in dev_batches) == 64
    first, index = dev_batches[0]["inputs"][0], dev_batches[0]["index"][0]  # batches are grouped by length
    assert tokenizer.decode(first) == " ".join(src_texts[index].split())  # SentencePiece collapses whitespace runs


def test_wmt14_preparation_without_network_names_the_url_and_leaves_nothing(tmp_path, monkeypatch):
    """The real tfds builder (no mock) prepares WMT14 from statmt.org; with no network the download fails at once
    (injected) and the error names the network and the URL, not a package; the data_dir is left as it was. In a
    fresh install this also fails if a package tfds imports on that path is not a dependency (importlib_resources
    was not, on Python 3.11)."""
    import requests

    def offline(session, request, **kwargs):
        raise requests.exceptions.ConnectionError(f"Failed to resolve '{request.url.split('/')[2]}'", request=request)

    monkeypatch.setattr(requests.Session, "send", offline)
    data_dir = tmp_path / "tfds"
    (data_dir / "other_dataset").mkdir(parents=True)  # someone else's data stays
    config = make_config("wmt14_ende", data_dir=str(data_dir))
    with pytest.raises(DataError) as error:
        get_source(config.data).load("dev")
    message = str(error.value)
    assert "no network connection" in message and "statmt.org" in message and "\n" not in message, message
    assert sorted(p.relative_to(data_dir).as_posix() for p in data_dir.rglob("*")) == ["other_dataset"]


def test_wmt14_missing_package_is_named(tmp_path):
    """A package tfds imports (lazily) on its prepare path missing: one line naming it and the pip command. In a
    subprocess, where the package can be hidden before tfds first imports it."""
    import subprocess
    import sys

    program = f"""
import sys
sys.modules["importlib_resources"] = None  # import raises ModuleNotFoundError
import requests
requests.Session.send = lambda *a, **k: sys.exit("downloaded without the package")
from transformer_jax.configs import base
from transformer_jax.data.sources import DataError, get_source
c = base.get_config()
c.data.data_dir = {str(tmp_path / "tfds")!r}
try:
    get_source(c.data).load("dev")
except DataError as e:
    print(e)
"""
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    line = result.stdout.strip().splitlines()[-1]
    assert "needs the Python package 'importlib_resources'" in line and "pip install importlib-resources" in line, line
    assert not (tmp_path / "tfds").exists()


# -- text files and synthetic through the pipeline ---------------------------------------------------------------


def test_text_source_pipeline_caches_tokens(tmp_path):
    rng = np.random.default_rng(0)
    words = ["haus", "baum", "katze", "hund", "rot", "blau", "gross", "klein"]
    en = [" ".join(rng.choice(words, rng.integers(1, 12))) for _ in range(300)]
    de = [s.upper() for s in en]
    spec = f"{write(tmp_path / 't.en', en)},{write(tmp_path / 't.de.gz', de)}"
    config = make_config(train_files=spec, dev_files=spec, tokens_per_batch=256, max_length=32)
    config.model.vocab_size = 300
    tokenizer = pipeline.build_tokenizer(config, tmp_path)
    it = pipeline.train_iterator(config, tokenizer, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("tokens-train-*.npz"))) == 1
    again = pipeline.train_iterator(config, tokenizer, cache_dir=tmp_path)  # from the cache
    for _ in range(3):
        a, b = next(it), next(again)
        assert all(np.array_equal(a[k], b[k]) for k in a)
    config.model.vocab_size = 400
    with pytest.raises(DataError, match="400"):
        pipeline.build_tokenizer(config, tmp_path)  # the saved vocabulary has another size


def test_synthetic_source():
    config = make_config("synthetic")
    config.data.synthetic.update({"seed": 0, "train_size": 200, "dev_size": 20, "test_size": 10})
    source = get_source(config.data)
    assert len(source.load("dev")) == 20 and len(source.load("test")) == 10
    train = source.load("train")
    assert len(train) + source.num_skipped_empty["train"] == 200
    config.data.source_lang, config.data.target_lang = "de", "en"
    assert get_source(config.data).load("test") == [p[::-1] for p in source.load("test")]
