"""Untrusted agent uploads: multipart bodies, gzipped tar bundles and their YAML.

Everything here reads attacker-controlled bytes, so every step is bounded:
the request body, the compressed bundle, what it expands to, the number of
tar members, tar extension headers, the YAML file and the YAML node graph
(all in ``limits``). Nothing is ever extracted to disk; the tar is read as a
stream and only the agent YAML is kept in memory. Every refusal is a
``SkyloopError`` (400, 413 or 415) whose message names the problem without
echoing secrets.

One module per concern:

- ``multipart``: ``multipart/form-data`` bodies;
- ``archive``: the tar stream (unsafe members, gzip bombs, pax headers);
- ``yaml_safety``: YAML with alias, node and depth limits;
- ``spec``: the agent a bundle or JSON body declares;
- ``metadata``: the session ``metadata`` form field;
- ``limits``: every size and count limit, each with its reason.

The limits are re-exported here for reading; to change one (in a test), set
it on ``skyloop.bundles.limits``.
"""

from __future__ import annotations

from skyloop.bundles.archive import build_bundle
from skyloop.bundles.limits import (
    MAX_BUNDLE_BYTES,
    MAX_BUNDLE_FILES,
    MAX_BUNDLE_UNCOMPRESSED_BYTES,
    MAX_FORM_PARTS,
    MAX_METADATA_BYTES,
    MAX_REQUEST_BYTES,
    MAX_TAR_EXTENSION_HEADER_BYTES,
    MAX_TAR_EXTENSION_HEADERS_TOTAL_BYTES,
    MAX_YAML_ALIASES,
    MAX_YAML_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
)
from skyloop.bundles.metadata import SessionMetadata, parse_session_metadata
from skyloop.bundles.multipart import MultipartForm, UploadedFile, parse_multipart_form
from skyloop.bundles.spec import load_agent_bundle, load_agent_spec_dict

__all__ = [
    "MAX_BUNDLE_BYTES",
    "MAX_BUNDLE_FILES",
    "MAX_BUNDLE_UNCOMPRESSED_BYTES",
    "MAX_FORM_PARTS",
    "MAX_METADATA_BYTES",
    "MAX_REQUEST_BYTES",
    "MAX_TAR_EXTENSION_HEADERS_TOTAL_BYTES",
    "MAX_TAR_EXTENSION_HEADER_BYTES",
    "MAX_YAML_ALIASES",
    "MAX_YAML_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
    "MultipartForm",
    "SessionMetadata",
    "UploadedFile",
    "build_bundle",
    "load_agent_bundle",
    "load_agent_spec_dict",
    "parse_multipart_form",
    "parse_session_metadata",
]
