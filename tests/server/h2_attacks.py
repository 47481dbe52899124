"""Raw HTTP/2 clients for the gRPC hardening tests (tests/server/hardening_grpc_test.py).

python3-grpcio cannot send what an attacker sends (a stream reset right after its HEADERS, a
message whose gzip flag hides 800 MiB), so these speak HTTP/2 with python3-h2 (Debian) on a plain
socket. Each is bounded in time and count and talks to loopback only.
"""
import socket
import struct
import time
import zlib

import h2.config
import h2.connection
import h2.errors
import h2.events

SERVICE = "/inference.GRPCInferenceService/"


def _connect(target, timeout=5):
    host, port = target.rsplit(":", 1)
    sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    return sock, conn


def _headers(target, method, extra=()):
    return [(":method", "POST"), (":scheme", "http"), (":path", SERVICE + method),
            (":authority", target), ("content-type", "application/grpc"), ("te", "trailers"),
            *extra]


def rapid_reset(target, seconds, batch=50, max_streams=2_000_000):
    """Opens streams (ServerLive HEADERS) and resets each at once, `batch` per write, for
    `seconds` or until the server sends GOAWAY or closes. Returns a dict: streams (opened),
    goaway (the GOAWAY's error code name or None), closed (the server closed the socket)."""
    sock, conn = _connect(target)
    sock.settimeout(0.0)
    opened, goaway, closed = 0, None, False
    deadline = time.time() + seconds
    try:
        while time.time() < deadline and opened < max_streams and goaway is None:
            for _ in range(batch):
                sid = conn.get_next_available_stream_id()
                conn.send_headers(sid, _headers(target, "ServerLive"))
                conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
                opened += 1
            try:
                sock.sendall(conn.data_to_send())
            except (BlockingIOError, InterruptedError):
                sock.settimeout(1.0)  # the server stopped reading: wait for it
                sock.sendall(conn.data_to_send())
                sock.settimeout(0.0)
            except OSError:
                closed = True
                break
            while True:
                try:
                    data = sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    closed = True
                    break
                if not data:
                    closed = True
                    break
                try:
                    events = conn.receive_data(data)
                except Exception:  # frames for streams h2 already forgot: not our concern
                    events = []
                for e in events:
                    if isinstance(e, h2.events.ConnectionTerminated):
                        goaway = getattr(e.error_code, "name", str(e.error_code))
            if closed:
                break
    finally:
        sock.close()
    return {"streams": opened, "goaway": goaway, "closed": closed}


def gzip_bomb(inflated_bytes):
    """A gzip member of `inflated_bytes` zeros (compressed ~1000:1)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    parts = []
    left = inflated_bytes
    while left > 0:
        n = min(left, len(chunk))
        parts.append(z.compress(chunk[:n]))
        left -= n
    parts.append(z.flush())
    return b"".join(parts)


def send_compressed_message(target, method, payload, encoding="gzip", timeout=30):
    """Sends one gRPC message with the compressed flag set and `payload` (already compressed) as
    its bytes, on a `grpc-encoding: ENCODING` call. Returns (grpc_status, grpc_message) from the
    trailers (or headers), or (None, reason) if none came within `timeout` seconds."""
    sock, conn = _connect(target, timeout)
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, _headers(target, method, [("grpc-encoding", encoding),
                                                     ("grpc-accept-encoding", "identity")]))
    body = b"\x01" + struct.pack(">I", len(payload)) + payload
    sent = 0
    status = message = None
    deadline = time.time() + timeout
    try:
        while time.time() < deadline and status is None:
            if sent < len(body):
                window = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                if window > 0:
                    n = min(window, len(body) - sent)
                    conn.send_data(sid, body[sent:sent + n], end_stream=sent + n == len(body))
                    sent += n
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
            sock.settimeout(0.05 if sent < len(body) else 1.0)
            try:
                data = sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                break
            for e in conn.receive_data(data):
                if isinstance(e, (h2.events.TrailersReceived, h2.events.ResponseReceived)):
                    h = dict(e.headers)
                    if "grpc-status" in h:
                        status, message = int(h["grpc-status"]), h.get("grpc-message", "")
                elif isinstance(e, h2.events.StreamReset) and status is None:
                    status, message = -1, f"stream reset {e.error_code}"
                elif isinstance(e, h2.events.ConnectionTerminated) and status is None:
                    status, message = -1, f"GOAWAY {e.error_code}"
                elif isinstance(e, h2.events.DataReceived):
                    conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
    finally:
        sock.close()
    if status is None:
        return None, f"no grpc-status within {timeout} s ({sent} of {len(body)} bytes sent)"
    return status, message
