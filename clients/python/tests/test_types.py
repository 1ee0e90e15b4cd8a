"""The README's example type-checks under `mypy --strict`, and reading a key that an event's
type does not have does not: the TypedDicts are real, not `Any`."""
from __future__ import annotations

import re
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WRONG = '''from callbackd_client import StreamEvent


def output_of(event: StreamEvent) -> str:
    if event["type"] == "tool_started":
        return event["output"]  # a tool_started event has no output
    return ""
'''


def test_readme_example_passes_and_a_missing_key_fails_mypy(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- mypy -->", 1)[1]
    m = re.search(r"```python\n(.*?)```", block, re.S)
    assert m, "README.md has no python block after <!-- mypy -->"
    (tmp_path / "readme_example.py").write_text(m.group(1))
    (tmp_path / "wrong.py").write_text(WRONG)
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "readme_example.py", "wrong.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         # mypy does not follow setuptools' editable-install finder: point it at the package.
                         env={**os.environ, "MYPYPATH": str(ROOT)})
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert not [e for e in errors if e.startswith("readme_example.py")], out.stdout
    assert errors and all(e.startswith("wrong.py:6:") for e in errors), out.stdout
    assert any('TypedDict "ToolStartedEvent" has no key "output"' in e for e in errors), out.stdout


STATUS_WRONG = '''from callbackd_client.schema import Session


def sleeping(s: Session) -> bool:
    return s.get("status") == "sleeping"
'''

STATUS_GOOD = '''from typing import get_args

from callbackd_client.schema import Session, SessionStatus


def label(s: Session) -> str:
    status: SessionStatus | None = s.get("status")
    return status or "unknown"


assert set(get_args(SessionStatus)) == {"idle", "running", "error", "archived"}
'''


def test_a_session_status_is_a_literal_of_its_four_values(tmp_path: Path) -> None:
    from typing import get_args
    from callbackd_client.schema import SessionStatus
    assert set(get_args(SessionStatus)) == {"idle", "running", "error", "archived"}
    (tmp_path / "good.py").write_text(STATUS_GOOD)
    (tmp_path / "wrong.py").write_text(STATUS_WRONG)
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--strict-equality", "--no-incremental",
                          "good.py", "wrong.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "MYPYPATH": str(ROOT)})
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert errors and all(e.startswith("wrong.py:5:") for e in errors), out.stdout
    assert any("Non-overlapping equality check" in e for e in errors), out.stdout
