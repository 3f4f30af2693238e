"""``fleetplan serve``: start the solve service (wired into :mod:`fleetplan.cli.app` by
:func:`add_arguments`)::

    fleetplan serve [--host 127.0.0.1] [--port 8080] [--workers N] [--queue N] [--token-file F]
                    [--insecure] [--tls-cert F --tls-key F [--tls-ca-file F]] [--max-body-mb M]

Listening beyond loopback needs a bearer token (``--token-file``) or ``--insecure``. SIGTERM or
Ctrl-C stop accepting requests, give running jobs ``--grace`` seconds and end.
"""

from __future__ import annotations

import argparse
import ipaddress
from pathlib import Path
from typing import Any

from fleetplan.errors import raise_interruption


def add_arguments(subparsers: Any) -> None:
    from fleetplan.cli.common import bounded_int, positive_seconds

    serve = subparsers.add_parser(
        "serve", help="serve the solvers over HTTP/JSON (for schedulers in any language)",
        description="Start the solve service: POST /v1/solve, /v1/evaluate, /v1/size, /v1/whatif; "
                    "GET /v1/jobs/{id} (DELETE cancels), /v1/solvers, /v1/schema/{kind}, /healthz, /metrics; "
                    "the OpenAPI document at /openapi.json. See docs/embedding.md.")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=bounded_int(0, 65535), default=8080, help="port (0: any free port)")
    serve.add_argument("--workers", type=bounded_int(1, 256), default=2, help="jobs computed at once")
    serve.add_argument("--queue", type=bounded_int(0, 100_000), default=64,
                       help="jobs that may wait for a worker; beyond, 429 with Retry-After")
    serve.add_argument("--max-body-mb", type=bounded_int(1, 4096), default=64, help="largest request body")
    serve.add_argument("--sync-wait", type=positive_seconds, default=10.0, metavar="S",
                       help="how long a request waits for its answer before a 202 with the job's id")
    serve.add_argument("--max-time-limit", type=positive_seconds, default=3600.0, metavar="S",
                       help="the largest time_limit a request may ask")
    serve.add_argument("--grace", type=positive_seconds, default=10.0, metavar="S",
                       help="seconds running jobs get to finish at shutdown")
    serve.add_argument("--token-file", default=None, metavar="F",
                       help="a file holding the bearer token clients must send")
    serve.add_argument("--insecure", action="store_true",
                       help="allow listening beyond loopback without a token")
    serve.add_argument("--tls-cert", default=None, metavar="F", help="TLS certificate (PEM)")
    serve.add_argument("--tls-key", default=None, metavar="F", help="TLS private key (PEM)")
    serve.add_argument("--tls-ca-file", default=None, metavar="F",
                       help="CA that client certificates must chain to (mutual TLS)")
    serve.add_argument("--json", action="store_true", help="errors as JSON on stdout")
    serve.set_defaults(handler=handle_serve)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _token(path: str | None) -> str | None:
    from fleetplan.cli.common import CommandError

    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise CommandError(f"--token-file {path}: cannot read it ({error})") from None
    if not text or "\n" in text or len(text) < 16:
        raise CommandError(f"--token-file {path}: must hold one token of at least 16 characters")
    return text


def handle_serve(args: argparse.Namespace) -> int:
    from fleetplan.cli.common import CommandError, stderr

    token = _token(args.token_file)
    if not _loopback(args.host) and token is None and not args.insecure:
        raise CommandError(f"--host {args.host}: listening beyond loopback needs --token-file (or --insecure)")
    if bool(args.tls_cert) != bool(args.tls_key):
        raise CommandError("--tls-cert and --tls-key go together")
    if args.tls_ca_file and not args.tls_cert:
        raise CommandError("--tls-ca-file needs --tls-cert and --tls-key")
    for flag, value in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key), ("--tls-ca-file", args.tls_ca_file)):
        if value and not Path(value).is_file():
            raise CommandError(f"{flag} {value}: no such file")
    try:
        import uvicorn
    except ImportError as error:
        raise_interruption(error)
        raise CommandError("serve needs the service extra: pip install 'fleetplan[service]'") from None
    from fleetplan.service import ServiceSettings, create_app

    settings = ServiceSettings(workers=args.workers, queue_size=args.queue, max_body_bytes=args.max_body_mb * 2**20,
                               sync_wait_s=args.sync_wait, max_time_limit_s=args.max_time_limit, token=token,
                               grace_s=args.grace)
    ssl: dict[str, Any] = {}
    if args.tls_cert:
        ssl = {"ssl_certfile": args.tls_cert, "ssl_keyfile": args.tls_key}
        if args.tls_ca_file:
            import ssl as ssl_module

            ssl.update(ssl_ca_certs=args.tls_ca_file, ssl_cert_reqs=ssl_module.CERT_REQUIRED)
    scheme = "https" if ssl else "http"
    stderr.print(f"fleetplan serve: {scheme}://{args.host}:{args.port} ({args.workers} workers, queue "
                 f"{args.queue}{', token required' if token else ''})", markup=False)
    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level="warning",
                timeout_graceful_shutdown=int(args.grace), **ssl)
    return 0
