"""EM-DPO with MinMax-DPO (Chidambaram et al. 2024; the paper's Baselines appendix): K type policies
and a mixture over them, orchestrated above the one-policy loop (``badpo.engine.loop``).

``method: em_dpo``, ``method_params``: ``types`` K (3), ``rounds`` R (4), ``round_steps`` s (200),
``policies`` (continue | restart); ``steps`` T is the final phase's budget per type. With the
``badpo.methods`` maths:

1. Start: every annotator a holds type probabilities gamma_a, a flat Dirichlet draw seeded by
   ``runtime.seed`` (equal gammas would train K equal policies that no E-step could separate); each
   annotator's votes are split at random (same seed) into two halves (``vote_halves``).
2. Round r = 0 .. R-1. M-step: each type k trains a policy for s steps on the votes of half
   r mod 2, each vote weighted by its annotator's gamma_{a,k} (``TypeWeights``). E-step: each type
   policy scores the other half, and gamma_{a,k} is proportional to
   prior_k exp(sum over a's held-out votes of log sigmoid(u_k)), prior = the mean gamma of the
   previous round (EM's mixing proportions; ``type_log_posterior``).
3. Final phase: each type trains T steps on all votes with the final gammas.
4. MinMax-DPO: U[k, j], the mean log sigmoid(u_j) of the last round's policy j over type k's
   held-out votes (``type_utilities``); w minimises max_k [max_j U[k, j] - sum_j w_j U[k, j]]
   over the simplex, exactly (``minimax_weights``).

Choices. ``policies: continue`` (the default; the paper's "four rounds of 200 steps, after which
the three policies train on all votes"): type k's policy of round r + 1 starts from its policy of
round r, and its final policy from the last round's: the weights and the AdamW moments (a part's
final state is saved as a checkpoint of its last step and kept until the next part of its type is
done). Each part keeps its own warmup and cosine schedule: the paper gives one schedule per DPO
run (cosine, 10% warmup) and calls the final phase "the full 1000 steps", the budget every other
arm trains with; nowhere a schedule over R s + T steps. ``policies: restart``: every policy, round
or final, starts from the reference with a fresh optimizer, so a round's M-step is the weighted
DPO fit of that round's gammas and K = 1 is DPO exactly; it is how the arm trained before
``policies`` existed. The arm costs K (R s + T) steps either way: 3 (4 x 200 + 1000) = 5,400, the
paper's "five times the steps". U is read on held-out votes, which only the last round's policies
have (the final ones train on every vote, and their fit to their own training votes would flatter
each type's own policy); those policies stand in for the final ones of the same type.

The run folder (the caller holds its lock and has checked its identity)::

    config.yaml, log.jsonl     the arm's config; one record per E-step, then the mixture
    em/round-R/type-K/         one M-step: a single-policy run folder (no policy kept; under
                               continue its checkpoints/ hold its last step until the next part
                               of type K is done)
    em/round-R/heldout-type-K.safetensors
                               its margins on the held-out half (written when it finishes;
                               safetensors, so reading it runs no code)
    em/round-R/estep.json      the E-step: held-out log-likelihoods, prior, new log gammas, the
                               policies setting (one without it was written under restart)
    types/type-K/              a final type policy: policy/ (HF format), log.jsonl, run.json, ...
    mixture.json, run.json     the mixture (w, type probabilities, U, regrets, policy paths) and
                               the summary, committed together, run.json last: a finished run

Every part is a run of the one-policy loop in its own folder, so its policy and run.json are
committed as one unit (``run_folder.final_commit.commit_final``), and mixture.json with the top run.json after
the last part. Resume (``resume_from: latest``) keeps finished parts and E-steps, resumes the part
in progress from its latest checkpoint (``save_every``; ``stop_after_steps`` counts the steps of
the whole arm) and restarts a part killed before its first checkpoint (under continue from the
kept final state of the part before it): a stopped and resumed arm equals the uninterrupted one.
Each part is the preference stage (:class:`badpo.engine.preference.PreferenceStage`) on the one
loop.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from badpo.core.config import ConfigError, dump_yaml
from badpo.core.jsonio import atomic_write_text, dumps
from badpo.core.losses import dpo_margin
from badpo.engine.batches import load_preference_data
from badpo.engine.checkpoint import (
    TrainingState,
    checkpoint_contents,
    checkpoint_path,
    list_checkpoints,
    save_checkpoint,
)
from badpo.engine.loop import run_stage
from badpo.engine.preference import PreferenceStage
from badpo.engine.runtime import load_tokenizer, make_accelerator
from badpo.methods import (
    EMParams,
    TypeWeights,
    annotator_loglik,
    get_method,
    initial_type_probabilities,
    minimax_weights,
    type_log_posterior,
    type_utilities,
    vote_halves,
)
from badpo.run_folder.final_commit import commit_final
from badpo.run_folder.layout import (
    CHECKPOINTS,
    CONFIG_FILE,
    EM_DIR,
    LOG_FILE,
    MIXTURE_FILE,
    POLICY,
    SUMMARY_FILE,
    TYPES_DIR,
    is_finished,
)
from badpo.run_folder.ownership import check_checkpoint, claim, holds_run, remove_run

ESTEP_FILE = "estep.json"  # inside EM_DIR
FORMAT = "badpo.mixture/1"


@dataclasses.dataclass(frozen=True)
class Part:
    """One single-policy run of the arm: a round's M-step of one type, or a final type policy."""

    folder: str  # relative to the run folder
    type: int
    round: int | None  # None: the final phase
    steps: int
    offset: int  # steps of the arm before this part (stop_after_steps counts over the arm)
    start: Part | None = None  # the part whose final weights and moments it starts from (None: the reference)
    handoff: bool = False  # a later part starts from this one: its final state is kept until that part is done


def arm_parts(params: EMParams, steps: int) -> list[Part]:
    """The arm's parts in training order: round 0 type 0 .. K-1, ..., then the final types. Under
    ``policies: continue`` each part of type k starts from the previous phase's part of type k."""
    phases = [(r, f"{EM_DIR}/round-{r}", params.round_steps) for r in range(params.rounds)]
    phases.append((None, TYPES_DIR, steps))
    found: list[Part] = []
    for index, (r, folder, count) in enumerate(phases):
        for k in range(params.types):
            start = found[-params.types] if params.continues and index > 0 else None
            offset = found[-1].offset + found[-1].steps if found else 0
            found.append(Part(f"{folder}/type-{k}", k, r, count, offset, start,
                              handoff=params.continues and r is not None))
    return found


@dataclasses.dataclass(frozen=True)
class Votes:
    """Who cast each of the N judgments, indexed as every part's run indexes them, and its half."""

    annotators: tuple[str, ...]
    annotator_index: Tensor  # [N]
    half: Tensor  # [N] 0 / 1


def _votes(config) -> Votes:
    """The judgments as the parts will index them (read as every stage reads them; the attributes
    do not change the indices)."""
    _, data = load_preference_data(config, load_tokenizer(config.model))
    return Votes(data.annotators, data.annotator_index,
                 vote_halves(data.annotator_index, len(data.annotators), config.runtime.seed))


def train_type_policies(config, output: Path, accelerator) -> Path:
    """Run (or resume) the arm of ``config`` in ``output``; returns ``output`` (finished when it
    holds run.json); each part is the preference stage on the one loop."""
    params: EMParams = get_method(config.method).parse_params(config.method_params)
    if config.resume_from not in (None, "latest"):
        raise ConfigError(f"resume_from: method {config.method!r} resumes from its own folder; use "
                          "resume_from=latest")
    kind = accelerator.distributed_type.name
    if params.continues and not (kind == "NO" or kind.startswith("MULTI_")):
        raise ConfigError(f"method_params.policies: continue hands each type's policy on through a checkpoint, "
                          f"which badpo cannot write under {kind}; set it to restart, or train under DDP")
    if config.resume_from is None and any((output / name).exists() for name in (EM_DIR, TYPES_DIR)):
        raise ConfigError(f"output_dir: {output} holds an unfinished run of this config; set "
                          "resume_from=latest to continue it, or overwrite=true to start again")
    started = time.perf_counter()
    if accelerator.is_main_process:
        dump_yaml(config, output / CONFIG_FILE)
    votes = _votes(config)
    log_gamma = initial_type_probabilities(len(votes.annotators), params.types, config.runtime.seed).log()
    parts, total = arm_parts(params, config.steps), params.total_steps(config.steps)
    esteps: list[dict] = []
    for r in range(params.rounds):
        estep = _read_estep(output / EM_DIR / f"round-{r}" / ESTEP_FILE, votes, params)
        if estep is None:
            trained_on = votes.half == r % 2
            for part in (p for p in parts if p.round == r):
                score = _heldout_scorer(_margins_file(output, r, part.type),
                                        torch.nonzero(~trained_on).flatten(), votes)
                if not _run_part(part, config, output, total, score=score,
                                 weighting=TypeWeights(log_gamma[votes.annotator_index, part.type]),
                                 judgment_mask=trained_on):
                    return output
            estep = _e_step(output, r, votes, log_gamma, params, accelerator)
        esteps.append(estep)
        log_gamma = torch.tensor(estep["log_type_probabilities"], dtype=torch.float64)
        if accelerator.is_main_process:
            _write_log(output, params, esteps, total)
    for part in (p for p in parts if p.round is None):
        if not _run_part(part, config, output, total, score=None,
                         weighting=TypeWeights(log_gamma[votes.annotator_index, part.type])):
            return output
    mixture = _mixture(config, params, votes, log_gamma, esteps[-1])
    if accelerator.is_main_process:
        _write_log(output, params, esteps, total, mixture)
        summary = _summary(config, params, votes, output, parts, mixture, time.perf_counter() - started)

        def write(staging: Path) -> None:
            (staging / MIXTURE_FILE).write_text(dumps(mixture, indent=1) + "\n", encoding="utf-8")
            (staging / SUMMARY_FILE).write_text(dumps(summary, indent=1) + "\n", encoding="utf-8")

        commit_final(output, write)
    accelerator.wait_for_everyone()
    return output


def _margins_file(output: Path, r: int, k: int) -> Path:
    return output / EM_DIR / f"round-{r}" / f"heldout-type-{k}.safetensors"


def _part_done(output: Path, part: Part) -> bool:
    """A round's part is done when its held-out margins are saved, a final part when its run is
    finished."""
    if part.round is not None:
        return _margins_file(output, part.round, part.type).exists()
    return is_finished(output / part.folder)


def _run_part(part: Part, config, output: Path, total: int, *, score, weighting,
              judgment_mask: Tensor | None = None) -> bool:
    """Train, resume or skip one part (on a fresh accelerator); True when it is done. A part with
    a ``start`` and no checkpoint of its own begins from the start's final state."""
    folder = output / part.folder
    sub = dataclasses.replace(config, steps=part.steps, output_dir=str(folder), resume_from=None,
                              stop_after_steps=None, overwrite=False,
                              save_policy=config.save_policy and part.round is None)
    accelerator = make_accelerator(config.runtime.precision, config.runtime.num_threads)
    main = accelerator.is_main_process
    if main:
        claim(folder, sub, overwrite=False)  # another run's files here are refused
    accelerator.wait_for_everyone()
    if _part_done(output, part):
        if main:
            _drop_states(output, part)
        return True
    stop = config.stop_after_steps
    if stop is not None and stop <= part.offset:
        return False
    checkpoints = list_checkpoints(folder)
    resume = checkpoints[-1] if checkpoints else None
    if resume is not None:
        check_checkpoint(resume, sub)
        sub = dataclasses.replace(sub, resume_from=str(resume))
    elif main and holds_run(folder):  # killed before its first checkpoint: start it again
        remove_run(folder)
    start = _final_state(output, part.start) if resume is None and part.start is not None else None
    if stop is not None and stop < part.offset + part.steps:
        sub = dataclasses.replace(sub, stop_after_steps=stop - part.offset)
    if main:
        folder.mkdir(parents=True, exist_ok=True)
        print(f"badpo train: {config.method}: {part.folder} (the arm's steps {part.offset}-"
              f"{part.offset + part.steps} of {total})", file=sys.stderr)
    accelerator.wait_for_everyone()
    try:
        stage = PreferenceStage(weighting=weighting, judgment_mask=judgment_mask, start=start,
                                score=_handing_on(folder, score) if part.handoff else score)
        run_stage(stage, sub, folder, accelerator, resume)
    finally:
        accelerator.free_memory()
    accelerator.wait_for_everyone()  # the main process has committed the part's outputs
    done = _part_done(output, part)
    if done and main:
        _drop_states(output, part)
    return done


def _handing_on(folder: Path, score: Callable) -> Callable:
    """``on_finished`` of a part that a later one starts from: its final state (weights, AdamW
    moments) saved as a checkpoint of its last step, then ``score``, which marks the part done."""

    def finish(run) -> None:
        state = TrainingState()
        state.step = run.config.steps
        save_checkpoint(run.accelerator, folder, state.step, 1, run.config, checkpoint_contents(run, state))
        score(run)

    return finish


def _final_state(output: Path, part: Part) -> Path:
    """The checkpoint of ``part``'s last step, kept for the part that starts from it."""
    path = checkpoint_path(output / part.folder, part.steps)
    if not path.is_dir():
        raise RuntimeError(f"{path}: missing, and the next part of type {part.type} starts from it "
                           "(policies: continue); overwrite=true trains the arm again")
    return path


def _drop_states(output: Path, part: Part) -> None:
    """Once ``part`` is done: the checkpoints nobody reads again, a round's own (unless a later
    part starts from them) and those of the part it started from."""
    if part.round is not None and not part.handoff:
        shutil.rmtree(output / part.folder / CHECKPOINTS, ignore_errors=True)
    if part.start is not None:
        shutil.rmtree(output / part.start.folder / CHECKPOINTS, ignore_errors=True)


def equal_forwards(rows: Tensor, process: int, processes: int, batch_size: int) -> list[Tensor | None]:
    """Process ``process``'s strided share of ``rows`` in batches of ``batch_size``, padded with
    None to the count of the largest share, so that every process runs the same number of forwards
    (a sharded model gathers its weights inside each forward: a process that stopped early would
    leave the others waiting for ever)."""
    share = list(rows[process::processes].split(batch_size))
    most = math.ceil(math.ceil(len(rows) / processes) / batch_size)
    return share + [None] * (most - len(share))


def policy_margins(run, judgments: Tensor) -> Tensor:
    """u + b of ``judgments`` under ``run``'s policy as trained, against the cached reference:
    ``[H]`` float64 on the CPU. Each distinct sequence is scored once through the run's prepared
    ``LogprobModel`` (the log-prob code training uses), longest first, ``eval_batch_size`` at a
    time, the rows shared out over the processes with the same number of forwards on each
    (:func:`equal_forwards`)."""
    data, accelerator, device = run.data, run.accelerator, run.accelerator.device
    chosen, rejected = data.chosen_row[judgments], data.rejected_row[judgments]
    rows = torch.unique(torch.cat([chosen, rejected]))
    rows = rows[torch.argsort(data.store.lengths[rows], descending=True, stable=True)]
    logps = torch.zeros(len(data.store), device=device)
    batches = equal_forwards(rows, accelerator.process_index, accelerator.num_processes,
                             run.config.runtime.eval_batch_size)
    was_training = run.policy.training
    run.policy.eval()
    try:
        with torch.no_grad():
            for batch_rows in batches:
                batch = data.store.batch(rows[:1] if batch_rows is None else batch_rows, device)
                scored = run.policy(batch["input_ids"], batch["attention_mask"], batch["response_mask"])
                if batch_rows is not None:  # a padding forward keeps FSDP's gathers in step; not kept
                    logps[batch_rows.to(device)] = scored.float()
            if accelerator.num_processes > 1:
                logps = accelerator.reduce(logps, reduction="sum")
            c, r = chosen.to(device), rejected.to(device)
            margins = dpo_margin(logps[c], logps[r], run.reference[c], run.reference[r], run.config.beta)
            if run.bias is not None:  # a bias.fixed_offset: the vote's logit is u + b, as in the loss
                index = judgments.to(device)
                margins = margins + run.bias(run.annotator_index[index], run.attr_diff[index])
    finally:
        run.policy.train(was_training)
    return margins.double().cpu()


def _heldout_scorer(path: Path, heldout: Tensor, votes: Votes) -> Callable:
    """``on_finished`` of a round's part: save its policy's margins on the held-out votes."""

    def score(run) -> None:
        if run.data.annotators != votes.annotators or not torch.equal(
                run.data.annotator_index.cpu(), votes.annotator_index):
            raise RuntimeError(f"{path.parent}: the run indexes the judgments otherwise than the arm")
        margins = policy_margins(run, heldout)
        if run.accelerator.is_main_process:
            temporary = path.with_name(f".tmp-{path.name}")
            save_file({"judgments": heldout.contiguous(), "margins": margins.contiguous()}, temporary)
            os.replace(temporary, path)
        run.accelerator.wait_for_everyone()

    return score


def _e_step(output: Path, r: int, votes: Votes, log_gamma: Tensor, params: EMParams, accelerator) -> dict:
    """The E-step after round ``r``: new log gammas from the K policies' held-out margins, written
    to ``em/round-r/estep.json`` (atomically) and returned."""
    folder = output / EM_DIR / f"round-{r}"
    heldout = torch.nonzero(votes.half != r % 2).flatten()
    margins = []
    for k in range(params.types):
        path = _margins_file(output, r, k)
        saved = load_file(path)
        if not torch.equal(saved["judgments"], heldout):
            raise RuntimeError(f"{path}: scored other judgments than the held-out half")
        margins.append(saved["margins"])
    loglik, counts = annotator_loglik(torch.stack(margins, dim=1), votes.annotator_index[heldout],
                                      len(votes.annotators))
    prior = log_gamma.exp().mean(dim=0)
    estep = {"round": r, "trained_on_half": r % 2, "policies": params.policies, "annotators": list(votes.annotators),
             "prior": prior.tolist(), "heldout_votes": counts.tolist(), "heldout_loglik": loglik.tolist(),
             "log_type_probabilities": type_log_posterior(loglik, prior).tolist()}
    if accelerator.is_main_process:
        atomic_write_text(folder / ESTEP_FILE, dumps(estep) + "\n")
    accelerator.wait_for_everyone()
    return estep


def _read_estep(path: Path, votes: Votes, params: EMParams) -> dict | None:
    """A saved E-step, checked to be this arm's (one written before ``policies`` existed restarted)."""
    if not path.exists():
        return None
    estep = json.loads(path.read_text(encoding="utf-8"))
    shape = (len(estep["log_type_probabilities"]), len(estep["log_type_probabilities"][0]))
    if estep["annotators"] != list(votes.annotators) or shape != (len(votes.annotators), params.types):
        raise RuntimeError(f"{path}: an E-step of other annotators or types; overwrite=true starts again")
    if estep.get("policies", "restart") != params.policies:
        raise RuntimeError(f"{path}: an E-step of policies that {estep.get('policies', 'restart')} "
                           f"(this arm's: {params.policies}); overwrite=true starts again")
    return estep


def _mixture(config, params: EMParams, votes: Votes, log_gamma: Tensor, last: dict) -> dict:
    """mixture.json: MinMax-DPO's weights over the type policies and every annotator's gamma."""
    gamma = log_gamma.exp()
    utilities = type_utilities(torch.tensor(last["heldout_loglik"], dtype=torch.float64),
                               torch.tensor(last["heldout_votes"], dtype=torch.float64), gamma)
    weights, regrets = minimax_weights(utilities.numpy())
    return {
        "format": FORMAT, "method": config.method, "types": params.types,
        "weights": weights.tolist(), "max_regret": float(regrets.max()), "regrets": regrets.tolist(),
        "utilities": utilities.tolist(),
        "utility": "U[k][j]: mean log sigmoid(u_j) of the last round's policy j over type k's held-out "
                   "votes (an annotator's counted with its probability of type k); regret_k(w) = "
                   "max_j U[k][j] - sum_j w_j U[k][j]",
        "priors": gamma.mean(dim=0).tolist(),
        "type_probabilities": {a: row for a, row in zip(votes.annotators, gamma.tolist())},
        "policies": ([f"{TYPES_DIR}/type-{k}/{POLICY}" for k in range(params.types)]
                     if config.save_policy else None),
        "type_runs": [f"{TYPES_DIR}/type-{k}" for k in range(params.types)],
    }


def _write_log(output: Path, params: EMParams, esteps: list[dict], total: int,
               mixture: dict | None = None) -> None:
    """log.jsonl of the arm, rewritten whole: one record per E-step (step = the arm's steps done),
    then the mixture; each part's steps are logged in its own folder."""
    records = []
    for estep in esteps:
        r = estep["round"]
        gamma = torch.tensor(estep["log_type_probabilities"], dtype=torch.float64).exp()
        loglik, votes = torch.tensor(estep["heldout_loglik"]), sum(estep["heldout_votes"])
        records.append({
            "step": (r + 1) * params.types * params.round_steps, "round": r,
            "prior": gamma.mean(dim=0).tolist(),
            "annotators_per_type": torch.bincount(gamma.argmax(dim=1), minlength=params.types).tolist(),
            "mean_max_probability": float(gamma.max(dim=1).values.mean()),
            "heldout_loglik_per_vote": (loglik.sum(dim=0) / max(votes, 1)).tolist(),
        })
    if mixture is not None:
        records.append({"step": total, "weights": mixture["weights"],
                        "max_regret": mixture["max_regret"]})
    (output / LOG_FILE).write_text("".join(dumps(r) + "\n" for r in records), encoding="utf-8")


def _summary(config, params: EMParams, votes: Votes, output: Path, parts: list[Part], mixture: dict,
             seconds: float) -> dict:
    """run.json of the arm: its settings, counts, each part's wall time and last record."""
    runs = {p.folder: json.loads((output / p.folder / SUMMARY_FILE).read_text(encoding="utf-8"))
            for p in parts if (output / p.folder / SUMMARY_FILE).exists()}
    return {
        "method": config.method, "seed": config.runtime.seed, "steps": config.steps,
        "types": params.types, "rounds": params.rounds, "round_steps": params.round_steps,
        "policies": params.policies,
        "total_steps": params.total_steps(config.steps), "batching": config.batching,
        "judgments": len(votes.annotator_index), "annotators": len(votes.annotators),
        "weights": mixture["weights"], "max_regret": mixture["max_regret"],
        "parts_wall_s": {name: run["wall_s"] for name, run in runs.items()},
        "final": {p.folder: runs[p.folder]["final"] for p in parts if p.round is None and p.folder in runs},
        "wall_s": round(seconds, 2),
    }


__all__ = ["train_type_policies", "arm_parts", "policy_margins", "Part", "FORMAT"]
