"""Experiments, one package each; run any with ``python -m scenarios.<name> --help``."""

import sys


class _UnknownScenarioFinder:
    """Turns ``python -m scenarios.<typo>`` into one line listing the scenarios.

    It sits last on ``sys.meta_path``, so it is asked only about modules no other
    finder has, and it speaks only while ``python -m`` is looking for its module
    (``sys.argv[0]`` is ``"-m"`` until the module is found); an ``import`` of a
    missing module raises ImportError as usual.
    """

    busy = False  # load_scenario looks modules up too: answer those as "not found"

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        head, dot, rest = fullname.partition(".")
        if cls.busy or head != __name__ or not dot or "." in rest or sys.argv[:1] != ["-m"]:
            return None
        from simcore.scenario import ScenarioNotFound, load_scenario

        cls.busy = True
        try:
            load_scenario(rest)
        except ScenarioNotFound as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        finally:
            cls.busy = False
        return None


if not any(isinstance(f, _UnknownScenarioFinder) for f in sys.meta_path):
    sys.meta_path.append(_UnknownScenarioFinder())
