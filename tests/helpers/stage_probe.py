"""`python -m tests.helpers.stage_probe [wait|raise|exit N]`: what a stage process sees, for
tests/foundation/test_stagefork.py: its environment, working directory, argv, sys.path[0] and SIGINT handler.
`wait` then sleeps until SIGINT and stops cleanly; `raise` lets the KeyboardInterrupt end it; `exit N` exits N."""

import json
import os
import signal
import sys
import time

print(json.dumps({"probe": os.environ.get("RC1_PROBE"), "cwd": os.getcwd(), "argv": sys.argv[1:],
                  "path0": sys.path[0], "main": __name__,
                  "sigint_default": signal.getsignal(signal.SIGINT) is signal.default_int_handler}), flush=True)
mode = sys.argv[1] if len(sys.argv) > 1 else ""
if mode == "exit":
    sys.exit(int(sys.argv[2]))
if mode in ("wait", "raise"):
    try:
        print("ready", flush=True)
        time.sleep(60)
    except KeyboardInterrupt:
        if mode == "raise":
            raise
        print("stopped cleanly", flush=True)
        sys.exit(0)
    print("ran to its end", flush=True)
