"""The record a TRL folder carries (badpo_run.json): one spec may declare several attribute names."""

import pytest

from badpo.engine.tokenize import TokenizationConfig
from badpo.run_folder.external import ExternalRun, read_external_run, write_external_run

WM = "wm=regex:--- (Brad|Greg) "


def record(attributes, names) -> ExternalRun:
    return ExternalRun(format="badpo.external-run/1", trainer="test", method="ba_dpo_shared_mean",
                       variant="shared_mean", attribute_names=names, attributes=attributes,
                       annotators=["a", "b"], reference="gpt2", beta=0.1, tokenization=TokenizationConfig())


def test_names_declares_two_coordinates_beside_a_regex(tmp_path):
    names = ["woman_coded", "black_coded", "wm"]
    write_external_run(tmp_path, record(["names", WM], names))
    assert read_external_run(tmp_path).attribute_names == names


@pytest.mark.parametrize("attributes, names, message", [
    (["names", WM], ["woman_coded", "wm"], r"declare \['woman_coded', 'black_coded', 'wm'\], not attribute_names"),
    ([WM, "names"], ["woman_coded", "black_coded", "wm"], "not attribute_names"),      # order matters
    (["nonsense-spec"], ["x"], r"badpo_run.json: attributes: .*nonsense-spec"),
])
def test_specs_that_do_not_declare_the_names_are_one_error(tmp_path, attributes, names, message):
    write_external_run(tmp_path, record(attributes, names))
    with pytest.raises(ValueError, match=message):
        read_external_run(tmp_path)


def test_a_callable_spec_is_not_imported_to_check_it(tmp_path):
    write_external_run(tmp_path, record(["no_such_module_xyz:g"], ["g"]))
    assert read_external_run(tmp_path).attributes == ["no_such_module_xyz:g"]


def test_the_level_rule_is_read_back_and_an_unknown_one_is_one_error(tmp_path):
    """A record written before bias_level existed reads as adam; orthogonal reads back; a rule the
    trainer does not run (tilt) or no rule at all names the file."""
    import dataclasses
    import json

    write_external_run(tmp_path, record(["names"], ["woman_coded", "black_coded"]))
    path = tmp_path / "badpo_run.json"
    older = json.loads(path.read_text())
    del older["bias_level"]
    path.write_text(json.dumps(older))
    assert read_external_run(tmp_path).bias_level == "adam"
    write_external_run(tmp_path, dataclasses.replace(record(["names"], ["woman_coded", "black_coded"]),
                                                     bias_level="orthogonal"))
    assert read_external_run(tmp_path).bias_level == "orthogonal"
    for level in ("tilt", "sideways"):
        write_external_run(tmp_path, dataclasses.replace(record(["names"], ["woman_coded", "black_coded"]),
                                                         bias_level=level))
        with pytest.raises(ValueError, match=f"badpo_run.json: bias_level must be one of .*got '{level}'"):
            read_external_run(tmp_path)
