"""The agent a bundle or JSON body declares, validated as an ``AgentSpec``.

Two bundle layouts are accepted: exactly one ``<name>.yaml``/``.yml`` at
the root, or a directory bundle whose ``config.yaml`` sits at the root or
inside the single top-level directory (the rest of a directory bundle, tools
and skills, is checked by the archive scan but not read).
"""

from __future__ import annotations

from pydantic import ValidationError

from skyloop.bundles import limits
from skyloop.bundles._messages import BUNDLE_PREFIX, SPEC_PREFIX, format_validation_error, kind, show
from skyloop.bundles.archive import BundleScan, scan_bundle
from skyloop.bundles.yaml_safety import load_yaml
from skyloop.errors import InvalidInputError, PayloadTooLargeError
from skyloop.models.agent import SPEC_KEYS, AgentSpec, unknown_keys

__all__ = ["load_agent_bundle", "load_agent_spec_dict"]

_CONFIG_YAML = "config.yaml"
_YAML_SUFFIXES = (".yaml", ".yml")


def load_agent_bundle(data: bytes) -> AgentSpec:
    """Validate an uploaded bundle (a gzipped or plain tar) and return the agent it declares."""
    scan = scan_bundle(data, keep=_is_spec_candidate, max_kept_bytes=limits.MAX_YAML_BYTES)
    path = _choose_spec_file(scan)
    content = scan.kept[path]
    if content is None:
        raise PayloadTooLargeError(
            f"{BUNDLE_PREFIX}{path} is larger than the {limits.MAX_YAML_BYTES} byte limit for agent YAML"
        )
    raw_spec = load_yaml(content, path)
    return _validate_spec(raw_spec, BUNDLE_PREFIX, f" (in {path})")


def load_agent_spec_dict(raw: object) -> AgentSpec:
    """Validate an agent spec that arrived as JSON (``POST /v1/agents``)."""
    return _validate_spec(raw, SPEC_PREFIX, "")


def _is_spec_candidate(path: str) -> bool:
    """Root-level YAML files and ``<dir>/config.yaml`` may turn out to be the spec."""
    parts = path.split("/")
    if len(parts) == 1:
        return path.lower().endswith(_YAML_SUFFIXES) and not path.startswith(".")
    return len(parts) == 2 and parts[1] == _CONFIG_YAML


def _choose_spec_file(scan: BundleScan) -> str:
    """Pick the spec among the candidates, or say why the layout is ambiguous."""
    if _CONFIG_YAML in scan.files:
        return _CONFIG_YAML
    root_yaml = sorted(p for p in scan.kept if "/" not in p)
    if len(root_yaml) == 1:
        return root_yaml[0]
    if len(root_yaml) > 1:
        listed = ", ".join(show(p) for p in root_yaml[: limits.MAX_LISTED_ROOT_YAML])
        raise InvalidInputError(
            f"{BUNDLE_PREFIX}several YAML files at the root ({listed}) and no config.yaml; "
            "expected exactly one <name>.yaml or a directory bundle with config.yaml"
        )
    visible_roots = {root for root in scan.roots if not root.startswith(".")}
    if len(visible_roots) == 1:
        (top,) = visible_roots
        nested = f"{top}/{_CONFIG_YAML}"
        if nested in scan.files:
            return nested
    raise InvalidInputError(
        f"{BUNDLE_PREFIX}no agent YAML found; expected one <name>.yaml at the root, "
        "or config.yaml at the root or inside a single top-level directory"
    )


def _validate_spec(raw: object, prefix: str, where: str) -> AgentSpec:
    """``AgentSpec`` validation with messages that name fields, never values."""
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{prefix}the top level must be a mapping, got {kind(raw)}{where}")
    if raw.get("name") in (None, ""):
        raise InvalidInputError(f"{prefix}missing required field 'name'{where}")
    unknown = unknown_keys(raw)
    if unknown:
        raise InvalidInputError(
            f"{prefix}unknown key {unknown[0]!r}{where} (an agent spec has: {', '.join(sorted(SPEC_KEYS - {'openai', 'anthropic'}))}; "
            "omnigent's config keys are kept as given)",
            param=unknown[0],
        )
    try:
        return AgentSpec.model_validate(raw)
    except ValidationError as exc:
        raise InvalidInputError(f"{prefix}{format_validation_error(exc)}{where}") from None
