"""EM-DPO's type policies under ``method_params.policies``: under ``continue`` each part of a type
starts where the previous part of that type ended (weights and AdamW moments, its own schedule);
under ``restart`` every part starts from the reference with a fresh optimizer, as before. Either
way a stopped arm resumes to the uninterrupted one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import badpo.engine.loop as loop_module
from badpo.engine.mixture import arm_parts
from badpo.engine.train import train
from badpo.methods import EMParams
from fixtures.engine import judgment_rows, log_records, make_config, write_jsonl

PARTS = ["em/round-0/type-0", "em/round-0/type-1", "em/round-1/type-0", "em/round-1/type-1",
         "types/type-0", "types/type-1"]
COSINE = "optim={lr: 1.0e-3, warmup_ratio: 0.0, schedule: cosine}"  # each part's lr falls over its steps


def _arm(mode: str) -> tuple[str, ...]:
    return ("method=em_dpo", f"method_params={{types: 2, rounds: 2, round_steps: 3, policies: {mode}}}",
            "steps=3", COSINE)


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("em_policies")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    return root


def _trainable(run) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in run.policy.named_parameters() if p.requires_grad}


def _moments(run) -> dict[int, dict[str, torch.Tensor]]:
    return {i: {k: v.clone() for k, v in state.items()} for i, state in run.optimizer.state_dict()["state"].items()}


@pytest.fixture(scope="module")
def watched(world) -> dict[str, tuple[Path, dict, dict]]:
    """Each mode's arm, trained once, with each part's weights and AdamW state before its first
    step and after its last, by the part's folder relative to the arm."""
    real, found = loop_module.train_step, {}
    for mode in ("continue", "restart"):
        name, starts, ends = f"em-whole-{mode}", {}, {}

        def watching(run, step, name=name, starts=starts, ends=ends):
            part = Path(run.config.output_dir).relative_to(world / name).as_posix()
            if step == 0:
                starts[part] = (_trainable(run), _moments(run))
            result = real(run, step)
            ends[part] = (_trainable(run), _moments(run))
            return result

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(loop_module, "train_step", watching)
            found[mode] = (train(make_config(world, name, *_arm(mode))), starts, ends)
    return found


def _equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)


def _same_moments(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(_equal(a[i], b[i]) for i in a)


def test_arm_parts_name_the_part_each_one_starts_from():
    parts = {p.folder: p for p in arm_parts(EMParams(2, 2, 3), 5)}
    assert [p.start.folder if p.start else None for p in parts.values()] == [
        None, None, "em/round-0/type-0", "em/round-0/type-1", "em/round-1/type-0", "em/round-1/type-1"]
    assert [p.handoff for p in parts.values()] == [True, True, True, True, False, False]
    restart = arm_parts(EMParams(2, 2, 3, policies="restart"), 5)
    assert all(p.start is None and not p.handoff for p in restart)
    assert [(p.folder, p.offset) for p in restart] == [(p.folder, p.offset) for p in parts.values()]


def test_continue_starts_each_part_where_its_type_left_off(watched):
    out, starts, ends = watched["continue"]
    assert sorted(starts) == sorted(PARTS)
    reference, fresh = starts["em/round-0/type-0"]
    assert fresh == {} and _equal(starts["em/round-0/type-1"][0], reference)  # round 0: the reference
    for part, previous in (("em/round-1/type-0", "em/round-0/type-0"), ("em/round-1/type-1", "em/round-0/type-1"),
                           ("types/type-0", "em/round-1/type-0"), ("types/type-1", "em/round-1/type-1")):
        weights, moments = starts[part]
        assert _equal(weights, ends[previous][0]), part  # the previous part's last weights ...
        assert not _equal(weights, reference), part  # ... not the reference's
        assert _same_moments(moments, ends[previous][1]), part  # and its AdamW moments and step counts
        assert all(float(state["step"]) == 3 * (1 + (part.startswith("types"))) for state in moments.values())
    for part in PARTS:  # every part runs its own schedule: cosine from the full lr over its 3 steps
        assert [r["lr"] for r in log_records(out / part)] == [r["lr"] for r in log_records(out / PARTS[0])]
    assert not list(out.rglob("checkpoints"))  # the handed-on states are dropped once used
    estep = json.loads((out / "em" / "round-0" / "estep.json").read_text())
    assert estep["policies"] == "continue" and json.loads((out / "run.json").read_text())["policies"] == "continue"


def test_restart_starts_every_part_from_the_reference(watched):
    out, starts, ends = watched["restart"]
    reference = starts["em/round-0/type-0"][0]
    assert sorted(starts) == sorted(PARTS)
    for part in PARTS:
        weights, moments = starts[part]
        assert _equal(weights, reference) and moments == {}, part
        assert not _equal(ends[part][0], reference), part  # each part did train
    assert json.loads((out / "em" / "round-0" / "estep.json").read_text())["policies"] == "restart"
    continued = watched["continue"][0]  # the modes share round 0 and part from round 1 on
    for k in range(2):
        round_0 = [r["loss"] for r in log_records(out / f"em/round-0/type-{k}")]
        assert round_0 == [r["loss"] for r in log_records(continued / f"em/round-0/type-{k}")]
        assert log_records(out / f"em/round-1/type-{k}")[0]["loss"] != \
               log_records(continued / f"em/round-1/type-{k}")[0]["loss"]


def _same_result(a: Path, b: Path) -> None:
    assert json.loads((a / "mixture.json").read_text()) == json.loads((b / "mixture.json").read_text())
    for part in PARTS:
        assert [(r["loss"], r["grad_norm"]) for r in log_records(a / part)] == \
               [(r["loss"], r["grad_norm"]) for r in log_records(b / part)], part
    for k in range(2):
        policy = Path("types", f"type-{k}", "policy", "model.safetensors")
        wa, wb = load_file(a / policy), load_file(b / policy)
        assert all(torch.equal(wa[n], wb[n]) for n in wa)


@pytest.mark.parametrize("mode, stops", [("continue", (6, 12, 14)), ("restart", (7, 14))])
def test_a_stopped_arm_resumes_to_the_uninterrupted_one(world, watched, mode, stops):
    """Stopped at a round's end (its state handed on), between the rounds and the final phase,
    and inside a final part; each time resumed, then compared with the arm run at once."""
    whole = watched[mode][0]
    name = f"em-stopped-{mode}"
    for stop in stops:
        train(make_config(world, name, *_arm(mode), f"stop_after_steps={stop}",
                          *(("resume_from=latest",) if (world / name).exists() else ())))
        assert not (world / name / "run.json").exists()
        if mode == "continue" and stop == 12:  # the last round's states wait for the final phase
            for k in range(2):
                kept = world / name / "em" / "round-1" / f"type-{k}" / "checkpoints"
                assert [p.name for p in kept.iterdir()] == ["step-000003"]
            assert not (world / name / "em" / "round-0" / "type-0" / "checkpoints").exists()
    _same_result(whole, train(make_config(world, name, *_arm(mode), "resume_from=latest")))


def test_an_e_step_of_restarted_policies_is_not_continued(world):
    """An E-step written before ``policies`` existed (no such field) was of restarted policies."""
    name = "em-mixed"
    train(make_config(world, name, *_arm("continue"), "stop_after_steps=6"))
    path = world / name / "em" / "round-0" / "estep.json"
    estep = json.loads(path.read_text())
    del estep["policies"]
    path.write_text(json.dumps(estep))
    with pytest.raises(RuntimeError, match="an E-step of policies that restart"):
        train(make_config(world, name, *_arm("continue"), "resume_from=latest"))


def test_every_process_runs_as_many_margin_forwards_as_the_largest_share():
    """policy_margins under a sharded model: 11 rows over 2 processes in batches of 5 are shares
    of 6 and 5 rows, 2 forwards and 1; the second pads with None to 2. Over 1-4 processes every
    process runs the largest share's count, and the real batches cover every row exactly once
    (unequal shards cannot hang)."""
    from badpo.engine.mixture import equal_forwards

    rows = torch.arange(100, 111)
    assert [len(b) if b is not None else None for b in equal_forwards(rows, 1, 2, 5)] == [5, None]
    for processes in (1, 2, 3, 4):
        plans = [equal_forwards(rows, p, processes, 5) for p in range(processes)]
        assert len({len(plan) for plan in plans}) == 1
        covered = torch.cat([b for plan in plans for b in plan if b is not None])
        assert sorted(covered.tolist()) == rows.tolist()
