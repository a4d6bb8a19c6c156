"""The per-step log of a run: ``log.jsonl``, a tqdm bar, and tensorboard / wandb when asked.

Only the main process writes. On resume the log is cut back to the checkpoint's step, so that
steps replayed after a crash are not listed twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from badpo.engine.config import ReportConfig
from badpo.jsonio import dumps


def _flat(record: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """{"theta_bar": {"x": 1}} -> {"theta_bar/x": 1}: scalars for tensorboard and wandb."""
    out: dict[str, float] = {}
    for key, value in record.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[f"{prefix}{key}"] = value
    return out


class RunLog:
    """Append step records; ``close()`` flushes the sinks."""

    def __init__(self, output_dir: Path, report: ReportConfig, total_steps: int, start_step: int,
                 is_main: bool, run_config: dict[str, Any], description: str) -> None:
        self.report, self.total_steps, self.is_main = report, total_steps, is_main
        self.tensorboard = self.wandb = self.bar = self.file = None
        if not is_main:
            return
        path = output_dir / "log.jsonl"
        kept = []
        if start_step > 0 and path.exists():
            kept = [line for line in path.read_text().splitlines()
                    if line.strip() and json.loads(line)["step"] <= start_step]
        path.write_text("".join(line + "\n" for line in kept))
        self.file = open(path, "a", encoding="utf-8")
        if "tensorboard" in report.report_to:
            from torch.utils.tensorboard import SummaryWriter

            self.tensorboard = SummaryWriter(str(output_dir / "tensorboard"))
        if "wandb" in report.report_to:
            import wandb

            self.wandb = wandb.init(project=report.wandb_project, config=run_config,
                                    dir=str(output_dir), name=output_dir.name)
        if report.progress_bar:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total_steps, initial=start_step, desc=description, dynamic_ncols=True)

    def wants(self, step: int) -> bool:
        """Whether step ``step`` (1-based) is logged: every ``log_every`` and the last one."""
        return step % self.report.log_every == 0 or step == self.total_steps

    def log(self, step: int, record: dict[str, Any]) -> None:
        if not self.is_main:
            return
        record = {"step": step, **record}
        self.file.write(dumps(record) + "\n")
        self.file.flush()
        scalars = _flat(record)
        if self.tensorboard is not None:
            for key, value in scalars.items():
                self.tensorboard.add_scalar(key, value, step)
        if self.wandb is not None:
            self.wandb.log(scalars, step=step)
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{record.get('loss', float('nan')):.4f}", refresh=False)

    def advance(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        for sink in (self.file, self.tensorboard, self.bar):
            if sink is not None:
                sink.close()
        if self.wandb is not None:
            self.wandb.finish()
