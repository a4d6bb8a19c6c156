"""One run's life in its output folder, the same for ``sft``, ``train`` and ``rm``.

Before anything loads, the config is resolved (the stage's learning rate; a judgment run's
``{method}`` and ``{seed}`` in output_dir), checked, and fitted to the model. The folder is then the
run's for its duration (:func:`badpo.run_folder.ownership.own_folder`: a lock, the run's identity and
data recorded, another run refused or, with ``overwrite``, replaced, no trace left by a run that
fails before it writes). A finished run found there is kept; otherwise the stage trains, from its
own checkpoint when ``resume_from`` names one (:func:`badpo.engine.loop.resume_point`), and a run
on judgments commits ``run.json``, ``theta.json`` and its model as one unit
(:func:`commit_judgment_outputs`).

What differs between the stages is the :class:`Lifecycle` each declares: its checks, which file
marks a run finished, which files are a run's, whether it resumes, and what it checks of its
folder first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from badpo.core.jsonio import dumps
from badpo.engine.loop import Run, notice, resume_point
from badpo.engine.reporting import read_log, theta_convergence, theta_notice
from badpo.engine.runtime import fit_to_model, make_accelerator
from badpo.engine.settings import RunConfig
from badpo.run_folder.final_commit import commit_final
from badpo.run_folder.layout import SUMMARY_FILE
from badpo.run_folder.ownership import RunFiles, own_folder, preference_run_files
from badpo.theta.level import save_theta

# (resolved config, output folder, accelerator, checkpoint to resume or None) -> the output folder
Train = Callable[[Any, Path, Any, "Path | None"], Path]


def _always(config: Any) -> bool:
    return True


def _nothing_more(config: Any, output: Path, accelerator: Any) -> None:
    """A stage with no check of its folder beyond the lifecycle's own."""


@dataclass(frozen=True)
class Lifecycle:
    """How one stage's runs live in their folder: the parts that differ between stages."""

    check: Callable[[Any], None]  # the config's checks before anything loads (checks.check_train, ...)
    finished: str = SUMMARY_FILE  # the file whose presence means the folder holds this run, finished
    kept: str = "holds this run, finished; its results are kept"  # what is said when it is found
    run_files: RunFiles = preference_run_files  # folder -> the names a run of the stage writes there
    resumes: Callable[[Any], bool] = _always  # whether the run resumes from checkpoints in the folder
    check_folder: Callable[[Any, Path, Any], None] = _nothing_more  # (config, folder, accelerator), before the lock

    def run(self, config: RunConfig, train: Train) -> Path:
        """Resolve and check ``config``, own its folder, and ``train`` in it unless the run there is
        finished; returns the output folder."""
        config = config.resolved()
        self.check(config)
        output = Path(config.output_dir)
        accelerator = make_accelerator(config.runtime.precision, config.runtime.num_threads)
        config = fit_to_model(config, accelerator)
        self.check_folder(config, output, accelerator)
        with own_folder(output, config, accelerator, self.run_files):
            if (output / self.finished).exists():
                notice(config.command, accelerator, f"{output} {self.kept} (overwrite=true trains it again)")
                return output
            resume = resume_point(config, output) if self.resumes(config) else None
            return train(config, output, accelerator, resume)


def commit_judgment_outputs(run: Run, output: Path, last: dict, seconds: float, *, head: dict,
                            tail: dict, write_model: Callable[[Path], None]) -> None:
    """The end of a run on judgments (main process only): ``run.json`` (``head``, what every such
    run reports, ``tail``), ``theta.json`` when it has a bias channel, and the model
    ``write_model(staging)`` saves, committed as one unit (:func:`badpo.run_folder.final_commit.commit_final`)."""
    config = run.config
    summary = {**head, "model_was_folder": Path(config.model.name_or_path).expanduser().is_dir(),
               "seed": config.runtime.seed, "steps": config.steps, "batching": config.batching,
               "judgments": len(run.data), "pairs": int(run.data.pair_rows.shape[0]),
               "input": run.data.input_report,
               "audit_warnings": list(run.labels.warnings) if run.labels is not None else [],
               "wall_s": round(seconds, 2), "final": last,
               "theta_convergence": (theta_convergence(read_log(output), config.steps)
                                     if run.theta_optimizer is not None and run.method.learns_theta
                                     else None),  # None: no theta learnt
               **tail}
    if getattr(run, "cuts", None) is not None:  # ties and strengths: the cut points the run ended at
        summary["label_cuts"] = run.cuts.record()
    if run.level is not None:  # the level step's last shift, under its anchor's name
        summary["trusted_level" if run.level.anchor == "trusted" else "tilt_level"] = run.level.last
    if run.weighting is not None:  # Group-DRO's and Crowd-PrefRL's final weight of every group
        summary.update(run.weighting.summary())
    theta_notice(summary["theta_convergence"], config.command)

    def write(staging: Path) -> None:
        write_model(staging)
        if run.bias is not None:
            save_theta(run.bias, run.level, staging)
        (staging / SUMMARY_FILE).write_text(dumps(summary, indent=1) + "\n", encoding="utf-8")

    commit_final(output, write)


__all__ = ["Lifecycle", "Train", "commit_judgment_outputs"]
