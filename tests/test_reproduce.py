"""``reproduce``: the cache, the report, the verdict functions and the command."""

import copy
import dataclasses
import json
import math
import os
import re

import pytest

from intrinsic_rank.cli import main
from intrinsic_rank.experiments import EXPERIMENTS, VERDICTS, Verdict, reproduce, write_report

# Tiny settings: a couple of seconds per piece on one thread.
TINY = {
    "ladder": dict(n_samples=200, n_test=100, seq_len=4, d=4, r_star=2, noise=0.1,
                   rungs=["fixed", "linear"], max_epochs=20),
    "copy": dict(train_lengths=[2, 4], eval_lengths=[2, 3, 4, 5, 8], d_model=16,
                 n_steps=30, batch_size=16, lr=3e-3, n_eval=8),
}


@pytest.fixture
def tiny_pieces(monkeypatch):
    """Swap in tiny settings for ``ladder`` and ``copy`` and count their runs."""
    calls = {name: 0 for name in TINY}
    for name, settings in TINY.items():
        piece = EXPERIMENTS[name]

        def counted(settings, *, random_state, progress, device, _run=piece.run, _name=name):
            calls[_name] += 1
            return _run(settings, random_state=random_state, progress=progress, device=device)

        monkeypatch.setitem(EXPERIMENTS, name, dataclasses.replace(
            piece, quick=settings, full=dict(settings, n_eval=4) if name == "copy"
            else dict(settings, max_epochs=10), run=counted))
    return calls


def by(verdicts):
    return [v.verdict for v in verdicts]


# -- the cache ---------------------------------------------------------------------


def test_first_run_computes_then_the_cache_is_reused(tmp_path, tiny_pieces):
    first = reproduce(["copy", "ladder"], out=tmp_path, progress=False)
    assert tiny_pieces == {"ladder": 1, "copy": 1}
    assert list(first.pieces) == ["ladder", "copy"]  # report order, not call order
    assert not any(p.cached for p in first.pieces.values())

    second = reproduce(["ladder", "copy"], out=tmp_path, progress=False)
    assert tiny_pieces == {"ladder": 1, "copy": 1}
    assert all(p.cached for p in second.pieces.values())
    for name in ("ladder", "copy"):
        # compared as JSON text: NaN (an unfitted cliff) is not equal to itself
        assert json.dumps(second.pieces[name].result) == json.dumps(first.pieces[name].result)
        assert second.verdicts[name] == first.verdicts[name]
        assert second.pieces[name].seconds == first.pieces[name].seconds


def test_force_and_changed_settings_recompute(tmp_path, tiny_pieces, monkeypatch):
    reproduce("ladder", out=tmp_path, progress=False)
    reproduce("ladder", out=tmp_path, progress=False, force=True)
    assert tiny_pieces["ladder"] == 2
    reproduce("ladder", out=tmp_path, progress=False, random_state=1)  # another seed
    assert tiny_pieces["ladder"] == 3
    reproduce("ladder", out=tmp_path, progress=False, quick=False)  # another scale
    assert tiny_pieces["ladder"] == 4
    saved = json.loads((tmp_path / "ladder" / "result.json").read_text())
    assert saved["key"]["mode"] == "full" and saved["key"]["settings"]["max_epochs"] == 10
    reproduce("ladder", out=tmp_path, progress=False, quick=False)
    assert tiny_pieces["ladder"] == 4  # the full result is cached now
    # an edited setting is a different key too
    edited = dataclasses.replace(EXPERIMENTS["ladder"], full=dict(TINY["ladder"], max_epochs=11))
    monkeypatch.setitem(EXPERIMENTS, "ladder", edited)
    run = reproduce("ladder", out=tmp_path, progress=False, quick=False)
    assert tiny_pieces["ladder"] == 5 and not run.pieces["ladder"].cached
    assert run.pieces["ladder"].result["config"]["max_epochs"] == 11


def test_a_deleted_plot_is_redrawn_and_a_broken_result_recomputed(tmp_path, tiny_pieces):
    reproduce("ladder", out=tmp_path, progress=False)
    png = tmp_path / "ladder" / "ladder.png"
    png.unlink()
    run = reproduce("ladder", out=tmp_path, progress=False)
    assert run.pieces["ladder"].cached and tiny_pieces["ladder"] == 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "ladder" / "result.json").write_text('{"key": {"piece": "lad')  # truncated
    run = reproduce("ladder", out=tmp_path, progress=False)
    assert not run.pieces["ladder"].cached and tiny_pieces["ladder"] == 2


def test_report_holds_claims_verdicts_tables_and_existing_images(tmp_path, tiny_pieces):
    run = reproduce(["ladder", "copy"], out=tmp_path, progress=False, command="CMD here")
    text = open(run.report).read()
    assert run.report == os.path.join(str(tmp_path), "report.md")
    assert "`CMD here`" in text and "torch" in text and "thread(s)" in text
    assert "## ladder:" in text and "## copy:" in text
    assert "| the paper's claim | our measurement | verdict | why |" in text
    for name in ("ladder", "copy"):
        for v in run.verdicts[name]:
            assert v.verdict in VERDICTS
            # the claim appears, escaped for Markdown, with its verdict in bold
            row = next(line for line in text.splitlines()
                       if line.startswith("| " + v.claim.replace("*", "\\*")))
            assert f"**{v.verdict}**" in row
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert sorted(links) == ["copy/copy.png", "ladder/ladder.png"]
    assert all((tmp_path / link).is_file() for link in links)
    assert "| rung | rank | train\\_risk |" in text  # the ladder's Markdown table
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert set(manifest["pieces"]) == {"ladder", "copy"}
    assert manifest["pieces"]["ladder"]["settings"] == TINY["ladder"]
    assert manifest["last_run"]["command"] == "CMD here"
    counts = manifest["pieces"]["copy"]["verdicts"]
    assert sum(counts.values()) == len(run.verdicts["copy"])


def test_write_report_on_given_pieces(tmp_path):
    from sklearn.utils import Bunch

    result = {"records": [{"rung": "B0 fixed operator", "attention": "fixed", "rank": 4,
                           "train_risk": 0.01, "test_risk": 0.0101, "excess_risk": 1e-4,
                           "excess_to_floor_ratio": 0.01}],
              "noise_floor": 0.01, "config": {}}
    piece = Bunch(name="ladder", title="t", paper="p", settings={"a": 1}, result=result,
                  verdicts=EXPERIMENTS["ladder"].verdicts(result), seconds=1.5, cached=True,
                  finished="now", files=[])
    path = write_report(tmp_path, [piece], command="cmd", seconds=0.1)
    text = open(path).read()
    assert "| [ladder](#ladder) | p | 1.5 | yes | 1 | 0 | 0 |" in text
    assert "B0 excess risk 0.0001 = 0.01x the noise floor" in text


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r"unknown piece\(s\) \['nope'\]"):
        reproduce("nope", progress=False)
    with pytest.raises(ValueError, match="no piece given"):
        reproduce([], progress=False)
    with pytest.raises(ValueError, match="random_state must be an integer"):
        reproduce("ladder", random_state=0.5, progress=False)


def test_cli_errors_exit_2(tmp_path, capsys):
    assert main(["reproduce", "sweep", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown piece(s) ['nope']" in capsys.readouterr().err
    assert main(["reproduce", "ladder", "--quick", "--full", "--out", str(tmp_path)]) == 2
    assert "give --quick or --full, not both" in capsys.readouterr().err
    assert not (tmp_path / "report.md").exists()


def test_cli_prints_the_summary_table(tmp_path, tiny_pieces, capsys):
    assert main(["reproduce", "ladder", "--out", str(tmp_path), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "piece   seconds  cached  agrees  partly  does_not_agree" in text
    assert re.search(r"ladder\s+\d+\.\d\s+no\s+\d\s+\d\s+\d", text)
    assert main(["reproduce", "ladder", "--out", str(tmp_path), "--quiet"]) == 0
    assert re.search(r"ladder\s+\d+\.\d\s+yes", capsys.readouterr().out)
    assert tiny_pieces["ladder"] == 1
    report = (tmp_path / "report.md").read_text()
    assert "intrinsic-rank reproduce ladder --quick --out " in report


# -- verdict functions on synthetic results ------------------------------------------


def _sweep(r_star=4, estimate=4, excess=(0.6, 0.3, 0.15, 0.0, 1e-5, 1e-5), energy=4.0):
    records = [dict(rank=r, excess_risk=e, energy_effective_rank=min(r, energy),
                    numerical_rank=r) for r, e in enumerate(excess, 1)]
    return dict(records=records, rank_=estimate, r_star=r_star, noise_floor=0.01,
                excess_tol=0.02)


def test_entropic_verdicts():
    judge = EXPERIMENTS["sweep"].verdicts
    good = judge({"sweeps": {"linear": _sweep()}})
    assert by(good) == ["agrees"] * 4
    assert "estimated r* = 4, true r* = 4" in good[0].measured
    # r* off by one, one rank below r* already at the floor, one above it not
    bad = judge({"sweeps": {"softmax": _sweep(estimate=3, excess=(0.6, 0.3, 0.01, 0.0, 0.5,
                                                                   1e-5))}})
    assert by(bad) == ["partly", "partly", "partly", "agrees"]
    worse = judge({"sweeps": {"x": _sweep(estimate=6, excess=(0.01,) * 3 + (0.5,) * 3,
                                          energy=6.0)}})
    assert by(worse) == ["does not agree"] * 4


def _ladder(b0, b1, b2, b3):
    names = [("fixed", "B0 fixed operator"), ("linear", "B1 linear QK"),
             ("softmax", "B2 softmax QK"), ("block", "B3 Transformer block")]
    return {"records": [dict(attention=a, rung=label, excess_risk=0.01 * x,
                             excess_to_floor_ratio=x)
                        for (a, label), x in zip(names, (b0, b1, b2, b3))],
            "noise_floor": 0.01}


def test_ladder_verdicts():
    judge = EXPERIMENTS["ladder"].verdicts
    assert by(judge(_ladder(0.0, 95, 93, 97))) == ["agrees"] * 3
    # B0 a bit above the floor; B3 does not fail; B1 fails far less than B2
    assert by(judge(_ladder(0.5, 25, 93, 3))) == ["partly", "partly", "partly"]
    assert by(judge(_ladder(5, 1, 2, 3))) == ["does not agree"] * 3


def _frontier(fit_numerical, inverted_exact=True, mixer=4.0, recovery_error=0.0):
    truth = [1, 4, 8, 16]
    records = []
    for r in truth:
        base = dict(r_star=r, mixer_energy_rank=float("nan"), recovery_energy_rank=float("nan"),
                    recovery_numerical_rank=float("nan"))
        records.append(dict(base, teacher="linear, V known", numerical_rank=r,
                            energy_rank=float(r), mixer_energy_rank=min(mixer, r)))
        records.append(dict(base, teacher="linear, V unknown", numerical_rank=r if r < 16
                            else 15, energy_rank=float(r)))
        records.append(dict(base, teacher="softmax, linear-QK fit",
                            numerical_rank=fit_numerical(r), energy_rank=r + 0.2 * (r < 8)
                            - 0.3 * (r > 8)))
        records.append(dict(base, teacher="softmax, log-inverted mixers",
                            numerical_rank=r if inverted_exact else r + 1, energy_rank=float(r),
                            recovery_energy_rank=r + recovery_error, recovery_numerical_rank=16))
    return {"records": records, "config": {"seq_len": 8}}


def test_frontier_verdicts():
    judge = EXPERIMENTS["frontier"].verdicts
    saturating = judge(_frontier(lambda r: 13 + r // 8))
    assert [v.claim.split(":")[0] for v in saturating][:2] == [
        "linear QK with V known", "linear QK with V unknown"]
    assert by(saturating) == ["agrees", "partly", "agrees", "agrees", "partly", "agrees",
                              "agrees"]
    assert "exact in 3/4" in saturating[1].measured
    assert "log" in saturating[4].explanation
    # an exact softmax fit contradicts the paper's partial frontier
    exact = judge(_frontier(lambda r: r, inverted_exact=False, mixer=12.0,
                            recovery_error=0.8))
    assert by(exact)[2] == "does not agree" and by(exact)[4] == "partly"
    assert by(exact)[5:] == ["does not agree", "does not agree"]


def _min_ip(rank1_len3=0.36, transition=4, dense3=(0.0, 0.0), rank1_len2=0.0, ood=None):
    summary = [dict(length=2, model="kernel", rank=1, error_mean=rank1_len2,
                    error_max=rank1_len2),
               dict(length=3, model="kernel", rank=1, error_mean=rank1_len3,
                    error_max=rank1_len3),
               dict(length=3, model="kernel", rank=4, error_mean=0.01 if transition == 4
                    else rank1_len3, error_max=0.02),
               dict(length=3, model="dense", rank=24, error_mean=sum(dense3) / 2,
                    error_max=max(dense3))]
    phase = dict(summary=summary, transition={"3": transition, "2": 1},
                 config=dict(threshold=0.05, rank_grid=[1, 4, 16]))
    return {"phase": phase, "ood": ood}


def _ood(ranks, best, dense):
    return dict(config=dict(threshold=0.05), transition=[
        dict(n_bits=m, pool=10 * m, transition_rank=r, kernel_best_test_error=b,
             dense_test_error_mean=d) for m, r, b, d in zip((8, 12, 16), ranks, best, dense)])


def test_min_ip_verdicts():
    judge = EXPERIMENTS["min-ip"].verdicts
    # what we measure: transition at 4, rank 1 at 0.36, no OOD transition
    ours = judge(_min_ip(ood=_ood([None, None, None], [0.17, 0.26, 0.37],
                                  [0.009, 0.016, 0.039])))
    assert by(ours) == ["agrees", "agrees", "agrees", "does not agree", "does not agree",
                        "agrees"]
    assert "rises with the bit width" in ours[4].explanation
    # the paper's picture
    paper = judge(_min_ip(rank1_len3=0.85, transition=16,
                          ood=_ood([8, 16, 64], [0.0, 0.0, 0.01], [0.0, 0.0, 0.0])))
    assert by(paper) == ["agrees"] * 6
    # nothing works
    none = judge(_min_ip(rank1_len2=0.5, rank1_len3=0.01, transition=None, dense3=(0.2, 0.3),
                         ood=_ood([None, 32], [0.3, 0.04], [0.2, 0.3])))
    assert by(none) == ["does not agree"] * 4 + ["partly", "does not agree"]


def _reach(slope=3.0, r2=0.995, ratio=48.0, box_ratio=46.0, bracketed=(True, True, True)):
    n50 = [dict(n_memory=m, n50=4.0 + slope * m, bracketed=b) for m, b in
           zip((1, 2, 3), bracketed)]
    return dict(n50=n50, slope=dict(slope=slope, intercept=1.5, r2=r2, n_points=3),
                bound=dict(slope_bound=ratio * slope, box_slope_bound=box_ratio * slope,
                           precision=2 ** -10, ratio=ratio, box_ratio=box_ratio, width=64))


def test_reach_verdicts():
    judge = EXPERIMENTS["reach"].verdicts
    assert by(judge(_reach())) == ["agrees", "agrees", "agrees", "does not agree"]
    assert by(judge(_reach(r2=0.95, ratio=25, box_ratio=12, bracketed=(True, False, True)))) \
        == ["partly", "partly", "agrees", "does not agree"]
    # only a 2^-10 headline (no r_inf/2048 row): in the authors' range there, partly
    assert by(judge(_reach(ratio=10, box_ratio=9)))[3] == "partly"
    flat = judge(_reach(slope=float("nan"), r2=float("nan"), ratio=float("nan"),
                        box_ratio=float("nan"), bracketed=(False,) * 3))
    assert by(flat) == ["does not agree"] * 4
    # a slope above the bound (ratio < 1) is caught
    assert by(judge(_reach(ratio=0.5, box_ratio=0.4)))[2] == "does not agree"


def _copy(inside=(1.0, 0.96), midpoint=20.2, scale=0.06, bracketed=True):
    records = [dict(length=n, in_training_range=True, exact_match=e)
               for n, e in zip((5, 20), inside)]
    records += [dict(length=21, in_training_range=False, exact_match=0.0)]
    cliff = dict(midpoint=midpoint, scale=scale, bracketed=bracketed,
                 sharpness=scale / midpoint if bracketed else math.nan,
                 last_high_length=20.0, first_low_length=21.0)
    return dict(records=records, cliff=cliff, config=dict(train_lengths=[5, 20]))


def test_copy_verdicts():
    judge = EXPERIMENTS["copy"].verdicts
    assert by(judge(_copy())) == ["agrees", "agrees"]
    assert by(judge(_copy(inside=(1.0, 0.7), midpoint=12.0, scale=0.1))) == ["partly", "partly"]
    assert by(judge(_copy(midpoint=12.0, scale=5.0))) == ["agrees", "does not agree"]
    assert by(judge(_copy(inside=(0.1, 0.0), bracketed=False))) == ["does not agree"] * 2


def _profile_model(n_heads, structured, rho, band=1):
    """A stored profile with ``structured`` of ``n_heads`` heads on one key (mass 0.6)."""
    records = [dict(max_key_mass=0.6 if h < structured else 0.05, band_mass=0.1)
               for h in range(n_heads)]
    return dict(records=records, baselines=dict(max_key_mass=0.05, band_mass=0.13),
                summary=dict(sink_heads=structured, spearman_kernel_vs_attn=rho,
                             kernel_energy_rank_median=27.0, attn_energy_rank_median=1.8),
                config=dict(band=band, d_head=32))


def _profile(structured=54, rho=-0.2, default_rho=-0.5, ranks=(6.2, 3.6, 2.9, 3.4),
             minilm=True):
    models = {"default": _profile_model(8, 0, default_rho)}
    models["all-MiniLM-L6-v2"] = (_profile_model(72, structured, rho) if minilm
                                  else {"missing": "not installed"})
    summary = [dict(step=100 * i, loss=3.5 - 0.1 * i, kernel_energy_rank=r)
               for i, r in enumerate(ranks)]
    return dict(models=models, trajectory=dict(summary=summary))


def test_profile_verdicts():
    judge = EXPERIMENTS["profile"].verdicts
    assert by(judge(_profile())) == ["agrees", "agrees", "agrees"]
    # 20 of 72 structured heads (28%) is partly, 10 (14%) does not agree
    assert by(judge(_profile(structured=20)))[0] == "partly"
    assert by(judge(_profile(structured=10)))[0] == "does not agree"
    # the static rank predicting the realised one on one model of two: partly
    assert by(judge(_profile(rho=0.8)))[1] == "partly"
    assert by(judge(_profile(rho=0.8, default_rho=0.9)))[1] == "does not agree"
    # a kernel rank that barely moves in training does not track the optimisation
    assert by(judge(_profile(ranks=(3.0, 3.1, 3.05, 3.0))))[2] == "does not agree"
    assert by(judge(_profile(ranks=(3.0, 2.7, 3.2))))[2] == "partly"
    # without the pretrained model the sinks claim is left out, not judged
    left = judge(_profile(minilm=False))
    assert len(left) == 2 and "sinks" not in left[0].claim


def test_every_verdict_is_a_verdict_of_strings():
    v = EXPERIMENTS["copy"].verdicts(_copy())[0]
    assert isinstance(v, Verdict) and all(isinstance(x, str) for x in v)


def test_quick_and_full_settings_differ_and_are_json():
    for name, piece in EXPERIMENTS.items():
        assert piece.quick != piece.full, name
        assert json.loads(json.dumps(piece.full)) == piece.full
        assert json.loads(json.dumps(piece.quick)) == piece.quick


@pytest.mark.slow
def test_reproduce_all_quick_end_to_end(tmp_path):
    run = reproduce("all", quick=True, out=tmp_path, progress=False)
    assert list(run.pieces) == list(EXPERIMENTS)
    text = open(run.report).read()
    for name, piece in run.pieces.items():
        assert piece.verdicts, name
        assert all((tmp_path / name / f).is_file() for f in piece.files)
        assert f"## {name}:" in text
    # the claims the quick settings reproduce (see docs/reproduce.md)
    assert set(by(run.verdicts["sweep"])) == {"agrees"}
    assert set(by(run.verdicts["ladder"])) == {"agrees"}
    assert by(run.verdicts["copy"]) == ["agrees", "agrees"]
    assert run.seconds < 15 * 60
    again = reproduce("all", quick=True, out=tmp_path, progress=False)
    assert all(p.cached for p in again.pieces.values())
    assert copy.deepcopy(again.verdicts) == run.verdicts
