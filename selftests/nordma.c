// SPDX-License-Identifier: GPL-2.0
/*
 * Transparent TCP fallback between two hosts when one of them has no RDMA
 * device at all (docs/fallback.md). scripts/check runs it as the nordma
 * group: vm-run --hosts 2 --no-rdma 2, so host 2 has the RDMA stack and
 * the module but no device, and host 1 has rxe0. The same binary runs on
 * both hosts (RS_HOST says which); each case first meets the other host
 * over a plain TCP control connection on its own port, and both exchange
 * verdicts over it at the end, so a failure on either host fails both.
 *
 * tcp_client     host 2's ordinary TCP socket to host 1's rdmastream
 *                listener: accepted, RDMASTREAM_INFO says FB_ACCEPTED
 * no_device      host 2's rdmastream socket (no device on its route)
 *                falls back at once (FB_NO_DEVICE) to host 1's listener
 * silent_peer    host 1's rdmastream socket to host 2's TCP listener:
 *                host 2 never answers the RDMA CM, so after the module's
 *                fallback_ms it connects over TCP (FB_TIMEOUT)
 * silent_nonblock  the same with a non-blocking connect (EINPROGRESS,
 *                then POLLOUT and SO_ERROR 0)
 * nc             netcat (Debian's netcat-openbsd) on host 2 sends a file
 *                to host 1's rdmastream server and prints its verdict
 * curl           python3's http.server under rdmastream-run on host 1,
 *                curl on host 2 fetches a file from it
 *
 * Every stream is RS_NORDMA_MB MiB (16) of the selftests' pattern,
 * checked byte by byte on arrival. Knobs: RS_NORDMA_PORT (47400),
 * RS_NORDMA_WAIT (300 s to wait for the other host), RS_PRELOAD_RUN
 * (the wrapper; default build/preload/rdmastream-run).
 */
#include "rs_common.h"

#include <sys/stat.h>

#define ND_MAGIC	0x616d6472646eULL	/* "ndrdma" */

enum nd_case {
	ND_TCP_CLIENT = 1, ND_NO_DEVICE, ND_SILENT, ND_SILENT_NB, ND_NC,
	ND_CURL,
};

static unsigned int nd_wait(void)
{
	return rs_env_ulong("RS_NORDMA_WAIT", 300);
}

static size_t nd_bytes(void)
{
	return rs_env_ulong("RS_NORDMA_MB", 16) * RS_MIB;
}

/* Case c's data port is base + 2c, its control port base + 2c + 1. */
static unsigned short nd_port(enum nd_case c, bool ctl)
{
	return rs_env_ulong("RS_NORDMA_PORT", 47400) + 2 * c + ctl;
}

static int nd_tcp_socket(void)
{
	return socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
}

/*
 * Meet the other host on case c's control port (plain TCP): host 1
 * accepts, host 2 dials until host 1 listens. Each side calls it once
 * its own listener, if any, is up.
 */
static int nd_meet(struct __test_metadata *_metadata, enum nd_case c)
{
	uint64_t magic = ND_MAGIC + c, got = 0;
	double end = rs_now() + nd_wait();
	struct sockaddr_in sin;
	int lfd, fd;

	if (rs.host == 2) {
		rs_sin(&sin, rs.peer, nd_port(c, true));
		for (;;) {
			fd = nd_tcp_socket();
			ASSERT_GE(fd, 0);
			if (!connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
				break;
			close(fd);
			ASSERT_LT(rs_now(), end)
				TH_LOG("host 1 not there after %u s",
				       nd_wait());
			rs_msleep(200);
		}
		ASSERT_EQ(sizeof(magic), send(fd, &magic, sizeof(magic), 0));
		return fd;
	}
	lfd = nd_tcp_socket();
	ASSERT_GE(lfd, 0);
	ASSERT_EQ(0, rs_setint(lfd, SOL_SOCKET, SO_REUSEADDR, 1));
	rs_sin(&sin, rs.addr, nd_port(c, true));
	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&sin, sizeof(sin)))
		TH_LOG("bind: %s", strerror(errno));
	ASSERT_EQ(0, listen(lfd, 1));
	ASSERT_EQ(POLLIN, rs_poll(lfd, POLLIN, nd_wait() * 1000))
		TH_LOG("host 2 did not come within %u s", nd_wait());
	fd = accept(lfd, NULL, NULL);
	close(lfd);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(sizeof(got), rs_recv_all(fd, &got, sizeof(got), 0));
	ASSERT_EQ(magic, got);
	return fd;
}

/* Tell the other host how this side went and learn how it went there. */
static void nd_verdicts(struct __test_metadata *_metadata, int ctl)
{
	char mine = _metadata->passed ? 'P' : 'F', theirs = 0;

	ASSERT_EQ(1, send(ctl, &mine, 1, 0));
	ASSERT_EQ(0, rs_set_timeo(ctl, SO_RCVTIMEO, 150 * 1000));
	ASSERT_EQ(1, recv(ctl, &theirs, 1, MSG_WAITALL))
		TH_LOG("no verdict from the other host: %s", strerror(errno));
	close(ctl);
	EXPECT_EQ('P', theirs) TH_LOG("the other host failed this case");
}

/* Send len bytes of stream key, then shut the sending side down. */
static void nd_send(struct __test_metadata *_metadata, int fd, uint64_t key,
		    size_t len)
{
	static char buf[256 * 1024];
	size_t off, n;

	for (off = 0; off < len; off += n) {
		n = len - off < sizeof(buf) ? len - off : sizeof(buf);
		rs_pat_fill(buf, n, key, off);
		ASSERT_EQ((ssize_t)n, rs_send_all(fd, buf, n, 0))
			TH_LOG("send at %zu: %s", off, strerror(errno));
	}
	ASSERT_EQ(0, shutdown(fd, SHUT_WR));
}

/* Receive exactly len bytes of stream key, then EOF. */
static void nd_recv(struct __test_metadata *_metadata, int fd, uint64_t key,
		    size_t len)
{
	static char buf[256 * 1024];
	size_t off = 0;
	ssize_t n;

	ASSERT_EQ(0, rs_set_timeo(fd, SO_RCVTIMEO, 120 * 1000));
	for (;;) {
		n = recv(fd, buf, sizeof(buf), 0);
		ASSERT_GE(n, 0) TH_LOG("recv at %zu: %s", off, strerror(errno));
		if (!n)
			break;
		ASSERT_LE(off + n, len) TH_LOG("more than %zu bytes", len);
		ASSERT_EQ((size_t)n, rs_pat_check(buf, n, key, off))
			TH_LOG("bad data near offset %zu", off);
		off += n;
	}
	ASSERT_EQ(len, off) TH_LOG("EOF after %zu of %zu bytes", off, len);
}

/* RDMASTREAM_INFO's fallback reason, -1 with errno if the call failed. */
static int nd_fallback(int fd)
{
	struct rdmastream_info info;
	socklen_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &info, &len))
		return -1;
	if (!(info.rsi_flags & RDMASTREAM_INFO_F_FALLBACK) !=
	    !info.rsi_fallback)
		return -2;	/* the flag and the reason disagree */
	return info.rsi_fallback;
}

/* An rdmastream listener on this host's address, case c's data port. */
static int nd_rs_listener(struct __test_metadata *_metadata, enum nd_case c)
{
	struct sockaddr_in sin;
	int fd;

	fd = rs_socket(0);
	ASSERT_GE(fd, 0) TH_LOG("socket: %s", strerror(errno));
	ASSERT_EQ(0, rs_setint(fd, SOL_SOCKET, SO_REUSEADDR, 1));
	rs_sin(&sin, rs.addr, nd_port(c, false));
	ASSERT_EQ(0, bind(fd, (struct sockaddr *)&sin, sizeof(sin)))
		TH_LOG("bind: %s", strerror(errno));
	ASSERT_EQ(0, listen(fd, 4)) TH_LOG("listen: %s", strerror(errno));
	return fd;
}

/* Host 1's side of a client from host 2: accept, check, echo a stream. */
static void nd_serve(struct __test_metadata *_metadata, int lfd,
		     enum nd_case c)
{
	int fd;

	ASSERT_EQ(POLLIN, rs_poll(lfd, POLLIN, nd_wait() * 1000))
		TH_LOG("no client from host 2");
	fd = accept(lfd, NULL, NULL);
	ASSERT_GE(fd, 0) TH_LOG("accept: %s", strerror(errno));
	EXPECT_EQ(RDMASTREAM_FB_ACCEPTED, nd_fallback(fd));
	nd_recv(_metadata, fd, rs_key(c, 2, 71), nd_bytes());
	nd_send(_metadata, fd, rs_key(c, 1, 71), nd_bytes());
	close(fd);
}

/* A client's side: send a stream, then take the server's and EOF. */
static void nd_talk(struct __test_metadata *_metadata, int fd, enum nd_case c,
		    int me)
{
	nd_send(_metadata, fd, rs_key(c, me, 71), nd_bytes());
	nd_recv(_metadata, fd, rs_key(c, 3 - me, 71), nd_bytes());
}

static void nd_check_hosts(struct __test_metadata *_metadata)
{
	struct stat st;
	bool has_dev = !stat("/sys/class/infiniband/rxe0", &st);

	ASSERT_TRUE(rs.host == 1 || rs.host == 2)
		TH_LOG("RS_HOST must be 1 or 2");
	ASSERT_FALSE(rs.tcp) TH_LOG("nordma tests rdmastream sockets");
	/* the setting under test: RDMA on host 1 only (vm-run --no-rdma 2) */
	ASSERT_EQ(rs.host == 1, has_dev)
		TH_LOG("host %d %s rxe0", rs.host, has_dev ? "has" : "lacks");
	rs_watchdog(_metadata->timeout + 30);
}

FIXTURE(nd) {
};

FIXTURE_SETUP(nd)
{
	nd_check_hosts(_metadata);
}

FIXTURE_TEARDOWN(nd)
{
}

TEST_F_TIMEOUT(nd, tcp_client, 300)
{
	struct sockaddr_in sin;
	int lfd, ctl, fd;

	if (rs.host == 1) {
		lfd = nd_rs_listener(_metadata, ND_TCP_CLIENT);
		ctl = nd_meet(_metadata, ND_TCP_CLIENT);
		nd_serve(_metadata, lfd, ND_TCP_CLIENT);
		close(lfd);
	} else {
		ctl = nd_meet(_metadata, ND_TCP_CLIENT);
		fd = nd_tcp_socket();
		ASSERT_GE(fd, 0);
		rs_sin(&sin, rs.peer, nd_port(ND_TCP_CLIENT, false));
		ASSERT_EQ(0, connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
			TH_LOG("connect: %s", strerror(errno));
		nd_talk(_metadata, fd, ND_TCP_CLIENT, 2);
		close(fd);
	}
	nd_verdicts(_metadata, ctl);
}

TEST_F_TIMEOUT(nd, no_device, 300)
{
	struct sockaddr_in sin;
	int lfd, ctl, fd;
	double t;

	if (rs.host == 1) {
		lfd = nd_rs_listener(_metadata, ND_NO_DEVICE);
		ctl = nd_meet(_metadata, ND_NO_DEVICE);
		nd_serve(_metadata, lfd, ND_NO_DEVICE);
		close(lfd);
	} else {
		ctl = nd_meet(_metadata, ND_NO_DEVICE);
		fd = rs_socket(0);
		ASSERT_GE(fd, 0);
		rs_sin(&sin, rs.peer, nd_port(ND_NO_DEVICE, false));
		t = rs_now();
		ASSERT_EQ(0, connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
			TH_LOG("connect: %s", strerror(errno));
		t = rs_now() - t;
		rs_info("no_device: connected over TCP in %.3f s", t);
		/* no device: nothing to wait for, no fallback_ms */
		EXPECT_LT(t, 5.0);
		EXPECT_EQ(RDMASTREAM_FB_NO_DEVICE, nd_fallback(fd));
		nd_talk(_metadata, fd, ND_NO_DEVICE, 2);
		close(fd);
	}
	nd_verdicts(_metadata, ctl);
}

/* Host 2's plain TCP server for host 1's rdmastream client. */
static void nd_tcp_server(struct __test_metadata *_metadata, enum nd_case c)
{
	struct sockaddr_in sin;
	int lfd, ctl, fd;

	lfd = nd_tcp_socket();
	ASSERT_GE(lfd, 0);
	ASSERT_EQ(0, rs_setint(lfd, SOL_SOCKET, SO_REUSEADDR, 1));
	rs_sin(&sin, rs.addr, nd_port(c, false));
	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&sin, sizeof(sin)));
	ASSERT_EQ(0, listen(lfd, 4));
	ctl = nd_meet(_metadata, c);
	ASSERT_EQ(POLLIN, rs_poll(lfd, POLLIN, nd_wait() * 1000))
		TH_LOG("no client from host 1");
	fd = accept(lfd, NULL, NULL);
	ASSERT_GE(fd, 0);
	close(lfd);
	nd_recv(_metadata, fd, rs_key(c, 1, 71), nd_bytes());
	nd_send(_metadata, fd, rs_key(c, 2, 71), nd_bytes());
	close(fd);
	nd_verdicts(_metadata, ctl);
}

/*
 * Host 1's rdmastream client to host 2, which never answers the CM:
 * connected over TCP no sooner than fallback_ms and not much later.
 */
static void nd_silent_client(struct __test_metadata *_metadata,
			     enum nd_case c, bool nonblock)
{
	long long ms = rs_param_get("fallback_ms");
	struct sockaddr_in sin;
	int ctl, fd, ret;
	double t;

	ASSERT_GT(ms, 0) TH_LOG("module parameter fallback_ms: %lld", ms);
	ctl = nd_meet(_metadata, c);
	fd = rs_socket(nonblock ? SOCK_NONBLOCK : 0);
	ASSERT_GE(fd, 0);
	rs_sin(&sin, rs.peer, nd_port(c, false));
	t = rs_now();
	ret = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	if (nonblock) {
		ASSERT_EQ(-1, ret);
		ASSERT_EQ(EINPROGRESS, errno);
		/* not connected before the CM has had its fallback_ms */
		EXPECT_EQ(0, rs_poll(fd, POLLOUT, ms / 2));
		ASSERT_EQ(POLLOUT, rs_poll(fd, POLLOUT, ms + 30000) & ~POLLIN)
			TH_LOG("no POLLOUT within %lld ms", ms + 30000);
		ASSERT_EQ(0, rs_sock_error(fd));
		ASSERT_EQ(0, rs_set_nonblock(fd, false));
	} else {
		ASSERT_EQ(0, ret) TH_LOG("connect: %s", strerror(errno));
	}
	t = rs_now() - t;
	rs_info("%s: connected over TCP in %.3f s (fallback_ms %lld)",
		nonblock ? "silent_nonblock" : "silent_peer", t, ms);
	EXPECT_GE(t, ms / 1000.0 * 0.9);
	/* the CM wait, then a TCP handshake on an idle emulated link */
	EXPECT_LT(t, ms / 1000.0 + 20);
	EXPECT_EQ(RDMASTREAM_FB_TIMEOUT, nd_fallback(fd));
	nd_talk(_metadata, fd, c, 1);
	close(fd);
	nd_verdicts(_metadata, ctl);
}

TEST_F_TIMEOUT(nd, silent_peer, 300)
{
	if (rs.host == 1)
		nd_silent_client(_metadata, ND_SILENT, false);
	else
		nd_tcp_server(_metadata, ND_SILENT);
}

TEST_F_TIMEOUT(nd, silent_nonblock, 300)
{
	if (rs.host == 1)
		nd_silent_client(_metadata, ND_SILENT_NB, true);
	else
		nd_tcp_server(_metadata, ND_SILENT_NB);
}

/* Write len bytes of stream key to path. */
static void nd_write_file(struct __test_metadata *_metadata, const char *path,
			  uint64_t key, size_t len)
{
	static char buf[256 * 1024];
	size_t off, n;
	FILE *f = fopen(path, "w");

	ASSERT_NE(NULL, f) TH_LOG("%s: %s", path, strerror(errno));
	for (off = 0; off < len; off += n) {
		n = len - off < sizeof(buf) ? len - off : sizeof(buf);
		rs_pat_fill(buf, n, key, off);
		ASSERT_EQ(n, fwrite(buf, 1, n, f));
	}
	ASSERT_EQ(0, fclose(f));
}

/* The file at path is exactly len bytes of stream key. */
static void nd_check_file(struct __test_metadata *_metadata,
			  const char *path, uint64_t key, size_t len)
{
	static char buf[256 * 1024];
	size_t off = 0, n;
	FILE *f = fopen(path, "r");

	ASSERT_NE(NULL, f) TH_LOG("%s: %s", path, strerror(errno));
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		EXPECT_LE(off + n, len);
		EXPECT_EQ(n, rs_pat_check(buf, n, key, off))
			TH_LOG("%s: bad data near offset %zu", path, off);
		off += n;
	}
	fclose(f);
	EXPECT_EQ(len, off) TH_LOG("%s: %zu of %zu bytes", path, off, len);
}

TEST_F_TIMEOUT(nd, nc, 300)
{
	char cmd[512], line[64] = "", want[64];
	int lfd, ctl, fd;
	size_t len = nd_bytes();
	FILE *f;

	snprintf(want, sizeof(want), "OK %zu\n", len);
	if (rs.host == 1) {
		lfd = nd_rs_listener(_metadata, ND_NC);
		ctl = nd_meet(_metadata, ND_NC);
		ASSERT_EQ(POLLIN, rs_poll(lfd, POLLIN, nd_wait() * 1000));
		fd = accept(lfd, NULL, NULL);
		ASSERT_GE(fd, 0);
		close(lfd);
		EXPECT_EQ(RDMASTREAM_FB_ACCEPTED, nd_fallback(fd));
		nd_recv(_metadata, fd, rs_key(ND_NC, 2, 71), len);
		ASSERT_EQ((ssize_t)strlen(want),
			  rs_send_all(fd, want, strlen(want), 0));
		close(fd);
	} else {
		ASSERT_TRUE(rs_have_cmd("nc.openbsd"))
			TH_LOG("nc.openbsd missing (netcat-openbsd)");
		nd_write_file(_metadata, "/tmp/nordma-nc", rs_key(ND_NC, 2, 71),
			      len);
		ctl = nd_meet(_metadata, ND_NC);
		/* -N: shut the socket down after EOF on stdin */
		snprintf(cmd, sizeof(cmd),
			 "nc.openbsd -N -w 60 %s %u < /tmp/nordma-nc",
			 inet_ntoa(rs.peer), nd_port(ND_NC, false));
		fprintf(stderr, "# $ %s\n", cmd);
		f = popen(cmd, "r");
		ASSERT_NE(NULL, f);
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		EXPECT_EQ(0, pclose(f));
		EXPECT_STREQ(want, line);
	}
	nd_verdicts(_metadata, ctl);
}

/* The wrapper: RS_PRELOAD_RUN, else build/preload/ next to this binary. */
static void nd_run_path(struct __test_metadata *_metadata, char *run,
			size_t size)
{
	ssize_t n;

	if (getenv("RS_PRELOAD_RUN")) {
		snprintf(run, size, "%s", getenv("RS_PRELOAD_RUN"));
	} else {
		n = readlink("/proc/self/exe", run, size - 32);
		ASSERT_GT(n, 0);
		run[n] = '\0';
		strcpy(strrchr(run, '/'), "/../preload/rdmastream-run");
	}
	ASSERT_EQ(0, access(run, X_OK)) TH_LOG("%s: %s (make preload)", run,
						 strerror(errno));
}

/* Host 1: python3 -m http.server under rdmastream-run, in the background. */
static pid_t nd_http_server(struct __test_metadata *_metadata, const char *dir)
{
	char run[PATH_MAX], port[16];
	struct sockaddr_in sin;
	double end = rs_now() + 60;
	pid_t pid;
	int fd;

	nd_run_path(_metadata, run, sizeof(run));
	snprintf(port, sizeof(port), "%u", nd_port(ND_CURL, false));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		execlp(run, run, "python3", "-m", "http.server", port,
		       "--bind", inet_ntoa(rs.addr), "--directory", dir, NULL);
		_exit(127);
	}
	/* up when it accepts (a TCP client of its own: fallback here too) */
	rs_sin(&sin, rs.addr, nd_port(ND_CURL, false));
	for (;;) {
		fd = nd_tcp_socket();
		ASSERT_GE(fd, 0);
		if (!connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
			break;
		close(fd);
		if (rs_now() > end || waitpid(pid, NULL, WNOHANG) == pid) {
			kill(pid, SIGKILL);
			ASSERT_TRUE(0) TH_LOG("http.server did not start");
		}
		rs_msleep(200);
	}
	close(fd);
	return pid;
}

/*
 * The module's counter of TCP connections its listeners accepted, from
 * /proc/net/rdmastream_stat (a "RdmaStream: names" line, then a
 * "RdmaStream: values" line, as /proc/net/snmp); -1 if absent.
 */
static long long nd_accepted_count(void)
{
	char names[2048], values[2048], *n, *v, *sn, *sv;
	long long ret = -1;
	FILE *f = fopen("/proc/net/rdmastream_stat", "r");

	if (!f)
		return -1;
	if (!fgets(names, sizeof(names), f) || !fgets(values, sizeof(values), f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	n = strtok_r(names, " \n", &sn);
	v = strtok_r(values, " \n", &sv);
	while (n && v) {
		if (!strcmp(n, "FallbackAccepted"))
			ret = strtoll(v, NULL, 10);
		n = strtok_r(NULL, " \n", &sn);
		v = strtok_r(NULL, " \n", &sv);
	}
	return ret;
}

TEST_F_TIMEOUT(nd, curl, 300)
{
	const char *dir = "/tmp/nordma-www";
	char path[128], cmd[512];
	long long before, after;
	int ctl, status;
	pid_t pid = 0;

	if (rs.host == 1) {
		mkdir(dir, 0755);
		snprintf(path, sizeof(path), "%s/blob", dir);
		nd_write_file(_metadata, path, rs_key(ND_CURL, 1, 71),
			      nd_bytes());
		pid = nd_http_server(_metadata, dir);
		before = nd_accepted_count();
		ctl = nd_meet(_metadata, ND_CURL);
		nd_verdicts(_metadata, ctl);
		after = nd_accepted_count();
		kill(pid, SIGTERM);
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		/* the server's sockets were rdmastream ones, over TCP */
		EXPECT_LE(0, before);
		EXPECT_LT(before, after)
			TH_LOG("FallbackAccepted %lld -> %lld", before, after);
		return;
	}
	ASSERT_TRUE(rs_have_cmd("curl"));
	ctl = nd_meet(_metadata, ND_CURL);
	snprintf(cmd, sizeof(cmd),
		 "curl -sS --fail --max-time 120 -o /tmp/nordma-blob http://%s:%u/blob",
		 inet_ntoa(rs.peer), nd_port(ND_CURL, false));
	EXPECT_EQ(0, rs_system("%s", cmd));
	nd_check_file(_metadata, "/tmp/nordma-blob", rs_key(ND_CURL, 1, 71),
		      nd_bytes());
	nd_verdicts(_metadata, ctl);
}

TEST_HARNESS_MAIN
