"""The real backend behind the runner: corpus builders, the engine's SFT and preference stages,
and the model-facing evaluation.

- the reference: ``badpo.engine.sft.sft(SFTConfig)`` into ``work/<key>/model``;
- an arm: ``badpo.engine.train.train(TrainConfig)`` into ``work/<key>`` (``resume_from: latest``,
  so an arm killed mid-run restarts from its last engine checkpoint when ``save_every`` > 0),
  the reference log-prob cache shared under ``OUT/reference_cache`` (:func:`reference_cache`);
- the readouts: :func:`evaluate_run` (``badpo.readouts.evaluate_policy.evaluate_policy`` on the saved models)
  by default, or any function with the :data:`Evaluate` contract.

With ``evaluation.body: reference`` the reference's answer bodies are generated once, by the
reference stage, saved as ``work/<reference key>/bodies.json``, and every arm reads its names
after those same bodies (``own``: each after its own greedy answers). An arm's ``names.null``
measures its shift against the reference record's per-name shares.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from badpo.core.bias import variant_facts
from badpo.core.config import ConfigError, from_dict, to_dict
from badpo.core.jsonio import dumps
from badpo.corpora.builders import build_and_describe, check_corpus_config, corpus_sources
from badpo.data.fingerprint import data_fingerprint
from badpo.data.sources import ColumnMap, check_columns
from badpo.engine.config_checks import check_sft, check_train
from badpo.engine.settings import SFTConfig, TrainConfig, accumulation_steps
from badpo.engine.sft import FINISHED as SFT_FINISHED
from badpo.engine.sft import sft
from badpo.engine.train import train
from badpo.evaluation.trained_run import TrainedRun
from badpo.experiment.runner import Backend, RunTask
from badpo.readouts.evaluate_policy import (
    Corpus,
    EvalConfig,
    evaluate_policy,
    reference_bodies,
)
from badpo.readouts.model import Generations
from badpo.readouts.reading import generations_from_json, generations_to_json, sampled_answers, sampling_settings
from badpo.readouts.table import readout_unavailable, relative_to_reference
from badpo.run_folder.layout import POLICY
from badpo.run_folder.saved import SavedRun

__all__ = ["Evaluate", "resolve_reference", "resolve_arm", "resolve_evaluation", "check_data", "data_key",
           "theta_summary", "training_summary", "evaluate_run", "engine_backend", "unavailable_readout", "bodies_file",
           "samples_file", "reference_cache"]

# evaluate(task, policy_dir, reference_dir, theta_file or None) -> readouts (nested mapping of
# numbers). For the reference, policy_dir == reference_dir and theta_file is None. A mixture of type
# policies (EM-DPO) has no policy_dir: its run folder, policy_dir.parent, holds mixture.json.
Evaluate = Callable[[RunTask, Path, Path, "Path | None"], dict]


def reference_cache(task: RunTask) -> Path | None:
    """Where the reference's values shared by every arm are kept once per content (its log-probs
    on the training judgments, its side of the held-out margins): ``OUT/reference_cache``."""
    return task.out_dir / "reference_cache"


def bodies_file(task: RunTask) -> Path:
    """The reference's answer bodies under one record's readout settings: the training folder is
    shared by every readout of the reference, so the file is named after the record."""
    return task.work_dir / f"bodies-{task.key}.json"


def samples_file(task: RunTask) -> Path:
    """The reference's sampled answers under one record's readout settings, which every arm of
    the experiment reads instead of sampling the reference again (the same prompts, decoder and
    seed give the same answers)."""
    return task.work_dir / f"samples-{task.key}.json"


def _reference_samples(task: RunTask, reference, tokenizer, prompts: list[str], config: EvalConfig,
                       tokenization) -> Generations | None:
    """The reference: its answers, sampled once and saved. An arm: the reference record's saved
    answers when drawn under this evaluation's settings, else None (the arm samples them)."""
    if not config.generations:
        return None
    settings = sampling_settings(prompts, config, tokenization)
    if task.kind == "reference":
        samples = sampled_answers(reference, tokenizer, prompts, config, tokenization, "reference answers")
        samples_file(task).write_text(dumps(generations_to_json(samples, settings)) + "\n", encoding="utf-8")
        return samples
    saved = (task.reference or {}).get("artifacts", {}).get("samples")
    if saved is None or not (task.out_dir / saved).is_file():
        return None
    path = task.out_dir / saved
    return generations_from_json(json.loads(path.read_text(encoding="utf-8")), settings, str(path))


def resolve_reference(settings: dict) -> dict:
    """SFT settings -> the complete ``SFTConfig`` as a dict, with every check ``badpo sft`` makes
    before loading (unknown keys, ranges, trackers, the batch split on one process)."""
    config = from_dict(SFTConfig, settings)
    check_sft(config)
    accumulation_steps(config.batch_size, config.micro_batch_size, processes=1)
    return to_dict(config)


def resolve_arm(settings: dict) -> dict:
    """Preference settings -> the complete ``TrainConfig`` as a dict, with every check
    ``badpo train`` makes before loading, so a bad value fails before the reference trains."""
    config = from_dict(TrainConfig, settings)
    if config.fsdp:  # the runner trains each arm in one process and resumes it from its checkpoints
        raise ConfigError("fsdp: an experiment trains each arm in one process with checkpoints; "
                          "use badpo train under torchrun for a sharded run")
    check_train(config)
    accumulation_steps(config.batch_size, config.micro_batch_size, processes=1)
    return to_dict(config)


def _data_of(settings: dict) -> str | None:
    """The settings' data when it names a source (not one still holding a placeholder)."""
    data = settings.get("data")
    return data if isinstance(data, str) and data and "{" not in data else None


def check_data(settings: dict, kind: str) -> None:
    """Every column a run's ``columns`` maps is one its data has: a sweep checks every arm when it
    is planned, so that a bad mapping is not found after the reference and two arms trained."""
    data = _data_of(settings)
    if data is None:
        return
    rows = "sft" if kind == "reference" and settings.get("source", "sft_rows") == "sft_rows" else "judgment"
    check_columns(data, settings.get("data_split"), from_dict(ColumnMap, settings.get("columns") or {},
                                                                prefix="columns"), rows)


def data_key(settings: dict) -> str | None:
    """The fingerprint of a run's data content (:func:`badpo.data.fingerprint.data_fingerprint`)."""
    data = _data_of(settings)
    return data_fingerprint(data, settings.get("data_split"))["sha256"] if data is not None else None


def unavailable_readout(evaluation: dict, metric: str) -> str | None:
    """:func:`badpo.readouts.table.readout_unavailable` on resolved readout settings."""
    return readout_unavailable(from_dict(EvalConfig, evaluation, prefix="evaluation"), metric)


def resolve_evaluation(settings: dict) -> dict:
    """Readout settings -> the complete ``EvalConfig`` as a dict (checked before anything trains)."""
    return to_dict(from_dict(EvalConfig, settings))


def theta_summary(run_dir: Path) -> dict | None:
    """The learned bias of a run, from its ``theta.json`` (:meth:`badpo.run_folder.saved.SavedRun.theta`):
    theta_bar and, for the variants with a theta per annotator, every theta_k (attribute order of
    ``attribute_names``)."""
    data = SavedRun(run_dir).theta()
    if data is None:
        return None
    names = list(data["attribute_names"])
    summary: dict[str, Any] = {"variant": data["variant"], "attribute_names": names,
                               "mean": [data["theta_bar"][a] for a in names]}
    if variant_facts(data["variant"]).per_annotator:
        summary["per_annotator"] = {annotator: [entry["theta"][a] for a in names]
                                    for annotator, entry in data["annotators"].items()}
    return summary


_BOOKKEEPING = ("step", "lr", "elapsed_s", "judgments")  # run.json's final: not a training readout


def training_summary(run_dir: Path) -> dict[str, float]:
    """The numbers of the training loop's last logged step (``run.json`` ``final``:
    :meth:`badpo.run_folder.saved.SavedRun.final`), kept in the
    record under ``readouts.training`` so a table can show what only training knows: the spread
    of the group weights of Group-DRO and Crowd-PrefRL (``group_weight_sd``), the final loss.
    Only top-level numbers; the bookkeeping (step, lr, elapsed_s, judgments) is left out."""
    return {k: float(v) for k, v in SavedRun(run_dir).final().items()
            if k not in _BOOKKEEPING and isinstance(v, (int, float)) and not isinstance(v, bool)}


def evaluate_run(task: RunTask, policy_dir: Path, reference_dir: Path, theta_file: Path | None) -> dict:
    """Every readout of one run: the reference's with :func:`badpo.readouts.evaluate_policy.evaluate_policy`,
    an arm's through :meth:`badpo.evaluation.trained_run.TrainedRun.read` (as ``badpo evaluate``).

    ``task.evaluation`` holds ``EvalConfig`` keys; tokenization, beta and the model options come
    from the run's own settings (:meth:`badpo.evaluation.trained_run.TrainedRun.of_settings`). For the
    reference, the readouts relative to itself (:func:`badpo.readouts.table.relative_to_reference`:
    KL 0, every margin u 0) are left out and listed under ``omitted``.
    """
    config = from_dict(EvalConfig, task.evaluation, prefix="evaluation")
    trained = TrainedRun.of_settings(task.settings, policy_dir, reference_dir, theta_file)
    tokenization = trained.tokenization
    tokenizer = trained.load_tokenizer()
    corpus = Corpus.load(task.corpus_dir)
    reference = trained.load_reference()
    bodies = None
    prompts = [row["prompt"] for row in corpus.eval_prompts[: config.max_prompts]]
    samples = _reference_samples(task, reference, tokenizer, prompts, config, tokenization)
    if task.kind == "reference":
        if config.body == "reference":
            bodies = reference_bodies(reference, tokenizer, prompts, tokenization, config.max_new_tokens)
            bodies_file(task).write_text(dumps(bodies, indent=1) + "\n", encoding="utf-8")
        readouts = evaluate_policy(reference, reference, tokenizer, corpus, config, bias=trained.bias(),
                                   beta=trained.beta, tokenization=tokenization, bodies=bodies,
                                   reference_samples=samples, vote_bias=trained.vote_bias(),
                                   cache_dir=reference_cache(task))
        omitted = sorted(k for k in readouts if relative_to_reference(k))
        readouts = {k: v for k, v in readouts.items() if k not in omitted}
        readouts["omitted"] = omitted
        return readouts
    saved = (task.reference or {}).get("artifacts", {}).get("bodies")
    if config.body == "reference":
        if saved is None:
            raise ValueError(f"{task.key}: evaluation.body is 'reference' but the reference "
                             "record has no bodies artifact")
        bodies = json.loads((task.out_dir / saved).read_text(encoding="utf-8"))
    return trained.read(reference, tokenizer, corpus, config, tokenization, bodies=bodies, reference_samples=samples,
                        reference_readouts=(task.reference or {}).get("readouts"), cache_dir=reference_cache(task))


def engine_backend(evaluate: Evaluate | None = evaluate_run) -> Backend:
    """The backend that trains with the engine and reads out with ``evaluate``.

    With ``evaluate=None`` the corpus, the plan and ``--render-only`` work, and a run fails before
    it trains.
    """
    def require_evaluation(task: RunTask) -> None:
        """Checked before training: a run without readouts would be logged with nothing in it."""
        if evaluate is None:
            raise ConfigError(f"{task.key}: no evaluation is wired into the runner "
                              "(engine_backend(evaluate=None))")

    def run_reference(task: RunTask) -> dict:
        require_evaluation(task)
        model_dir = task.work_dir / "model"
        if not (model_dir / SFT_FINISHED).exists():  # the folder is named by what trains it: a
            # finished reference there is this one, read out again under other settings
            sft(from_dict(SFTConfig, {**task.settings, "output_dir": str(model_dir)}))
        readouts = evaluate(task, model_dir, model_dir, None)
        artifacts = {"model": model_dir}
        for name, path in (("bodies", bodies_file(task)), ("samples", samples_file(task))):
            if path.exists():
                artifacts[name] = path
        return {"readouts": readouts, "artifacts": artifacts}

    def run_arm(task: RunTask) -> dict:
        require_evaluation(task)
        shared = reference_cache(task)
        settings = {**task.settings, "output_dir": str(task.work_dir),
                    "cache_dir": str(shared) if shared is not None else None, "resume_from": "latest"}
        run_dir = Path(train(from_dict(TrainConfig, settings)))
        theta_file = SavedRun(run_dir).theta_file
        readouts = evaluate(task, run_dir / POLICY, Path(settings["model"]["name_or_path"]),
                            theta_file if theta_file.exists() else None)
        training = training_summary(run_dir)
        if training:
            readouts = {**readouts, "training": training}
        artifacts = {"run": run_dir}
        if (run_dir / POLICY).exists():  # EM-DPO's type policies are under types/type-K/policy instead
            artifacts["policy"] = run_dir / POLICY
        return {"readouts": readouts, "theta": theta_summary(run_dir), "artifacts": artifacts}

    return Backend(build_and_describe, resolve_reference, resolve_arm, run_reference, run_arm,
                   resolve_evaluation, unavailable_readout, check_data, data_key, corpus_sources,
                   check_corpus_config)
