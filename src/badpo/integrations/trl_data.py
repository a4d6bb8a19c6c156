"""The columns :class:`badpo.integrations.trl.BADPOTrainer` adds to a TRL dataset before TRL sees it,
and the collator that turns them into tensors: the annotator's row in the bias channel, each
judgment's attribute difference, its row, its loss weight and its grade (a tie or a win's strength).
TRL's collator reads only its own keys; these travel beside them."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from badpo.core.attributes import AttributeSet
from badpo.core.bias import BiasChannel
from badpo.core.judgments import FIELDS, Judgment, validate_judgments
from badpo.data.chat import ChatRows
from badpo.engine.batches import shuffled_annotator_index
from badpo.theta.graded import Grades

__all__ = ["BADPO_COLUMNS", "DIFF_COLUMN", "GRADE_COLUMN", "INDEX_COLUMN", "JUDGMENT_COLUMN", "WEIGHT_COLUMN",
           "BiasColumnsCollator", "dataset_judgments", "with_bias_columns"]

INDEX_COLUMN = "badpo_annotator_index"  # the annotator's row in the bias channel
DIFF_COLUMN = "badpo_attr_diff"  # g(y_w) - g(y_l), one value per attribute
JUDGMENT_COLUMN = "badpo_judgment"  # the judgment's row in its dataset (a method's loss weights read it)
WEIGHT_COLUMN = "badpo_weight"  # the judgment's own loss weight (the data's weight column; 1 without)
GRADE_COLUMN = "badpo_grade"  # 0 a tie, 1..L a win's strength rank (badpo.theta.graded), 1 for a plain win
BADPO_COLUMNS = (INDEX_COLUMN, DIFF_COLUMN, JUDGMENT_COLUMN, WEIGHT_COLUMN, GRADE_COLUMN)

def dataset_judgments(dataset, name: str) -> list[Judgment]:
    """The dataset's rows as validated judgments (the badpo fields only; other columns are TRL's)."""
    import datasets

    if not isinstance(dataset, datasets.Dataset):
        raise TypeError(f"{name}: BADPOTrainer needs a datasets.Dataset (map-style), got "
                        f"{type(dataset).__name__}")
    if len(dataset) == 0:
        raise ValueError(f"{name}: no rows; BADPOTrainer needs judgments to train on")
    for column in BADPO_COLUMNS:
        if column in dataset.column_names:
            raise ValueError(f"{name}: column {column!r} is reserved for BADPOTrainer")
    fields = [f for f in FIELDS if f in dataset.column_names]
    chat = ChatRows(None)  # TRL's conversational rows: badpo reads the assistant's text (TRL renders its own)
    try:
        rows = [chat.render((i, None, None), row) for i, row in enumerate(dataset.select_columns(fields).to_list())]
        judgments = validate_judgments(rows)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
    return judgments


def with_bias_columns(dataset, judgments: Sequence[Judgment], attributes: AttributeSet,
                      bias: BiasChannel, name: str, shuffle_seed: int | None = None, grades: Grades | None = None):
    """``dataset`` with the columns the loss reads: the annotator's row (with ``shuffle_seed``, a
    uniformly random row drawn as the engine draws it: the shuffled-ids control), g_w - g_l, the
    judgment's row in the dataset, its weight and its grade (``grades``; 1 each without)."""
    index = []
    for i, j in enumerate(judgments):
        try:
            index.append(int(bias.annotator_index([j.annotator])[0]))
        except KeyError:
            raise ValueError(f"{name} row {i}: annotator {j.annotator!r} is not in the bias channel "
                             f"(its annotators come from train_dataset)") from None
    if shuffle_seed is not None:
        index = shuffled_annotator_index(len(bias.annotators), len(judgments), shuffle_seed).tolist()
    diffs = [attributes.judgment_differences(j).tolist() for j in judgments]  # an overflow is named
    weights = [1.0 if j.weight is None else j.weight for j in judgments]  # the weight column, 1 without
    if judgments and judgments[0].weight is not None and not any(w > 0 for w in weights):
        raise ValueError(f"{name}: every judgment's weight is 0, so no judgment would teach anything")
    return (dataset.add_column(INDEX_COLUMN, index).add_column(DIFF_COLUMN, diffs)
            .add_column(JUDGMENT_COLUMN, list(range(len(judgments)))).add_column(WEIGHT_COLUMN, weights)
            .add_column(GRADE_COLUMN, [1] * len(judgments) if grades is None else grades.grade.tolist()))


class BiasColumnsCollator:
    """TRL's collator (which reads only its own keys), plus the bias columns as tensors."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __call__(self, examples: list[dict]) -> dict:
        batch = self.inner(examples)
        batch[INDEX_COLUMN] = torch.tensor([e[INDEX_COLUMN] for e in examples], dtype=torch.long)
        batch[DIFF_COLUMN] = torch.tensor([e[DIFF_COLUMN] for e in examples], dtype=torch.float32)
        batch[JUDGMENT_COLUMN] = torch.tensor([e[JUDGMENT_COLUMN] for e in examples], dtype=torch.long)
        batch[WEIGHT_COLUMN] = torch.tensor([e[WEIGHT_COLUMN] for e in examples], dtype=torch.float32)
        batch[GRADE_COLUMN] = torch.tensor([e[GRADE_COLUMN] for e in examples], dtype=torch.long)
        return batch


