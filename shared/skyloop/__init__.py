"""skyloop: serverless agent sessions on AWS, speaking the omnigent sessions contract."""

__version__ = "0.1.0"
