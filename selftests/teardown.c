// SPDX-License-Identifier: GPL-2.0
/*
 * Teardown and faults of AF_RDMASTREAM connections that leave the system
 * alone: peers killed or exiting mid-transfer, closes with unread data
 * (reset), listeners closed with pending connections, shutdown() waking
 * blocked callers. The device and module tests are in module.c.
 *
 * Knob: RS_FAULT_SEC (10), how long an error may take to show up.
 */
#include "rs_common.h"

static unsigned int fault_sec(void)
{
	return rs_env_ulong("RS_FAULT_SEC", 10);
}

/* ---- peer process dies ---- */

enum child_op {
	CHILD_IDLE,	/* connect and sleep */
	CHILD_READ,	/* read slowly */
	CHILD_WRITE,	/* write forever */
	CHILD_EXIT,	/* write 1000 bytes, exit without close() */
};

/* Both fixtures: a child process connects nconn times and does op. */
#define PEER_FIXTURE_DATA		\
	int lfd;			\
	struct sockaddr_in sin;		\
	pid_t pid;			\
	int fd[8];	/* accepted */	\
	int nconn

FIXTURE(peer_recv)
{
	PEER_FIXTURE_DATA;
};

FIXTURE(peer_send)
{
	PEER_FIXTURE_DATA;
};

FIXTURE_VARIANT(peer_recv)
{
	enum child_op op;
	bool kill;	/* SIGKILL the child (else it exits by itself) */
	int nconn;
};

FIXTURE_VARIANT(peer_send)
{
	enum child_op op;
};

/* We block in recv() when the peer is killed (or exits). */
FIXTURE_VARIANT_ADD(peer_recv, killed_idle) {
	.op = CHILD_IDLE, .kill = true, .nconn = 1,
};
FIXTURE_VARIANT_ADD(peer_recv, killed_idle_many) {
	.op = CHILD_IDLE, .kill = true, .nconn = 8,
};
FIXTURE_VARIANT_ADD(peer_recv, killed_writing) {
	.op = CHILD_WRITE, .kill = true, .nconn = 1,
};
FIXTURE_VARIANT_ADD(peer_recv, exits) {
	.op = CHILD_EXIT, .kill = false, .nconn = 1,
};

/* We keep sending when the peer is killed. */
FIXTURE_VARIANT_ADD(peer_send, killed_idle) { .op = CHILD_IDLE };
FIXTURE_VARIANT_ADD(peer_send, killed_reading) { .op = CHILD_READ };

static void child_main(const struct sockaddr_in *sin, enum child_op op,
		       int nconn)
{
	uint64_t k = rs_key(0, 0, 40), off = 0;
	static char buf[65536];
	int fd[8], i;
	ssize_t n;

	alarm(120);
	for (i = 0; i < nconn; i++) {
		fd[i] = rs_socket(0);
		if (fd[i] < 0 || connect(fd[i], (struct sockaddr *)sin,
					 sizeof(*sin)))
			_exit(1);
	}
	switch (op) {
	case CHILD_IDLE:
		for (;;)
			pause();
	case CHILD_READ:
		for (;;) {
			if (recv(fd[0], buf, 4096, 0) <= 0)
				_exit(2);
			usleep(1000);
		}
	case CHILD_WRITE:
		for (;;) {
			rs_pat_fill(buf, sizeof(buf), k, off);
			n = send(fd[0], buf, sizeof(buf), 0);
			if (n <= 0)
				_exit(2);
			off += n;
		}
	case CHILD_EXIT:
		rs_pat_fill(buf, 1000, k, 0);
		if (send(fd[0], buf, 1000, 0) != 1000)
			_exit(2);
		_exit(0);
	}
	_exit(3);
}

#define peer_setup(self, op, n) do {					\
	int __i;							\
									\
	rs_watchdog(_metadata->timeout + 30);				\
	(self)->nconn = (n);						\
	(self)->lfd = rs_listener_opts(_metadata, &(self)->sin, 16, 0);	\
	(self)->pid = fork();						\
	ASSERT_GE((self)->pid, 0);					\
	if (!(self)->pid) {						\
		close((self)->lfd);					\
		child_main(&(self)->sin, (op), (n));			\
	}								\
	for (__i = 0; __i < (self)->nconn; __i++)			\
		(self)->fd[__i] = rs_accept(_metadata, (self)->lfd);	\
} while (0)

#define peer_teardown(self) do {					\
	int __i;							\
									\
	if ((self)->pid > 0) {						\
		kill((self)->pid, SIGKILL);				\
		waitpid((self)->pid, NULL, 0);				\
	}								\
	for (__i = 0; __i < (self)->nconn; __i++)			\
		close((self)->fd[__i]);					\
	close((self)->lfd);						\
} while (0)

FIXTURE_SETUP(peer_recv)
{
	peer_setup(self, variant->op, variant->nconn);
}

FIXTURE_TEARDOWN(peer_recv)
{
	peer_teardown(self);
}

FIXTURE_SETUP(peer_send)
{
	peer_setup(self, variant->op, 1);
}

FIXTURE_TEARDOWN(peer_send)
{
	peer_teardown(self);
}

struct killer {
	pid_t pid;
	unsigned int delay_ms;
	double when;
	pthread_t thr;
};

static void *killer_fn(void *arg)
{
	struct killer *k = arg;

	rs_msleep(k->delay_ms);
	k->when = rs_now();
	kill(k->pid, SIGKILL);
	return NULL;
}

TEST_F_TIMEOUT(peer_recv, recv_ends, 60)
{
	struct killer k = { .pid = self->pid, .delay_ms = 300 };
	uint64_t key = rs_key(0, 0, 40), got = 0;
	static char buf[65536];
	ssize_t n;
	int i;

	if (variant->kill)
		ASSERT_EQ(0, pthread_create(&k.thr, NULL, killer_fn, &k));

	/* Every connection reads to EOF (or a reset) in bounded time. */
	for (i = 0; i < self->nconn; i++) {
		ASSERT_EQ(0, rs_set_timeo(self->fd[i], SO_RCVTIMEO,
					  (fault_sec() + 1) * 1000));
		for (;;) {
			n = recv(self->fd[i], buf, sizeof(buf), 0);
			if (n <= 0)
				break;
			ASSERT_EQ(n, rs_pat_check(buf, n, key, got));
			got += n;
		}
		if (n < 0) {
			ASSERT_NE(EAGAIN, errno)
				TH_LOG("connection %d: no EOF after %u s", i,
				       fault_sec());
			ASSERT_EQ(ECONNRESET, errno);
		}
		if (i == 0 && variant->op != CHILD_IDLE)
			TH_LOG("received %llu bytes, then %s",
			       (unsigned long long)got,
			       n ? strerror(errno) : "EOF");
		if (variant->op == CHILD_EXIT) {
			EXPECT_EQ(1000, got);
		}
		got = 0;
	}
	if (variant->kill) {
		pthread_join(k.thr, NULL);
		EXPECT_LE(rs_now() - k.when, fault_sec());
	} else {
		int status;

		ASSERT_EQ(self->pid, waitpid(self->pid, &status, 0));
		self->pid = 0;
		EXPECT_EQ(0, status);
	}
}

TEST_F_TIMEOUT(peer_send, send_ends, 60)
{
	struct killer k = { .pid = self->pid, .delay_ms = 500 };
	uint64_t key = rs_key(0, 1, 40), sent = 0;
	static char buf[65536];
	double end = 0;
	ssize_t n;
	int err;

	ASSERT_EQ(0, pthread_create(&k.thr, NULL, killer_fn, &k));
	/* Send until the dead peer's end makes it fail. */
	ASSERT_EQ(0, rs_set_timeo(self->fd[0], SO_SNDTIMEO, 1000));
	for (;;) {
		rs_pat_fill(buf, sizeof(buf), key, sent);
		n = send(self->fd[0], buf, sizeof(buf), MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN)
			break;
		if (n > 0)
			sent += n;
		if (k.when && !end)
			end = k.when + fault_sec();
		if (end && rs_now() > end)
			break;
	}
	pthread_join(k.thr, NULL);
	ASSERT_EQ(-1, n) TH_LOG("sends still succeed %u s after the kill",
				fault_sec());
	err = errno;
	TH_LOG("sent %llu bytes, then %s after %.2f s",
	       (unsigned long long)sent, strerror(err), rs_now() - k.when);
	/*
	 * The dead peer had unread data: a reset, reported once. Or, on a
	 * slow kernel, it had read everything when it died: its close was a
	 * clean FIN, and sending on in CLOSE_WAIT into a peer that is gone
	 * is EPIPE (tcp_reset() in CLOSE_WAIT), with EOF for a receive.
	 */
	if (err == EPIPE) {
		EXPECT_EQ(0, recv(self->fd[0], buf, 1, MSG_DONTWAIT))
			TH_LOG("EPIPE without the peer's FIN: %s",
			       strerror(errno));
	} else {
		EXPECT_EQ(ECONNRESET, err) TH_LOG("send: %s", strerror(err));
	}
}

/* ---- resets and closes ---- */

FIXTURE(conn)
{
	int c;
	int s;
};

FIXTURE_SETUP(conn)
{
	rs_watchdog(_metadata->timeout + 30);
	rs_pair(_metadata, &self->c, &self->s);
}

FIXTURE_TEARDOWN(conn)
{
	if (self->c >= 0)
		close(self->c);
	if (self->s >= 0)
		close(self->s);
}

struct blocked_io {
	int fd;
	bool send;
	size_t len;
	ssize_t ret;
	int err;
	double when;
	pthread_t thr;
};

static void *blocked_io_fn(void *arg)
{
	struct blocked_io *b = arg;
	char *buf = calloc(1, b->len);

	if (!buf) {
		b->ret = -1;
		b->err = ENOMEM;
		return NULL;
	}
	if (b->send)
		b->ret = send(b->fd, buf, b->len, MSG_NOSIGNAL);
	else
		b->ret = recv(b->fd, buf, b->len, 0);
	b->err = errno;
	b->when = rs_now();
	free(buf);
	return NULL;
}

TEST_F(conn, close_unread_resets)
{
	ssize_t n;
	char b;

	/* TCP: closing with unread data resets the connection. */
	ASSERT_EQ(6, send(self->c, "unread", 6, 0));
	ASSERT_EQ(6, rs_wait_inq(self->s, 6, 5000));
	close(self->s);
	self->s = -1;
	ASSERT_EQ(POLLERR, rs_poll(self->c, POLLIN, 5000) & POLLERR);
	EXPECT_EQ(-1, recv(self->c, &b, 1, 0));
	EXPECT_EQ(ECONNRESET, errno);
	/*
	 * TCP reports it once; then the socket is shut down both ways: EOF,
	 * and EPIPE for a send.
	 */
	n = recv(self->c, &b, 1, 0);
	EXPECT_EQ(0, n) TH_LOG("recv: %zd (%s)", n, strerror(errno));
	EXPECT_EQ(-1, send(self->c, "x", 1, MSG_NOSIGNAL));
	EXPECT_EQ(EPIPE, errno) TH_LOG("send: %s", strerror(errno));
}

TEST_F(conn, close_unread_wakes_recv)
{
	struct blocked_io r = { .fd = self->c, .len = 16 };
	double t0;

	ASSERT_EQ(6, send(self->c, "unread", 6, 0));
	ASSERT_EQ(6, rs_wait_inq(self->s, 6, 5000));
	ASSERT_EQ(0, pthread_create(&r.thr, NULL, blocked_io_fn, &r));
	rs_msleep(200);
	t0 = rs_now();
	close(self->s);
	self->s = -1;
	pthread_join(r.thr, NULL);
	EXPECT_EQ(-1, r.ret);
	EXPECT_EQ(ECONNRESET, r.err);
	EXPECT_LT(r.when - t0, fault_sec());
}

TEST_F(conn, close_read_all_is_eof)
{
	char buf[16];

	ASSERT_EQ(4, send(self->c, "data", 4, 0));
	ASSERT_EQ(4, rs_recv_all(self->s, buf, 4, 0));
	close(self->s);
	self->s = -1;
	/* Everything was read: an orderly close, no reset. */
	EXPECT_EQ(0, recv(self->c, buf, sizeof(buf), 0));
	EXPECT_EQ(0, rs_sock_error(self->c));
}

TEST_F_TIMEOUT(conn, peer_closes_while_sending, 60)
{
	struct rs_xfer tx = {
		.fd = self->c, .total = 1ULL << 40, .key = rs_key(0, 0, 41),
		.chunk = 256 * RS_KIB, .flags = MSG_NOSIGNAL,
	};
	char buf[4096];
	double t0;

	/* The peer reads a little, then closes while data keeps coming. */
	ASSERT_EQ(0, rs_xfer_start(&tx, rs_sender));
	ASSERT_EQ(sizeof(buf), rs_recv_all(self->s, buf, sizeof(buf), 0));
	/* unread data for certain, not after a guess of 100 ms (slow kernels) */
	ASSERT_LT(0, rs_wait_inq(self->s, 1, 10000));
	t0 = rs_now();
	close(self->s);
	self->s = -1;
	rs_xfer_join(&tx);
	/* the peer closed with data unread: a reset */
	EXPECT_EQ(ECONNRESET, tx.err) TH_LOG("send: %s", strerror(tx.err));
	EXPECT_LT(rs_now() - t0, fault_sec());
}

/*
 * A send blocked with part of its bytes copied when the peer resets
 * returns that count; the error is not lost with it: TCP reports it to
 * the next call (ECONNRESET), not EPIPE, and a receive after that sees
 * EOF. (The module used to clear the error while returning the count.)
 */
TEST_F_TIMEOUT(conn, reset_after_partial_send, 60)
{
	struct blocked_io w = { .fd = self->c, .send = true,
				.len = 64 * RS_MIB };
	char b;

	ASSERT_EQ(6, send(self->c, "unread", 6, 0));
	ASSERT_EQ(6, rs_wait_inq(self->s, 6, 5000));
	ASSERT_EQ(0, pthread_create(&w.thr, NULL, blocked_io_fn, &w));
	rs_msleep(500);
	/* unread data: the close resets the connection */
	close(self->s);
	self->s = -1;
	pthread_join(w.thr, NULL);
	ASSERT_GT(w.ret, 0) TH_LOG("blocked send: %s", strerror(w.err));
	ASSERT_LT(w.ret, (ssize_t)w.len);
	EXPECT_EQ(-1, send(self->c, "x", 1, MSG_NOSIGNAL));
	EXPECT_EQ(ECONNRESET, errno) TH_LOG("send: %s", strerror(errno));
	EXPECT_EQ(0, recv(self->c, &b, 1, 0));
}

TEST_F(conn, shutdown_wakes_recv)
{
	struct blocked_io r = { .fd = self->c, .len = 16 };
	double t0;

	ASSERT_EQ(0, pthread_create(&r.thr, NULL, blocked_io_fn, &r));
	rs_msleep(200);
	t0 = rs_now();
	ASSERT_EQ(0, shutdown(self->c, SHUT_RDWR));
	pthread_join(r.thr, NULL);
	EXPECT_EQ(0, r.ret) TH_LOG("recv: %s", strerror(r.err));
	EXPECT_LT(r.when - t0, 2.0);
}

TEST_F(conn, shutdown_wakes_send)
{
	struct blocked_io w = { .fd = self->c, .send = true, .len = RS_MIB };
	double t0;
	ssize_t total;

	total = rs_fill_pipe(self->c, rs_key(0, 0, 42));
	ASSERT_GT(total, 0);
	ASSERT_EQ(0, pthread_create(&w.thr, NULL, blocked_io_fn, &w));
	rs_msleep(200);
	t0 = rs_now();
	ASSERT_EQ(0, shutdown(self->c, SHUT_WR));
	pthread_join(w.thr, NULL);
	/* EPIPE, or the part that was queued before the shutdown. */
	if (w.ret < 0) {
		EXPECT_EQ(EPIPE, w.err);
	} else {
		EXPECT_LT(w.ret, RS_MIB);
	}
	EXPECT_LT(w.when - t0, 2.0);
	EXPECT_EQ(-1, send(self->c, "x", 1, MSG_NOSIGNAL));
	EXPECT_EQ(EPIPE, errno);
}

TEST_F(conn, close_wakes_peer)
{
	struct blocked_io r = { .fd = self->s, .len = 16 };
	double t0;

	ASSERT_EQ(0, pthread_create(&r.thr, NULL, blocked_io_fn, &r));
	rs_msleep(200);
	t0 = rs_now();
	close(self->c);
	self->c = -1;
	pthread_join(r.thr, NULL);
	EXPECT_EQ(0, r.ret) TH_LOG("recv: %s", strerror(r.err));
	EXPECT_LT(r.when - t0, fault_sec());
}

FIXTURE(listener)
{
};

FIXTURE_SETUP(listener)
{
}

FIXTURE_TEARDOWN(listener)
{
}

TEST_F_TIMEOUT(listener, close_resets_pending, 60)
{
	struct sockaddr_in sin;
	int lfd, c[2], i, rev;
	char b;

	rs_watchdog(60);
	lfd = rs_listener(_metadata, &sin);
	for (i = 0; i < 2; i++)
		c[i] = rs_connect(_metadata, &sin);
	/* Established but never accepted: closing the listener resets. */
	close(lfd);
	for (i = 0; i < 2; i++) {
		rev = rs_poll(c[i], POLLIN, fault_sec() * 1000);
		EXPECT_NE(0, rev) TH_LOG("no event within %u s", fault_sec());
		EXPECT_EQ(-1, recv(c[i], &b, 1, 0));
		EXPECT_EQ(ECONNRESET, errno);
		close(c[i]);
	}
}

TEST_F(listener, closed_then_connect)
{
	struct sockaddr_in sin;
	int lfd, fd;

	rs_watchdog(60);
	lfd = rs_listener(_metadata, &sin);
	close(lfd);
	fd = rs_socket(0);
	ASSERT_GE(fd, 0);
	EXPECT_EQ(-1, connect(fd, (struct sockaddr *)&sin, sizeof(sin)));
	EXPECT_EQ(ECONNREFUSED, errno);
	close(fd);
}

struct blocked_accept {
	int lfd;
	int ret;
	int err;
	double when;
	pthread_t thr;
};

static void *blocked_accept_fn(void *arg)
{
	struct blocked_accept *a = arg;

	a->ret = accept(a->lfd, NULL, NULL);
	a->err = errno;
	a->when = rs_now();
	return NULL;
}

TEST_F_TIMEOUT(listener, shut_rd_wakes_accept, 60)
{
	struct blocked_accept a = { .ret = 0 };
	struct sockaddr_in sin;
	double t0;
	int fd;

	rs_watchdog(60);
	a.lfd = rs_listener(_metadata, &sin);
	ASSERT_EQ(0, pthread_create(&a.thr, NULL, blocked_accept_fn, &a));
	rs_msleep(300);
	/* TCP: SHUT_RD stops listening; a blocked accept() gets EINVAL. */
	t0 = rs_now();
	ASSERT_EQ(0, shutdown(a.lfd, SHUT_RD));
	pthread_join(a.thr, NULL);
	EXPECT_EQ(-1, a.ret);
	EXPECT_EQ(EINVAL, a.err);
	EXPECT_LT(a.when - t0, fault_sec());
	EXPECT_EQ(0, rs_getint(a.lfd, SOL_SOCKET, SO_ACCEPTCONN));
	fd = rs_socket(0);
	ASSERT_GE(fd, 0);
	EXPECT_EQ(-1, connect(fd, (struct sockaddr *)&sin, sizeof(sin)));
	EXPECT_EQ(ECONNREFUSED, errno);
	close(fd);
	close(a.lfd);
}

TEST_F(listener, children_inherit_options)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 7 }, got;
	socklen_t len = sizeof(got);
	struct sockaddr_in sin;
	struct timeval tv;
	int lfd, c, s;
	double t0;
	char b;

	rs_watchdog(60);
	lfd = rs_listener(_metadata, &sin);
	ASSERT_EQ(0, rs_set_timeo(lfd, SO_RCVTIMEO, 300));
	ASSERT_EQ(0, rs_set_timeo(lfd, SO_SNDTIMEO, 400));
	ASSERT_EQ(0, setsockopt(lfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	c = rs_connect(_metadata, &sin);
	s = rs_accept(_metadata, lfd);
	/* As with TCP, an accepted socket starts with its listener's options */
	len = sizeof(tv);
	ASSERT_EQ(0, getsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, &len));
	EXPECT_EQ(0, tv.tv_sec);
	EXPECT_EQ(400000, tv.tv_usec);
	len = sizeof(got);
	ASSERT_EQ(0, getsockopt(s, SOL_SOCKET, SO_LINGER, &got, &len));
	EXPECT_EQ(1, got.l_onoff);
	EXPECT_EQ(7, got.l_linger);
	t0 = rs_now();
	EXPECT_EQ(-1, recv(s, &b, 1, 0));
	EXPECT_EQ(EAGAIN, errno);
	EXPECT_GT(rs_now() - t0, 0.2);
	EXPECT_LT(rs_now() - t0, 5.0);
	lg.l_onoff = 0;
	setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(c);
	close(s);
	close(lfd);
}

struct late_reader {
	int fd;
	size_t want;
	unsigned int delay_ms;
	size_t got;
	bool intact;
	bool eof;
	pthread_t thr;
};

static void *late_reader_fn(void *arg)
{
	struct late_reader *r = arg;
	static char buf[64 * 1024];
	ssize_t n;

	r->intact = true;
	rs_msleep(r->delay_ms);
	for (;;) {
		n = recv(r->fd, buf, sizeof(buf), 0);
		if (n <= 0) {
			r->eof = n == 0;
			break;
		}
		if (rs_pat_check(buf, n, 0x11, r->got) != (size_t)n)
			r->intact = false;
		r->got += n;
	}
	return NULL;
}

TEST_F_TIMEOUT(conn, linger_close_waits_for_delivery, 90)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 20 };
	struct late_reader r = { .fd = self->s, .delay_ms = 1500 };
	ssize_t queued;
	double t0, took;

	/* Fill the pipe; the reader starts late; close() must linger. */
	queued = rs_fill_pipe(self->c, 0x11);
	ASSERT_GT(queued, 0);
	ASSERT_EQ(0, setsockopt(self->c, SOL_SOCKET, SO_LINGER, &lg,
				sizeof(lg)));
	ASSERT_EQ(0, pthread_create(&r.thr, NULL, late_reader_fn, &r));
	t0 = rs_now();
	EXPECT_EQ(0, close(self->c));
	took = rs_now() - t0;
	self->c = -1;
	pthread_join(r.thr, NULL);
	EXPECT_GT(took, 1.0) TH_LOG("close() returned after %.2f s", took);
	EXPECT_LT(took, 20.0);
	EXPECT_EQ((size_t)queued, r.got);
	EXPECT_TRUE(r.intact);
	EXPECT_TRUE(r.eof);
}

TEST_HARNESS_MAIN
