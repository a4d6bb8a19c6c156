"""The config loader: types are checked, unknown keys are named, overrides win over the file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from badpo.core.config import ConfigError, apply_overrides, from_dict, load_config, to_dict


@dataclass(frozen=True)
class Optim:
    lr: float = 5e-7  # policy learning rate
    warmup_ratio: float = 0.1


@dataclass(frozen=True)
class Run:
    model: str = "tiny"
    steps: int = 1000
    method: Literal["dpo", "ba-dpo"] = "dpo"
    seeds: tuple[int, ...] = (42, 123, 456)
    init_mean: list[float] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    optim: Optim = field(default_factory=Optim)


def test_defaults_and_nested_values():
    cfg = from_dict(Run, {"steps": 10, "optim": {"lr": 1}, "seeds": [1, 2]})
    assert cfg == Run(steps=10, optim=Optim(lr=1.0), seeds=(1, 2))
    assert isinstance(cfg.optim.lr, float)  # an int is accepted where a float is expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"stepz": 1}, r"unknown key\(s\): stepz"),
        ({"optim": {"lrr": 1.0}}, r"unknown key\(s\): optim.lrr"),
        ({"steps": 1.5}, r"steps: expected an integer"),
        ({"steps": True}, r"steps: expected an integer"),
        ({"optim": {"lr": "fast"}}, r"optim.lr: expected a number"),
        ({"method": "ipo"}, r"method: 'ipo' is not one of \['dpo', 'ba-dpo'\]"),
        ({"seeds": [1, "x"]}, r"seeds\[1\]: expected an integer"),
        ({"init_mean": 0.5}, r"init_mean: expected a list, got 0.5"),  # `X | None`: X's own message
        ({"model": 3}, r"model: expected str"),
    ],
)
def test_bad_values_name_the_key(data, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(Run, data)


@dataclass(frozen=True)
class Arm:
    name: str = ""
    optim: Optim | None = None


@dataclass(frozen=True)
class Study:
    run: Run = field(default_factory=Run)
    arms: list[Arm] = field(default_factory=list)


def test_unknown_keys_in_several_sections_are_named_in_one_line():
    """One typo per section used to surface one run at a time (the first section's); every
    section's unknown keys are one line now, each with the keys its section knows. One section
    alone reads as before."""
    data = {"stepz": 1, "optim": {"lrr": 1.0, "warmup": 0.2}}
    with pytest.raises(ConfigError) as error:
        from_dict(Run, data)
    assert str(error.value) == ("unknown key(s): stepz (known: model, steps, method, seeds, init_mean, tags, optim); "
                                "optim.lrr, optim.warmup (known in optim: lr, warmup_ratio)")
    nested = {"run": {"optim": {"lrr": 1}}, "arms": [{"name": "a"}, {"optim": {"lr": 1, "beta": 2}}]}
    with pytest.raises(ConfigError, match=r"^unknown key\(s\): run.optim.lrr \(known in run.optim: lr, "
                                          r"warmup_ratio\); arms\[1\].optim.beta \(known in arms\[1\].optim"):
        from_dict(Study, nested)
    with pytest.raises(ConfigError, match=r"^unknown key\(s\): optim.lrr \(known: lr, warmup_ratio\)$"):
        from_dict(Run, {"optim": {"lrr": 1}})


@dataclass(frozen=True)
class Pairing:
    sides: tuple[Optim, Arm] = (Optim(), Arm())
    extra: tuple[Optim, dict] = (Optim(), {})
    steps: int = 1


def test_a_fixed_tuple_s_items_are_checked_against_their_own_types():
    """tuple[A, B]: item 1 is a B, so B's keys are known there (the walk once read it as an A)."""
    data = {"sides": [{"lr": 1}, {"name": "b"}], "extra": [{"lr": 1}, {"anything": 1}]}
    assert from_dict(Pairing, data).sides[1] == Arm(name="b")
    expected = r"^unknown key\(s\): stepz .*; sides\[1\].nme \(known in sides\[1\]: name, optim\)$"
    with pytest.raises(ConfigError, match=expected):
        from_dict(Pairing, {"sides": [{"lr": 1}, {"nme": "b"}], "stepz": 2})


def test_optional_accepts_none_and_value():
    assert from_dict(Run, {"init_mean": None}).init_mean is None
    assert from_dict(Run, {"init_mean": [1, 0.5]}).init_mean == [1.0, 0.5]


def test_yaml_file_with_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("steps: 200\noptim:\n  lr: 5e-7\n")
    cfg = load_config(Run, path, ["optim.lr=2e-4", "method=ba-dpo", "tags.note=hello"])
    assert cfg.steps == 200
    assert cfg.optim.lr == 2e-4  # plain YAML 1.1 would read "2e-4" as a string
    assert cfg.method == "ba-dpo"
    assert cfg.tags == {"note": "hello"}


def test_override_errors():
    with pytest.raises(ConfigError, match="not of the form key=value"):
        apply_overrides({}, ["steps"])
    with pytest.raises(ConfigError, match="'steps' is not a section"):
        apply_overrides({"steps": 3}, ["steps.x=1"])


def test_to_dict_round_trip():
    cfg = Run(seeds=(1,), optim=Optim(lr=0.5))
    assert from_dict(Run, to_dict(cfg)) == cfg


def test_exponent_without_dot_is_a_float(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("optim:\n  lr: 5e-7\n")
    assert load_config(Run, path).optim.lr == 5e-7


def test_extends_merges_sections_and_replaces_lists(tmp_path):
    (tmp_path / "base.yaml").write_text("steps: 5\nseeds: [1, 2, 3]\noptim: {lr: 1.0e-4, warmup_ratio: 0.2}\n")
    (tmp_path / "variant.yaml").write_text("extends: base.yaml\nseeds: [7]\noptim: {lr: 5.0e-5}\n")
    run = load_config(Run, tmp_path / "variant.yaml", ["steps=9"])
    assert run.seeds == (7,)  # a list replaces the base's list
    assert run.optim == Optim(lr=5e-5, warmup_ratio=0.2)  # a section merges key by key
    assert run.steps == 9  # the command line still wins


def test_extends_errors_name_the_file(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(ConfigError, match=r"b\.yaml: extends 'a\.yaml' makes a cycle"):
        load_config(Run, tmp_path / "a.yaml")
    (tmp_path / "c.yaml").write_text("extends: missing.yaml\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: extends 'missing\.yaml': no such file"):
        load_config(Run, tmp_path / "c.yaml")
    (tmp_path / "d.yaml").write_text("extends: [x]\n")
    with pytest.raises(ConfigError, match=r"d\.yaml: extends must be the path"):
        load_config(Run, tmp_path / "d.yaml")
