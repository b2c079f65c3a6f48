import subprocess
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_version_and_help():
    out = subprocess.run([sys.executable, "-m", "gbinlog.cli", "--version"], capture_output=True,
                         text=True, check=True).stdout
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    assert out.strip() == f"gbinlog, version {declared}"
    assert declared == "0.2.0"
    out = subprocess.run([sys.executable, "-m", "gbinlog.cli", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "global binlog" in out


def test_every_command_is_listed_and_build_loads_neither_endpoint_nor_simulator():
    import importlib

    from gbinlog.cli import _Main

    for module_name in set(_Main.lazy.values()) - {"simulator.cli"}:
        names = {command.name for command in importlib.import_module(module_name).COMMANDS}
        listed = {name for name, module in _Main.lazy.items() if module == module_name}
        assert names == listed, module_name
    # a fresh process resolving `build` (what `gbinlog build` pays for at start) imports no server
    # or simulator module
    probe = ("import sys, click; from gbinlog.cli import main; "
             "main.get_command(click.Context(main), 'build'); "
             "print(sorted(m for m in sys.modules if m.startswith(('dumper.server', 'simulator', 'sqlglot'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    help_out = subprocess.run([sys.executable, "-m", "gbinlog.cli", "--help"], capture_output=True,
                              text=True, check=True).stdout
    for name in _Main.lazy:
        assert f"  {name} " in help_out
