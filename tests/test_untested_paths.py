"""Two paths no other test executes: dev BLEU during training, and `transformer-jax train` stopped by SIGTERM.

- ``config.train.eval_bleu``: launch/train.py's run_training passes evaluation.dev_bleu_hook to the trainer, which
  adds dev BLEU to the metrics of every evaluation. Each recorded score must be the dev BLEU of the parameters of
  that very step (re-decoded here from the checkpoint saved at the same step), not of an earlier evaluation's.
- Preemption: a SIGTERM to `transformer-jax train` saves a checkpoint at the next step and ends the command with
  status 143 and one line naming that step (train/preemption.py, launch/cluster.py).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tiny_setup as tiny
from cli_runs import REPO
from transformer_jax.data import pipeline
from transformer_jax.decode.restore import restore_run
from transformer_jax.decode.translate import Translator
from transformer_jax.evaluate.evaluation import bleu_of
from transformer_jax.launch.train import run_training
from transformer_jax.run import folder
from transformer_jax.run.metrics import read_metrics

EVAL_EVERY = 20
NUM_STEPS = 80  # dev chrF is off 0 by then (0 at steps 20 and 40); BLEU can still be 0 (it is on AMD EPYC)
DEADLINE_S = 240.0  # generous: the files are polled, never a fixed sleep


# --- dev BLEU during training -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bleu_run(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("dev_bleu") / "run"
    config = tiny.tiny_config(num_steps=NUM_STEPS, eval_every_steps=EVAL_EVERY, checkpoint_every_steps=EVAL_EVERY,
                              log_every_steps=EVAL_EVERY, learning_rate_scale=1.0, eval_bleu=True)
    config.data.synthetic.dev_size = 8
    config.decode.method = "greedy"  # the hook decodes with config.decode; greedy keeps this test fast
    summary = run_training(config, str(workdir), eval_splits=(), command=["test"])
    assert summary["step"] == NUM_STEPS
    return workdir


def test_dev_bleu_is_logged_at_every_evaluation(bleu_run):
    records = [r for r in read_metrics(str(bleu_run)) if "dev_bleu" in r]
    assert [r["step"] for r in records] == list(range(EVAL_EVERY, NUM_STEPS + 1, EVAL_EVERY))
    for record in records:
        for key in ("dev_bleu", "dev_bleu_lowercase", "dev_tokenized_bleu", "dev_chrf"):
            assert 0.0 <= record[key] <= 100.0, (key, record)
        assert 0.0 <= record["dev_brevity_penalty"] <= 1.0, record  # 0 when every output is empty (step 20)
        assert "dev_ppl" in record  # one evaluation record: the loss and the BLEU of the same parameters


def test_dev_bleu_is_that_of_the_step_s_own_parameters(bleu_run):
    """Re-decodes the dev split from each evaluation step's checkpoint: the same BLEU as logged during training."""
    logged = {r["step"]: (r["dev_bleu"], r["dev_tokenized_bleu"], r["dev_chrf"], r["dev_brevity_penalty"])
              for r in read_metrics(str(bleu_run)) if "dev_bleu" in r}
    # chrF moves as the model learns, so a stale decoder would be seen; BLEU is compared too, but this early it can
    # be 0 throughout (60 steps gave 0 at every evaluation on an AMD EPYC machine, > 0 on others).
    assert len({scores[2] for scores in logged.values()}) > 1 and logged[NUM_STEPS][2] > 0.0, logged
    run = restore_run(str(bleu_run), str(NUM_STEPS))
    _, refs, batches = pipeline.eval_data(run.config, run.tokenizer, "dev")
    translator = Translator(run.config, run.graphdef, run.params, run.tokenizer, run.mesh)
    for step, scores in logged.items():
        translator.params = restore_run(str(bleu_run), str(step)).params
        result = bleu_of(run.config, translator.translate_batches(batches), refs)
        assert (result["sacrebleu"], result["tokenized_bleu"], result["chrf"],
                result["brevity_penalty"]) == pytest.approx(scores, abs=1e-9), step


# --- SIGTERM ------------------------------------------------------------------------------------------------------


def logged_steps(workdir: Path) -> list[int]:
    """Steps of the training records (train_loss) in metrics.jsonl so far; [] before the file exists."""
    try:
        with open(workdir / folder.METRICS_FILE) as f:
            lines = f.readlines()
    except FileNotFoundError:
        return []
    steps = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:  # a line being written
            continue
        if "train_loss" in record:
            steps.append(record["step"])
    return steps


def test_sigterm_saves_the_step_reached_and_exits_143(tmp_path):
    workdir = tmp_path / "run"
    # 100000 steps cannot finish before the signal; only the SIGTERM save writes a checkpoint (no schedule, no clock).
    proc = subprocess.Popen(
        [sys.executable, "-c", "from transformer_jax.launch.cli import run; run()", "train", "--config=tiny",
         f"--workdir={workdir}", "--eval_splits=", "--config.train.num_steps=100000",
         "--config.train.log_every_steps=1", "--config.train.eval_every_steps=0",
         "--config.train.checkpoint_every_steps=0", "--config.train.checkpoint_every_minutes=0"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not logged_steps(workdir):  # the loop runs (its SIGTERM handler is in place): a step was logged
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no training step logged"
            time.sleep(0.2)
        signalled_after = max(logged_steps(workdir))
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith("transformer-jax train:")]
    assert ours == [lines[-1]], lines[-5:]  # one line, the last one
    match = re.fullmatch(r"transformer-jax train: stopped by SIGTERM after step (\d+); its checkpoint is saved — "
                         r"run the same command again to resume", lines[-1])
    assert match, lines[-1]
    step = int(match.group(1))
    assert step >= signalled_after and step < 100000
    assert folder.checkpoint_steps(workdir) == [step]  # saved by the signal, complete (orbax names it when whole)
    assert max(logged_steps(workdir)) == step  # the step reached was logged, and nothing after it
    assert os.path.isfile(workdir / folder.CONFIG_FILE)
