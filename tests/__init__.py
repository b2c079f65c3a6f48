"""The test suite. ``REAL_DN``: the two binlog fragments written by real PolarDB-X DNs, with the
README that names what is at each offset (fixtures/real-dn/README.md)."""

from pathlib import Path

REAL_DN = Path(__file__).resolve().parents[1] / "fixtures" / "real-dn"
