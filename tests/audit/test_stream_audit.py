"""``badpo audit --stream``: the mixture confidence sequence by hand, its false-flag rate under the
null by simulation (beside a naive repeated test that fails it), detection of a planted outlier,
the pool's bookkeeping, resuming from the state file, and the one-line errors."""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import numpy as np
import pytest

from badpo.auditing.sequential import interval, log_mixture, separated, side_level
from badpo.auditing.stream import StreamAudit
from badpo.auditing.stream_file import follow_stream, run_stream
from badpo.cli import main


# ------------------------------------------------------------------------------ by hand
def test_mixture_martingale_and_interval_by_hand():
    """With the Beta(1/2, 1/2) mixture the predictive chance of a win after w wins in n is
    (w + 1/2) / (n + 1), so three wins in three have mixture probability 1/2 * 3/4 * 5/6 = 5/16 and
    M_3(1/2) = (5/16) / (1/2)^3 = 2.5; one win: M_1(1/2) = 1. M_3(p) = (5/16) / p^3 reaches 1/0.05 = 20
    at p^3 = 1/64: the 95% sequence after three wins is (1/4, 1]. One win and one loss: B(3/2, 3/2)
    / B(1/2, 1/2) = 1/8, M_2(p) = 1 / (8 p (1 - p)), whose level-0.05 ends solve p (1 - p) = 1/160."""
    assert math.exp(log_mixture(3, 3, 0.5)) == pytest.approx(2.5, rel=1e-12)
    assert math.exp(log_mixture(1, 1, 0.5)) == pytest.approx(1.0, rel=1e-12)
    assert math.exp(log_mixture(0, 0, 0.3)) == pytest.approx(1.0, rel=1e-12)
    assert interval(3, 3, 0.05) == pytest.approx((0.25, 1.0), abs=1e-12)
    root = (1 - math.sqrt(1 - 4 / 160)) / 2
    assert interval(1, 2, 0.05) == pytest.approx((root, 1 - root), abs=1e-12)
    assert interval(0, 0, 0.05) == (0.0, 1.0)
    assert side_level(0.05, 10, 2) == pytest.approx(0.00125)  # alpha / (2 * pool_size * attributes)


def test_separated_agrees_with_the_two_intervals():
    """The one-evaluation test of `separated` says the same as solving for both sequences' ends."""
    level = 0.01
    own = [(w, n) for n in (0, 1, 3, 8, 20, 60) for w in range(0, n + 1, max(1, n // 4))]
    pool = [(w, n) for n in (0, 5, 40, 300) for w in range(0, n + 1, max(1, n // 7))]
    for w, n in own:
        lo, hi = interval(w, n, level)
        wins, total = np.array([p[0] for p in pool]), np.array([p[1] for p in pool])
        got = separated(np.full(len(pool), lo), np.full(len(pool), hi), wins, total, level)
        ends = [interval(pw, pn, level) for pw, pn in pool]
        expected = [hi <= plo + 1e-12 or phi <= lo + 1e-12 for plo, phi in ends]
        assert got.tolist() == expected, (w, n)


def test_the_pool_stream_takes_one_vote_per_pair_leaving_the_annotator_out():
    """Pair P: a wins, b loses, a again (a repeat: skipped), c wins. Pair Q: b wins, then a loses.
    a's pool: Q's first vote (b: win) and P's second (b: loss) -> 1 of 2. b's pool: P's first (a: win)
    and Q's second (a: loss) -> 1 of 2. c's pool: P's first (a: win), Q's first (b: win) -> 2 of 2."""
    audit = StreamAudit(["tag=given:tag"], alpha=0.05, pool_size=3)
    audit.observe(["a", "b", "a", "c", "b", "a"], ["P", "P", "P", "P", "Q", "Q"],
                  np.array([[1.0], [-1.0], [1.0], [1.0], [1.0], [-1.0]]))
    table = {r["annotator"]: r for r in audit.table()["attributes"][0]["annotators"]}
    assert [(table[k]["cross"], table[k]["wins"]) for k in "abc"] == [(2, 1), (2, 1), (1, 1)]
    assert [(table[k]["pool_cross"], table[k]["pool_wins"]) for k in "abc"] == [(2, 1), (2, 1), (2, 2)]
    assert (audit.judgments, audit.cross, audit.duplicates) == (6, 5, 1)
    assert audit.table()["attributes"][0]["pool"] == {"cross": 2, "wins": 2, "estimate": math.log(2.5 / 0.5)}


# --------------------------------------------------------------------------- simulation
def test_one_sequence_covers_at_every_n_where_a_fixed_sample_interval_read_each_time_does_not():
    """400 Bernoulli(0.3) streams of 400 draws: the level-0.2 mixture sequence misses 0.3 at some n
    in at most 0.2 of them (plus three standard errors); the fixed-sample 80% interval (Wald, the
    same coverage at one n) read after every draw misses in most of them."""
    rng = np.random.default_rng(11)
    streams, n, level = 400, 400, 0.2
    wins = np.cumsum(rng.random((streams, n)) < 0.3, axis=1)
    total = np.arange(1, n + 1)
    missed = (log_mixture(wins, total, 0.3) >= -math.log(level)).any(axis=1).mean()
    share = wins / total
    z = NormalDist().inv_cdf(1 - level / 2)
    wald = (np.abs(share - 0.3) > z * np.sqrt(np.maximum(share * (1 - share), 1e-12) / total))[:, 9:]
    assert missed <= level + 3 * math.sqrt(level * (1 - level) / streams)
    assert wald.any(axis=1).mean() > 2 * level, (missed, wald.any(axis=1).mean())


def simulated_stream(rng: np.random.Generator, theta: np.ndarray, pairs: int, judges: int = 3
                     ) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """The tiny world's label model on one attribute: every pair is cross-group, with a quality
    advantage q ~ N(0, 2^2) of the attribute side shared by its ``judges`` distinct judges (drawn
    uniformly), each of whom picks the attribute side with probability sigmoid(theta_k + q).
    Returns (annotator ids, pair keys, differences [N, 1], judge indices)."""
    m = len(theta)
    who = np.array([rng.choice(m, size=judges, replace=False) for _ in range(pairs)]).ravel()
    quality = np.repeat(rng.normal(0.0, 2.0, size=pairs), judges)
    won = rng.random(len(who)) < 1.0 / (1.0 + np.exp(-(theta[who] + quality)))
    keys = np.repeat(np.arange(pairs), judges)
    return [f"k{k}" for k in who], [f"p{p}" for p in keys], np.where(won, 1.0, -1.0)[:, None], who


def naive_repeated_flags(who: np.ndarray, won: np.ndarray, m: int, alpha: float) -> bool:
    """A fixed-sample two-proportion z-test of each annotator against all other votes, at the
    Bonferroni level alpha / m, read after every judgment (once both sides have 5 votes): the test a
    team would run by re-running an offline audit as the file grows."""
    own_n = np.cumsum(np.eye(m)[who], axis=0)
    own_w = np.cumsum(np.eye(m)[who] * won[:, None], axis=0)
    rest_n, rest_w = own_n.sum(1, keepdims=True) - own_n, own_w.sum(1, keepdims=True) - own_w
    with np.errstate(divide="ignore", invalid="ignore"):
        pooled = (own_w + rest_w) / (own_n + rest_n)
        z = (own_w / own_n - rest_w / rest_n) / np.sqrt(pooled * (1 - pooled) * (1 / own_n + 1 / rest_n))
    ready = (own_n >= 5) & (rest_n >= 5)
    return bool(np.any(ready & (np.abs(z) > NormalDist().inv_cdf(1 - alpha / m / 2))))


def test_false_flag_rate_under_the_null_holds_however_often_it_is_read():
    """8 annotators sharing theta = 0.5, 120 streams of 900 judgments, read after every judgment.
    Family level alpha = 0.2 (large, so that a failure shows in 120 streams): the streaming test's
    share of streams with any flag must stay within alpha plus three binomial standard errors,
    while the naive repeated Bonferroni z-test on the same streams exceeds alpha (it is why an
    anytime test is needed)."""
    m, alpha, streams = 8, 0.2, 120
    rng = np.random.default_rng(2024)
    theta = np.full(m, 0.5)
    anytime = naive = 0
    for _ in range(streams):
        annotators, pairs, differences, who = simulated_stream(rng, theta, pairs=300)
        audit = StreamAudit(["tag=given:tag"], alpha=alpha, pool_size=m)
        anytime += bool(audit.observe(annotators, pairs, differences))
        naive += naive_repeated_flags(who, differences[:, 0] > 0, m, alpha)
    margin = 3 * math.sqrt(alpha * (1 - alpha) / streams)
    assert anytime / streams <= alpha + margin
    assert naive / streams > alpha, (naive, anytime)


def test_a_planted_outlier_is_flagged_and_the_rest_mostly_not():
    """The same world with annotator k0 at theta + 2.5: flagged in nearly every one of 20 streams
    of 1,500 judgments (alpha 0.05), the other seven almost never."""
    m = 8
    rng = np.random.default_rng(7)
    theta = np.full(m, 0.5)
    theta[0] += 2.5
    found = others = 0
    for _ in range(20):
        annotators, pairs, differences, _ = simulated_stream(rng, theta, pairs=500)
        audit = StreamAudit(["tag=given:tag"], alpha=0.05, pool_size=m)
        flagged = {f["annotator"] for f in audit.observe(annotators, pairs, differences)}
        found += "k0" in flagged
        others += len(flagged - {"k0"})
    assert found >= 18 and others <= 2, (found, others)


# ------------------------------------------------------------------------ state and files
def pool_rows(n_pairs: int = 400, seed: int = 3) -> list[dict]:
    """JSONL rows of a pool of 6 annotators (class A/B) with 'tag' given; w0 prefers the tagged side
    strongly; a fifth of the pairs are same-group (tag on neither side); some pairs are judged twice
    by one annotator."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_pairs):
        cross = rng.random() < 0.8
        for k in rng.choice(6, size=3):
            theta = 3.0 if k == 0 else 0.2
            tagged_wins = rng.random() < 1 / (1 + math.exp(-theta))
            tag = (float(tagged_wins), float(not tagged_wins)) if cross else (0.0, 0.0)
            rows.append({"prompt": f"q{p}", "chosen": f"answer {p} {'x' if tagged_wins else 'y'}",
                         "rejected": f"answer {p} {'y' if tagged_wins else 'x'}", "annotator": f"w{k}",
                         "annotator_class": "AB"[k % 2], "pair_id": f"pair{p}",
                         "g_chosen": {"tag": tag[0]}, "g_rejected": {"tag": tag[1]}})
    return rows


def write_lines(path, rows, partial: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + partial, encoding="utf-8")


def state_without_path(path) -> dict:
    state = json.loads(path.read_text())
    state["source"].pop("path")
    return state


def test_resume_from_the_state_file_equals_an_uninterrupted_run(tmp_path):
    """The file read whole, beside the same file read in three runs (the first ending inside a line
    still being written, the second after a blank line): the same flags, estimates and state."""
    rows = pool_rows()
    whole, growing = tmp_path / "whole.jsonl", tmp_path / "growing.jsonl"
    write_lines(whole, rows)
    audit, text = run_stream(whole, tmp_path / "whole.state.json", ["tag=given:tag"], 0.05, 6)
    assert "w0" in {f for a in audit.table()["attributes"] for f in
                    (r["annotator"] for r in a["annotators"] if r["flagged"])}
    cut = 517
    write_lines(growing, rows[:cut], partial=json.dumps(rows[cut])[:40])
    first, text = run_stream(growing, tmp_path / "growing.state.json", ["tag=given:tag"], 0.05, 6)
    assert first.judgments == cut and "bytes after the last complete line are left for the next run" in text
    write_lines(growing, rows[:800], partial="\n")
    run_stream(growing, tmp_path / "growing.state.json", ["tag=given:tag"], 0.05, 6)
    write_lines(growing, rows[:800], partial="\n" + "".join(json.dumps(r) + "\n" for r in rows[800:]))
    resumed, text = run_stream(growing, tmp_path / "growing.state.json", ["tag=given:tag"], 0.05, 6)
    assert resumed.table() == audit.table()
    expected = state_without_path(tmp_path / "whole.state.json")
    got = state_without_path(tmp_path / "growing.state.json")
    assert got["judgments"] == expected["judgments"] == len(rows)
    assert got["source"]["lines"] == expected["source"]["lines"] + 1  # the growing file has a blank line more
    got.pop("source"), expected.pop("source")
    assert got == expected


def test_batches_through_the_api_equal_one_batch(tmp_path):
    """update() in uneven batches, saved and loaded between them, gives the state of one update()."""
    rows = pool_rows(200, seed=5)
    one = StreamAudit(["tag=given:tag"], 0.05, 6, stream="team-a")
    one.update(rows)
    state = None
    for start, stop in ((0, 1), (1, 250), (250, 251), (251, len(rows))):
        part = StreamAudit(["tag=given:tag"], 0.05, 6, stream="team-a")
        if state is not None:
            part.load_state(json.loads(json.dumps(state)), "state.json")
        part.update(rows[start:stop])
        state = part.to_state()
    assert state == one.to_state()
    other = StreamAudit(["tag=given:tag"], 0.05, 6, stream="team-b")
    with pytest.raises(ValueError, match=r"state.json: belongs to another configuration \(stream 'team-a' there"):
        other.load_state(state, "state.json")


def test_a_state_of_another_stream_or_config_is_refused_in_one_line(tmp_path, cli_error):
    rows = pool_rows(100)
    data, state = tmp_path / "pool.jsonl", tmp_path / "pool.state.json"
    write_lines(data, rows)
    assert main(["audit", str(data), "--stream", str(state), "-a", "tag=given:tag", "--pool-size", "6"]) == 0
    other = tmp_path / "other.jsonl"
    write_lines(other, pool_rows(100, seed=9))
    line = cli_error(["audit", str(other), "--stream", str(state), "-a", "tag=given:tag", "--pool-size", "6"])
    assert f"{state}: belongs to another stream: the first" in line
    write_lines(other, rows[:10])
    line = cli_error(["audit", str(other), "--stream", str(state), "-a", "tag=given:tag", "--pool-size", "6"])
    assert f"{state}: belongs to another stream" in line and "truncated or replaced" in line
    line = cli_error(["audit", str(data), "--stream", str(state), "-a", "tag=given:tag", "--pool-size", "6",
                      "--alpha", "0.1"])
    assert f"{state}: belongs to another configuration (alpha 0.05 there, 0.1 here)" in line
    line = cli_error(["audit", str(data), "--stream", str(state), "-a", "given:tag", "--pool-size", "6"])
    assert f"{state}: belongs to another configuration (attributes ['tag=given:tag'] there" in line
    state.write_text("{\"format\": \"pickle\"}")
    line = cli_error(["audit", str(data), "--stream", str(state), "-a", "tag=given:tag", "--pool-size", "6"])
    assert f"{state}: not a badpo stream-audit state" in line


def test_a_bad_row_is_one_line_naming_file_line_and_field_and_the_rows_before_it_are_kept(tmp_path, cli_error):
    rows = pool_rows(60)
    bad = dict(rows[40], colour="red")
    data, state = tmp_path / "pool.jsonl", tmp_path / "state.json"
    write_lines(data, rows[:40] + [bad] + rows[41:])
    line = cli_error(["audit", str(data), "--stream", str(state), "-a", "tag=given:tag"])
    assert line.startswith(f"badpo audit: {data} line 41: row 40 (pair_id 'pair13'), field 'colour': unknown field")
    assert json.loads(state.read_text())["judgments"] == 40
    write_lines(data, rows[:40] + [dict(rows[40], g_chosen=None, g_rejected=None)] + rows[41:])
    line = cli_error(["audit", str(data), "--stream", str(state), "-a", "tag=given:tag"])
    assert f"{data} line 41: row 40 (pair_id 'pair13'): attribute 'given:tag'" in line
    write_lines(data, rows[:40] + [dict(rows[40], annotator_class="C")] + rows[41:])
    line = cli_error(["audit", str(data), "--stream", str(state), "-a", "tag=given:tag"])
    assert f"{data} line 41: row 40 (pair_id 'pair13'), field 'annotator_class': annotator" in line
    write_lines(data, rows[:50], partial="{not json\n")
    line = cli_error(["audit", str(data), "--stream", str(state), "-a", "tag=given:tag"])
    assert f"{data} line 51: not valid JSON" in line
    assert json.loads(state.read_text())["judgments"] == 50


def test_stream_cli_prints_flags_writes_json_and_refuses_whole_file_options(tmp_path, capsys, cli_error):
    data, state, out = tmp_path / "pool.jsonl", tmp_path / "state.json", tmp_path / "table.json"
    write_lines(data, pool_rows())
    assert main(["audit", str(data), "--stream", str(state), "-a", "tag=given:tag", "--pool-size", "6",
                 "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "read judgments 1..1200 now" in printed and "new flags this run: 1:" in printed
    assert "flag: w0 on tag at judgment" in printed
    table = json.loads(out.read_text())
    assert [r["annotator"] for r in table["attributes"][0]["annotators"] if r["flagged"]] == ["w0"]
    assert main(["audit", str(data), "--stream", str(state), "-a", "tag=given:tag", "--pool-size", "6"]) == 0
    assert "nothing new after judgment 1200" in capsys.readouterr().out
    line = cli_error(["audit", str(data), "--stream", str(state), "-a", "tag=given:tag", "--report", str(tmp_path)])
    assert "--report apply to the whole-file audit" in line
    line = cli_error(["audit", str(data), "-a", "tag=given:tag", "--alpha", "0.1"])
    assert "apply to --stream STATE" in line


def test_follow_reads_and_says_each_flag(tmp_path):
    """--follow's loop, two reads: the flags of the first, nothing new in the second."""
    data, state = tmp_path / "pool.jsonl", tmp_path / "state.json"
    write_lines(data, pool_rows())
    said: list[str] = []
    audit = follow_stream(data, state, ["tag=given:tag"], 0.05, 6, every=0.01, say=said.append, polls=2)
    assert said[0].startswith(f"following {data} from judgment 1") and audit.judgments == 1200
    assert len(said) == 2 and said[1].startswith("flag: w0 on tag at judgment")
    assert json.loads(state.read_text())["judgments"] == 1200
    broken = dict(json.loads(state.read_text()))
    del broken["pairs"]
    state.write_text(json.dumps(broken))
    with pytest.raises(ValueError, match=r"state.json: not a badpo stream-audit state \(no key 'pairs'\)"):
        run_stream(data, state, ["tag=given:tag"], 0.05, 6)


def test_stream_options_are_checked_before_any_file_is_read(tmp_path, cli_error):
    data = tmp_path / "pool.csv"
    data.write_text("prompt,chosen,rejected,annotator\n")
    line = cli_error(["audit", str(data), "--stream", str(tmp_path / "s.json"), "-a", "tag=given:tag"])
    assert "--stream reads a .jsonl file" in line
    line = cli_error(["audit", str(tmp_path / "p.jsonl"), "--stream", str(tmp_path / "s.json"), "-a", "tag=given:tag",
                      "--follow", "5", "--json", str(tmp_path / "t.json")])
    assert "--json OUT is written by a one-pass run" in line
    line = cli_error(["audit", str(tmp_path / "p.jsonl"), "--stream", str(tmp_path / "s.json"), "-a", "tag=given:tag",
                      "--alpha", "1.5"])
    assert "alpha: must lie in (0, 1), got 1.5" in line
    line = cli_error(["audit", str(tmp_path / "p.jsonl"), "--stream", str(tmp_path / "s.json"), "-a", "tag=given:tag"])
    assert "no judgment file at" in line
