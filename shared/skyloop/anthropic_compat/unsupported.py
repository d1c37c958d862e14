"""Claude Managed Agents resources skyloop does not serve: a 400 naming the feature, not a bare 404.

skyloop runs agents in the user's own AWS account with the user's own model; what only Anthropic's
platform has is refused by name (``docs/anthropic.md`` lists the same table). Any other unknown path
under ``/anthropic`` is a 404 in Anthropic's error shape.
"""

from __future__ import annotations

from skyloop.anthropic_compat.errors import UnsupportedFeatureError

# by the path segment that names them, after /anthropic/v1/ (or after /sessions/{id}/)
PATH_FEATURES = {
    "threads": "session threads (multiagent)",
    "resources": "session resources (repositories, files, memory stores)",
    "vaults": "vaults and their credentials",
    "skills": "skills",
    "memory_stores": "memory stores",
    "deployments": "deployments",
    "messages": "the Messages API (/v1/messages)",
    "files": "the Files API",
    "models": "the Models API",
    "user_profiles": "user profiles",
}


def for_path(path: str) -> UnsupportedFeatureError | None:
    parts = path.strip("/").split("/")
    for segment in parts[2:]:
        feature = PATH_FEATURES.get(segment)
        if feature is not None:
            return UnsupportedFeatureError(feature)
    return None
