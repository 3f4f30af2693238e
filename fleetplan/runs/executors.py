"""Executors: run cells and hand each row over as soon as it is in.

* :func:`run_local` keeps up to ``workers`` child processes busy on this machine, one cell per
  process (:class:`~fleetplan.runs.cells.CellProcess`), killing any past its limit.
* :func:`run_dask` submits one task per cell to a Dask cluster; each task runs the very same
  child-process function on a worker, so the two executors' tables differ only in timings.

Both call ``on_row(cell, row)`` from the calling thread as rows arrive, and ``on_start(cell)``
when a cell is handed out, which is what the progress display and the CSV writer listen to.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fleetplan.errors import raise_interruption
from fleetplan.instances import InstanceError
from fleetplan.runs.cells import (
    COLUMNS,
    DEFAULT_GRACE_S,
    Cell,
    CellProcess,
    base_row,
    error_row,
    run_cell,
    run_cell_isolated,
)

OnRow = Callable[[Cell, dict[str, Any]], None]
OnStart = Callable[[Cell], None]
POLL_INTERVAL_S = 0.02


def _nothing(cell: Cell) -> None:
    """Default ``on_start``: nobody is listening."""


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait while a child is being started: an interrupt in the middle of
    the forkserver's handshake left a child the parent did not know of (it wrote into a folder
    already removed) or a forkserver printing a traceback. The signal is
    delivered right after, with the child in the list of those to stop."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def note(signum: int, frame: object) -> None:
        received.append(signum)

    # Handlers that only note the signal (a mask would not do: any other thread of the process
    # may take a process-directed signal and have the main thread run the handler).
    previous = {number: signal.signal(number, note) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if received:
            signal.raise_signal(received[0])


def run_local(cells: Sequence[Cell], on_row: OnRow, *, workers: int = 1,
              grace_s: float = DEFAULT_GRACE_S, on_start: OnStart = _nothing) -> None:
    """Run ``cells`` in at most ``workers`` concurrent child processes.

    On KeyboardInterrupt every running child is killed before the exception propagates, so an
    interrupted sweep leaves no stray solver behind; finished rows were already handed over.
    """
    if workers < 1:
        raise InstanceError("workers", "must be at least 1")
    waiting = deque(cells)
    running: list[CellProcess] = []
    try:
        while waiting or running:
            while waiting and len(running) < workers:
                cell = waiting.popleft()
                with _signals_held():
                    process = CellProcess(cell, grace_s)
                    running.append(process)
                    process.start()
                on_start(cell)
            still: list[CellProcess] = []
            for process in running:
                row = process.poll()
                if row is None:
                    still.append(process)
                else:
                    on_row(process.cell, row)
            if len(still) == len(running):
                time.sleep(POLL_INTERVAL_S)
            running = still
    finally:
        # The children first (killed and reaped), then their folders (poll removes them).
        for process in running:
            process.kill()
        for process in running:
            if process.started:
                process.poll()


@dataclass(frozen=True)
class DaskSecurity:
    """TLS settings for the Dask executor (the ``--tls-*`` flags).

    ``ca_file`` is the certificate authority the scheduler's certificate must chain to;
    ``cert``/``key`` this client's own certificate, for schedulers that require mutual TLS.
    With none of them, a ``tls://`` address uses the Dask configuration
    (``distributed.comm.tls.*``, e.g. ``~/.config/dask/distributed.yaml``).
    """

    ca_file: str | None = None
    cert: str | None = None
    key: str | None = None

    @property
    def given(self) -> bool:
        return any((self.ca_file, self.cert, self.key))


LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


def scheduler_host(address: str) -> tuple[str, str]:
    """``(scheme, host)`` of a scheduler address such as ``tls://10.0.0.5:8786``."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    host = rest
    if host.startswith("["):  # [::1]:8786
        host = host[1:host.find("]")] if "]" in host else host[1:]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return scheme.lower(), host.split("/", 1)[0].lower()


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface (no name lookup is made: a
    name that merely resolves to 127.0.0.1 elsewhere does not count)."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def dask_security(address: str, tls: DaskSecurity | None = None, *, insecure: bool = False) -> Any:
    """Check ``address`` against the trust rules and return the ``distributed.Security`` to use
    (None for plain TCP on loopback, or with ``insecure``).

    * ``tls://`` uses the ``--tls-*`` files, else the Dask configuration; it is refused when
      neither names a CA file (a TLS connection that checks nothing protects nothing).
    * ``tcp://`` is accepted on loopback only, unless ``insecure`` (``--insecure``) says the user
      accepts that anyone who can reach or impersonate the scheduler can run code here.
    * Any other scheme is refused.
    """
    tls = tls or DaskSecurity()
    scheme, host = scheduler_host(address)
    if scheme not in ("tcp", "tls"):
        raise InstanceError("--address", f"unsupported scheme '{scheme}://' (use tls://HOST:PORT, or tcp:// on loopback)")
    if scheme == "tcp":
        if tls.given:
            raise InstanceError("--address", "TLS files were given for a tcp:// address: use tls://HOST:PORT")
        if not is_loopback(host) and not insecure:
            raise InstanceError("--address", f"refusing plain TCP to non-loopback scheduler '{host}': cells and "
                                             "results would travel unauthenticated (use tls:// with --tls-ca-file, "
                                             "or pass --insecure to accept that risk on a network you control)")
        return None
    from distributed.security import Security

    if tls.given:
        if not tls.ca_file:
            raise InstanceError("--tls-ca-file", "needed with --tls-cert/--tls-key: the CA that signs the scheduler")
        if bool(tls.cert) != bool(tls.key):
            raise InstanceError("--tls-cert", "--tls-cert and --tls-key go together")
        for flag, path in (("--tls-ca-file", tls.ca_file), ("--tls-cert", tls.cert), ("--tls-key", tls.key)):
            if path and not Path(path).is_file():
                raise InstanceError(flag, f"file not found: {path}")
        return Security(tls_ca_file=tls.ca_file, tls_client_cert=tls.cert, tls_client_key=tls.key,
                        require_encryption=True)
    security = Security(require_encryption=True)  # reads distributed.comm.tls.* from the Dask config
    if not security.tls_ca_file:
        raise InstanceError("--tls-ca-file", "a tls:// scheduler needs a CA file: --tls-ca-file, or "
                                             "distributed.comm.tls.ca-file in the Dask configuration")
    return security


CONNECT_TIMEOUT_S = 30.0


def connect_dask(address: str, tls: DaskSecurity | None = None, *, insecure: bool = False,
                 timeout_s: float | None = None) -> Any:
    """A ``Client`` for the scheduler the user named, after :func:`dask_security`'s checks.

    The client deserializes results with msgpack only: a cell's row comes back as JSON text, so
    no pickle from the cluster is ever needed to read a result.
    """
    security = dask_security(address, tls, insecure=insecure)
    try:
        from dask.distributed import Client
    except ImportError as error:  # pragma: no cover - dask is a declared optional dependency
        raise_interruption(error)
        raise InstanceError("--executor", "the dask executor needs dask[distributed] installed") from None
    try:
        return Client(address, timeout=timeout_s or CONNECT_TIMEOUT_S, security=security, deserializers=["msgpack"],
                      set_as_default=False)
    except (OSError, TimeoutError, ValueError) as error:
        raise InstanceError("--address", f"cannot reach the Dask scheduler at {address}: {error}") from None


def cell_task(cell_json: str, grace_s: float) -> str:
    """What a Dask task runs: a cell as JSON in, its row as JSON out (never a pickled object)."""
    cell = Cell.from_json(cell_json)
    try:
        row = run_cell_isolated(cell, grace_s)
    except Exception as error:  # noqa: BLE001 - the row, not a pickled exception, goes back
        row = error_row(cell, f"worker failed: {type(error).__name__}: {error}")
    return json.dumps(row)


def run_dask(cells: Sequence[Cell], on_row: OnRow, *, client: Any,
             grace_s: float = DEFAULT_GRACE_S, on_start: OnStart = _nothing) -> None:
    """Run ``cells`` on the Dask cluster of ``client`` (from :func:`connect_dask`, or a test's).

    One task per cell (``pure=False``: a repeat is a new measurement, never a cached result);
    rows are handed over in completion order.
    """
    from dask.distributed import as_completed

    futures = {}
    try:
        for cell in cells:
            future = client.submit(cell_task, cell.to_json(), grace_s, pure=False,
                                   key=f"fleetplan-cell-{cell.order}-{time.monotonic_ns()}")
            futures[future] = cell
            on_start(cell)
        for future in as_completed(futures, loop=client.loop):
            cell = futures[future]
            try:
                row = _checked_row(cell, json.loads(future.result()))
            except Exception as error:  # a lost worker is one failed cell, not a lost sweep
                row = error_row(cell, f"dask task failed: {type(error).__name__}: {error}")
            on_row(cell, row)
    finally:
        for future in futures:
            if not future.done():
                future.cancel()


def chain_task(instance_data: str, cells_json: str) -> str:
    """What a Dask task runs for a chain of what-if points on one instance: the instance's text
    (sent once, not once per cell) parsed and validated once, each point validated only where it
    changes it, solved in the worker's own process one after another. Rows go back as JSON text,
    as :func:`cell_task`'s."""
    from fleetplan.instances import instance_from_data
    from fleetplan.instances.paths import changed_instance

    cells = [Cell.from_json(text) for text in json.loads(cells_json)]
    if cells and cells[0].runner:  # the runner reads the data itself (and may keep it parsed)
        return json.dumps([run_cell(replace(cell, instance_data=instance_data), preload=False) for cell in cells])
    rows = []
    try:
        data = json.loads(instance_data)
        base = instance_from_data(data, cells[0].instance)
    except Exception as error:  # noqa: BLE001 - one row per cell says why
        return json.dumps([error_row(cell, f"invalid input: {error}") for cell in cells])
    for cell in cells:
        try:
            row = run_cell(cell, preload=False, instance=changed_instance(base, data, cell.params))
        except Exception as error:  # noqa: BLE001 - a bad point is one failed row
            row = error_row(cell, f"invalid input: {error}")
        rows.append(row)
    return json.dumps(rows)


def run_dask_chains(chains: Sequence[Sequence[Cell]], on_row: OnRow, *, client: Any,
                    on_start: OnStart = _nothing) -> None:
    """Run chains of what-if cells on the Dask cluster (one task per chain, :func:`chain_task`);
    every row of a chain is handed over when the chain finishes."""
    from dask.distributed import as_completed

    futures = {}
    try:
        for index, chain in enumerate(chains):
            bare = [replace(cell, instance_data=None).to_json() for cell in chain]
            future = client.submit(chain_task, chain[0].instance_data or "{}", json.dumps(bare), pure=False,
                                   key=f"fleetplan-chain-{index}-{time.monotonic_ns()}")
            futures[future] = chain
            for cell in chain:
                on_start(cell)
        for future in as_completed(futures, loop=client.loop):
            chain = futures[future]
            try:
                answers = json.loads(future.result())
                rows = [_checked_row(cell, data) for cell, data in zip(chain, answers, strict=True)]
            except Exception as error:  # a lost worker fails its chain's cells, not the sweep
                rows = [error_row(cell, f"dask task failed: {type(error).__name__}: {error}") for cell in chain]
            for cell, row in zip(chain, rows, strict=True):
                on_row(cell, row)
    finally:
        for future in futures:
            if not future.done():
                future.cancel()


def _checked_row(cell: Cell, data: Any) -> dict[str, Any]:
    """A row from the cluster, kept only if it is a row of this cell (plain values)."""
    if not isinstance(data, dict) or any(not isinstance(value, (str, int, float, type(None)))
                                         for value in data.values()):
        raise ValueError("the worker's answer is not a results row")
    row = {column: data.get(column, "") for column in COLUMNS}
    expected = base_row(cell)
    for column in ("group", "instance", "label"):
        if str(row[column]) != str(expected[column]):
            raise ValueError(f"the worker's answer is for another cell ({column} {row[column]!r})")
    return row
