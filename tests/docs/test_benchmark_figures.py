"""The README's performance table repeats rows of the benchmarks page's results table,
figure for figure, so the front door never shows an older run than the page."""

import itertools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def table_after(text: str, marker: str) -> dict[str, list[str]]:
    """measure -> its other cells, from the Markdown table that follows `marker`."""
    lines = text[text.index(marker) :].splitlines()[1:]
    rows = list(itertools.takewhile(lambda line: line.startswith("|"), lines))
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert cells[0][0] == "measure"
    assert set(cells[1][0]) <= {"-", " "}
    return {row[0]: row[1:] for row in cells[2:]}


def test_the_readme_shows_the_benchmark_pages_figures() -> None:
    readme = table_after((ROOT / "README.md").read_text(), "<!-- benchmark-figures:")
    page = table_after(
        (ROOT / "docs" / "performance" / "benchmarks.md").read_text(), "<!-- results-table:"
    )
    assert len(readme) >= 6
    for measure, (ours, peer) in readme.items():
        assert measure in page, f"{measure!r} is not a row of the benchmarks page"
        assert page[measure][:2] == [ours, peer], measure


def test_the_benchmarks_page_is_current_results_only() -> None:
    text = (ROOT / "docs" / "performance" / "benchmarks.md").read_text()
    assert len(text.split()) <= 2500
    assert "## Soak" in text
