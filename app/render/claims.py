"""docs/claims.md: every claim of the paper, in the order the paper makes them (the positive theorem, the
impossibility results, the lemmas, the finite-sample corollary, each cell of Table 1, then the open questions
a referee raises), each with the checks that decide it (pytest node ids), its certificate or run, its
current verdict and the section that explains it.  ``occ-companion docs`` writes it (``generated_docs`` in
``app.render.report``); ``docs --check`` and tests/test_claims_page.py fail when it is stale.

Everything comes from the claims table (theory/claims.toml through ``theory.claims``) and the records
committed under the checkout's docs/:

* the theorems: the certificate of ``occ-companion prove --all-d`` (``CERTIFICATE``), per claim and d, and the
  all-d proofs and hand-argued steps of docs/proofs.md (generated from ``theory.proofs``, held current by
  checks/test_proofs_all_d.py);
* the lemmas: their all-d proofs in docs/proofs.md;
* Table 1: the example run, judged by ``numerics.experiments.verdicts.assess`` as docs/table1.md judges it;
* the open questions: the scope record docs/scope_full/scope.json (its section of docs/scope.md).

Words: "holds" and "does not hold" only where a record decides it; otherwise "undecided" or "refused" with
the reason (a missing record is such a reason); an open question is "open", never given a verdict.
"""
from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from pathlib import Path

from numerics.experiments import verdicts
from theory.claims import (
    CLAIMS,
    LEMMAS,
    OPEN_QUESTIONS,
    TABLE1,
    Claim,
    Lemma,
    table1_claim,
)

PAGE = Path("docs") / "claims.md"
CERTIFICATE = Path("docs") / "certificate" / "certificate.json"
"""The committed certificate: ``occ-companion prove --all-d --out docs/certificate``."""
PROOFS = Path("docs") / "proofs.md"
SCOPE = Path("docs") / "scope_full" / "scope.json"
SCOPE_PAGE = "docs/scope.md"
IMPOSSIBILITY = ("output_only", "attention_then_output", "attention_only")
"""The claims of the claims table that are impossibility results (the others: the positive theorem first,
the finite-sample corollary last)."""
OPEN = f"open: studied in {SCOPE_PAGE}, not claimed by the paper"


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading line (without the suffix of a repeated heading): lower case,
    punctuation other than hyphens and underscores dropped, spaces as hyphens."""
    text = heading.strip().lstrip("#").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading anchor of a Markdown page, repeated headings numbered as GitHub numbers them
    (``name``, ``name-1``, ...); lines inside fenced code blocks are not headings."""
    seen: Counter = Counter()
    out = set()
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            base = anchor(line)
            out.add(base if not seen[base] else f"{base}-{seen[base]}")
            seen[base] += 1
    return out


def _link(doc: str) -> str:
    """A link from docs/claims.md to ``doc`` (a path from the checkout root, with or without #anchor)."""
    target = doc[len("docs/"):] if doc.startswith("docs/") else f"../{doc}"
    return f"[{doc}]({target})"


def _nodes(ids) -> str:
    return "<br>".join(f"`{i}`" for i in ids)


def command(argv) -> str:
    """A recorded command line as the page shows it: an absolute path (an output folder on the machine that
    ran it) becomes DIR."""
    if isinstance(argv, str):
        argv = shlex.split(argv)
    return shlex.join("DIR" if a.startswith("/") else a for a in argv)


def _read_json(root: Path, path: Path) -> dict | None:
    return json.loads((root / path).read_text()) if (root / path).is_file() else None


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def markdown_table(markdown: str, heading: str) -> list[dict[str, str]]:
    """The rows of the first table under the heading line ``heading`` of a Markdown page, as
    {column: cell} (code spans kept); [] when the page has no such heading."""
    lines = markdown.splitlines()
    if heading not in lines:
        return []
    rows: list[list[str]] = []
    for line in lines[lines.index(heading) + 1:]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            rows.append(_cells(line))
        elif rows:
            break
    if len(rows) < 2:
        return []
    return [dict(zip(rows[0], row)) for row in rows[2:]]


def _code(cell: str) -> str:
    return cell.strip().strip("`")


class Records:
    """The records of a checkout the page is generated from; an absent record is None (or [])."""

    def __init__(self, root: Path):
        self.certificate = _read_json(root, CERTIFICATE)
        proofs = (root / PROOFS).read_text() if (root / PROOFS).is_file() else ""
        self.proofs = markdown_table(proofs, "## Proved for all d")
        self.by_hand = markdown_table(proofs, "## Steps argued by hand")
        self.table1 = _read_json(root, Path(TABLE1["run"]))
        self.scope = _read_json(root, SCOPE)


def _ds(ds) -> str:
    return ", ".join(str(d) for d in sorted(ds))


def certificate_parts(claim: Claim, certificate: dict | None) -> list[str]:
    """The verdict of a theorem claim from the certificate record, one part per outcome: per d, every item PASS
    (holds at that d), some FAIL (does not hold there), an UNDECIDED ball, or SKIP (a claim the certificate
    does not decide); each part's detail, if any, in parentheses after its verdict."""
    if certificate is None:
        return [f"undecided: no certificate recorded ({CERTIFICATE} absent)"]
    items = [c for c in certificate["certificates"] if c["claim"] == claim.key]
    if not items:
        return ["undecided: the certificate has no item of this claim"]
    by_d: dict[int, set[str]] = {}
    for c in items:
        by_d.setdefault(c["d"], set()).add(c["status"])
    fail = [d for d, s in by_d.items() if "FAIL" in s]
    undecided = [d for d, s in by_d.items() if "FAIL" not in s and "UNDECIDED" in s]
    passed = [d for d, s in by_d.items() if s == {"PASS"}]
    skipped = [d for d, s in by_d.items() if s == {"SKIP"}]
    parts = []
    if fail:
        failing = sorted({c["item"] for c in items if c["status"] == "FAIL"})
        parts.append(f"does not hold at d = {_ds(fail)} (FAIL: {'; '.join(failing)})")
    if undecided:
        parts.append(f"undecided at d = {_ds(undecided)} (a ball straddles its threshold)")
    at = f", epsilon = {certificate['epsilon']:g}" if "epsilon" in claim.hypotheses else ""
    if passed:
        parts.append(f"holds at d = {_ds(passed)}{at} (every item of the certificate PASS)")
    if skipped:
        notes = sorted({c["note"] for c in items if c["status"] == "SKIP"})
        parts.append(f"undecided: {'; '.join(notes)}")
    return parts


def certificate_verdict(claim: Claim, certificate: dict | None) -> str:
    return "; ".join(certificate_parts(claim, certificate))


def short(verdict_part: str) -> str:
    """A verdict without its detail in parentheses (the page's summary table)."""
    return verdict_part.split(" (")[0]


def _uses(row: dict[str, str], key: str) -> bool:
    used = row.get("used by (theory/claims.py)", "")
    return re.search(rf"(?<![\w]){re.escape(key)}(?![\w])", used) is not None


def certificate_source(claim: Claim, certificate: dict | None) -> str:
    if certificate is None:
        return "none recorded"
    items = [c for c in certificate["certificates"] if c["claim"] == claim.key]
    per_d = Counter(c["d"] for c in items)
    counts = "; ".join(f"{n} item{'s' if n > 1 else ''} at d = {d}" for d, n in sorted(per_d.items()))
    return (f"`{command(certificate['command'])}` at commit {(certificate.get('git_commit') or 'unknown')[:10]}: "
            f"{counts or 'no item of this claim'} ([certificate.json](certificate/certificate.json))")


def all_d_line(key: str, records: Records) -> str:
    """What docs/proofs.md proves for all d about a claim (its proofs, by the "used by" column) and the steps
    it argues by hand."""
    proofs = [r for r in records.proofs if _uses(r, key)]
    hand = [r for r in records.by_hand if _code(r.get("claim", "")) == key]
    parts = []
    if proofs:
        parts.append("proved for all d: " + "; ".join(f"`{_code(r['proof'])}` ({r['shown']}; {r['status']})"
                                                       for r in proofs))
    if hand:
        parts.append("argued by hand: " + "; ".join(r["step"] for r in hand))
    return ". ".join(parts) if parts else "no all-d proof of its parts in docs/proofs.md"


def lemma_verdict(lemma: Lemma, records: Records) -> str:
    """holds when every all-d proof of the lemma in docs/proofs.md PASSes (under the conditions it states);
    undecided when one does not go through, when none is recorded, or when the lemma is argued by hand."""
    if not lemma.proof:
        return f"undecided: argued by hand, not machine-checked ({lemma.by_hand})"
    rows = [r for r in records.proofs if _code(r["proof"]) == lemma.proof]
    if not rows:
        return f"undecided: no all-d proof `{lemma.proof}` recorded in {PROOFS}"
    failing = [r for r in rows if r["status"] != "PASS"]
    if failing:
        return "undecided: its proof does not go through (" + "; ".join(
            f"{r['method']}: {r['status']}" for r in failing) + f", {PROOFS})"
    ways = list(dict.fromkeys(f"for {r['domain']} ({r['method']})" for r in rows))
    return f"holds: proved {'; and '.join(ways)}; given the trusted ingredients and conditions {PROOFS} states"


def _theorem_block(claim: Claim, records: Records) -> list[str]:
    return [f"### {claim.name}", "",
            f"- **States**: {claim.hypotheses}; {claim.regime}: {claim.statement}.",
            f"- **Decided by**: {', '.join(f'`{n}`' for n in claim.decided_by)} (the module `{claim.check}`).",
            f"- **Certificate**: {certificate_source(claim, records.certificate)}.",
            f"- **Verdict**: {certificate_verdict(claim, records.certificate)}.",
            f"- **For all d**: {all_d_line(claim.key, records)}.",
            f"- **Explained in**: {_link(claim.doc)}.", ""]


def _lemma_block(lemma: Lemma, records: Records) -> list[str]:
    proof = f"`theory.proofs` proof `{lemma.proof}` (its steps in {_link(str(PROOFS))})" if lemma.proof \
        else "none: argued by hand"
    return [f"### {lemma.name}", "",
            f"- **States**: {lemma.statement}.",
            f"- **Decided by**: {', '.join(f'`{n}`' for n in lemma.decided_by)}.",
            f"- **Certificate**: {proof}.",
            f"- **Verdict**: {lemma_verdict(lemma, records)}.",
            f"- **Explained in**: {_link(lemma.doc)}.", ""]


def table1_cells(results: dict) -> list[dict]:
    """The cells of Table 1 the run speaks to, in ``verdicts.assess``'s order: its verdict dict with the kind
    of claim (``theory.claims.Table1Claim``) under "kind"."""
    return [v | {"kind": table1_claim(v["claim"])} for v in verdicts.assess(results)]


def cell_name(cell: dict) -> str:
    """A Table 1 cell in our words: the kind's name, then the row and the lag measure, if any."""
    where = cell["row"] + (f", {cell['measure']}" if cell.get("measure") else "")
    return f"{cell['kind'].name} ({where})"


def cell_verdict(cell: dict) -> str:
    if cell["verdict"] in ("holds", "does not hold"):
        return cell["verdict"]
    return f"{cell['verdict']}: {'; '.join(cell['reasons'])}"


def _table1_section(records: Records) -> list[str]:
    out = ["## Table 1, cell by cell", ""]
    doc = _link(TABLE1["doc"])
    if records.table1 is None:
        return out + [(f"Undecided: no run recorded (`{TABLE1['run']}` absent); the protocol and the verdicts' "
                       f"criteria are explained in {doc}."), ""]
    res = records.table1
    cfg = res["config"]
    out += [(f"**Run**: `{command(res['command'])}` at commit {(res.get('commit') or 'unknown')[:10]} "
             f"({_link(TABLE1['run'])}; d = {cfg['d']}, {cfg['seeds']} reported seeds, reading "
             f"`{res['reading']['name']}`). **Verdicts** by `numerics.experiments.verdicts.assess`, as {doc} "
             f"gives them, with the numbers and the criteria. A refused verdict is also checked by "
             f"`{TABLE1['refused_check']}`."), "",
            "| claim | decided by | verdict | evidence |", "|---|---|---|---|"]
    for cell in table1_cells(res):
        out.append(f"| {cell_name(cell)} | {_nodes(cell['kind'].decided_by)} | {cell_verdict(cell)} | "
                   f"{cell['evidence'] or '–'} |")
    return out + [""]


def scope_link(study: str, scope: dict | None) -> str:
    """The section of docs/scope.md on a study (its heading as app.render.scope.page writes it), or the page
    when the record is absent or does not have the study."""
    from numerics.scope import STUDIES

    if scope is None or study not in scope["studies"]:
        return _link(SCOPE_PAGE)
    title = scope["studies"][study]["title"]
    return _link(f"{SCOPE_PAGE}#{anchor(f'## {STUDIES.index(study) + 1}. {title} (`{study}`)')}")


def _open_block(question, scope: dict | None) -> list[str]:
    if scope is None or question.study not in scope["studies"]:
        run = f"none recorded (`{SCOPE}` has no study `{question.study}`)"
    else:
        study = scope["studies"][question.study]
        run = (f"study `{question.study}` of `{command(scope['command'])}` at commit "
               f"{(scope.get('commit') or 'unknown')[:10]} ({study['units']} units; "
               f"[scope.json](scope_full/scope.json))")
    return [f"### {question.name}", "",
            f"- **Asks**: {question.question}.",
            f"- **Checked by**: {', '.join(f'`{n}`' for n in question.decided_by)} (the study's computation).",
            f"- **Run**: {run}.",
            f"- **Verdict**: {OPEN}.",
            f"- **Explained in**: {scope_link(question.study, scope)}.", ""]


INTRO = """\
# Every claim of the paper, and what decides it

Generated by `occ-companion docs` from the claims table (`theory/claims.toml`) and the records named below
(do not edit by hand). The claims come in the order the paper makes them: the positive theorem, the
impossibility results, the lemmas they rest on, the finite-sample corollary, each cell of Table 1, then the
open questions a referee raises. Each names the pytest node ids that decide it, its certificate or run, its
verdict now and the section that explains it.

Words: **holds** and **does not hold** only where a record decides it, and only as far as it decides it (at
the d certified, for all d where proved); otherwise **undecided** or **refused**, with the reason; an open
question is studied, not claimed, and gets no verdict. *Certified* means an arb ball enclosure at one d
(`occ-companion prove`); *proved* a proof for every d (docs/proofs.md).
"""


def _table1_count(records: Records) -> str:
    if records.table1 is None:
        return "undecided: no run recorded"
    counts = Counter(cell["verdict"] for cell in table1_cells(records.table1))
    words = {"holds": "hold", "does not hold": "do not hold", "undecided": "undecided", "refused": "refused",
             "not testable": "not testable in this model class", "depends on tuning": "depend on tuning"}
    return ", ".join(f"{counts[v]} {w}" for v, w in words.items() if counts[v] or v not in ("not testable",
                                                                                          "depends on tuning"))


def summary_table(records: Records, positive: list[Claim], finite: Claim) -> list[str]:
    """Every claim with its verdict without the detail, in the page's order, linked to its section."""
    def row(name: str, verdict: str) -> str:
        return f"| [{name}](#{anchor(name)}) | {verdict} |"

    def theorem(c: Claim) -> str:
        return row(c.name, "; ".join(short(p) for p in certificate_parts(c, records.certificate)))

    cells = len(table1_cells(records.table1)) if records.table1 is not None else 0
    return ["## At a glance", "", "| claim | verdict |", "|---|---|",
            *[theorem(c) for c in positive],
            *[theorem(next(c for c in CLAIMS if c.key == key)) for key in IMPOSSIBILITY],
            *[row(lemma.name, short(lemma_verdict(lemma, records))) for lemma in LEMMAS],
            theorem(finite),
            f"| [Table 1, cell by cell](#table-1-cell-by-cell): {cells} cells | {_table1_count(records)} |",
            *[row(q.name, "open") for q in OPEN_QUESTIONS], ""]


def page(root: Path) -> str:
    """docs/claims.md for the checkout at ``root`` (its records under docs/)."""
    records = Records(root)
    by_key = {c.key: c for c in CLAIMS}
    positive = [c for c in CLAIMS if c.key not in IMPOSSIBILITY and c.key != "finite_sample"]
    lines = [INTRO, *summary_table(records, positive, by_key["finite_sample"]), "## The positive theorem", ""]
    for c in positive:
        lines += _theorem_block(c, records)
    lines += ["## The impossibility results", ""]
    for key in IMPOSSIBILITY:
        lines += _theorem_block(by_key[key], records)
    lines += ["## The lemmas", ""]
    for lemma in LEMMAS:
        lines += _lemma_block(lemma, records)
    lines += ["## The finite-sample corollary", "", *_theorem_block(by_key["finite_sample"], records)]
    lines += _table1_section(records)
    lines += ["## Open questions", "",
              "The paper does not claim these; the scope studies (`occ-companion scope`) examine them.", ""]
    for question in OPEN_QUESTIONS:
        lines += _open_block(question, records.scope)
    return "\n".join(lines).rstrip("\n") + "\n"
