"""The documentation's Python snippet (docs/bridge.md, "Using callbackd with the Python SDK") is
the file the end-to-end tests execute, character for character."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_python_snippet_is_the_tested_file():
    readme = (ROOT / "docs" / "bridge.md").read_text()
    snippet = (ROOT / "tests/e2e/snippets/python_sdk_attach.py").read_text()
    assert "```python\n" + snippet + "```" in readme
