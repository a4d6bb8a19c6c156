"""theta's options, checked once, in words of the front door that called.

``badpo train`` and ``badpo rm`` read ``bias.level``, ``bias.init``, ``bias.lr`` and
``micro_batch_size``; :class:`badpo.integrations.trl.BADPOTrainer` reads ``bias_level``,
``theta_init``, ``theta_lr`` and ``args.per_device_train_batch_size``. Each check below takes the
:class:`Front` of its caller, so a refusal names the option the user set, and no message is
another's rewritten.
"""

from __future__ import annotations

from dataclasses import dataclass

from badpo.core.config import ConfigError
from badpo.core.constraints import FLOAT32_STEP

__all__ = ["DECIDING_DEFAULTS", "ENGINE", "INIT_RULES", "LEVEL_NAMES", "LEVEL_RULES", "THETA_LR", "TRL", "Front",
           "LevelRule", "check_graded", "check_init", "check_level", "check_level_has_theta", "check_lr",
           "check_orthogonal", "departures"]

# Where theta starts (the rows: theta/start.py); named here so that a front door can check an
# option before the rows' modules load.
INIT_RULES = ("conditional", "reference", "offline", "zero")

# theta's learning rate, under either front door's name: its Adam steps in float32, so inf or 1e39
# trained theta and then every weight to NaN while the logged loss read 0 (issue 76's re-trial)
THETA_LR = FLOAT32_STEP


@dataclass(frozen=True)
class LevelRule:
    """What a ``bias.level`` does after theta's start. ``tilt``: the policy's lean along the
    attributes moves into theta's level after every step, read alone (``"lean"``) or at fixed
    labelled quality (``"lean_given_quality"``); None: theta's Adam sets the level. ``orthogonal``:
    the policy's step is kept orthogonal to the declared attributes (theta's Adam kept)."""

    tilt: str | None = None
    orthogonal: bool = False

    @property
    def reads_last_margins(self) -> bool:
        """It keeps every judgment's last margin (which BADPOTrainer does not) and solves for the
        level on plain wins (so not on ties or strengths): the tilt rules do both; a rule that did
        one only would split this into two facts."""
        return self.tilt is not None


# bias.level -> its rule (docs/theta.md, "What theta does after the start"); theta/level.py runs them
LEVEL_RULES = {"adam": LevelRule(), "tilt": LevelRule(tilt="lean"),
               "tilt_given_quality": LevelRule(tilt="lean_given_quality"), "orthogonal": LevelRule(orthogonal=True)}
LEVEL_NAMES = tuple(LEVEL_RULES)


@dataclass(frozen=True)
class Front:
    """The names a front door gives theta's options (``keeps_margins``: it keeps every judgment's
    last margin, which the tilt rules read)."""

    level: str
    init: str
    lr: str
    micro_batch: str
    trusted: str
    keeps_margins: bool = True


ENGINE = Front(level="bias.level", init="bias.init", lr="bias.lr", micro_batch="micro_batch_size",
               trusted="bias.trusted")
TRL = Front(level="bias_level", init="theta_init", lr="theta_lr", micro_batch="args.per_device_train_batch_size",
            trusted="the channel's trusted annotators", keeps_margins=False)


# theta's settings whose value decides a run's result: a run that departs from the library's default
# says so in one line (what the default does instead: docs/theta.md, "Where theta starts")
DECIDING_DEFAULTS = {"init": ("reference", "the fit of the labels at the reference"),
                     "level": ("adam", "theta's own Adam after the start")}


def departures(settings, front: Front = ENGINE) -> list[str]:
    """One line per deciding setting of ``settings`` (a ``BiasSettings``) away from its default."""
    lines = []
    for key, (default, meaning) in DECIDING_DEFAULTS.items():
        value = getattr(settings, key)
        if value != default:
            option = front.init if key == "init" else front.level
            lines.append(f"{option}: {value} departs from the library's default {default} ({meaning})")
    return lines


def check_lr(lr: float, front: Front) -> None:
    """:data:`THETA_LR`, named as ``front`` names it (the engine's config declares it beside ``bias.lr``)."""
    THETA_LR.check(lr, front.lr)


def check_init(init: str, front: Front, allowed: tuple[str, ...] = INIT_RULES) -> None:
    if init not in allowed:
        raise ConfigError(f"{front.init}: one of {list(allowed)}, got {init!r}")


def check_level(level: str, front: Front) -> None:
    """A known rule, and one that this front door can run."""
    if level not in LEVEL_NAMES:
        raise ConfigError(f"{front.level}: one of {list(LEVEL_NAMES)}, got {level!r}")
    if LEVEL_RULES[level].reads_last_margins and not front.keeps_margins:
        raise ConfigError(f"{front.level}: {level} moves theta after every step from every judgment's last "
                          "margin, which this trainer does not keep; train it with badpo train")


def check_level_has_theta(level: str, learns_theta: bool, owner: str, front: Front = ENGINE) -> None:
    """A rule for theta other than adam on an arm that learns none is refused: projecting or
    anchoring a step with no theta to take the attributes' share would change the method, not
    leave it as it is. ``owner`` names the arm: "method 'dpo'", "variant 'none'"."""
    if not learns_theta and level != "adam":
        raise ConfigError(f"{front.level}: {level} needs a theta to take the attributes' share, and {owner} "
                          f"learns none; leave {front.level} at adam")


def check_graded(link: str, level: str, trusted: bool, owner: str, front: Front = ENGINE) -> None:
    """What ties and strengths in the objective (an ordered logit on the loss's logit) cannot be
    combined with yet, refused in one line: a squared link (IPO's loss has no likelihood to grade),
    the tilt rules and the trusted level step (both solve for theta's level on plain wins)."""
    hint = "or drop them (ties: drop, strength: ignore)"
    if link != "logistic":
        raise ConfigError(f"{owner}'s loss is not a log-likelihood of a logit, so the data's ties and strengths "
                          f"cannot enter it; choose a method of the DPO family, {hint}")
    if LEVEL_RULES[level].reads_last_margins:
        raise ConfigError(f"{front.level}: {level} solves for theta's level on plain wins, and the data holds "
                          f"ties or strengths; leave {front.level} at adam or orthogonal, {hint}")
    if trusted:
        raise ConfigError(f"{front.trusted}: the trusted level step solves on plain wins, and the data holds ties "
                          f"or strengths; leave out the trusted annotators, {hint}")


def check_orthogonal(trusted: bool, method, micro_batch: int, declared: int | None, front: Front = ENGINE) -> None:
    """What the orthogonal rule cannot do, refused before anything loads and again when the data
    has given every count: ``method``, the Method row (None: the reward model, which reads no
    per-token ratios); ``declared`` is None where the count is not known yet."""
    rule = f"{front.level}: orthogonal"
    if trusted:
        raise ConfigError(f"{rule} keeps the policy's lean at the reference's, and trusted annotators "
                          f"({front.trusted}) anchor it on their own judgments: choose one")
    if method is not None and method.needs.token_logratios:
        raise ConfigError(f"{rule} projects the summed log-probs; {method.description} also reads per-token "
                          "ratios, which the projection does not reach")
    if declared is not None and micro_batch <= declared:  # d independent directions span d items
        raise ConfigError(f"{rule} takes the micro-batch's {declared} declared attribute direction(s) out of "
                          f"the policy's step, which leaves nothing of {micro_batch} item(s) whose differences "
                          f"are independent: raise {front.micro_batch} above {declared}")
