"""``hvdbench --version`` prints the version a run's env record carries (with its commit from a checkout) and
exits 0, as every command line tool does."""

from __future__ import annotations

import pytest

from hvdbench.cli import main
from hvdbench.core.environment import hvdbench_version


def test_version_is_printed_not_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["--version"])
    assert ended.value.code == 0
    assert capsys.readouterr().out == f"hvdbench {hvdbench_version()}\n"
