import subprocess
import sys


def test_version_and_help():
    out = subprocess.run([sys.executable, "-m", "gbinlog.cli", "--version"], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "gbinlog, version 0.1.0"
    out = subprocess.run([sys.executable, "-m", "gbinlog.cli", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "global binlog" in out
