#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 proxy for Cairn's tests (started and stopped by FaultProxy.swift).

    fault-proxy.py UPSTREAM_PORT STATE_DIR [LISTEN_ADDRESS]

Listens on LISTEN_ADDRESS (default 127.0.0.1), a free port, which it writes to STATE_DIR/port once it accepts connections.
Each client connection carries one request (the proxy answers with `Connection: close`), which
is forwarded to 127.0.0.1:UPSTREAM_PORT with its head unchanged (the client's Host header
included, so an AWS SigV4 signature still verifies upstream) but for `Connection: close`. The
request body, whatever its framing (Content-Length, chunked), is relayed as it arrives while
the answer comes back, so `Expect: 100-continue` works: an interim 1xx head is passed on as it
is. Before each request it reads STATE_DIR/control.json:

    {"generation": G, "mode": "pass"}
    {"generation": G, "mode": "cut",   "after": N, "times": K or null}  close after N body bytes
    {"generation": G, "mode": "stall", "after": N, "times": K or null}  send nothing after N body bytes
    {"generation": G, "mode": "shift", "by": D}  a 206's Content-Range moved by D, body unchanged
    {"generation": G, "mode": "whole"}   Range and If-Range removed from the request: the
                                         upstream's whole-object answer goes back unchanged
    {"generation": G, "mode": "200range"}  a 206's status line becomes `HTTP/1.1 200 OK`
                                         (Content-Range and body kept)
    {"generation": G, "mode": "flip", "at": A, "times": K or null}  in a 206 whose Content-Range
                                         holds offset A, the body byte at A is inverted (a proxy
                                         that alters bytes); the rest is unchanged
    {"generation": G, "mode": "cutrequest", "after": N, "times": K or null}  N bytes of the
                                         request body (as sent, chunk framing included) go
                                         upstream, then both connections are closed
    {"generation": G, "mode": "shape", "delay": S, "rate": R or null}  a link: the request
                                         head waits S seconds before it goes upstream and the
                                         answer's head S seconds before it goes back (2 S added
                                         to every round trip; netem does not exist everywhere),
                                         and each connection's bodies, both ways, are paced to
                                         at most R bytes per second (a per-connection cap)

`times` limits the fault to the first K requests of that generation (null: every request). An
optional `"match": REGEX` limits cut, stall and cutrequest to requests whose `METHOD TARGET`
it matches (searched); the others pass and are not counted in `times`. Each
request appends a line `METHOD TARGET STATUS FAULT` to STATE_DIR/requests.log, FAULT being
"pass", "cut", "stall", "shift", "whole", "200range", "flip" or "cutrequest" (STATUS 0 when no answer
came: a cut request); a mode that found nothing to change logs "pass". When a request is over
(answered, cut, or its client gone) a line `METHOD TARGET STATUS REQUEST_BYTES RESPONSE_BYTES`
goes to STATE_DIR/bytes.log: the request body bytes relayed upstream (as sent, framing
included) and the response body bytes relayed to the client. A stall, once every byte before
it was sent, appends `METHOD TARGET` to STATE_DIR/stalls.log; the connection then stays open,
silent, until the client closes it (or, against a hang, for the tests' safety bound of 600 s,
Await.safetyBound, after which the proxy closes it). Removing Range from a
request whose SigV4 signature covers it (SignedHeaders with `range`) breaks the signature: the
mode suits clients that sign only host and x-amz-* headers, as S3 clients commonly do.
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
LISTEN = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
LOG = os.path.join(STATE, "requests.log")
BYTES_LOG = os.path.join(STATE, "bytes.log")
STALLS_LOG = os.path.join(STATE, "stalls.log")
lock = threading.Lock()
applied = {}  # generation -> faults injected


def read_head(sock, data=b"", limit=65536):
    """Bytes up to and including the blank line (`data` is what was already read), and what came
    after it."""
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


def without_fields(head, names):
    """`head` without the header fields named in `names` (lower case bytes)."""
    lines = head[:-4].split(b"\r\n")
    kept = [lines[0]] + [l for l in lines[1:] if l.split(b":", 1)[0].strip().lower() not in names]
    return b"\r\n".join(kept) + b"\r\n\r\n"


def has_field(head, name):
    return any(l.split(b":", 1)[0].strip().lower() == name for l in head[:-4].split(b"\r\n")[1:])


def status_of(head):
    return head.split(b" ", 2)[1].decode()


def close_both(client, upstream):
    for s in (upstream, client):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Pacer:
    """Holds a connection's bytes to `rate` per second (None: no cap) from its first byte."""

    def __init__(self, rate):
        self.rate = rate
        self.start = None
        self.count = 0

    def pace(self, n):
        if not self.rate:
            return
        now = time.monotonic()
        if self.start is None:
            self.start = now
        self.count += n
        ahead = self.start + self.count / self.rate - now
        if ahead > 0:
            time.sleep(ahead)


def send_paced(sock, data, pacer, piece=65536):
    """`sock.sendall(data)` in pieces, each after its share of the pacer's time."""
    if pacer is None or not pacer.rate:
        sock.sendall(data)
        return
    for start in range(0, len(data), piece):
        chunk = data[start:start + piece]
        pacer.pace(len(chunk))
        sock.sendall(chunk)


class RequestBody(threading.Thread):
    """Relays the client's request body upstream as it arrives (from `rest`, what came with the
    head) until the client stops sending or `finish` is called; with `limit`, after `limit` bytes
    it closes both connections instead (a server gone mid-upload) and sets `cut`."""

    def __init__(self, client, upstream, rest, limit, pacer=None):
        super().__init__(daemon=True)
        self.client, self.upstream, self.rest, self.limit = client, upstream, rest, limit
        self.pacer = pacer
        self.wake_read, self.wake_write = os.pipe()
        self.sent = 0
        self.cut = False

    def forward(self, data):
        if self.limit is not None and self.sent + len(data) >= self.limit:
            self.upstream.sendall(data[: self.limit - self.sent])
            self.sent = self.limit
            self.cut = True
            close_both(self.client, self.upstream)
            return False
        send_paced(self.upstream, data, self.pacer)
        self.sent += len(data)
        return True

    def run(self):
        try:
            if not self.forward(self.rest):
                return
            while True:
                readable, _, _ = select.select([self.client, self.wake_read], [], [])
                if self.wake_read in readable:
                    return
                data = self.client.recv(262144)
                if not data:
                    self.upstream.shutdown(socket.SHUT_WR)
                    return
                if not self.forward(data):
                    return
        except OSError:
            pass

    def finish(self):
        """Stops relaying and waits for the thread (before the sockets are closed)."""
        os.write(self.wake_write, b"x")
        self.join()
        os.close(self.wake_read)
        os.close(self.wake_write)


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        client = self.request
        request, rest = read_head(client)
        if request is None:
            return
        settings = control()
        mode = settings.get("mode", "pass")
        fault = "pass"
        request_line = request.split(b"\r\n", 1)[0].decode(errors="replace").split(" ")
        match = settings.get("match")
        if match is not None and not re.search(match, " ".join(request_line[:2])):
            mode = "pass"
        if mode in ("cut", "stall", "cutrequest"):
            with lock:
                generation = settings.get("generation", 0)
                times = settings.get("times")
                if times is None or applied.get(generation, 0) < times:
                    applied[generation] = applied.get(generation, 0) + 1
                    fault = mode
        if mode == "whole" and has_field(request, b"range"):
            request = without_fields(request, (b"range", b"if-range"))
            fault = "whole"
        request_line = request.split(b"\r\n", 1)[0].decode(errors="replace").split(" ")

        def log(status):
            with lock, open(LOG, "a") as f:
                f.write("%s %s %s %s\n" % (request_line[0], request_line[1], status, fault))
            logged.append(status)

        logged = []
        shaping = mode == "shape"
        delay = float(settings.get("delay", 0)) if shaping else 0.0
        rate = settings.get("rate") if shaping else None
        if delay > 0:
            time.sleep(delay)
        upstream = socket.create_connection(("127.0.0.1", UPSTREAM_PORT))
        body = None
        final = {"status": 0, "request": 0, "response": 0}
        try:
            upstream.sendall(with_connection_close(request))
            limit = int(settings.get("after", 0)) if fault == "cutrequest" else None
            body = RequestBody(client, upstream, rest, limit, Pacer(rate))
            body.start()
            answer = b""
            while True:
                head, answer = read_head(upstream, answer)
                if head is None:
                    if body.cut:
                        log(0)
                    return
                if not status_of(head).startswith("1"):
                    break
                # An interim answer (100 Continue) is passed on as it is; the final one follows.
                client.sendall(head)
            status = status_of(head)
            final["status"] = status
            if fault == "cutrequest" and not body.cut:
                fault = "pass"  # the whole body went before `after` bytes: nothing was cut
            if mode == "shift" and status == "206":
                head = shifted(head, int(settings.get("by", 0)))
                fault = "shift"
            flip_at = None
            if mode == "flip" and status == "206":
                match = re.search(rb"(?im)^content-range:\s*bytes\s+(\d+)-(\d+)/", head)
                at = int(settings.get("at", 0))
                if match and int(match.group(1)) <= at <= int(match.group(2)):
                    with lock:
                        generation = settings.get("generation", 0)
                        times = settings.get("times")
                        if times is None or applied.get(generation, 0) < times:
                            applied[generation] = applied.get(generation, 0) + 1
                            flip_at = at - int(match.group(1))
                            fault = "flip"
            if mode == "200range" and status == "206":
                head = b"HTTP/1.1 200 OK\r\n" + head.split(b"\r\n", 1)[1]
                fault = "200range"
            log(status)
            if delay > 0:
                time.sleep(delay)
            client.sendall(with_connection_close(head))
            pacer = Pacer(rate)
            limit = int(settings.get("after", 0)) if fault in ("cut", "stall") else None
            sent = 0
            while True:
                if limit is not None and sent + len(answer) >= limit:
                    client.sendall(answer[: limit - sent])
                    final["response"] = limit
                    break
                if flip_at is not None and sent <= flip_at < sent + len(answer):
                    changed = bytearray(answer)
                    changed[flip_at - sent] ^= 0xFF
                    answer = bytes(changed)
                send_paced(client, answer, pacer)
                sent += len(answer)
                final["response"] = sent
                answer = upstream.recv(262144)
                if not answer:
                    return
            if fault == "stall":
                # Keep the connection open and send nothing, until the client gives up: only the
                # client's own stall timeout, a cancel or a signal ends it (the safety bound only
                # ends a client that never gives up: the test then fails instead of hanging).
                body.finish()
                final["request"] = body.sent
                body = None
                with lock, open(STALLS_LOG, "a") as f:
                    f.write("%s %s\n" % (request_line[0], request_line[1]))
                while True:
                    readable, _, _ = select.select([client], [], [], 600)
                    if not readable or not client.recv(65536):
                        break
        except OSError:
            # Reading the upstream's answer can fail (a reset) once the relay cut the request:
            # the cut is still logged, once.
            if body is not None and body.cut and not logged:
                log(0)
        finally:
            if body is not None:
                # The answer is over: a relay stuck sending to the upstream is freed first.
                try:
                    upstream.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                body.finish()
                final["request"] = body.sent
            upstream.close()
            with lock, open(BYTES_LOG, "a") as f:
                f.write("%s %s %s %d %d\n" % (request_line[0], request_line[1], final["status"], final["request"], final["response"]))


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
    server = Server((LISTEN, 0), Handler)
    port_file = os.path.join(STATE, "port")
    with open(port_file + ".tmp", "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


main()
