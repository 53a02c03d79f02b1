// SPDX-License-Identifier: GPL-2.0
/*
 * Socket API of AF_RDMASTREAM: socket(), bind(), listen(), accept(),
 * connect(), getsockname() and getpeername(), and their error returns.
 * Every expectation is what TCP does (check with RS_FAMILY=tcp).
 */
#include "rs_common.h"

#include <ifaddrs.h>
#include <linux/io_uring.h>
#include <net/if.h>
#include <sched.h>
#include <sys/syscall.h>

static unsigned short free_port(struct __test_metadata *_metadata)
{
	struct sockaddr_in sin;
	int fd;

	fd = rs_bound(_metadata, 0, &sin);
	close(fd);
	return ntohs(sin.sin_port);
}

/* Exchange a few bytes both ways over a connected pair. */
static void ping(struct __test_metadata *_metadata, int a, int b)
{
	char buf[16];

	ASSERT_EQ(5, send(a, "hello", 5, 0));
	ASSERT_EQ(5, rs_recv_all(b, buf, 5, 0));
	ASSERT_EQ(0, memcmp(buf, "hello", 5));
	ASSERT_EQ(3, send(b, "bye", 3, 0));
	ASSERT_EQ(3, rs_recv_all(a, buf, 3, 0));
	ASSERT_EQ(0, memcmp(buf, "bye", 3));
}

static int local_port_range(int *lo, int *hi)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	int ret;

	if (!f)
		return -1;
	ret = fscanf(f, "%d %d", lo, hi) == 2 ? 0 : -1;
	fclose(f);
	return ret;
}

/* ---- socket() ---- */

TEST(socket_stream)
{
	int fd;

	/*
	 * Protocol 0 always means "the" stream protocol of the family (of
	 * AF_INET: TCP, so the IPPROTO route names its number).
	 */
	fd = socket(rs.family, SOCK_STREAM, rs.ip ? rs.protocol : 0);
	ASSERT_GE(fd, 0) TH_LOG("socket: %s", strerror(errno));

	EXPECT_EQ(SOCK_STREAM, rs_getint(fd, SOL_SOCKET, SO_TYPE));
	EXPECT_EQ(rs.family, rs_getint(fd, SOL_SOCKET, SO_DOMAIN));
	/* the protocol it was given (TCP's for 0) */
	EXPECT_EQ(rs.ip ? rs.protocol : 0,
		  rs_getint(fd, SOL_SOCKET, SO_PROTOCOL));
	EXPECT_EQ(0, rs_getint(fd, SOL_SOCKET, SO_ACCEPTCONN));
	EXPECT_EQ(0, rs_sock_error(fd));
	EXPECT_EQ(0, fcntl(fd, F_GETFL) & O_NONBLOCK);
	EXPECT_EQ(0, fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
}

/* An AF_INET protocol of type SOCK_SEQPACKET exists (SCTP, loaded). */
static bool inet_has_seqpacket(void)
{
	char line[256];
	bool found = false;
	FILE *f = fopen("/proc/net/protocols", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "SCTP ", 5))
			found = true;
	if (f)
		fclose(f);
	return found;
}

TEST(socket_bad_type)
{
	static const int types[] = { SOCK_DGRAM, SOCK_SEQPACKET };
	unsigned int i;
	int fd;

	/*
	 * A family with no socket of that type says ESOCKTNOSUPPORT: AF_INET
	 * for SOCK_SEQPACKET (without SCTP), rdmastream for all but
	 * SOCK_STREAM. AF_INET has datagram sockets, just not TCP ones:
	 * SOCK_DGRAM with IPPROTO_TCP is EPROTONOSUPPORT; so is
	 * SOCK_SEQPACKET once SCTP is loaded (a fuzzer's socket() may
	 * have autoloaded it earlier in the run).
	 */
	for (i = 0; i < ARRAY_SIZE(types); i++) {
		bool other = types[i] == SOCK_DGRAM || inet_has_seqpacket();
		int want = rs.ip && other ? EPROTONOSUPPORT : ESOCKTNOSUPPORT;

		fd = socket(rs.family, types[i], rs.protocol);
		EXPECT_EQ(-1, fd) {
			TH_LOG("type %d was accepted", types[i]);
			close(fd);
			continue;
		}
		EXPECT_EQ(want, errno)
			TH_LOG("type %d: %s", types[i], strerror(errno));
	}
}

TEST(socket_bad_protocol)
{
	static const int protos[] = { IPPROTO_UDP, 200 };
	unsigned int i;
	int fd;

	for (i = 0; i < ARRAY_SIZE(protos); i++) {
		fd = socket(rs.family, SOCK_STREAM, protos[i]);
		EXPECT_EQ(-1, fd) {
			TH_LOG("protocol %d was accepted", protos[i]);
			close(fd);
			continue;
		}
		EXPECT_EQ(EPROTONOSUPPORT, errno)
			TH_LOG("protocol %d: %s", protos[i], strerror(errno));
	}
}

TEST(socket_flags)
{
	struct sockaddr_in sin;
	int fd;

	fd = rs_socket(SOCK_NONBLOCK | SOCK_CLOEXEC);
	ASSERT_GE(fd, 0) TH_LOG("socket: %s", strerror(errno));
	EXPECT_EQ(O_NONBLOCK, fcntl(fd, F_GETFL) & O_NONBLOCK);
	EXPECT_EQ(FD_CLOEXEC, fcntl(fd, F_GETFD) & FD_CLOEXEC);

	/* ...and the socket really is non-blocking. */
	rs_sin(&sin, rs.addr, 0);
	ASSERT_EQ(0, bind(fd, (struct sockaddr *)&sin, sizeof(sin)));
	ASSERT_EQ(0, listen(fd, 1));
	EXPECT_EQ(-1, accept(fd, NULL, NULL));
	EXPECT_EQ(EAGAIN, errno);
	close(fd);
}

/* ---- bind() ---- */

FIXTURE(bind)
{
	int fd;
};

FIXTURE_SETUP(bind)
{
	rs_watchdog(60);
	self->fd = rs_socket(0);
	ASSERT_GE(self->fd, 0) TH_LOG("socket: %s", strerror(errno));
}

FIXTURE_TEARDOWN(bind)
{
	close(self->fd);
}

TEST_F(bind, explicit_port)
{
	struct sockaddr_in sin, got;
	socklen_t len = sizeof(got);
	unsigned short port;
	int tries, ret = -1;

	/* A port that was free a moment ago; retry if someone took it. */
	for (tries = 0; tries < 5; tries++) {
		port = free_port(_metadata);
		rs_sin(&sin, rs.addr, port);
		ret = bind(self->fd, (struct sockaddr *)&sin, sizeof(sin));
		if (!ret || errno != EADDRINUSE)
			break;
	}
	ASSERT_EQ(0, ret) TH_LOG("bind port %u: %s", port, strerror(errno));
	ASSERT_EQ(0, getsockname(self->fd, (struct sockaddr *)&got, &len));
	EXPECT_EQ(sizeof(got), len);
	EXPECT_TRUE(rs_sin_eq(&sin, &got));
}

TEST_F(bind, ephemeral)
{
	struct sockaddr_in sin, got;
	socklen_t len = sizeof(got);
	int lo, hi, fd2;

	rs_sin(&sin, rs.addr, 0);
	ASSERT_EQ(0, bind(self->fd, (struct sockaddr *)&sin, sizeof(sin)))
		TH_LOG("bind: %s", strerror(errno));
	ASSERT_EQ(0, getsockname(self->fd, (struct sockaddr *)&got, &len));
	EXPECT_EQ(sizeof(got), len);
	EXPECT_EQ(AF_INET, got.sin_family);
	EXPECT_EQ(rs.addr.s_addr, got.sin_addr.s_addr);
	ASSERT_NE(0, got.sin_port);
	if (!local_port_range(&lo, &hi)) {
		EXPECT_GE(ntohs(got.sin_port), lo);
		EXPECT_LE(ntohs(got.sin_port), hi);
	}

	/* A second ephemeral bind gets another port. */
	fd2 = rs_socket(0);
	ASSERT_GE(fd2, 0);
	ASSERT_EQ(0, bind(fd2, (struct sockaddr *)&sin, sizeof(sin)));
	len = sizeof(sin);
	ASSERT_EQ(0, getsockname(fd2, (struct sockaddr *)&sin, &len));
	EXPECT_NE(got.sin_port, sin.sin_port);
	close(fd2);
}

static void addrinuse(struct __test_metadata *_metadata, int fd,
		      bool do_listen, bool wildcard)
{
	struct sockaddr_in sin, sin2;
	socklen_t len = sizeof(sin);
	int fd2;

	rs_sin(&sin, rs.addr, 0);
	ASSERT_EQ(0, bind(fd, (struct sockaddr *)&sin, sizeof(sin)));
	ASSERT_EQ(0, getsockname(fd, (struct sockaddr *)&sin, &len));
	if (do_listen)
		ASSERT_EQ(0, listen(fd, 1));

	fd2 = rs_socket(0);
	ASSERT_GE(fd2, 0);
	sin2 = sin;
	if (wildcard)
		sin2.sin_addr.s_addr = htonl(INADDR_ANY);
	EXPECT_EQ(-1, bind(fd2, (struct sockaddr *)&sin2, sizeof(sin2)));
	EXPECT_EQ(EADDRINUSE, errno);
	close(fd2);
}

TEST_F(bind, addrinuse_bound)
{
	addrinuse(_metadata, self->fd, false, false);
}

TEST_F(bind, addrinuse_listening)
{
	addrinuse(_metadata, self->fd, true, false);
}

TEST_F(bind, addrinuse_wildcard)
{
	addrinuse(_metadata, self->fd, true, true);
}

TEST_F(bind, reuseaddr_after_close)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int lfd, c, s;

	/* A listener with a connection that the server closes first. */
	ASSERT_EQ(0, rs_setint(self->fd, SOL_SOCKET, SO_REUSEADDR, 1));
	EXPECT_EQ(1, rs_getint(self->fd, SOL_SOCKET, SO_REUSEADDR));
	rs_sin(&sin, rs.addr, 0);
	ASSERT_EQ(0, bind(self->fd, (struct sockaddr *)&sin, sizeof(sin)));
	ASSERT_EQ(0, getsockname(self->fd, (struct sockaddr *)&sin, &len));
	ASSERT_EQ(0, listen(self->fd, 4));
	c = rs_connect(_metadata, &sin);
	s = rs_accept(_metadata, self->fd);
	ping(_metadata, c, s);
	close(s);
	ASSERT_EQ(0, rs_recv_all(c, &len, 1, 0));
	close(c);
	close(self->fd);
	self->fd = -1;

	/* The port can be bound and listened on again right away. */
	lfd = rs_socket(0);
	ASSERT_GE(lfd, 0);
	ASSERT_EQ(0, rs_setint(lfd, SOL_SOCKET, SO_REUSEADDR, 1));
	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&sin, sizeof(sin)))
		TH_LOG("rebind: %s", strerror(errno));
	ASSERT_EQ(0, listen(lfd, 4));
	c = rs_connect(_metadata, &sin);
	s = rs_accept(_metadata, lfd);
	ping(_metadata, c, s);
	close(c);
	close(s);
	close(lfd);
}

TEST_F(bind, reuseaddr_no_second_listener)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd2, ret;

	ASSERT_EQ(0, rs_setint(self->fd, SOL_SOCKET, SO_REUSEADDR, 1));
	rs_sin(&sin, rs.addr, 0);
	ASSERT_EQ(0, bind(self->fd, (struct sockaddr *)&sin, sizeof(sin)));
	ASSERT_EQ(0, getsockname(self->fd, (struct sockaddr *)&sin, &len));
	ASSERT_EQ(0, listen(self->fd, 4));

	/*
	 * SO_REUSEADDR does not allow two listeners on one address. TCP
	 * refuses the bind; refusing the listen instead is tolerated.
	 */
	fd2 = rs_socket(0);
	ASSERT_GE(fd2, 0);
	ASSERT_EQ(0, rs_setint(fd2, SOL_SOCKET, SO_REUSEADDR, 1));
	ret = bind(fd2, (struct sockaddr *)&sin, sizeof(sin));
	if (!ret) {
		TH_LOG("second bind succeeded, expecting listen to fail");
		ret = listen(fd2, 4);
	}
	EXPECT_EQ(-1, ret);
	EXPECT_EQ(EADDRINUSE, errno);
	close(fd2);
}

TEST_F(bind, short_addrlen)
{
	struct sockaddr_in sin;

	rs_sin(&sin, rs.addr, 0);
	EXPECT_EQ(-1, bind(self->fd, (struct sockaddr *)&sin, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, bind(self->fd, (struct sockaddr *)&sin,
			   sizeof(sa_family_t)));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, bind(self->fd, (struct sockaddr *)&sin, 8));
	EXPECT_EQ(EINVAL, errno);
	/* Nothing was bound: a correct bind still works. */
	EXPECT_EQ(0, bind(self->fd, (struct sockaddr *)&sin, sizeof(sin)));
}

TEST_F(bind, short_addrlen6)
{
	struct sockaddr_in6 sin6 = {
		.sin6_family = AF_INET6,
		.sin6_addr = IN6ADDR_LOOPBACK_INIT,
	};
	int fd6;

	/* An AF_INET6 address in a sockaddr_in sized buffer. */
	fd6 = rs_socket6(0);
	ASSERT_GE(fd6, 0);
	EXPECT_EQ(-1, bind(fd6, (struct sockaddr *)&sin6,
			   sizeof(struct sockaddr_in)));
	EXPECT_EQ(EINVAL, errno);
	close(fd6);
}

TEST_F(bind, wrong_family)
{
	static const sa_family_t fams[] = { AF_UNIX, AF_PACKET };
	struct sockaddr_in sin;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(fams); i++) {
		rs_sin(&sin, rs.addr, 0);
		sin.sin_family = fams[i];
		EXPECT_EQ(-1, bind(self->fd, (struct sockaddr *)&sin,
				   sizeof(sin)));
		EXPECT_EQ(EAFNOSUPPORT, errno)
			TH_LOG("family %d: %s", fams[i], strerror(errno));
	}
}

TEST_F(bind, twice)
{
	struct sockaddr_in sin, got, got2;
	socklen_t len = sizeof(got);

	rs_sin(&sin, rs.addr, 0);
	ASSERT_EQ(0, bind(self->fd, (struct sockaddr *)&sin, sizeof(sin)));
	ASSERT_EQ(0, getsockname(self->fd, (struct sockaddr *)&got, &len));
	EXPECT_EQ(-1, bind(self->fd, (struct sockaddr *)&sin, sizeof(sin)));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, bind(self->fd, (struct sockaddr *)&got, sizeof(got)));
	EXPECT_EQ(EINVAL, errno);
	len = sizeof(got2);
	ASSERT_EQ(0, getsockname(self->fd, (struct sockaddr *)&got2, &len));
	EXPECT_TRUE(rs_sin_eq(&got, &got2));
}

TEST_F(bind, after_listen)
{
	struct sockaddr_in sin;

	ASSERT_EQ(0, listen(self->fd, 1));
	rs_sin(&sin, rs.addr, 0);
	EXPECT_EQ(-1, bind(self->fd, (struct sockaddr *)&sin, sizeof(sin)));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(bind, nonlocal)
{
	struct sockaddr_in sin;

	rs_sin(&sin, rs_nohost_addr(), 0);
	EXPECT_EQ(-1, bind(self->fd, (struct sockaddr *)&sin, sizeof(sin)));
	EXPECT_EQ(EADDRNOTAVAIL, errno);
	rs_sin(&sin, rs_inaddr(RS_NOROUTE_ADDR), 0);
	EXPECT_EQ(-1, bind(self->fd, (struct sockaddr *)&sin, sizeof(sin)));
	EXPECT_EQ(EADDRNOTAVAIL, errno);
	/* The failures left the socket unbound. */
	rs_sin(&sin, rs.addr, 0);
	EXPECT_EQ(0, bind(self->fd, (struct sockaddr *)&sin, sizeof(sin)));
}

TEST_F(bind, wildcard_listen)
{
	struct sockaddr_in sin, name, cname;
	socklen_t len = sizeof(sin);
	int c, s;

	rs_sin(&sin, rs.addr, 0);
	sin.sin_addr.s_addr = htonl(INADDR_ANY);
	ASSERT_EQ(0, bind(self->fd, (struct sockaddr *)&sin, sizeof(sin)))
		TH_LOG("bind 0.0.0.0: %s", strerror(errno));
	ASSERT_EQ(0, listen(self->fd, 4));
	ASSERT_EQ(0, getsockname(self->fd, (struct sockaddr *)&sin, &len));
	EXPECT_EQ(htonl(INADDR_ANY), sin.sin_addr.s_addr);
	ASSERT_NE(0, sin.sin_port);

	/* Reached through the RDMA address; accepted side names it. */
	sin.sin_addr = rs.addr;
	c = rs_connect(_metadata, &sin);
	s = rs_accept(_metadata, self->fd);
	len = sizeof(name);
	ASSERT_EQ(0, getsockname(s, (struct sockaddr *)&name, &len));
	EXPECT_TRUE(rs_sin_eq(&sin, &name));
	len = sizeof(cname);
	ASSERT_EQ(0, getpeername(c, (struct sockaddr *)&cname, &len));
	EXPECT_TRUE(rs_sin_eq(&sin, &cname));
	ping(_metadata, c, s);
	close(c);
	close(s);
}

/* ---- listen() ---- */

FIXTURE(listen)
{
	int fd;
};

FIXTURE_SETUP(listen)
{
	rs_watchdog(60);
	self->fd = rs_socket(0);
	ASSERT_GE(self->fd, 0) TH_LOG("socket: %s", strerror(errno));
}

FIXTURE_TEARDOWN(listen)
{
	close(self->fd);
}

TEST_F(listen, unbound_autobind)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in dst;
	socklen_t len = sizeof(ss);
	int c, s;

	/* listen() without bind() picks an ephemeral port, any address. */
	ASSERT_EQ(0, listen(self->fd, 4)) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(0, getsockname(self->fd, (struct sockaddr *)&ss, &len));
	ASSERT_NE(0, sin->sin_port);
	if (sin->sin_family == AF_INET) {
		EXPECT_EQ(htonl(INADDR_ANY), sin->sin_addr.s_addr);
	} else {
		EXPECT_EQ(AF_INET6, sin->sin_family);
	}
	EXPECT_EQ(1, rs_getint(self->fd, SOL_SOCKET, SO_ACCEPTCONN));

	rs_sin(&dst, rs.addr, ntohs(sin->sin_port));
	c = rs_connect(_metadata, &dst);
	s = rs_accept(_metadata, self->fd);
	ping(_metadata, c, s);
	close(c);
	close(s);
}

TEST_F(listen, twice)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int c, s;

	rs_sin(&sin, rs.addr, 0);
	ASSERT_EQ(0, bind(self->fd, (struct sockaddr *)&sin, sizeof(sin)));
	ASSERT_EQ(0, listen(self->fd, 1));
	/* A second listen() only changes the backlog. */
	ASSERT_EQ(0, listen(self->fd, 8));
	ASSERT_EQ(0, getsockname(self->fd, (struct sockaddr *)&sin, &len));
	c = rs_connect(_metadata, &sin);
	s = rs_accept(_metadata, self->fd);
	ping(_metadata, c, s);
	close(c);
	close(s);
}

static void backlog_fill(struct __test_metadata *_metadata, int lfd,
			 int backlog, int nconn)
{
	struct sockaddr_in sin, name, peer;
	socklen_t len = sizeof(sin);
	int c[16], s, i, j;
	bool seen[16] = { };

	rs_sin(&sin, rs.addr, 0);
	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&sin, sizeof(sin)));
	ASSERT_EQ(0, listen(lfd, backlog));
	ASSERT_EQ(0, getsockname(lfd, (struct sockaddr *)&sin, &len));

	/* nconn connections complete before any is accepted. */
	for (i = 0; i < nconn; i++) {
		c[i] = rs_connect(_metadata, &sin);
		ASSERT_EQ(1, send(c[i], &i, 1, 0));
	}
	/* Each accepted socket is one of them, exactly once. */
	for (i = 0; i < nconn; i++) {
		len = sizeof(peer);
		s = accept(lfd, (struct sockaddr *)&peer, &len);
		ASSERT_GE(s, 0) TH_LOG("accept %d: %s", i, strerror(errno));
		j = 0;
		ASSERT_EQ(1, rs_recv_all(s, &j, 1, 0));
		ASSERT_LT(j, nconn);
		EXPECT_FALSE(seen[j]);
		seen[j] = true;
		len = sizeof(name);
		ASSERT_EQ(0, getsockname(c[j], (struct sockaddr *)&name, &len));
		EXPECT_TRUE(rs_sin_eq(&name, &peer));
		ASSERT_EQ(1, send(s, &j, 1, 0));
		ASSERT_EQ(1, rs_recv_all(c[j], &j, 1, 0));
		close(s);
	}
	for (i = 0; i < nconn; i++)
		close(c[i]);
}

TEST_F(listen, backlog_small)
{
	/* Linux queues backlog + 1; ask only for what any stack gives. */
	backlog_fill(_metadata, self->fd, 2, 2);
}

TEST_F(listen, backlog_zero)
{
	backlog_fill(_metadata, self->fd, 0, 1);
}

TEST_F(listen, backlog_queue)
{
	backlog_fill(_metadata, self->fd, 16, 12);
}

TEST_F(listen, on_connected)
{
	int c, s;

	rs_pair(_metadata, &c, &s);
	EXPECT_EQ(-1, listen(c, 4));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, listen(s, 4));
	EXPECT_EQ(EINVAL, errno);
	/* The connection is unharmed. */
	ping(_metadata, c, s);
	close(c);
	close(s);
}

TEST_F(listen, io_on_listener)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	char buf[8];

	rs_sin(&sin, rs.addr, 0);
	ASSERT_EQ(0, bind(self->fd, (struct sockaddr *)&sin, sizeof(sin)));
	ASSERT_EQ(0, listen(self->fd, 1));
	EXPECT_EQ(1, rs_getint(self->fd, SOL_SOCKET, SO_ACCEPTCONN));
	EXPECT_EQ(-1, recv(self->fd, buf, sizeof(buf), MSG_DONTWAIT));
	EXPECT_EQ(ENOTCONN, errno);
	EXPECT_EQ(-1, recv(self->fd, buf, sizeof(buf), 0));
	EXPECT_EQ(ENOTCONN, errno);
	EXPECT_EQ(-1, send(self->fd, "x", 1, MSG_NOSIGNAL));
	EXPECT_EQ(EPIPE, errno);
	EXPECT_EQ(-1, getpeername(self->fd, (struct sockaddr *)&sin, &len));
	EXPECT_EQ(ENOTCONN, errno);
}

/* ---- accept() ---- */

FIXTURE(accept)
{
	int lfd;
	struct sockaddr_in sin;
};

FIXTURE_SETUP(accept)
{
	rs_watchdog(60);
	self->lfd = rs_listener(_metadata, &self->sin);
}

FIXTURE_TEARDOWN(accept)
{
	close(self->lfd);
}

struct delayed_connect {
	struct sockaddr_in sin;
	unsigned int delay_ms;
	int fd;
	int err;
	pthread_t thr;
};

static void *delayed_connect_fn(void *arg)
{
	struct delayed_connect *d = arg;

	rs_msleep(d->delay_ms);
	d->fd = rs_socket(0);
	if (d->fd < 0) {
		d->err = errno;
		return NULL;
	}
	if (connect(d->fd, (struct sockaddr *)&d->sin, sizeof(d->sin)))
		d->err = errno;
	return NULL;
}

TEST_F(accept, blocking)
{
	struct delayed_connect d = {
		.sin = self->sin,
		.delay_ms = 300,
	};
	double t0;
	int s;

	ASSERT_EQ(0, pthread_create(&d.thr, NULL, delayed_connect_fn, &d));
	t0 = rs_now();
	s = accept(self->lfd, NULL, NULL);
	ASSERT_GE(s, 0) TH_LOG("accept: %s", strerror(errno));
	EXPECT_GE(rs_now() - t0, 0.2);
	pthread_join(d.thr, NULL);
	ASSERT_EQ(0, d.err) TH_LOG("connect: %s", strerror(d.err));

	/* Plain accept(): blocking, no close-on-exec. */
	EXPECT_EQ(0, fcntl(s, F_GETFL) & O_NONBLOCK);
	EXPECT_EQ(0, fcntl(s, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(0, rs_getint(s, SOL_SOCKET, SO_ACCEPTCONN));
	EXPECT_EQ(SOCK_STREAM, rs_getint(s, SOL_SOCKET, SO_TYPE));
	EXPECT_EQ(rs.family, rs_getint(s, SOL_SOCKET, SO_DOMAIN));
	ping(_metadata, d.fd, s);
	close(s);
	close(d.fd);
}

TEST_F(accept, nonblock_empty)
{
	struct sockaddr_in sin;
	int c, s;

	ASSERT_EQ(0, rs_set_nonblock(self->lfd, true));
	EXPECT_EQ(-1, accept(self->lfd, NULL, NULL));
	EXPECT_EQ(EAGAIN, errno);
	EXPECT_EQ(-1, accept4(self->lfd, NULL, NULL, SOCK_CLOEXEC));
	EXPECT_EQ(EAGAIN, errno);

	sin = self->sin;
	c = rs_connect(_metadata, &sin);
	ASSERT_EQ(POLLIN, rs_poll(self->lfd, POLLIN, 10000));
	s = accept(self->lfd, NULL, NULL);
	ASSERT_GE(s, 0) TH_LOG("accept: %s", strerror(errno));
	/* O_NONBLOCK of the listener is not inherited. */
	EXPECT_EQ(0, fcntl(s, F_GETFL) & O_NONBLOCK);
	EXPECT_EQ(-1, accept(self->lfd, NULL, NULL));
	EXPECT_EQ(EAGAIN, errno);
	ping(_metadata, c, s);
	close(c);
	close(s);
}

TEST_F(accept, accept4_flags)
{
	char buf[4];
	int c, s;

	c = rs_connect(_metadata, &self->sin);
	EXPECT_EQ(-1, accept4(self->lfd, NULL, NULL, 0x1));
	EXPECT_EQ(EINVAL, errno);
	s = accept4(self->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	ASSERT_GE(s, 0) TH_LOG("accept4: %s", strerror(errno));
	EXPECT_EQ(O_NONBLOCK, fcntl(s, F_GETFL) & O_NONBLOCK);
	EXPECT_EQ(FD_CLOEXEC, fcntl(s, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(-1, recv(s, buf, sizeof(buf), 0));
	EXPECT_EQ(EAGAIN, errno);
	ASSERT_EQ(0, rs_set_nonblock(s, false));
	ping(_metadata, c, s);
	close(c);
	close(s);
}

TEST_F(accept, rcvtimeo)
{
	double t0, dt;

	ASSERT_EQ(0, rs_set_timeo(self->lfd, SO_RCVTIMEO, 300));
	t0 = rs_now();
	rs_interrupt_after(10);
	EXPECT_EQ(-1, accept(self->lfd, NULL, NULL));
	EXPECT_EQ(EAGAIN, errno) TH_LOG("accept: %s", strerror(errno));
	rs_interrupt_cancel();
	dt = rs_now() - t0;
	EXPECT_GE(dt, 0.25);
	EXPECT_LT(dt, 5.0);
}

TEST_F(accept, not_listening)
{
	struct sockaddr_in sin;
	int fd, c, s;

	fd = rs_socket(0);
	ASSERT_GE(fd, 0);
	EXPECT_EQ(-1, accept(fd, NULL, NULL));
	EXPECT_EQ(EINVAL, errno);
	rs_sin(&sin, rs.addr, 0);
	ASSERT_EQ(0, bind(fd, (struct sockaddr *)&sin, sizeof(sin)));
	EXPECT_EQ(-1, accept(fd, NULL, NULL));
	EXPECT_EQ(EINVAL, errno);
	close(fd);

	c = rs_connect(_metadata, &self->sin);
	s = rs_accept(_metadata, self->lfd);
	EXPECT_EQ(-1, accept(c, NULL, NULL));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, accept(s, NULL, NULL));
	EXPECT_EQ(EINVAL, errno);
	close(c);
	close(s);
}

TEST_F(accept, names)
{
	struct sockaddr_in a_peer, s_name, s_peer, c_name, c_peer;
	socklen_t len;
	char raw[64];
	int c, s;

	c = rs_connect(_metadata, &self->sin);
	len = sizeof(a_peer);
	s = accept(self->lfd, (struct sockaddr *)&a_peer, &len);
	ASSERT_GE(s, 0);
	EXPECT_EQ(sizeof(a_peer), len);

	len = sizeof(c_name);
	ASSERT_EQ(0, getsockname(c, (struct sockaddr *)&c_name, &len));
	EXPECT_EQ(sizeof(c_name), len);
	len = sizeof(c_peer);
	ASSERT_EQ(0, getpeername(c, (struct sockaddr *)&c_peer, &len));
	EXPECT_EQ(sizeof(c_peer), len);
	len = sizeof(s_name);
	ASSERT_EQ(0, getsockname(s, (struct sockaddr *)&s_name, &len));
	len = sizeof(s_peer);
	ASSERT_EQ(0, getpeername(s, (struct sockaddr *)&s_peer, &len));

	EXPECT_EQ(AF_INET, c_name.sin_family);
	EXPECT_EQ(rs.addr.s_addr, c_name.sin_addr.s_addr);
	EXPECT_NE(0, c_name.sin_port);
	EXPECT_TRUE(rs_sin_eq(&a_peer, &c_name));
	EXPECT_TRUE(rs_sin_eq(&s_peer, &c_name));
	EXPECT_TRUE(rs_sin_eq(&c_peer, &s_name));
	EXPECT_TRUE(rs_sin_eq(&c_peer, &self->sin));
	close(s);

	/* A short address buffer is filled partly; len tells the size. */
	close(c);
	c = rs_connect(_metadata, &self->sin);
	len = sizeof(c_name);
	ASSERT_EQ(0, getsockname(c, (struct sockaddr *)&c_name, &len));
	memset(raw, 0xaa, sizeof(raw));
	len = 4;
	s = accept(self->lfd, (struct sockaddr *)raw, &len);
	ASSERT_GE(s, 0);
	EXPECT_EQ(sizeof(struct sockaddr_in), len);
	EXPECT_EQ(0, memcmp(raw, &c_name, 4));
	EXPECT_EQ((char)0xaa, raw[4]);
	len = 2;
	memset(raw, 0xaa, sizeof(raw));
	ASSERT_EQ(0, getpeername(s, (struct sockaddr *)raw, &len));
	EXPECT_EQ(sizeof(struct sockaddr_in), len);
	EXPECT_EQ((char)0xaa, raw[2]);
	close(s);
	close(c);
}

/* ---- connect() ---- */

FIXTURE(connect)
{
	int lfd;
	struct sockaddr_in sin;
	int fd;
};

FIXTURE_SETUP(connect)
{
	rs_watchdog(60);
	self->lfd = rs_listener(_metadata, &self->sin);
	self->fd = rs_socket(0);
	ASSERT_GE(self->fd, 0);
}

FIXTURE_TEARDOWN(connect)
{
	close(self->fd);
	close(self->lfd);
}

TEST_F(connect, blocking)
{
	struct sockaddr_in name, peer;
	socklen_t len;
	int s;

	ASSERT_EQ(0, connect(self->fd, (struct sockaddr *)&self->sin,
			     sizeof(self->sin)))
		TH_LOG("connect: %s", strerror(errno));
	len = sizeof(name);
	ASSERT_EQ(0, getsockname(self->fd, (struct sockaddr *)&name, &len));
	EXPECT_EQ(AF_INET, name.sin_family);
	EXPECT_EQ(rs.addr.s_addr, name.sin_addr.s_addr);
	EXPECT_NE(0, name.sin_port);
	len = sizeof(peer);
	ASSERT_EQ(0, getpeername(self->fd, (struct sockaddr *)&peer, &len));
	EXPECT_TRUE(rs_sin_eq(&self->sin, &peer));
	EXPECT_EQ(0, rs_sock_error(self->fd));
	s = rs_accept(_metadata, self->lfd);
	ping(_metadata, self->fd, s);
	close(s);
}

TEST_F(connect, nonblocking)
{
	struct sockaddr_in peer;
	socklen_t len = sizeof(peer);
	int ret, revents, s;

	ASSERT_EQ(0, rs_set_nonblock(self->fd, true));
	ret = connect(self->fd, (struct sockaddr *)&self->sin,
		      sizeof(self->sin));
	ASSERT_EQ(-1, ret);
	ASSERT_EQ(EINPROGRESS, errno);

	revents = rs_poll(self->fd, POLLOUT, 10000);
	ASSERT_EQ(POLLOUT, revents);
	EXPECT_EQ(0, rs_sock_error(self->fd));

	/*
	 * The first connect() after completion returns 0 on Linux TCP;
	 * EISCONN is tolerated. Any later one is EISCONN.
	 */
	ret = connect(self->fd, (struct sockaddr *)&self->sin,
		      sizeof(self->sin));
	if (ret)
		EXPECT_EQ(EISCONN, errno);
	EXPECT_EQ(-1, connect(self->fd, (struct sockaddr *)&self->sin,
			      sizeof(self->sin)));
	EXPECT_EQ(EISCONN, errno);
	ASSERT_EQ(0, getpeername(self->fd, (struct sockaddr *)&peer, &len));
	EXPECT_TRUE(rs_sin_eq(&self->sin, &peer));

	s = rs_accept(_metadata, self->lfd);
	ASSERT_EQ(0, rs_set_nonblock(self->fd, false));
	ping(_metadata, self->fd, s);
	close(s);
}

/* The port of a bound socket that does not listen: connect is refused. */
static int refusing_port(struct __test_metadata *_metadata,
			 struct sockaddr_in *sin)
{
	return rs_bound(_metadata, 0, sin);
}

TEST_F(connect, refused)
{
	struct sockaddr_in sin, peer;
	socklen_t len = sizeof(peer);
	int hold;

	hold = refusing_port(_metadata, &sin);
	EXPECT_EQ(-1, connect(self->fd, (struct sockaddr *)&sin,
			      sizeof(sin)));
	EXPECT_EQ(ECONNREFUSED, errno);
	EXPECT_EQ(0, rs_sock_error(self->fd));
	EXPECT_EQ(-1, getpeername(self->fd, (struct sockaddr *)&peer, &len));
	EXPECT_EQ(ENOTCONN, errno);
	close(hold);

	/* Closed port: refused as well. */
	close(self->fd);
	self->fd = rs_socket(0);
	ASSERT_GE(self->fd, 0);
	EXPECT_EQ(-1, connect(self->fd, (struct sockaddr *)&sin,
			      sizeof(sin)));
	EXPECT_EQ(ECONNREFUSED, errno);
}

TEST_F(connect, refused_nonblocking)
{
	struct sockaddr_in sin;
	int hold, ret, revents;

	hold = refusing_port(_metadata, &sin);
	ASSERT_EQ(0, rs_set_nonblock(self->fd, true));
	ret = connect(self->fd, (struct sockaddr *)&sin, sizeof(sin));
	ASSERT_EQ(-1, ret);
	if (errno != ECONNREFUSED) {
		ASSERT_EQ(EINPROGRESS, errno);
		revents = rs_poll(self->fd, POLLOUT, 10000);
		ASSERT_GT(revents, 0) TH_LOG("no poll event within 10 s");
		EXPECT_EQ(POLLERR, revents & POLLERR);
		EXPECT_EQ(POLLHUP, revents & POLLHUP);
		EXPECT_EQ(ECONNREFUSED, rs_sock_error(self->fd));
		/* Reading SO_ERROR cleared it. */
		EXPECT_EQ(0, rs_sock_error(self->fd));
	}
	close(hold);
}

TEST_F(connect, retry_after_refused)
{
	struct sockaddr_in sin;
	int hold, s;

	hold = refusing_port(_metadata, &sin);
	EXPECT_EQ(-1, connect(self->fd, (struct sockaddr *)&sin,
			      sizeof(sin)));
	EXPECT_EQ(ECONNREFUSED, errno);
	close(hold);

	/* A failed connect leaves a socket that can connect again. */
	ASSERT_EQ(0, connect(self->fd, (struct sockaddr *)&self->sin,
			     sizeof(self->sin)))
		TH_LOG("second connect: %s", strerror(errno));
	s = rs_accept(_metadata, self->lfd);
	ping(_metadata, self->fd, s);
	close(s);
}

TEST_F(connect, isconn)
{
	struct sockaddr_in other;
	int s, lfd2;

	ASSERT_EQ(0, connect(self->fd, (struct sockaddr *)&self->sin,
			     sizeof(self->sin)));
	EXPECT_EQ(-1, connect(self->fd, (struct sockaddr *)&self->sin,
			      sizeof(self->sin)));
	EXPECT_EQ(EISCONN, errno);

	/* Even to another, valid destination. */
	lfd2 = rs_listener(_metadata, &other);
	EXPECT_EQ(-1, connect(self->fd, (struct sockaddr *)&other,
			      sizeof(other)));
	EXPECT_EQ(EISCONN, errno);
	close(lfd2);

	s = rs_accept(_metadata, self->lfd);
	EXPECT_EQ(-1, connect(s, (struct sockaddr *)&self->sin,
			      sizeof(self->sin)));
	EXPECT_EQ(EISCONN, errno);
	ping(_metadata, self->fd, s);
	close(s);
}

TEST_F(connect, on_listener)
{
	struct sockaddr_in other;
	int lfd2;

	/* TCP: a listening socket "is connected" as far as connect goes. */
	lfd2 = rs_listener(_metadata, &other);
	EXPECT_EQ(-1, connect(self->lfd, (struct sockaddr *)&other,
			      sizeof(other)));
	EXPECT_EQ(EISCONN, errno);
	close(lfd2);
}

TEST_F(connect, bad_addrlen)
{
	int s;

	EXPECT_EQ(-1, connect(self->fd, (struct sockaddr *)&self->sin, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, connect(self->fd, (struct sockaddr *)&self->sin, 8));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, connect(self->fd, (struct sockaddr *)&self->sin,
			      sizeof(self->sin) - 1));
	EXPECT_EQ(EINVAL, errno);
	/* Nothing happened: the socket connects normally afterwards. */
	ASSERT_EQ(0, connect(self->fd, (struct sockaddr *)&self->sin,
			     sizeof(self->sin)));
	s = rs_accept(_metadata, self->lfd);
	ping(_metadata, self->fd, s);
	close(s);
}

TEST_F(connect, wrong_family)
{
	struct sockaddr_in sin = self->sin;
	int s;

	sin.sin_family = AF_UNIX;
	EXPECT_EQ(-1, connect(self->fd, (struct sockaddr *)&sin,
			      sizeof(sin)));
	EXPECT_EQ(EAFNOSUPPORT, errno);
	ASSERT_EQ(0, connect(self->fd, (struct sockaddr *)&self->sin,
			     sizeof(self->sin)));
	s = rs_accept(_metadata, self->lfd);
	ping(_metadata, self->fd, s);
	close(s);
}

/* The broadcast address of rs.addr's subnet, or 0 (a /31 or /32). */
static in_addr_t subnet_bcast(void)
{
	struct ifaddrs *ifs, *i;
	in_addr_t mask, b = 0;

	if (getifaddrs(&ifs))
		return 0;
	for (i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    !i->ifa_netmask ||
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr !=
		    rs.addr.s_addr)
			continue;
		mask = ((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr;
		if (ntohl(mask) < 0xfffffffe)
			b = rs.addr.s_addr | ~mask;
		break;
	}
	freeifaddrs(ifs);
	return b;
}

/* REQs ib_cm sent on the RDMA device (-1 without one). */
static long long cm_reqs_sent(void)
{
	char path[256];

	if (!rs.rdmadev)
		return -1;
	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/1/cm_tx_msgs/req", rs.rdmadev);
	return rs_read_ll(path);
}

/*
 * The count once it stands still for 200 ms (at most 2 s): ib_cm counts
 * a REQ when its send completes, an earlier test's retry included.
 */
static long long cm_reqs_settled(void)
{
	long long n = cm_reqs_sent(), m;
	int i;

	for (i = 0; i < 10; i++) {
		rs_msleep(200);
		m = cm_reqs_sent();
		if (m == n)
			break;
		n = m;
	}
	return n;
}

/* connect() to sa: ENETUNREACH at once. */
static void refused_at_once(struct __test_metadata *_metadata, int fd,
			    const struct sockaddr *sa, socklen_t len,
			    const char *what)
{
	double t0 = rs_now();

	EXPECT_EQ(-1, connect(fd, sa, len));
	EXPECT_EQ(ENETUNREACH, errno) TH_LOG("%s: %s", what, strerror(errno));
	EXPECT_GT(2.0, rs_now() - t0) TH_LOG("%s: %.1f s", what,
					     rs_now() - t0);
}

/*
 * A multicast or broadcast destination: ENETUNREACH at once, as TCP, and
 * nothing else happens (the socket connects normally afterwards). Over
 * RDMA the handshake would otherwise go to every host on the link: no
 * connection request may leave (until 2026-11-28 one did; a listener of
 * ours on the port refused it and the fallback's TCP then said
 * ENETUNREACH, so only the count shows it).
 */
TEST_F(connect, not_unicast)
{
	static const char * const v4[] = { "224.0.0.1", "239.1.2.3",
					   "255.255.255.255" };
	static const char * const v6[] = { "ff02::1", "ff0e::1" };
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in sin = self->sin;
	long long reqs = cm_reqs_settled();
	unsigned int i;
	int s;

	for (i = 0; i < ARRAY_SIZE(v4); i++) {
		ASSERT_EQ(1, inet_pton(AF_INET, v4[i], &sin.sin_addr));
		refused_at_once(_metadata, self->fd, (struct sockaddr *)&sin,
				sizeof(sin), v4[i]);
	}
	sin.sin_addr.s_addr = subnet_bcast();
	if (sin.sin_addr.s_addr)
		refused_at_once(_metadata, self->fd, (struct sockaddr *)&sin,
				sizeof(sin), "the subnet's broadcast address");
	s = rs_socket6(0);
	ASSERT_LE(0, s);
	sin6.sin6_port = self->sin.sin_port;
	sin6.sin6_scope_id = rs.netdev ? if_nametoindex(rs.netdev) : 1;
	for (i = 0; i < ARRAY_SIZE(v6); i++) {
		ASSERT_EQ(1, inet_pton(AF_INET6, v6[i], &sin6.sin6_addr));
		refused_at_once(_metadata, s, (struct sockaddr *)&sin6,
				sizeof(sin6), v6[i]);
	}
	close(s);
	EXPECT_EQ(reqs, cm_reqs_sent())
		TH_LOG("connection requests went to those addresses");
	ASSERT_EQ(0, connect(self->fd, (struct sockaddr *)&self->sin,
			     sizeof(self->sin)));
	s = rs_accept(_metadata, self->lfd);
	ping(_metadata, self->fd, s);
	close(s);
}

TEST_F(connect, names_unconnected)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	EXPECT_EQ(-1, getpeername(self->fd, (struct sockaddr *)&sin, &len));
	EXPECT_EQ(ENOTCONN, errno);
	/* getsockname() of an unbound socket works: port 0. */
	memset(&sin, 0xaa, sizeof(sin));
	len = sizeof(sin);
	ASSERT_EQ(0, getsockname(self->fd, (struct sockaddr *)&sin, &len));
	EXPECT_EQ(0, sin.sin_port);
	if (sin.sin_family == AF_INET)
		EXPECT_EQ(htonl(INADDR_ANY), sin.sin_addr.s_addr);
}

TEST_F(connect, io_unconnected)
{
	char buf[8];

	/* TCP: sending on a never-connected socket is EPIPE (+SIGPIPE). */
	EXPECT_EQ(-1, send(self->fd, "x", 1, MSG_NOSIGNAL));
	EXPECT_EQ(EPIPE, errno);
	EXPECT_EQ(-1, write(self->fd, "x", 1));
	EXPECT_EQ(EPIPE, errno);
	EXPECT_EQ(-1, recv(self->fd, buf, sizeof(buf), 0));
	EXPECT_EQ(ENOTCONN, errno);
	EXPECT_EQ(-1, read(self->fd, buf, sizeof(buf)));
	EXPECT_EQ(ENOTCONN, errno);
	EXPECT_EQ(-1, shutdown(self->fd, SHUT_RDWR));
	EXPECT_EQ(ENOTCONN, errno);
}

/* ---- unreachable destinations ---- */

FIXTURE(unreach)
{
	int fd;
	struct sockaddr_in sin;
	unsigned int limit;
	bool netns;		/* TCP in a namespace with only lo */
};

FIXTURE_VARIANT(unreach)
{
	bool noroute;		/* off-subnet address instead of no host */
	bool nonblock;
};

FIXTURE_VARIANT_ADD(unreach, nohost) { .noroute = false, .nonblock = 0 };
FIXTURE_VARIANT_ADD(unreach, nohost_nb) { .noroute = false, .nonblock = 1 };
FIXTURE_VARIANT_ADD(unreach, noroute) { .noroute = true, .nonblock = 0 };
FIXTURE_VARIANT_ADD(unreach, noroute_nb) { .noroute = true, .nonblock = 1 };

/* Under TCP: a network namespace of our own with only "lo" up. */
static int private_netns(void)
{
	struct ifreq ifr = { .ifr_name = "lo" };
	int fd, ret;

	if (unshare(CLONE_NEWNET))
		return -1;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0)
		return -1;
	ret = ioctl(fd, SIOCGIFFLAGS, &ifr);
	if (!ret) {
		ifr.ifr_flags |= IFF_UP;
		ret = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	close(fd);
	return ret;
}

FIXTURE_SETUP(unreach)
{
	self->fd = -1;
	self->netns = false;
	self->limit = rs_env_ulong("RS_UNREACH_SEC", 30);
	rs_watchdog(self->limit + 30);
	/*
	 * Outside the test VM (no RS_NETDEV) the host TCP runs on may have
	 * any routes (even a transparent proxy); a private namespace has
	 * none, as the VM is meant to, and no subnet either.
	 */
	if (rs.tcp && !getenv("RS_NETDEV")) {
		if (private_netns())
			return;
		self->netns = true;
	}
	self->fd = rs_socket(variant->nonblock ? SOCK_NONBLOCK : 0);
	ASSERT_GE(self->fd, 0);
	rs_sin(&self->sin, variant->noroute ? rs_inaddr(RS_NOROUTE_ADDR) :
		rs_nohost_addr(), 9);
}

FIXTURE_TEARDOWN(unreach)
{
	if (self->fd >= 0)
		close(self->fd);
}

static void on_alarm(int sig)
{
	(void)sig;
}

/*
 * TCP's answers: no route is ENETUNREACH at once; an address on the
 * subnet that nobody answers ARP for is EHOSTUNREACH once the neighbour
 * entry fails (the local ICMP host unreachable ends SYN_SENT).
 */
static int unreach_errno(const FIXTURE_DATA(unreach) *self, bool noroute)
{
	return noroute || self->netns ? ENETUNREACH : EHOSTUNREACH;
}

TEST_F_TIMEOUT(unreach, connect, 120)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	double t0 = rs_now(), dt;
	int ret, err, revents;

	if (self->fd < 0)
		SKIP(return, "cannot make a private network namespace");

	if (!variant->nonblock) {
		/* No SA_RESTART: EINTR if connect() is still blocked. */
		sigaction(SIGALRM, &sa, NULL);
		alarm(self->limit);
		ret = connect(self->fd, (struct sockaddr *)&self->sin,
			      sizeof(self->sin));
		err = errno;
		alarm(0);
		ASSERT_EQ(-1, ret);
		ASSERT_NE(EINTR, err)
			TH_LOG("connect still blocked after %u s",
			       self->limit);
	} else {
		ret = connect(self->fd, (struct sockaddr *)&self->sin,
			      sizeof(self->sin));
		err = errno;
		ASSERT_EQ(-1, ret);
		if (err == EINPROGRESS) {
			revents = rs_poll(self->fd, POLLOUT,
					  self->limit * 1000);
			ASSERT_GT(revents, 0)
				TH_LOG("no error within %u s", self->limit);
			EXPECT_EQ(POLLERR, revents & POLLERR);
			err = rs_sock_error(self->fd);
		}
	}
	dt = rs_now() - t0;
	EXPECT_EQ(unreach_errno(self, variant->noroute), err)
		TH_LOG("connect: %s (%d)", strerror(err), err);
	TH_LOG("failed with %s after %.1f s", strerror(err), dt);
	EXPECT_LE(dt, self->limit);
}

/* ---- IPv6 addresses ---- */

FIXTURE(v6)
{
	struct sockaddr_in6 addr;	/* port 0 */
	const char *skip;
	char why[128];
};

FIXTURE_VARIANT(v6)
{
	bool mapped;	/* ::ffff:a.b.c.d instead of a native address */
};

FIXTURE_VARIANT_ADD(v6, mapped) { .mapped = true };
FIXTURE_VARIANT_ADD(v6, native) { .mapped = false };

/* An IPv6 address of RS_NETDEV: global if any, else link-local. */
static int find_addr6(struct sockaddr_in6 *out)
{
	struct ifaddrs *ifa, *i;
	int found = 0;

	if (getifaddrs(&ifa))
		return 0;
	for (i = ifa; i; i = i->ifa_next) {
		struct sockaddr_in6 *s6 = (void *)i->ifa_addr;

		if (!s6 || s6->sin6_family != AF_INET6 ||
		    strcmp(i->ifa_name, rs.netdev))
			continue;
		if (!IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) {
			*out = *s6;
			found = 2;
			break;
		}
		if (!found) {
			*out = *s6;
			out->sin6_scope_id = if_nametoindex(rs.netdev);
			found = 1;
		}
	}
	freeifaddrs(ifa);
	return found;
}

FIXTURE_SETUP(v6)
{
	const char *env = getenv("RS_ADDR6");
	struct sockaddr_in6 *a = &self->addr;

	rs_watchdog(60);
	memset(a, 0, sizeof(*a));
	a->sin6_family = AF_INET6;
	if (variant->mapped) {
		a->sin6_addr.s6_addr[10] = 0xff;
		a->sin6_addr.s6_addr[11] = 0xff;
		memcpy(&a->sin6_addr.s6_addr[12], &rs.addr, 4);
	} else if (env) {
		if (inet_pton(AF_INET6, env, &a->sin6_addr) != 1)
			self->skip = "RS_ADDR6 is not an IPv6 address";
		if (IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr) && rs.netdev)
			a->sin6_scope_id = if_nametoindex(rs.netdev);
	} else if (rs.tcp) {
		a->sin6_addr = in6addr_loopback;
	} else if (!rs.netdev) {
		self->skip = "neither RS_ADDR6 nor RS_NETDEV set";
	} else if (!find_addr6(a)) {
		snprintf(self->why, sizeof(self->why),
			 "%s has no IPv6 address", rs.netdev);
		self->skip = self->why;
	}
}

FIXTURE_TEARDOWN(v6)
{
}

/* Listener on addr; its bound name in *sin6. */
static int v6_listener(struct __test_metadata *_metadata,
		       const struct sockaddr_in6 *addr,
		       struct sockaddr_in6 *sin6)
{
	socklen_t len = sizeof(*sin6);
	int fd;

	fd = rs_socket6(0);
	ASSERT_GE(fd, 0) TH_LOG("socket: %s", strerror(errno));
	*sin6 = *addr;
	ASSERT_EQ(0, bind(fd, (struct sockaddr *)sin6, sizeof(*sin6)))
		TH_LOG("bind: %s", strerror(errno));
	ASSERT_EQ(0, listen(fd, 4));
	ASSERT_EQ(0, getsockname(fd, (struct sockaddr *)sin6, &len));
	EXPECT_EQ(sizeof(*sin6), len);
	return fd;
}

static bool sin6_eq(const struct sockaddr_in6 *a, const struct sockaddr_in6 *b)
{
	return a->sin6_family == b->sin6_family &&
	       a->sin6_port == b->sin6_port &&
	       !memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(a->sin6_addr));
}

/*
 * Bound to an address of one family, connecting to the other: TCP's
 * errnos (tcp_v6_connect()): from a v4-mapped source to a native IPv6
 * destination EAFNOSUPPORT, from a native one to a v4-mapped destination
 * ENETUNREACH; nothing sent (rdma_cm said EINVAL for both).
 */
TEST_F(v6, other_family_dst)
{
	struct sockaddr_in6 dst = { .sin6_family = AF_INET6,
				    .sin6_port = htons(9) };
	const char *env = getenv("RS_ADDR6");
	int fd, want;

	ASSERT_EQ(NULL, self->skip) TH_LOG("%s", self->skip);
	fd = rs_socket6(0);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(0, bind(fd, (struct sockaddr *)&self->addr,
			  sizeof(self->addr)))
		TH_LOG("bind: %s", strerror(errno));
	if (variant->mapped) {
		dst.sin6_addr = in6addr_loopback;
		if (env)
			ASSERT_EQ(1, inet_pton(AF_INET6, env, &dst.sin6_addr));
		want = EAFNOSUPPORT;
	} else {
		dst.sin6_addr.s6_addr[10] = 0xff;
		dst.sin6_addr.s6_addr[11] = 0xff;
		memcpy(&dst.sin6_addr.s6_addr[12], &rs.addr, 4);
		want = ENETUNREACH;
	}
	EXPECT_EQ(-1, connect(fd, (struct sockaddr *)&dst, sizeof(dst)));
	EXPECT_EQ(want, errno) TH_LOG("connect: %s", strerror(errno));
	close(fd);
}

TEST_F(v6, names_and_data)
{
	struct sockaddr_in6 lsin, name, peer, a_peer;
	socklen_t len;
	char buf[INET6_ADDRSTRLEN + 8];
	int lfd, c, s;

	/*
	 * A native IPv6 address must work (no IPv6 is a failure), and so
	 * must a v4-mapped one, as on a TCP socket of AF_INET6: the names
	 * come back mapped.
	 */
	ASSERT_EQ(NULL, self->skip) TH_LOG("%s", self->skip);
	lfd = v6_listener(_metadata, &self->addr, &lsin);
	EXPECT_EQ(AF_INET6, lsin.sin6_family);
	EXPECT_EQ(0, memcmp(&lsin.sin6_addr, &self->addr.sin6_addr, 16))
		TH_LOG("bound to %s", rs_ntop(&lsin, buf, sizeof(buf)));
	ASSERT_NE(0, lsin.sin6_port);

	c = rs_socket6(0);
	ASSERT_GE(c, 0);
	ASSERT_EQ(0, connect(c, (struct sockaddr *)&lsin, sizeof(lsin)))
		TH_LOG("connect %s: %s", rs_ntop(&lsin, buf, sizeof(buf)),
		       strerror(errno));
	len = sizeof(a_peer);
	s = accept(lfd, (struct sockaddr *)&a_peer, &len);
	ASSERT_GE(s, 0);
	EXPECT_EQ(sizeof(a_peer), len);

	len = sizeof(name);
	ASSERT_EQ(0, getsockname(c, (struct sockaddr *)&name, &len));
	EXPECT_EQ(sizeof(name), len);
	EXPECT_EQ(AF_INET6, name.sin6_family);
	EXPECT_NE(0, name.sin6_port);
	EXPECT_TRUE(sin6_eq(&name, &a_peer));
	len = sizeof(peer);
	ASSERT_EQ(0, getpeername(c, (struct sockaddr *)&peer, &len));
	EXPECT_TRUE(sin6_eq(&peer, &lsin));
	len = sizeof(peer);
	ASSERT_EQ(0, getpeername(s, (struct sockaddr *)&peer, &len));
	EXPECT_TRUE(sin6_eq(&peer, &name));

	ping(_metadata, c, s);
	close(c);
	close(s);
	close(lfd);
}

/*
 * A socket of ours bound to [::] and an ephemeral port, named in *bound;
 * auto_fb: with TCP fallback AUTO (unless over TCP or fallback forced).
 */
static int v6_any_bound(struct __test_metadata *_metadata,
			struct sockaddr_in6 *bound, bool auto_fb)
{
	struct sockaddr_in6 any = { .sin6_family = AF_INET6 };
	socklen_t len = sizeof(*bound);
	int c;

	c = rs_socket6(0);
	ASSERT_GE(c, 0);
	if (auto_fb && !rs.tcp && !rs_fb_forced())
		ASSERT_EQ(0, rs_setint(c, SOL_RDMASTREAM, RDMASTREAM_FALLBACK,
				       RDMASTREAM_FALLBACK_AUTO));
	ASSERT_EQ(0, bind(c, (struct sockaddr *)&any, sizeof(any)))
		TH_LOG("bind [::]: %s", strerror(errno));
	ASSERT_EQ(0, getsockname(c, (struct sockaddr *)bound, &len));
	ASSERT_NE(0, bound->sin6_port);
	return c;
}

/*
 * Bound to [::] (and a port) before connecting, as a dual-stack program
 * may: it connects to an IPv4 (v4-mapped) address as to a native IPv6
 * one, as TCP's AF_INET6 socket does, from the port it was bound to, and
 * its name comes back in the destination's form. (rdma_cm's id bound to
 * [::] resolves only IPv6 destinations: it said EINVAL for the mapped
 * one.)
 */
TEST_F(v6, any_bound_connect)
{
	struct sockaddr_in6 lsin, bound, name, a_peer;
	char buf[INET6_ADDRSTRLEN + 8];
	socklen_t len;
	int lfd, c, s;

	ASSERT_EQ(NULL, self->skip) TH_LOG("%s", self->skip);
	lfd = v6_listener(_metadata, &self->addr, &lsin);
	c = v6_any_bound(_metadata, &bound, false);
	ASSERT_EQ(0, connect(c, (struct sockaddr *)&lsin, sizeof(lsin)))
		TH_LOG("connect %s: %s", rs_ntop(&lsin, buf, sizeof(buf)),
		       strerror(errno));
	len = sizeof(a_peer);
	s = accept(lfd, (struct sockaddr *)&a_peer, &len);
	ASSERT_GE(s, 0) TH_LOG("accept: %s", strerror(errno));
	EXPECT_EQ(bound.sin6_port, a_peer.sin6_port)
		TH_LOG("bound to port %u, came from %s", ntohs(bound.sin6_port),
		       rs_ntop(&a_peer, buf, sizeof(buf)));
	len = sizeof(name);
	ASSERT_EQ(0, getsockname(c, (struct sockaddr *)&name, &len));
	EXPECT_EQ(AF_INET6, name.sin6_family);
	EXPECT_EQ(bound.sin6_port, name.sin6_port);
	EXPECT_EQ(0, memcmp(&name.sin6_addr, &self->addr.sin6_addr, 16))
		TH_LOG("named %s", rs_ntop(&name, buf, sizeof(buf)));
	EXPECT_TRUE(sin6_eq(&name, &a_peer));
	if (!rs.tcp && !rs_fb_forced()) {
		struct rdmastream_info info = {};

		/* over RDMA: not a failed handshake that TCP made good */
		len = sizeof(info);
		ASSERT_EQ(0, getsockopt(c, SOL_RDMASTREAM, RDMASTREAM_INFO,
					&info, &len));
		EXPECT_EQ(RDMASTREAM_FB_NONE, info.rsi_fallback);
	}
	ping(_metadata, c, s);
	close(c);
	close(s);
	close(lfd);
}

/*
 * The same bind to [::], then a connect to a plain TCP server: over RDMA
 * the peer's CM refuses, the socket falls back to TCP (AUTO) while
 * connect() waits, and the data goes through. Once both ends are closed
 * the port is free again for a dual-stack bind: the cm id the connect
 * gave up must not outlive the socket (it leaked on that path once, and
 * with it the socket and the port).
 */
TEST_F(v6, any_bound_tcp_peer)
{
	struct sockaddr_in6 lsin = self->addr, bound;
	socklen_t len = sizeof(lsin);
	int lfd, c, s, fd, i, err = 0;
	char ch;

	ASSERT_EQ(NULL, self->skip) TH_LOG("%s", self->skip);
	lfd = socket(AF_INET6, SOCK_STREAM, 0);
	ASSERT_GE(lfd, 0);
	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&lsin, sizeof(lsin)));
	ASSERT_EQ(0, listen(lfd, 4));
	ASSERT_EQ(0, getsockname(lfd, (struct sockaddr *)&lsin, &len));
	c = v6_any_bound(_metadata, &bound, true);
	ASSERT_EQ(0, connect(c, (struct sockaddr *)&lsin, sizeof(lsin)))
		TH_LOG("connect to a TCP server: %s", strerror(errno));
	s = accept(lfd, NULL, NULL);
	ASSERT_GE(s, 0);
	ping(_metadata, c, s);
	/* the server closes first: no TIME_WAIT on the client's port */
	close(s);
	EXPECT_EQ(0, recv(c, &ch, 1, 0));
	close(c);
	close(lfd);
	/* the client's TCP may take a moment to leave LAST_ACK */
	for (i = 0; i < 50; i++) {
		fd = rs_socket6(0);
		ASSERT_GE(fd, 0);
		err = bind(fd, (struct sockaddr *)&bound, sizeof(bound)) ?
		      errno : 0;
		close(fd);
		if (!err)
			break;
		usleep(100000);
	}
	EXPECT_EQ(0, err) TH_LOG("[::]:%u bound again: %s",
				 ntohs(bound.sin6_port), strerror(err));
}

/* ---- 24-byte IPv6 addresses (RFC 2133, no sin6_scope_id) ---- */

/*
 * Just enough io_uring to connect from a kernel worker: with IOSQE_ASYNC
 * the address is copied into a kmalloc()ed buffer, which (unlike the
 * stack of connect(2) on a kernel built with INIT_STACK_ALL_ZERO) holds
 * what its last user left beyond the bytes given, unless the kernel runs
 * with init_on_alloc (the test VMs do not).
 */
struct uring {
	int fd;
	void *ring;
	size_t ring_len;
	struct io_uring_sqe *sqes;
	size_t sqes_len;
	unsigned int *sq_tail, *sq_mask, *sq_array;
	unsigned int *cq_head, *cq_tail, *cq_mask;
	struct io_uring_cqe *cqes;
};

static int uring_init(struct uring *u, unsigned int entries)
{
	struct io_uring_params pr = {};
	size_t sq_len, cq_len;
	char *r;

	u->fd = syscall(__NR_io_uring_setup, entries, &pr);
	if (u->fd < 0 || !(pr.features & IORING_FEAT_SINGLE_MMAP))
		return -1;
	sq_len = pr.sq_off.array + pr.sq_entries * sizeof(unsigned int);
	cq_len = pr.cq_off.cqes + pr.cq_entries * sizeof(struct io_uring_cqe);
	u->ring_len = sq_len > cq_len ? sq_len : cq_len;
	u->ring = mmap(NULL, u->ring_len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, u->fd, IORING_OFF_SQ_RING);
	u->sqes_len = pr.sq_entries * sizeof(struct io_uring_sqe);
	u->sqes = mmap(NULL, u->sqes_len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, u->fd, IORING_OFF_SQES);
	if (u->ring == MAP_FAILED || u->sqes == MAP_FAILED)
		return -1;
	r = u->ring;
	u->sq_tail = (unsigned int *)(r + pr.sq_off.tail);
	u->sq_mask = (unsigned int *)(r + pr.sq_off.ring_mask);
	u->sq_array = (unsigned int *)(r + pr.sq_off.array);
	u->cq_head = (unsigned int *)(r + pr.cq_off.head);
	u->cq_tail = (unsigned int *)(r + pr.cq_off.tail);
	u->cq_mask = (unsigned int *)(r + pr.cq_off.ring_mask);
	u->cqes = (struct io_uring_cqe *)(r + pr.cq_off.cqes);
	return 0;
}

static void uring_exit(struct uring *u)
{
	munmap(u->sqes, u->sqes_len);
	munmap(u->ring, u->ring_len);
	close(u->fd);
}

/* Queue connect(fd, addr, len), to run in an io_uring worker. */
static void uring_connect(struct uring *u, int fd, const void *addr,
			  socklen_t len)
{
	unsigned int tail = *u->sq_tail, i = tail & *u->sq_mask;
	struct io_uring_sqe *e = &u->sqes[i];

	memset(e, 0, sizeof(*e));
	e->opcode = IORING_OP_CONNECT;
	e->flags = IOSQE_ASYNC;
	e->fd = fd;
	e->addr = (uintptr_t)addr;
	e->off = len;			/* addr2: the address length */
	u->sq_array[i] = i;
	__atomic_store_n(u->sq_tail, tail + 1, __ATOMIC_RELEASE);
}

/* Submit n queued requests, wait for their n results; -1 on failure. */
static int uring_run(struct uring *u, unsigned int n, int *res)
{
	unsigned int got = 0, head;

	if (syscall(__NR_io_uring_enter, u->fd, n, 0, 0, NULL, 0) != n)
		return -1;
	while (got < n) {
		if (syscall(__NR_io_uring_enter, u->fd, 0, 1,
			    IORING_ENTER_GETEVENTS, NULL, 0) < 0)
			return -1;
		head = *u->cq_head;
		while (head != __atomic_load_n(u->cq_tail, __ATOMIC_ACQUIRE)) {
			if (got < n)
				res[got++] = u->cqes[head & *u->cq_mask].res;
			head++;
		}
		__atomic_store_n(u->cq_head, head, __ATOMIC_RELEASE);
	}
	return 0;
}

#define SHORT6_LEN	24		/* the kernel's SIN6_LEN_RFC2133 */
#define SHORT6_PRIME	16		/* primed kmalloc()ed addresses */
#define SHORT6_SCOPE	0x5a5a5a5aU	/* what they leave behind */

/*
 * Leave SHORT6_SCOPE in recently freed io_uring connect buffers: UDP
 * connects with full 28-byte addresses whose scope id is the pattern.
 */
static void short6_prime(struct __test_metadata *_metadata, struct uring *u)
{
	struct sockaddr_in6 a = {
		.sin6_family = AF_INET6, .sin6_port = htons(9),
		.sin6_scope_id = SHORT6_SCOPE,
	};
	int fds[SHORT6_PRIME], res[SHORT6_PRIME], i;

	a.sin6_addr.s6_addr[10] = 0xff;
	a.sin6_addr.s6_addr[11] = 0xff;
	a.sin6_addr.s6_addr[12] = 127;
	a.sin6_addr.s6_addr[15] = 1;
	for (i = 0; i < SHORT6_PRIME; i++) {
		fds[i] = socket(AF_INET6, SOCK_DGRAM, 0);
		ASSERT_GE(fds[i], 0);
		uring_connect(u, fds[i], &a, sizeof(a));
	}
	ASSERT_EQ(0, uring_run(u, SHORT6_PRIME, res));
	for (i = 0; i < SHORT6_PRIME; i++)
		close(fds[i]);
}

/* The socket's names have family AF_INET6 and a zero scope id. */
static void short6_names(struct __test_metadata *_metadata, int fd,
			 const char *who)
{
	struct sockaddr_in6 a;
	socklen_t len;
	int peer;

	for (peer = 0; peer < 2; peer++) {
		memset(&a, 0xee, sizeof(a));
		len = sizeof(a);
		ASSERT_EQ(0, (peer ? getpeername : getsockname)
			  (fd, (struct sockaddr *)&a, &len))
			TH_LOG("%s: %s", who, strerror(errno));
		EXPECT_EQ(sizeof(a), len);
		EXPECT_EQ(AF_INET6, a.sin6_family);
		EXPECT_EQ(0, a.sin6_scope_id)
			TH_LOG("%s: %s has scope id %#x", who,
			       peer ? "getpeername" : "getsockname",
			       a.sin6_scope_id);
	}
}

/*
 * A non-link-local IPv6 address of RS_NETDEV (a link-local one needs the
 * scope id that a 24-byte address lacks): RS_ADDR6 (the VMs have
 * 2001:2::<host>, scripts/vm-guest). Against TCP without RS_ADDR6, ::1.
 * Without one the test fails: IPv6 must work.
 */
static void short6_addr(struct __test_metadata *_metadata,
			struct in6_addr *a)
{
	const char *env = getenv("RS_ADDR6");

	if (!env && rs.tcp) {
		*a = in6addr_loopback;
		return;
	}
	ASSERT_NE(NULL, env) TH_LOG("RS_ADDR6 is not set");
	ASSERT_EQ(1, inet_pton(AF_INET6, env, a))
		TH_LOG("RS_ADDR6=%s is not an IPv6 address", env);
	ASSERT_FALSE(IN6_IS_ADDR_LINKLOCAL(a))
		TH_LOG("RS_ADDR6=%s is link-local", env);
}

/* bind() with 24 bytes, retried while the new address reaches rdma_cm. */
static int short6_listener(struct __test_metadata *_metadata,
			   const struct in6_addr *addr,
			   struct sockaddr_in6 *name)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = *addr };
	socklen_t len = sizeof(*name);
	int fd, i, ret = -1;

	for (i = 0; i < 50 && ret; i++) {
		fd = rs_socket6(0);
		ASSERT_GE(fd, 0);
		ret = bind(fd, (struct sockaddr *)&a, SHORT6_LEN);
		if (ret && errno == EADDRNOTAVAIL) {
			close(fd);
			rs_msleep(100);
		}
	}
	ASSERT_EQ(0, ret) TH_LOG("bind with 24 bytes: %s", strerror(errno));
	ASSERT_EQ(0, listen(fd, 4));
	ASSERT_EQ(0, getsockname(fd, (struct sockaddr *)name, &len));
	EXPECT_EQ(sizeof(*name), len);
	EXPECT_EQ(0, name->sin6_scope_id);
	EXPECT_EQ(0, memcmp(&name->sin6_addr, addr, sizeof(*addr)));
	return fd;
}

/*
 * TCP accepts a sockaddr_in6 without its scope id (24 bytes) for bind
 * and connect; the names then report scope id 0, not whatever followed
 * the 24 bytes in the kernel's copy of the address.
 */
TEST(short_sin6)
{
	struct sockaddr_in6 lname;
	struct in6_addr addr;
	struct uring u;
	cpu_set_t cpus;
	int lfd, c, c2, s, res;

	rs_watchdog(60);
	short6_addr(_metadata, &addr);
	lfd = short6_listener(_metadata, &addr, &lname);

	/* connect(2), 24 bytes */
	c = rs_socket6(0);
	ASSERT_GE(c, 0);
	ASSERT_EQ(0, connect(c, (struct sockaddr *)&lname, SHORT6_LEN))
		TH_LOG("connect with 24 bytes: %s", strerror(errno));
	s = accept(lfd, NULL, NULL);
	ASSERT_GE(s, 0);
	short6_names(_metadata, c, "connect");
	short6_names(_metadata, s, "accepted");
	ping(_metadata, c, s);
	close(s);

	/*
	 * io_uring connect, 24 bytes, into a buffer that held SHORT6_SCOPE
	 * just before; on one CPU so that it is one of those freed last
	 */
	CPU_ZERO(&cpus);
	CPU_SET(sched_getcpu(), &cpus);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(cpus), &cpus));
	ASSERT_EQ(0, uring_init(&u, 32)) TH_LOG("io_uring: %s",
						 strerror(errno));
	c2 = rs_socket6(0);
	ASSERT_GE(c2, 0);
	short6_prime(_metadata, &u);
	uring_connect(&u, c2, &lname, SHORT6_LEN);
	ASSERT_EQ(0, uring_run(&u, 1, &res));
	ASSERT_EQ(0, res) TH_LOG("io_uring connect: %s", strerror(-res));
	s = accept(lfd, NULL, NULL);
	ASSERT_GE(s, 0);
	short6_names(_metadata, c2, "io_uring connect");
	ping(_metadata, c2, s);
	uring_exit(&u);
	close(s);
	close(c2);
	close(c);
	close(lfd);
}

TEST_HARNESS_MAIN
