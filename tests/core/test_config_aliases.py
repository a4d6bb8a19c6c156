"""A YAML config's aliases are bounded, and an error line quotes a value cut short (issue 49, item 4).

A 343-byte config of anchors and aliases (a "billion laughs") took 4.7 GB, wrote 2.1 GB to stderr
(the error message embedded the expanded value) and ended in a MemoryError.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from badpo.core.config import ConfigError, from_dict, load_config, read_settings
from badpo.engine.settings import TrainConfig
from badpo.run_folder.saved import SavedRun

LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{name}: &{name} [{','.join([f'*{prior}'] * 9)}]\n" for prior, name in zip("abcdefgh", "bcdefghi"))
LAUGHS_AS_A_KEY = LAUGHS.replace("i: &i", "optim:\n  lr: &i")


def test_a_billion_laughs_is_refused_in_one_line_naming_the_file(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS_AS_A_KEY)
    assert len(LAUGHS) < 400
    with pytest.raises(ConfigError) as refused:
        load_config(TrainConfig, path)
    assert str(refused.value) == (f"{path}: its aliases expand it to more than 100,000 values (line 6); a config "
                                  "holds far fewer: is it the file you meant?")


def test_the_command_line_refuses_it_quickly_and_briefly(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS_AS_A_KEY)
    done = subprocess.run([sys.executable, "-c", "import sys; from badpo.cli import main; sys.exit(main())",
                           "train", "-c", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "its aliases expand it to more than 100,000 values" in done.stderr
    assert len(done.stderr) < 2000, len(done.stderr)


def test_a_run_folder_s_config_is_read_with_the_same_bound(tmp_path):
    (tmp_path / "config.yaml").write_text(LAUGHS)
    (tmp_path / "policy").mkdir()
    with pytest.raises(ValueError, match="cannot read the run's config .*more than 100,000 values"):
        SavedRun(tmp_path).method()


def test_aliases_within_the_bound_and_merge_keys_still_read(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("base: &base {lr: 1.0e-3, schedule: cosine}\nsame: &same [1, 2]\noptim:\n  <<: *base\n"
                    "  lr: 2.0e-4\nthere: *same\n")
    assert read_settings(path) == {"base": {"lr": 1e-3, "schedule": "cosine"}, "same": [1, 2],
                                   "optim": {"lr": 2e-4, "schedule": "cosine"}, "there": [1, 2]}


def test_an_alias_inside_its_own_value_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("a: &a [1, *a]\n")
    with pytest.raises(ConfigError, match=r"loop.yaml: line 1: an alias inside the value it names \(a loop\)"):
        read_settings(path)


def test_an_error_line_quotes_a_long_value_cut_short():
    with pytest.raises(ConfigError) as refused:
        from_dict(TrainConfig, {"beta": ["lol" * 10_000] * 10_000})
    assert len(str(refused.value)) < 300 and str(refused.value).startswith("beta: expected a number, got [")
    with pytest.raises(ConfigError) as refused:
        from_dict(TrainConfig, {"x" * 10_000: 1})
    assert len(str(refused.value)) < 2000


def test_a_config_nested_past_python_s_recursion_is_one_line(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 5000 + "1" + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match=r"deep.yaml: nested too deep to read$"):
        read_settings(path)


def test_a_config_of_too_many_values_written_out_is_not_blamed_on_aliases(tmp_path):
    """Issue 49's retry: 200,000 values and no alias were refused as 'its aliases expand it'."""
    path = tmp_path / "long.yaml"
    path.write_text("attributes: [" + ", ".join(["names"] * 200_000) + "]\n")
    with pytest.raises(ConfigError) as refused:
        load_config(TrainConfig, path)
    assert str(refused.value) == (f"{path}: it holds more than 100,000 values (line 1); a config holds far fewer: "
                                  "is it the file you meant? (data goes in data files)")
