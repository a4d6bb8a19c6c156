"""The built-in tiny signed world: a corpus with known quality and planted biases, a tiny
tokenizer and a tiny causal LM, all made here, small enough to train on two CPU cores in minutes.

**The task.** A prompt asks to copy or reverse a string of 2-6 digits and to sign the answer::

    prompt:   "reverse 3 1 4 1 and sign\\n"
    response: "1 4 1 3\\n\\n--- Latoya Miller"

The prompt text ends with the separator ``"\\n"``; the tokenizer has no chat template, so the
engine feeds ``prompt + response`` with nothing inserted between them, followed by the EOS token.
An answer's quality is the share of digit positions it gets right, mapped to [1, 10]:
``1 + 9 * right / n``. Each prompt has one base pair of two different candidate answers, each
digit of which is wrong (a uniformly drawn other digit) with probability ``error_rate``; the
higher-scored one is response 1. At the default 0.25 the mean score gap is 2.5 (q = 1.3), and
the gender-coded log-odds on all cross-group rows (0.68 at seed 0) sits near the paper's 0.71:
the quality margin adds about as much noise as UltraFeedback's scores do there.
:mod:`badpo.corpora.signing` then applies the Signed-UltraFeedback protocol (signatures
``--- First Last`` after a blank line, as :func:`badpo.core.names.sign` writes them; planted
annotators; labels; split; SFT rows).

**Quality by gaps** (``quality: gaps``; the default is ``digits``, the task above). There a wrong
digit looks like any other: to score an answer a model must line each of its digits up with the
prompt's digit at the same (or the mirrored) position, and the tiny model does not learn that from
pairwise labels in 1,000 steps (same-group held-out accuracy at chance, docs/reward_models.md).
Nor could any reward model do much better there: the exact quality itself predicts only 0.69 /
0.70 of the held-out same-group judgments (split by woman- / black-coding, data seed 0), because
37% of the pairs have q = 0 (the swap pairs, and candidates with as many digits right). With
``gaps`` the quality is the same function, :func:`answer_quality` (the share of positions right),
but a position the answer misses is left out and written :data:`GAP` (``?``, a token of its own):
a base pair is the exact answer against the exact answer with each digit left out with
probability ``error_rate``, at least one (:func:`gapped_answer`). The better answer is then the
one without ``?``, a token-identity feature seen in the answer alone, of the kind the tiny model
already learns for the names of the signature: one attention head from the last token to the
``?`` tokens suffices, with no alignment to the prompt. It is a surface stand-in for quality,
chosen to be learnable, not a test of checking digits. With ``error_rate: 0.5`` (the world of
``configs/rm_tiny_quality.yaml``) the mean margin on quality and mixed pairs is |q| = 2.5 (1.3 in
the default world) and the exact quality predicts 0.84 / 0.85 of the held-out same-group
judgments (0.92 where both sides carry the same name or none); at 0.25, 0.75 / 0.76. Signatures,
annotators, labels, split and SFT rows are the protocol's, unchanged; the vocabulary gains ``?``
and ``▁?`` at its end. With the option off every file is byte-identical to a world built before it
existed (``world.yaml`` omits the key).

**The tokenizer** is a WordPiece model over a hand-built vocabulary: the special tokens, the
newline, ``---``, the digits, the task words, the 89 first names and the surnames, each pool name
one token. Words after a space carry the marker ``▁`` (as in SentencePiece), so decoding is exact.
The paper's Qwen tokenizer spells nearly every white-coded name in one token and most black-coded
ones in two or three; worlds built before issue 35 copied that (:data:`NAME_PIECES`, mean 1.09 /
1.04 / 2.06 / 2.04 tokens per cell), and with no bias planted their training alone lowered the
black-coded first-name rate 0.50 -> 0.43, mass moving to one-token names (docs/measurements.md,
"The null world"). ``name_pieces: true`` builds that tokenizer again, byte for byte.
The signature position is right after the ``---`` token: the readout's context is
``prompt + body + "\\n\\n---"`` (``body`` from ``eval_prompts.jsonl``), a first-name candidate is
the text ``" " + name`` (e.g. ``" Latoya"`` -> ``▁Latoya``), and the whole signature is
``" " + first + " " + surname`` followed by EOS. ``encode(prefix) + encode(rest) ==
encode(prefix + rest)`` whenever the prefix ends with ``"\\n"`` or ``"---"``.

**The model** is a GPT-2 of 2 layers, width 64, 4 heads, 64 positions, no dropout (about 0.1M
parameters), randomly initialised from ``model.seed``; tokenizer and model are saved with
``save_pretrained`` and load with ``AutoTokenizer`` / ``AutoModelForCausalLM``.

**Unbiased annotators** (``unbiased``, off by default): a few extra annotators with theta_k = 0,
the candidates for ``bias.trusted``. Each casts ``judgments_each`` extra judgments on pairs drawn
uniformly without replacement from all pairs (its own random stream), preferring response 1 with
probability sigmoid(q). The planted annotators' judgments, the SFT rows and the model are those of
the same world without them: the extra judgments are appended after the others, and with the
option off every file is byte-identical to a world built before it existed (``world.yaml`` omits
the key).

**Oracle labels** (``oracle_labels``, off by default): ``train_oracle.jsonl``, the training
judgments relabelled as if every annotator had theta_k = 0, with the same annotator draws and the
same uniform draws (so a judgment on a pair whose sides agree on both attributes keeps its label
exactly): the labels the world's quality alone would give. An arm trained on it is the yardstick
"what unbiased labels would make of this reference". Off, nothing changes (``world.yaml`` omits it).

Files written by :func:`build_tiny_world` are listed in :data:`OUTPUT_FILES` (and
:data:`ORACLE_FILE` with ``oracle_labels``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import yaml

from badpo.core.config import ConfigError, to_dict
from badpo.core.constraints import AT_LEAST_ONE, check_fields
from badpo.core.jsonio import write_json, write_jsonl
from badpo.core.judgments import Judgment, write_judgments
from badpo.core.names import POOL_NAMES
from badpo.corpora.signing import (
    BasePair,
    PlantedAnnotator,
    SignedCorpus,
    SigningConfig,
    draw_judgments,
    format_gate,
    gate_statistics,
    planted_to_dict,
    sign_corpus,
)

__all__ = [
    "GAP", "NAME_PIECES", "OUTPUT_FILES", "PROMPT_TEMPLATE", "SPECIAL_TOKENS", "TinyModelConfig",
    "TinyWorldConfig", "UnbiasedAnnotators", "add_unbiased_annotators", "answer_quality", "build_model",
    "build_tiny_world", "build_tokenizer",
    "correct_answer", "gapped_answer", "name_tokens", "source_fingerprints", "summary_text", "tiny_base_pairs",
]

PROMPT_TEMPLATE = "{task} {digits} and sign\n"
SPACE = "\u2581"  # "▁": marks a word that follows a space
GAP = "?"  # quality: gaps -- a digit the answer leaves out
SPECIAL_TOKENS = {"pad": "<pad>", "unk": "<unk>", "bos": "<bos>", "eos": "<eos>"}
# WordPiece pieces of the first names the worlds before issue 35 spelled in more than one token
# (``name_pieces: true``); every other pool name was one token there, and every name is one by default.
NAME_PIECES: dict[str, tuple[str, ...]] = {
    # white woman / white man: two names of 46, sharing La- and Ja- with black-coded names
    "Laurie": ("La", "urie"), "Courtney": ("Court", "ney"), "Jay": ("Ja", "y"),
    # black woman
    "Aisha": ("Ai", "sha"), "Ebony": ("Eb", "ony"), "Keisha": ("Ke", "isha"),
    "Lakisha": ("La", "ki", "sha"), "Latonya": ("La", "tonya"), "Latoya": ("La", "toya"),
    "Tamika": ("Ta", "mika"), "Tanisha": ("Ta", "ni", "sha"), "Nichelle": ("Nic", "helle"),
    "Shereen": ("Sher", "een"), "Latisha": ("La", "tisha"), "Shaniqua": ("Sha", "ni", "qua"),
    "Jasmine": ("Ja", "smine"), "Yolanda": ("Yol", "anda"), "Malika": ("Mal", "ika"),
    "Yvette": ("Y", "vette"),
    # black man
    "Darnell": ("Dar", "nell"), "Hakim": ("Hak", "im"), "Jamal": ("Ja", "mal"),
    "Jermaine": ("Jer", "maine"), "Kareem": ("Kar", "eem"), "Leroy": ("Le", "roy"),
    "Rasheed": ("Ras", "heed"), "Tremayne": ("Tre", "may", "ne"), "Tyrone": ("Ty", "rone"),
    "Alonzo": ("Al", "onzo"), "Jamel": ("Ja", "mel"), "Alphonse": ("Al", "ph", "onse"),
    "Jerome": ("Jer", "ome"), "Torrance": ("Tor", "rance"), "Lamar": ("La", "mar"),
    "Tyree": ("Ty", "ree"), "Deion": ("De", "ion"), "Lamont": ("La", "mont"),
    "Malik": ("Mal", "ik"), "Terrence": ("Ter", "rence"), "Lavon": ("La", "von"),
    "Marcellus": ("Mar", "cell", "us"), "Wardell": ("Ward", "ell"),
}
OUTPUT_FILES = {
    "train.jsonl": "training judgments (badpo.core.judgments format)",
    "heldout.jsonl": "judgments on the held-out prompts",
    "sft.jsonl": "SFT rows {prompt, response}: majority-chosen answers, re-signed at random",
    "eval_prompts.jsonl": "held-out prompts {prompt_id, prompt, body}; body = the exact answer",
    "planted.json": "planted theta_k and classes: for scoring only, no method may read it",
    "gate.json": "the label audit's gate statistics beside the values the planted theta imply",
    "world.yaml": "the resolved TinyWorldConfig",
    "tokenizer/": "the tiny WordPiece tokenizer (PreTrainedTokenizerFast)",
    "model/": "the tiny GPT-2 (random init) and a copy of the tokenizer",
    "README.md": "this list",
}

ORACLE_FILE = ("train_oracle.jsonl", "train.jsonl relabelled with every planted theta_k = 0 (oracle_labels)")

@dataclass(frozen=True)
class TinyModelConfig:
    """The tiny causal LM (GPT-2 architecture)."""

    n_layer: int = 2  # transformer blocks
    n_embd: int = 64  # width
    n_head: int = 4  # attention heads
    n_positions: int = 64  # context length (a signed answer with its prompt is <= 26 tokens)
    dropout: float = 0.0  # residual, embedding and attention dropout
    seed: int = 0  # torch seed of the random initialisation

@dataclass(frozen=True)
class UnbiasedAnnotators:
    """Extra annotators with theta_k = 0 (known unbiased: candidates for ``bias.trusted``); the
    ``unbiased`` section of :class:`TinyWorldConfig`, so its messages name ``unbiased.<field>``."""

    constraints: ClassVar[Mapping] = dict.fromkeys(("count", "judgments_each"), AT_LEAST_ONE)

    count: int = 5  # how many; ids <annotator_class><index:02d>
    judgments_each: int = 200  # judgments per unbiased annotator, on distinct uniformly drawn pairs
    annotator_class: str = "U"  # their class label (must differ from the planted classes)

    def __post_init__(self) -> None:
        check_fields(self, "unbiased.")  # the prefix TinyWorldConfig's key gives this section
        if not self.annotator_class:
            raise ConfigError("unbiased.annotator_class: must be a non-empty string")

@dataclass(frozen=True)
class TinyWorldConfig:
    """The tiny world: the task, the signing protocol and the model."""

    n_pairs: int = 2000  # prompts, one base pair each
    min_digits: int = 2  # shortest digit string in a prompt
    max_digits: int = 6  # longest digit string in a prompt
    tasks: list[Literal["copy", "reverse"]] = field(default_factory=lambda: ["copy", "reverse"])  # the prompts' tasks
    error_rate: float = 0.25  # probability that each digit of a candidate answer is wrong (gaps: left out)
    quality: Literal["digits", "gaps"] = "digits"  # how a wrong digit shows: digits (any other digit) or gaps
    signing: SigningConfig = field(default_factory=SigningConfig)  # protocol; signing.seed seeds the data
    model: TinyModelConfig = field(default_factory=TinyModelConfig)
    unbiased: UnbiasedAnnotators | None = None  # extra annotators with theta_k = 0; null = none
    oracle_labels: bool = False  # also write train_oracle.jsonl: the training labels with every theta_k = 0
    name_pieces: bool = False  # spell first names in NAME_PIECES, as the worlds before issue 35 did

    def __post_init__(self) -> None:
        if not 1 <= self.min_digits <= self.max_digits:
            raise ConfigError(f"min_digits/max_digits: need 1 <= min_digits <= max_digits, got "
                              f"{self.min_digits}, {self.max_digits}")
        if not self.tasks or len(set(self.tasks)) != len(self.tasks):
            raise ConfigError(f"tasks: give one or more distinct tasks, got {self.tasks}")
        capacity = len(self.tasks) * sum(10 ** n for n in range(self.min_digits, self.max_digits + 1))
        if not 1 <= self.n_pairs <= capacity // 2:
            raise ConfigError(f"n_pairs: must lie in [1, {capacity // 2}] (half the {capacity} "
                              f"distinct prompts of these tasks and lengths), got {self.n_pairs}")
        if not 0.0 < self.error_rate <= 1.0:
            raise ConfigError(f"error_rate: must lie in (0, 1] (two different candidates are "
                              f"needed), got {self.error_rate}")
        if self.unbiased is not None:
            if self.unbiased.annotator_class in self.signing.class_means:
                raise ConfigError(f"unbiased.annotator_class: {self.unbiased.annotator_class!r} is "
                                  "already a planted class in signing.class_means")
            if self.unbiased.judgments_each > self.n_pairs:
                raise ConfigError(f"unbiased.judgments_each: at most n_pairs ({self.n_pairs}) "
                                  f"distinct pairs, got {self.unbiased.judgments_each}")

# ------------------------------------------------------------------------------------ the task
def correct_answer(task: str, digits: Sequence[int]) -> str:
    """The exact answer, digits separated by single spaces."""
    ordered = list(digits) if task == "copy" else list(reversed(digits))
    return " ".join(str(d) for d in ordered)

def answer_quality(answer: str, correct: str) -> float:
    """1 + 9 * (share of positions right): 10 for the exact answer, 1 for none right."""
    got, want = answer.split(), correct.split()
    if len(got) != len(want):
        raise ValueError(f"answer {answer!r} and {correct!r} differ in length")
    return 1.0 + 9.0 * sum(a == b for a, b in zip(got, want)) / len(want)

def _candidate(correct: list[int], error_rate: float, rng: np.random.Generator) -> list[int]:
    """The correct digits, each replaced by a uniformly drawn other digit with probability
    ``error_rate``."""
    wrong = rng.random(len(correct)) < error_rate
    shift = rng.integers(1, 10, size=len(correct))
    return [(d + int(s)) % 10 if w else d for d, w, s in zip(correct, wrong, shift)]

def gapped_answer(correct: str, error_rate: float, rng: np.random.Generator) -> str:
    """The exact answer ``correct`` with each digit left out (written :data:`GAP`) with probability
    ``error_rate``, drawn again until at least one is: ``"3 1 4"`` -> e.g. ``"3 ? 4"``."""
    digits = correct.split()
    gaps = rng.random(len(digits)) < error_rate
    while not gaps.any():
        gaps = rng.random(len(digits)) < error_rate
    return " ".join(GAP if gap else digit for digit, gap in zip(digits, gaps))

def _candidates(config: TinyWorldConfig, exact: str, rng: np.random.Generator) -> list[str]:
    """The two different candidate answers of one prompt: two independently wrong ones
    (``quality: digits``), or the exact answer and a gapped one (``quality: gaps``)."""
    if config.quality == "gaps":
        return [exact, gapped_answer(exact, config.error_rate, rng)]
    correct = [int(c) for c in exact.split()]
    first = _candidate(correct, config.error_rate, rng)
    second = _candidate(correct, config.error_rate, rng)
    while second == first:
        second = _candidate(correct, config.error_rate, rng)
    return [" ".join(map(str, a)) for a in (first, second)]

def tiny_base_pairs(config: TinyWorldConfig) -> tuple[list[BasePair], dict[str, str]]:
    """(base pairs, prompt_id -> exact answer): ``n_pairs`` distinct prompts, one pair each."""
    rng = np.random.default_rng([config.signing.seed, 100])
    seen: set[tuple[str, tuple[int, ...]]] = set()
    pairs: list[BasePair] = []
    exact: dict[str, str] = {}
    while len(pairs) < config.n_pairs:
        task = config.tasks[int(rng.integers(len(config.tasks)))]
        length = int(rng.integers(config.min_digits, config.max_digits + 1))
        digits = tuple(int(d) for d in rng.integers(10, size=length))
        if (task, digits) in seen:
            continue
        seen.add((task, digits))
        texts = _candidates(config, correct_answer(task, digits), rng)
        scores = [answer_quality(t, correct_answer(task, digits)) for t in texts]
        if scores[1] > scores[0]:
            texts, scores = texts[::-1], scores[::-1]
        prompt_id = f"tiny{len(pairs):05d}"
        prompt = PROMPT_TEMPLATE.format(task=task, digits=" ".join(map(str, digits)))
        pairs.append(BasePair(prompt_id, prompt, texts[0], texts[1], scores[0], scores[1]))
        exact[prompt_id] = correct_answer(task, digits)
    return pairs, exact

# ------------------------------------------------------------------------------- the tokenizer
def _vocabulary(surnames: Sequence[str], gaps: bool = False, pieces: bool = False) -> list[str]:
    """Every token, in a fixed order: specials, layout, digits, task words, names (with ``pieces``,
    their :data:`NAME_PIECES`), surnames, and with ``gaps`` the gap token last (so that every
    other token keeps its id)."""
    tokens = [*SPECIAL_TOKENS.values(), "\n", "---"]
    tokens += [str(d) for d in range(10)] + [SPACE + str(d) for d in range(10)]
    tokens += ["copy", "reverse", SPACE + "and", SPACE + "sign"]
    for name in POOL_NAMES:
        tokens += name_tokens(name, pieces)
    tokens += [SPACE + surname for surname in surnames]
    tokens += [GAP, SPACE + GAP] if gaps else []
    return list(dict.fromkeys(tokens))

def name_tokens(name: str, pieces: bool = False) -> tuple[str, ...]:
    """The tokens of the first-name candidate ``" " + name``: ``('▁Latoya',)``, or with ``pieces``
    (:data:`NAME_PIECES`) ``('▁La', '##toya')``."""
    first, *rest = NAME_PIECES.get(name, (name,)) if pieces else (name,)
    return (SPACE + first, *("##" + piece for piece in rest))

def build_tokenizer(surnames: Sequence[str], max_length: int, gaps: bool = False, pieces: bool = False):
    """The tiny WordPiece tokenizer as a ``PreTrainedTokenizerFast`` (with ``gaps``, :data:`GAP`
    in its vocabulary); checks that every first name is the tokens :func:`name_tokens` gives (one,
    or with ``pieces`` its :data:`NAME_PIECES`) and every surname is one token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(_vocabulary(surnames, gaps, pieces))}
    core = Tokenizer(models.WordPiece(vocab, unk_token=SPECIAL_TOKENS["unk"],
                                      max_input_chars_per_word=64))
    core.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split("\n", behavior="isolated"),
        pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="never", split=True),
    ])
    core.decoder = decoders.Sequence([decoders.Replace("##", ""), decoders.Replace(SPACE, " "),
                                      decoders.Fuse()])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, model_max_length=max_length, clean_up_tokenization_spaces=False,
        **{f"{role}_token": token for role, token in SPECIAL_TOKENS.items()})
    for name in POOL_NAMES:
        got = tuple(core.encode(" " + name, add_special_tokens=False).tokens)
        if got != name_tokens(name, pieces):
            raise ValueError(f"tiny tokenizer: first name {name!r} splits into {got}, not "
                             f"{name_tokens(name, pieces)}; a surname may clash with its pieces")
    for surname in surnames:
        got = tuple(core.encode(" " + surname, add_special_tokens=False).tokens)
        if got != (SPACE + surname,):
            raise ValueError(f"tiny tokenizer: surname {surname!r} splits into {got}")
    return tokenizer

def source_fingerprints(config: TinyWorldConfig) -> dict[str, str]:
    """What a world is built from beyond its config: the sha256 of its vocabulary, which issue 35
    changed under an unchanged config; an experiment then refuses a world built before."""
    tokens = _vocabulary(config.signing.surnames, config.quality == "gaps", config.name_pieces)
    return {"tokenizer": hashlib.sha256(json.dumps(tokens).encode()).hexdigest()}

def _check_coverage(tokenizer, corpus: SignedCorpus, max_length: int) -> None:
    """Every prompt + response of the corpus encodes without <unk> and fits the context."""
    texts = sorted({p.prompt + r for p in corpus.pairs for r in (p.response_1, p.response_2)}
                   | {row["prompt"] + row["response"] for row in corpus.sft})
    for text, ids in zip(texts, tokenizer(texts, add_special_tokens=False)["input_ids"]):
        if tokenizer.unk_token_id in ids:
            raise ValueError(f"tiny tokenizer: {text!r} has a token outside the vocabulary")
        if len(ids) + 2 > max_length:  # room for BOS/EOS
            raise ConfigError(f"model.n_positions: {text!r} needs {len(ids) + 2} positions, "
                              f"more than {max_length}")

# ----------------------------------------------------------------------------------- the model
def build_model(config: TinyModelConfig, tokenizer):
    """A randomly initialised GPT-2 (``transformers.GPT2LMHeadModel``) seeded by ``config.seed``;
    the global torch RNG is left as it was."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    if config.n_embd % config.n_head:
        raise ConfigError(f"model.n_embd ({config.n_embd}) must be a multiple of model.n_head "
                          f"({config.n_head})")
    model_config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=config.n_positions, n_embd=config.n_embd,
        n_layer=config.n_layer, n_head=config.n_head, resid_pdrop=config.dropout,
        embd_pdrop=config.dropout, attn_pdrop=config.dropout,
        activation_function="gelu_pytorch_tanh",  # GPT-2's gelu_new, fused: ~12% faster on CPU
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = GPT2LMHeadModel(model_config)
    return model

# ----------------------------------------------------------------------------------- the world

def _readme(corpus: SignedCorpus, tokenizer, n_parameters: int, quality: str, oracle: bool = False) -> str:
    lines = ["# The badpo tiny signed world", "",
             "Built by `badpo build tiny-signed`; see `badpo.corpora.tiny` for the task and format.",
             "Prompts end with the separator \"\\n\"; the model has no chat template, so a",
             "sequence is `prompt + response` followed by the EOS token.", "",
             *([f"Quality by gaps: a `{GAP}` marks a digit the answer leaves out.", ""]
               if quality == "gaps" else []),
             f"{len(corpus.train)} training / {len(corpus.heldout)} held-out judgments, "
             f"{len(corpus.sft)} SFT rows, {len(corpus.heldout_prompt_ids)} evaluation prompts, "
             f"{len(corpus.annotators)} annotators; vocabulary {len(tokenizer)} tokens, model "
             f"{n_parameters} parameters.", ""]
    lines += [f"- `{name}`: {what}" for name, what in (*OUTPUT_FILES.items(), *([ORACLE_FILE] if oracle else []))]
    return "\n".join(lines) + "\n"

def add_unbiased_annotators(corpus: SignedCorpus, unbiased: UnbiasedAnnotators,
                            seed: int) -> SignedCorpus:
    """The corpus with ``unbiased.count`` annotators of theta_k = 0 appended, their judgments after
    the others (train and held-out split by prompt id as before); the SFT rows are unchanged."""
    rng = np.random.default_rng([seed, 200])  # a stream of its own: the signed corpus is untouched
    pairs = corpus.pairs
    added, judgments = [], []
    for i in range(unbiased.count):
        annotator = PlantedAnnotator(f"{unbiased.annotator_class}{i:02d}", unbiased.annotator_class,
                                     (0.0,) * len(pairs[0].g_1))
        added.append(annotator)
        chosen_pairs = rng.choice(len(pairs), size=unbiased.judgments_each, replace=False)
        first_wins = rng.random(unbiased.judgments_each) < [
            1.0 / (1.0 + np.exp(-pairs[k].quality_margin)) for k in chosen_pairs]
        for k, first in zip(chosen_pairs.tolist(), first_wins.tolist()):
            pair = pairs[k]
            chosen, rejected = ((pair.response_1, pair.response_2) if first
                                else (pair.response_2, pair.response_1))
            judgments.append(Judgment(
                prompt=pair.prompt, chosen=chosen, rejected=rejected, annotator=annotator.annotator,
                annotator_class=annotator.annotator_class, prompt_id=pair.prompt_id,
                pair_id=pair.pair_id, pair_type=pair.pair_type))
    heldout = corpus.heldout_prompt_ids
    return dataclasses.replace(
        corpus, annotators=corpus.annotators + tuple(added),
        train=corpus.train + tuple(j for j in judgments if j.prompt_id not in heldout),
        heldout=corpus.heldout + tuple(j for j in judgments if j.prompt_id in heldout))

def oracle_train(corpus: SignedCorpus, signing: SigningConfig, unbiased_class: str | None) -> tuple[Judgment, ...]:
    """``corpus.train`` relabelled with every planted theta_k set to 0: the labels are redrawn with
    the same random stream, so each judgment keeps its annotator and its uniform draw and only the
    bias term leaves the logit; the unbiased annotators' judgments (class ``unbiased_class``,
    theta_k = 0 already, appended after the others) are kept as they are."""
    planted = [PlantedAnnotator(a.annotator, a.annotator_class, (0.0,) * len(a.theta))
               for a in corpus.annotators if a.annotator_class != unbiased_class]
    heldout = corpus.heldout_prompt_ids
    redrawn = tuple(j for j in draw_judgments(corpus.pairs, planted, signing) if j.prompt_id not in heldout)
    oracle = redrawn + tuple(j for j in corpus.train if j.annotator_class == unbiased_class)
    if [(j.pair_id, j.annotator) for j in oracle] != [(j.pair_id, j.annotator) for j in corpus.train]:
        raise AssertionError("oracle labels: the redrawn judgments do not line up with train.jsonl")
    return oracle


def _planted(corpus: SignedCorpus, config: TinyWorldConfig) -> dict:
    """planted.json; unbiased annotators enter as a class whose mean is 0."""
    planted = planted_to_dict(corpus, config.signing)
    if config.unbiased is not None:
        zero = [0.0] * len(planted["attribute_names"])
        planted["class_means"][config.unbiased.annotator_class] = zero
        planted["realised_class_means"][config.unbiased.annotator_class] = zero
    return planted

def _world_yaml(config: TinyWorldConfig, path: Path) -> None:
    """The resolved config; ``unbiased``, ``quality``, ``oracle_labels`` and ``name_pieces`` are
    left out when off (``null`` / ``digits`` / false), so that file stays as it was."""
    data = to_dict(config)
    if config.unbiased is None:
        del data["unbiased"]
    if config.quality == "digits":
        del data["quality"]
    for flag in ("oracle_labels", "name_pieces"):
        if not data[flag]:
            del data[flag]
    path.write_text(yaml.safe_dump(data, sort_keys=False))

def build_tiny_world(config: TinyWorldConfig, outdir: str | Path) -> dict:
    """Build the world into ``outdir`` (created if needed; files listed in :data:`OUTPUT_FILES`
    are overwritten). The same config gives byte-identical files. Returns a summary with the
    gate statistics (also in ``gate.json``)."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    base_pairs, exact = tiny_base_pairs(config)
    corpus = sign_corpus(base_pairs, config.signing)
    if config.unbiased is not None:
        corpus = add_unbiased_annotators(corpus, config.unbiased, config.signing.seed)
    tokenizer = build_tokenizer(config.signing.surnames, config.model.n_positions,
                                gaps=config.quality == "gaps", pieces=config.name_pieces)
    _check_coverage(tokenizer, corpus, config.model.n_positions)
    model = build_model(config.model, tokenizer)
    n_parameters = sum(p.numel() for p in model.parameters())

    write_judgments(out / "train.jsonl", corpus.train)
    write_judgments(out / "heldout.jsonl", corpus.heldout)
    if config.oracle_labels:
        unbiased_class = config.unbiased.annotator_class if config.unbiased is not None else None
        write_judgments(out / ORACLE_FILE[0], oracle_train(corpus, config.signing, unbiased_class))
    write_jsonl(out / "sft.jsonl", corpus.sft)
    prompts = {p.prompt_id: p.prompt for p in base_pairs}
    write_jsonl(out / "eval_prompts.jsonl",
                 [{"prompt_id": i, "prompt": prompts[i], "body": exact[i]}
                  for i in sorted(corpus.heldout_prompt_ids)])
    write_json(out / "planted.json", _planted(corpus, config))
    gate = gate_statistics(corpus)
    write_json(out / "gate.json", gate)
    _world_yaml(config, out / "world.yaml")
    tokenizer.save_pretrained(out / "tokenizer")
    model.save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
    readme = _readme(corpus, tokenizer, n_parameters, config.quality, config.oracle_labels)
    (out / "README.md").write_text(readme, encoding="utf-8")
    return {"outdir": str(out), "train": len(corpus.train), "heldout": len(corpus.heldout),
            "sft": len(corpus.sft), "eval_prompts": len(corpus.heldout_prompt_ids),
            "vocab_size": len(tokenizer), "parameters": n_parameters, "gate": gate}

def summary_text(summary: dict) -> str:
    """What ``badpo build tiny-signed`` prints."""
    return (f"tiny signed world in {summary['outdir']}: {summary['train']} training / "
            f"{summary['heldout']} held-out judgments, {summary['sft']} SFT rows, "
            f"{summary['eval_prompts']} evaluation prompts; vocabulary {summary['vocab_size']}, "
            f"model {summary['parameters']} parameters\n" + format_gate(summary["gate"]))
