"""A model whose context is shorter than the configured lengths: the paper's defaults are lowered to
it with a line saying so, a length the user set past it is refused in one line naming the key; without a
config file the paper's learning rate is named too (issue 24, item 6)."""

from __future__ import annotations

import pytest

from badpo.core.config import ConfigError, load_config
from badpo.core.notices import format_warning
from badpo.engine.runtime import LengthsFittedNotice
from badpo.engine.settings import PaperDefaultsNotice, TrainConfig
from badpo.engine.tokenize import TokenizationConfig, fit_tokenization
from fixtures.engine import judgment_rows, write_jsonl


def test_defaults_are_lowered_to_the_models_positions_in_their_proportion():
    fitted, notice = fit_tokenization(TokenizationConfig(), 64, "tiny")
    # 384 / 1280 of 64 positions: 19.2 -> 19 prompt tokens
    assert (fitted.max_length, fitted.max_prompt_tokens, fitted.chat_template) == (64, 19, "auto")
    assert notice == ("tokenization.max_length 1280 -> 64, tokenization.max_prompt_tokens 384 -> 19: the "
                      "defaults exceed the 64 positions of tiny (set them to choose other lengths)")


def test_a_prompt_length_the_user_set_is_kept_when_it_fits():
    fitted, notice = fit_tokenization(TokenizationConfig(max_prompt_tokens=40), 64, "tiny")
    assert (fitted.max_length, fitted.max_prompt_tokens) == (64, 40)
    assert "max_prompt_tokens" not in notice


@pytest.mark.parametrize("config, positions", [(TokenizationConfig(), 1280), (TokenizationConfig(), 4096),
                                               (TokenizationConfig(), None),
                                               (TokenizationConfig(max_prompt_tokens=8, max_length=32), 64)])
def test_lengths_the_model_holds_are_left_alone(config, positions):
    assert fit_tokenization(config, positions, "m") == (config, None)


def test_lengths_the_user_set_past_the_context_are_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"^tokenization.max_length: 256 tokens exceed the 64 positions of tiny; "
                                          r"set tokenization.max_length to at most 64$"):
        fit_tokenization(TokenizationConfig(max_prompt_tokens=32, max_length=256), 64, "tiny")
    with pytest.raises(ConfigError, match=r"^tokenization.max_prompt_tokens: 100 leaves no room .* 64 positions"):
        fit_tokenization(TokenizationConfig(max_prompt_tokens=100), 64, "tiny")


def test_train_without_a_config_on_a_short_model_says_what_it_lowered(tmp_path, capsys, cli_training,
                                                                      save_model_dir):
    """`badpo train KEY=VALUE...` (no -c) on a 64-position model: one notice, and the run's
    config.yaml holds the lengths it trained with, which evaluate then reads."""
    model = save_model_dir(tmp_path / "model", n_positions=64)
    write_jsonl(tmp_path / "judgments.jsonl", judgment_rows())
    args = [f"data={tmp_path / 'judgments.jsonl'}", f"model.name_or_path={model}", "attributes=[given:signed]",
            "steps=1", "batch_size=4", "micro_batch_size=4", "cache_dir=null", "report.progress_bar=false",
            "runtime.num_threads=1"]
    with pytest.warns(LengthsFittedNotice) as notices:
        assert cli_training(["train", *args, f"output_dir={tmp_path / 'run'}"]) == 0
    lengths = [n.message for n in notices if n.category is LengthsFittedNotice]
    assert [str(n) for n in lengths] == [
        f"tokenization.max_length 1280 -> 64, tokenization.max_prompt_tokens 384 -> 19: the defaults exceed the "
        f"64 positions of {model} (set them to choose other lengths)"]
    assert format_warning(lengths[0], LengthsFittedNotice, "x.py", 1).startswith(
        "badpo: warning: tokenization.max_length 1280 -> 64")  # as the terminal shows it
    # and the paper's learning rate, the one key of the three this call did not set, is named too
    assert [str(n.message) for n in notices if n.category is PaperDefaultsNotice] == [
        "no config file: optim.lr 5e-07 are the paper's settings (for its 0.5B to 8B models); for a small "
        "model set them or start from configs/train_tiny.yaml (-c)"]
    recorded = load_config(TrainConfig, tmp_path / "run" / "config.yaml").tokenization
    assert (recorded.max_length, recorded.max_prompt_tokens) == (64, 19)
    capsys.readouterr()

    assert cli_training(["train", *args, "tokenization.max_length=100",
                         "tokenization.max_prompt_tokens=20", f"output_dir={tmp_path / 'set'}"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("badpo: warning")]
    assert lines == [f"badpo train: tokenization.max_length: 100 tokens exceed the 64 positions of {model}; set "
                     "tokenization.max_length to at most 64 (--debug for the traceback)"]
    assert not (tmp_path / "set").exists()  # refused before the run folder is made
