"""Run every benchmark: ``python -m bench`` (``make bench``). Numbers are printed, not asserted."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path


def main() -> int:
    """Run each ``bench/*_bench.py`` module as its own process; non-zero if one failed."""
    folder = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(folder)]) if m.name.endswith("_bench"))
    failed = 0
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        failed |= subprocess.run([sys.executable, "-m", f"bench.{name}"], check=False).returncode
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
