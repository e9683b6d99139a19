"""simcore._compat: the 3.x module paths still import, with a DeprecationWarning, for one release."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from simcore import _compat

GOLDEN = Path(__file__).parent / "golden" / "scenario_api.json"


def old_paths() -> list[str]:
    """Every module path the 3.x Scenario API published, and the old top-level modules."""
    golden = json.loads(GOLDEN.read_text())
    refs = {ref.partition(":")[0] for version, surface in golden.items() if version.startswith("3.") for ref in surface}
    return sorted(({r for r in refs if r.startswith("simcore.")} | set(_compat.MOVED)))


@pytest.mark.parametrize("old", old_paths())
def test_an_old_module_path_still_imports_and_gives_the_same_objects(old):
    new = _compat.MOVED.get(old, old)
    if old in _compat.MOVED:
        # Imported afresh, so that it warns here, and the warning is this test's (the suite prints none).
        sys.modules.pop(old, None)
        with pytest.warns(DeprecationWarning, match=f"^{old} is deprecated since simcore 4 .* import from {new} "):
            module = importlib.import_module(old)
    else:
        module = importlib.import_module(old)
    target = importlib.import_module(new)
    public = [k for k in vars(target) if not k.startswith("_")]
    assert public and all(getattr(module, k) is getattr(target, k) for k in public)


def test_a_3_0_style_import_works_and_warns_once_naming_the_new_path():
    code = ("import warnings; warnings.simplefilter('always')\n"
            "from simcore.kernel import World\nfrom simcore.scenario import load_scenario\n"
            "from simcore.sim.kernel import World as W2\n"
            "assert World is W2 and load_scenario('context_corrosion').name == 'context_corrosion'\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = [x for x in res.stderr.splitlines() if "DeprecationWarning" in x]
    assert len(lines) == 2, res.stderr
    assert "simcore.kernel is deprecated" in lines[0] and "import from simcore.sim.kernel" in lines[0]
    assert "simcore.scenario is deprecated" in lines[1] and "import from simcore.runs.scenario" in lines[1]


def test_the_warning_is_a_deprecation_warning():
    sys.modules.pop("simcore.messages", None)
    with pytest.warns(DeprecationWarning, match="simcore.messages is deprecated"):
        importlib.import_module("simcore.messages")
