"""Training data as index tensors: judgments, pairs, the two batching modes, and the data order.

Everything is tokenized once into a :class:`TokenStore`; a step then only indexes tensors.

Batching modes. An *item* is what a micro-batch counts, and every item costs two sequences:

* ``per_judgment`` (the paper): an item is one judgment, its chosen and rejected response.
* ``pair_grouped``: an item is one pair with *all* its judgments; the pair's two sequences are
  scored once and each judgment reads them in its own orientation (chosen / rejected).

The loss is the mean over the judgments of a step in both modes, so on the same judgments the two
give the same loss. What differs: a pair-grouped step holds every judgment of its pairs (about
``judgments per pair`` times more judgments per step for the same compute), and the judgments of
one pair always share a step instead of being spread over the epoch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from badpo.core.judgments import Judgment, JudgmentError, annotator_classes, check_pair_texts, duplicate_rows, pair_key
from badpo.data.sources import read_judgment_source
from badpo.engine.tokenize import TokenizationConfig, TokenStore, build_token_store, token_coverage
from badpo.theta.graded import Grades, grades_of
from badpo.theta.labels import ThetaLabels

BATCHING_MODES = ("per_judgment", "pair_grouped")


@dataclass(frozen=True)
class MicroBatch:
    """One forward's worth: ``sequence_rows`` [2I] store rows (item i at 2i, 2i+1), its judgments
    [J], and for each judgment the slots (into the 2I sequences) of its chosen and rejected side."""

    sequence_rows: Tensor
    judgments: Tensor
    chosen_slot: Tensor
    rejected_slot: Tensor


@dataclass(frozen=True)
class ItemTable:
    """Items of one batching mode: two store rows each, and their judgments (CSR layout)."""

    sequences: Tensor  # [I, 2] store rows of each item's first and second sequence
    offsets: Tensor  # [I + 1]; the judgments of item i are order[offsets[i]:offsets[i + 1]]
    order: Tensor  # [N] judgment indices grouped by item
    chosen_side: Tensor  # [N] by judgment: 0 if its chosen response is its item's first sequence

    def __len__(self) -> int:
        return self.sequences.shape[0]

    def judgment_counts(self, items: Tensor) -> Tensor:
        return self.offsets[items + 1] - self.offsets[items]

    def _judgments(self, items: Tensor) -> tuple[Tensor, Tensor]:
        """(judgment indices of ``items``, grouped by item; the position in ``items`` of each)."""
        counts = self.judgment_counts(items)
        item_of = torch.repeat_interleave(torch.arange(len(items)), counts)
        first = torch.cumsum(counts, 0) - counts  # position of each item's first judgment in J
        within = torch.arange(int(counts.sum())) - first[item_of]
        return self.order[self.offsets[items][item_of] + within], item_of

    def judgments_of(self, items: Tensor) -> Tensor:
        return self._judgments(items)[0]

    def restrict(self, keep: Tensor) -> ItemTable:
        """The same items holding only the judgments where ``keep`` (``[N]`` bool) is true; items
        left without a judgment are dropped. Judgment indices (and so weights, annotators, the
        bias) are unchanged: a run on the table trains on a subset of the same data."""
        kept = keep.bool()[self.order]
        item_of = torch.repeat_interleave(torch.arange(len(self)), self.offsets[1:] - self.offsets[:-1])
        counts = torch.bincount(item_of[kept], minlength=len(self))
        nonempty = counts > 0
        return ItemTable(
            sequences=self.sequences[nonempty],
            offsets=torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(counts[nonempty], 0)]),
            order=self.order[kept], chosen_side=self.chosen_side,
        )

    def micro_batch(self, items: Tensor) -> MicroBatch:
        judgments, item_of = self._judgments(items)
        side = self.chosen_side[judgments]
        return MicroBatch(
            sequence_rows=self.sequences[items].reshape(-1),
            judgments=judgments,
            chosen_slot=2 * item_of + side,
            rejected_slot=2 * item_of + 1 - side,
        )


@dataclass(frozen=True)
class PreferenceData:
    """Tokenized judgments. Annotators are sorted ids; ``attr_diff`` is g(y_w) - g(y_l)."""

    store: TokenStore
    chosen_row: Tensor  # [N] store row of each judgment's chosen response
    rejected_row: Tensor  # [N]
    pair_rows: Tensor  # [P, 2] store rows of each pair's two responses (first-seen orientation)
    judgment_pair: Tensor  # [N] pair index of each judgment
    annotator_index: Tensor  # [N] index into ``annotators``
    attr_diff: Tensor  # [N, q] float32
    annotators: tuple[str, ...]
    annotator_classes: dict[str, str] | None
    attribute_names: tuple[str, ...]
    input_report: dict = dataclasses.field(default_factory=dict)  # counts printed and kept in run.json
    grades: Grades | None = None  # ties and strengths (badpo.theta.graded); None: every label a plain win
    weight: Tensor | None = None  # [N] each judgment's loss weight (reliability: weight); None: 1 each

    def __len__(self) -> int:
        return self.chosen_row.shape[0]

    def items(self, batching: str) -> ItemTable:
        n = len(self)
        if batching == "per_judgment":
            return ItemTable(
                sequences=torch.stack([self.chosen_row, self.rejected_row], dim=1),
                offsets=torch.arange(n + 1), order=torch.arange(n),
                chosen_side=torch.zeros(n, dtype=torch.long),
            )
        if batching == "pair_grouped":
            counts = torch.bincount(self.judgment_pair, minlength=self.pair_rows.shape[0])
            return ItemTable(
                sequences=self.pair_rows,
                offsets=torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(counts, 0)]),
                order=torch.argsort(self.judgment_pair, stable=True),
                chosen_side=(self.chosen_row != self.pair_rows[self.judgment_pair, 0]).long(),
            )
        raise ValueError(f"batching: unknown mode {batching!r}; choose one of {BATCHING_MODES}")

    def theta_labels(self) -> ThetaLabels:
        """The judgments as theta's start and level rules read them (:mod:`badpo.theta.labels`):
        each judgment's side is +1 where it chose its pair's first side (first-seen orientation)."""
        first = self.pair_rows[self.judgment_pair, 0]
        return ThetaLabels(self.attr_diff, self.annotator_index, self.annotators, self.attribute_names,
                           self.judgment_pair, torch.where(self.chosen_row == first, 1.0, -1.0).double())

    def with_shuffled_annotators(self, seed: int) -> PreferenceData:
        """The shuffled-ids control: every judgment gets a uniformly random annotator index."""
        return dataclasses.replace(self, annotator_index=shuffled_annotator_index(len(self.annotators), len(self),
                                                                                   seed))


def shuffled_annotator_index(annotators: int, judgments: int, seed: int) -> torch.Tensor:
    """[judgments] uniformly random annotator indices drawn from ``seed`` alone: the shuffled-ids
    control, the same in the engine and inside TRL."""
    rng = np.random.default_rng([seed, 0x5EED])
    return torch.from_numpy(rng.integers(annotators, size=judgments))


def build_preference_data(
    judgments: Sequence[Judgment], attributes, tokenizer, tokenization: TokenizationConfig,
    drop_identical_pairs: bool = False, source: str = "data", rendered_prompts: bool = False,
) -> PreferenceData:
    """Tokenize the judgments' distinct sequences once and index everything else.

    ``attributes`` is an ``AttributeSet`` or None (no attribute: the bias logit is 0). Judgments
    of one pair (same ``pair_key``) must compare the same two responses to the same prompt. A
    judgment whose two sides are the same tokens (a response cut by ``max_length``, or texts equal
    up to whitespace) teaches the policy nothing but would still train theta on its attribute
    difference: it is an error naming the row (``source`` row i, 0-based), or, with
    ``drop_identical_pairs``, dropped and counted. ``input_report`` counts truncations, dropped
    rows, exact duplicate judgments (kept: a repeated vote is a vote) and judgments whose sides
    differ only in whitespace yet tokenize apart (kept, but all they teach is whitespace), and
    gives the share of unknown tokens per side (:func:`badpo.engine.tokenize.token_coverage`:
    mostly unknown text is an error, checked first). ``rendered_prompts``:
    the prompts were rendered from chat messages (:func:`badpo.engine.tokenize.encode_prompts`).
    """
    if not judgments:
        raise ValueError(f"{source}: no judgments")
    annotator_classes(judgments, source)  # an error names the file; _index_judgments keeps the map
    try:
        data = _index_judgments(judgments, attributes, tokenizer, tokenization, rendered_prompts)
    except JudgmentError as error:  # a row's error names the file it is in
        raise JudgmentError(f"{source}: {error}", row=error.row, field=error.field) from None
    sides = {"chosen": data.chosen_row, "rejected": data.rejected_row, "prompts": torch.arange(len(data.store))}
    coverage = token_coverage(tokenizer, data.store, sides, source)  # before its symptom below
    identical = _identical_sides(data)
    if identical and not drop_identical_pairs:
        i = identical[0]
        raise JudgmentError(
            f"{source} row {i}: chosen and rejected are the same tokens after tokenization "
            f"({_why_identical(data, judgments[i], i)}); {len(identical)} such row(s) in all; fix "
            "them, raise tokenization.max_length, or set drop_identical_pairs=true", row=i)
    if identical:
        dropped = set(identical)
        kept = [j for i, j in enumerate(judgments) if i not in dropped]
        if not kept:
            raise ValueError(f"{source}: every judgment has identical sides after tokenization")
        data = _index_judgments(kept, attributes, tokenizer, tokenization, rendered_prompts)
    seen: set[Judgment] = set()
    duplicates = whitespace_only = 0
    identical_rows = set(identical)
    for i, j in enumerate(judgments):
        duplicates += j in seen
        seen.add(j)
        whitespace_only += i not in identical_rows and j.chosen.split() == j.rejected.split()
    report = {"judgments_read": len(judgments), "identical_pairs_dropped": len(identical),
              "exact_duplicate_judgments": duplicates, "whitespace_only_pairs": whitespace_only,
              "truncated_prompts": data.store.truncated_prompts,
              "truncated_responses": data.store.truncated_responses, "unknown_tokens": coverage}
    return dataclasses.replace(data, input_report=report)


def _weights(judgments: Sequence[Judgment]) -> Tensor | None:
    """The judgments' own loss weights (the ``weight`` column; on every row or none, checked when
    read), None without; all 0 is refused: no judgment would teach anything."""
    if judgments[0].weight is None:
        return None
    weights = torch.tensor([j.weight for j in judgments], dtype=torch.float64)
    if not bool((weights > 0).any()):
        raise JudgmentError("field 'weight': every judgment's weight is 0, so no judgment would teach anything",
                            field="weight")
    return weights


def _identical_sides(data: PreferenceData) -> list[int]:
    """Judgments whose chosen and rejected store rows hold the same tokens."""
    store = data.store
    same_length = store.lengths[data.chosen_row] == store.lengths[data.rejected_row]
    same_ids = (store.ids[data.chosen_row] == store.ids[data.rejected_row]).all(dim=1)
    return torch.nonzero(same_length & same_ids).flatten().tolist()


def _why_identical(data: PreferenceData, judgment: Judgment, i: int) -> str:
    cut = data.store.response_cut
    if cut is not None and bool(cut[data.chosen_row[i]] or cut[data.rejected_row[i]]):
        return "a response was cut by tokenization.max_length"
    if judgment.chosen.split() == judgment.rejected.split():
        return "the texts are equal up to whitespace"
    return "the tokenizer encodes both texts alike"


def _index_judgments(judgments: Sequence[Judgment], attributes, tokenizer,
                     tokenization: TokenizationConfig, rendered_prompts: bool) -> PreferenceData:
    rows: dict[tuple[str, str], int] = {}
    pairs: dict[str, int] = {}
    pair_texts: list[tuple[str, str, str]] = []
    chosen, rejected, pair_of = [], [], []
    check_pair_texts(judgments)
    for j in judgments:
        key = pair_key(j)
        if key not in pairs:
            pairs[key] = len(pair_texts)
            pair_texts.append((j.prompt, j.chosen, j.rejected))
        chosen.append(rows.setdefault((j.prompt, j.chosen), len(rows)))
        rejected.append(rows.setdefault((j.prompt, j.rejected), len(rows)))
        pair_of.append(pairs[key])
    store = build_token_store(tokenizer, list(rows), tokenization, rendered_prompts)
    annotators = tuple(sorted({j.annotator for j in judgments}))
    position = {a: k for k, a in enumerate(annotators)}
    if attributes is None:
        names: tuple[str, ...] = ()
        diff = torch.zeros(len(judgments), 0)
    else:
        names = tuple(attributes.names)
        diff = torch.tensor(np.array(_differences(attributes, judgments)), dtype=torch.float32)
    return PreferenceData(
        store=store,
        chosen_row=torch.tensor(chosen), rejected_row=torch.tensor(rejected),
        pair_rows=torch.tensor([[rows[(p, a)], rows[(p, b)]] for p, a, b in pair_texts]),
        judgment_pair=torch.tensor(pair_of),
        annotator_index=torch.tensor([position[j.annotator] for j in judgments]),
        attr_diff=diff, annotators=annotators,
        annotator_classes=annotator_classes(judgments), attribute_names=names, grades=grades_of(judgments),
        weight=_weights(judgments),
    )


def _differences(attributes, judgments: Sequence[Judgment]) -> list[np.ndarray]:
    """g(y_w) - g(y_l) of every judgment, each within float32's range; an overflow names its row."""
    rows = []
    for i, j in enumerate(judgments):
        try:
            rows.append(attributes.judgment_differences(j))
        except JudgmentError:
            raise
        except ValueError as error:
            raise JudgmentError(f"row {i}: {error}", row=i) from None
    return rows


class Schedule:
    """The item order: one seeded permutation per epoch, read as a single stream.

    Step t takes items [t E, (t + 1) E) of the stream (E = items per step), so the data position
    is the step number alone and a resumed run sees exactly the items it would have seen. The
    step's items are cut into micro-batches; with P processes, accumulation pass a of process p
    holds chunk a * P + p.
    """

    def __init__(self, n_items: int, items_per_step: int, seed: int) -> None:
        if n_items < 1:
            raise ValueError("the schedule needs at least one item")
        self.n_items, self.items_per_step, self.seed = n_items, items_per_step, seed
        self._permutations: dict[int, Tensor] = {}

    def _permutation(self, epoch: int) -> Tensor:
        if epoch not in self._permutations:
            if len(self._permutations) > 4:
                self._permutations.clear()
            rng = np.random.default_rng([self.seed, epoch])
            self._permutations[epoch] = torch.from_numpy(rng.permutation(self.n_items))
        return self._permutations[epoch]

    def step_items(self, step: int) -> Tensor:
        start = step * self.items_per_step
        positions = torch.arange(start, start + self.items_per_step)
        epochs = positions // self.n_items
        pieces = [self._permutation(int(e))[positions[epochs == e] % self.n_items]
                  for e in torch.unique(epochs)]
        return torch.cat(pieces)

    def micro_batches(self, step: int, process: int, processes: int, micro: int) -> list[Tensor]:
        chunks = self.step_items(step).split(micro)
        return list(chunks[process::processes])


def majority_chosen(judgments: Sequence[Judgment], tie_break: str = "first_judgment"
                    ) -> tuple[list[tuple[str, str]], list[str]]:
    """(prompt, response) of the side chosen by more judgments of each pair, in first-seen order,
    and the keys of the pairs with an equal count. Such a pair gets the response chosen by its
    first judgment (``tie_break="first_judgment"``) or no row (``"skip"``). A tied judgment is no
    vote for either side (a pair of ties only has an equal count, 0 to 0)."""
    if tie_break not in ("first_judgment", "skip"):
        raise ValueError(f"tie_break: {tie_break!r} is not one of ['first_judgment', 'skip']")
    wins: dict[str, dict[str, int]] = {}  # insertion order: the first judgment's chosen first
    prompts: dict[str, str] = {}
    check_pair_texts(judgments)
    for j in judgments:
        key = pair_key(j)
        prompts.setdefault(key, j.prompt)
        counts = wins.setdefault(key, {j.chosen: 0, j.rejected: 0})
        counts[j.chosen] += not j.tie
    rows, ties = [], []
    for key, counts in wins.items():
        (first, first_wins), (second, second_wins) = counts.items()
        if first_wins == second_wins:
            ties.append(key)
            if tie_break == "skip":
                continue
        rows.append((prompts[key], first if first_wins >= second_wins else second))
    return rows, ties


def load_preference_data(config, tokenizer, attributes=None) -> tuple[list[Judgment], PreferenceData]:
    """(the rows, their index tensors) of ``config.data``, read as every stage that trains on
    judgments reads them: the same rows, tokenization and dropping of identical pairs, so the
    judgment indices of a reward model, an arm and EM-DPO's parts agree."""
    loaded = read_judgment_source(config.data, config.data_split, config.columns, tokenizer)
    rows, repeats, source = loaded.rows, duplicate_rows(loaded.rows), config.data
    dropped = set(repeats) if config.duplicates == "drop" else set()
    if dropped:  # as badpo audit --duplicates drop: the first of each kept; errors count the rows kept
        rows = [j for i, j in enumerate(rows) if i not in dropped]
        source = f"{config.data} (its rows less the {len(dropped)} exact duplicates dropped)"
    rows, labels_report = _as_labelled(rows, config)
    if not rows:
        raise ValueError(f"{config.data}: every judgment is a tie, and ties: drop drops them all")
    data = build_preference_data(rows, attributes, tokenizer, config.tokenization,
                                 drop_identical_pairs=config.drop_identical_pairs, source=source,
                                 rendered_prompts=loaded.rendered_prompts)
    report = {**data.input_report, "judgments_read": len(loaded.rows), "exact_duplicates_dropped": len(dropped),
              **labels_report}
    return rows, dataclasses.replace(data, input_report=report)


def _as_labelled(rows: list[Judgment], config) -> tuple[list[Judgment], dict]:
    """The rows as the run's ``ties`` and ``strength`` settings read them, and the counts that say
    what they did (none when every label is a plain win: the report is what it was)."""
    ties = sum(bool(getattr(j, "tie", False)) for j in rows)
    graded = sum(getattr(j, "strength", None) is not None for j in rows)
    if not ties and not graded:
        return rows, {}
    report = {"ties": ties, "graded_wins": graded}
    if config.ties == "drop" and ties:
        rows = [j for j in rows if not j.tie]
        report["ties_dropped"] = ties
    if config.strength == "ignore" and graded:
        rows = [dataclasses.replace(j, strength=None) if j.strength is not None else j for j in rows]
        report["strengths_ignored"] = graded
    return rows, report

