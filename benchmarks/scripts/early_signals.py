"""Signal a command at every moment of its start-up and say what each run ended with: exit code, and one line / a traceback / nothing on stderr.

    .venv/bin/python benchmarks/scripts/early_signals.py SIGINT 600 .venv/bin/fleetplan solve FILE

sends the signal 0, 20, 40, ... ms (up to the second argument) after starting the command, one
fresh process each, and prints each (exit code, what stderr held) with the range of delays.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time


def main() -> None:
    signum = getattr(signal, sys.argv[1])
    until_ms, command = int(sys.argv[2]), sys.argv[3:]
    results: dict[tuple[int, str], list[int]] = {}
    for delay_ms in range(0, until_ms, 20):
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(delay_ms / 1000)
        process.send_signal(signum)
        error = process.communicate(timeout=60)[1].decode()
        kind = "traceback" if "Traceback" in error else ("one line" if error.strip() else "silent")
        results.setdefault((process.returncode, kind), []).append(delay_ms)
    for (code, kind), delays in sorted(results.items(), key=lambda item: item[1][0]):
        print(f"exit {code}, {kind}: {delays[0]}-{delays[-1]} ms ({len(delays)} runs)")


if __name__ == "__main__":
    main()
