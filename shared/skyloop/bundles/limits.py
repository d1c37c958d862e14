"""Every size and count limit on an untrusted upload, in one place.

Each one bounds what a single request may cost a Lambda (memory, CPU, time)
or how much of the caller's input an error message may echo back. The other
modules read them as ``limits.NAME`` when they run, so a test can lower one
with ``monkeypatch.setattr(limits, "NAME", value)``; patching the copy that
``skyloop.bundles`` re-exports has no effect. Two groups are fixed at import
instead: the boundary length (compiled into a pattern) and the title and
label limits (built into the pydantic model).
"""

from __future__ import annotations

from typing import Final

KiB: Final = 1024
MiB: Final = 1024 * KiB

# ---------------------------------------------------------------- request body and form (multipart.py)

# Lambda's synchronous payload limit: a larger body never reaches the function behind API Gateway.
MAX_REQUEST_BYTES: Final = 6 * MiB
# A session-create form has two parts; thousands of tiny parts would only cost parse time.
MAX_FORM_PARTS: Final = 16
# RFC 2046: a multipart boundary is 1 to 70 characters.
MAX_BOUNDARY_CHARS: Final = 70

# ---------------------------------------------------------------- bundle archive (archive.py)

# The compressed bundle; leaves room for multipart framing and metadata inside MAX_REQUEST_BYTES.
MAX_BUNDLE_BYTES: Final = 5 * MiB
# Member data once inflated: caps memory and CPU whatever the ratio (deflate reaches ~1000:1 on zeros).
MAX_BUNDLE_UNCOMPRESSED_BYTES: Final = 20 * MiB
# Tar headers, padding and pax records may take the inflated stream past the member-data cap by this much.
TAR_FRAMING_ALLOWANCE: Final = 4 * MiB
# A bundle is a YAML plus a few tools and skills; thousands of members only slow the scan down.
MAX_BUNDLE_FILES: Final = 1000
# tarfile parses pax/GNU long-name records with regexes quadratic on some inputs (CVE-2024-6232).
MAX_TAR_EXTENSION_HEADER_BYTES: Final = 4 * KiB
# The same cost summed over an archive: many headers each under the per-header cap.
MAX_TAR_EXTENSION_HEADERS_TOTAL_BYTES: Final = 256 * KiB
# Most the inflater produces per read, so a gzip bomb is caught one bounded chunk at a time.
READ_CHUNK_BYTES: Final = 64 * KiB

# ---------------------------------------------------------------- agent YAML (yaml_safety.py, spec.py)

# PyYAML's pure-Python loader is slow; real specs are far smaller (the prompt is capped at 200k chars).
MAX_YAML_BYTES: Final = 256 * KiB
# "Billion laughs": a few aliases can stand for an exponentially large object graph.
MAX_YAML_ALIASES: Final = 100
# Nodes after alias expansion (what validation walks); PyYAML does ~20k/s, so this caps a parse at ~1 s.
MAX_YAML_NODES: Final = 20_000
# Deep nesting makes PyYAML's composer, and anything walking the result, recurse.
MAX_YAML_DEPTH: Final = 64

# ---------------------------------------------------------------- session metadata (metadata.py)

# The whole metadata JSON string: title and labels are small by contract.
MAX_METADATA_BYTES: Final = 64 * KiB
# A session title is a line of text for listings, not a document.
MAX_TITLE_CHARS: Final = 512
# Labels are for filtering; 50 of them is ample and bounds the stored item.
MAX_LABELS: Final = 50
# A label key is an identifier; bounded so one label cannot fill the item.
MAX_LABEL_KEY_CHARS: Final = 256
# A label value is a short tag; same bound as the key.
MAX_LABEL_VALUE_CHARS: Final = 256

# ---------------------------------------------------------------- error messages (_messages.py and callers)

# A caller-supplied name (member, field, file) quoted in a message; keeps 400 bodies small.
MAX_SHOWN_NAME_CHARS: Final = 120
# Text of a tarfile/gzip/zlib exception quoted in a message; it can embed header bytes.
MAX_SHOWN_EXCEPTION_CHARS: Final = 120
# A field path (``executor.auth.base_url``) or YAML location quoted in a message.
MAX_SHOWN_LOCATION_CHARS: Final = 200
# PyYAML's description of a syntax error (never its snippet, which could hold a secret).
MAX_SHOWN_YAML_PROBLEM_CHARS: Final = 200
# One pydantic validation message (custom validators may write long ones).
MAX_SHOWN_VALIDATION_MESSAGE_CHARS: Final = 300
# Validation errors listed before "and N more": a bad spec can yield hundreds.
MAX_LISTED_ERRORS: Final = 10
# Root YAML files named when a bundle has several and no config.yaml.
MAX_LISTED_ROOT_YAML: Final = 5
