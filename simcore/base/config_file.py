"""Config files: ``--config FILE`` read as YAML, or the name of a config a scenario ships.

A file is read strictly (a key given twice is an error, where YAML would keep the
last value) and every problem is one line naming the file. A scenario ships
configs as ``configs/NAME.yaml`` beside its config class; ``--config NAME`` finds them.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from simcore.base.config import Config, ConfigError


def load_config_file(path: str) -> dict[str, Any]:
    """Read a YAML config file into a mapping.

    Raises:
        ConfigError: one line naming the file, for a file that is missing,
            unreadable, not UTF-8, empty, not YAML, not a mapping, or that repeats
            a key (YAML would silently keep the last value).
    """
    import yaml

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config: file {path!r} not found")
    try:
        text = p.read_bytes().decode("utf-8")
        data = yaml.load(text, Loader=_unique_key_loader())
    except OSError as exc:
        raise ConfigError(f"config: cannot read {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config: {path!r} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "syntax error"
        if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
            first = f"{exc.problem or exc.context or first} (line {exc.problem_mark.line + 1})"
        raise ConfigError(f"config: invalid YAML in {path!r}: {first}") from None
    except (ValueError, RecursionError) as exc:  # an over-long integer, nesting past the limit
        problem = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(":")[0]
        raise ConfigError(f"config: invalid YAML in {path!r}: {problem}") from None
    if data is None:
        raise ConfigError(f"config: {path!r} is empty; give it field: value lines, or leave out --config")
    if not isinstance(data, dict):
        raise ConfigError(f"config: {path!r} must hold a mapping of field names to values")
    return data


@lru_cache(maxsize=1)
def _unique_key_loader() -> type:
    """A yaml SafeLoader that refuses a key given twice in one mapping (built on first use)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            if isinstance(node, yaml.MappingNode):
                self.flatten_mapping(node)  # resolve "<<" merge keys first
            seen: list[Any] = []
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.append(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def shipped_configs(config_type: type[Config]) -> dict[str, Path]:
    """The configs a scenario ships, by name: ``configs/NAME.yaml`` beside its config class."""
    found: dict[str, Path] = {}
    for cls in config_type.__mro__:  # a derived config (a perturbation variant) finds its base's
        if not issubclass(cls, Config) or cls is Config:
            continue
        where = getattr(sys.modules.get(cls.__module__), "__file__", None)
        for path in sorted(Path(where).parent.glob("configs/*.yaml")) if where else ():
            found.setdefault(path.stem, path)
    return found


def config_file(config_type: type[Config], value: str) -> str:
    """``--config``: a YAML file's path, or the name of a shipped config (a file wins)."""
    if Path(value).is_file():
        return value
    shipped = shipped_configs(config_type)
    if value in shipped:
        return str(shipped[value])
    if shipped and Path(value).name == value and Path(value).suffix not in (".yaml", ".yml"):
        raise ConfigError(f"config: no file {value!r} and no shipped config of that name; "
                          f"shipped: {', '.join(shipped)}")
    return value
