"""docs/reliability.md names every fault scenario of tests/system/test_faults.py, and only
those, so its figures and commands stay tied to tests that exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_reliability_page_names_every_fault_scenario_and_no_other() -> None:
    tree = ast.parse((ROOT / "tests/system/test_faults.py").read_text())
    scenarios = {node.name for node in tree.body
                 if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}
    page = (ROOT / "docs/reliability.md").read_text()
    named = set(re.findall(r"`(test_\w+)`", page))
    assert named == scenarios


def test_each_command_on_the_reliability_page_selects_a_fault_scenario() -> None:
    tree = ast.parse((ROOT / "tests/system/test_faults.py").read_text())
    scenarios = [node.name for node in tree.body
                 if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]
    # A selection may name a parameter's id (-k mysql): pytest matches those too.
    scenarios += [constant.value for node in tree.body if isinstance(node, ast.FunctionDef)
                  for decorator in node.decorator_list for constant in ast.walk(decorator)
                  if isinstance(constant, ast.Constant) and isinstance(constant.value, str)]
    page = (ROOT / "docs/reliability.md").read_text()
    selections = re.findall(r'test_faults\.py -q -k "?([^"\n]+?)"?$', page, re.MULTILINE)
    assert selections
    for selection in selections:
        words = re.split(r"\s+or\s+", selection)
        assert all(any(word in name for name in scenarios) for word in words), selection
