"""What ``skyloop dev`` keeps on disk between runs: tables, S3 objects, secrets (see ``datadir`` for the layout).

* :mod:`~skyloop.local.persistence.journal`: the record files, group commit, damage-tolerant reading;
* :mod:`~skyloop.local.persistence.datadir`: the directory, its format version and lock;
* :mod:`~skyloop.local.persistence.dynamodb`: the table, kept by the process that serves it;
* :mod:`~skyloop.local.persistence.services`: S3 and Secrets Manager, kept by the stack's process.

Step Functions executions are not kept; turns continue from the table
(:mod:`skyloop.local.recovery`).
"""

from skyloop.local.persistence.datadir import DEFAULT_DIR, FORMAT, DataDir, DataDirError, LoadReport
from skyloop.local.persistence.journal import JournalError

__all__ = ["DEFAULT_DIR", "FORMAT", "DataDir", "DataDirError", "JournalError", "LoadReport"]
