"""The fork server of the local Lambda runtime: import once, fork an environment per request.

Run as ``python -m skyloop.local.lambda_zygote ADDRESS`` by
:class:`skyloop.local.lambda_runtime.ProcessRuntime` (with the connection key in
``SKYLOOP_LAMBDA_AUTHKEY``). It imports what handlers need, connects to the
stack, and then, single-threaded, forks one child per ``("fork", name,
environment)`` it receives; each child connects back on its own and becomes
an execution environment (:mod:`skyloop.local.lambda_worker`). A new
environment therefore starts in milliseconds, already warm, and nothing of
the stack's own process (moto, its threads) is copied into it.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from multiprocessing.connection import Client


def main(address: str) -> None:
    authkey = os.environ.pop("SKYLOOP_LAMBDA_AUTHKEY").encode()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the stack, which closes our pipe
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    from skyloop.local import lambda_worker  # the preload: boto3, openai, Powertools, the handlers' code

    lambda_worker.preload()
    gc.freeze()  # the preloaded heap is never collected in children: their pages stay shared
    control = Client(address, family="AF_UNIX", authkey=authkey)
    control.send(("zygote", os.getpid()))
    while True:
        try:
            message = control.recv()
        except (EOFError, OSError):
            return
        _, token, function_name, environment = message
        if os.fork() == 0:
            control.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                conn = Client(address, family="AF_UNIX", authkey=authkey)
                conn.send(("worker", token, os.getpid()))
                lambda_worker.main(conn, function_name, environment)
            finally:
                os._exit(0)


if __name__ == "__main__":
    main("\0" + sys.argv[1])  # the runtime's abstract socket (argv cannot carry the NUL)
