"""``fleetplan serve``: start the solve service (wired into :mod:`fleetplan.cli.app` by
:func:`add_arguments`)::

    fleetplan serve [--host 127.0.0.1] [--port 8080] [--workers N] [--queue N]
                    [--token T | --token-file F | --insecure] [--tls-cert F --tls-key F [--tls-ca-file F]]
                    [--max-body-mb M] [--max-time-limit S] [--sync-wait S] [--grace S]
                    [--state DIR] [--session-ttl S] [--max-jobs-per-worker N]
    fleetplan serve --extender [--extender-policy fgd] [--extender-mix FILE] [--host, --port, token, TLS flags]

A bearer token is required on every address, loopback included (a web page the user opens must
not be able to submit jobs): ``--token``/``--token-file`` give it, otherwise one is generated
and printed; ``--insecure`` serves without one. Exit codes: 2 for bad options or a port already
in use (said in one line before anything starts), 143 after SIGTERM and 130 after Ctrl-C (both
once the service has drained: running jobs get ``--grace`` seconds, then are stopped).

``--extender`` serves a Kubernetes scheduler extender instead of the solve service (no worker
processes): ``/extender/filter`` and ``/extender/prioritize`` (:mod:`fleetplan.service.extender_app`).
The scheduler cannot send a header, so its token goes in the path (``urlPrefix:
http://HOST:PORT/extender/TOKEN``); a token must then be URL-safe.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import signal
import socket
from pathlib import Path
from typing import Any

from fleetplan.errors import raise_interruption

EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


def add_arguments(subparsers: Any) -> None:
    from fleetplan.cli.common import bounded_int, positive_seconds

    serve = subparsers.add_parser(
        "serve", help="serve the solvers over HTTP/JSON (for schedulers in any language)",
        description="Start the solve service: POST /v1/solve, /v1/evaluate, /v1/size, /v1/whatif; "
                    "GET /v1/jobs and /v1/jobs/{id} (DELETE cancels); /v1/sessions (POST, PATCH {id}, POST "
                    "{id}/solve, GET, DELETE); /v1/solvers, /v1/schema/{kind}, /healthz, /readyz, /metrics; the "
                    "OpenAPI document at /openapi.json. A token is required unless --insecure (one is generated "
                    "and printed if none is given). With --extender: a Kubernetes scheduler extender instead "
                    "(POST /extender/filter, /extender/prioritize, /extender/nodes). See docs/embedding.md. Exit "
                    "codes: 2 bad options or the port in use, 143 after SIGTERM, 130 after Ctrl-C.")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=bounded_int(0, 65535), default=8080, help="port (0: any free port)")
    serve.add_argument("--workers", type=bounded_int(1, 256), default=2,
                       help="worker processes (jobs computed at once), each with the solvers imported once")
    serve.add_argument("--max-jobs-per-worker", type=bounded_int(1, 10**9), default=10_000, metavar="N",
                       help="a worker is replaced by a fresh one after N jobs")
    serve.add_argument("--queue", type=bounded_int(0, 100_000), default=64,
                       help="jobs that may wait for a worker; beyond, 429 with Retry-After")
    serve.add_argument("--max-body-mb", type=bounded_int(1, 4096), default=64, help="largest request body (MiB)")
    serve.add_argument("--sync-wait", type=positive_seconds, default=4.0, metavar="S",
                       help="how long a request waits for its answer before a 202 with the job's id "
                            "(default 4: inside a 5 s caller budget)")
    serve.add_argument("--max-time-limit", type=positive_seconds, default=300.0, metavar="S",
                       help="the largest time_limit a request may ask (larger: 422)")
    serve.add_argument("--default-time-limit", type=positive_seconds, default=60.0, metavar="S",
                       help="the time_limit of a request that gives none")
    serve.add_argument("--grace", type=positive_seconds, default=10.0, metavar="S",
                       help="seconds running jobs get to finish at shutdown")
    serve.add_argument("--token", default=None, metavar="T", help="the bearer token clients must send")
    serve.add_argument("--token-file", default=None, metavar="F",
                       help="a file holding the bearer token clients must send")
    serve.add_argument("--insecure", action="store_true", help="serve without a token (any address)")
    serve.add_argument("--tls-cert", default=None, metavar="F", help="TLS certificate (PEM)")
    serve.add_argument("--tls-key", default=None, metavar="F", help="TLS private key (PEM)")
    serve.add_argument("--tls-ca-file", default=None, metavar="F",
                       help="CA that client certificates must chain to (mutual TLS)")
    serve.add_argument("--scratch", default=None, metavar="DIR",
                       help="the folder the workers write in (what-if sweeps); default a new temporary one")
    serve.add_argument("--state", default=None, metavar="DIR",
                       help="keep the jobs in DIR/jobs.sqlite3 (and the scratch folder in DIR/scratch): a restart "
                            "loses no accepted job; without it jobs live in memory only")
    serve.add_argument("--session-ttl", type=positive_seconds, default=600.0, metavar="S",
                       help="a session (/v1/sessions) idle this long is dropped")
    serve.add_argument("--extender", action="store_true",
                       help="serve a Kubernetes scheduler extender (filter and prioritize verbs at /extender/) "
                            "instead of the solve service: no workers (--workers, --queue, --sync-wait and the "
                            "time limits do not apply); the token may be the path segment after /extender/; see "
                            "docs/embedding.md")
    serve.add_argument("--extender-policy", default="fgd", metavar="NAME",
                       help="the extender's policy: fgd (default), best-fit, dot-product, gpu-packing (the gpushare "
                            "kind's) or rms (binpack's RMS greedy for one task)")
    serve.add_argument("--extender-mix", default="trace", metavar="MIX",
                       help="the expected task mix FGD measures fragmentation against: trace (default: the task "
                            "shapes of Alibaba's GPU trace, as the gpushare generator draws them), pod (each pod's "
                            "own shape), or a JSON file listing {cpu_milli, num_gpu, gpu_milli, gpu_spec, weight} "
                            "(a gpushare instance's mix)")
    serve.add_argument("--json", action="store_true", help="errors as JSON on stdout")
    serve.set_defaults(handler=handle_serve)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_token(text: str, where: str) -> str:
    from fleetplan.cli.common import CommandError

    if not text or any(ch.isspace() for ch in text) or len(text) < 16:
        raise CommandError(f"{where}: must be one token of at least 16 characters, no spaces")
    return text


def _token(args: argparse.Namespace) -> tuple[str | None, bool]:
    """The token and whether it was generated here."""
    import secrets

    from fleetplan.cli.common import CommandError

    given = [flag for flag, value in (("--token", args.token), ("--token-file", args.token_file),
                                      ("--insecure", args.insecure)) if value]
    if len(given) > 1:
        raise CommandError(f"{given[0]} and {given[1]} do not go together")
    if args.insecure:
        return None, False
    if args.token is not None:
        return _check_token(args.token, "--token"), False
    if args.token_file is not None:
        try:
            text = Path(args.token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise CommandError(f"--token-file {args.token_file}: cannot read it ({error})") from None
        return _check_token(text, f"--token-file {args.token_file}"), False
    return secrets.token_urlsafe(24), True


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that a port in use is a one-line error (exit 2)."""
    from fleetplan.cli.common import CommandError

    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
    except OSError as error:
        reason = "the port is in use" if error.errno == 98 else (error.strerror or str(error))
        raise CommandError(f"--port {port}: cannot listen on {host}:{port}: {reason}") from None
    sock.listen(2048)
    return sock


def handle_serve(args: argparse.Namespace) -> int:
    from fleetplan.cli.common import CommandError, stderr

    token, generated = _token(args)
    if bool(args.tls_cert) != bool(args.tls_key):
        raise CommandError("--tls-cert and --tls-key go together")
    if args.tls_ca_file and not args.tls_cert:
        raise CommandError("--tls-ca-file needs --tls-cert and --tls-key")
    for flag, value in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key), ("--tls-ca-file", args.tls_ca_file)):
        if value and not Path(value).is_file():
            raise CommandError(f"{flag} {value}: no such file")
    if args.insecure and not _loopback(args.host):
        stderr.print(f"fleetplan serve: warning: no token on {args.host}: anyone who reaches it can submit jobs",
                     markup=False)
    try:
        import uvicorn
    except ImportError as error:
        raise_interruption(error)
        raise CommandError("serve needs the service extra: pip install 'fleetplan[service]'") from None
    if args.extender:
        return _serve_extender(args, token, generated)
    from fleetplan.service import ServiceSettings, create_app

    settings = ServiceSettings(workers=args.workers, queue_size=args.queue, max_body_bytes=args.max_body_mb * 2**20,
                               sync_wait_s=args.sync_wait, max_time_limit_s=args.max_time_limit,
                               default_time_limit_s=min(args.default_time_limit, args.max_time_limit), token=token,
                               grace_s=args.grace, max_jobs_per_worker=args.max_jobs_per_worker,
                               scratch=args.scratch, state=args.state, session_ttl_s=args.session_ttl)
    ssl = _ssl_options(args)
    sock = _listen(args.host, args.port)
    port = sock.getsockname()[1]
    app = create_app(settings)
    # The service drains on its own clock (the grace period); uvicorn's own limit is a backstop.
    # No access log: at the warning level its lines are never printed, but uvicorn formats each
    # request's client and quoted path for it all the same.
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=int(args.grace) + 5,
                            **ssl)
    server = _Server(config, app.service)
    scheme = "https" if ssl else "http"
    stderr.print(f"fleetplan serve: {scheme}://{args.host}:{port} ({args.workers} workers, queue {args.queue}, "
                 f"{'no token' if token is None else 'token required'})", markup=False)
    if generated:
        # The token on a line of its own, for a script to read (clients send Authorization: Bearer TOKEN).
        stderr.print(f"token: {token}", markup=False, soft_wrap=True)
    return _serve_until_stopped(server, sock, stderr)


def _extender(args: argparse.Namespace) -> Any:
    """The extender the flags describe (bad flags: a :class:`CommandError` naming them)."""
    import json

    from fleetplan.cli.common import CommandError
    from fleetplan.service.extender import POLICIES, Extender

    if args.extender_policy not in POLICIES:
        raise CommandError(f"--extender-policy: '{args.extender_policy}' is not one of {', '.join(POLICIES)}")
    mix = args.extender_mix
    if mix not in ("trace", "pod"):
        from pydantic import TypeAdapter, ValidationError

        from fleetplan.instances.gpushare import MixEntry

        try:
            entries = json.loads(Path(args.extender_mix).read_text(encoding="utf-8"))
            mix = TypeAdapter(list[MixEntry]).validate_python(entries)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise CommandError(f"--extender-mix {args.extender_mix}: cannot read it ({error})") from None
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise CommandError(f"--extender-mix {args.extender_mix}: [{where}]: {first['msg']}") from None
        if not mix or abs(sum(entry.weight for entry in mix) - 1.0) > 1e-6:
            raise CommandError(f"--extender-mix {args.extender_mix}: a non-empty list whose weights sum to 1")
        for k, entry in enumerate(mix):
            if (entry.num_gpu == 0) != (entry.gpu_milli == 0):
                raise CommandError(f"--extender-mix {args.extender_mix}: [{k}].gpu_milli: 0 exactly when num_gpu is 0")
    return Extender(args.extender_policy, mix)


def _serve_extender(args: argparse.Namespace, token: str | None, generated: bool) -> int:
    import re

    import uvicorn

    from fleetplan.cli.common import CommandError, stderr
    from fleetplan.service.extender_app import create_extender_app

    if token is not None and not re.fullmatch(r"[A-Za-z0-9._~-]+", token):
        raise CommandError("--token: with --extender the token goes in the scheduler's urlPrefix, so it may hold "
                           "only letters, digits and . _ ~ -")
    for flag, value in (("--state", args.state), ("--scratch", args.scratch)):
        if value is not None:
            raise CommandError(f"{flag} does not go with --extender (the extender keeps no jobs)")
    extender = _extender(args)
    ssl = _ssl_options(args)
    sock = _listen(args.host, args.port)
    port = sock.getsockname()[1]
    app = create_extender_app(extender, token, args.max_body_mb * 2**20)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=int(args.grace) + 5, **ssl)
    server = _Server(config, app.service)
    scheme = "https" if ssl else "http"
    prefix = f"{scheme}://{args.host}:{port}/extender" + ("/TOKEN" if token is not None else "")
    stderr.print(f"fleetplan serve --extender: {prefix} (policy {args.extender_policy}, "
                 f"{'no token' if token is None else 'token required'})", markup=False)
    if generated:
        stderr.print(f"token: {token}", markup=False, soft_wrap=True)
    return _serve_until_stopped(server, sock, stderr)


def _ssl_options(args: argparse.Namespace) -> dict[str, Any]:
    """uvicorn's TLS settings from the flags (empty: plain HTTP); mutual TLS with --tls-ca-file."""
    if not args.tls_cert:
        return {}
    ssl = {"ssl_certfile": args.tls_cert, "ssl_keyfile": args.tls_key}
    if args.tls_ca_file:
        import ssl as ssl_module

        ssl.update(ssl_ca_certs=args.tls_ca_file, ssl_cert_reqs=ssl_module.CERT_REQUIRED)
    return ssl


def _serve_until_stopped(server: Any, sock: Any, stderr: Any) -> int:
    """Run ``server`` on ``sock`` until it stops: 0, or the exit code of the signal that
    stopped it."""
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    if server.signals:
        stderr.print("fleetplan serve: stopped", markup=False)
        return EXIT_INTERRUPTED if server.signals[0] == signal.SIGINT else EXIT_TERMINATED
    return 0


def _server_class() -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server; a signal starts the service's drain at once, and is answered with an
        exit code instead of being raised again once the server has stopped."""

        def __init__(self, config: Any, service: Any):
            super().__init__(config)
            self.service, self.signals = service, []

        @contextlib.contextmanager
        def capture_signals(self) -> Any:
            handled = (signal.SIGINT, signal.SIGTERM)
            original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

        def handle_exit(self, sig: int, frame: Any) -> None:
            self.signals.append(sig)
            loop = getattr(self, "_loop", None)
            if loop is not None and not self.should_exit:
                loop.call_soon_threadsafe(self.service.begin_drain)
            super().handle_exit(sig, frame)

        async def serve(self, sockets: Any = None) -> None:
            import asyncio

            self._loop = asyncio.get_running_loop()
            await super().serve(sockets)

    return Server


def _Server(config: Any, service: Any) -> Any:  # noqa: N802 - builds the class on first use
    return _server_class()(config, service)
