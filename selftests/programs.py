#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Real programs from Debian's packages, unmodified, under rdmastream-run
(docs/programs.md): redis-server with redis-benchmark, nginx serving a
256 MiB file with sendfile to curl, sshd with scp of a 64 MiB file.

Each program runs twice: once under rdmastream-run (case NAME) and once
as it is, over kernel TCP (case NAME_tcp, the baseline, which must pass
as well). Every case checks the program's own output (redis-benchmark's
completed requests and no error line; the sha256 of what curl and scp
delivered) and, for the rdmastream cases, that the data went over RDMA:
rxe's packet counters (sent + received) move by at least a packet per
4 KiB carried (per 16 requests for redis) and /proc/net/snmp's
ActiveOpens + PassiveOpens do not move; for the _tcp cases they must
move, and the RDMA counters must stay below that figure.

Installed as two commands (selftests/Makefile):
  programs   client and server on this host (run-tests single)
  programs2  across two hosts (run-tests wire, on both at once): host 1
             runs the servers on RS_ADDR, host 2 the clients against
             RS_PEER; they agree on each case over one kernel TCP
             control connection (port RS_PROGRAMS_CTRL, 47300) opened
             before any case, so it opens no TCP connection during one.

Each host prints kselftest-shaped TAP, one case per program and setting,
and "programs: <case> <figure> ..." lines, also appended to
$RS_OUT/programs.txt.

Knobs (defaults): RS_PROGRAMS_NGINX_MB (256), RS_PROGRAMS_SCP_MB (64),
RS_PROGRAMS_REDIS_N (20000, pipelined -P 16), RS_PROGRAMS_REDIS_N1
(2000, without -P), RS_PROGRAMS_REDIS_C (clients, 10),
RS_PROGRAMS_ONLY (comma-separated case names; RS_FAMILY=tcp keeps only
the _tcp ones), RS_PROGRAMS_WAIT (300 s
for the other host), RS_PRELOAD_RUN (the wrapper; default
../preload/rdmastream-run next to this file).
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

ENV = os.environ
HERE = os.path.dirname(os.path.abspath(sys.argv[0]))
RUN = ENV.get("RS_PRELOAD_RUN") or os.path.normpath(
    os.path.join(HERE, "..", "preload", "rdmastream-run"))
WIRE = os.path.basename(sys.argv[0]).startswith("programs2")
HOST = int(ENV.get("RS_HOST", "1"))
ADDR = ENV.get("RS_ADDR", "127.0.0.1")
SERVER = ENV.get("RS_PEER", ADDR) if WIRE and HOST == 2 else ADDR
RDMADEV = ENV.get("RS_RDMADEV", "rxe0")
OUT = ENV.get("RS_OUT", "/tmp")
NGINX_MB = int(ENV.get("RS_PROGRAMS_NGINX_MB", "256"))
SCP_MB = int(ENV.get("RS_PROGRAMS_SCP_MB", "64"))
REDIS_N = int(ENV.get("RS_PROGRAMS_REDIS_N", "20000"))
REDIS_N1 = int(ENV.get("RS_PROGRAMS_REDIS_N1", "2000"))
REDIS_C = int(ENV.get("RS_PROGRAMS_REDIS_C", "10"))
CTRL_PORT = int(ENV.get("RS_PROGRAMS_CTRL", "47300"))
WAIT = int(ENV.get("RS_PROGRAMS_WAIT", "300"))
MIB = 1 << 20
STOP_SEC = 30		# a server must exit this long after SIGTERM
RUN_SEC = 240		# any one client command


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def info(msg):
    print("# " + msg, flush=True)


def figure(case, text):
    line = "programs: %s %s%s" % (case, "2 hosts " if WIRE else "", text)
    print(line, flush=True)
    try:
        with open(os.path.join(OUT, "programs.txt"), "a") as f:
            f.write(line + "\n")
    except OSError:
        pass


def rdma_packets():
    """Packets rxe sent and received (its hw counters)."""
    base = "/sys/class/infiniband/%s/ports/1/hw_counters/" % RDMADEV
    n = 0
    for c in ("sent_pkts", "rcvd_pkts"):
        with open(base + c) as f:
            n += int(f.read())
    return n


def tcp_opens():
    """Kernel TCP's active plus passive opens (/proc/net/snmp)."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Tcp:")]
    tcp = dict(zip(rows[0][1:], [int(v) for v in rows[1][1:]]))
    return tcp["ActiveOpens"] + tcp["PassiveOpens"]


class Carried:
    """Checks how a case's connections went: RDMA and no TCP open, or
    (tcp) at least one TCP open. min_pkts is set by the case once it
    knows how much it carried."""

    def __init__(self, tcp):
        self.tcp = tcp
        self.min_pkts = 0

    def __enter__(self):
        self.pkts, self.opens = rdma_packets(), tcp_opens()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type:
            return False
        pkts = rdma_packets() - self.pkts
        opens = tcp_opens() - self.opens
        info("RDMA packets %d (%s %d wanted), TCP opens %d"
             % (pkts, "below" if self.tcp else "at least", self.min_pkts,
                opens))
        if self.tcp:
            check(opens > 0, "the TCP baseline opened no TCP connection")
            check(pkts < self.min_pkts,
                  "the TCP baseline moved %d RDMA packets" % pkts)
        else:
            check(opens == 0, "%d TCP connections opened" % opens)
            check(pkts >= self.min_pkts, "only %d RDMA packets" % pkts)
        return False


def sh(cmd, timeout=RUN_SEC, **kw):
    """Runs cmd, returns (status, stdout+stderr)."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL, timeout=timeout, **kw)
    return p.returncode, p.stdout.decode(errors="replace")


def prefix(tcp):
    return [] if tcp else [RUN]


def wait_for(what, cond, proc, sec=60):
    end = time.time() + sec
    while time.time() < end:
        if cond():
            return
        check(proc.poll() is None, "%s exited with %s" % (what, proc.poll()))
        time.sleep(0.2)
    raise Fail("%s not ready after %d s" % (what, sec))


def grep(path, pattern):
    try:
        with open(path, errors="replace") as f:
            return re.search(pattern, f.read(), re.M)
    except OSError:
        return None


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            for line in f.read().splitlines()[-n:]:
                info("  " + line)
    except OSError:
        pass


def stop(what, proc, log=None):
    """SIGTERM; the server must exit cleanly within STOP_SEC."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        status = proc.wait(STOP_SEC)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise Fail("%s did not exit after SIGTERM" % what)
    if status not in (0, -signal.SIGTERM, 128 + signal.SIGTERM):
        if log:
            tail(log)
        raise Fail("%s exited with status %d" % (what, status))


def fresh(path):
    """A log or pid file of an earlier case must not answer for this one."""
    if os.path.exists(path):
        os.unlink(path)
    return path


def make_file(path, mb):
    """mb MiB: one random MiB, each copy starting with its index."""
    block = bytearray(os.urandom(MIB))
    with open(path, "wb") as f:
        for i in range(mb):
            block[:8] = i.to_bytes(8, "little")
            f.write(block)


def sha256(path):
    status, out = sh(["sha256sum", path])
    check(status == 0, "sha256sum %s: %s" % (path, out))
    return out.split()[0]


# ---- the programs: server_start/stop on the server host, client on the
# ---- client host; dicts travel between them (JSON in the wire mode)

class Redis:
    name, port = "redis", 6390

    def client_prepare(self, tmp):
        return {}

    def server_start(self, tmp, tcp, args):
        self.log = fresh(os.path.join(tmp, "redis.log"))
        cmd = prefix(tcp) + [
            "redis-server", "--bind", ADDR, "--port", str(self.port),
            "--save", "", "--appendonly", "no", "--protected-mode", "no",
            "--daemonize", "no", "--dir", tmp, "--logfile", self.log]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
        wait_for("redis-server",
                 lambda: grep(self.log, "Ready to accept connections"),
                 self.proc)
        return {}

    def server_stop(self, tmp, args):
        stop("redis-server", self.proc, self.log)
        check(not grep(self.log, r"# (Error|.*[Ff]ailed)"),
              "redis-server logged an error")
        return {}

    def bench(self, tcp, case, n, extra):
        label = "-P 16" if extra else "no -P"
        start = time.time()
        status, out = sh(prefix(tcp) + [
            "redis-benchmark", "-h", SERVER, "-p", str(self.port),
            "-c", str(REDIS_C), "-t", "set,get", "-n", str(n)] + extra)
        if status:
            info(out[-2000:])
        check(status == 0, "redis-benchmark %s: status %d" % (label, status))
        bad = [ln for ln in out.replace("\r", "\n").splitlines()
               if re.search(r"error|ERR|WARN|[Cc]ould not", ln)]
        check(not bad, "redis-benchmark %s printed %r" % (label, bad[:3]))
        rps = {}
        for t in ("SET", "GET"):
            m = re.search(r"====== %s ======.*?(\d+) requests completed.*?"
                          r"throughput summary: ([\d.]+) requests per"
                          % t, out, re.S)
            check(m, "redis-benchmark %s: no %s summary" % (label, t))
            check(int(m.group(1)) == n, "%s: %s of %d requests completed"
                  % (t, m.group(1), n))
            rps[t] = float(m.group(2))
        figure(case, "%s SET %.0f GET %.0f requests/s (%d each, %d clients,"
               " %.1f s)" % (label, rps["SET"], rps["GET"], n, REDIS_C,
                             time.time() - start))

    def client(self, tmp, tcp, case, info_, carried):
        self.bench(tcp, case, REDIS_N, ["-P", "16"])
        self.bench(tcp, case, REDIS_N1, [])
        carried.min_pkts = (2 * REDIS_N + 2 * REDIS_N1) // 16
        return {}

    def min_pkts(self):
        return (2 * REDIS_N + 2 * REDIS_N1) // 16


NGINX_CONF = """\
daemon off;
master_process on;
worker_processes 1;
user root;
pid %(t)s/nginx.pid;
error_log %(t)s/error.log info;
events { worker_connections 64; }
http {
    access_log %(t)s/access.log;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 5;
    client_body_temp_path %(t)s/body;
    proxy_temp_path %(t)s/proxy;
    fastcgi_temp_path %(t)s/fastcgi;
    uwsgi_temp_path %(t)s/uwsgi;
    scgi_temp_path %(t)s/scgi;
    default_type application/octet-stream;
    server {
        listen %(a)s:%(p)d deferred reuseport so_keepalive=on;
        root %(t)s/www;
    }
}
"""


class Nginx:
    name, port = "nginx", 8090

    def client_prepare(self, tmp):
        return {}

    def server_start(self, tmp, tcp, args):
        www = os.path.join(tmp, "www")
        path = os.path.join(www, "big.bin")
        if not os.path.exists(path):
            os.makedirs(www, exist_ok=True)
            make_file(path, NGINX_MB)
            self.sha = sha256(path)
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF % {"t": tmp, "a": ADDR, "p": self.port})
        self.log = fresh(os.path.join(tmp, "error.log"))
        fresh(os.path.join(tmp, "access.log"))
        pid = fresh(os.path.join(tmp, "nginx.pid"))
        self.proc = subprocess.Popen(
            prefix(tcp) + ["nginx", "-p", tmp, "-c", conf, "-e", self.log],
            stdin=subprocess.DEVNULL)
        wait_for("nginx", lambda: os.path.exists(pid), self.proc)
        return {"sha": self.sha}

    def server_stop(self, tmp, args):
        stop("nginx", self.proc, self.log)
        check(grep(os.path.join(tmp, "access.log"),
                   r'"GET /big.bin HTTP/1.1" 200 %d ' % (NGINX_MB * MIB)),
              "access.log has no complete GET of big.bin")
        check(not grep(self.log, r"\[(error|crit|alert|emerg)\]"),
              "nginx logged an error")
        return {}

    def client(self, tmp, tcp, case, srv, carried):
        url = "http://%s:%d/big.bin" % (SERVER, self.port)
        run = " ".join(prefix(tcp))
        cmd = ("set -o pipefail; %s curl -sS --fail -o - -w "
               "'%%{stderr}%%{http_code} %%{size_download} "
               "%%{speed_download}\\n' %s | sha256sum" % (run, url))
        start = time.time()
        status, out = sh(["bash", "-c", cmd])
        secs = time.time() - start
        check(status == 0, "curl | sha256sum: status %d: %s" % (status, out))
        m = re.search(r"^(\d+) (\d+) ([\d.]+)$", out, re.M)
        check(m, "no curl figures in %r" % out)
        check(m.group(1) == "200", "HTTP status %s" % m.group(1))
        check(int(m.group(2)) == NGINX_MB * MIB,
              "curl got %s bytes" % m.group(2))
        got = re.search(r"^([0-9a-f]{64}) ", out, re.M)
        check(got and got.group(1) == srv["sha"],
              "sha256 %s, served %s" % (got and got.group(1), srv["sha"]))
        figure(case, "%d MiB in %.1f s: %.1f MiB/s (curl's figure)"
               % (NGINX_MB, secs, float(m.group(3)) / MIB))
        return {}

    def min_pkts(self):
        return NGINX_MB * MIB // 4096


SSHD_CONF = """\
Port %(p)d
ListenAddress %(a)s
HostKey %(t)s/host_ed25519
PidFile none
AuthorizedKeysFile %(t)s/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
Subsystem sftp /usr/lib/openssh/sftp-server
"""


class Ssh:
    name, port = "ssh", 2290

    def client_prepare(self, tmp):
        key = os.path.join(tmp, "id_ed25519")
        if not os.path.exists(key):
            status, out = sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "",
                              "-f", key])
            check(status == 0, "ssh-keygen: %s" % out)
            self.src = os.path.join(tmp, "src.bin")
            make_file(self.src, SCP_MB)
            self.sha = sha256(self.src)
        with open(key + ".pub") as f:
            return {"pub": f.read(), "sha": self.sha}

    def server_start(self, tmp, tcp, args):
        hk = os.path.join(tmp, "host_ed25519")
        if not os.path.exists(hk):
            status, out = sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "",
                              "-f", hk])
            check(status == 0, "ssh-keygen: %s" % out)
        with open(os.path.join(tmp, "authorized_keys"), "w") as f:
            f.write(args["pub"])
        conf = os.path.join(tmp, "sshd_config")
        with open(conf, "w") as f:
            f.write(SSHD_CONF % {"t": tmp, "a": ADDR, "p": self.port})
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        self.dst = fresh(os.path.join(tmp, "dst.bin"))
        self.log = fresh(os.path.join(tmp, "sshd.log"))
        # sshd re-executes itself for each connection (the socket
        # inherited as its stdin/stdout): the preload meets it again
        self.proc = subprocess.Popen(
            prefix(tcp) + ["/usr/sbin/sshd", "-D", "-e", "-f", conf],
            stdin=subprocess.DEVNULL, stderr=open(self.log, "w"))
        wait_for("sshd", lambda: grep(self.log, "Server listening on"),
                 self.proc)
        return {}

    def server_stop(self, tmp, args):
        stop("sshd", self.proc, self.log)
        check(grep(self.log, "Accepted publickey for root"),
              "sshd logged no accepted login")
        check(os.path.exists(self.dst), "scp wrote no file")
        got = sha256(self.dst)
        check(got == args["sha"], "sha256 %s, sent %s" % (got, args["sha"]))
        os.unlink(self.dst)
        return {}

    def client(self, tmp, tcp, case, srv, carried):
        stmp = srv.get("tmp", tmp)
        start = time.time()
        status, out = sh(prefix(tcp) + [
            "scp", "-q", "-P", str(self.port), "-i",
            os.path.join(tmp, "id_ed25519"), "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            self.src, "root@%s:%s/dst.bin" % (SERVER, stmp)])
        secs = time.time() - start
        check(status == 0, "scp: status %d: %s" % (status, out[-1000:]))
        figure(case, "%d MiB in %.1f s: %.1f MiB/s (scp's wall time)"
               % (SCP_MB, secs, SCP_MB / secs))
        return {}

    def min_pkts(self):
        return SCP_MB * MIB // 4096


PROGRAMS = [Redis(), Nginx(), Ssh()]
CASES = [(p, tcp) for p in PROGRAMS for tcp in (False, True)]


def case_name(prog, tcp):
    return prog.name + ("_tcp" if tcp else "")


# ---- one host, or two with a control connection

def run_single(prog, tcp, tmp):
    case = case_name(prog, tcp)
    with Carried(tcp) as carried:
        carried.min_pkts = prog.min_pkts()
        args = prog.client_prepare(tmp)
        # measure only what the programs carry, not the file making
        carried.pkts, carried.opens = rdma_packets(), tcp_opens()
        srv = prog.server_start(tmp, tcp, args)
        srv["tmp"] = tmp
        try:
            prog.client(tmp, tcp, case, srv, carried)
        finally:
            prog.server_stop(tmp, args)


class Ctrl:
    """JSON lines over one kernel TCP connection between the hosts."""

    def __init__(self):
        end = time.time() + WAIT
        if HOST == 1:
            ls = socket.create_server((ADDR, CTRL_PORT))
            ls.settimeout(WAIT)
            self.s, _ = ls.accept()
            ls.close()
        else:
            while True:
                try:
                    self.s = socket.create_connection((SERVER, CTRL_PORT), 5)
                    break
                except OSError:
                    check(time.time() < end, "host 1 never answered")
                    time.sleep(1)
        self.s.settimeout(None)
        self.f = self.s.makefile("rw")

    def send(self, **msg):
        self.f.write(json.dumps(msg) + "\n")
        self.f.flush()

    def recv(self):
        line = self.f.readline()
        check(line, "the other host closed the control connection")
        return json.loads(line)


def run_wire_server(ctrl, prog, tcp, tmp):
    case = case_name(prog, tcp)
    msg = ctrl.recv()
    check(msg.get("case") == case, "host 2 asked for %r" % msg.get("case"))
    if "error" in msg:
        raise Fail("host 2: " + msg["error"])
    with Carried(tcp) as carried:
        carried.min_pkts = prog.min_pkts()
        try:
            srv = prog.server_start(tmp, tcp, msg["args"])
        except Exception as e:
            ctrl.send(error="host 1: %s" % e)
            raise
        srv["tmp"] = tmp
        ctrl.send(ready=srv)
        done = ctrl.recv()
        try:
            prog.server_stop(tmp, msg["args"])
        except Exception as e:
            ctrl.send(error="host 1: %s" % e)
            raise
        ctrl.send(ok=True)
        check("error" not in done, "host 2: %s" % done.get("error"))


def run_wire_client(ctrl, prog, tcp, tmp):
    case = case_name(prog, tcp)
    try:
        args = prog.client_prepare(tmp)
    except Exception as e:
        ctrl.send(case=case, error=str(e))
        raise
    with Carried(tcp) as carried:
        carried.min_pkts = prog.min_pkts()
        ctrl.send(case=case, args=args)
        srv = ctrl.recv()
        if "error" in srv:
            raise Fail(srv["error"])
        err = None
        try:
            prog.client(tmp, tcp, case, srv["ready"], carried)
        except Exception as e:
            err = str(e)
        ctrl.send(done=True, **({"error": err} if err else {}))
        end = ctrl.recv()
        check(err is None, err)
        check("error" not in end, end.get("error"))


def main():
    only = [c for c in ENV.get("RS_PROGRAMS_ONLY", "").split(",") if c]
    cases = [(p, t) for p, t in CASES if not only or case_name(p, t) in only]
    if ENV.get("RS_FAMILY") == "tcp":	# no module: the baselines only
        cases = [(p, t) for p, t in cases if t]
    print("TAP version 13")
    print("1..%d" % len(cases), flush=True)
    if not WIRE and not os.path.exists(RUN):
        info("no %s (make preload)" % RUN)
    ctrl, ctrl_err = None, None
    if WIRE:
        try:
            ctrl = Ctrl()
        except Exception as e:	# every case fails with it, at once
            ctrl_err = "no control connection to the other host: %s" % e
    tmp = tempfile.mkdtemp(prefix="rs-programs.")
    failed = 0
    try:
        for i, (prog, tcp) in enumerate(cases, 1):
            name = case_name(prog, tcp)
            print("#  RUN           programs.%s ..." % name, flush=True)
            start = time.time()
            try:
                check(not ctrl_err, ctrl_err)
                if not WIRE:
                    run_single(prog, tcp, tmp)
                elif HOST == 1:
                    run_wire_server(ctrl, prog, tcp, tmp)
                else:
                    run_wire_client(ctrl, prog, tcp, tmp)
                ok = True
            except Exception as e:
                ok = False
                info("%s: %s" % (name, e))
                if not isinstance(e, Fail):
                    info(traceback.format_exc().replace("\n", "\n# "))
            info("%s: %.1f s" % (name, time.time() - start))
            if ok:
                print("#            OK  programs.%s" % name)
                print("ok %d programs.%s" % (i, name), flush=True)
            else:
                failed += 1
                print("#          FAIL  programs.%s" % name)
                print("not ok %d programs.%s" % (i, name), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("# Totals: pass:%d fail:%d xfail:0 xpass:0 skip:0 error:0"
          % (len(cases) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
