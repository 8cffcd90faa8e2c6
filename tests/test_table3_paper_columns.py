"""configs/table3.py's PAPER columns (dev PPL, dev BLEU, params ×10^6) equal the paper's Table 3, every row.

The paper's numbers are read from ../shared/docs/PAPER.md's markdown table (not copied into this test), so a typo
on either side fails. "–" in the paper's column is None in PAPER.
"""

import re
from pathlib import Path

import pytest

from transformer_jax.configs import table3

PAPER_MD = Path(__file__).resolve().parents[1] / "../shared/docs/PAPER.md"  # always there (CI too)

COLUMNS = ("PPL (dev)", "BLEU (dev)", "params ×10^6")


def _number(cell: str) -> float | None:
    cell = cell.strip()
    if cell in ("–", "-", "—"):
        return None
    assert re.fullmatch(r"\d+(\.\d+)?", cell), f"unexpected Table 3 cell {cell!r}"
    return float(cell)


def parse_table3(text: str) -> dict[str, tuple[float | None, ...]]:
    """The rows of the markdown table under '## Table 3': {row: (PPL, BLEU, params)}."""
    section = text.split("## Table 3", 1)[1].split("\n## ", 1)[0]
    lines = [line.strip() for line in section.splitlines() if line.strip().startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert re.fullmatch(r"[-|\s]+", lines[1]), "expected the markdown separator row"
    index = [header.index(name) for name in COLUMNS]
    rows = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == len(header), f"ragged row: {line}"
        assert cells[0] not in rows, f"duplicate row {cells[0]}"
        rows[cells[0]] = tuple(_number(cells[i]) for i in index)
    return rows


@pytest.fixture(scope="module")
def paper() -> dict:
    return parse_table3(PAPER_MD.read_text(encoding="utf-8"))


def test_parser_reads_all_twenty_rows(paper):
    # base, A1–A4, B1–B2, C1–C7, D1–D4, E, big: the rows of the paper's Table 3.
    assert len(paper) == 20
    assert paper["base"] == (4.92, 25.8, 65.0) and paper["big"] == (4.33, 26.4, 213.0)


def test_same_rows_in_config_and_paper(paper):
    assert list(table3.PAPER) == list(paper)
    assert set(table3.ROWS) == set(paper)


@pytest.mark.parametrize("row", list(table3.PAPER))
def test_row_matches_paper(paper, row):
    ours = table3.PAPER[row]
    assert len(ours) == 3
    for name, value, expected in zip(COLUMNS, ours, paper[row]):
        if expected is None:
            assert value is None, f"{row} {name}: the paper gives none, config has {value}"
        else:
            assert value is not None and float(value) == pytest.approx(expected, abs=1e-9), \
                f"{row} {name}: config {value} vs paper {expected}"


def test_a_typo_is_caught(paper):
    """The parser really reads the numbers: one changed digit in the markdown changes the parse."""
    text = PAPER_MD.read_text(encoding="utf-8").replace("| 5.16 | 25.1 | 58 |", "| 5.16 | 25.1 | 59 |")
    assert parse_table3(text)["B1"] == (5.16, 25.1, 59.0) != paper["B1"]
