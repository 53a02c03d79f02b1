// SPDX-License-Identifier: GPL-2.0
/*
 * Data path of AF_RDMASTREAM: the send/recv family of calls, their flags,
 * timeouts, buffer sizes, socket options, ioctls, RDMASTREAM_INFO,
 * shutdown() and a close() that still delivers what was sent.
 *
 * Knobs: RS_LARGE_MB (64) for large_bidir, RS_WAITALL_MB (8),
 * RS_SMALLBUF_MB (8), RS_SMALLBUF_SEED (unset: the fixed sequence of I/O
 * sizes and calls; N: another one, for soak runs), RS_CLOSE_MB (8).
 */
#include "rs_common.h"

#include <sys/syscall.h>

/*
 * The most a test sends before the peer reads: it must fit in the socket
 * buffers of any sane configuration. More than that goes through threads.
 */
#define SYNC_MAX	16384

FIXTURE(data)
{
	int c;		/* client end */
	int s;		/* accepted end */
};

FIXTURE_SETUP(data)
{
	rs_watchdog(_metadata->timeout + 30);
	rs_pair(_metadata, &self->c, &self->s);
}

static long long spin_saved = -1;	/* spin_max_us to restore */

FIXTURE_TEARDOWN(data)
{
	close(self->c);
	close(self->s);
	if (spin_saved >= 0)
		rs_param_set("spin_max_us", spin_saved);
}

static size_t env_mib(const char *name, unsigned long def)
{
	return rs_env_ulong(name, def) * RS_MIB;
}

/* Nothing (more) is readable right now. */
static void assert_empty(struct __test_metadata *_metadata, int fd)
{
	char b;

	ASSERT_EQ(-1, recv(fd, &b, 1, MSG_DONTWAIT));
	ASSERT_EQ(EAGAIN, errno);
}

/* Stream n bytes from one end to the other with threads. */
static void stream(struct __test_metadata *_metadata, int from, int to,
		   size_t n, uint64_t key, bool shut_wr)
{
	struct rs_xfer tx = {
		.fd = from, .total = n, .key = key, .chunk = 64 * RS_KIB,
		.shut_wr = shut_wr,
	};
	struct rs_xfer rx = tx;

	rx.fd = to;
	rx.shut_wr = false;
	rx.expect_eof = shut_wr;
	ASSERT_EQ(0, rs_xfer_start(&tx, rs_sender));
	ASSERT_EQ(0, rs_xfer_start(&rx, rs_receiver));
	rs_xfer_join(&tx);
	rs_xfer_join(&rx);
	ASSERT_EQ(0, tx.err) TH_LOG("send: %s", strerror(tx.err));
	RS_XFER_OK(&rx, "receiver");
}

/* ---- basic calls ---- */

TEST_F(data, send_recv)
{
	uint64_t k1 = rs_key(0, 0, 1), k2 = rs_key(0, 1, 1);
	char buf[1000];

	rs_pat_fill(buf, sizeof(buf), k1, 0);
	ASSERT_EQ(sizeof(buf), send(self->c, buf, sizeof(buf), 0));
	rs_recv_pat(_metadata, self->s, sizeof(buf), k1, 0);
	rs_pat_fill(buf, sizeof(buf), k2, 0);
	ASSERT_EQ(sizeof(buf), send(self->s, buf, sizeof(buf), 0));
	rs_recv_pat(_metadata, self->c, sizeof(buf), k2, 0);
	assert_empty(_metadata, self->c);
	assert_empty(_metadata, self->s);
}

TEST_F(data, write_read)
{
	uint64_t k = rs_key(0, 0, 2);
	char buf[3000], in[3000];
	size_t got = 0;
	ssize_t n;

	rs_pat_fill(buf, sizeof(buf), k, 0);
	ASSERT_EQ(sizeof(buf), write(self->c, buf, sizeof(buf)));
	while (got < sizeof(in)) {
		n = read(self->s, in + got, sizeof(in) - got);
		ASSERT_GT(n, 0) TH_LOG("read: %s", strerror(errno));
		got += n;
	}
	ASSERT_EQ(sizeof(in), rs_pat_check(in, sizeof(in), k, 0));
	ASSERT_EQ(5, write(self->s, "howdy", 5));
	ASSERT_EQ(5, read(self->c, in, sizeof(in)));
	ASSERT_EQ(0, memcmp(in, "howdy", 5));
}

TEST_F_TIMEOUT(data, writev_readv, 60)
{
	uint64_t k = rs_key(0, 0, 3);
	struct iovec *iov, riov[37];
	size_t total = 0, got = 0, off, i, n;
	char *buf, *in;
	int cnt = IOV_MAX;
	ssize_t ret;

	iov = calloc(cnt + 1, sizeof(*iov));
	ASSERT_NE(NULL, iov);
	/* IOV_MAX pieces of 0..30 bytes (some empty) from one buffer. */
	for (i = 0; i < (size_t)cnt; i++)
		total += i % 31;
	buf = malloc(total);
	in = malloc(total);
	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, in);
	rs_pat_fill(buf, total, k, 0);
	for (i = 0, off = 0; i < (size_t)cnt; i++) {
		iov[i].iov_base = buf + off;
		iov[i].iov_len = i % 31;
		off += i % 31;
	}
	ASSERT_EQ((ssize_t)total, writev(self->c, iov, cnt))
		TH_LOG("writev: %s", strerror(errno));

	/* More than IOV_MAX is refused before the socket is involved. */
	EXPECT_EQ(-1, writev(self->c, iov, cnt + 1));
	EXPECT_EQ(EINVAL, errno);

	/* Read back with a different scatter list. */
	while (got < total) {
		for (i = 0, off = got; i < ARRAY_SIZE(riov); i++) {
			n = 1 + (i * 7) % 113;
			if (n > total - off)
				n = total - off;
			riov[i].iov_base = in + off;
			riov[i].iov_len = n;
			off += n;
		}
		ret = readv(self->s, riov, ARRAY_SIZE(riov));
		ASSERT_GT(ret, 0) TH_LOG("readv: %s", strerror(errno));
		got += ret;
	}
	ASSERT_EQ(total, got);
	ASSERT_EQ(total, rs_pat_check(in, total, k, 0));
	assert_empty(_metadata, self->s);
	free(buf);
	free(in);
	free(iov);
}

TEST_F(data, sendmsg_recvmsg)
{
	char a[10] = "0123456789", b[5] = "abcde", c[20] = "ABCDEFGHIJKLMNOPQRST";
	struct iovec iov[3] = {
		{ a, sizeof(a) }, { b, sizeof(b) }, { c, sizeof(c) },
	};
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 3 };
	char x[16], y[64], name[64], ctl[64];
	struct iovec riov[2] = { { x, sizeof(x) }, { y, sizeof(y) } };
	struct msghdr rmsg = {
		.msg_name = name, .msg_namelen = sizeof(name),
		.msg_iov = riov, .msg_iovlen = 2,
		.msg_control = ctl, .msg_controllen = sizeof(ctl),
		.msg_flags = -1,
	};
	ssize_t n, got;

	ASSERT_EQ(35, sendmsg(self->c, &msg, 0));
	ASSERT_EQ(35, rs_wait_inq(self->s, 35, 5000));
	n = recvmsg(self->s, &rmsg, 0);
	ASSERT_EQ(35, n);
	ASSERT_EQ(0, memcmp(x, "0123456789abcdeA", 16));
	ASSERT_EQ(0, memcmp(y, "BCDEFGHIJKLMNOPQRST", 19));
	/* A stream socket reports no address, no control data, no flags. */
	EXPECT_EQ(0, rmsg.msg_namelen);
	EXPECT_EQ(0, rmsg.msg_controllen);
	EXPECT_EQ(0, rmsg.msg_flags);

	/* Empty iovecs in the middle are skipped. */
	iov[1].iov_len = 0;
	ASSERT_EQ(30, sendmsg(self->c, &msg, MSG_NOSIGNAL));
	got = rs_recv_all(self->s, y, 30, 0);
	ASSERT_EQ(30, got);
	ASSERT_EQ(0, memcmp(y, "0123456789ABCDEFGHIJKLMNOPQRST", 30));
}

TEST_F_TIMEOUT(data, small_writes, 120)
{
	struct rs_xfer rx = {
		.fd = self->s, .total = 0, .key = rs_key(0, 0, 4),
		.chunk = 65536,
	};
	uint64_t st = 42, off = 0;
	unsigned int i, n;
	char buf[64];

	/* 20000 writes of 1..64 bytes; reader runs concurrently. */
	for (i = 0; i < 20000; i++)
		rx.total += 1 + (rs_rand(&st) & 63);
	ASSERT_EQ(0, rs_xfer_start(&rx, rs_receiver));
	st = 42;
	for (i = 0; i < 20000; i++) {
		n = 1 + (rs_rand(&st) & 63);
		rs_pat_fill(buf, n, rx.key, off);
		ASSERT_EQ(n, send(self->c, buf, n, 0));
		off += n;
	}
	rs_xfer_join(&rx);
	RS_XFER_OK(&rx, "receiver");
}

TEST_F(data, partial_read)
{
	uint64_t k = rs_key(0, 0, 5);
	char buf[4096];

	rs_send_pat(_metadata, self->c, 1000, k, 0);
	ASSERT_EQ(1000, rs_wait_inq(self->s, 1000, 5000));
	/* A short buffer takes what fits... */
	ASSERT_EQ(100, recv(self->s, buf, 100, 0));
	ASSERT_EQ(100, rs_pat_check(buf, 100, k, 0));
	/* ...a big one returns what is there without waiting for more. */
	ASSERT_EQ(900, recv(self->s, buf, sizeof(buf), 0));
	ASSERT_EQ(900, rs_pat_check(buf, 900, k, 100));
	assert_empty(_metadata, self->s);
}

/* ---- MSG_WAITALL ---- */

struct slow_sender {
	int fd;
	size_t total;
	size_t chunk;
	unsigned int pause_us;
	uint64_t key;
	bool shut_wr;
	int err;
	pthread_t thr;
};

static void *slow_sender_fn(void *arg)
{
	struct slow_sender *s = arg;
	char *buf = malloc(s->chunk);
	size_t off = 0, n;

	if (!buf) {
		s->err = ENOMEM;
		return NULL;
	}
	while (off < s->total) {
		n = s->total - off < s->chunk ? s->total - off : s->chunk;
		rs_pat_fill(buf, n, s->key, off);
		if (rs_send_all(s->fd, buf, n, 0) < 0) {
			s->err = errno;
			break;
		}
		off += n;
		usleep(s->pause_us);
	}
	if (s->shut_wr && shutdown(s->fd, SHUT_WR) && !s->err)
		s->err = errno;
	free(buf);
	return NULL;
}

TEST_F_TIMEOUT(data, waitall, 120)
{
	struct slow_sender ss = {
		.fd = self->c, .total = env_mib("RS_WAITALL_MB", 8),
		.chunk = 64 * RS_KIB, .pause_us = 200, .key = rs_key(0, 0, 6),
	};
	char *buf = malloc(ss.total);
	ssize_t n;

	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, pthread_create(&ss.thr, NULL, slow_sender_fn, &ss));
	n = recv(self->s, buf, ss.total, MSG_WAITALL);
	pthread_join(ss.thr, NULL);
	ASSERT_EQ(0, ss.err) TH_LOG("send: %s", strerror(ss.err));
	ASSERT_EQ((ssize_t)ss.total, n) TH_LOG("recv: %s", strerror(errno));
	ASSERT_EQ(ss.total, rs_pat_check(buf, ss.total, ss.key, 0));
	free(buf);
}

TEST_F(data, waitall_eof)
{
	struct slow_sender ss = {
		.fd = self->c, .total = 1000, .chunk = 100,
		.pause_us = 10000, .key = rs_key(0, 0, 7), .shut_wr = true,
	};
	char buf[4096];

	/* EOF ends MSG_WAITALL with what arrived. */
	ASSERT_EQ(0, pthread_create(&ss.thr, NULL, slow_sender_fn, &ss));
	ASSERT_EQ(1000, recv(self->s, buf, sizeof(buf), MSG_WAITALL));
	pthread_join(ss.thr, NULL);
	ASSERT_EQ(0, ss.err);
	ASSERT_EQ(1000, rs_pat_check(buf, 1000, ss.key, 0));
	ASSERT_EQ(0, recv(self->s, buf, sizeof(buf), MSG_WAITALL));
}

TEST_F(data, waitall_rcvtimeo)
{
	char buf[4096];
	double t0;

	/* The receive timeout ends MSG_WAITALL with what arrived. */
	ASSERT_EQ(0, rs_set_timeo(self->s, SO_RCVTIMEO, 300));
	ASSERT_EQ(100, send(self->c, buf, 100, 0));
	t0 = rs_now();
	rs_interrupt_after(10);
	ASSERT_EQ(100, recv(self->s, buf, sizeof(buf), MSG_WAITALL))
		TH_LOG("recv: %s", strerror(errno));
	EXPECT_GE(rs_now() - t0, 0.25);
	/* Nothing left: the timeout now gives EAGAIN. */
	ASSERT_EQ(-1, recv(self->s, buf, sizeof(buf), MSG_WAITALL));
	ASSERT_EQ(EAGAIN, errno) TH_LOG("recv: %s", strerror(errno));
	rs_interrupt_cancel();
}

/* ---- non-blocking reads ---- */

TEST_F(data, dontwait_empty)
{
	struct iovec iov;
	char buf[64];
	double t0 = rs_now();

	iov.iov_base = buf;
	iov.iov_len = sizeof(buf);
	EXPECT_EQ(-1, recv(self->s, buf, sizeof(buf), MSG_DONTWAIT));
	EXPECT_EQ(EAGAIN, errno);
	ASSERT_EQ(0, rs_set_nonblock(self->s, true));
	EXPECT_EQ(-1, recv(self->s, buf, sizeof(buf), 0));
	EXPECT_EQ(EAGAIN, errno);
	EXPECT_EQ(-1, read(self->s, buf, sizeof(buf)));
	EXPECT_EQ(EAGAIN, errno);
	EXPECT_EQ(-1, readv(self->s, &iov, 1));
	EXPECT_EQ(EAGAIN, errno);
	EXPECT_LT(rs_now() - t0, 1.0);

	/* Data makes it readable; then it is empty again. */
	ASSERT_EQ(3, send(self->c, "abc", 3, 0));
	ASSERT_EQ(POLLIN, rs_poll(self->s, POLLIN, 5000));
	ASSERT_EQ(3, recv(self->s, buf, sizeof(buf), 0));
	EXPECT_EQ(-1, recv(self->s, buf, sizeof(buf), 0));
	EXPECT_EQ(EAGAIN, errno);
	ASSERT_EQ(0, rs_set_nonblock(self->s, false));
	EXPECT_EQ(-1, recv(self->s, buf, sizeof(buf), MSG_DONTWAIT));
	EXPECT_EQ(EAGAIN, errno);
}

TEST_F(data, peek)
{
	char buf[64], buf2[64];

	EXPECT_EQ(-1, recv(self->s, buf, sizeof(buf),
			   MSG_PEEK | MSG_DONTWAIT));
	EXPECT_EQ(EAGAIN, errno);

	ASSERT_EQ(11, send(self->c, "hello world", 11, 0));
	ASSERT_EQ(11, rs_wait_inq(self->s, 11, 5000));
	ASSERT_EQ(11, recv(self->s, buf, sizeof(buf), MSG_PEEK));
	ASSERT_EQ(0, memcmp(buf, "hello world", 11));
	/* Peeking again sees the same bytes; a short peek a prefix. */
	ASSERT_EQ(5, recv(self->s, buf2, 5, MSG_PEEK));
	ASSERT_EQ(0, memcmp(buf2, "hello", 5));
	ASSERT_EQ(11, recv(self->s, buf2, sizeof(buf2),
			   MSG_PEEK | MSG_DONTWAIT));
	/* Reading consumes them. */
	ASSERT_EQ(6, recv(self->s, buf2, 6, 0));
	ASSERT_EQ(0, memcmp(buf2, "hello ", 6));
	ASSERT_EQ(5, recv(self->s, buf2, sizeof(buf2), MSG_PEEK));
	ASSERT_EQ(0, memcmp(buf2, "world", 5));
	ASSERT_EQ(5, recv(self->s, buf2, sizeof(buf2), 0));
	ASSERT_EQ(0, memcmp(buf2, "world", 5));
	assert_empty(_metadata, self->s);
}

TEST_F(data, zero_length)
{
	struct iovec iov[2] = { { NULL, 0 }, { NULL, 0 } };
	char buf[16];

	ASSERT_EQ(0, send(self->c, buf, 0, 0));
	ASSERT_EQ(0, send(self->c, NULL, 0, 0));
	ASSERT_EQ(0, writev(self->c, iov, 2));
	ASSERT_EQ(0, write(self->c, buf, 0));
	/* Nothing was sent. */
	rs_msleep(200);
	assert_empty(_metadata, self->s);

	/* A zero-length read with data queued returns 0, keeps the data. */
	ASSERT_EQ(4, send(self->c, "data", 4, 0));
	ASSERT_EQ(4, rs_wait_inq(self->s, 4, 5000));
	ASSERT_EQ(0, recv(self->s, buf, 0, 0));
	ASSERT_EQ(0, read(self->s, buf, 0));
	ASSERT_EQ(4, recv(self->s, buf, sizeof(buf), 0));
	ASSERT_EQ(0, memcmp(buf, "data", 4));
}

TEST_F_TIMEOUT(data, large_bidir, 300)
{
	size_t total = env_mib("RS_LARGE_MB", 64);
	struct rs_xfer x[4] = {
		{ .fd = self->c, .key = rs_key(0, 0, 8) },
		{ .fd = self->s, .key = rs_key(0, 0, 8) },
		{ .fd = self->s, .key = rs_key(0, 1, 8) },
		{ .fd = self->c, .key = rs_key(0, 1, 8) },
	};
	double secs;
	int i;

	for (i = 0; i < 4; i++) {
		x[i].total = total;
		x[i].chunk = 256 * RS_KIB;
		ASSERT_EQ(0, rs_xfer_start(&x[i], i & 1 ? rs_receiver :
					   rs_sender));
	}
	rs_xfer_join_watch(x, 4, 30);
	RS_XFER_OK(&x[1], "c->s");
	RS_XFER_OK(&x[3], "s->c");
	secs = x[1].secs > x[3].secs ? x[1].secs : x[3].secs;
	rs_info("large_bidir: 2 x %zu MiB in %.2f s, %.1f MiB/s",
		total / RS_MIB, secs, 2 * total / RS_MIB / secs);
}

/* ---- timeouts ---- */

TEST_F(data, rcvtimeo)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);
	char buf[16];
	double t0, dt;

	ASSERT_EQ(0, rs_set_timeo(self->s, SO_RCVTIMEO, 300));
	ASSERT_EQ(0, getsockopt(self->s, SOL_SOCKET, SO_RCVTIMEO, &tv, &len));
	EXPECT_EQ(0, tv.tv_sec);
	EXPECT_GE(tv.tv_usec, 290000);
	EXPECT_LE(tv.tv_usec, 310000);

	t0 = rs_now();
	rs_interrupt_after(10);
	EXPECT_EQ(-1, recv(self->s, buf, sizeof(buf), 0));
	EXPECT_EQ(EAGAIN, errno) TH_LOG("recv: %s", strerror(errno));
	rs_interrupt_cancel();
	dt = rs_now() - t0;
	EXPECT_GE(dt, 0.25);
	EXPECT_LT(dt, 3.0);

	/* The connection is fine afterwards. */
	ASSERT_EQ(2, send(self->c, "ok", 2, 0));
	ASSERT_EQ(2, recv(self->s, buf, sizeof(buf), 0));
}

TEST_F_TIMEOUT(data, sndtimeo, 120)
{
	const size_t chunk = RS_MIB, limit = 512 * RS_MIB;
	struct rs_xfer rx = { .fd = self->s, .key = rs_key(0, 0, 9),
			      .chunk = RS_MIB };
	char *buf = malloc(chunk);
	size_t total = 0;
	double t0, dt = 0;
	ssize_t n = 0;

	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, rs_set_timeo(self->c, SO_SNDTIMEO, 300));
	rs_interrupt_after(60);

	/*
	 * The peer does not read: sends must stop being accepted after a
	 * bounded amount and then time out, partially or with EAGAIN.
	 */
	while (total < limit) {
		rs_pat_fill(buf, chunk, rx.key, total);
		t0 = rs_now();
		n = send(self->c, buf, chunk, 0);
		dt = rs_now() - t0;
		if (n < 0)
			break;
		total += n;
		if ((size_t)n < chunk)
			break;
	}
	ASSERT_LT(total, limit) TH_LOG("no flow control: %zu bytes queued",
				       total);
	if (n < 0) {
		ASSERT_EQ(EAGAIN, errno) TH_LOG("send: %s", strerror(errno));
	}
	EXPECT_GE(dt, 0.25);
	EXPECT_LT(dt, 5.0);

	/* Still full: the next send times out with EAGAIN. */
	rs_pat_fill(buf, chunk, rx.key, total);
	t0 = rs_now();
	n = send(self->c, buf, chunk, 0);
	dt = rs_now() - t0;
	if (n > 0) {
		/* Some space opened up meanwhile (TCP may do that). */
		total += n;
	} else {
		EXPECT_EQ(-1, n);
		EXPECT_EQ(EAGAIN, errno) TH_LOG("send: %s", strerror(errno));
		EXPECT_GE(dt, 0.25);
	}
	rs_interrupt_cancel();
	TH_LOG("%zu bytes queued before the send timed out", total);

	/* Everything that was accepted arrives intact. */
	rx.total = total;
	ASSERT_EQ(0, rs_xfer_start(&rx, rs_receiver));
	rs_xfer_join(&rx);
	RS_XFER_OK(&rx, "drain");
	assert_empty(_metadata, self->s);
	free(buf);
}

/* ---- buffer sizes and socket options ---- */

TEST_F(data, bufsizes)
{
	int v;

	ASSERT_EQ(0, rs_setint(self->c, SOL_SOCKET, SO_SNDBUF, 65536));
	v = rs_getint(self->c, SOL_SOCKET, SO_SNDBUF);
	EXPECT_GE(v, 65536);
	ASSERT_EQ(0, rs_setint(self->c, SOL_SOCKET, SO_RCVBUF, 65536));
	v = rs_getint(self->c, SOL_SOCKET, SO_RCVBUF);
	EXPECT_GE(v, 65536);
	EXPECT_GT(rs_getint(self->s, SOL_SOCKET, SO_SNDBUF), 0);
	EXPECT_GT(rs_getint(self->s, SOL_SOCKET, SO_RCVBUF), 0);
	/* Data still flows. */
	rs_send_pat(_metadata, self->c, SYNC_MAX, rs_key(0, 0, 10), 0);
	rs_recv_pat(_metadata, self->s, SYNC_MAX, rs_key(0, 0, 10), 0);
}

TEST_F_TIMEOUT(data, small_rcvbuf, 180)
{
	size_t total = env_mib("RS_SMALLBUF_MB", 8);
	const char *seed = getenv("RS_SMALLBUF_SEED");
	struct rs_xfer x[4] = { };
	int c, s, i;

	/* Tiny buffers, set before the connection exists. */
	rs_pair_opts(_metadata, &c, &s, 4096);
	EXPECT_GE(rs_getint(c, SOL_SOCKET, SO_RCVBUF), 4096);
	for (i = 0; i < 4; i++) {
		x[i].fd = i == 0 || i == 3 ? c : s;
		x[i].key = rs_key(1, i / 2, 11);
		x[i].total = total;
		x[i].chunk = 256 * RS_KIB;
		x[i].random = true;
		if (seed)
			x[i].seed = rs_key(strtoul(seed, NULL, 0), i, 12);
		ASSERT_EQ(0, rs_xfer_start(&x[i], i & 1 ? rs_receiver :
					   rs_sender));
	}
	rs_xfer_join_watch(x, 4, 30);
	RS_XFER_OK(&x[1], "c->s");
	RS_XFER_OK(&x[3], "s->c");
	close(c);
	close(s);
}

TEST_F(data, sockopts)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 5 };
	socklen_t len = sizeof(lg);
	int fds[2] = { self->c, self->s }, i;

	for (i = 0; i < 2; i++) {
		EXPECT_EQ(0, rs_sock_error(fds[i]));
		EXPECT_EQ(SOCK_STREAM, rs_getint(fds[i], SOL_SOCKET, SO_TYPE));
		EXPECT_EQ(rs.family, rs_getint(fds[i], SOL_SOCKET, SO_DOMAIN));
		EXPECT_EQ(rs.ip ? rs.protocol : 0,
			  rs_getint(fds[i], SOL_SOCKET, SO_PROTOCOL));
		EXPECT_EQ(0, rs_getint(fds[i], SOL_SOCKET, SO_ACCEPTCONN));
		EXPECT_EQ(0, rs_getint(fds[i], SOL_SOCKET, SO_KEEPALIVE));
		ASSERT_EQ(0, rs_setint(fds[i], SOL_SOCKET, SO_KEEPALIVE, 1));
		EXPECT_EQ(1, rs_getint(fds[i], SOL_SOCKET, SO_KEEPALIVE));
	}
	ASSERT_EQ(0, setsockopt(self->c, SOL_SOCKET, SO_LINGER, &lg,
				sizeof(lg)));
	memset(&lg, 0, sizeof(lg));
	ASSERT_EQ(0, getsockopt(self->c, SOL_SOCKET, SO_LINGER, &lg, &len));
	EXPECT_EQ(1, lg.l_onoff);
	EXPECT_EQ(5, lg.l_linger);
	/* Options did not disturb the connection. */
	rs_send_pat(_metadata, self->c, 5000, rs_key(0, 0, 12), 0);
	rs_recv_pat(_metadata, self->s, 5000, rs_key(0, 0, 12), 0);
}

/* ---- SIGPIPE and EPIPE ---- */

static volatile sig_atomic_t sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static void expect_epipe(struct __test_metadata *_metadata, int fd)
{
	struct sigaction sa = { .sa_handler = on_sigpipe };

	ASSERT_EQ(0, sigaction(SIGPIPE, &sa, NULL));
	sigpipes = 0;
	EXPECT_EQ(-1, send(fd, "x", 1, MSG_NOSIGNAL));
	EXPECT_EQ(EPIPE, errno);
	EXPECT_EQ(0, sigpipes);
	EXPECT_EQ(-1, send(fd, "x", 1, 0));
	EXPECT_EQ(EPIPE, errno);
	EXPECT_EQ(1, sigpipes);
	EXPECT_EQ(-1, write(fd, "x", 1));
	EXPECT_EQ(EPIPE, errno);
	EXPECT_EQ(2, sigpipes);
	signal(SIGPIPE, SIG_IGN);
}

TEST_F(data, epipe_after_shut_wr)
{
	ASSERT_EQ(0, shutdown(self->c, SHUT_WR));
	expect_epipe(_metadata, self->c);
}

TEST_F(data, epipe_after_peer_close)
{
	double end = rs_now() + 10;
	ssize_t n;
	char b;

	close(self->s);
	self->s = -1;
	ASSERT_EQ(0, recv(self->c, &b, 1, 0));
	/*
	 * TCP accepts a first send after the peer's FIN; the peer answers
	 * with a reset, which in CLOSE_WAIT is EPIPE (tcp_reset()), and so
	 * is every send after it.
	 */
	do {
		n = send(self->c, "x", 1, MSG_NOSIGNAL);
		if (n < 0)
			break;
		rs_msleep(10);
	} while (rs_now() < end);
	ASSERT_EQ(-1, n) TH_LOG("sends still accepted after 10 s");
	ASSERT_EQ(EPIPE, errno) TH_LOG("send: %s", strerror(errno));
	expect_epipe(_metadata, self->c);
}

/* ---- bad user memory ---- */

/* A mapped page followed by an unmapped one. */
static char *edge_page(struct __test_metadata *_metadata)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *p;

	p = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, munmap(p + pg, pg));
	return p;
}

/* A bad send either failed with EFAULT or sent a prefix; check the peer. */
static void check_bad_send(struct __test_metadata *_metadata, int c, int s,
			   ssize_t n, size_t good, uint64_t key)
{
	char buf[8192];

	if (n < 0) {
		ASSERT_EQ(EFAULT, errno);
		n = 0;
	} else {
		TH_LOG("send with a bad buffer sent %zd bytes", n);
		ASSERT_LE((size_t)n, good);
	}
	/* The connection still works; exactly the accepted prefix came. */
	ASSERT_EQ(3, send(c, "end", 3, 0));
	ASSERT_EQ(n + 3, rs_recv_all(s, buf, n + 3, 0));
	ASSERT_EQ((size_t)n, rs_pat_check(buf, n, key, 0));
	ASSERT_EQ(0, memcmp(buf + n, "end", 3));
	assert_empty(_metadata, s);
}

TEST_F(data, efault_send)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t k = rs_key(0, 0, 13);
	char *p = edge_page(_metadata);
	ssize_t n;

	/* Entirely unmapped. */
	n = send(self->c, p + pg, 100, 0);
	check_bad_send(_metadata, self->c, self->s, n, 0, k);
	/* Mapped, then unmapped. */
	rs_pat_fill(p, pg, k, 0);
	n = send(self->c, p, 2 * pg, 0);
	check_bad_send(_metadata, self->c, self->s, n, pg, k);
	munmap(p, pg);
}

TEST_F(data, efault_recv)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *p = edge_page(_metadata);
	char buf[64];

	ASSERT_EQ(10, send(self->c, "0123456789", 10, 0));
	ASSERT_EQ(10, rs_wait_inq(self->s, 10, 5000));
	EXPECT_EQ(-1, recv(self->s, p + pg, 10, 0));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(-1, recv(self->s, (void *)16, 10, MSG_PEEK));
	EXPECT_EQ(EFAULT, errno);
	/* Nothing was lost. */
	ASSERT_EQ(10, recv(self->s, buf, sizeof(buf), 0));
	ASSERT_EQ(0, memcmp(buf, "0123456789", 10));
	ASSERT_EQ(2, send(self->s, "ok", 2, 0));
	ASSERT_EQ(2, recv(self->c, buf, sizeof(buf), 0));
	munmap(p, pg);
}

TEST_F(data, absurd_length)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t k = rs_key(0, 0, 14);
	char *p = edge_page(_metadata);
	ssize_t n;

	rs_pat_fill(p, pg, k, 0);
	n = syscall(SYS_sendto, self->c, p, 1ULL << 40, 0, NULL, 0);
	check_bad_send(_metadata, self->c, self->s, n, pg, k);

	/* A huge receive length only touches what is actually read. */
	ASSERT_EQ(100, send(self->c, p, 100, 0));
	ASSERT_EQ(100, rs_wait_inq(self->s, 100, 5000));
	memset(p, 0, pg);
	n = syscall(SYS_recvfrom, self->s, p, 1ULL << 40, 0, NULL, NULL);
	ASSERT_EQ(100, n) TH_LOG("recv: %s", strerror(errno));
	ASSERT_EQ(100, rs_pat_check(p, 100, k, 0));
	munmap(p, pg);
}

/* ---- ioctls ---- */

TEST_F(data, siocinq)
{
	uint64_t k = rs_key(0, 0, 15);
	char buf[4096];
	int v = -1, lfd;
	struct sockaddr_in sin;

	ASSERT_EQ(0, ioctl(self->s, SIOCINQ, &v));
	EXPECT_EQ(0, v);
	rs_send_pat(_metadata, self->c, 12345, k, 0);
	ASSERT_EQ(12345, rs_wait_inq(self->s, 12345, 5000));
	ASSERT_EQ(0, ioctl(self->s, FIONREAD, &v));
	EXPECT_EQ(12345, v);
	ASSERT_EQ(345, recv(self->s, buf, 345, 0));
	ASSERT_EQ(0, ioctl(self->s, SIOCINQ, &v));
	EXPECT_EQ(12000, v);
	ASSERT_EQ(345, rs_pat_check(buf, 345, k, 0));
	rs_recv_pat(_metadata, self->s, 12000, k, 345);
	ASSERT_EQ(0, ioctl(self->s, SIOCINQ, &v));
	EXPECT_EQ(0, v);

	/* Not on a listener. */
	lfd = rs_listener(_metadata, &sin);
	EXPECT_EQ(-1, ioctl(lfd, SIOCINQ, &v));
	EXPECT_EQ(EINVAL, errno);
	close(lfd);
}

static int wait_outq_zero(int fd, int timeout_ms)
{
	double end = rs_now() + timeout_ms / 1000.0;
	int v = -1;

	do {
		if (ioctl(fd, SIOCOUTQ, &v))
			return -1;
		if (!v)
			return 0;
		rs_msleep(10);
	} while (rs_now() < end);
	return v;
}

TEST_F_TIMEOUT(data, siocoutq, 60)
{
	uint64_t k = rs_key(0, 0, 16);
	struct rs_xfer rx = { .fd = self->s, .key = k, .chunk = RS_MIB };
	ssize_t total;
	int v = -1;

	ASSERT_EQ(0, ioctl(self->c, SIOCOUTQ, &v));
	EXPECT_EQ(0, v);
	/* Peer not reading: data waits in our send queue. */
	total = rs_fill_pipe(self->c, k);
	ASSERT_GT(total, 0);
	ASSERT_EQ(0, ioctl(self->c, SIOCOUTQ, &v));
	EXPECT_GT(v, 0);
	EXPECT_LE(v, total);
	TH_LOG("%zd bytes queued, SIOCOUTQ %d", total, v);
	/* Once the peer read everything, the queue drains. */
	rx.total = total;
	ASSERT_EQ(0, rs_xfer_start(&rx, rs_receiver));
	rs_xfer_join(&rx);
	RS_XFER_OK(&rx, "drain");
	EXPECT_EQ(0, wait_outq_zero(self->c, 5000));

	/* Also after an odd amount, not a multiple of any buffer size. */
	stream(_metadata, self->c, self->s, 300001, rs_key(0, 1, 16), false);
	EXPECT_EQ(0, wait_outq_zero(self->c, 5000));
}

/* ---- RDMASTREAM_INFO ---- */

static int get_info(int fd, struct rdmastream_info *info)
{
	socklen_t len = sizeof(*info);

	memset(info, 0, sizeof(*info));
	if (getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, info, &len))
		return -1;
	return len;
}

/*
 * A byte each way: both ends have then seen each other's SETUP, so the
 * peer's buffer is known (connect() returns before that).
 */
static void settle(struct __test_metadata *_metadata, int c, int s)
{
	char b;

	ASSERT_EQ(1, send(c, "x", 1, 0));
	ASSERT_EQ(1, recv(s, &b, 1, 0));
	ASSERT_EQ(1, send(s, "y", 1, 0));
	ASSERT_EQ(1, recv(c, &b, 1, 0));
}

/*
 * SO_BUSY_POLL: the receiver spins a while for data before sleeping.
 * Round trips still carry every byte, a receive with nothing coming still
 * times out, and the option reads back.
 */
TEST_F(data, busy_poll)
{
	int usec = 20000, got = 0, i;
	socklen_t len = sizeof(got);
	char msg[64], buf[64];
	double t0;

	if (setsockopt(self->s, SOL_SOCKET, SO_BUSY_POLL, &usec,
		       sizeof(usec)) && errno == EPERM)
		SKIP(return, "raising SO_BUSY_POLL needs CAP_NET_ADMIN");
	ASSERT_EQ(0, setsockopt(self->c, SOL_SOCKET, SO_BUSY_POLL, &usec,
				sizeof(usec)));
	ASSERT_EQ(0, getsockopt(self->s, SOL_SOCKET, SO_BUSY_POLL, &got,
				&len));
	ASSERT_EQ(usec, got);
	for (i = 0; i < 200; i++) {
		memset(msg, i, sizeof(msg));
		ASSERT_EQ(64, send(self->c, msg, sizeof(msg), 0));
		ASSERT_EQ(64, recv(self->s, buf, sizeof(buf), MSG_WAITALL));
		ASSERT_EQ(0, memcmp(buf, msg, sizeof(msg)));
		ASSERT_EQ(64, send(self->s, buf, sizeof(buf), 0));
		ASSERT_EQ(64, recv(self->c, msg, sizeof(msg), MSG_WAITALL));
		ASSERT_EQ(0, memcmp(buf, msg, sizeof(msg)));
	}
	ASSERT_EQ(0, rs_set_timeo(self->s, SO_RCVTIMEO, 50));
	t0 = rs_now();
	EXPECT_EQ(-1, recv(self->s, buf, sizeof(buf), 0));
	EXPECT_EQ(EAGAIN, errno);
	EXPECT_LT(rs_now() - t0, 2.0);
}

struct echo {
	int fd;
	int rounds;
	int err;
	pthread_t thr;
};

/* Send back every 64 B message, rounds times. */
static void *echo_fn(void *arg)
{
	struct echo *e = arg;
	char buf[64];
	int i;

	for (i = 0; i < e->rounds; i++) {
		if (recv(e->fd, buf, sizeof(buf), MSG_WAITALL) != sizeof(buf) ||
		    send(e->fd, buf, sizeof(buf), 0) != sizeof(buf)) {
			e->err = errno ?: EPROTO;
			break;
		}
	}
	return NULL;
}

/* A two-thread 64 B ping-pong over c and s: every byte comes back. */
static void ping_pong(struct __test_metadata *_metadata, int c, int s,
		      int rounds)
{
	struct echo e = { .fd = s, .rounds = rounds };
	const char *failed = NULL;
	char msg[64], buf[64];
	int i, err = 0;

	ASSERT_EQ(0, pthread_create(&e.thr, NULL, echo_fn, &e));
	for (i = 0; i < rounds && !failed; i++) {
		memset(msg, i, sizeof(msg));
		msg[i % sizeof(msg)] ^= 0x5a;
		if (send(c, msg, sizeof(msg), 0) != sizeof(msg))
			failed = "send";
		else if (recv(c, buf, sizeof(buf), MSG_WAITALL) != sizeof(buf))
			failed = "recv";
		else if (memcmp(buf, msg, sizeof(msg)))
			failed = "the echo differs";
		if (failed)
			err = errno;
	}
	/* the echo thread may wait for a message that will not come */
	if (failed)
		shutdown(c, SHUT_RDWR);
	pthread_join(e.thr, NULL);
	ASSERT_EQ(NULL, failed)
		TH_LOG("round %d: %s: %s", i - 1, failed, strerror(err));
	ASSERT_EQ(0, e.err) TH_LOG("echo: %s", strerror(e.err));
}

/*
 * Adaptive receive polling (module parameter spin_max_us, docs/
 * performance.md): a receive that has to wait spins, rather than sleeps,
 * while its socket's data has lately come soon after it began to wait;
 * an idle socket does not spin at all, and gets back to spinning once
 * its peer answers quickly again. Every round trip carries its bytes, a
 * receive with nothing coming still times out, and 0 turns it off. The
 * counters are RDMA's; over TCP the same calls must simply work.
 */
TEST_F_TIMEOUT(data, adaptive_spin, 120)
{
	bool counted = !rs.tcp && !rs_fb_forced();
	struct rdmastream_info si0, si, ci0, ci;
	char buf[64];
	double t0;
	int i;

	if (counted) {
		spin_saved = rs_param_get("spin_max_us");
		ASSERT_LE(0, spin_saved) TH_LOG("no parameter spin_max_us");
		/* a ceiling that TCG's slowest round trips stay within */
		ASSERT_EQ(0, rs_param_set("spin_max_us", 10000));
	}
	/* idle: the first empty wait may spin, the later ones do not */
	ASSERT_EQ(0, rs_set_timeo(self->s, SO_RCVTIMEO, 50));
	for (i = 0; i < 4; i++) {
		if (i == 1 && counted)
			ASSERT_EQ(sizeof(si0), get_info(self->s, &si0));
		t0 = rs_now();
		EXPECT_EQ(-1, recv(self->s, buf, sizeof(buf), 0));
		EXPECT_EQ(EAGAIN, errno);
		EXPECT_LT(rs_now() - t0, 2.0);
	}
	ASSERT_EQ(0, rs_set_timeo(self->s, SO_RCVTIMEO, 0));
	if (counted) {
		ASSERT_EQ(sizeof(si), get_info(self->s, &si));
		EXPECT_EQ(si0.rsi_spin_misses, si.rsi_spin_misses);
		EXPECT_EQ(si0.rsi_spin_hits, si.rsi_spin_hits);
		EXPECT_LT(10000U, si.rsi_spin_est_us);
		ASSERT_EQ(sizeof(ci0), get_info(self->c, &ci0));
	}
	/* quick answers: the waits end by spinning */
	ping_pong(_metadata, self->c, self->s, 400);
	if (counted) {
		ASSERT_EQ(sizeof(ci), get_info(self->c, &ci));
		ASSERT_EQ(sizeof(si), get_info(self->s, &si));
		EXPECT_LE(100LL, (long long)(ci.rsi_spin_hits -
					      ci0.rsi_spin_hits))
			TH_LOG("client: %llu hits, %llu misses, estimate %u us",
			       (unsigned long long)ci.rsi_spin_hits,
			       (unsigned long long)ci.rsi_spin_misses,
			       ci.rsi_spin_est_us);
		EXPECT_LT(si0.rsi_spin_hits, si.rsi_spin_hits)
			TH_LOG("server: no wait ended by spinning");
		EXPECT_GT(10000U, ci.rsi_spin_est_us);
		/* off: nothing spins */
		ASSERT_EQ(0, rs_param_set("spin_max_us", 0));
		ASSERT_EQ(sizeof(ci0), get_info(self->c, &ci0));
	}
	ping_pong(_metadata, self->c, self->s, 100);
	if (counted) {
		ASSERT_EQ(sizeof(ci), get_info(self->c, &ci));
		EXPECT_EQ(ci0.rsi_spin_hits, ci.rsi_spin_hits);
		EXPECT_EQ(ci0.rsi_spin_misses, ci.rsi_spin_misses);
	}
}

TEST_F(data, info)
{
	struct rdmastream_info ci0, si0, ci, si;
	const size_t n = 300000;
	double end;

	RS_SKIP_TCP("SOL_RDMASTREAM");
	RS_SKIP_FB("RDMA counters and rings");
	settle(_metadata, self->c, self->s);
	ASSERT_EQ(sizeof(ci0), get_info(self->c, &ci0))
		TH_LOG("getsockopt: %s", strerror(errno));
	ASSERT_EQ(sizeof(si0), get_info(self->s, &si0));
	EXPECT_EQ(RDMASTREAM_ESTABLISHED, ci0.rsi_state);
	EXPECT_EQ(RDMASTREAM_ESTABLISHED, si0.rsi_state);
	EXPECT_TRUE(ci0.rsi_flags & RDMASTREAM_INFO_F_PEER_READY);
	EXPECT_FALSE(ci0.rsi_flags & (RDMASTREAM_INFO_F_FIN_SENT |
				      RDMASTREAM_INFO_F_FIN_RCVD |
				      RDMASTREAM_INFO_F_RESET));
	EXPECT_GT(ci0.rsi_rx_ring, 0);
	EXPECT_GT(ci0.rsi_tx_ring, 0);
	EXPECT_GT(ci0.rsi_peer_ring, 0);
	/* The two ends describe the same rings from both sides. */
	EXPECT_EQ(ci0.rsi_peer_ring, si0.rsi_rx_ring);
	EXPECT_EQ(si0.rsi_peer_ring, ci0.rsi_rx_ring);

	stream(_metadata, self->c, self->s, n, rs_key(0, 0, 17), false);

	/*
	 * The peer's consumption is reported back to the sender, maybe
	 * lazily: it may lag, but never by more than the buffers hold.
	 */
	end = rs_now() + 5;
	do {
		ASSERT_EQ(sizeof(ci), get_info(self->c, &ci));
		if (ci.rsi_bytes_acked >= ci0.rsi_bytes_sent + n)
			break;
		rs_msleep(10);
	} while (rs_now() < end);
	ASSERT_EQ(sizeof(si), get_info(self->s, &si));
	EXPECT_EQ(n, ci.rsi_bytes_sent - ci0.rsi_bytes_sent);
	EXPECT_GT(ci.rsi_bytes_acked, ci0.rsi_bytes_acked);
	/* settle()'s byte may have been acknowledged only since ci0 */
	EXPECT_LE(ci.rsi_bytes_acked - ci0.rsi_bytes_acked,
		  n + (ci0.rsi_bytes_sent - ci0.rsi_bytes_acked));
	EXPECT_LE(ci.rsi_bytes_sent - ci.rsi_bytes_acked,
		  (uint64_t)ci.rsi_peer_ring + ci.rsi_tx_ring);
	if (ci.rsi_bytes_acked < ci0.rsi_bytes_sent + n)
		rs_info("info: bytes_acked lags %llu bytes behind after 5 s",
			(unsigned long long)(ci0.rsi_bytes_sent + n -
					     ci.rsi_bytes_acked));
	EXPECT_EQ(n, si.rsi_bytes_received - si0.rsi_bytes_received);
	EXPECT_EQ(n, si.rsi_bytes_read - si0.rsi_bytes_read);
	EXPECT_GT(ci.rsi_writes, ci0.rsi_writes);
	EXPECT_GE(ci.rsi_writes, ci.rsi_inline_writes);
	EXPECT_GT(ci.rsi_completions, ci0.rsi_completions);
	EXPECT_EQ(0, si.rsi_bytes_sent - si0.rsi_bytes_sent);
	EXPECT_EQ(0, ci.rsi_bytes_received - ci0.rsi_bytes_received);
	EXPECT_LE(si.rsi_bytes_read, si.rsi_bytes_received);
	EXPECT_LE(ci.rsi_bytes_acked, ci.rsi_bytes_sent);
}

/* SO_RCVBUF/SO_SNDBUF set before connect() size the stream buffers. */
static void ring_sizes(struct __test_metadata *_metadata, int bufsz,
		       struct rdmastream_info *ci, struct rdmastream_info *si)
{
	int c, s;

	rs_pair_opts(_metadata, &c, &s, bufsz);
	settle(_metadata, c, s);
	ASSERT_EQ(sizeof(*ci), get_info(c, ci));
	ASSERT_EQ(sizeof(*si), get_info(s, si));
	close(c);
	close(s);
}

TEST(bufsize_sizes_rings)
{
	struct rdmastream_info cs, ss, cl, sl;
	unsigned int r;

	RS_SKIP_TCP("SOL_RDMASTREAM");
	RS_SKIP_FB("RDMA counters and rings");
	rs_watchdog(60);
	ring_sizes(_metadata, 32 * 1024, &cs, &ss);
	ring_sizes(_metadata, 512 * 1024, &cl, &sl);
	/* the kernel doubles SO_RCVBUF; rings are that, to a power of two */
	for (r = cs.rsi_rx_ring; r; r >>= 1)
		EXPECT_TRUE(r == 1 || !(r & 1));
	EXPECT_GE(cs.rsi_rx_ring, 32 * 1024);
	EXPECT_LE(cs.rsi_rx_ring, 4 * 32 * 1024);
	EXPECT_GE(cs.rsi_tx_ring, 32 * 1024);
	EXPECT_LE(cs.rsi_tx_ring, 4 * 32 * 1024);
	EXPECT_GT(cl.rsi_rx_ring, cs.rsi_rx_ring);
	EXPECT_GT(cl.rsi_tx_ring, cs.rsi_tx_ring);
	/* each side knows the other's buffer */
	EXPECT_EQ(cs.rsi_peer_ring, ss.rsi_rx_ring);
	EXPECT_EQ(cl.rsi_peer_ring, sl.rsi_rx_ring);
}

TEST_F(data, info_optlen)
{
	struct rdmastream_info info;
	char big[sizeof(info) + 32];
	socklen_t len;
	int bad = -1;

	RS_SKIP_TCP("SOL_RDMASTREAM");
	/* Short: truncated copy, like TCP_INFO. */
	memset(&info, 0xaa, sizeof(info));
	len = 4;
	ASSERT_EQ(0, getsockopt(self->c, SOL_RDMASTREAM, RDMASTREAM_INFO,
				&info, &len)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(4, len);
	EXPECT_EQ(RDMASTREAM_ESTABLISHED, info.rsi_state);
	EXPECT_EQ(0xaaaaaaaa, info.rsi_flags);
	/* Zero length: nothing copied. */
	len = 0;
	ASSERT_EQ(0, getsockopt(self->c, SOL_RDMASTREAM, RDMASTREAM_INFO,
				&info, &len));
	EXPECT_EQ(0, len);
	/* Long: the structure's size comes back. */
	len = sizeof(big);
	ASSERT_EQ(0, getsockopt(self->c, SOL_RDMASTREAM, RDMASTREAM_INFO,
				big, &len));
	EXPECT_EQ(sizeof(info), len);
	/* Negative length, unknown option, bad pointer. */
	len = (socklen_t)bad;
	EXPECT_EQ(-1, getsockopt(self->c, SOL_RDMASTREAM, RDMASTREAM_INFO,
				 &info, &len));
	EXPECT_EQ(EINVAL, errno);
	len = sizeof(info);
	EXPECT_EQ(-1, getsockopt(self->c, SOL_RDMASTREAM, 99, &info, &len));
	EXPECT_EQ(ENOPROTOOPT, errno);
	len = sizeof(info);
	EXPECT_EQ(-1, getsockopt(self->c, SOL_RDMASTREAM, RDMASTREAM_INFO,
				 (void *)16, &len));
	EXPECT_EQ(EFAULT, errno);
}

TEST_F(data, info_states)
{
	struct rdmastream_info info;
	struct sockaddr_in sin;
	int fd, lfd;
	char b;

	RS_SKIP_TCP("SOL_RDMASTREAM");
	fd = rs_socket(0);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(sizeof(info), get_info(fd, &info));
	EXPECT_EQ(RDMASTREAM_CLOSE, info.rsi_state);
	close(fd);
	lfd = rs_listener(_metadata, &sin);
	ASSERT_EQ(sizeof(info), get_info(lfd, &info));
	EXPECT_EQ(RDMASTREAM_LISTEN, info.rsi_state);
	close(lfd);

	ASSERT_EQ(0, shutdown(self->c, SHUT_WR));
	ASSERT_EQ(0, recv(self->s, &b, 1, 0));
	ASSERT_EQ(sizeof(info), get_info(self->c, &info));
	EXPECT_TRUE(info.rsi_flags & RDMASTREAM_INFO_F_FIN_SENT);
	EXPECT_FALSE(info.rsi_flags & RDMASTREAM_INFO_F_FIN_RCVD);
	ASSERT_EQ(sizeof(info), get_info(self->s, &info));
	EXPECT_TRUE(info.rsi_flags & RDMASTREAM_INFO_F_FIN_RCVD);
	EXPECT_FALSE(info.rsi_flags & RDMASTREAM_INFO_F_FIN_SENT);
}

/* ---- shutdown() ---- */

TEST_F_TIMEOUT(data, shut_wr, 60)
{
	uint64_t k1 = rs_key(0, 0, 18), k2 = rs_key(0, 1, 18);
	const size_t n = RS_MIB;
	char b;

	/* The peer reads everything, then EOF... */
	stream(_metadata, self->c, self->s, n, k1, true);
	/* ...again and again. */
	ASSERT_EQ(0, recv(self->s, &b, 1, 0));
	ASSERT_EQ(0, recv(self->s, &b, 1, MSG_DONTWAIT));
	ASSERT_EQ(0, read(self->s, &b, 1));
	/* Shutting down twice is harmless. */
	ASSERT_EQ(0, shutdown(self->c, SHUT_WR));
	/* The other direction still works, up to its own EOF. */
	stream(_metadata, self->s, self->c, n, k2, true);
	ASSERT_EQ(-1, send(self->c, "x", 1, MSG_NOSIGNAL));
	ASSERT_EQ(EPIPE, errno);
}

TEST_F(data, shut_rd)
{
	uint64_t k = rs_key(0, 0, 19);
	double t0;
	char b;

	ASSERT_EQ(0, shutdown(self->c, SHUT_RD));
	/* Reads no longer block: EOF at once. */
	t0 = rs_now();
	ASSERT_EQ(0, recv(self->c, &b, 1, 0));
	ASSERT_LT(rs_now() - t0, 1.0);
	/* Sending still works. */
	rs_send_pat(_metadata, self->c, 5000, k, 0);
	rs_recv_pat(_metadata, self->s, 5000, k, 0);
}

TEST_F(data, shut_rdwr)
{
	char b;

	ASSERT_EQ(0, shutdown(self->c, SHUT_RDWR));
	ASSERT_EQ(0, recv(self->c, &b, 1, 0));
	ASSERT_EQ(-1, send(self->c, "x", 1, MSG_NOSIGNAL));
	ASSERT_EQ(EPIPE, errno);
	ASSERT_EQ(0, recv(self->s, &b, 1, 0));
}

TEST_F(data, shutdown_errors)
{
	char b;

	ASSERT_EQ(-1, shutdown(self->c, 3));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_EQ(-1, shutdown(self->c, -1));
	ASSERT_EQ(EINVAL, errno);
	/* Nothing happened to the connection. */
	ASSERT_EQ(1, send(self->c, "x", 1, 0));
	ASSERT_EQ(1, send(self->s, "y", 1, 0));
	ASSERT_EQ(1, recv(self->s, &b, 1, 0));
	ASSERT_EQ('x', b);
	ASSERT_EQ(1, recv(self->c, &b, 1, 0));
	ASSERT_EQ('y', b);
}

/* ---- close() delivers ---- */

TEST_F_TIMEOUT(data, close_delivers, 120)
{
	struct rs_xfer tx = {
		.fd = self->c, .total = env_mib("RS_CLOSE_MB", 8),
		.key = rs_key(0, 0, 20), .chunk = RS_MIB, .close_fd = true,
	};
	struct rs_xfer rx = tx;

	/* Send it all, close at once; the peer starts reading later. */
	ASSERT_EQ(0, rs_xfer_start(&tx, rs_sender));
	rs_msleep(500);
	rx.fd = self->s;
	rx.close_fd = false;
	rx.expect_eof = true;
	ASSERT_EQ(0, rs_xfer_start(&rx, rs_receiver));
	rs_xfer_join(&rx);
	rs_xfer_join(&tx);
	self->c = -1;
	EXPECT_EQ(0, tx.err) TH_LOG("send: %s", strerror(tx.err));
	RS_XFER_OK(&rx, "receiver");
}

TEST_F_TIMEOUT(data, close_delivers_small, 60)
{
	uint64_t k = rs_key(0, 0, 21);

	rs_send_pat(_metadata, self->c, SYNC_MAX, k, 0);
	close(self->c);
	self->c = -1;
	rs_msleep(1000);
	rs_recv_pat(_metadata, self->s, SYNC_MAX, k, 0);
	ASSERT_EQ(0, recv(self->s, &k, 1, 0));
}

/* ---- send buffer autotuning ---- */

#define REQ_BYTES	(2 * RS_MIB)

static void *request_reader_fn(void *arg)
{
	struct rs_xfer *x = arg;

	/* the reader takes its time: the writer must not need it */
	rs_msleep(1500);
	return rs_receiver(x);
}

/*
 * A program writes a whole 2 MiB request with one blocking send() before
 * it reads anything back, and its peer reads the request only later: as
 * over TCP, whose autotuned buffers hold about 2.5 MiB unread here (6.1,
 * loopback), the send must complete without the peer reading. It
 * deadlocked when the send ring was fixed at 256 KiB. The send ring grew
 * to hold it; every byte arrives. Over RDMA, a non-blocking writer can
 * queue 4 MiB and more unread, and a SO_SNDBUF that the program set keeps
 * its ring fixed.
 */
TEST_F_TIMEOUT(data, unread_request, 120)
{
	uint64_t k = rs_key(0, 0, 40);
	struct rs_xfer rx = { .fd = self->s, .key = k, .total = REQ_BYTES,
			      .chunk = RS_MIB };
	struct rs_xfer rx2 = { .key = k, .chunk = RS_MIB }, rx3 = rx2;
	struct rdmastream_info info, info0;
	double t0, took;
	char *buf;
	ssize_t n;
	int c, s;

	buf = malloc(REQ_BYTES);
	ASSERT_NE(NULL, buf);
	rs_pat_fill(buf, REQ_BYTES, k, 0);
	settle(_metadata, self->c, self->s);
	if (!rs.tcp && !rs_fb_forced())
		ASSERT_EQ(sizeof(info0), get_info(self->c, &info0));
	/* the peer reads nothing until 1.5 s after the send returned */
	ASSERT_EQ(0, rs_set_timeo(self->c, SO_SNDTIMEO, 1000));
	t0 = rs_now();
	n = send(self->c, buf, REQ_BYTES, 0);
	took = rs_now() - t0;
	EXPECT_EQ((ssize_t)REQ_BYTES, n) TH_LOG("send: %zd of %d bytes in %.2f s (%s)",
				      n, (int)REQ_BYTES, took,
				      n < 0 ? strerror(errno) : "short");
	rx.total = n > 0 ? n : 0;
	ASSERT_EQ(0, rs_xfer_start(&rx, request_reader_fn));
	rs_xfer_join(&rx);
	RS_XFER_OK(&rx, "request");
	/* and the reply comes back */
	ASSERT_EQ(1, send(self->s, "r", 1, 0));
	ASSERT_EQ(1, recv(self->c, buf, 1, 0));
	if (!rs.tcp && !rs_fb_forced()) {
		ASSERT_EQ(sizeof(info), get_info(self->c, &info));
		TH_LOG("send ring %u -> %u bytes", info0.rsi_tx_ring,
		       info.rsi_tx_ring);
		EXPECT_LT(info0.rsi_tx_ring, 256 * RS_KIB);
		EXPECT_GE(info.rsi_tx_ring + info.rsi_peer_ring, REQ_BYTES);
		EXPECT_GE(rs_getint(self->c, SOL_SOCKET, SO_SNDBUF),
			  (int)info.rsi_tx_ring);
	}
	free(buf);
	if (rs.tcp || rs_fb_forced())
		return;

	/*
	 * Non-blocking, until the socket stays full: 4 MiB and more queue
	 * unread (the mark: TCP's default tcp_wmem maximum)
	 */
	rs_pair(_metadata, &c, &s);
	settle(_metadata, c, s);
	n = rs_fill_pipe(c, k);
	ASSERT_EQ(sizeof(info), get_info(c, &info));
	TH_LOG("%zd bytes queued unread; send ring %u, peer's %u", n,
	       info.rsi_tx_ring, info.rsi_peer_ring);
	EXPECT_GE(n, (ssize_t)(4 * RS_MIB));
	EXPECT_LE(n, (ssize_t)(info.rsi_tx_ring + info.rsi_peer_ring));
	rx2.fd = s;
	rx2.total = n;
	ASSERT_EQ(0, rs_xfer_start(&rx2, rs_receiver));
	rs_xfer_join(&rx2);
	RS_XFER_OK(&rx2, "filled");
	close(c);
	close(s);

	/* SO_SNDBUF set before connect(): the ring keeps that size */
	rs_pair_opts(_metadata, &c, &s, 64 * 1024);
	settle(_metadata, c, s);
	ASSERT_EQ(sizeof(info0), get_info(c, &info0));
	n = rs_fill_pipe(c, k);
	EXPECT_GT(n, 0);
	ASSERT_EQ(sizeof(info), get_info(c, &info));
	EXPECT_EQ(info0.rsi_tx_ring, info.rsi_tx_ring);
	EXPECT_LE(n, (ssize_t)(info.rsi_tx_ring + info.rsi_peer_ring));
	rx3.fd = s;
	rx3.total = n;
	ASSERT_EQ(0, rs_xfer_start(&rx3, rs_receiver));
	rs_xfer_join(&rx3);
	RS_XFER_OK(&rx3, "fixed ring");
	close(c);
	close(s);
}

TEST_HARNESS_MAIN
