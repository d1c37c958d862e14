"""What AWS would refuse at deploy or call time, found at synth: pure Python, no CDK import.

``check_assembly(cdk.out)`` runs every check over a synthesized cloud assembly
(``infra/app.py`` does, right after synth); ``asl.check_definition`` and
``template.check_template`` check one definition or template. Each returns a list
of ``Finding`` (rule, resource, message), never raises on a finding, so one run
reports everything. ``docs/deploy.md`` lists the checks and their sources.
"""

from __future__ import annotations

from infra.checks.asl import check_definition, check_definition_text
from infra.checks.findings import Finding, format_findings
from infra.checks.template import check_assembly, check_template

__all__ = [
    "Finding",
    "check_assembly",
    "check_definition",
    "check_definition_text",
    "check_template",
    "format_findings",
]
