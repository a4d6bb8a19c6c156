"""The built-in tiny length-and-format world: the analogue of MultiPref (Datasets appendix, "The
MultiPref corpus and the length attribute") as :mod:`badpo.corpora.tiny` is of Signed-UltraFeedback.

**The task.** A prompt asks to copy or reverse 3-6 digits, ``"reverse 3 1 4 1\\n"``. A response is
an answer whose every digit is wrong (a uniformly drawn other digit) with probability
``error_rate``, formatted as a markdown bullet (``"- "`` in front, :func:`badpo.core.markdown.has_markdown`
reads it) with probability ``markdown_share``, and followed by no ending, a short one or a long one
(``ending_shares``)::

    "1 4 1 3"        "- 1 4 1 3 as asked"        "1 4 1 3 as asked because reverse flips the order"

so the two responses of a comparison differ at once in quality, length and markdown, as real pairs
do, and the three are drawn independently. Quality is ``1 + 9 * right / n`` as in the tiny signed
world and ``q = kappa (s_a - s_b)``. At least 3 digits: a bullet alone (one word) never makes a
side 1.5 times longer, while the endings (2 and 7 words) make the length attribute cross-group on
about half the judgments, with same-group pairs that still differ in length.

**Annotators** come in MultiPref's two pools, ``crowd`` and ``expert`` (ids ``crowd-00``, ...,
no overlap), each with a planted ``theta_k = mu_pool + sigma * N(0, I)`` on the two attributes
(``length``: the pair attribute of :mod:`badpo.core.attributes` at ratio 1.5; ``markdown``). The
default pool means (crowd 1.3 / 1.2, expert 0.7 / 0.8) average 1.0 on both, near the paper's
offline 0.99 and 0.98. Each comparison is judged by ``votes_per_pool`` distinct annotators of
each pool (two and two, as in MultiPref) through Davidson's tie model: with
``z = q + theta_k . (g_a - g_b)``, ``P(A) = e^(z/2) / D``, ``P(B) = e^(-z/2) / D``,
``P(tie) = nu / D``, ``D = e^(z/2) + e^(-z/2) + nu``. A tie is likelier between close responses,
and a vote that is not a tie follows the Bradley-Terry likelihood ``sigmoid(z)`` exactly, so the
builder's dropping of ties leaves the planted model intact. The vote's strength ("clearly" when
``|z| >= 1``) is written but, as in the real builder, not read.

**One protocol with MultiPref**, in :mod:`badpo.corpora.multipref_protocol` (the pools, the votes,
the files), which the real-model world :mod:`badpo.corpora.smol_multipref` calls too: this module
only writes the prompts and responses. The comparisons are written as MultiPref source rows
(``source.jsonl``, the real nested schema) and turned into judgments, split, SFT rows, evaluation
prompts and audit by :func:`badpo.corpora.multipref.multipref_corpus` and
:func:`~badpo.corpora.multipref.write_multipref`, so ``badpo build multipref OUT
source=WORLD/source.jsonl`` rebuilds the same judgment files (tested). The world adds the planted
truth (``planted.json``, scoring only), the audit beside the values the planted theta imply
(``gate.json``), and to each evaluation prompt its ``body`` (the exact answer) and ``candidates``:
the six responses with that body (plain or bullet, times no, short or long ending), over which
:func:`badpo.readouts.model.format_readout` reads length and markdown from the policy's
probabilities, a readout that run-on repetition in samples cannot fake.

**The quality given** (``quality_given``, off by default): each training and held-out judgment also
carries its two answers' scores as the attribute ``quality`` (``g_chosen`` / ``g_rejected``), so a
run that declares ``given:quality`` with every theta_k trusted at ``kappa`` has the planted q in
its logit: an oracle for what the labels say about quality. The votes are unchanged.

**The task word first** (``echo_task``, off by default): every response, and every evaluation
body, opens with its task word (``"- reverse 9 7 0 0 as asked"``), so the first token after an
optional bullet is never a digit; the votes' quality and attributes are computed as before.

**The bullet's cost in tokens** (``bullet_indent``, 0 by default): the bullet follows that many tabs
(``"\\t\\t- 1 4 1 3"``), one token each and no word, so markdown costs ``1 + bullet_indent`` tokens
while the words, the attributes and every vote stay as in the world without it: what a length
penalty in tokens (R-DPO) charges a markdown answer changes, and so do the token sequences the
models learn.

**Tokenizer and model**: a WordPiece vocabulary of the specials, the newline, the digits, the task
words, ``-``, the tab when ``bullet_indent`` is on, and the ending words (``▁`` marks a word after a
space, as in :mod:`badpo.corpora.tiny`), and the tiny GPT-2 of :func:`badpo.corpora.tiny.build_model`.
Files: :data:`OUTPUT_FILES`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from badpo.core.attributes import resolve_attributes
from badpo.core.config import ConfigError
from badpo.core.constraints import Range, check_fields
from badpo.core.judgments import Judgment
from badpo.corpora.multipref import summary_text as multipref_summary
from badpo.corpora.multipref_protocol import (
    ATTRIBUTES,
    POOLS,
    PROTOCOL_CONSTRAINTS,
    WorldTruth,
    check_protocol,
    default_pool_means,
    gate_lines,
    gate_statistics,
    implied_log_odds,
    judged_row,
    planted_annotators,
    protocol_corpus,
    stream_rng,
    world_truth,
    write_world,
)
from badpo.corpora.tiny import SPACE, SPECIAL_TOKENS, TinyModelConfig, answer_quality, build_model, correct_answer

__all__ = [
    "ATTRIBUTES", "ENDINGS", "MARKDOWN_PREFIX", "OUTPUT_FILES", "POOLS", "PROMPT_TEMPLATE",
    "TinyMultiPrefConfig", "WorldTruth", "build_tiny_multipref", "build_tokenizer", "bullet", "candidate_responses",
    "gate_statistics", "implied_log_odds", "response_score", "response_text", "summary_text", "tiny_multipref_rows",
    "with_quality",
]

PROMPT_TEMPLATE = "{task} {digits}\n"
MARKDOWN_PREFIX = "- "  # a bullet item: markdown under badpo.core.markdown.has_markdown
ENDINGS: dict[str, tuple[str, str, str]] = {  # task -> (none, short, long)
    "copy": ("", " as asked", " as asked because copy keeps the order"),
    "reverse": ("", " as asked", " as asked because reverse flips the order"),
}
OUTPUT_FILES = {
    "train.jsonl": "training judgments (badpo.core.judgments format), as badpo build multipref writes them",
    "heldout.jsonl": "judgments on the held-out prompts",
    "sft.jsonl": "SFT rows {prompt_id, pair_id, prompt, response}: the majority-chosen completion",
    "eval_prompts.jsonl": "held-out prompts {prompt_id, prompt, body, candidates}; body = the exact "
                          "answer, candidates = the six responses with that body",
    "stats.json": "the MultiPref builder's counts (ties dropped, ...) and its audit summary",
    "audit.json": "the full audit of the training judgments, by attribute",
    "config.yaml": "the MultiPrefConfig the judgments were built with (source: source.jsonl here)",
    "source.jsonl": "the comparisons as MultiPref source rows (badpo build multipref reads them)",
    "planted.json": "planted theta_k and pools: for scoring only, no method may read it",
    "gate.json": "the audit's cross-group log-odds beside the values the planted theta imply",
    "world.yaml": "the resolved TinyMultiPrefConfig",
    "tokenizer/": "the tiny WordPiece tokenizer (PreTrainedTokenizerFast)",
    "model/": "the tiny GPT-2 (random init) and a copy of the tokenizer",
    "README.md": "this list",
}


@dataclass(frozen=True)
class TinyMultiPrefConfig:
    """The tiny length-and-format world: task, responses, annotators, votes, split and model."""

    constraints: ClassVar[Mapping] = {
        **PROTOCOL_CONSTRAINTS, **dict.fromkeys(("error_rate", "markdown_share"), Range(0, 1)),
        "bullet_indent": Range(0, 16)}

    n_prompts: int = 1000  # distinct prompts
    comparisons_per_prompt: int = 2  # MultiPref has about two (10,461 over 5,323 prompts)
    min_digits: int = 3  # shortest digit string (>= 3: a bullet alone never makes a side 1.5x longer)
    max_digits: int = 6  # longest digit string
    tasks: list[Literal["copy", "reverse"]] = field(default_factory=lambda: ["copy", "reverse"])  # the prompts' tasks
    error_rate: float = 0.25  # probability that each digit of a response is wrong
    kappa: float = 0.5  # quality scale: q = kappa * (score_a - score_b)
    markdown_share: float = 0.3  # share of responses formatted as a bullet ("- " in front)
    ending_shares: list[float] = field(default_factory=lambda: [0.4, 0.3, 0.3])  # none / short / long ending
    crowd_annotators: int = 40  # annotators in the crowd pool
    expert_annotators: int = 30  # annotators in the expert pool
    votes_per_pool: int = 2  # votes of each pool on each comparison (MultiPref: two and two)
    pool_means: dict[str, list[float]] = field(default_factory=default_pool_means)  # mu_pool (length, markdown)
    sigma: float = 0.5  # per-annotator spread of theta_k around its pool mean (each coordinate)
    tie_strength: float = 1.0  # Davidson's nu: P(tie) = nu / (2 cosh(z/2) + nu), 1/3 at z = 0
    heldout_fraction: float = 0.1  # share of prompt ids held out (the MultiPref builder's split)
    n_eval_prompts: int = 100  # evaluation prompts, drawn from the held-out prompts
    seed: int = 0  # data seed: every draw of the world, the split and the evaluation prompts
    quality_given: bool = False  # also give each judgment its answers' scores (g "quality", given:quality)
    echo_task: bool = False  # open every response with its task word ("reverse 9 7 0 0"): no digit comes first
    bullet_indent: int = 0  # tabs before a bullet: markdown costs 1 + bullet_indent tokens and still one word
    random_voters: float = 0.0  # share of each pool voting at random (z = 0): a crowd's noise voters
    keep_ties: bool = False  # write the tie votes as tie judgments (false: dropped and counted)
    model: TinyModelConfig = field(default_factory=TinyModelConfig)

    def __post_init__(self) -> None:
        check_fields(self)
        if not 3 <= self.min_digits <= self.max_digits:
            raise ConfigError(f"min_digits/max_digits: need 3 <= min_digits <= max_digits (below 3 a "
                              f"bullet alone makes a side 1.5x longer), got {self.min_digits}, {self.max_digits}")
        if not self.tasks or len(set(self.tasks)) != len(self.tasks):
            raise ConfigError(f"tasks: give one or more distinct tasks, got {self.tasks}")
        capacity = len(self.tasks) * sum(10 ** n for n in range(self.min_digits, self.max_digits + 1))
        if not 1 <= self.n_prompts <= capacity // 2:
            raise ConfigError(f"n_prompts: must lie in [1, {capacity // 2}], got {self.n_prompts}")
        shares = self.ending_shares
        if len(shares) != 3 or min(shares) < 0 or not math.isclose(sum(shares), 1.0, abs_tol=1e-9):
            raise ConfigError(f"ending_shares: three non-negative shares (none, short, long) summing "
                              f"to 1, got {shares}")
        check_protocol(self)

    def rng(self, part: str) -> np.random.Generator:
        """The random stream of one part of the protocol: changing a later part leaves the earlier
        draws alone."""
        return stream_rng(self.seed, part)


# ------------------------------------------------------------------------------------ responses
def bullet(config: TinyMultiPrefConfig) -> str:
    """The markdown prefix: ``"- "``, after ``bullet_indent`` tabs (tokens that are no word)."""
    return "\t" * config.bullet_indent + MARKDOWN_PREFIX


def response_text(answer: str, markdown: bool, ending: str, prefix: str = MARKDOWN_PREFIX) -> str:
    """The bullet ``prefix`` (when formatted) + the answer + the ending."""
    return (prefix if markdown else "") + answer + ending


def response_score(text: str, task: str, exact: str) -> float:
    """The quality score ``1 + 9 * right / n`` of a response :func:`response_text` wrote: its
    bullet (indent included), task word (``echo_task``) and ending taken off, its digits against the
    exact answer."""
    answer = text.lstrip("\t").removeprefix(MARKDOWN_PREFIX).removeprefix(f"{task} ")
    ending = max((e for e in ENDINGS[task] if e and answer.endswith(e)), key=len, default="")
    return answer_quality(answer.removesuffix(ending), exact)


def with_quality(judgments: Sequence[Judgment], truth: WorldTruth) -> list[Judgment]:
    """The judgments with each answer's score as the given attribute ``quality``: declared as
    ``given:quality`` with every theta_k trusted at ``kappa``, it puts the planted q in the logit,
    an oracle of what the labels say about quality (issue 35, the markdown overshoot)."""
    def score(j: Judgment, text: str) -> dict[str, float]:
        task, exact = truth.answers[j.prompt_id]
        return {"quality": response_score(text, task, exact)}

    return [dataclasses.replace(j, g_chosen=score(j, j.chosen), g_rejected=score(j, j.rejected)) for j in judgments]


def candidate_responses(task: str, answer: str, prefix: str = MARKDOWN_PREFIX) -> list[str]:
    """The six responses with one body: plain then bullet, each with no, short and long ending."""
    return [response_text(answer, markdown, ending, prefix) for markdown in (False, True) for ending in ENDINGS[task]]


def opened(task: str, answer: str, config: TinyMultiPrefConfig) -> str:
    """The answer as a response spells it: after its task word when ``echo_task`` is on."""
    return f"{task} {answer}" if config.echo_task else answer


def _response(task: str, correct: list[int], config: TinyMultiPrefConfig, rng: np.random.Generator
              ) -> tuple[str, float]:
    """One response and its quality score."""
    wrong = rng.random(len(correct)) < config.error_rate
    shift = rng.integers(1, 10, size=len(correct))
    answer = " ".join(str((d + int(s)) % 10 if w else d) for d, w, s in zip(correct, wrong, shift))
    markdown = bool(rng.random() < config.markdown_share)
    ending = ENDINGS[task][int(rng.choice(3, p=config.ending_shares))]
    exact = " ".join(map(str, correct))
    return response_text(opened(task, answer, config), markdown, ending, bullet(config)), answer_quality(answer, exact)


def _prompts(config: TinyMultiPrefConfig) -> list[tuple[str, str, list[int]]]:
    """(prompt_id, task, digits) of ``n_prompts`` distinct prompts."""
    rng = config.rng("prompts")
    seen: set[tuple[str, tuple[int, ...]]] = set()
    prompts = []
    while len(prompts) < config.n_prompts:
        task = config.tasks[int(rng.integers(len(config.tasks)))]
        digits = tuple(int(d) for d in rng.integers(10, size=int(rng.integers(config.min_digits,
                                                                                config.max_digits + 1))))
        if (task, digits) not in seen:
            seen.add((task, digits))
            prompts.append((f"tmp{len(prompts):05d}", task, list(digits)))
    return prompts


def tiny_multipref_rows(config: TinyMultiPrefConfig) -> tuple[list[dict[str, Any]], WorldTruth]:
    """The comparisons as MultiPref source rows, and the truth that generated their votes (pure)."""
    attributes = resolve_attributes(ATTRIBUTES)
    annotators = planted_annotators(config)
    response_rng, vote_rng = config.rng("responses"), config.rng("votes")
    rows, comparisons, answers = [], {}, {}
    for prompt_id, task, digits in _prompts(config):
        prompt = PROMPT_TEMPLATE.format(task=task, digits=" ".join(map(str, digits)))
        correct = [int(c) for c in correct_answer(task, digits).split()]
        answers[prompt_id] = (task, correct_answer(task, digits))
        for c in range(config.comparisons_per_prompt):
            text_a, score_a = _response(task, correct, config, response_rng)
            text_b, score_b = _response(task, correct, config, response_rng)
            while text_b == text_a:  # a judgment needs two different responses
                text_b, score_b = _response(task, correct, config, response_rng)
            quality = config.kappa * (score_a - score_b)
            comparison_id = f"{prompt_id}-{c}"
            row, diff = judged_row((comparison_id, prompt_id), prompt, (text_a, text_b), quality, annotators,
                                   config, vote_rng, attributes)
            comparisons[comparison_id] = (quality, text_a, diff)
            rows.append(row)
    return rows, world_truth(annotators, comparisons, answers, config)


# -------------------------------------------------------------------------- tokenizer and files
def _vocabulary(config: TinyMultiPrefConfig) -> list[str]:
    """Every token, in a fixed order: specials, newline, digits, task words, bullet, the tab (only
    with ``bullet_indent``, so the default vocabulary is as before), ending words."""
    tokens = [*SPECIAL_TOKENS.values(), "\n"]
    tokens += [str(d) for d in range(10)] + [SPACE + str(d) for d in range(10)]
    tokens += list(config.tasks) + [MARKDOWN_PREFIX.strip()] + (["\t"] if config.bullet_indent else [])
    for task in config.tasks:
        tokens += [SPACE + word for word in ENDINGS[task][-1].split()]
    return list(dict.fromkeys(tokens))


def build_tokenizer(config: TinyMultiPrefConfig):
    """The world's WordPiece tokenizer as a ``PreTrainedTokenizerFast`` (no chat template)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(_vocabulary(config))}
    core = Tokenizer(models.WordPiece(vocab, unk_token=SPECIAL_TOKENS["unk"]))
    tabs = [pre_tokenizers.Split("\t", behavior="isolated")] if config.bullet_indent else []  # one token per tab
    core.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split("\n", behavior="isolated"), *tabs,
        pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="never", split=True)])
    core.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.Fuse()])
    return PreTrainedTokenizerFast(
        tokenizer_object=core, model_max_length=config.model.n_positions, clean_up_tokenization_spaces=False,
        **{f"{role}_token": token for role, token in SPECIAL_TOKENS.items()})


def _check_coverage(tokenizer, texts: Sequence[str], max_length: int) -> None:
    """Every text encodes without <unk> and fits the context with room for EOS."""
    for text, ids in zip(texts, tokenizer(list(texts), add_special_tokens=False)["input_ids"]):
        if tokenizer.unk_token_id in ids:
            raise ValueError(f"tiny-multipref tokenizer: {text!r} has a token outside the vocabulary")
        if len(ids) + 1 > max_length:
            raise ConfigError(f"model.n_positions: {text!r} needs {len(ids) + 1} positions, more than {max_length}")


def _readme(stats: Mapping, vocab_size: int, n_parameters: int) -> str:
    lines = ["# The badpo tiny length-and-format world", "",
             "Built by `badpo build tiny-multipref`; see `badpo.corpora.tiny_multipref` for the task, the",
             "annotators and the votes. Prompts end with \"\\n\"; a sequence is `prompt + response` + EOS.", "",
             f"{stats['judgments_train']} training / {stats['judgments_heldout']} held-out judgments "
             f"({stats['ties_dropped']} ties dropped), {stats['sft_rows']} SFT rows, {stats['eval_prompts']} "
             f"evaluation prompts, {stats['annotators']} annotators; vocabulary {vocab_size} tokens, model "
             f"{n_parameters} parameters.", ""]
    lines += [f"- `{name}`: {what}" for name, what in OUTPUT_FILES.items()]
    return "\n".join(lines) + "\n"


def build_tiny_multipref(config: TinyMultiPrefConfig, outdir: str | Path) -> dict[str, Any]:
    """Build the world into ``outdir`` (created if needed; its files are overwritten). The same
    config gives byte-identical files. Returns the MultiPref builder's statistics with the gate
    (also in ``stats.json`` / ``gate.json``), the vocabulary size and the parameter count."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    rows, truth = tiny_multipref_rows(config)

    def eval_fields(prompt_id: str) -> dict:
        task, answer = truth.answers[prompt_id]
        body = opened(task, answer, config)
        return {"body": body, "candidates": candidate_responses(task, body, bullet(config))}

    corpus, protocol = protocol_corpus(rows, config, eval_fields)
    if config.quality_given:
        corpus = dataclasses.replace(corpus, train=with_quality(corpus.train, truth),
                                     heldout=with_quality(corpus.heldout, truth))
    eval_prompts = corpus.eval_prompts
    tokenizer = build_tokenizer(config)
    _check_coverage(tokenizer, sorted({r["text"] + r[f"completion_{side}"] for r in rows for side in "ab"}
                                      | {p["prompt"] + c for p in eval_prompts for c in p["candidates"]}),
                    config.model.n_positions)
    model = build_model(config.model, tokenizer)
    n_parameters = sum(p.numel() for p in model.parameters())

    stats = write_world(corpus, protocol, rows, truth, config, out, "tiny-multipref",
                        left_out_when_off=("quality_given", "echo_task", "bullet_indent", "random_voters", "keep_ties"))
    tokenizer.save_pretrained(out / "tokenizer")
    model.save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
    (out / "README.md").write_text(_readme(stats, len(tokenizer), n_parameters), encoding="utf-8")
    return {**stats, "outdir": str(out), "vocab_size": len(tokenizer), "parameters": n_parameters}


def summary_text(summary: Mapping[str, Any]) -> str:
    """What ``badpo build tiny-multipref`` prints: the builder's counts and audit, then the gate."""
    lines = [multipref_summary(summary),
             f"in {summary['outdir']}: vocabulary {summary['vocab_size']}, model {summary['parameters']} parameters",
             *gate_lines(summary["gate"])]
    return "\n".join(lines)
