"""bench/report.py: the figures the docs give for the benchmarks are the stored results,
rendered; the import goal is judged from the stored numbers."""

from __future__ import annotations

import copy
import json
import os
import statistics
import sys
from typing import Any, Dict

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

import report  # noqa: E402


def _stored(name: str) -> Dict[str, Any]:
    with open(os.path.join(REPO, "bench", "results", name)) as f:
        return json.load(f)


def _doc(name: str) -> str:
    with open(os.path.join(REPO, "docs", name)) as f:
        return f.read()


def test_benchmarks_md_is_the_stored_results_rendered() -> None:
    doc = _doc("benchmarks.md")
    text = report.markdown(_stored("results.json"))
    text = report.with_block(text, report.IMPORT_BLOCK,
                             report.import_markdown(_stored("import.json")))
    text = report.with_block(text, report.FLEET_BLOCK,
                             report.fleet_markdown(_stored("fleet.json")))
    text = report.with_block(text, report.CONTROLLER_BLOCK,
                             report.controller_markdown(_stored("controller.json")))
    text = report.with_block(text, report.CLI_COMMANDS_BLOCK,
                             report.cli_commands_markdown(_stored("cli_commands.json")))
    assert doc.rstrip("\n") == text.rstrip("\n"), (
        "docs/benchmarks.md differs from bench/results rendered: run bench/report.py "
        "--markdown docs/benchmarks.md --results ... --import ... --fleet ... --controller ... "
        "--cli-commands ...")


def test_cli_md_shows_the_stored_cli_run() -> None:
    block = report.block_of(_doc("cli.md"), report.CLI_STATUS_BLOCK)
    assert block == report.cli_status_markdown(_stored("cli_status.json"))


def test_stored_cli_commands_run_is_medians_of_interleaved_pairs() -> None:
    stored = _stored("cli_commands.json")
    assert stored["repeat"] >= 5 and stored["clusters"] == 100
    assert set(stored["pairs"]) == {"list", "list -l", "get -o yaml", "status"}
    for name, row in stored["pairs"].items():
        for side in ("tfk8s", "kubectl"):
            r = row[side]
            assert r["command"].startswith(side + " "), name
            assert len(r["samples_ms"]) == len(r["cpu_samples_ms"]) == stored["repeat"], name
            assert r["median_ms"] == statistics.median(r["samples_ms"]), name
            assert r["cpu_median_ms"] == statistics.median(r["cpu_samples_ms"]), name
        assert row["ratio_tfk8s_over_kubectl"] == \
            row["tfk8s"]["median_ms"] / row["kubectl"]["median_ms"], name
    assert stored["date"] and stored["versions"]["kubectl"]


def _with_import_peak(stored: Dict[str, Any], over_kb: int) -> Dict[str, Any]:
    out = copy.deepcopy(stored)
    bare = out["import"]["bare interpreter"]["median_peak_kb"]
    out["import"]["import tfk8s"]["median_peak_kb"] = bare + over_kb
    return out


def test_import_goal_is_judged_from_the_numbers() -> None:
    stored = _stored("import.json")
    under, over = _with_import_peak(stored, 10 * 1024), _with_import_peak(stored, 10 * 1024 + 103)
    assert report.import_goal_met(under) is True
    assert report.import_goal_met(over) is False
    assert "✅ met: (5) `import tfk8s` ≤ 10 MB peak RSS over bare: +10.0 MB" in \
        report.import_markdown(under)
    assert "❌ missed: (5) `import tfk8s` ≤ 10 MB peak RSS over bare: +10.1 MB" in \
        report.import_markdown(over)
    del under["import"]["import tfk8s"]
    assert report.import_goal_met(under) is None
    assert "⚪ (5) `import tfk8s` ≤ 10 MB peak RSS over bare: not measured" in \
        report.import_markdown(under)


def test_stored_import_result_is_a_median_of_at_least_five() -> None:
    stored = _stored("import.json")
    rows = {k: v for k, v in stored["import"].items() if not k.startswith("_")}
    assert stored["import"]["_repeat"] >= 5
    for name, row in rows.items():
        assert len(row["runs_peak_kb"]) == stored["import"]["_repeat"], name
        assert row["median_peak_kb"] == statistics.median(row["runs_peak_kb"]), name
    assert stored["machine"]["date"] and stored["machine"]["cpu"]
