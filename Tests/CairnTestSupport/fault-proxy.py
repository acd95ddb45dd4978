#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 proxy for Cairn's tests (started and stopped by FaultProxy.swift).

    fault-proxy.py UPSTREAM_PORT STATE_DIR

Listens on 127.0.0.1, a free port, which it writes to STATE_DIR/port once it accepts connections.
Each client connection carries one request (the proxy answers with `Connection: close`), which
is forwarded to 127.0.0.1:UPSTREAM_PORT. Before each request it reads STATE_DIR/control.json:

    {"generation": G, "mode": "pass"}
    {"generation": G, "mode": "cut",   "after": N, "times": K or null}  close after N body bytes
    {"generation": G, "mode": "stall", "after": N, "times": K or null}  send nothing after N body bytes
    {"generation": G, "mode": "shift", "by": D}  a 206's Content-Range moved by D, body unchanged

`times` limits the fault to the first K requests of that generation (null: every request). Each
request appends a line `METHOD TARGET STATUS FAULT` to STATE_DIR/requests.log, FAULT being
"pass", "cut", "stall" or "shift".
"""
import json
import os
import re
import select
import socket
import socketserver
import sys
import threading
import time

UPSTREAM_PORT = int(sys.argv[1])
STATE = sys.argv[2]
CONTROL = os.path.join(STATE, "control.json")
LOG = os.path.join(STATE, "requests.log")
lock = threading.Lock()
applied = {}  # generation -> faults injected


def read_head(sock, limit=65536):
    """Bytes up to and including the blank line, and what came after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            return None, b""
        data += piece
        if len(data) > limit:
            return None, b""
    end = data.index(b"\r\n\r\n") + 4
    return data[:end], data[end:]


def with_connection_close(head):
    lines = head[:-4].split(b"\r\n")
    kept = [lines[0]] + [l for l in lines[1:] if not l.lower().startswith(b"connection:")]
    return b"\r\n".join(kept + [b"Connection: close"]) + b"\r\n\r\n"


def control():
    try:
        with open(CONTROL) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"generation": 0, "mode": "pass"}


def shifted(head, by):
    def move(match):
        first, last = int(match.group(1)) + by, int(match.group(2)) + by
        return b"Content-Range: bytes %d-%d/%s" % (first, last, match.group(3))
    return re.sub(rb"(?im)^content-range: *bytes (\d+)-(\d+)/(\S+)", move, head)


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        client = self.request
        request, rest = read_head(client)
        if request is None:
            return
        settings = control()
        mode = settings.get("mode", "pass")
        fault = "pass"
        if mode in ("cut", "stall"):
            with lock:
                generation = settings.get("generation", 0)
                times = settings.get("times")
                if times is None or applied.get(generation, 0) < times:
                    applied[generation] = applied.get(generation, 0) + 1
                    fault = mode
        upstream = socket.create_connection(("127.0.0.1", UPSTREAM_PORT))
        try:
            upstream.sendall(with_connection_close(request) + rest)
            head, body = read_head(upstream)
            if head is None:
                return
            status = head.split(b" ", 2)[1].decode()
            if mode == "shift" and status == "206":
                head = shifted(head, int(settings.get("by", 0)))
                fault = "shift"
            request_line = request.split(b"\r\n", 1)[0].decode(errors="replace").split(" ")
            with lock, open(LOG, "a") as log:
                log.write("%s %s %s %s\n" % (request_line[0], request_line[1], status, fault))
            client.sendall(with_connection_close(head))
            limit = int(settings.get("after", 0)) if fault in ("cut", "stall") else None
            sent = 0
            while True:
                if limit is not None and sent + len(body) >= limit:
                    client.sendall(body[: limit - sent])
                    break
                client.sendall(body)
                sent += len(body)
                body = upstream.recv(262144)
                if not body:
                    return
            if fault == "stall":
                # Keep the connection open and send nothing, until the client gives up.
                while True:
                    readable, _, _ = select.select([client], [], [], 120)
                    if not readable or not client.recv(65536):
                        break
        except OSError:
            pass
        finally:
            upstream.close()


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


def exit_with_parent(parent):
    """Ends the proxy when the test process is gone (it crashed, or was killed), instead of
    leaving it behind."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(0)


def main():
    threading.Thread(target=exit_with_parent, args=(os.getppid(),), daemon=True).start()
    server = Server(("127.0.0.1", 0), Handler)
    port_file = os.path.join(STATE, "port")
    with open(port_file + ".tmp", "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


main()
