"""The skyloop CDK app: one stack deploying what the local stack runs (see ``docs/deploy.md``)."""
