#!/usr/bin/env python3
"""Stand-ins for the kuma-demo applications, used by ./scripts/demo (Python 3 standard library only).

  demo-app.py http NAME HOST:PORT [--zone ZONE] [--call URL] [--tls-cert CERT --tls-key KEY --sni NAME]
      An HTTP server answering every GET with "NAME (ZONE)". With --call, it first calls URL
      (its sidecar's outbound listener for another service) and appends that answer, so one
      request crosses two sidecars: "frontend (zone-1) -> backend (zone-1)".
      With --tls-cert CERT --tls-key KEY --sni NAME, it serves HTTPS instead (an API outside the
      mesh): it completes only handshakes whose SNI is NAME and answers "NAME ok (TLS, SNI ...)".
  demo-app.py tcp NAME HOST:PORT
      A TCP stand-in for redis: answers "+PONG" to anything it receives.

SIGINT and SIGTERM stop it cleanly (exit 0).
"""

import argparse
import signal
import socketserver
import ssl
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def host_port(text):
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def tls_context(args):
    """A server context for --tls-cert/--tls-key that refuses any SNI but --sni."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.tls_cert, args.tls_key)

    def check_sni(sock, name, _ctx):
        if name != args.sni:
            sys.stderr.write(f"{args.name}: refused a handshake with SNI {name!r}\n")
            sys.stderr.flush()
            return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
        sock.sni = name
        return None

    ctx.sni_callback = check_sni
    return ctx


def serve_http(args):
    me = f"{args.name} ({args.zone})" if args.zone else args.name
    tls = tls_context(args) if args.tls_cert else None

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            status, body = 200, me
            if tls:
                body = f"{me} ok (TLS, SNI {getattr(self.connection, 'sni', None)})"
            if args.call:
                try:
                    with urllib.request.urlopen(args.call, timeout=5) as resp:
                        body = f"{me} -> {resp.read().decode(errors='replace').strip()}"
                except (urllib.error.URLError, OSError) as e:
                    status, body = 502, f"{me} -> {args.call} failed: {e}"
            data = (body + "\n").encode()
            self.send_response(status)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt, *a):
            sys.stderr.write(f"{args.name}: {self.address_string()} {fmt % a}\n")
            sys.stderr.flush()

    class Server(ThreadingHTTPServer):
        allow_reuse_address = True
        daemon_threads = True

        def finish_request(self, request, client_address):
            if not tls:
                return super().finish_request(request, client_address)
            # The TLS handshake in the request's own thread, not in accept().
            try:
                conn = tls.wrap_socket(request, server_side=True)
            except ssl.SSLEOFError:
                # A readiness probe (a TCP connect, then close): nothing to report.
                return None
            except (ssl.SSLError, OSError) as e:
                sys.stderr.write(f"{args.name}: TLS handshake from {client_address[0]} failed: {e}\n")
                sys.stderr.flush()
                return None
            try:
                return super().finish_request(conn, client_address)
            finally:
                conn.close()

    return Server(args.listen, Handler)


def serve_tcp(args):
    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            sys.stderr.write(f"{args.name}: connection from {self.client_address[0]}\n")
            sys.stderr.flush()
            while True:
                data = self.request.recv(4096)
                if not data:
                    return
                self.request.sendall(b"+PONG\r\n")

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    socketserver.ThreadingTCPServer.daemon_threads = True
    return socketserver.ThreadingTCPServer(args.listen, Handler)


def main():
    p = argparse.ArgumentParser(description="kuma-demo app stand-ins for ./scripts/demo")
    sub = p.add_subparsers(dest="kind", required=True)
    h = sub.add_parser("http", help="HTTP service answering with its name")
    h.add_argument("name")
    h.add_argument("listen", type=host_port)
    h.add_argument("--zone", default="")
    h.add_argument("--call", help="URL to call and include in every answer")
    h.add_argument("--tls-cert", help="serve HTTPS with this certificate chain (PEM)")
    h.add_argument("--tls-key", help="the certificate's key (PEM)")
    h.add_argument("--sni", help="with --tls-cert: the one server name it accepts")
    t = sub.add_parser("tcp", help="TCP stand-in for redis (+PONG)")
    t.add_argument("name")
    t.add_argument("listen", type=host_port)
    args = p.parse_args()
    if args.kind == "http" and bool(args.tls_cert) != bool(args.tls_key):
        p.error("--tls-cert and --tls-key go together")
    if args.kind == "http" and args.tls_cert and not args.sni:
        p.error("--tls-cert needs --sni")

    server = serve_http(args) if args.kind == "http" else serve_tcp(args)

    def stop(*_):
        # shutdown() waits for serve_forever to return: call it off the main thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    kind = "https" if getattr(args, "tls_cert", None) else args.kind
    sys.stderr.write(f"{args.name}: {kind} on {args.listen[0]}:{args.listen[1]}\n")
    sys.stderr.flush()
    server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()
