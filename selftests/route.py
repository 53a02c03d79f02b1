#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Python through the IPPROTO route: socket(AF_INET, SOCK_STREAM,
IPPROTO_RDMASTREAM), with nothing but the standard library.

Python's socket module takes any protocol number, so the route makes
rdmastream usable from it (an AF_RDMASTREAM socket is not: Python refuses
its addresses). Each case checks what a Python program sees (names as
tuples, SO_DOMAIN, timeouts, makefile(), asyncio streams) and that the
bytes went over RDMA: the RDMA device's packet counter moves by at least
one packet per 4 KiB carried, and kernel TCP opens no connection.

Output is TAP in the shape of the kselftest harness, for run-tests.
Environment: RS_ADDR, RS_ADDR6 (IPv6 cases), RS_RDMADEV (rxe0),
RS_IPPROTO (else the module's ipproto parameter), RS_ROUTE_MB (4).
"""
import asyncio
import hashlib
import os
import signal
import socket
import sys
import threading
import time
import traceback

ADDR = os.environ.get("RS_ADDR", "198.18.0.1")
ADDR6 = os.environ.get("RS_ADDR6")
RDMADEV = os.environ.get("RS_RDMADEV", "rxe0")
MB = int(os.environ.get("RS_ROUTE_MB", "4"))
SOL_RDMASTREAM = 298
RDMASTREAM_INFO = 1
TIMEOUT = 120


def ipproto():
    if os.environ.get("RS_IPPROTO"):
        return int(os.environ["RS_IPPROTO"])
    try:
        with open("/sys/module/rdmastream/parameters/ipproto") as f:
            return int(f.read())
    except OSError:
        return 260


PROTO = ipproto()


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def eq(want, got, what):
    if want != got:
        raise Fail("%s: expected %r, got %r" % (what, want, got))


def info(msg):
    print("# " + msg, flush=True)


def rdma_packets():
    """Packets the RDMA device sent (rxe's hw counter)."""
    path = "/sys/class/infiniband/%s/ports/1/hw_counters/sent_pkts" % RDMADEV
    with open(path) as f:
        return int(f.read())


def tcp_opens():
    """Kernel TCP's active plus passive opens (/proc/net/snmp)."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Tcp:")]
    names, values = rows[0][1:], [int(v) for v in rows[1][1:]]
    tcp = dict(zip(names, values))
    return tcp["ActiveOpens"] + tcp["PassiveOpens"]


class OverRdma:
    """Asserts that what ran inside went over RDMA and not over TCP."""

    def __init__(self, nbytes):
        self.nbytes = nbytes

    def __enter__(self):
        self.pkts = rdma_packets()
        self.opens = tcp_opens()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type:
            return False
        pkts = rdma_packets() - self.pkts
        info("%d bytes: %d RDMA packets sent, %d TCP opens"
             % (self.nbytes, pkts, tcp_opens() - self.opens))
        check(pkts >= self.nbytes // 4096,
              "only %d RDMA packets for %d bytes" % (pkts, self.nbytes))
        eq(0, tcp_opens() - self.opens, "TCP connections opened")
        return False


def rsocket(family=socket.AF_INET):
    return socket.socket(family, socket.SOCK_STREAM, PROTO)


def listener(family=socket.AF_INET, addr=None):
    s = rsocket(family)
    s.bind((addr or (ADDR if family == socket.AF_INET else ADDR6), 0))
    s.listen(8)
    return s


def pattern(n, seed):
    out = bytearray()
    block = hashlib.sha256(b"%d" % seed).digest() * 2048
    while len(out) < n:
        out += block
    return bytes(out[:n])


def echo_server(lsock, count=1):
    """Accepts count connections and echoes each in its own thread."""
    def serve(c):
        with c:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                c.sendall(b)

    def run():
        for _ in range(count):
            c, _ = lsock.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def echo_through(c, data):
    """Sends data on c while reading it back; returns what came back."""
    got = bytearray()

    def reader():
        while len(got) < len(data):
            b = c.recv(1 << 20)
            if not b:
                break
            got.extend(b)

    t = threading.Thread(target=reader)
    t.start()
    c.sendall(data)
    t.join(TIMEOUT)
    return bytes(got)


# ---- the cases ----

def test_socket():
    """The socket is an AF_INET stream socket with our protocol."""
    s = rsocket()
    with s:
        eq(socket.AF_INET, s.family, "family")
        eq(socket.SOCK_STREAM, s.type, "type")
        eq(PROTO, s.proto, "proto")
        eq(socket.AF_INET, s.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN),
           "SO_DOMAIN")
        eq(PROTO, s.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL),
           "SO_PROTOCOL")
        eq(("0.0.0.0", 0), s.getsockname(), "unbound name")
        try:
            s.getpeername()
            raise Fail("getpeername of an unconnected socket worked")
        except OSError as e:
            eq(107, e.errno, "getpeername errno (ENOTCONN)")


def test_blocking():
    """Blocking client and server: names, data both ways, over RDMA."""
    n = MB << 20
    data = pattern(n, 1)
    with listener() as ls, OverRdma(2 * n):
        eq(ADDR, ls.getsockname()[0], "listener address")
        t = echo_server(ls)
        with rsocket() as c:
            c.connect(ls.getsockname())
            eq(ls.getsockname(), c.getpeername(), "client's peer")
            eq(ADDR, c.getsockname()[0], "client's address")
            got = echo_through(c, data)
            c.shutdown(socket.SHUT_WR)
            eq(b"", c.recv(1), "EOF after the echo")
        t.join(TIMEOUT)
        eq(hashlib.sha256(data).hexdigest(), hashlib.sha256(got).hexdigest(),
           "echoed bytes")


def test_accepted_names():
    """accept() returns the client's address as the client names itself."""
    with listener() as ls, rsocket() as c:
        c.connect(ls.getsockname())
        a, peer = ls.accept()
        with a:
            eq(c.getsockname(), peer, "accept's address")
            eq(c.getsockname(), a.getpeername(), "accepted peer name")
            eq(ls.getsockname(), a.getsockname(), "accepted local name")
            eq(PROTO, a.proto, "accepted socket's protocol")
            eq(socket.AF_INET, a.family, "accepted socket's family")


def test_timeouts():
    """settimeout(): a recv with nothing to read times out, as on TCP."""
    with listener() as ls, rsocket() as c:
        c.settimeout(5)
        c.connect(ls.getsockname())
        a, _ = ls.accept()
        with a:
            c.settimeout(0.3)
            t0 = time.monotonic()
            try:
                c.recv(10)
                raise Fail("recv returned with nothing sent")
            except socket.timeout:
                pass
            check(time.monotonic() - t0 >= 0.25, "timed out too early")
            a.sendall(b"late")
            c.settimeout(5)
            eq(b"late", c.recv(10), "data after the timeout")


def test_makefile():
    """makefile(): a line protocol through buffered file objects."""
    lines = [("line %d " % i) * (i % 50 + 1) + "\n" for i in range(2000)]
    with listener() as ls, rsocket() as c:
        c.connect(ls.getsockname())
        a, _ = ls.accept()
        with a:
            def serve():
                with a.makefile("r") as r, a.makefile("w") as w:
                    for line in r:
                        w.write(line.upper())
                    w.flush()
                a.shutdown(socket.SHUT_WR)

            def send():
                with c.makefile("w") as w:
                    w.writelines(lines)
                c.shutdown(socket.SHUT_WR)

            t = threading.Thread(target=serve, daemon=True)
            t.start()
            # (both ways at once: 500 KB each way are more than the rings)
            t2 = threading.Thread(target=send, daemon=True)
            t2.start()
            with c.makefile("r") as r:
                got = r.readlines()
            t.join(TIMEOUT)
            t2.join(TIMEOUT)
    eq(len(lines), len(got), "lines back")
    eq([x.upper() for x in lines], got, "lines' content")


def test_refused():
    """connect() to a port nobody listens on: ConnectionRefusedError."""
    with listener() as ls:
        addr = ls.getsockname()
    with rsocket() as c:
        c.settimeout(30)
        try:
            c.connect(addr)
            raise Fail("connect to a closed port worked")
        except ConnectionRefusedError:
            pass


def test_info():
    """SOL_RDMASTREAM options work on the route's sockets."""
    with listener() as ls, rsocket() as c:
        c.connect(ls.getsockname())
        a, _ = ls.accept()
        with a:
            c.sendall(b"x" * 100000)
            got = 0
            while got < 100000:
                got += len(a.recv(65536))
            raw = c.getsockopt(SOL_RDMASTREAM, RDMASTREAM_INFO, 512)
            check(len(raw) >= 16, "RDMASTREAM_INFO is %d bytes" % len(raw))


async def aio_echo(reader, writer):
    while True:
        b = await reader.read(65536)
        if not b:
            break
        writer.write(b)
        await writer.drain()
    writer.close()
    await writer.wait_closed()


async def aio_connect(s, addr):
    """A non-blocking connect on the event loop. (loop.sock_connect()
    cannot be used: with a protocol other than 0, TCP or UDP it resolves
    the address through getaddrinfo(), which glibc refuses for protocol
    260 with EAI_SOCKTYPE; asyncio does the same to IPPROTO_MPTCP.)"""
    loop = asyncio.get_running_loop()
    s.setblocking(False)
    err = s.connect_ex(addr)
    if err == 0:
        return
    eq(115, err, "non-blocking connect (EINPROGRESS)")
    done = loop.create_future()
    loop.add_writer(s.fileno(), done.set_result, None)
    try:
        await done
    finally:
        loop.remove_writer(s.fileno())
    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err:
        raise OSError(err, os.strerror(err))


async def aio_client(addr, family, data):
    s = rsocket(family)
    await aio_connect(s, addr)
    reader, writer = await asyncio.open_connection(sock=s)
    got = bytearray()

    async def read():
        while len(got) < len(data):
            b = await reader.read(65536)
            if not b:
                break
            got.extend(b)

    rd = asyncio.create_task(read())
    for i in range(0, len(data), 32768):
        writer.write(data[i:i + 32768])
        await writer.drain()
    await asyncio.wait_for(rd, TIMEOUT)
    writer.close()
    await writer.wait_closed()
    return bytes(got)


async def aio_main(family, addr, clients):
    ls = listener(family, addr)
    server = await asyncio.start_server(aio_echo, sock=ls)
    async with server:
        datas = [pattern(256 << 10, 10 + i) for i in range(clients)]
        gots = await asyncio.gather(
            *[aio_client(ls.getsockname(), family, d) for d in datas])
    for i, (d, g) in enumerate(zip(datas, gots)):
        eq(len(d), len(g), "client %d: bytes back" % i)
        check(d == g, "client %d: echoed bytes differ" % i)
    return sum(len(d) for d in datas)


def test_asyncio():
    """asyncio streams: 8 clients and a server on one event loop."""
    with OverRdma(8 * 2 * (256 << 10)):
        asyncio.run(asyncio.wait_for(aio_main(socket.AF_INET, ADDR, 8),
                                     TIMEOUT))


def need6():
    check(ADDR6, "RS_ADDR6 is not set: IPv6 must be tested")


def test_ipv6():
    """AF_INET6: 4-tuple names and data, over RDMA."""
    need6()
    n = 1 << 20
    data = pattern(n, 2)
    with listener(socket.AF_INET6) as ls, OverRdma(2 * n):
        name = ls.getsockname()
        eq(4, len(name), "AF_INET6 name")
        eq(socket.inet_pton(socket.AF_INET6, ADDR6),
           socket.inet_pton(socket.AF_INET6, name[0]), "listener address")
        echo_server(ls)
        with rsocket(socket.AF_INET6) as c:
            c.connect(name[:2])
            eq(name, c.getpeername(), "client's peer")
            got = echo_through(c, data)
        check(got == data, "echoed bytes differ")


def test_ipv6_asyncio():
    """asyncio over AF_INET6."""
    need6()
    asyncio.run(asyncio.wait_for(aio_main(socket.AF_INET6, ADDR6, 4),
                                 TIMEOUT))


def test_v4mapped():
    """An AF_INET6 wildcard listener takes IPv4 clients, named v4-mapped;
    with IPV6_V6ONLY it does not."""
    mapped = "::ffff:" + ADDR
    with rsocket(socket.AF_INET6) as ls:
        eq(0, ls.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY),
           "IPV6_V6ONLY default")
        ls.bind(("::", 0))
        ls.listen(4)
        port = ls.getsockname()[1]
        with rsocket() as c:
            c.connect((ADDR, port))
            a, peer = ls.accept()
            with a:
                eq((mapped, c.getsockname()[1], 0, 0), peer,
                   "accept's address")
                eq((mapped, port, 0, 0), a.getsockname(),
                   "accepted local name")
                a.sendall(b"hello")
                eq(b"hello", c.recv(5), "data")
        with rsocket(socket.AF_INET6) as c:
            c.connect((mapped, port))
            eq((mapped, port, 0, 0), c.getpeername(), "v4-mapped peer")
            a, _ = ls.accept()
            a.close()
    with rsocket(socket.AF_INET6) as ls:
        ls.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        eq(1, ls.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY),
           "IPV6_V6ONLY set")
        ls.bind(("::", 0))
        ls.listen(4)
        try:
            ls.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            raise Fail("IPV6_V6ONLY changed on a bound socket")
        except OSError as e:
            eq(22, e.errno, "IPV6_V6ONLY once bound (EINVAL)")
        with rsocket() as c:
            c.settimeout(30)
            try:
                c.connect((ADDR, ls.getsockname()[1]))
                raise Fail("an IPv4 client reached a V6ONLY listener")
            except ConnectionRefusedError:
                pass


def test_wrong_family():
    """Addresses of the other family: EAFNOSUPPORT, as TCP says."""
    import ctypes
    import struct
    libc = ctypes.CDLL(None, use_errno=True)
    sin6 = struct.pack("=HHI16sI", socket.AF_INET6, 0, 0, bytes(16), 0)
    with rsocket() as s:
        r = libc.bind(s.fileno(), sin6, len(sin6))
        eq(-1, r, "bind of a sockaddr_in6")
        eq(97, ctypes.get_errno(), "errno (EAFNOSUPPORT)")
    sin = struct.pack("=HH4s8s", socket.AF_INET, 0,
                      socket.inet_aton(ADDR), bytes(8))
    with rsocket(socket.AF_INET6) as s:
        r = libc.bind(s.fileno(), sin, len(sin))
        eq(-1, r, "AF_INET6 bind of a 16-byte sockaddr_in")
        eq(22, ctypes.get_errno(), "errno (EINVAL: too short)")
        sin_long = sin + bytes(12)
        r = libc.bind(s.fileno(), sin_long, len(sin_long))
        eq(-1, r, "AF_INET6 bind of a sockaddr_in")
        eq(97, ctypes.get_errno(), "errno (EAFNOSUPPORT)")


TESTS = [test_socket, test_blocking, test_accepted_names, test_timeouts,
         test_makefile, test_refused, test_info, test_asyncio, test_ipv6,
         test_ipv6_asyncio, test_v4mapped, test_wrong_family]


def on_alarm(signum, frame):
    raise Fail("timed out after %d s" % TIMEOUT)


def main():
    signal.signal(signal.SIGALRM, on_alarm)
    print("TAP version 13")
    print("1..%d" % len(TESTS))
    info("Starting %d tests through IPPROTO %d (Python %s)"
         % (len(TESTS), PROTO, sys.version.split()[0]))
    failed = 0
    for i, t in enumerate(TESTS, 1):
        name = "route_py." + t.__name__[5:]
        print("#  RUN           %s ..." % name, flush=True)
        signal.alarm(TIMEOUT + 30)
        try:
            t()
            ok = True
        except Exception:
            ok = False
            for line in traceback.format_exc().splitlines():
                info(line)
        signal.alarm(0)
        if ok:
            print("#            OK  %s" % name)
            print("ok %d %s" % (i, name), flush=True)
        else:
            failed += 1
            print("#          FAIL  %s" % name)
            print("not ok %d %s" % (i, name), flush=True)
    info("Totals: pass:%d fail:%d xfail:0 xpass:0 skip:0 error:0"
         % (len(TESTS) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
