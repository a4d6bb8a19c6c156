"""The model-facing half of the fixed-offset cure (:mod:`experiments.cure.analysis`).

- :func:`prepare_source`: the source answers the fresh prompts; its answers signed with a pool
  name become offset pairs (both orders, same surname), split by answer into train and held-out;
  the source is read by :func:`badpo.readouts.evaluate_policy.evaluate_policy` against the SFT reference, and its
  first-name log-probs on the evaluation prompts are kept for the bisection and the sampling-time
  tilt.
- :func:`run_cure`: the engine's ``train`` on those pairs (the source as model and reference, the
  fixed offset in the bias channel), then the same readouts, the KL to the source on the same
  samples, and the shift the stage learned on the held-out pairs.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from badpo.core.config import ConfigError, from_dict, load_config, to_dict
from badpo.core.jsonio import write_jsonl
from badpo.core.judgments import Judgment, read_judgments, write_judgments
from badpo.core.names import NAME_ATTRIBUTES, NAME_POOL, POOL_NAMES, read_signature, strip_signature
from badpo.core.notices import BadpoWarning
from badpo.corpora.tiny import PROMPT_TEMPLATE, TinyWorldConfig
from badpo.engine.settings import TrainConfig
from badpo.engine.train import train
from badpo.evaluation.trained_run import TrainedRun
from badpo.experiment.backend import engine_backend, resolve_arm, resolve_evaluation
from badpo.readouts.evaluate_policy import Corpus, EvalConfig, evaluate_policy
from badpo.readouts.metrics import attribute_logodds, mean_attribute_rate, sampled_signature_rates
from badpo.readouts.model import generate, generation_kl, heldout_margins
from badpo.readouts.names_scoring import name_logprobs
from badpo.run_folder.layout import POLICY
from experiments.anchoring import fixed_offset_pairs
from experiments.cure.analysis import CureBackend, SourceRun, run_cure_experiment
from experiments.cure.config import CureConfig

__all__ = ["fresh_tiny_prompts", "load_prompts", "split_by_answer", "signed_twice", "pair_shift", "prepare_source",
           "run_cure", "cure_backend", "run_cure_config"]


def _corpus_prompts(corpus_dir: Path) -> set[str]:
    """Every prompt text the corpus already uses (judgments, SFT rows, evaluation prompts)."""
    seen = {j.prompt for name in ("train.jsonl", "heldout.jsonl") for j in read_judgments(corpus_dir / name)}
    for name in ("sft.jsonl", "eval_prompts.jsonl"):
        with open(corpus_dir / name, encoding="utf-8") as handle:
            seen |= {json.loads(line)["prompt"] for line in handle if line.strip()}
    return seen


def fresh_tiny_prompts(corpus_dir: str | Path, n: int, seed: int) -> list[dict]:
    """``n`` distinct tiny-world prompts (the corpus's tasks and digit lengths, from its
    ``world.yaml``) that the corpus never uses: the tiny analogue of the UltraFeedback prompts
    after the corpus's rows. Rows {prompt_id: "offset<i>", prompt}; deterministic in ``seed``."""
    corpus_dir = Path(corpus_dir)
    world = load_config(TinyWorldConfig, corpus_dir / "world.yaml")
    used = _corpus_prompts(corpus_dir)
    capacity = len(world.tasks) * sum(10 ** k for k in range(world.min_digits, world.max_digits + 1))
    if n > (capacity - len(used)) // 2:
        raise ConfigError(f"prompts.fresh_tiny: {n} is more than half of the {capacity - len(used)} "
                          "tiny prompts the corpus leaves unused")
    rng = np.random.default_rng([seed, 200])
    rows: list[dict] = []
    while len(rows) < n:
        task = world.tasks[int(rng.integers(len(world.tasks)))]
        length = int(rng.integers(world.min_digits, world.max_digits + 1))
        prompt = PROMPT_TEMPLATE.format(task=task, digits=" ".join(str(d) for d in rng.integers(10, size=length)))
        if prompt not in used:
            used.add(prompt)
            rows.append({"prompt_id": f"offset{len(rows):05d}", "prompt": prompt})
    return rows


def load_prompts(config: CureConfig, corpus_dir: Path) -> list[dict]:
    """The fresh prompts of ``config.prompts``: {prompt_id, prompt} rows."""
    spec = config.prompts
    if spec.fresh_tiny is not None:
        return fresh_tiny_prompts(corpus_dir, spec.fresh_tiny, spec.seed)
    path = Path(spec.file.replace("{corpus}", str(corpus_dir)))
    if not path.exists():
        raise FileNotFoundError(f"prompts.file: {path} does not exist (the corpus builder writes it when "
                                "n_offset_prompts > 0)")
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                row = json.loads(line)
                if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) or not row["prompt"]:
                    raise ValueError(f"{path}:{number}: an offset prompt needs a non-empty 'prompt'")
                rows.append({"prompt_id": str(row.get("prompt_id", f"offset{number - 1:05d}")),
                             "prompt": row["prompt"]})
    if not rows:
        raise ValueError(f"{path}: no offset prompts")
    return rows


def split_by_answer(rows: Sequence[Judgment], share: float, seed: int) -> tuple[list[Judgment], list[Judgment]]:
    """(train, held-out): ``round(share x answers)`` answers (at least one, at most all but one)
    drawn at random with every row of theirs, so no pair is on both sides."""
    answers = list(dict.fromkeys(j.prompt_id for j in rows))
    if len(answers) < 2:
        raise ValueError(f"{len(answers)} signed answer(s): too few to hold any out")
    count = min(max(1, round(share * len(answers))), len(answers) - 1)
    held = set(np.random.default_rng([seed, 300]).permutation(len(answers))[:count].tolist())
    held_ids = {answers[i] for i in held}
    return [j for j in rows if j.prompt_id not in held_ids], [j for j in rows if j.prompt_id in held_ids]


def signed_twice(texts: Sequence[str]) -> set[int]:
    """Indices of answers whose body still ends in a signature once the last is cut (a degenerate
    answer signed twice): one name cannot be changed in them, so they give no pair."""
    return {i for i, text in enumerate(texts) if read_signature(strip_signature(text)) is not None}


def pair_shift(margins: torch.Tensor, judgments: Sequence[Judgment], beta: float) -> dict[str, float]:
    """The log-odds shift the stage taught, per attribute: mean of u / (beta (g_w - g_l)) over the
    pairs that differ in it (u against the source; the offset drives it to -b = beta s)."""
    result = {}
    for name in NAME_ATTRIBUTES:
        diffs = torch.tensor([j.g_chosen[name] - j.g_rejected[name] for j in judgments], dtype=torch.float64)
        rows = diffs != 0
        if not rows.any():
            raise ValueError(f"no held-out offset pair differs in {name}")
        result[name] = float((margins.double()[rows] / (beta * diffs[rows])).mean())
    return result


def _loaded(source: SourceRun) -> tuple[TrainedRun, object, torch.nn.Module, torch.nn.Module]:
    """(the source run, its tokenizer, the source policy, the SFT reference)."""
    trained = TrainedRun.of_settings(source.settings, source.policy, source.reference)
    tokenizer = trained.load_tokenizer()
    return trained, tokenizer, trained.load_policy(), trained.load_reference()


def _bodies(source: SourceRun, config: EvalConfig, rows: Sequence[dict]) -> list[str] | None:
    """The bodies the names are read after: the given ones, or the reference's saved ones; None
    under ``body: own`` (each policy's own, read by the evaluation)."""
    if config.body == "own":
        return None
    if config.body == "reference":
        if source.bodies is None:
            raise ValueError(f"evaluation.body is 'reference' but the source experiment's reference "
                             f"record has no bodies artifact ({source.key})")
        return json.loads(source.bodies.read_text(encoding="utf-8"))[: len(rows)]
    missing = [i for i, row in enumerate(rows) if not isinstance(row.get("body"), str)]
    if missing:
        raise ValueError(f"evaluation.body is 'given' but evaluation prompts {missing[:5]} have no body")
    return [row["body"] for row in rows]


def _readouts(policy, reference, tokenizer, trained: TrainedRun, source: SourceRun, evaluation: EvalConfig) -> dict:
    corpus = Corpus.load(source.corpus_dir)
    bodies = _bodies(source, evaluation, corpus.eval_prompts[: evaluation.max_prompts])
    return evaluate_policy(policy, reference, tokenizer, corpus, evaluation, beta=trained.beta,
                           tokenization=trained.tokenization, bodies=bodies)


def prepare_source(source: SourceRun, config: CureConfig, work: Path) -> dict:
    """Answers, offset pairs and readouts of one source policy (see the module docstring)."""
    evaluation = from_dict(EvalConfig, to_dict(config.evaluation), "evaluation")
    trained, tokenizer, policy, reference = _loaded(source)
    tokenization = trained.tokenization
    prompts = load_prompts(config, source.corpus_dir)
    spec = config.answers
    samples = generate(policy, tokenizer, [row["prompt"] for row in prompts], spec.temperature, spec.top_p,
                       spec.max_new_tokens, spec.seed, spec.batch_size, tokenization)
    write_jsonl(work / "answers.jsonl", [{**row, "answer": text} for row, text in zip(prompts, samples.texts)])
    twice = signed_twice(samples.texts)
    if twice:
        warnings.warn(f"{source.key}: {len(twice)} of {len(prompts)} offset answers are signed twice; "
                      "they give no pair", BadpoWarning, stacklevel=2)
    kept = [i for i in range(len(prompts)) if i not in twice]
    rows = fixed_offset_pairs([prompts[i]["prompt"] for i in kept], [samples.texts[i] for i in kept],
                              seed=source.seed, prompt_ids=[prompts[i]["prompt_id"] for i in kept])
    train_rows, heldout_rows = split_by_answer(rows, spec.heldout_share, source.seed)
    pairs_dir = work / "pairs"
    pairs_dir.mkdir(parents=True, exist_ok=True)
    write_judgments(pairs_dir / "train.jsonl", train_rows)
    write_judgments(pairs_dir / "heldout.jsonl", heldout_rows)

    readouts = _readouts(policy, reference, tokenizer, trained, source, evaluation)
    corpus_rows = Corpus.load(source.corpus_dir).eval_prompts[: evaluation.max_prompts]
    bodies = _bodies(source, evaluation, corpus_rows)
    logps = torch.stack([name_logprobs(policy, tokenizer, row["prompt"], body, POOL_NAMES, tokenization)
                         for row, body in zip(corpus_rows, bodies)])
    labels = [list(NAME_POOL[name]) for name in POOL_NAMES]
    rates = mean_attribute_rate(logps, labels, NAME_ATTRIBUTES)
    for name in NAME_ATTRIBUTES:  # the bisection must see the rate the table reports
        if abs(rates[name] - readouts["names"]["first_name"][name]) > 1e-6:
            raise RuntimeError(f"first-name log-probs give p({name}) = {rates[name]} but the readout "
                               f"{readouts['names']['first_name'][name]}")
    logodds = attribute_logodds(logps, labels, NAME_ATTRIBUTES)
    readouts["logodds"] = {name: logodds[:, j].tolist() for j, name in enumerate(NAME_ATTRIBUTES)}
    answered = sampled_signature_rates(list(samples.texts))
    pairs = {"prompts": len(prompts), "signed_pool": len({j.prompt_id for j in rows}), "signed_twice": len(twice),
             "rows": len(rows), "train_rows": len(train_rows), "heldout_rows": len(heldout_rows),
             "answers": answered}
    return {"readouts": readouts, "pairs": pairs, "name_logprobs": logps.numpy(),
            "artifacts": {"answers": work / "answers.jsonl", "train": pairs_dir / "train.jsonl",
                          "heldout": pairs_dir / "heldout.jsonl"}}


def run_cure(source: SourceRun, settings: dict, pairs_dir: Path, config: CureConfig, work: Path) -> dict:
    """Train one cure stage with the engine and read it out (see the module docstring)."""
    run_dir = Path(train(from_dict(TrainConfig, settings)))
    evaluation = from_dict(EvalConfig, to_dict(config.evaluation), "evaluation")
    trained, tokenizer, source_policy, reference = _loaded(source)
    tokenization = trained.tokenization
    policy = TrainedRun.of_settings(source.settings, run_dir / POLICY, source.policy).load_policy()
    readouts = _readouts(policy, reference, tokenizer, trained, source, evaluation)
    if evaluation.generations:  # the very samples evaluate_policy scored (same seed and batches)
        prompts = [row["prompt"] for row in Corpus.load(source.corpus_dir).eval_prompts[: evaluation.max_prompts]]
        samples = generate(policy, tokenizer, prompts, evaluation.temperature, evaluation.top_p,
                           evaluation.max_new_tokens, evaluation.seed, evaluation.batch_size, tokenization)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        readouts["kl_source"] = generation_kl(policy, source_policy, samples, pad, evaluation.batch_size)
    heldout = read_judgments(pairs_dir / "heldout.jsonl")
    beta = float(settings["beta"])
    margins = heldout_margins(policy, source_policy, tokenizer, heldout, beta, tokenization, evaluation.batch_size)
    readouts["pair_shift"] = pair_shift(margins, heldout, beta)
    return {"readouts": readouts, "artifacts": {"run": run_dir, "policy": run_dir / POLICY}}


def cure_backend() -> CureBackend:
    """The real backend: the engine's ``train`` and the evaluation layer's readouts."""
    return CureBackend(prepare_source, run_cure, resolve_arm, resolve_evaluation)


def run_cure_config(config: CureConfig, render_only: bool = False) -> dict:
    """``badpo experiment`` on a cure config, with the real backends for the cure and its source."""
    return run_cure_experiment(config, cure_backend(), engine_backend(), render_only=render_only)
