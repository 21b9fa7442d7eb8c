"""docs/observability.md lists exactly the metrics redrive exports, and the
shipped alerting rules name only metrics that exist."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from redrive import App
from redrive.metrics import Metrics

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _exported(tmp_path) -> set[str]:
    app = App(f"sqlite:///{tmp_path / 'redrive.db'}")
    metrics = Metrics(app)
    names = set()
    for family in metrics.registry.collect():
        names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    app.close()
    return names


def test_the_documented_metrics_are_the_exported_ones(tmp_path) -> None:
    documented = set(re.findall(r"^\| `(redrive_\w+)`", (DOCS / "observability.md").read_text(), re.MULTILINE))
    assert documented == _exported(tmp_path)


def test_the_alerting_rules_name_only_metrics_that_exist(tmp_path) -> None:
    rules = yaml.safe_load((DOCS / "prometheus-rules.yml").read_text())["groups"][0]["rules"]
    assert [r["alert"] for r in rules] == ["JobFailureRateOver1Percent", "JobDurationP95Over5Minutes",
                                          "QueueDepthOver1000", "DuplicateOffersCreated"]
    exported = _exported(tmp_path)
    for rule in rules:
        for name in re.findall(r"\b(redrive_\w+?)(?:_bucket|_count|_sum)?\b(?=[\[{(\s)])", rule["expr"]):
            assert name in exported, (rule["alert"], name)
