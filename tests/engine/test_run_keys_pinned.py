"""The settings a run is keyed by stay as they were: the resolved settings of every stage config
under configs/, the keys the planner gives every experiment under configs/, and the key of every
committed run record under results/ that today's settings read.

``duplicates`` (train and rm), ``fsdp`` (train), ``bias.level`` (train and rm), ``model.compile``
(and its default, false, then null: on a CUDA GPU), ``model.selective_checkpointing`` and
``runtime.length_groups`` (every stage), ``ties``, ``strength``, ``reliability``, the A/B form's ``columns``
(issue 72) and ``columns.weight`` (issue 73) came after: each
changed the plain digests (DEFAULTS, READ and the first of each RESOLVED pair) and no identity or
key, as they are keyed only when set
(:data:`badpo.run_folder.identity.KEYED_WHEN_SET`). So did ``bias.variant`` and
``bias.shuffled_ids`` (issue 71: a method is a loss, the variant a setting; the stage configs now
say ``method: dpo`` with ``bias.variant: shared_mean``, rm's ``variant`` moved under ``bias``):
the identity folds them back into the arm's one name (:func:`badpo.run_folder.identity.folded_arm`).
The three large-model train configs then left ``bias.init: zero`` (the paper's) for the library
default (issue 75 item 2), which changed their identities on purpose.

The digests were taken before the three stage configs got their common base
(:class:`badpo.engine.settings.RunConfig`) and the run folder its one lifecycle
(:mod:`badpo.engine.lifecycle`); a change to a key's name, default or meaning shows here first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from badpo.core.config import ConfigError, dump_yaml, load_config, to_dict
from badpo.engine.settings import RMConfig, SFTConfig, TrainConfig
from badpo.experiment import records
from badpo.experiment.backend import engine_backend
from badpo.experiment.config import ExperimentConfig
from badpo.experiment.runner import plan_unbuilt
from badpo.run_folder.identity import identity

ROOT = Path(__file__).resolve().parents[2]
STAGE_CLASSES = {"train": TrainConfig, "sft": SFTConfig, "rm": RMConfig}


def _digest(value) -> str:
    return hashlib.sha256(records.canonical_json(value).encode("ascii")).hexdigest()[:16]


# to_dict of each class's defaults, and of each stage config as read from its file
DEFAULTS = {"TrainConfig": "773b1519c84b8c6a", "SFTConfig": "c5591f009386d824", "RMConfig": "1e55661a71b9048a"}
READ = {
    "rm_qwen2.5-0.5b.yaml": "ba7338ae1a9186e6", "rm_tiny.yaml": "d558ac86975bce52",
    "rm_tiny_quality.yaml": "05bb6bae49569bd8", "sft_llama3.1-8b.yaml": "5c24b499263d5895",
    "sft_mistral-7b.yaml": "e25554af84e5a511", "sft_qwen2.5-0.5b.yaml": "1dd6d94f5dd6fb41",
    "sft_tiny.yaml": "1c4ecb99de4d6868", "train_llama3.1-8b.yaml": "432a53dcbe6a2db4",
    "train_mistral-7b.yaml": "e3fc23030bca6a50", "train_qwen2.5-0.5b.yaml": "166a8b40a69fd360",
    "train_tiny.yaml": "6c1fac1a60b335a8",
}
# (to_dict, identity) of each as the stage resolves it before it trains: the learning rate and output_dir filled in
RESOLVED = {
    "rm_qwen2.5-0.5b.yaml": ["2875a99f36a936ac", "77039b1f1ca15e0f"],
    "rm_tiny.yaml": ["0dd57b445426ba47", "6fbd35e74fc6de2a"],
    "rm_tiny_quality.yaml": ["e1d95add38246892", "0df448983168e9b6"],
    "sft_llama3.1-8b.yaml": ["5c24b499263d5895", "9f48496650671115"],
    "sft_mistral-7b.yaml": ["e25554af84e5a511", "a7f9b5d3e6fe411d"],
    "sft_qwen2.5-0.5b.yaml": ["1dd6d94f5dd6fb41", "ab0205fd6408ef4a"],
    "sft_tiny.yaml": ["1c4ecb99de4d6868", "d280c56ded13a6db"],
    "train_llama3.1-8b.yaml": ["7abe2563157d7000", "9f2fb10c372c6b6c"],
    "train_mistral-7b.yaml": ["2d33e6518465c4c5", "77a865709b2f0fd9"],
    "train_qwen2.5-0.5b.yaml": ["6a208cf406fa2232", "2b9737082c5b0ce2"],
    "train_tiny.yaml": ["286b45eee49e5210", "98f8e201625bb429"],
    "TrainConfig": ["b2a90a2c56dbdfb8", "fd03276b742a4eb2"],
    "SFTConfig": ["359042e7f0b00ac0", "8c44f2a1d13bb3b2"],
    "RMConfig": ["3008c72de1367392", "76ef45b2628e9add"],
}
# sha256 of the space-joined keys (the reference, then every run) of each experiment's plan
PLANS = {
    "experiment_abl_multipref.yaml": "24007ed65f60e86d",
    "experiment_abl_multipref_seed42.yaml": "ce8e738cf3040cd7",
    "experiment_abl_names_v3.yaml": "400f092a4a2dc909",
    "experiment_abl_names_v3_seed42.yaml": "1b8c18e91d6c46d5",
    "experiment_attributes.yaml": "537f48b9e11beec8", "experiment_formatting.yaml": "b8a82b489d61cea3",
    "experiment_formatting_llama3.1-8b.yaml": "6cd1425cc5e4861d", "experiment_lora.yaml": "97ed3fa741187a2f",
    "experiment_mistral_multipref.yaml": "ebc379c7f477daa7",
    "experiment_mistral_names_v3.yaml": "351922e06b13ba49", "experiment_multipref.yaml": "d460160ca4cb8df7",
    "experiment_multipref_llama3.1-8b.yaml": "8035ed89572c0d6b",
    "experiment_names_samples.yaml": "d634d3d81089e43d", "experiment_names_v3.yaml": "fd76b79f39e282f8",
    "experiment_names_v3_llama3.1-8b.yaml": "0ba2b67fed61bcc3",
    "experiment_smol_abl_multipref.yaml": "9fdbb9ab47431f0f",
    "experiment_smol_abl_names_v3.yaml": "4c9f5605f74f27b9",
    "experiment_smol_calibration.yaml": "d40da7cc88fcb45f", "experiment_smol_lora.yaml": "259a3002242921e1",
    "experiment_smol_multipref.yaml": "b7c98101d420003c",
    "experiment_smol_multipref_oracle.yaml": "9b2f99c97cf1839a", "experiment_smol_names.yaml": "ccf991c61f6c4d1c",
    "experiment_smol_names_ba.yaml": "96e8893cf550febb",
    "experiment_smol_names_lr1e-4.yaml": "64222b472a707179",
    "experiment_smol_names_warm.yaml": "2a7cb8eb47a60352",
    "experiment_tiny_abl_multipref.yaml": "4df93a75f1dcd24d",
    "experiment_tiny_abl_names_v3.yaml": "6d7e015d3aea06f2",
    "experiment_tiny_attributes.yaml": "420b283132918d9a", "experiment_tiny_ba_ipo.yaml": "097120c5952dedc9",
    "experiment_tiny_em_policies.yaml": "55d747400124ac20",
    "experiment_tiny_formatting.yaml": "d134fa55db45fcc9", "experiment_tiny_lora.yaml": "d1b0a945213a3cd9",
    "experiment_tiny_multipref.yaml": "3f797079d2faf6e8",
    "experiment_tiny_multipref_init.yaml": "747caffa8a789e58",
    "experiment_tiny_names_samples.yaml": "278095b5e6705f96",
    "experiment_tiny_names_v3.yaml": "044d3e92cebb3007", "experiment_tiny_null_world.yaml": "718991d10e811c22",
    "experiment_tiny_own_data.yaml": "7078642e8d3a7d54", "experiment_tiny_trusted.yaml": "fbee1c68ba491fdc",
    "experiment_tiny_trusted_oracle.yaml": "ef8e055b7d3dd130",
    "experiment_tiny_trusted_seeds.yaml": "76719909a56afa18",
}
# the records under results/ before wave 4's second session whose settings today's resolver reads
# (the others name bias.warm_start)
RECORDS_KEYED = 32


def _stage_configs() -> list[Path]:
    return sorted(p for p in (ROOT / "configs").glob("*.yaml") if p.name.split("_")[0] in STAGE_CLASSES)


def _resolved(config):
    """The config as the stage trains with it and its folder records it."""
    return config.resolved()


def test_the_defaults_of_each_stage_config_are_as_pinned():
    assert {cls.__name__: _digest(to_dict(cls())) for cls in STAGE_CLASSES.values()} == DEFAULTS


def test_every_stage_config_reads_and_resolves_as_pinned():
    read, resolved = {}, {}
    for path in _stage_configs():
        config = load_config(STAGE_CLASSES[path.name.split("_")[0]], path)
        read[path.name] = _digest(to_dict(config))
        resolved[path.name] = [_digest(to_dict(_resolved(config))), _digest(identity(_resolved(config)))]
    for cls in STAGE_CLASSES.values():
        resolved[cls.__name__] = [_digest(to_dict(_resolved(cls()))), _digest(identity(_resolved(cls())))]
    assert read == READ
    assert resolved == RESOLVED


def test_every_experiment_plans_the_pinned_keys(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(records, "device_class", lambda: "cpu")  # the pins are CPU-class keys, on any machine
    backend = engine_backend()
    found = {}
    for path in sorted([*(ROOT / "experiments" / "configs").glob("experiment_*.yaml"),
                        *(ROOT / "configs").glob("experiment_*.yaml")]):
        if path.name not in PLANS:  # a cure's config, not a table of arms
            continue
        config = load_config(ExperimentConfig, path)
        plan, _ = plan_unbuilt(dataclasses.replace(config, output_dir=str(tmp_path / path.stem)), backend)
        keys = " ".join([plan.reference.key, *(run.key for run in plan.runs)])
        found[path.name] = hashlib.sha256(keys.encode()).hexdigest()[:16]
    assert found == PLANS


def _recomputed_key(record: dict, folder: Path) -> str:
    """The key the planner gives the run a record logged: its settings resolved again, with the
    corpus, reference and readout settings it was keyed by."""
    backend = engine_backend()
    resolve = backend.resolve_arm if record["kind"] == "arm" else backend.resolve_reference
    settings = resolve(record["settings"])
    keyed = {"settings": records.keyed_settings(settings), "corpus": record["corpus"]}
    if record["kind"] == "arm":
        keyed["reference"] = json.loads((folder / f"{record['reference']}.json").read_text())["training_key"]
    keyed["evaluation"] = record["evaluation"]
    name = record["method"] if record["kind"] == "arm" else "reference"
    return records.run_key(name, keyed, record["seed"], device=record["provenance"]["device"]["kind"])


def test_the_committed_run_records_keep_their_keys():
    checked, older, kinds = 0, [], set()
    for path in sorted((ROOT / "results").glob("**/runs/*.json")):
        record = json.loads(path.read_text())
        kinds.add(record["kind"])
        if record["kind"] not in ("arm", "reference"):  # a cure's records (source, cure): keyed by the cure
            continue
        try:
            key = _recomputed_key(record, path.parent)
        except ConfigError as error:
            older.append(str(error))
            continue
        assert key == record["key"], path
        checked += 1
    assert checked >= RECORDS_KEYED  # records committed later are checked too, never fewer than pinned
    assert kinds <= {"arm", "reference", "source", "cure"}, kinds  # a new kind is checked, not skipped
    assert all("bias.warm_start: no longer a key" in why for why in older)


@pytest.mark.parametrize("path", _stage_configs(), ids=lambda path: path.name)
def test_config_yaml_reads_back_as_the_config_it_records(path, tmp_path):
    """What a run folder's config.yaml records reads back to the same config: a resumed run is the same run."""
    resolved = _resolved(load_config(STAGE_CLASSES[path.name.split("_")[0]], path))
    dump_yaml(resolved, tmp_path / "config.yaml")
    assert load_config(type(resolved), tmp_path / "config.yaml") == resolved
