"""docs/claims.md (app/render/claims.py): the committed page is what the generator makes of the committed
records, and what it names exists: every pytest node id collects, every section it links is a heading of
its page, every claim of the claims table is on it in the paper's order, and its verdicts use the words for
what the records decide."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.render import claims
from app.render.report import generated_docs
from theory.claims import (
    CLAIMS,
    LEMMAS,
    OPEN_QUESTIONS,
    TABLE1,
    TABLE1_CLAIMS,
    table1_claim,
)
from theory.validation import SettingError

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "claims.md"


@pytest.fixture(scope="module")
def text() -> str:
    return PAGE.read_text()


def test_committed_page_is_current(text):
    assert text == claims.page(ROOT), "docs/claims.md is stale: run `occ-companion docs`"
    assert generated_docs(ROOT)[ROOT / "docs" / "claims.md"] == text  # `occ-companion docs` writes this page


def _named_nodes(text: str) -> set[str]:
    return set(re.findall(r"`((?:checks|tests)/[\w/]+\.py::\w+(?:\[[^\]`]*\])?)`", text))


def _table_nodes() -> set[str]:
    entries = [*CLAIMS, *LEMMAS, *TABLE1_CLAIMS, *OPEN_QUESTIONS]
    return {n for e in entries for n in e.decided_by} | {TABLE1["refused_check"]}


def test_every_node_id_collects(text):
    named = _named_nodes(text) | _table_nodes()
    assert len(named) > 20 and _table_nodes() <= _named_nodes(text)
    files = sorted({n.split("::")[0] for n in named})
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-n", "0", *files], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    collected = {ln.strip() for ln in out.stdout.splitlines() if "::" in ln}
    functions = {c.split("[")[0] for c in collected}
    missing = sorted(n for n in named if n not in collected and n not in functions)
    assert not missing, missing


def _links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_every_linked_file_and_section_exists(text):
    links = _links(text)
    assert any("#" in link for link in links)
    for link in links:
        path, _, section = link.partition("#")
        target = (PAGE.parent / path).resolve() if path else PAGE
        assert target.exists(), link
        if section:
            assert section in claims.anchors(target.read_text()), link


def test_every_claim_of_the_table_is_on_the_page_in_the_papers_order(text):
    headings = [ln for ln in text.splitlines() if ln.startswith("## ")]
    assert headings == ["## At a glance", "## The positive theorem", "## The impossibility results", "## The lemmas",
                        "## The finite-sample corollary", "## Table 1, cell by cell", "## Open questions"]
    for entry in [*CLAIMS, *LEMMAS, *OPEN_QUESTIONS]:
        assert text.count(f"\n### {entry.name}\n") == 1, entry.key
    for c in CLAIMS:
        assert c.statement in text and all(f"`{n}`" in text for n in c.decided_by)
    position = {c.key: text.index(f"### {c.name}") for c in CLAIMS}
    assert position["three_phase"] < min(position[k] for k in claims.IMPOSSIBILITY)
    assert max(position[k] for k in claims.IMPOSSIBILITY) < text.index("## The lemmas") < position["finite_sample"]
    assert [text.index(f"### {lemma.name}") for lemma in LEMMAS] == \
        sorted(text.index(f"### {lemma.name}") for lemma in LEMMAS)


def test_the_summary_links_every_claim_with_the_lead_of_its_verdict(text):
    summary = text[text.index("## At a glance"):text.index("## The positive theorem")]
    rows = [ln for ln in summary.splitlines() if ln.startswith("| [")]
    names = [re.match(r"\| \[([^\]]+)\]", ln).group(1) for ln in rows]
    body = text[text.index("## The positive theorem"):]
    def where(name: str) -> int:
        return body.index("## Table 1, cell by cell" if name == "Table 1, cell by cell" else f"\n### {name}\n")

    assert [where(n) for n in names] == sorted(where(n) for n in names)
    assert len(rows) == len(CLAIMS) + len(LEMMAS) + 1 + len(OPEN_QUESTIONS)
    for ln, name in zip(rows, names):
        verdict = ln.rsplit(" | ", 1)[1].rstrip(" |")
        if name == "Table 1, cell by cell":
            continue
        block = body[body.index(f"### {name}\n"):]
        full = re.search(r"- \*\*Verdict\*\*: (.*)\.\n", block).group(1)
        assert full.startswith(verdict.split("; ")[0]) and (verdict == "open") == (full == claims.OPEN)


def test_every_table1_cell_of_the_run_is_a_row_with_its_verdict(text):
    results = json.loads((ROOT / TABLE1["run"]).read_text())
    cells = claims.table1_cells(results)
    assert {c["kind"] for c in cells} == set(TABLE1_CLAIMS)  # every kind of the table speaks to a cell
    section = text[text.index("## Table 1"):text.index("## Open questions")]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith("| claim |")]
    assert len(rows) == len(cells)
    for row, cell in zip(rows, cells):
        name, _, verdict, _ = [c.strip() for c in row.strip("|").split(" | ")]
        assert name == claims.cell_name(cell)
        assert verdict.split(":")[0] == cell["verdict"]


def test_open_questions_are_open_and_link_their_study(text):
    section = text[text.index("## Open questions"):]
    assert section.count(f"- **Verdict**: {claims.OPEN}.") == len(OPEN_QUESTIONS)
    for q in OPEN_QUESTIONS:
        assert f"study `{q.study}` of" in section
    assert "holds" not in section


def test_a_table1_claim_text_maps_to_its_kind():
    assert table1_claim("attention lags output under joint GD (function)").key == "lags"
    assert table1_claim("the lag is least on even pairs (displacement: smallest t_half ratio of all rows)").key == \
        "least_on_even_pairs"
    with pytest.raises(SettingError, match="no kind of Table 1 claim"):
        table1_claim("three-phase beats everything")


# the verdict words

def _certificate(*items) -> dict:
    return {"command": "occ-companion prove --out /somewhere/cert", "git_commit": "0123456789abcdef", "epsilon": 0.001,
            "certificates": [{"claim": k, "d": d, "status": s, "item": i, "note": n} for k, d, s, i, n in items]}


def _claim(key):
    return next(c for c in CLAIMS if c.key == key)


def test_certificate_verdicts():
    three = _claim("three_phase")
    assert claims.certificate_verdict(three, _certificate(("three_phase", 3, "PASS", "x", ""),
                                                      ("three_phase", 5, "PASS", "y", ""),
                                                      ("output_only", 7, "FAIL", "z", ""))) == \
        "holds at d = 3, 5, epsilon = 0.001 (every item of the certificate PASS)"
    mixed = claims.certificate_verdict(three, _certificate(("three_phase", 3, "PASS", "x", ""),
                                                       ("three_phase", 3, "FAIL", "end-point risk", ""),
                                                       ("three_phase", 5, "UNDECIDED", "T_min", ""),
                                                       ("three_phase", 10, "PASS", "x", "")))
    assert mixed == ("does not hold at d = 3 (FAIL: end-point risk); undecided at d = 5 (a ball straddles its "
                     "threshold); holds at d = 10, epsilon = 0.001 (every item of the certificate PASS)")
    skipped = claims.certificate_verdict(_claim("finite_sample"), _certificate(("finite_sample", 3, "SKIP", "x", "why")))
    assert skipped == "undecided: why"
    assert claims.certificate_verdict(three, None).startswith("undecided: no certificate recorded")
    assert claims.certificate_verdict(three, _certificate(("output_only", 3, "PASS", "x", ""))) == \
        "undecided: the certificate has no item of this claim"
    source = claims.certificate_source(three, _certificate(("three_phase", 3, "PASS", "x", ""),
                                                       ("three_phase", 3, "PASS", "y", "")))
    assert "2 items at d = 3" in source and "/somewhere" not in source and "--out DIR" in source


def _records(proofs=(), by_hand=()) -> claims.Records:
    records = claims.Records(Path("/nonexistent"))
    records.proofs, records.by_hand = list(proofs), list(by_hand)
    return records


def _proof(name, status, domain="all d >= 3", method="symbolic", used_by="three_phase"):
    return {"proof": f"`{name}`", "status": status, "domain": domain, "method": method,
            "used by (theory/claims.py)": used_by, "shown": f"{name} shown"}


def test_lemma_verdicts():
    kappa = next(lemma for lemma in LEMMAS if lemma.proof == "kappa_positive")
    two = [_proof("kappa_positive", "PASS"), _proof("kappa_positive", "PASS", "all real d > 2", "bnb")]
    assert claims.lemma_verdict(kappa, _records(two)).startswith(
        "holds: proved for all d >= 3 (symbolic); and for all real d > 2 (bnb); given")
    one_fails = [_proof("kappa_positive", "PASS"), _proof("kappa_positive", "FAIL", method="bnb")]
    assert claims.lemma_verdict(kappa, _records(one_fails)) == \
        "undecided: its proof does not go through (bnb: FAIL, docs/proofs.md)"
    assert claims.lemma_verdict(kappa, _records([_proof("balancing_p", "PASS")])).startswith("undecided: no all-d proof")
    by_hand = next(lemma for lemma in LEMMAS if not lemma.proof)
    assert claims.lemma_verdict(by_hand, _records(two)).startswith("undecided: argued by hand")


def test_all_d_line_reads_the_used_by_column_by_whole_keys():
    records = _records([_proof("a", "PASS", used_by="attention_only, attention_then_output"),
                        _proof("b", "PASS", used_by="three_phase (and every claim)")],
                       [{"claim": "`output_only`", "step": "by Jensen", "where, and what depends on it": ""}])
    assert claims.all_d_line("attention_only", records) == "proved for all d: `a` (a shown; PASS)"
    assert claims.all_d_line("output_only", records) == "argued by hand: by Jensen"
    assert claims.all_d_line("finite_sample", records) == "no all-d proof of its parts in docs/proofs.md"


def test_cell_verdicts_give_the_reasons_when_not_decided():
    kind = TABLE1_CLAIMS[0]
    cell = {"row": "OR", "claim": kind.claim_prefix, "kind": kind, "verdict": "refused",
            "reasons": ["not converged", "edge"], "evidence": ""}
    assert claims.cell_verdict(cell) == "refused: not converged; edge"
    assert claims.cell_verdict(cell | {"verdict": "holds", "reasons": []}) == "holds"
    assert claims.cell_name(cell | {"measure": "function"}) == f"{kind.name} (OR, function)"


def test_a_checkout_without_records_gets_no_decided_verdict(tmp_path):
    (tmp_path / "docs").mkdir()
    text = claims.page(tmp_path)
    verdicts = [ln for ln in text.splitlines() if ln.startswith("- **Verdict**")]
    assert len(verdicts) == len(CLAIMS) + len(LEMMAS) + len(OPEN_QUESTIONS)
    assert not any("holds" in v for v in verdicts)
    assert "Undecided: no run recorded" in text
    assert "scope.md#" not in text[text.index("## Open questions"):]  # no record, no study's section to link


def test_markdown_tables_and_anchors():
    md = ("# Page\n\n## Proved for all d\n\n| proof | status |\n|---|---|\n| `a` | PASS |\n| `b \\| c` | FAIL |\n\n"
          "after\n\n```\n# not a heading\n```\n## Proved for all d\n### The paper's claims\n")
    assert claims.markdown_table(md, "## Proved for all d") == [{"proof": "`a`", "status": "PASS"},
                                                            {"proof": "`b \\| c`", "status": "FAIL"}]
    assert claims.markdown_table(md, "## Absent") == []
    assert claims.anchors(md) == {"page", "proved-for-all-d", "proved-for-all-d-1", "the-papers-claims"}
    assert claims.anchor("## 5. The sample-complexity constant (`samples`)") == "5-the-sample-complexity-constant-samples"
    assert claims.command(["occ-companion", "table1", "--out", "/abs/dir", "--quiet"]) == \
        "occ-companion table1 --out DIR --quiet"
