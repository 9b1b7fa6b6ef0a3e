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
