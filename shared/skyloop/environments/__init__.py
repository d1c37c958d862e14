"""Hosted environments: a sandboxed workspace per session where the built-in tools run with no client.

``spec`` is what an agent (or a session) declares; ``paths`` keeps every path
inside ``/workspace``; ``port`` is the sandbox an engine gives (``local``:
bubblewrap on the machine of ``skyloop dev``; ``agentcore``: Amazon Bedrock
AgentCore Code Interpreter in the cloud); ``tools`` runs Bash, Read, Write,
Edit, Glob and Grep on a sandbox; ``service`` finds a session's sandbox and
makes its workspace on first use (files, env, setup).
"""
