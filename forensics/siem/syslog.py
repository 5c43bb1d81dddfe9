"""RFC 5424 syslog framing for CEF lines, sent over UDP (RFC 5426: one message per datagram) or TCP
(RFC 6587 section 3.4.1, octet counting: ``MSG-LEN SP SYSLOG-MSG``, so a message may hold any byte).

    SYSLOG-MSG = HEADER SP STRUCTURED-DATA [SP MSG]
    HEADER     = PRI VERSION SP TIMESTAMP SP HOSTNAME SP APP-NAME SP PROCID SP MSGID

HEADER fields are PRINTUSASCII (%d33-126) of bounded length, or ``-``; STRUCTURED-DATA is ``-``; MSG is
MSG-UTF8 (a BOM, then the UTF-8 CEF line). The facility is 4 (security/authorization messages); the
syslog severity follows the CEF severity. TIMESTAMP is the time the message is made (the event's own
time is CEF's rt)."""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime

from forensics.errors import InputError
from forensics.siem.model import PRODUCT

FACILITY = 4
BOM = b"\xef\xbb\xbf"


def syslog_severity(cef_severity: int) -> int:
    """CEF 9-10 (Very-High) critical, 7-8 (High) error, 4-6 (Medium) warning, 0-3 (Low) notice."""
    return 2 if cef_severity >= 9 else 3 if cef_severity >= 7 else 4 if cef_severity >= 4 else 5


def header_field(value: str, limit: int) -> str:
    """A HEADER field: printable US-ASCII without spaces, at most `limit` characters; else the NILVALUE."""
    text = "".join(ch for ch in value if 33 <= ord(ch) <= 126)[:limit]
    return text or "-"


def frame(
    cef_line: str, cef_severity: int, msgid: str, hostname: str | None = None, now: datetime | None = None
) -> bytes:
    now = now or datetime.now(UTC)
    ts = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    host = header_field(hostname if hostname is not None else socket.gethostname(), 255)
    pri = FACILITY * 8 + syslog_severity(cef_severity)
    head = f"<{pri}>1 {ts} {host} {header_field(PRODUCT, 48)} {os.getpid()} {header_field(msgid, 32)} -"
    return head.encode("ascii") + b" " + BOM + cef_line.encode("utf-8")


def parse_target(target: str) -> tuple[str, str, int]:
    """``[udp://|tcp://]HOST:PORT`` (IPv6 in brackets) -> (protocol, host, port); UDP by default."""
    proto, rest = "udp", target
    if "://" in target:
        proto, rest = target.split("://", 1)
        if proto not in ("udp", "tcp"):
            raise InputError(f"--syslog {target!r}: protocol {proto!r} is not udp or tcp")
    host, sep, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--syslog {target!r}: expected HOST:PORT (udp://HOST:PORT or tcp://HOST:PORT)")
    return proto, host, int(port)


class Sender:
    def __init__(self, target: str):
        self.target = target
        self.proto, host, port = parse_target(target)
        kind = socket.SOCK_DGRAM if self.proto == "udp" else socket.SOCK_STREAM
        try:
            family, _, _, _, addr = socket.getaddrinfo(host, port, type=kind)[0]
            self.sock = socket.socket(family, kind)
            self.sock.connect(addr)
        except OSError as err:
            raise InputError(f"--syslog {target}: {err.strerror or err}") from None

    def send(self, message: bytes) -> None:
        try:
            if self.proto == "udp":
                self.sock.send(message)
            else:
                self.sock.sendall(str(len(message)).encode("ascii") + b" " + message)
        except OSError as err:
            raise InputError(f"--syslog {self.target}: {err.strerror or err}") from None

    def close(self) -> None:
        self.sock.close()
