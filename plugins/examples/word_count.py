#!/usr/bin/env python3
"""An oxibot tool plugin in plain Python: `word_count` and `py_reverse`.

Written from the protocol description in the oxibot-proto crate docs, without any SDK:
the kernel starts this program with OXIBOT_PLUGIN_SOCKET and OXIBOT_PLUGIN_TOKEN set; we
connect to that Unix socket and exchange frames, each a 4-byte big-endian body length
followed by one MessagePack map whose string key "type" names the message.

Needs only the standard library and the `msgpack` package (pip install msgpack).
"""

import os
import socket
import struct
import sys

import msgpack

PROTOCOL = "oxibot"
VERSION = 1
PLUGIN_NAME = "pywords"
MAX_FRAME = 16 * 1024 * 1024  # the protocol's default frame limit, both ways

EXIT_OK = 0
EXIT_PROTOCOL = 1  # the kernel sent something we cannot read
EXIT_REFUSED = 2  # not started by the kernel, or the kernel refused us


def log(text):
    """stderr goes line by line into the kernel's log."""
    print(f"{PLUGIN_NAME}: {text}", file=sys.stderr, flush=True)


class ProtocolError(Exception):
    """The peer broke the framing or sent something that is not a message."""


class Connection:
    """Framed MessagePack messages over a connected Unix socket."""

    def __init__(self, sock):
        self.sock = sock
        self.rfile = sock.makefile("rb")

    def _read_exact(self, n, at_boundary):
        data = self.rfile.read(n)
        if not data and at_boundary:
            return None  # clean end of stream between two frames
        if len(data) < n:
            raise ProtocolError(f"stream ended inside a frame ({len(data)} of {n} bytes)")
        return data

    def receive(self):
        """The next message as a dict, or None when the kernel closed the connection."""
        prefix = self._read_exact(4, at_boundary=True)
        if prefix is None:
            return None
        (length,) = struct.unpack(">I", prefix)
        if length > MAX_FRAME:
            # Refuse before reading or allocating the body.
            raise ProtocolError(f"frame of {length} bytes is over the {MAX_FRAME}-byte limit")
        body = self._read_exact(length, at_boundary=False)
        try:
            message = msgpack.unpackb(body, raw=False)
        except Exception as error:  # msgpack raises several types for bad input
            raise ProtocolError(f"malformed frame: {error}") from error
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise ProtocolError("frame is not a map with a string 'type' field")
        return message

    def send(self, message):
        body = msgpack.packb(message, use_bin_type=True)
        if len(body) > MAX_FRAME:
            raise ValueError(f"message of {len(body)} bytes is over the frame limit")
        self.sock.sendall(struct.pack(">I", len(body)) + body)


# --- the tools ---------------------------------------------------------------

TEXT_PARAMETERS = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "The text to work on"}},
    "required": ["text"],
}

MANIFEST_TOOLS = [
    {
        "name": "word_count",
        "description": "Count the lines, words and characters of a text",
        "parameters": TEXT_PARAMETERS,
        "read_only": True,
        "exclusive": False,
    },
    {
        "name": "py_reverse",
        "description": "Reverse a text character by character",
        "parameters": TEXT_PARAMETERS,
        "read_only": True,
        "exclusive": False,
    },
]


class ToolError(Exception):
    """A failure to report to the model as an error result."""


def text_argument(arguments):
    text = arguments.get("text") if isinstance(arguments, dict) else None
    if not isinstance(text, str):
        raise ToolError("the 'text' argument is required and must be a string")
    return text


def word_count(arguments):
    text = text_argument(arguments)
    lines = len(text.splitlines())
    words = len(text.split())
    return f"{lines} lines, {words} words, {len(text)} characters"


def py_reverse(arguments):
    return text_argument(arguments)[::-1]


TOOLS = {"word_count": word_count, "py_reverse": py_reverse}


def run_call(call):
    """Runs one call and returns its `result` message."""
    call_id = call.get("id")
    tool = TOOLS.get(call.get("tool"))
    if tool is None:
        content = f"Error: this plugin has no tool named '{call.get('tool')}' (it has: {', '.join(TOOLS)})"
        return {"type": "result", "id": call_id, "content": content, "is_error": True}
    try:
        content = tool(call.get("arguments") or {})
    except ToolError as error:
        return {"type": "result", "id": call_id, "content": f"Error: {error}", "is_error": True}
    except Exception as error:  # a bug in a tool must not take the plugin down
        return {"type": "result", "id": call_id, "content": f"Error: the tool failed ({error})", "is_error": True}
    return {"type": "result", "id": call_id, "content": content, "is_error": False}


# --- the protocol ------------------------------------------------------------


def handshake(conn, token):
    """Hello both ways, then the manifest. Returns an exit status to stop with, or None."""
    conn.send({
        "type": "hello",
        "protocol": PROTOCOL,
        "version": VERSION,
        "name": PLUGIN_NAME,
        "kind": "tool",
        # Its two tools never change, so the kernel may start it on their first call.
        "features": ["cancel", "static_manifest"],
        "token": token,
    })
    while True:
        message = conn.receive()
        if message is None:
            log("the kernel closed the connection during the handshake")
            return EXIT_REFUSED
        kind = message["type"]
        if kind == "goodbye":
            log(f"the kernel refused this plugin: {message.get('reason', '')}")
            return EXIT_REFUSED
        if kind == "hello":
            if message.get("protocol") != PROTOCOL or message.get("version") != VERSION:
                log(f"the kernel speaks {message.get('protocol')} version {message.get('version')}, "
                    f"this plugin speaks {PROTOCOL} version {VERSION}")
                return EXIT_REFUSED
            break
        if kind == "ping":
            conn.send({"type": "pong", "nonce": message.get("nonce")})
        # anything else before the kernel's hello is ignored
    conn.send({"type": "manifest", "tools": MANIFEST_TOOLS})
    return None


def serve(conn):
    """Answers messages until the kernel closes the connection or says goodbye."""
    while True:
        message = conn.receive()
        if message is None:
            return EXIT_OK
        kind = message["type"]
        if kind == "call":
            result = run_call(message)
            try:
                conn.send(result)
            except ValueError as error:
                conn.send({"type": "result", "id": result["id"], "is_error": True,
                           "content": f"Error: the output is too large to send ({error})"})
        elif kind == "ping":
            conn.send({"type": "pong", "nonce": message.get("nonce")})
        elif kind == "goodbye":
            log(f"goodbye from the kernel: {message.get('reason', '')}")
            return EXIT_OK
        # "cancel": every call is answered before the next message is read, so there is
        # never anything to stop. Unknown message types are ignored.


def main():
    socket_path = os.environ.get("OXIBOT_PLUGIN_SOCKET")
    if not socket_path:
        print(
            f"{os.path.basename(sys.argv[0])} is an oxibot tool plugin ({PLUGIN_NAME}); the oxibot kernel "
            "starts it, not you (OXIBOT_PLUGIN_SOCKET is not set). Install it as "
            "~/.oxibot/plugins/oxibot-tool-pywords and run `oxibot tools list`.",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    token = os.environ.get("OXIBOT_PLUGIN_TOKEN", "")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(socket_path)
    except OSError as error:
        log(f"cannot connect to the kernel at {socket_path}: {error}")
        return EXIT_REFUSED
    conn = Connection(sock)
    try:
        status = handshake(conn, token)
        if status is not None:
            return status
        return serve(conn)
    except ProtocolError as error:
        log(f"protocol error, closing the connection: {error}")
        return EXIT_PROTOCOL
    except (BrokenPipeError, ConnectionResetError):
        return EXIT_OK  # the kernel went away while we were writing
    finally:
        sock.close()


if __name__ == "__main__":
    sys.exit(main())
