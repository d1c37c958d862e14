"""Loading untrusted YAML: PyYAML's SafeLoader with every amplification bounded.

SafeLoader already refuses arbitrary objects; what it does not refuse is
cost. Aliases can make a few lines stand for an exponential graph ("billion
laughs"), nesting makes it recurse, and node counts make it slow. All three
are capped while composing and again on the alias-expanded graph. The result
is turned into JSON-compatible data, and error messages give positions only:
PyYAML's snippets could show a secret.
"""

from __future__ import annotations

import datetime
import json
import math

import yaml
from yaml.parser import ParserError
from yaml.reader import ReaderError
from yaml.scanner import ScannerError

from skyloop.bundles import limits
from skyloop.bundles._messages import BUNDLE_PREFIX, truncate
from skyloop.errors import InvalidInputError

__all__ = ["load_yaml"]


def load_yaml(content: bytes, path: str) -> object:
    """Parse one YAML document from ``path`` into JSON-compatible data, or raise a 400."""
    where = f"YAML in {path}"
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidInputError(f"{BUNDLE_PREFIX}{where} is not valid UTF-8") from None

    loader: _HardenedLoader | None = None
    try:
        loader = _HardenedLoader(text)
        node = loader.get_single_node()
        if node is None:
            raise InvalidInputError(f"{BUNDLE_PREFIX}{where} is empty")
        _check_node_graph(node)
        value = loader.construct_document(node)
    except _YamlLimitError as exc:
        raise InvalidInputError(f"{BUNDLE_PREFIX}{where} {exc}") from None
    except yaml.YAMLError as exc:
        raise InvalidInputError(f"{BUNDLE_PREFIX}{where}: {_yaml_problem(exc)}") from None
    except (ValueError, TypeError, OverflowError, RecursionError):
        raise InvalidInputError(f"{BUNDLE_PREFIX}{where} holds a value that cannot be loaded") from None
    finally:
        if loader is not None:
            loader.dispose()
    return _to_plain(value, path, "")


class _YamlLimitError(yaml.YAMLError):
    """A hardening limit was hit; the message is safe to show as-is."""


class _HardenedLoader(yaml.SafeLoader):
    """SafeLoader that counts aliases and nodes and bounds nesting while composing.

    Counting as events arrive stops an oversized document early instead of
    parsing all of it first.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._alias_count = 0
        self._node_count = 0
        self._depth = 0

    # PyYAML passes a node (not only an int, as its stubs say) for mapping
    # entries; the value is only handed back to it.
    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self._alias_count += 1
            if self._alias_count > limits.MAX_YAML_ALIASES:
                raise _YamlLimitError(f"uses too many aliases (more than {limits.MAX_YAML_ALIASES})")
            return super().compose_node(parent, index)
        self._node_count += 1
        if self._node_count > limits.MAX_YAML_NODES:
            raise _YamlLimitError(f"has too many nodes (more than {limits.MAX_YAML_NODES})")
        self._depth += 1
        try:
            if self._depth > limits.MAX_YAML_DEPTH:
                raise _YamlLimitError(f"nests deeper than {limits.MAX_YAML_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _check_node_graph(root: yaml.Node) -> None:
    """Refuse graphs whose alias-expanded size or depth exceeds the limits.

    PyYAML shares aliased nodes, so the composed graph stays small while its
    expansion (what validation and JSON encoding walk) can be exponential.
    Sizes are memoised per node, so this runs in time linear in the graph.
    """
    max_nodes, max_depth = limits.MAX_YAML_NODES, limits.MAX_YAML_DEPTH
    sizes: dict[int, tuple[int, int]] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        children = _node_children(node)
        if finished:
            on_path.discard(key)
            size = 1 + sum(sizes[id(child)][0] for child in children)
            depth = 1 + max((sizes[id(child)][1] for child in children), default=0)
            if size > max_nodes:
                raise _YamlLimitError(f"expands to too many nodes (more than {max_nodes})")
            if depth > max_depth:
                raise _YamlLimitError(f"nests deeper than {max_depth} levels once aliases are expanded")
            sizes[key] = (size, depth)
            continue
        if key in sizes:
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise _YamlLimitError("has an alias that refers to itself (recursive structure)")
            if id(child) not in sizes:
                stack.append((child, False))


def _node_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """Describe a YAML error by position only: PyYAML's snippet could show a secret."""
    if isinstance(exc, yaml.MarkedYAMLError):
        if "expected a single document" in (exc.context or ""):
            return "must hold a single document, found more than one"
        problem = truncate(
            exc.problem or exc.context or "malformed YAML", limits.MAX_SHOWN_YAML_PROBLEM_CHARS
        )
        kind = "syntax error" if isinstance(exc, ScannerError | ParserError) else "error"
        mark = exc.problem_mark or exc.context_mark
        if mark is not None:
            return f"{kind} at line {mark.line + 1}, column {mark.column + 1}: {problem}"
        return f"{kind}: {problem}"
    if isinstance(exc, ReaderError):
        return f"unacceptable character at position {exc.position}"
    return "malformed YAML"


def _to_plain(value: object, file: str, at: str) -> object:
    """Turn SafeLoader output into JSON-compatible data (what storage can hold).

    Dates become ISO strings and scalar keys become strings the way JSON
    encodes them; binary values, sets and non-finite numbers are refused.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{BUNDLE_PREFIX}non-finite number at {_where(at, file)}")
        return value
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, dict):
        result: dict[str, object] = {}
        for key, item in value.items():
            name = _plain_key(key, file, at)
            result[name] = _to_plain(item, file, f"{at}.{name}" if at else name)
        return result
    if isinstance(value, list):
        return [_to_plain(item, file, f"{at}[{i}]") for i, item in enumerate(value)]
    kind = "binary" if isinstance(value, bytes) else type(value).__name__
    raise InvalidInputError(f"{BUNDLE_PREFIX}unsupported {kind} value at {_where(at, file)}")


def _plain_key(key: object, file: str, at: str) -> str:
    """A mapping key as JSON would spell it; composite keys are refused."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    if isinstance(key, datetime.date):
        return key.isoformat()
    raise InvalidInputError(f"{BUNDLE_PREFIX}unsupported mapping key at {_where(at, file)}")


def _where(at: str, file: str) -> str:
    return f"{truncate(at, limits.MAX_SHOWN_LOCATION_CHARS) or 'top level'} (in {file})"
