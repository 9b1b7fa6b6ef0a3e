"""The loopback server closes what it opened: no socket or task outlives ``stop``."""

from __future__ import annotations

import gc
import socket
import warnings

import orjson

from thinkloop.testing.openai_server import OpenAIServer, Reply, completion


def test_stop_closes_open_keep_alive_connections_and_their_handlers() -> None:
    srv = OpenAIServer()
    srv.start()
    srv.enqueue(Reply(body=completion("hi")), Reply(body=completion("slow"), delay_s=30))
    body = orjson.dumps({"model": "m", "messages": []})
    request = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
               f"content-length: {len(body)}\r\n\r\n").encode() + body
    idle = socket.create_connection(("127.0.0.1", srv.port))
    busy = socket.create_connection(("127.0.0.1", srv.port))
    try:
        idle.sendall(request)
        assert b"200" in idle.recv(65536).split(b"\r\n", 1)[0]
        busy.sendall(request)  # its handler is asleep in the 30 s delay
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            srv.stop()
            gc.collect()
        assert srv._thread is None and srv._conns == {}
        assert [str(w.message) for w in caught] == []
        idle.settimeout(5)
        busy.settimeout(5)
        assert idle.recv(10) == b"" and busy.recv(10) == b""  # closed by the server
    finally:
        idle.close()
        busy.close()


def test_delay_holds_every_automatic_reply_but_not_a_scripted_one() -> None:
    import time

    srv = OpenAIServer(delay_s=0.3)
    srv.start()
    try:
        srv.enqueue(Reply(body=completion("scripted")))
        with socket.create_connection(("127.0.0.1", srv.port)) as conn:
            times = []
            for _ in range(2):  # the scripted reply, then an automatic one (steps-1)
                body = orjson.dumps({"model": "steps-1", "messages": []})
                conn.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
                              f"content-length: {len(body)}\r\n\r\n").encode() + body)
                began = time.perf_counter()
                conn.settimeout(5)
                head = conn.recv(65536)
                times.append(time.perf_counter() - began)
                assert head.startswith(b"HTTP/1.1 200")
        assert times[0] < 0.3 <= times[1]
        assert b'"echo"' in head  # the automatic reply: steps-1 asks for one echo call
    finally:
        srv.stop()
