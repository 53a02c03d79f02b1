// SPDX-License-Identifier: GPL-2.0
/*
 * Readiness of AF_RDMASTREAM sockets: poll(), select() and epoll (level
 * and edge triggered), for data, write space, half and full shutdown,
 * resets and pending connections.
 *
 * Knob: RS_PINGPONG (10000) messages in epoll_et_pingpong.
 *
 * Writability follows TCP's rule (sk_stream_is_writeable()): POLLOUT once
 * the free send buffer space is at least half of what is queued, i.e. a
 * third of the send ring, not at the first free byte.
 */
#include "rs_common.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>

#define ALL_EVENTS	(POLLIN | POLLOUT | POLLRDHUP)

FIXTURE(poll)
{
	int c;
	int s;
};

FIXTURE_SETUP(poll)
{
	rs_watchdog(_metadata->timeout + 30);
	rs_pair(_metadata, &self->c, &self->s);
}

FIXTURE_TEARDOWN(poll)
{
	if (self->c >= 0)
		close(self->c);
	if (self->s >= 0)
		close(self->s);
}

/* Do something to a socket from another thread after a delay. */
enum later_op { LATER_SEND, LATER_SHUT_WR, LATER_SHUT_RDWR, LATER_CLOSE,
		LATER_DRAIN };

struct later {
	int fd;
	enum later_op op;
	unsigned int delay_ms;
	size_t drain;		/* LATER_DRAIN: bytes to read */
	int err;
	pthread_t thr;
};

static void *later_fn(void *arg)
{
	struct later *l = arg;
	static char buf[65536];
	size_t left = l->drain;
	ssize_t n;
	int ret = 0;

	rs_msleep(l->delay_ms);
	switch (l->op) {
	case LATER_SEND:
		ret = send(l->fd, "ping", 4, 0) == 4 ? 0 : -1;
		break;
	case LATER_SHUT_WR:
		ret = shutdown(l->fd, SHUT_WR);
		break;
	case LATER_SHUT_RDWR:
		ret = shutdown(l->fd, SHUT_RDWR);
		break;
	case LATER_CLOSE:
		ret = close(l->fd);
		break;
	case LATER_DRAIN:
		while (left) {
			n = recv(l->fd, buf, left < sizeof(buf) ?
				 left : sizeof(buf), 0);
			if (n <= 0) {
				ret = -1;
				if (!n)
					errno = EPIPE;
				break;
			}
			left -= n;
		}
		break;
	}
	if (ret)
		l->err = errno;
	return NULL;
}

static void later_start(struct __test_metadata *_metadata, struct later *l,
			int fd, enum later_op op, unsigned int delay_ms)
{
	l->fd = fd;
	l->op = op;
	l->delay_ms = delay_ms;
	ASSERT_EQ(0, pthread_create(&l->thr, NULL, later_fn, l));
}

static void later_join(struct __test_metadata *_metadata, struct later *l)
{
	pthread_join(l->thr, NULL);
	ASSERT_EQ(0, l->err) TH_LOG("delayed op: %s", strerror(l->err));
}

/* poll() until all of want show up (or timeout); returns last revents. */
static int poll_until(int fd, short events, short want, int timeout_ms)
{
	double end = rs_now() + timeout_ms / 1000.0;
	int rev;

	for (;;) {
		rev = rs_poll(fd, events, 100);
		if (rev < 0 || (rev & want) == want || rs_now() > end)
			return rev;
		if (rev)
			rs_msleep(10);
	}
}

TEST_F(poll, pollout_connected)
{
	EXPECT_EQ(POLLOUT, rs_poll(self->c, ALL_EVENTS, 0));
	EXPECT_EQ(POLLOUT, rs_poll(self->s, ALL_EVENTS, 0));
	EXPECT_EQ(POLLOUT | POLLWRNORM,
		  rs_poll(self->c, POLLOUT | POLLWRNORM, 0));
	/* Nothing to read: a timed poll for input times out. */
	EXPECT_EQ(0, rs_poll(self->s, POLLIN | POLLRDHUP, 200));
}

TEST_F(poll, unconnected)
{
	int fd = rs_socket(0), rev;

	/* TCP: a socket that is not connected reports POLLHUP at once. */
	ASSERT_GE(fd, 0);
	rev = rs_poll(fd, ALL_EVENTS, 1000);
	EXPECT_EQ(POLLHUP, rev & POLLHUP) TH_LOG("revents 0x%x", rev);
	EXPECT_EQ(0, rev & (POLLIN | POLLERR));
	close(fd);
}

TEST_F(poll, pollin_arrival)
{
	struct later l = { };
	double t0 = rs_now();
	char buf[8];

	later_start(_metadata, &l, self->c, LATER_SEND, 300);
	/* Blocks until the data is there. */
	ASSERT_EQ(POLLIN | POLLRDNORM,
		  rs_poll(self->s, POLLIN | POLLRDNORM | POLLRDHUP, 5000));
	EXPECT_GE(rs_now() - t0, 0.25);
	later_join(_metadata, &l);
	EXPECT_EQ(POLLIN | POLLOUT, rs_poll(self->s, ALL_EVENTS, 0));
	ASSERT_EQ(4, recv(self->s, buf, sizeof(buf), 0));
	/* Drained: no longer readable. */
	EXPECT_EQ(POLLOUT, rs_poll(self->s, ALL_EVENTS, 0));
}

struct poller {
	int fd;
	int revents;
	pthread_t thr;
};

static void *poller_fn(void *arg)
{
	struct poller *p = arg;

	p->revents = rs_poll(p->fd, POLLIN, 5000);
	return NULL;
}

TEST_F(poll, two_pollers)
{
	struct poller p[2] = { { .fd = self->s }, { .fd = self->s } };
	int i;

	/* One arrival wakes every waiter. */
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&p[i].thr, NULL, poller_fn, &p[i]));
	rs_msleep(200);
	ASSERT_EQ(1, send(self->c, "x", 1, 0));
	for (i = 0; i < 2; i++) {
		pthread_join(p[i].thr, NULL);
		EXPECT_EQ(POLLIN, p[i].revents);
	}
}

TEST_F(poll, rdhup_on_shut_wr)
{
	struct later l = { };
	char b;

	/* A blocked poll wakes up for the peer's FIN. */
	later_start(_metadata, &l, self->c, LATER_SHUT_WR, 200);
	EXPECT_EQ(POLLIN | POLLRDHUP, rs_poll(self->s, POLLIN | POLLRDHUP,
					      5000));
	later_join(_metadata, &l);
	EXPECT_EQ(POLLIN | POLLOUT | POLLRDHUP,
		  rs_poll(self->s, ALL_EVENTS, 0));
	ASSERT_EQ(0, recv(self->s, &b, 1, 0));
	/* EOF stays readable; the shut down side may still read. */
	EXPECT_EQ(POLLIN | POLLOUT | POLLRDHUP,
		  rs_poll(self->s, ALL_EVENTS, 0));
	EXPECT_EQ(POLLOUT, rs_poll(self->c, ALL_EVENTS, 0));
}

TEST_F(poll, rdhup_after_data)
{
	char buf[16];

	ASSERT_EQ(5, send(self->c, "hello", 5, 0));
	ASSERT_EQ(0, shutdown(self->c, SHUT_WR));
	EXPECT_EQ(POLLIN | POLLOUT | POLLRDHUP,
		  poll_until(self->s, ALL_EVENTS, POLLRDHUP, 5000));
	ASSERT_EQ(5, recv(self->s, buf, sizeof(buf), 0));
	EXPECT_EQ(POLLIN | POLLOUT | POLLRDHUP,
		  rs_poll(self->s, ALL_EVENTS, 0));
	ASSERT_EQ(0, recv(self->s, buf, sizeof(buf), 0));
}

TEST_F(poll, rdhup_on_peer_close)
{
	int rev;

	close(self->s);
	self->s = -1;
	rev = poll_until(self->c, ALL_EVENTS, POLLRDHUP, 5000);
	/* Half closed: readable EOF, still writable, no hang-up yet. */
	EXPECT_EQ(POLLIN | POLLOUT | POLLRDHUP, rev);
}

TEST_F(poll, hup_both_shut)
{
	int rev;

	ASSERT_EQ(0, shutdown(self->c, SHUT_WR));
	ASSERT_EQ(0, shutdown(self->s, SHUT_WR));
	rev = poll_until(self->c, ALL_EVENTS, POLLHUP, 5000);
	EXPECT_EQ(POLLHUP, rev & POLLHUP) TH_LOG("revents 0x%x", rev);
	EXPECT_EQ(POLLIN | POLLRDHUP, rev & (POLLIN | POLLRDHUP));
	EXPECT_EQ(0, rev & POLLERR);
	rev = poll_until(self->s, ALL_EVENTS, POLLHUP, 5000);
	EXPECT_EQ(POLLHUP, rev & POLLHUP) TH_LOG("revents 0x%x", rev);
	EXPECT_EQ(POLLIN | POLLRDHUP, rev & (POLLIN | POLLRDHUP));
	EXPECT_EQ(0, rev & POLLERR);
}

TEST_F(poll, hup_local_rdwr)
{
	struct later l = { };
	int rev;

	/* A poll blocked on input wakes up for the local SHUT_RDWR. */
	later_start(_metadata, &l, self->c, LATER_SHUT_RDWR, 200);
	rev = rs_poll(self->c, POLLIN, 5000);
	later_join(_metadata, &l);
	EXPECT_EQ(POLLIN | POLLHUP, rev & (POLLIN | POLLHUP))
		TH_LOG("revents 0x%x", rev);
	EXPECT_EQ(0, rev & POLLERR);
	rev = poll_until(self->s, ALL_EVENTS, POLLRDHUP, 5000);
	EXPECT_EQ(POLLIN | POLLRDHUP, rev & (POLLIN | POLLRDHUP));
	EXPECT_EQ(0, rev & (POLLERR | POLLHUP));
}

FIXTURE(reset)
{
	int c;
	int s;
};

FIXTURE_VARIANT(reset)
{
	bool linger0;	/* abortive close instead of close with unread data */
};

FIXTURE_VARIANT_ADD(reset, linger0) { .linger0 = true };
FIXTURE_VARIANT_ADD(reset, unread) { .linger0 = false };

FIXTURE_SETUP(reset)
{
	rs_watchdog(_metadata->timeout + 30);
	rs_pair(_metadata, &self->c, &self->s);
}

FIXTURE_TEARDOWN(reset)
{
	close(self->c);
}

/* Make the server end reset the connection. */
static void reset_peer(struct __test_metadata *_metadata, int s,
		       bool linger0, int c)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (linger0) {
		ASSERT_EQ(0, setsockopt(s, SOL_SOCKET, SO_LINGER, &lg,
					sizeof(lg)));
	} else {
		ASSERT_EQ(6, send(c, "unread", 6, 0));
		ASSERT_EQ(6, rs_wait_inq(s, 6, 5000));
	}
	close(s);
}

TEST_F(reset, pollerr)
{
	ssize_t n;
	char b;
	int rev;

	reset_peer(_metadata, self->s, variant->linger0, self->c);
	/*
	 * TCP's poll can catch a reset half done (see poll_race): wait for
	 * both there. Ours reports them together.
	 */
	rev = poll_until(self->c, ALL_EVENTS,
			 rs.tcp ? POLLERR | POLLHUP : POLLERR, 5000);
	EXPECT_EQ(POLLERR | POLLHUP, rev & (POLLERR | POLLHUP))
		TH_LOG("revents 0x%x", rev);
	EXPECT_EQ(ECONNRESET, rs_sock_error(self->c));
	/*
	 * TCP reports the error once; then the socket is shut down both
	 * ways: EOF, and EPIPE for a send. No data, no hang.
	 */
	n = recv(self->c, &b, 1, 0);
	EXPECT_EQ(0, n) TH_LOG("recv: %zd (%s)", n, strerror(errno));
	EXPECT_EQ(-1, send(self->c, "x", 1, MSG_NOSIGNAL));
	EXPECT_EQ(EPIPE, errno) TH_LOG("send: %s", strerror(errno));
	rev = rs_poll(self->c, ALL_EVENTS, 0);
	EXPECT_EQ(POLLHUP, rev & POLLHUP);
}

TEST_F(reset, wakes_poll)
{
	struct later l = { };
	int rev;

	/* A poll blocked for input wakes up with POLLERR. */
	if (!variant->linger0) {
		ASSERT_EQ(6, send(self->c, "unread", 6, 0));
		ASSERT_EQ(6, rs_wait_inq(self->s, 6, 5000));
	} else {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		ASSERT_EQ(0, setsockopt(self->s, SOL_SOCKET, SO_LINGER, &lg,
					sizeof(lg)));
	}
	later_start(_metadata, &l, self->s, LATER_CLOSE, 200);
	rev = rs_poll(self->c, POLLIN, 5000);
	later_join(_metadata, &l);
	EXPECT_EQ(POLLERR, rev & POLLERR) TH_LOG("revents 0x%x", rev);
}

/* Spins poll() on a socket until told to stop; counts what it saw. */
struct spinner {
	int fd;
	volatile bool stop;
	unsigned long polls;
	unsigned long err_no_hup;	/* POLLERR without POLLHUP */
	unsigned long saw_err;
	pthread_t thr;
};

static void *spinner_fn(void *arg)
{
	struct spinner *sp = arg;
	struct pollfd p = { .fd = sp->fd, .events = ALL_EVENTS };

	while (!sp->stop) {
		p.revents = 0;
		if (poll(&p, 1, 0) < 0)
			break;
		sp->polls++;
		if (p.revents & POLLERR) {
			sp->saw_err++;
			if (!(p.revents & POLLHUP))
				sp->err_no_hup++;
		}
	}
	return NULL;
}

/*
 * The error of a reset comes with its hang-up, also to a poll that races
 * the reset: a program that stops polling at POLLERR must not read the
 * connection as half open. Another thread polls without pause while the
 * peer resets, many times over. (Kernel TCP shows POLLERR alone to a few
 * hundred of such polls per hundred resets; this module shows none.)
 */
TEST_F_TIMEOUT(reset, poll_race, 300)
{
	unsigned long polls = 0, bad = 0, errs = 0;
	int rounds = rs_env_ulong("RS_RESET_ROUNDS", 40);
	int i, c, s;

	for (i = 0; i < rounds; i++) {
		struct spinner sp = { };

		if (i == 0) {
			c = self->c;
			s = self->s;
		} else {
			rs_pair(_metadata, &c, &s);
		}
		sp.fd = c;
		ASSERT_EQ(0, pthread_create(&sp.thr, NULL, spinner_fn, &sp));
		rs_msleep(i % 5);
		reset_peer(_metadata, s, variant->linger0, c);
		ASSERT_EQ(POLLERR, poll_until(c, ALL_EVENTS, POLLERR, 5000) &
				   POLLERR);
		rs_msleep(5);
		sp.stop = true;
		pthread_join(sp.thr, NULL);
		polls += sp.polls;
		bad += sp.err_no_hup;
		errs += sp.saw_err;
		if (i)
			close(c);
	}
	TH_LOG("%d resets, %lu polls, %lu with POLLERR, %lu without POLLHUP",
	       rounds, polls, errs, bad);
	EXPECT_LT(0, errs);
	/* TCP does not promise this: its poll reads the state unlocked */
	if (!rs.tcp)
		EXPECT_EQ(0, bad);
}

TEST_F_TIMEOUT(poll, pollout_after_drain, 60)
{
	struct later l = { };
	ssize_t total;

	total = rs_fill_pipe(self->c, rs_key(0, 0, 30));
	ASSERT_GT(total, 0);
	EXPECT_EQ(0, rs_poll(self->c, POLLOUT, 200));
	/* Reading on the other side opens space and wakes the writer. */
	l.drain = total;
	later_start(_metadata, &l, self->s, LATER_DRAIN, 200);
	EXPECT_EQ(POLLOUT, rs_poll(self->c, POLLOUT, 10000));
	later_join(_metadata, &l);
}

TEST_F(poll, select_rw)
{
	struct timeval tv = { .tv_usec = 100000 };
	fd_set rfds, wfds;
	pid_t pid;
	int status;

	FD_ZERO(&rfds);
	FD_SET(self->s, &rfds);
	EXPECT_EQ(0, select(self->s + 1, &rfds, NULL, NULL, &tv));

	FD_ZERO(&wfds);
	FD_SET(self->c, &wfds);
	tv.tv_sec = 1;
	EXPECT_EQ(1, select(self->c + 1, NULL, &wfds, NULL, &tv));
	EXPECT_TRUE(FD_ISSET(self->c, &wfds));

	/* Another process sends after a while; select() waits for it. */
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		rs_msleep(300);
		_exit(send(self->c, "z", 1, 0) == 1 ? 0 : 1);
	}
	FD_ZERO(&rfds);
	FD_SET(self->s, &rfds);
	tv.tv_sec = 5;
	tv.tv_usec = 0;
	EXPECT_EQ(1, select(self->s + 1, &rfds, NULL, NULL, &tv));
	EXPECT_TRUE(FD_ISSET(self->s, &rfds));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, status);
}

static int ep_add(int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		return -1;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) {
		close(ep);
		return -1;
	}
	return ep;
}

TEST_F(poll, epoll_level)
{
	struct epoll_event ev;
	char buf[8];
	int ep;

	ep = ep_add(self->s, EPOLLIN | EPOLLRDHUP);
	ASSERT_GE(ep, 0);
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 100));
	ASSERT_EQ(4, send(self->c, "abcd", 4, 0));
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, 5000));
	EXPECT_EQ(EPOLLIN, ev.events);
	/* Level triggered: reported until drained. */
	ASSERT_EQ(2, recv(self->s, buf, 2, 0));
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, 0));
	EXPECT_EQ(EPOLLIN, ev.events);
	ASSERT_EQ(2, recv(self->s, buf, sizeof(buf), 0));
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 100));
	/* And for the peer's FIN. */
	ASSERT_EQ(0, shutdown(self->c, SHUT_WR));
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, 5000));
	EXPECT_EQ(EPOLLIN | EPOLLRDHUP, ev.events);
	close(ep);
}

TEST_F(poll, epoll_edge)
{
	struct epoll_event ev;
	char buf[16];
	int ep;

	ep = ep_add(self->s, EPOLLIN | EPOLLRDHUP | EPOLLET);
	ASSERT_GE(ep, 0);
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 100));

	ASSERT_EQ(4, send(self->c, "abcd", 4, 0));
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, 5000));
	EXPECT_EQ(EPOLLIN, ev.events);
	/* One event per arrival, even when not drained. */
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 200));
	ASSERT_EQ(4, send(self->c, "efgh", 4, 0));
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, 5000));
	EXPECT_EQ(EPOLLIN, ev.events);
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 200));
	ASSERT_EQ(8, rs_recv_all(self->s, buf, 8, 0));
	ASSERT_EQ(0, memcmp(buf, "abcdefgh", 8));
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 100));
	/* The FIN is an edge too. */
	ASSERT_EQ(0, shutdown(self->c, SHUT_WR));
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, 5000));
	EXPECT_EQ(EPOLLIN | EPOLLRDHUP, ev.events);
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 100));
	close(ep);
}

TEST_F_TIMEOUT(poll, epoll_edge_pollout, 60)
{
	struct epoll_event ev;
	struct later l = { };
	ssize_t total;
	int ep;

	ep = ep_add(self->c, EPOLLOUT | EPOLLET);
	ASSERT_GE(ep, 0);
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, 1000));
	EXPECT_EQ(EPOLLOUT, ev.events);
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 100));
	total = rs_fill_pipe(self->c, rs_key(0, 0, 31));
	ASSERT_GT(total, 0);
	/* Space coming back is a new edge. */
	l.drain = total;
	later_start(_metadata, &l, self->s, LATER_DRAIN, 200);
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, 10000));
	EXPECT_EQ(EPOLLOUT, ev.events);
	later_join(_metadata, &l);
	close(ep);
}

/* Ping-pong of sequence numbers between two epoll ET loops. */
struct pinger {
	int fd;
	bool first;		/* sends the first message */
	unsigned long count;
	unsigned long events;	/* epoll_wait returns */
	unsigned long empty;	/* of which found nothing to read */
	unsigned long done;
	int err;
	const char *what;
	pthread_t thr;
};

static void *pinger_fn(void *arg)
{
	struct pinger *p = arg;
	struct epoll_event ev;
	uint64_t buf[64], want = 0, next = 0;
	size_t have = 0;	/* bytes in buf */
	ssize_t n;
	int ep, ret;

	ep = ep_add(p->fd, EPOLLIN | EPOLLRDHUP | EPOLLET);
	if (ep < 0) {
		p->err = errno;
		p->what = "epoll";
		return NULL;
	}
	if (p->first) {
		if (send(p->fd, &next, 8, 0) != 8) {
			p->err = errno;
			p->what = "send";
			goto out;
		}
		next++;
	}
	while (p->done < p->count) {
		ret = epoll_wait(ep, &ev, 1, 5000);
		if (ret < 0 && errno == EINTR)
			continue;
		if (ret != 1) {
			p->err = ret ? errno : ETIMEDOUT;
			p->what = "epoll_wait (lost wakeup?)";
			break;
		}
		p->events++;
		/* Edge triggered: read until EAGAIN. */
		n = 0;
		for (;;) {
			ret = recv(p->fd, (char *)buf + have,
				   sizeof(buf) - have, MSG_DONTWAIT);
			if (ret < 0 && errno == EAGAIN)
				break;
			if (ret <= 0) {
				p->err = ret ? errno : EPIPE;
				p->what = "recv";
				goto out;
			}
			n += ret;
			have += ret;
			while (have >= 8) {
				if (buf[0] != want) {
					p->err = EBADMSG;
					p->what = "sequence";
					goto out;
				}
				want++;
				p->done++;
				have -= 8;
				memmove(buf, buf + 1, have);
				if (p->first && next >= p->count)
					continue;
				/* Answer (pinger) or echo (ponger). */
				if (send(p->fd, &next, 8, 0) != 8) {
					p->err = errno;
					p->what = "send";
					goto out;
				}
				next++;
			}
		}
		if (!n)
			p->empty++;
	}
out:
	close(ep);
	return NULL;
}

TEST_F_TIMEOUT(poll, epoll_et_pingpong, 300)
{
	unsigned long count = rs_env_ulong("RS_PINGPONG", 10000);
	struct pinger a = { .fd = self->c, .first = true, .count = count };
	struct pinger b = { .fd = self->s, .count = count };
	double t0 = rs_now(), dt;

	ASSERT_EQ(0, pthread_create(&a.thr, NULL, pinger_fn, &a));
	ASSERT_EQ(0, pthread_create(&b.thr, NULL, pinger_fn, &b));
	pthread_join(a.thr, NULL);
	if (a.err)
		shutdown(self->s, SHUT_RDWR);
	pthread_join(b.thr, NULL);
	dt = rs_now() - t0;
	EXPECT_EQ(0, a.err) TH_LOG("pinger: %s: %s after %lu", a.what,
				   strerror(a.err), a.done);
	EXPECT_EQ(0, b.err) TH_LOG("ponger: %s: %s after %lu", b.what,
				   strerror(b.err), b.done);
	EXPECT_EQ(count, a.done);
	EXPECT_EQ(count, b.done);
	rs_info("pingpong: %lu round trips in %.2f s (%.1f us each), %lu+%lu wakeups, %lu+%lu empty",
		count, dt, dt * 1e6 / count, a.events, b.events, a.empty,
		b.empty);
}

/* ---- O_ASYNC: SIGIO with POLL_OUT when room comes back ---- */

static volatile sig_atomic_t sigio_out;

static void sigio_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	if (si->si_code == POLL_OUT)
		sigio_out++;
}

/*
 * A writer that found the pipe full and asked for SIGIO gets one with
 * POLL_OUT once the peer drains it, as from TCP (sk_stream_write_space()
 * via SOCKWQ_ASYNC_NOSPACE).
 */
TEST_F_TIMEOUT(poll, sigio_pollout, 60)
{
	struct sigaction sa = { .sa_sigaction = sigio_handler,
				.sa_flags = SA_SIGINFO | SA_RESTART };
	struct sigaction old;
	ssize_t total, got;
	char *buf;
	double end;

	ASSERT_EQ(0, sigaction(SIGUSR2, &sa, &old));
	ASSERT_EQ(0, fcntl(self->c, F_SETOWN, getpid()));
	ASSERT_EQ(0, fcntl(self->c, F_SETSIG, SIGUSR2));
	ASSERT_EQ(0, fcntl(self->c, F_SETFL,
			   fcntl(self->c, F_GETFL) | O_ASYNC));
	total = rs_fill_pipe(self->c, rs_key(0, 0, 32));
	ASSERT_GT(total, 0);
	sigio_out = 0;
	buf = malloc(total);
	ASSERT_NE(NULL, buf);
	got = rs_recv_all(self->s, buf, total, 0);
	free(buf);
	ASSERT_EQ(total, got);
	end = rs_now() + 10;
	while (!sigio_out && rs_now() < end)
		rs_msleep(10);
	EXPECT_LT(0, sigio_out) TH_LOG("no SIGIO with POLL_OUT after the drain");
	fcntl(self->c, F_SETFL, fcntl(self->c, F_GETFL) & ~O_ASYNC);
	sigaction(SIGUSR2, &old, NULL);
}

/* ---- writability threshold ---- */

/* The send ring of fd and the peer's stream buffer, from RDMASTREAM_INFO. */
static void rings(int fd, uint32_t *tx, uint32_t *peer)
{
	struct rdmastream_info i = { 0 };
	socklen_t len = sizeof(i);

	if (!rs.tcp && !getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &i,
				   &len)) {
		*tx = i.rsi_tx_ring;
		*peer = i.rsi_peer_ring;
		return;
	}
	*tx = 256 * RS_KIB;	/* what the options below ask for */
	*peer = 64 * RS_KIB;
}

/* Wait until fd's unsent+unacknowledged bytes dropped to at most want. */
static int wait_outq(int fd, int want, int ms)
{
	double end = rs_now() + ms / 1000.0;
	int q = -1;

	while (!ioctl(fd, SIOCOUTQ, &q) && q > want && rs_now() < end)
		rs_msleep(5);
	return q;
}

TEST_F_TIMEOUT(poll, pollout_threshold, 60)
{
	uint64_t key = rs_key(0, 0, 32);
	struct sockaddr_in sin;
	struct later l = { };
	uint32_t tx, peer, little;
	int lfd, c, s, q0, q;
	ssize_t total;
	char *buf;

	RS_SKIP_FB("the send ring's threshold");
	/*
	 * A large send ring (256 KiB) in front of a small stream buffer
	 * (64 KiB): filled, then the reader frees a little, less than a
	 * third of the send ring (not writable), then more (writable, and
	 * a blocked poll wakes).
	 */
	lfd = rs_socket(0);
	ASSERT_GE(lfd, 0);
	ASSERT_EQ(0, rs_setint(lfd, SOL_SOCKET, SO_RCVBUF, 32 * RS_KIB));
	rs_sin(&sin, rs.addr, 0);
	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&sin, sizeof(sin)));
	ASSERT_EQ(0, listen(lfd, 1));
	ASSERT_EQ(0, getsockname(lfd, (struct sockaddr *)&sin,
				 &(socklen_t){ sizeof(sin) }));
	c = rs_socket(0);
	ASSERT_GE(c, 0);
	ASSERT_EQ(0, rs_setint(c, SOL_SOCKET, SO_SNDBUF, 128 * RS_KIB));
	ASSERT_EQ(0, connect(c, (struct sockaddr *)&sin, sizeof(sin)));
	s = rs_accept(_metadata, lfd);
	close(lfd);
	rs_send_pat(_metadata, c, 1, key, 0);
	rs_recv_pat(_metadata, s, 1, key, 0);
	rings(c, &tx, &peer);
	rs_info("send ring %u, peer's stream buffer %u", tx, peer);
	/* a window update goes out once a quarter of the buffer is read */
	little = peer / 4 + 4096;
	ASSERT_LT(little + peer / 8, tx / 3);

	total = rs_fill_pipe(c, key ^ 1);
	ASSERT_GT(total, 0);
	EXPECT_EQ(0, rs_poll(c, POLLOUT, 200)) TH_LOG("full: POLLOUT");
	ASSERT_EQ(0, ioctl(c, SIOCOUTQ, &q0));

	buf = malloc(little);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ((ssize_t)little, rs_recv_all(s, buf, little, 0));
	free(buf);
	/* the window opened and the send ring gave back what went out */
	q = wait_outq(c, q0 - (int)little, 3000);
	if (!rs.tcp) {
		EXPECT_LE(q, q0 - (int)little)
			TH_LOG("send ring still full: SIOCOUTQ %d", q);
	}
	rs_msleep(100);
	EXPECT_EQ(0, rs_poll(c, POLLOUT, 200))
		TH_LOG("POLLOUT with %d of %u bytes free", (int)tx - q, tx);

	/* enough for a third of the ring: a blocked poll wakes up */
	l.drain = tx / 2;
	later_start(_metadata, &l, s, LATER_DRAIN, 200);
	EXPECT_EQ(POLLOUT, rs_poll(c, POLLOUT, 10000));
	later_join(_metadata, &l);
	ASSERT_EQ(0, ioctl(c, SIOCOUTQ, &q));
	if (!rs.tcp) {
		EXPECT_GE(3 * (int64_t)(tx - q), (int64_t)tx)
			TH_LOG("POLLOUT with %d of %u bytes free", (int)tx - q,
			       tx);
	}
	close(c);
	close(s);
}

/* Reads total bytes of pattern key with recv()s of len. */
struct bulk_reader {
	int fd;
	size_t len;
	unsigned int pause_ms;	/* after each recv */
	uint64_t total, key, done;
	int err;
	bool mismatch;
	pthread_t thr;
};

static void *bulk_reader_fn(void *arg)
{
	struct bulk_reader *r = arg;
	char *buf = malloc(r->len);
	ssize_t n;

	while (buf && r->done < r->total) {
		n = recv(r->fd, buf, r->len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r->err = n ? errno : EPIPE;
			break;
		}
		if (rs_pat_check(buf, n, r->key, r->done) != (size_t)n) {
			r->mismatch = true;
			break;
		}
		r->done += n;
		rs_msleep(r->pause_ms);
	}
	free(buf);
	return NULL;
}

TEST_F_TIMEOUT(poll, direct_only_nonblocking_no_busy_loop, 120)
{
	struct bulk_reader r = {
		.fd = self->s, .len = 256 * RS_KIB, .total = 4 * RS_MIB,
		.key = rs_key(0, 0, 33), .pause_ms = 5,
	};
	unsigned long wakeups = 0, sends = 0, spins = 0;
	struct rdmastream_info i = { 0 };
	struct epoll_event ev;
	char *buf = malloc(64 * RS_KIB);
	uint64_t off = 0;
	bool polled = false;
	ssize_t n;
	int ep;

	/*
	 * A direct-only sender, non-blocking, driven by epoll; the reader's
	 * large blocking recv()s advertise now and then, and it pauses so
	 * that the send ring fills. Every EPOLLOUT must be followed by a
	 * send that makes progress: poll and send agree.
	 */
	ASSERT_NE(NULL, buf);
	if (!rs.tcp) {
		ASSERT_EQ(0, rs_setint(self->c, SOL_RDMASTREAM,
				       RDMASTREAM_POLICY,
				       RDMASTREAM_POLICY_DIRECT_ONLY));
	}
	ASSERT_EQ(0, rs_set_nonblock(self->c, true));
	ep = ep_add(self->c, EPOLLOUT);
	ASSERT_GE(ep, 0);
	ASSERT_EQ(0, pthread_create(&r.thr, NULL, bulk_reader_fn, &r));
	while (off < r.total && spins < 100) {
		n = r.total - off < 64 * RS_KIB ? r.total - off : 64 * RS_KIB;
		rs_pat_fill(buf, n, r.key, off);
		n = send(self->c, buf, n, 0);
		if (n > 0) {
			off += n;
			sends++;
			polled = false;
			continue;
		}
		ASSERT_EQ(EAGAIN, errno) TH_LOG("send: %s", strerror(errno));
		if (polled)
			spins++;	/* EPOLLOUT, then EAGAIN */
		ASSERT_EQ(1, epoll_wait(ep, &ev, 1, 10000))
			TH_LOG("no EPOLLOUT within 10 s after %llu bytes",
			       (unsigned long long)off);
		wakeups++;
		polled = true;
	}
	if (off < r.total)
		shutdown(self->c, SHUT_WR);	/* the reader gets EOF */
	pthread_join(r.thr, NULL);
	close(ep);
	if (!rs.tcp) {
		socklen_t len = sizeof(i);

		ASSERT_EQ(0, getsockopt(self->c, SOL_RDMASTREAM,
					RDMASTREAM_INFO, &i, &len));
	}
	rs_info("%lu sends, %lu EPOLLOUT wake-ups, %lu followed by EAGAIN; %llu bytes direct, %llu indirect",
		sends, wakeups, spins,
		(unsigned long long)i.rsi_direct_bytes_sent,
		(unsigned long long)i.rsi_indirect_bytes_sent);
	EXPECT_EQ(0, spins) TH_LOG("EPOLLOUT without a send that goes");
	EXPECT_EQ(0, r.err) TH_LOG("recv: %s", strerror(r.err));
	EXPECT_FALSE(r.mismatch);
	EXPECT_EQ(r.total, r.done);
	free(buf);
}

/* ---- listening sockets ---- */

TEST(listener_pollin)
{
	struct sockaddr_in sin;
	struct epoll_event ev;
	int lfd, c, s, ep;

	rs_watchdog(60);
	lfd = rs_listener(_metadata, &sin);
	EXPECT_EQ(0, rs_poll(lfd, POLLIN | POLLOUT, 100));
	ep = ep_add(lfd, EPOLLIN);
	ASSERT_GE(ep, 0);

	c = rs_connect(_metadata, &sin);
	EXPECT_EQ(POLLIN, rs_poll(lfd, POLLIN | POLLOUT, 5000));
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, 5000));
	EXPECT_EQ(EPOLLIN, ev.events);
	s = rs_accept(_metadata, lfd);
	/* Queue empty again. */
	EXPECT_EQ(0, rs_poll(lfd, POLLIN | POLLOUT, 100));
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 100));
	close(c);
	close(s);
	close(ep);
	close(lfd);
}

struct late_connect {
	struct sockaddr_in sin;
	int fd;
	pthread_t thr;
};

static void *late_connect_fn(void *arg)
{
	struct late_connect *l = arg;

	rs_msleep(300);
	l->fd = rs_socket(0);
	if (l->fd >= 0 && connect(l->fd, (struct sockaddr *)&l->sin,
				  sizeof(l->sin))) {
		close(l->fd);
		l->fd = -1;
	}
	return NULL;
}

TEST(listener_wakes_poll)
{
	struct late_connect l = { };
	double t0;
	int lfd, s;

	rs_watchdog(60);
	lfd = rs_listener(_metadata, &l.sin);
	ASSERT_EQ(0, pthread_create(&l.thr, NULL, late_connect_fn, &l));
	t0 = rs_now();
	EXPECT_EQ(POLLIN, rs_poll(lfd, POLLIN, 5000));
	EXPECT_GE(rs_now() - t0, 0.25);
	pthread_join(l.thr, NULL);
	ASSERT_GE(l.fd, 0);
	s = rs_accept(_metadata, lfd);
	close(s);
	close(l.fd);
	close(lfd);
}

TEST_HARNESS_MAIN
