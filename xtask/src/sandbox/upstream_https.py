"""The sandbox's upstream HTTPS server (started by `cargo xtask sandbox up`).

It listens inside the guest network namespace, at the guests' gateway, and
answers every GET with one fixed body, so a test that CONNECTs through a
guest's Squid can tell it reached this server. Real TLS: the certificate is
signed by the sandbox CA whose path the descriptor carries.

It writes its pid file once it listens (the sandbox's readiness signal) and
stops on SIGTERM. Every connection is handled on its own thread with a socket
timeout, so a client that stalls mid-handshake holds nothing else up.
"""

import argparse
import http.server
import os
import socketserver
import ssl
import sys

SOCKET_TIMEOUT = 30  # seconds a connection may sit idle (handshake included)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--bind", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--body", required=True)
    p.add_argument("--pid-file", required=True)
    args = p.parse_args()
    body = args.body.encode()

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(args.cert, args.key)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "kvm2-sandbox-upstream"

        def do_GET(self):
            self.answer(with_body=True)

        def do_HEAD(self):
            self.answer(with_body=False)

        def answer(self, with_body):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def log_message(self, format, *args):
            sys.stderr.write("%s %s\n" % (self.address_string(), format % args))

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True

        def finish_request(self, request, client_address):
            # The handshake runs here, on the connection's own thread.
            request.settimeout(SOCKET_TIMEOUT)
            try:
                tls = context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError) as e:
                sys.stderr.write("%s TLS handshake failed: %s\n" % (client_address[0], e))
                return
            try:
                self.RequestHandlerClass(tls, client_address, self)
            finally:
                tls.close()

    server = Server((args.bind, args.port), Handler)
    tmp = args.pid_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(tmp, args.pid_file)
    sys.stderr.write("listening on https://%s:%d\n" % (args.bind, args.port))
    server.serve_forever()


if __name__ == "__main__":
    main()
