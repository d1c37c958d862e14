"""One thing AWS would refuse, as a value: checks return lists of these instead of raising.

A run reports every finding at once (a deploy that fails on the first of five
problems costs five round trips through CloudFormation).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Finding(BaseModel):
    """``rule`` is stable (tests assert it); ``resource`` says where; ``message`` says what and the limit."""

    model_config = ConfigDict(frozen=True)

    rule: str
    resource: str
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.resource}: {self.message}"

    def within(self, prefix: str) -> Finding:
        """The same finding, located inside ``prefix`` (a state machine's definition inside its resource)."""
        return Finding(rule=self.rule, resource=f"{prefix} {self.resource}", message=self.message)


def format_findings(findings: list[Finding]) -> str:
    """A readable report: one line per finding, grouped by rule."""
    lines = [f"{len(findings)} finding(s) AWS would refuse at deploy or call time:"]
    lines += [f"  {f}" for f in sorted(findings, key=lambda f: (f.rule, f.resource))]
    return "\n".join(lines)
