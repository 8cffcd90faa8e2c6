"""What a person watching `transformer-jax train` reads: the progress bar's ETA, and the evaluation's log line with
the dev perplexity (Table 3's "PPL (dev)"), on the bar too.

The bar's rate is checked with an injected clock (a compiling first step of 26 s, then 0.3 s steps, as the demo
on 2 cores); the loop's use of it on one tiny in-process run of 3 steps (configs/tiny.py via tiny_setup).
"""

import io
import logging
import re

import pytest
from tqdm import tqdm

import tiny_setup as tiny
from transformer_jax.run.metrics import read_metrics
from transformer_jax.train import trainer


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def eta_seconds(bar) -> float:
    """The ETA the bar shows (``[elapsed<remaining, rate]``), in seconds."""
    remaining = re.search(r"<([\d:]+),", str(bar))[1]
    seconds = 0
    for part in remaining.split(":"):
        seconds = 60 * seconds + int(part)
    return seconds


def simulate(bar, clock: FakeClock, restart: bool) -> list[float]:
    """A compiling first step (26 s) then 0.3 s steps; the ETA after each of the next 20 steps."""
    clock.now += 26.0
    if restart:
        bar.restart(steps=1)
    bar.update(1)
    etas = []
    for _ in range(20):
        clock.now += 0.3
        bar.update(1)
        etas.append(eta_seconds(bar))
    return etas


def test_the_first_eta_leaves_out_the_compiling_step():
    """1000 steps of 0.3 s after a 26 s compile: the ETA reads about 999 × 0.3 s = 5 min from the first display
    on (tqdm's own rate took the compile as a step's time: 7 h 16 min); the elapsed time stays the wall time."""
    clock = FakeClock()
    bar = trainer.ProgressBar(total=1000, file=io.StringIO(), clock=clock, mininterval=0.1)
    etas = simulate(bar, clock, restart=True)
    assert all(270 <= eta <= 330 for eta in etas), etas
    assert bar.format_dict["elapsed"] == pytest.approx(26.0 + 20 * 0.3)

    plain = tqdm(total=1000, file=io.StringIO(), mininterval=0.1)
    plain._time = clock
    plain.start_t = plain.last_print_t = clock()
    assert simulate(plain, clock, restart=False)[0] > 3600  # what the quick start showed


def test_a_resumed_bar_restarts_from_its_step_and_a_disabled_bar_ignores_restart():
    clock = FakeClock()
    bar = trainer.ProgressBar(total=1000, initial=500, file=io.StringIO(), clock=clock, mininterval=0.1)
    assert all(135 <= eta <= 165 for eta in simulate(bar, clock, restart=True))  # 479 steps × 0.3 s
    trainer.ProgressBar(total=10, disable=True).restart()


class Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A 3-step tiny run with the bar drawn: the bar's restarts and postfixes, and the trainer's log lines."""
    restarts, postfixes = [], []

    class Recording(trainer.ProgressBar):
        def restart(self, steps: int = 1) -> None:
            restarts.append((self.n, steps))
            super().restart(steps)

        def set_postfix(self, ordered_dict=None, refresh=True, **kwargs):
            postfixes.append(dict(ordered_dict or {}, **kwargs))
            super().set_postfix(ordered_dict, refresh, **kwargs)

    workdir = tmp_path_factory.mktemp("run")
    config = tiny.tiny_config(num_steps=3, eval_every_steps=3, log_every_steps=1)
    log, handler = logging.getLogger(trainer.__name__), Lines()
    level = log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(trainer, "ProgressBar", Recording)
            trainer.train(config, str(workdir), progress=True)
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    return {"restarts": restarts, "postfixes": postfixes, "log": handler.lines,
            "metrics": read_metrics(str(workdir))}


def test_the_training_loop_restarts_the_rate_after_the_compiling_step(tiny_run):
    assert tiny_run["restarts"] == [(0, 1)]  # one batch shape: only the first step compiles


def test_the_evaluation_log_line_reads_the_dev_perplexity(tiny_run):
    dev, = [r for r in tiny_run["metrics"] if "dev_ppl" in r]
    line, = [line for line in tiny_run["log"] if line.startswith("step 3:")]
    assert line == f"step 3: dev PPL {dev['dev_ppl']:.2f}, loss {dev['dev_loss']:.4f}"
    assert tiny_run["postfixes"][-1]["dev_ppl"] == f"{dev['dev_ppl']:.2f}"  # and on the bar, beside the loss
    assert {"loss", "lr", "tok_s"} <= set(tiny_run["postfixes"][-1])
    scores = {"dev_ppl": 5.8214, "dev_loss": 1.9, "dev_nll": 1.76, "dev_bleu": 25.314, "dev_tokenized_bleu": 26.0,
              "dev_chrf": 50.12, "dev_brevity_penalty": 0.98}
    assert trainer.eval_line(500, scores) == ("step 500: dev PPL 5.82, loss 1.9000, BLEU 25.31, tokenized BLEU 26.00, "
                                              "chrF 50.12, BP 0.980")
