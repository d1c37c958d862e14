"""Domain models shared by the API, the turn steps, the stream and the client."""

from skyloop.models.agent import Agent, AgentAuth, AgentExecutor, AgentLimits, AgentSpec

__all__ = ["Agent", "AgentAuth", "AgentExecutor", "AgentLimits", "AgentSpec"]
