"""docs/ is generated and current; LaTeX export; the command line."""
import json
import re
from pathlib import Path

import pytest

from numerics.cli import main
from numerics.report import derivations_markdown
from theory.latex import latex_document

ROOT = Path(__file__).resolve().parents[1]


def test_committed_derivations_doc_is_current():
    assert (ROOT / "docs" / "derivations.md").read_text() == derivations_markdown(), \
        "docs/derivations.md is stale: run `occ-companion docs`"


def test_latex_document_is_well_formed():
    tex = latex_document()
    assert tex.startswith(r"\documentclass") and tex.rstrip().endswith(r"\end{document}")
    assert tex.count(r"\begin{equation*}") == tex.count(r"\end{equation*}") > 20
    body = re.sub(r"\\[{}]", "", tex)
    assert body.count("{") == body.count("}")
    assert r"\Li_{2}" in tex or r"\Li_2" in tex  # the polylogarithm of the phase-2 gradient
    assert "exp_polar" not in tex and "Piecewise" not in tex


def test_latex_export_selected_keys(capsys):
    assert main(["latex", "--only", "grad_alpha_a_1,c_balanced"]) == 0
    out = capsys.readouterr().out
    assert out.count(r"\begin{equation*}") == 2
    assert main(["latex", "--only", "nonsense"]) == 2
    assert "unknown derivation key" in capsys.readouterr().err


def test_docs_check_flags_a_stale_file(tmp_path, capsys):
    target = tmp_path / "d.md"
    assert main(["docs", "--out", str(target), "--check"]) == 1
    assert main(["docs", "--out", str(target)]) == 0
    assert main(["docs", "--out", str(target), "--check"]) == 0


def test_run_main_job_small(tmp_path, capsys):
    rc = main(["run", "--d", "5", "--epsilon", "0.01", "--steps", "20", "--out", str(tmp_path)])
    assert rc == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["plans"]["three-phase"]["final_risk"] <= 0.01
    assert summary["plans"]["output-only"]["min_certified_risk"] >= summary["output_only_floor_c"] - 1e-12
    assert summary["plans"]["attention-only"]["final_risk"] == pytest.approx(0.5, abs=1e-9)
    assert (tmp_path / "risk_curves.png").stat().st_size > 10_000
    err = capsys.readouterr().err
    assert "phase 3 (output)" in err and "100%" in err  # progress on stderr


def test_run_certify_in_high_precision(tmp_path, capsys):
    rc = main(["run", "--d", "4", "--epsilon", "0.05", "--steps", "5", "--no-plot", "--certify", "--out", str(tmp_path)])
    assert rc == 0
    cert = json.loads((tmp_path / "summary.json").read_text())["plans"]["three-phase"]["certified_mp"]
    assert float(cert["risk"]) + cert["bound"] <= 0.05 and cert["bound"] < 1e-13
    assert not (tmp_path / "risk_curves.png").exists()


def test_run_rejects_bad_input(capsys):
    assert main(["run", "--d", "1", "--no-plot"]) == 2
    assert "alphabet size d" in capsys.readouterr().err
    assert main(["run", "--d", "5", "--eta3", "1.5", "--no-plot"]) == 2
    assert "eta_3" in capsys.readouterr().err


def test_evaluate_command(capsys):
    assert main(["evaluate", "--d", "3", "--beta", "1,-1,-1", "--alpha", "2,0,0", "--mc", "2000"]) == 0
    out = capsys.readouterr().out
    assert "risk =" in out and "Monte Carlo" in out
    assert main(["evaluate", "--d", "3", "--beta", "1,x,-1"]) == 2


def test_values_command_and_precision(capsys):
    assert main(["values", "--d", "7", "--dps", "40", "--eta1", "1"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("c_balanced"))
    digits = line.split()[1]
    assert len(digits.replace(".", "").lstrip("0")) >= 35  # really 40 significant digits, not a double
    assert "(needs --epsilon)" in out


def test_closed_forms_all_reports_missing_symbols():
    from numerics.closed_forms import ClosedForms
    from theory.setting import Setting

    rows = {key: (val, missing) for key, _, val, missing in ClosedForms(Setting(5), dps=20).all(eta_1=1.0)}
    assert rows["alpha2_a"] == (None, ["eta_2"])
    assert rows["eta2_min"] == (None, ["epsilon"])
    assert rows["beta1_a"][0] == pytest.approx(0.2)


def test_finite_command(capsys):
    assert main(["finite", "--d", "5", "--seeds", "2", "--test-size", "5000"]) == 0
    out = capsys.readouterr().out
    assert out.count("held-out risk") == 2 and "seeds reach risk" in out


@pytest.mark.skipif(__import__("shutil").which("pdflatex") is None, reason="pdflatex not installed")
@pytest.mark.parametrize("lengths", ["positive", "nonnegative"])
def test_latex_export_compiles_without_overfull_lines(tmp_path, lengths):
    import subprocess

    (tmp_path / "g.tex").write_text(latex_document(lengths))
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "g.tex"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "Overfull" not in (tmp_path / "g.log").read_text()
