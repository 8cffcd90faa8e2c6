"""The data of a multi-host run, prepared once (pipeline.prepare): process 0 downloads, trains the vocabulary and
tokenizes, the other hosts wait for its record on the shared workdir outside any JAX collective, and nothing they
write can collide — simulated with 2 processes on localhost (tests/scripts/multihost_train.py) and, for the wait's
timeout and errors, with an injected clock in one process."""

import json
import os
from pathlib import Path

import pytest
from test_multihost_checkpoints import finish, start

import tiny_setup as tiny
from transformer_jax.data import pipeline
from transformer_jax.data.sources import DataError
from transformer_jax.train import trainer


@pytest.mark.slow  # process 1 waits out a slow preparation (~1 min on 2 cores): the slow step
def test_a_slow_preparation_on_process_0_keeps_process_1_out_of_collectives(tmp_path, coordinator_port):
    """Process 0 prepares 8 s longer than usual (WMT14's hour, shortened); process 1 waits by polling the workdir,
    enters no collective before the data is recorded, and both train to the end. Both processes report the same PID
    (hosts in containers): no temporary file is shared, and only process 0 writes the tokenized data."""
    workdir = tmp_path / "run"
    results = finish(start(workdir, tmp_path, coordinator_port, "--num_steps=4", "--slow_prepare_s=8", "--pid=4242"))
    for rc, output in results:
        assert rc == 0, output[-4000:]
    assert "Tokenizing train" not in results[1][1]  # process 1 read process 0's tokens
    assert len(list(workdir.glob("tokens-train-*.npz"))) == 1 and not list(workdir.glob("*.tmp*"))
    assert "key" in json.loads((workdir / pipeline.PREPARED_FILE).read_text())


class _Host1:
    """Process 1's view, in this process: jax.process_index() is 1; the clock advances by each sleep."""

    def __init__(self, monkeypatch, on_sleep=None):
        monkeypatch.setattr(trainer.jax, "process_index", lambda: 1)
        self.now, self.sleeps, self.on_sleep = 0.0, 0, on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        if self.on_sleep:
            self.on_sleep(self.sleeps)


def _no_tokenizing(monkeypatch):
    monkeypatch.setattr(pipeline, "tokenize_pairs", lambda *a, **k: pytest.fail("a waiting host tokenized"))


def test_a_waiting_host_reads_what_process_0_prepared(tmp_path, monkeypatch):
    config = tiny.tiny_config()
    prepared = tmp_path / "prepared"
    pipeline.prepare(config, prepared)  # process 0, elsewhere: the files appear after the third poll

    def appear(sleeps: int) -> None:
        if sleeps == 3:
            for path in prepared.iterdir():
                os.link(path, tmp_path / "run" / path.name)

    (tmp_path / "run").mkdir()
    host = _Host1(monkeypatch, appear)
    _no_tokenizing(monkeypatch)
    tokenizer = trainer.build_shared_tokenizer(config, str(tmp_path / "run"), clock=host.clock, sleep=host.sleep)
    assert host.sleeps == 3 and tokenizer.vocab_size == config.model.vocab_size


def test_a_waiting_host_gives_up_in_one_line(tmp_path, monkeypatch):
    config = tiny.tiny_config()
    config.data.prepare_timeout_minutes = 2.0
    host = _Host1(monkeypatch)
    with pytest.raises(DataError) as error:
        trainer.build_shared_tokenizer(config, str(tmp_path), clock=host.clock, sleep=host.sleep)
    assert "waited 2 min for process 0" in str(error.value) and "--prepare_only" in str(error.value)
    assert host.now > 120 and host.sleeps == 25  # polled every 5 s, no longer than the timeout


def test_a_waiting_host_stops_with_process_0s_error(tmp_path, monkeypatch):
    config = tiny.tiny_config()
    config.data.source, config.data.train_files = "text", str(tmp_path / "missing.en") + "," + str(tmp_path / "x.de")
    with pytest.raises(DataError):
        pipeline.prepare(config, tmp_path)  # process 0 fails: the record says why
    assert "error" in json.loads((tmp_path / pipeline.PREPARED_FILE).read_text())
    host = _Host1(monkeypatch)
    with pytest.raises(DataError, match="Process 0 could not prepare the data: .*missing.en"):
        trainer.build_shared_tokenizer(config, str(tmp_path), clock=host.clock, sleep=host.sleep)
    assert host.sleeps == 0


def test_prepare_only_then_train_tokenizes_nothing(tmp_path, monkeypatch):
    """`train --prepare_only` writes the config, vocabulary, tokens and the record; the run that follows only reads
    them (process 0 checks the record's key instead of preparing again)."""
    from transformer_jax.launch.train import prepare_only

    config = tiny.tiny_config()
    result = prepare_only(config, str(tmp_path / "run"))
    assert set(result["files"]) == {"vocab.model", pipeline.PREPARED_FILE, *(p.name for p in
                                    Path(tmp_path / "run").glob("tokens-train-*.npz"))}
    assert (tmp_path / "run" / "config.json").is_file() and "key" in result["prepared"]
    _no_tokenizing(monkeypatch)
    monkeypatch.setattr(pipeline, "prepare", lambda *a: pytest.fail("prepared twice"))
    trainer.train(config, str(tmp_path / "run"), progress=False, stop_after=1)
