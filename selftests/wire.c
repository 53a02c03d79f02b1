// SPDX-License-Identifier: GPL-2.0
/*
 * Two-host tests of AF_RDMASTREAM. Run the same binary on both hosts:
 * RS_HOST=1 listens on RS_ADDR, RS_HOST=2 connects to RS_PEER and retries
 * until host 1 is listening. Each test uses its own port (RS_WIRE_PORT +
 * test number) and starts with a hello naming the test, so the two hosts
 * stay in step using nothing but the sockets.
 *
 * stream:     RS_WIRE_MB MiB each way at once over one connection,
 *             verified byte by byte, verdicts exchanged at the end.
 * stream6:    the same over IPv6 (RS_ADDR6, RS_PEER6: 2001:2::<host> in
 *             the VMs), RS_WIRE_MB6 MiB each way.
 * multi:      RS_WIRE_CONNS connections doing the same with random I/O.
 * multi16:    16 connections, RS_WIRE_MB16 MiB each way in all. With rxe
 *             before 6.10 and an ack timeout below 268 ms, 16 streams
 *             between two VMs set off a spurious go-back-N whose retry
 *             the responder rejects (ERR_LENGTH): every run reset.
 * write_cap:  write_pkts' cap in bytes, per round one connection.
 * load_floor: 130 connections: the ack timeout floor rises with their
 *             number (rxe), and is back once they are gone.
 * peer_death: host 2 connects twice, takes some data, then powers itself
 *             off without closing anything (sysrq, RS_WIRE_DIE). Host 1
 *             keeps sending on one connection and must get an error within
 *             RS_WIRE_DEATH_SEC of the data stopping; on the other it sits
 *             in recv() with SO_KEEPALIVE (asserted for rdmastream only).
 *             Host 2 reports its test as passed and powers off a few
 *             seconds later (RS_WIRE_DIE_DELAY), after run-tests is done.
 *
 * Knobs (defaults): RS_WIRE_PORT (47000), RS_WIRE_WAIT (300 s to wait for
 * the other host), RS_WIRE_MB (64), RS_WIRE_CONNS (4), RS_WIRE_DIE (o:
 * sysrq power off; b: sysrq reboot; kill: just SIGKILL the holder process,
 * for testing the test; none: skip peer_death; the default with
 * RS_FAMILY=inet), RS_WIRE_DIE_DELAY (15),
 * RS_WIRE_DEATH_SEC (60), RS_WIRE_MB6 (16), RS_WIRE_MB16 (32).
 */
#include "rs_common.h"

#include <sys/stat.h>

#define WIRE_MAGIC	0x657269777372ULL	/* "rswire" */

enum wire_test { WT_STREAM = 1, WT_MULTI, WT_DEATH, WT_STREAM6, WT_MULTI16,
		 WT_WCAP,	/* WT_WCAP + round: wire.write_cap */
		 WT_LOAD = WT_WCAP + 3 /* its rounds */, WT_LOAD_AFTER };

struct hello {
	uint64_t magic;
	uint32_t test;
	uint32_t index;		/* connection number within the test */
	uint32_t flags;
	uint32_t pad;
};

#define HELLO_DIES	1	/* host 2 will power off (peer_death) */

static unsigned int wire_wait(void)
{
	return rs_env_ulong("RS_WIRE_WAIT", 300);
}

static unsigned short wire_port(enum wire_test t)
{
	return rs_env_ulong("RS_WIRE_PORT", 47000) + t;
}

static bool retryable(int err)
{
	return err == ECONNREFUSED || err == ETIMEDOUT ||
	       err == EHOSTUNREACH || err == ENETUNREACH ||
	       err == ECONNRESET || err == EADDRNOTAVAIL || err == EINTR ||
	       err == ECONNABORTED;
}

/*
 * The address of this host (peer false) or of the other one for test t:
 * IPv6 for stream6 (RS_ADDR6/RS_PEER6, ::1 against TCP without them; no
 * address is a failure), else IPv4.
 */
static socklen_t wire_addr(struct __test_metadata *_metadata,
			   enum wire_test t, bool peer,
			   struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	const char *env;

	memset(ss, 0, sizeof(*ss));
	if (t != WT_STREAM6)
		return rs_sin((struct sockaddr_in *)ss,
			      peer ? rs.peer : rs.addr, wire_port(t));
	env = getenv(peer ? "RS_PEER6" : "RS_ADDR6");
	if (!env && rs.tcp)
		env = "::1";
	ASSERT_NE(NULL, env) TH_LOG("%s is not set",
				    peer ? "RS_PEER6" : "RS_ADDR6");
	s6->sin6_family = AF_INET6;
	s6->sin6_port = htons(wire_port(t));
	ASSERT_EQ(1, inet_pton(AF_INET6, env, &s6->sin6_addr))
		TH_LOG("not an IPv6 address: %s", env);
	return sizeof(*s6);
}

static int wire_socket(enum wire_test t)
{
	return t == WT_STREAM6 ? rs_socket6(0) : rs_socket(0);
}

/* Host 2: connect to the peer's port, retrying until it listens. */
static int wire_dial(struct __test_metadata *_metadata, enum wire_test t,
		     uint32_t index, uint32_t flags)
{
	struct hello h = {
		.magic = WIRE_MAGIC, .test = t, .index = index,
		.flags = flags,
	};
	double end = rs_now() + wire_wait();
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, err, tries = 0;

	len = wire_addr(_metadata, t, true, &ss);
	for (;;) {
		fd = wire_socket(t);
		ASSERT_GE(fd, 0) TH_LOG("socket: %s", strerror(errno));
		if (!connect(fd, (struct sockaddr *)&ss, len))
			break;
		err = errno;
		close(fd);
		tries++;
		ASSERT_TRUE(retryable(err)) TH_LOG("connect: %s",
						   strerror(err));
		ASSERT_LT(rs_now(), end)
			TH_LOG("peer not listening after %u s (%d tries, %s)",
			       wire_wait(), tries, strerror(err));
		rs_msleep(200);
	}
	ASSERT_EQ(sizeof(h), send(fd, &h, sizeof(h), 0));
	return fd;
}

/* Host 1: listener on our port. */
static int wire_listen(struct __test_metadata *_metadata, enum wire_test t)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd;

	len = wire_addr(_metadata, t, false, &ss);
	fd = wire_socket(t);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(0, rs_setint(fd, SOL_SOCKET, SO_REUSEADDR, 1));
	ASSERT_EQ(0, bind(fd, (struct sockaddr *)&ss, len))
		TH_LOG("bind port %u: %s", wire_port(t), strerror(errno));
	ASSERT_EQ(0, listen(fd, 16));
	return fd;
}

/* Host 1: accept one connection of test t; its hello is returned. */
static int wire_accept(struct __test_metadata *_metadata, int lfd,
		       enum wire_test t, struct hello *h)
{
	int fd;

	ASSERT_EQ(POLLIN, rs_poll(lfd, POLLIN, wire_wait() * 1000))
		TH_LOG("peer did not connect within %u s", wire_wait());
	fd = accept(lfd, NULL, NULL);
	ASSERT_GE(fd, 0) TH_LOG("accept: %s", strerror(errno));
	ASSERT_EQ(0, rs_set_timeo(fd, SO_RCVTIMEO, 30000));
	ASSERT_EQ(sizeof(*h), rs_recv_all(fd, h, sizeof(*h), 0))
		TH_LOG("hello: %s", strerror(errno));
	ASSERT_EQ(0, rs_set_timeo(fd, SO_RCVTIMEO, 0));
	ASSERT_EQ(WIRE_MAGIC, h->magic);
	ASSERT_EQ(t, h->test) TH_LOG("peer is in another test");
	return fd;
}

/* The connections of a test; fd[i] is connection number i. */
struct conns {
	int n;
	int fd[160];	/* wire.load_floor's WIRE_LOAD */
};

FIXTURE(wire)
{
	struct conns c;
};

FIXTURE_SETUP(wire)
{
	rs_watchdog(_metadata->timeout + 30);
	ASSERT_TRUE(rs.host == 1 || rs.host == 2)
		TH_LOG("RS_HOST must be 1 or 2");
	ASSERT_TRUE(rs.tcp || rs.host == 1 ||
		    rs.addr.s_addr != rs.peer.s_addr)
		TH_LOG("RS_PEER is this host");
}

/* inflight_max to put back after a test that set it, even if it failed */
static long long wire_budget_old = -1;
/* write_pkts, likewise */
static long long wire_wpkts_old = -1;
/* ack_timeout_min, after wire.load_floor */
static long long wire_ackmin_old = -1;

FIXTURE_TEARDOWN(wire)
{
	int i;

	for (i = 0; i < self->c.n; i++)
		close(self->c.fd[i]);
	if (wire_budget_old >= 0 &&
	    rs_param_set("inflight_max", wire_budget_old))
		TH_LOG("could not put inflight_max back to %lld",
		       wire_budget_old);
	if (wire_wpkts_old >= 0 &&
	    rs_param_set("write_pkts", wire_wpkts_old))
		TH_LOG("could not put write_pkts back to %lld",
		       wire_wpkts_old);
	if (wire_ackmin_old >= 0 &&
	    rs_param_set("ack_timeout_min", wire_ackmin_old))
		TH_LOG("could not put ack_timeout_min back to %lld",
		       wire_ackmin_old);
}

/* Set up nconn connections of test t. */
static void wire_connect_all(struct __test_metadata *_metadata,
			     struct conns *cs, enum wire_test t,
			     int nconn)
{
	struct hello h;
	int i, lfd, fd;

	ASSERT_LE(nconn, (int)ARRAY_SIZE(cs->fd));
	if (rs.host == 2) {
		for (i = 0; i < nconn; i++) {
			cs->fd[i] = wire_dial(_metadata, t, i, 0);
			cs->n++;
		}
		return;
	}
	lfd = wire_listen(_metadata, t);
	for (i = 0; i < nconn; i++)
		cs->fd[i] = -1;
	for (i = 0; i < nconn; i++) {
		fd = wire_accept(_metadata, lfd, t, &h);
		ASSERT_LT(h.index, (uint32_t)nconn);
		ASSERT_EQ(-1, cs->fd[h.index]);
		cs->fd[h.index] = fd;
		cs->n++;
	}
	close(lfd);
}

/*
 * Stream both ways on every connection, then exchange a verdict byte per
 * connection and close in order. Streams are keyed by (connection, the
 * sending host).
 */
static void wire_streams(struct __test_metadata *_metadata,
			 struct conns *cs, uint64_t per, bool random,
			 const char *name)
{
	struct rs_xfer *x = calloc(2 * cs->n, sizeof(*x));
	uint64_t moved = 0;
	double secs = 0;
	char mine, theirs;
	int i;

	ASSERT_NE(NULL, x);
	for (i = 0; i < cs->n; i++) {
		struct rs_xfer *tx = &x[2 * i], *rx = &x[2 * i + 1];

		tx->fd = rx->fd = cs->fd[i];
		tx->total = rx->total = per;
		tx->chunk = rx->chunk = random ? RS_MIB : 256 * RS_KIB;
		tx->random = rx->random = random;
		tx->key = rs_key(i, rs.host, 60);
		rx->key = rs_key(i, 3 - rs.host, 60);
		tx->seed = rs_mix64(rs.host * 100 + i);
		rx->seed = rs_mix64(rs.host * 100 + i + 50);
		ASSERT_EQ(0, rs_xfer_start(tx, rs_sender));
		ASSERT_EQ(0, rs_xfer_start(rx, rs_receiver));
	}
	for (i = 0; i < 2 * cs->n; i++)
		rs_xfer_join(&x[i]);
	for (i = 0; i < cs->n; i++) {
		struct rs_xfer *tx = &x[2 * i], *rx = &x[2 * i + 1];
		bool ok = !tx->err && !rx->err && !rx->mismatch &&
			  !rx->short_eof && rx->done == per;

		EXPECT_EQ(0, tx->err) TH_LOG("conn %d send: %s", i,
					     strerror(tx->err));
		RS_XFER_OK(rx, "receive");
		/* Tell the peer how its data arrived; hear how ours did. */
		mine = ok ? 'Y' : 'N';
		ASSERT_EQ(1, send(cs->fd[i], &mine, 1, 0));
		ASSERT_EQ(1, rs_recv_all(cs->fd[i], &theirs, 1, 0))
			TH_LOG("verdict: %s", strerror(errno));
		EXPECT_EQ('Y', theirs) TH_LOG("peer saw bad data on conn %d",
					      i);
		ASSERT_EQ(0, shutdown(cs->fd[i], SHUT_WR));
		ASSERT_EQ(0, recv(cs->fd[i], &theirs, 1, 0));
		moved += rx->done;
		if (rx->secs > secs)
			secs = rx->secs;
	}
	rs_info("wire.%s: host %d received %llu MiB over %d connection(s) in %.2f s: %.1f MiB/s",
		name, rs.host, (unsigned long long)(moved / RS_MIB),
		cs->n, secs, moved / RS_MIB / secs);
	free(x);
}

/*
 * The in-flight budget to other hosts (inflight_max, want: off by default,
 * docs/design.md "The in-flight budget"): each connection's share, once
 * its streams are done, and how often the share held a push back, over
 * all of them. One connection alone has the whole budget; sixteen
 * streaming at once share it and wait on it. Without a budget neither
 * appears.
 */
static void wire_budget(struct __test_metadata *_metadata, struct conns *cs,
			long long want, bool stalls)
{
	long long max = rs_param_get("inflight_max");
	unsigned long long stalled = 0;
	struct rdmastream_info i;
	socklen_t len;
	int k;

	if (rs.tcp)
		return;
	ASSERT_LE(0, max);
	EXPECT_EQ(want, max);
	for (k = 0; k < cs->n; k++) {
		len = sizeof(i);
		memset(&i, 0, sizeof(i));
		ASSERT_EQ(0, getsockopt(cs->fd[k], SOL_RDMASTREAM,
					RDMASTREAM_INFO, &i, &len));
		EXPECT_GE(max, i.rsi_tx_cap);
		if (cs->n == 1)
			EXPECT_EQ(max, i.rsi_tx_cap);
		stalled += i.rsi_cap_stalls;
	}
	if (!max) {
		EXPECT_EQ(0, stalled);
	} else if (stalls) {
		EXPECT_LT(0, stalled)
			TH_LOG("16 streams never waited on %lld bytes in flight",
			       max);
	}
}

TEST_F_TIMEOUT(wire, stream, 900)
{
	uint64_t per = rs_env_ulong("RS_WIRE_MB", 64) * RS_MIB;

	wire_connect_all(_metadata, &self->c, WT_STREAM, 1);
	wire_streams(_metadata, &self->c, per, false, "stream");
	wire_budget(_metadata, &self->c, 0, false);
}

TEST_F_TIMEOUT(wire, multi, 900)
{
	int n = rs_env_ulong("RS_WIRE_CONNS", 4);
	uint64_t per = rs_env_ulong("RS_WIRE_MB", 64) * RS_MIB;

	ASSERT_GT(n, 0);
	wire_connect_all(_metadata, &self->c, WT_MULTI, n);
	wire_streams(_metadata, &self->c, per / n, true, "multi");
}

/*
 * As many streams as rsbench -P 16, which reset on 6.1 at ack timeout 14
 * (and pass at 16), with an in-flight budget of WIRE_BUDGET on each host
 * (inflight_max, off by default): every byte still arrives, each
 * connection's share is below it, and the streams waited on it.
 */
#define WIRE_BUDGET	(256 * 1024)

TEST_F_TIMEOUT(wire, multi16, 900)
{
	uint64_t per = rs_env_ulong("RS_WIRE_MB16", 32) * RS_MIB;
	int n = 16;

	if (!rs.tcp) {
		/* off by default */
		ASSERT_EQ(0, rs_param_get("inflight_max"));
		wire_budget_old = 0;
		ASSERT_EQ(0, rs_param_set("inflight_max", WIRE_BUDGET));
	}
	wire_connect_all(_metadata, &self->c, WT_MULTI16, n);
	wire_streams(_metadata, &self->c, per / n, true, "multi16");
	wire_budget(_metadata, &self->c, WIRE_BUDGET, true);
}

/*
 * write_pkts (rs_cm.c, rs_write_cap_set()): a connection to another host
 * over rxe caps its indirect writes at write_pkts packets of its path
 * MTU, taken when it is established; a cap of 256 KiB (the largest
 * write) or more caps nothing, and so does a write_pkts whose product
 * with the MTU passes 2^32 (a u32 product wrapped to one packet before
 * 117c5cc). Each host sets its own module's write_pkts and checks its
 * own end, on one connection per round; a byte each way says the peer
 * has checked too before both close.
 */
static void wire_write_cap_round(struct __test_metadata *_metadata,
				 struct conns *cs, int round,
				 long long pkts, unsigned int want)
{
	struct rdmastream_info i;
	socklen_t len = sizeof(i);
	char c = 'w';

	ASSERT_EQ(0, rs_param_set("write_pkts", pkts));
	wire_connect_all(_metadata, cs, WT_WCAP + round, 1);
	memset(&i, 0, sizeof(i));
	ASSERT_EQ(0, getsockopt(cs->fd[0], SOL_RDMASTREAM, RDMASTREAM_INFO,
				&i, &len));
	EXPECT_EQ(rs_roce_mtu(), i.rsi_path_mtu);
	EXPECT_EQ(want, i.rsi_write_cap)
		TH_LOG("write_pkts %lld, path MTU %u: a cap of %u bytes",
		       pkts, i.rsi_path_mtu, i.rsi_write_cap);
	ASSERT_EQ(1, send(cs->fd[0], &c, 1, 0));
	ASSERT_EQ(1, rs_recv_all(cs->fd[0], &c, 1, 0))
		TH_LOG("peer's byte: %s", strerror(errno));
	ASSERT_EQ(0, close(cs->fd[0]));
	cs->n = 0;
}

TEST_F_TIMEOUT(wire, write_cap, 300)
{
	unsigned int mtu = rs_roce_mtu();
	bool rxe = rs.rdmadev && !strncmp(rs.rdmadev, "rxe", 3);

	RS_SKIP_TCP("the module's write cap");
	wire_wpkts_old = rs_param_get("write_pkts");
	ASSERT_LE(0, wire_wpkts_old);
	wire_write_cap_round(_metadata, &self->c, 0, 1, rxe ? mtu : 0);
	/* 256 KiB exactly: the largest write anyway, no cap */
	wire_write_cap_round(_metadata, &self->c, 1, (256 << 10) / mtu, 0);
	/* (2^32 / mtu + 1) * mtu is 2^32 + mtu: mtu in a u32 */
	wire_write_cap_round(_metadata, &self->c, 2,
			     (1LL << 32) / mtu + 1, 0);
}

/*
 * The ack timeout under load (rs_rto_load_floor(), docs/lossy-links.md,
 * "Under load"): rxe has no congestion control, so a host's n-th
 * connection to other hosts takes a floor one exponent higher for each
 * doubling of n past 64, at most 18. With WIRE_LOAD connections open
 * and ack_timeout_min at 16 on both hosts (6.1's default: the same
 * figures on every kernel), each host checks its end of each: the k-th
 * has at least 268 ms up to 64, 536 ms up to 128, 1.07 s beyond (more
 * if other connections were still open). Then all close, the host's
 * count (module parameter remote_conns) goes back to 0 once every
 * transport is gone, and a new connection has the floor again (a count
 * that leaked would give every later connection the longer timeout).
 */
#define WIRE_LOAD	130
#define WIRE_LOAD_MIN	16

/* the exponent the k-th connection (from 1) must have at least */
static unsigned int wire_load_exp(int k)
{
	unsigned int exp = WIRE_LOAD_MIN;
	int n;

	for (n = 64; k > n && exp < 18; n *= 2)
		exp++;
	return exp;
}

/* 4.096 us << exp, in us, rounded down */
static unsigned int wire_exp_us(unsigned int exp)
{
	return (unsigned int)((4096ULL << exp) / 1000);
}

static unsigned int wire_ack_us(struct __test_metadata *_metadata, int fd)
{
	struct rdmastream_info i;
	socklen_t len = sizeof(i);

	memset(&i, 0, sizeof(i));
	EXPECT_EQ(0, getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &i,
				&len));
	EXPECT_EQ(7, i.rsi_retry_count);
	return i.rsi_ack_timeout_us;
}

/*
 * A byte each way on every connection of cs: all are alive (a dead one
 * is named with its error, the first three of them). Returns how many
 * failed.
 */
static int wire_ping_all(struct __test_metadata *_metadata,
			 struct conns *cs)
{
	int k, bad = 0;
	ssize_t n;
	char c = 'p';

	for (k = 0; k < cs->n; k++)
		if (send(cs->fd[k], &c, 1, 0) != 1 && ++bad <= 3)
			TH_LOG("connection %d: send: %s", k + 1,
			       strerror(errno));
	for (k = 0; k < cs->n; k++) {
		rs_set_timeo(cs->fd[k], SO_RCVTIMEO, 30000);
		n = rs_recv_all(cs->fd[k], &c, 1, 0);
		if (n != 1 && ++bad <= 3)
			TH_LOG("connection %d: recv: %s", k + 1,
			       n ? strerror(errno) : "EOF");
	}
	EXPECT_EQ(0, bad);
	return bad;
}

/* wait (at most 60 s) until this host's connections are all torn down */
static void wire_wait_torn(struct __test_metadata *_metadata)
{
	double end = rs_now() + 60;

	while (rs_param_get("remote_conns") > 0 && rs_now() < end)
		rs_msleep(200);
	EXPECT_EQ(0, rs_param_get("remote_conns"))
		TH_LOG("connections to the other host still counted 60 s after all closed");
}

TEST_F_TIMEOUT(wire, load_floor, 300)
{
	bool rxe = rs.rdmadev && !strncmp(rs.rdmadev, "rxe", 3);
	unsigned int us, want, seen[4] = { 0 };
	int k;

	RS_SKIP_TCP("the module's ack timeout");
	if (!rxe)
		SKIP(return, "the load floor is for rxe (%s)",
		     rs.rdmadev ? rs.rdmadev : "no device");
	wire_ackmin_old = rs_param_get("ack_timeout_min");
	ASSERT_LE(0, wire_ackmin_old);
	ASSERT_EQ(0, rs_param_set("ack_timeout_min", WIRE_LOAD_MIN));
	wire_connect_all(_metadata, &self->c, WT_LOAD, WIRE_LOAD);
	/* all alive, and every end counts (an earlier test's may too) */
	wire_ping_all(_metadata, &self->c);
	EXPECT_LE(WIRE_LOAD, rs_param_get("remote_conns"));
	for (k = 1; k <= WIRE_LOAD; k++) {
		us = wire_ack_us(_metadata, self->c.fd[k - 1]);
		want = wire_exp_us(wire_load_exp(k));
		EXPECT_LE(want, us)
			TH_LOG("connection %d of %d: ack timeout %u us", k,
			       WIRE_LOAD, us);
		seen[(k > 1) + (k > 64) + (k > 128)] = us;
		if (us < want)
			break;	/* one is enough to say so */
	}
	/* the last ones: the longest there is, 1.07 s */
	EXPECT_EQ(18, wire_load_exp(WIRE_LOAD));
	/*
	 * both hosts are done looking before either closes: a peer's close
	 * tears the transport down, and the count with it
	 */
	wire_ping_all(_metadata, &self->c);
	for (k = 0; k < WIRE_LOAD; k++)
		close(self->c.fd[k]);
	self->c.n = 0;
	wire_wait_torn(_metadata);
	wire_connect_all(_metadata, &self->c, WT_LOAD_AFTER, 1);
	us = wire_ack_us(_metadata, self->c.fd[0]);
	EXPECT_GT(wire_exp_us(WIRE_LOAD_MIN + 1), us)
		TH_LOG("a connection after the %d closed: ack timeout %u us",
		       WIRE_LOAD, us);
	rs_info("wire.load_floor: host %d, ack timeout of connection 1, 64, 128, 130: %u, %u, %u, %u us; after all closed %u us",
		rs.host, seen[0], seen[1], seen[2], seen[3], us);
	close(self->c.fd[0]);
	self->c.n = 0;
}

/* Over IPv6: rdma_cm resolves the peer's 2001:2:: address through rxe0. */
TEST_F_TIMEOUT(wire, stream6, 900)
{
	uint64_t per = rs_env_ulong("RS_WIRE_MB6", 16) * RS_MIB;

	wire_connect_all(_metadata, &self->c, WT_STREAM6, 1);
	wire_streams(_metadata, &self->c, per, false, "stream6");
}

/* ---- peer_death ---- */

/*
 * A host dies once per run: through AF_RDMASTREAM, which run-tests runs
 * last. The IPPROTO route (RS_FAMILY=inet) changes nothing of how a dead
 * peer is found, so there it is an expected skip.
 */
static const char *die_mode(void)
{
	return rs_env_str("RS_WIRE_DIE", rs.ip && !rs.tcp ? "none" : "o");
}

/* Host 2: can and will we power off? NULL if so, else why not. */
static const char *cannot_die(void)
{
	const char *m = die_mode();

	if (!strcmp(m, "none"))
		return "RS_WIRE_DIE=none";
	if (!strcmp(m, "kill"))
		return NULL;
	if (strcmp(m, "o") && strcmp(m, "b"))
		return "RS_WIRE_DIE must be o, b, kill or none";
	if (access("/proc/sysrq-trigger", W_OK))
		return "cannot write /proc/sysrq-trigger";
	return NULL;
}

static void pending_marker(bool create)
{
	char path[512];
	int fd;

	if (!rs.out)
		return;
	snprintf(path, sizeof(path), "%s/wire-poweroff-pending", rs.out);
	if (!create) {
		unlink(path);
		return;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		dprintf(fd, "%s %lu\n", die_mode(),
			rs_env_ulong("RS_WIRE_DIE_DELAY", 15));
		close(fd);
	}
}

/*
 * Host 2, in a process of its own: keep reading fd until the delay has
 * passed, then die without closing anything.
 */
static void __attribute__((noreturn)) doomed(int fd, unsigned int delay)
{
	double end = rs_now() + delay;
	static char buf[65536];
	int null, trig;

	setsid();
	null = open("/dev/null", O_RDWR);
	dup2(null, 0);
	dup2(null, 1);
	dup2(null, 2);
	signal(SIGPIPE, SIG_IGN);
	alarm(0);
	rs_set_timeo(fd, SO_RCVTIMEO, 100);
	while (rs_now() < end)
		if (!recv(fd, buf, sizeof(buf), 0))
			break;
	if (!strcmp(die_mode(), "kill"))
		kill(getpid(), SIGKILL);
	sync();
	trig = open("/proc/sysrq-trigger", O_WRONLY);
	if (trig >= 0) {
		if (write(trig, die_mode(), 1) < 0)
			_exit(1);
	}
	/* Still alive: hold on to the sockets rather than close them. */
	for (;;)
		pause();
}

static void death_host2(struct __test_metadata *_metadata,
			struct conns *cs)
{
	const char *why = cannot_die();
	uint64_t key = rs_key(0, 1, 61), got = 0;
	static char buf[65536];
	double end;
	ssize_t n;
	pid_t pid;

	/* Connection 0: data from host 1. Connection 1: idle. */
	cs->fd[0] = wire_dial(_metadata, WT_DEATH, 0, why ? 0 : HELLO_DIES);
	cs->n = 1;
	cs->fd[1] = wire_dial(_metadata, WT_DEATH, 1, why ? 0 : HELLO_DIES);
	cs->n = 2;
	if (why)
		SKIP(return, "%s", why);

	/* Make sure data flows, then leave it to a doomed process. */
	end = rs_now() + 2;
	while (rs_now() < end) {
		n = recv(cs->fd[0], buf, sizeof(buf), 0);
		ASSERT_GT(n, 0) TH_LOG("recv: %s", n ? strerror(errno) :
				       "EOF");
		ASSERT_EQ(n, rs_pat_check(buf, n, key, got));
		got += n;
	}
	rs_info("wire.peer_death: host 2 got %llu bytes; powering off (%s) in %lu s",
		(unsigned long long)got, die_mode(),
		rs_env_ulong("RS_WIRE_DIE_DELAY", 15));
	if (strcmp(die_mode(), "kill"))
		pending_marker(true);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid)
		doomed(cs->fd[0], rs_env_ulong("RS_WIRE_DIE_DELAY", 15));
	/* Our copies go; the doomed process keeps the connections. */
}

struct idle_reader {
	int fd;
	ssize_t ret;
	int err;
	double when;
	bool done;		/* __atomic */
	pthread_t thr;
};

static void *idle_reader_fn(void *arg)
{
	struct idle_reader *r = arg;
	char b;

	r->ret = recv(r->fd, &b, 1, 0);
	r->err = errno;
	r->when = rs_now();
	__atomic_store_n(&r->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static bool death_errno(int err)
{
	return err == ETIMEDOUT || err == ECONNRESET || err == EPIPE ||
	       err == EHOSTUNREACH || err == ECONNABORTED;
}

static void death_host1(struct __test_metadata *_metadata,
			struct conns *cs)
{
	unsigned int limit = rs_env_ulong("RS_WIRE_DEATH_SEC", 60);
	struct idle_reader r = { };
	uint64_t key = rs_key(0, 1, 61), sent = 0;
	static char buf[65536];
	double last, t0, giveup;
	struct hello h[2];
	int lfd, fd, i;
	ssize_t n;

	lfd = wire_listen(_metadata, WT_DEATH);
	for (i = 0; i < 2; i++) {
		struct hello hh;

		fd = wire_accept(_metadata, lfd, WT_DEATH, &hh);
		ASSERT_LT(hh.index, 2);
		cs->fd[hh.index] = fd;
		h[hh.index] = hh;
		cs->n++;
	}
	close(lfd);
	if (!(h[0].flags & HELLO_DIES))
		SKIP(return, "host 2 will not die (see its RS_WIRE_DIE)");

	/*
	 * The idle one: blocked in recv() with keepalive on. rdmastream
	 * probes every keepalive_secs (module-wide): make that 2 s here.
	 */
	if (!rs.tcp)
		ASSERT_EQ(0, rs_system("echo 2 > /sys/module/%s/parameters/keepalive_secs",
				       rs_env_str("RS_MODNAME", "rdmastream")));
	ASSERT_EQ(0, rs_setint(cs->fd[1], SOL_SOCKET, SO_KEEPALIVE, 1));
	if (rs.tcp) {
		rs_setint(cs->fd[1], IPPROTO_TCP, TCP_KEEPIDLE, 5);
		rs_setint(cs->fd[1], IPPROTO_TCP, TCP_KEEPINTVL, 2);
		rs_setint(cs->fd[1], IPPROTO_TCP, TCP_KEEPCNT, 3);
		/* What an RDMA RC QP's retry limit does on its own. */
		rs_setint(cs->fd[0], IPPROTO_TCP, TCP_USER_TIMEOUT,
			  limit * 1000 / 2);
	}
	r.fd = cs->fd[1];
	ASSERT_EQ(0, pthread_create(&r.thr, NULL, idle_reader_fn, &r));

	/*
	 * Keep sending. Once the peer is gone the sends stall; an error
	 * must come within limit seconds of the last progress.
	 */
	ASSERT_EQ(0, rs_set_timeo(cs->fd[0], SO_SNDTIMEO, 1000));
	t0 = last = rs_now();
	giveup = t0 + wire_wait() + limit;
	for (;;) {
		rs_pat_fill(buf, sizeof(buf), key, sent);
		n = send(cs->fd[0], buf, sizeof(buf), MSG_NOSIGNAL);
		if (n > 0) {
			sent += n;
			last = rs_now();
		} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			break;
		}
		ASSERT_LT(rs_now() - last, limit)
			TH_LOG("send stalled %u s without an error (%llu bytes sent)",
			       limit, (unsigned long long)sent);
		ASSERT_LT(rs_now(), giveup)
			TH_LOG("host 2 never went away");
	}
	EXPECT_TRUE(death_errno(errno)) TH_LOG("send: %s", strerror(errno));
	rs_info("wire.peer_death: host 1 sent %llu bytes, then %s %.1f s after the last progress",
		(unsigned long long)sent, strerror(errno), rs_now() - last);

	/*
	 * Asserted for rdmastream, whose keepalive probe is an RDMA WRITE
	 * that the dead peer never acknowledges; not for TCP, which may
	 * legitimately wait much longer.
	 */
	for (i = 0; i < (rs.tcp ? 50 : (int)limit * 10) &&
	     !__atomic_load_n(&r.done, __ATOMIC_ACQUIRE); i++)
		rs_msleep(100);
	if (!rs.tcp) {
		rs_system("echo 15 > /sys/module/%s/parameters/keepalive_secs",
			  rs_env_str("RS_MODNAME", "rdmastream"));
		EXPECT_TRUE(__atomic_load_n(&r.done, __ATOMIC_ACQUIRE))
			TH_LOG("idle keepalive recv still blocked");
		EXPECT_TRUE(r.ret < 0 && death_errno(r.err))
			TH_LOG("idle keepalive recv: %zd, %s", r.ret,
			       strerror(r.err));
	}
	if (__atomic_load_n(&r.done, __ATOMIC_ACQUIRE))
		rs_info("wire.peer_death: idle keepalive recv returned %zd (%s) %.1f s after the send error",
			r.ret, r.ret < 0 ? strerror(r.err) : "EOF",
			r.when - last);
	else
		rs_info("wire.peer_death: idle keepalive recv still blocked");
}

TEST_F_TIMEOUT(wire, peer_death, 900)
{
	if (rs.host == 1)
		death_host1(_metadata, &self->c);
	else
		death_host2(_metadata, &self->c);
}

TEST_HARNESS_MAIN
