"""docs/ and README.md are generated and current; `docs` works from any directory; the LaTeX
export compiles, with titles in math mode and each formula under a heading."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from app import checkout
from app.cli import main
from app.render.latex import latex_document, text_with_math, visual_width
from app.render.report import (
    CLAIMS_BEGIN,
    CLAIMS_END,
    claims_block,
    derivations_markdown,
    stale_docs,
)
from theory.claims import CLAIMS

ROOT = Path(__file__).resolve().parents[1]


def test_committed_derivations_doc_is_current():
    assert (ROOT / "docs" / "derivations.md").read_text() == derivations_markdown(), \
        "docs/derivations.md is stale: run `occ-companion docs`"


def test_readme_claims_block_is_current_and_rendered_from_the_claims_table():
    readme = (ROOT / "README.md").read_text()
    assert claims_block() in readme, "README.md's claims block is stale: run `occ-companion docs`"
    for c in CLAIMS:
        assert c.name in readme and c.check in readme
    assert "../shared" not in readme


def test_theorem_section_of_derivations_comes_from_the_claims_table():
    text = derivations_markdown()
    section = text[text.index("## Theorems as checked"):]
    assert all(c.statement in section for c in CLAIMS)


def _fake_checkout(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(f"# x\n\n{CLAIMS_BEGIN}\nold claims\n{CLAIMS_END}\n")
    return tmp_path


def test_docs_command_regenerates_and_checks(tmp_path, capsys):
    root = _fake_checkout(tmp_path)
    assert stale_docs(root) == [root / "docs" / "derivations.md", root / "README.md", root / "docs" / "claims.md",
                               root / "docs" / "lag.md"]
    assert main(["docs", "--check", "--root", str(root)]) == 1
    assert "is stale" in capsys.readouterr().err
    assert main(["docs", "--root", str(root)]) == 0
    assert main(["docs", "--check", "--root", str(root)]) == 0
    assert (root / "README.md").read_text().startswith("# x\n") and "old claims" not in (root / "README.md").read_text()


def test_docs_check_from_another_directory_uses_the_checkout(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["docs", "--check"]) == 0, capsys.readouterr().err
    assert str(ROOT / "docs" / "derivations.md") in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []  # nothing created in the working directory


def test_docs_outside_a_checkout_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(checkout, "ROOT", tmp_path)
    assert main(["docs", "--check"]) == 2
    assert "not in a checkout of the repository" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_plain_text_titles_become_math_in_latex_and_markdown():
    tex = text_with_math("Attention gap sufficient for inf_beta R <= floor + epsilon/2 at beta^(1), L_1")
    assert r"$\inf_{\beta}$ R $\le$ floor" in tex and r"$\beta^{(1)}$" in tex and "$L_{1}$" in tex
    assert "<" not in tex and "^(" not in tex
    assert text_with_math("a_b & 50% #1") == r"$a_{b}$ \& 50\% \#1"
    assert text_with_math("r = c/n *", markdown=True) == r"r = c/n \*"
    # c7: formulas the catalogue marks with backticks are math in both outputs
    assert text_with_math("share `r = c/n` and `R(0, beta) = beta^T A beta/2`") == \
        r"share $r = c/n$ and $R(0, \beta) = \beta^{T} A \beta/2$"
    assert text_with_math("`inf_beta R <= R_floor`, 1%", markdown=True) == r"$\inf_{\beta} R \le R_{\mathrm{floor}}$, 1%"


def test_latex_prose_has_no_formula_outside_math():
    """c7: in the exported document's text (headings and notes), every =, <, > and ^ is inside $...$."""
    import re

    tex = latex_document()
    body = tex.split(r"\begin{document}", 1)[1]
    text = re.sub(r"\\begin\{(equation\*|align\*|aligned|multline\*)\}.*?\\end\{\1\}", "", body, flags=re.S)
    text = re.sub(r"\$[^$]*\$", "", text)
    stray = [ln for ln in text.splitlines() if re.search(r"[=<>^]", ln)]
    assert stray == [], stray[:5]


def test_latex_document_is_well_formed_with_a_heading_per_formula():
    tex = latex_document()
    assert tex.startswith(r"\documentclass") and tex.rstrip().endswith(r"\end{document}")
    n_displays = tex.count(r"\begin{equation*}")
    assert n_displays == tex.count(r"\end{equation*}") > 20
    assert tex.count(r"\paragraph{") == n_displays
    body = re.sub(r"\\[{}]", "", tex)
    assert body.count("{") == body.count("}")
    assert r"\Li_{2}" in tex or r"\Li_2" in tex
    assert "exp_polar" not in tex and "Piecewise" not in tex
    for heading in re.findall(r"\\paragraph\{(.*)\}", tex):
        assert "<=" not in heading and "^(" not in heading and not re.search(r"(?<![\\$])\b[A-Za-z]+_\w", heading)


def test_short_formulas_stay_on_one_line():
    tex = latex_document()
    for block in re.findall(r"\\begin\{aligned\}(.*?)\\end\{aligned\}", tex, flags=re.S):
        lines = block.strip().split(r" \\")
        assert len(lines) >= 2
        assert visual_width(re.sub(r"^.*?&", "", lines[0])) + visual_width(re.sub(r"^.*?&", "", lines[1])) > 50


def test_latex_export_selected_keys(capsys):
    assert main(["latex", "--only", "grad_alpha_a_1,c_balanced"]) == 0
    assert capsys.readouterr().out.count(r"\begin{equation*}") == 2
    assert main(["latex", "--only", "nonsense"]) == 2
    assert "unknown derivation key" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed (.ci/run installs it)")
@pytest.mark.parametrize("lengths", ["positive", "nonnegative"])
def test_latex_export_compiles_without_overfull_lines(tmp_path, lengths):
    (tmp_path / "g.tex").write_text(latex_document(lengths))
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "g.tex"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "Overfull" not in (tmp_path / "g.log").read_text()
