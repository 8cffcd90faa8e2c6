"""`transformer-jax train`: train (or resume) a run, then report dev/test BLEU and sample translations.

    transformer-jax train                                        # CPU demo on the built-in synthetic corpus
    transformer-jax train --config=configs/table3.py:B1 --workdir=runs/B1 --config.train.num_steps=50000

Running it again on the same --workdir resumes from the latest checkpoint (a finished run is only scored again).
The data files of every split, --eval_checkpoint and the workdir are checked before training starts, and a start
that fails before it saves a checkpoint leaves the workdir as it was (no config.json, no provenance record), so
the corrected command can run in the same --workdir. A SIGTERM (preemption, a Slurm time limit) saves a checkpoint
at the next step and exits with status 143.

``--prepare_only`` downloads and prepares the data, trains the vocabulary and tokenizes the training pairs into the
workdir, then stops: run it once before a multi-host job (README, "Paper scale").

``--branch_from=RUN --branch_step=S`` starts a new run from RUN's checkpoint of step S when the config differs from
RUN's only in what acts after S (the run's end, a cooldown from S on, evaluation, checkpoints, decoding): the
result is the run the config trains from scratch, S steps sooner (transformer_jax/run/branch.py).
"""

import contextlib
import json
import logging
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence

import jax
import ml_collections
from absl import flags

from transformer_jax import sharding
from transformer_jax.data import pipeline
from transformer_jax.data.sources import DataError, get_source
from transformer_jax.data.tokenizer import VOCAB_FILENAME
from transformer_jax.decode.restore import restore_run
from transformer_jax.evaluate.evaluation import dev_bleu_hook, evaluate_split, score_line
from transformer_jax.launch import cluster, logs
from transformer_jax.launch.flags import (
    CONFIG,
    EVAL_CHECKPOINT,
    EVAL_SPLITS,
    JSON,
    SCORED_SPLITS,
    WORKDIR,
    check_eval_checkpoint,
    check_eval_splits,
)
from transformer_jax.launch.verbs import Verb, refuse
from transformer_jax.run import branch, folder, provenance
from transformer_jax.run.metrics import read_metrics
from transformer_jax.train.preemption import Preempted
from transformer_jax.train.trainer import NonFiniteLossError, build_shared_tokenizer, train

NUM_SAMPLES = flags.DEFINE_integer("num_samples", 3, "Sample translations printed after training.")
BRANCH_FROM = flags.DEFINE_string(
    "branch_from", None, "Start a new --workdir from this run's checkpoint of --branch_step (copied with its "
    "vocabulary, metrics and provenance): allowed when the config differs only in what acts after that step "
    "(num_steps, cooldown_steps, evaluation, checkpoints, mesh, decoding); the result equals a run from scratch.")
BRANCH_STEP = flags.DEFINE_integer("branch_step", None, "The step of --branch_from's checkpoint to start from.")
PREPARE_ONLY = flags.DEFINE_bool(
    "prepare_only", False, "Prepare the run's data and stop: download and build the dataset (WMT14 through "
    "tensorflow-datasets), train the vocabulary and tokenize the training pairs into --workdir, once, before a "
    "multi-host job (whose hosts then start at once). Prints the prepared files as JSON.")
for _name in ("config", "workdir", "eval_checkpoint", "eval_splits", "json", *cluster.FLAG_NAMES):
    flags.declare_key_flag(_name)
VERB = Verb(
    "train",
    overrides="override any field of the config, e.g. --config.train.num_steps=50000 (configs are locked: a typo fails).",
    flag_hints={"checkpoint": "train scores its result with --eval_checkpoint=latest|STEP|avgN."})

logger = logging.getLogger(__name__)


def check_workdir(workdir: str) -> None:
    """Raises ValueError unless ``workdir`` is a folder this process can write (or can create)."""
    path = os.path.abspath(workdir)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"--workdir={workdir} is a file, not a folder.")
    existing = path
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing) or not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--workdir={workdir}: {existing} is not a writable folder (permission denied).")


def preflight(config: ml_collections.ConfigDict, workdir: str, eval_splits: Sequence[str], checkpoint: str,
              branch_from: tuple[str, int] | None = None) -> None:
    """Everything a start will need, checked before anything is written or trained.

    The scored splits and checkpoint, the workdir (writable, and not a run of another model), the run to branch
    from and its step (``branch_from``), and on process 0 the data source and the files of every split it reads
    (the training data's first pair; the dev split, and each scored split, whole): reading them may download and
    prepare them (WMT14), which one host does (trainer.build_shared_tokenizer says how the others wait).

    Raises:
        ValueError (DataError for the data): what to change, in one line.
    """
    check_eval_splits(eval_splits)
    check_eval_checkpoint(checkpoint, config.train)
    check_workdir(workdir)
    folder.check_config(config, workdir)
    if branch_from is not None:
        branch.check(config, *branch_from)
    if jax.process_index() != 0:  # process 0 reads (and prepares) the data; the others wait for it, then read it
        return
    source = get_source(config.data)
    for split in dict.fromkeys(("train", "dev", *eval_splits)):  # the dev loss is computed during training
        try:
            if split != "train":
                source.load(split)
                continue
            pairs = source.pairs("train")
            try:
                if next(pairs, None) is None:
                    raise DataError("it has no sentence pairs.")
            finally:
                pairs.close()
        except DataError as e:
            raise DataError(f"The {split} split{split_field(config, split)}: {e}") from None


def split_field(config: ml_collections.ConfigDict, split: str) -> str:
    """`` (config.data.test_files)`` for the text source: where a mistake in the split's files is corrected."""
    return f" (config.data.{split}_files)" if config.data.source == "text" else ""


@contextlib.contextmanager
def undone_unless_saved(workdir: str) -> Iterator[None]:
    """Leaves ``workdir`` as it was when the block fails before a checkpoint of a new step is saved.

    A start that never trained must not lock the folder: config.json (which would refuse the corrected config),
    vocab.model, a provenance record of the failed start, metrics — whatever it wrote goes, and files it rewrote or
    appended to get their old contents back. Only process 0 writes, so only process 0 undoes.
    """
    existed = os.path.isdir(workdir)
    before = set(os.listdir(workdir)) if existed else set()
    config_file = folder.path(workdir, folder.CONFIG_FILE)
    config_text = None
    if os.path.isfile(config_file):
        with open(config_file, "rb") as f:
            config_text = f.read()
    appended = {name: os.path.getsize(folder.path(workdir, name)) for name in (folder.PROVENANCE_FILE,
                folder.METRICS_FILE) if os.path.isfile(folder.path(workdir, name))}
    steps = folder.checkpoint_steps(workdir)
    try:
        yield
    except BaseException:
        if jax.process_index() == 0 and os.path.isdir(workdir) and folder.checkpoint_steps(workdir) == steps:
            for name in set(os.listdir(workdir)) - before:
                target = folder.path(workdir, name)
                if os.path.isdir(target) and not os.path.islink(target):
                    shutil.rmtree(target, ignore_errors=True)
                else:
                    os.remove(target)
            if config_text is not None:
                with open(config_file, "wb") as f:
                    f.write(config_text)
            for name, size in appended.items():
                os.truncate(folder.path(workdir, name), size)
            if not existed:
                with contextlib.suppress(OSError):
                    os.rmdir(workdir)
            logger.debug("Nothing was trained: %s is left as it was before this start.", workdir)
        raise


def training_figures(workdir: str, last: dict) -> dict:
    """train_loss and dev_ppl of the run: from this start's last metrics, else (a finished run only scored again)
    its metrics.jsonl's last records of them."""
    figures = {key: last.get(key) for key in ("train_loss", "dev_ppl")}
    if None in figures.values():
        for record in read_metrics(workdir):
            figures.update({key: record[key] for key in figures if last.get(key) is None and key in record})
    return figures


def run_training(config: ml_collections.ConfigDict, workdir: str, eval_splits: Sequence[str] = SCORED_SPLITS,
                 checkpoint: str = "latest", on_eval: Callable[[str, dict, str], None] | None = None,
                 command: list[str] | None = None, branch_from: tuple[str, int] | None = None) -> dict:
    """Trains (or resumes) ``config`` in ``workdir``, then scores ``eval_splits`` with ``checkpoint``.

    Everything the start needs is checked first (:func:`preflight`); each start appends the commit, machine and
    ``command`` (default: this process's command line) to ``<workdir>/provenance.jsonl`` (transformer_jax/run/provenance.py);
    a start that fails before saving a checkpoint leaves the workdir as it was (:func:`undone_unless_saved`).
    Writes ``eval_<split>.json`` per split (see transformer_jax/evaluate/evaluation.py). ``on_eval(split, result,
    checkpoint)`` is called after each split (``result`` still holds its ``samples``). Returns the summary that
    `transformer-jax train` prints: workdir, step, train_loss, dev_ppl, <split>_bleu, <split>_tokenized_bleu,
    signature. ``branch_from=(run, step)`` first copies that run up to that step into a new ``workdir``
    (transformer_jax/run/branch.py; the copy stays if the start then fails, and the same command resumes it).
    """
    if branch_from is not None and folder.checkpoint_steps(workdir):
        logger.info("%s already has checkpoints: resuming it (--branch_from copies nothing).", workdir)
        branch_from = None  # a branch already copied resumes as any run does (its source may be gone by now)
    preflight(config, workdir, eval_splits, checkpoint, branch_from)
    if branch_from is not None:
        branch.copy(*branch_from, workdir)
    with undone_unless_saved(workdir):
        provenance.append(workdir, command)
        hook = None
        if config.train.eval_bleu:  # dev BLEU at every evaluation (decodes the dev set: slow on CPU)
            hook = dev_bleu_hook(config, build_shared_tokenizer(config, workdir), sharding.make_mesh(config.train.mesh))
        last = train(config, workdir, eval_hook=hook)
    summary = {"workdir": workdir, "step": last.get("step"), **training_figures(workdir, last)}
    if eval_splits:
        run = restore_run(workdir, checkpoint)
        for split in eval_splits:
            result = evaluate_split(run, workdir, split)
            if "f1" in result:  # a parsing run (§6.3)
                summary[f"{split}_f1"] = result["f1"]
            else:
                summary[f"{split}_bleu"] = result["sacrebleu"]
                summary[f"{split}_tokenized_bleu"] = result["tokenized_bleu"]
                summary["signature"] = result["signature"]
            if on_eval is not None:
                on_eval(split, result, run.checkpoint)
    return summary


def prepare_only(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """`train --prepare_only`: the data of ``config`` prepared in ``workdir`` (pipeline.prepare), checked first as a
    start is (:func:`preflight`); a failure leaves the workdir as it was. Returns what it wrote."""
    preflight(config, workdir, (), "latest")
    with undone_unless_saved(workdir):
        folder.save_config(config, workdir)
        tokenizer = build_shared_tokenizer(config, workdir)
    return {"workdir": workdir, "prepared": pipeline.read_prepared(workdir), "vocab_size": tokenizer.vocab_size,
            "files": sorted(name for name in os.listdir(workdir)
                            if name in (VOCAB_FILENAME, pipeline.PREPARED_FILE) or name.startswith("tokens-"))}


def _print_eval(split: str, result: dict, checkpoint: str) -> None:
    del split, checkpoint  # (both are in the result)
    print(score_line(result))
    for src, hyp, ref in result["samples"][:NUM_SAMPLES.value]:
        print(f"  SRC {src}\n  OUT {hyp}\n  REF {ref}")


def check_command_line(config: ml_collections.ConfigDict) -> None:
    """Exits with one line and status 2 when the flags contradict each other or the config (launch/cli.py's usage
    errors), before anything is read or started; what the workdir, the data or a branched-from run hold is checked
    by :func:`preflight` (status 1)."""
    try:
        if (BRANCH_FROM.value is None) != (BRANCH_STEP.value is None):
            raise ValueError("--branch_from and --branch_step go together: the run and the step of its checkpoint.")
        if PREPARE_ONLY.value and BRANCH_FROM.value is not None:
            raise ValueError("--prepare_only prepares a new run's data; a branch takes its run's (--branch_from).")
        check_eval_splits(EVAL_SPLITS.value)
        check_eval_checkpoint(EVAL_CHECKPOINT.value, config.train)
    except ValueError as e:
        refuse("train", " ".join(str(e).split()))


def main(argv: list[str]) -> None:
    del argv
    logs.setup()
    config = CONFIG.value
    check_command_line(config)
    cluster.maybe_initialize()
    workdir = WORKDIR.value or os.path.join("runs", config.name.replace("/", "_"))
    try:
        branch_from = None if BRANCH_FROM.value is None else (BRANCH_FROM.value, BRANCH_STEP.value)
        if PREPARE_ONLY.value:
            print(json.dumps(prepare_only(config, workdir)))
            return
        summary = run_training(config, workdir, EVAL_SPLITS.value, EVAL_CHECKPOINT.value,
                               on_eval=None if JSON.value else _print_eval, branch_from=branch_from)
    except Preempted as e:  # a SIGTERM (preemption, a Slurm time limit): the checkpoint is saved
        cluster.exit_preempted("train", e)
    except (ValueError, OSError, NonFiniteLossError) as e:  # bad data (DataError), another run in the workdir, ...
        sys.exit(f"transformer-jax train: {' '.join(str(e).split())}")
    print(json.dumps(summary))
