// SPDX-License-Identifier: GPL-2.0
/*
 * Destructive tests of rdmastream, run last: RDMA resource accounting,
 * removal of the RDMA device under live connections, and unloading the
 * module while it is in use, the ipproto parameter and the family number. They need root, the "rdma" tool, RS_RDMADEV,
 * RS_NETDEV and RS_MODULE, and are skipped under RS_FAMILY=tcp.
 *
 * Knobs: RS_LEAK_CONNS (100), RS_LEAK_SETTLE (30 s), RS_FAULT_SEC (10),
 * RS_MODNAME (rdmastream), RS_MODULE_PARAMS (default: the parameters the
 * module is loaded with now, read from /sys/module/NAME/parameters).
 */
#include "rs_common.h"

#include <sys/mount.h>

#include <dirent.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static unsigned int fault_sec(void)
{
	return rs_env_ulong("RS_FAULT_SEC", 10);
}

/* ---- rdma resource accounting ---- */

enum { RES_PD, RES_CQ, RES_QP, RES_CM_ID, RES_MR, RES_N };
static const char * const res_names[RES_N] = {
	"pd", "cq", "qp", "cm_id", "mr",
};

/* Counts of `rdma res show` for RS_RDMADEV; -1 if not available. */
static int res_read(long cnt[RES_N])
{
	char line[1024], dev[64], *tok, *save, *name = NULL;
	bool in_dev = false;
	FILE *f;
	int i, found = -1;

	for (i = 0; i < RES_N; i++)
		cnt[i] = -1;
	snprintf(dev, sizeof(dev), "%s:", rs.rdmadev);
	f = popen("rdma res show 2>/dev/null", "r");
	if (!f)
		return -1;
	/* "0: rxe0: pd 1 cq 2 qp 1 cm_id 0 mr 0 ctx 0 srq 0" */
	while (fgets(line, sizeof(line), f)) {
		in_dev = false;
		name = NULL;
		for (tok = strtok_r(line, " \t\n", &save); tok;
		     tok = strtok_r(NULL, " \t\n", &save)) {
			if (!strcmp(tok, dev)) {
				in_dev = true;
				found = 0;
				continue;
			}
			if (!in_dev)
				continue;
			if (!name) {
				name = tok;
				continue;
			}
			for (i = 0; i < RES_N; i++)
				if (!strcmp(name, res_names[i]))
					cnt[i] = strtol(tok, NULL, 10);
			name = NULL;
		}
	}
	pclose(f);
	for (i = 0; i < RES_N && !found; i++)
		if (cnt[i] < 0)
			found = -1;
	return found;
}

static void res_str(const long cnt[RES_N], char *buf, size_t len)
{
	size_t off = 0;
	int i;

	buf[0] = 0;
	for (i = 0; i < RES_N && off < len; i++)
		off += snprintf(buf + off, len - off, "%s%s %ld",
				i ? " " : "", res_names[i], cnt[i]);
}

static bool res_eq(const long a[RES_N], const long b[RES_N])
{
	return !memcmp(a, b, sizeof(long) * RES_N);
}

/* Is every count of a at most b's? */
static bool res_le(const long a[RES_N], const long b[RES_N])
{
	for (int i = 0; i < RES_N; i++)
		if (a[i] > b[i])
			return false;
	return true;
}

/* Wait until two readings a second apart agree; returns 0 when stable. */
static int res_stable(long cnt[RES_N], unsigned int secs)
{
	double end = rs_now() + secs;
	long prev[RES_N];

	if (res_read(prev))
		return -1;
	do {
		rs_msleep(1000);
		if (res_read(cnt))
			return -1;
		if (res_eq(prev, cnt))
			return 0;
		memcpy(prev, cnt, sizeof(prev));
	} while (rs_now() < end);
	return 1;
}

static const char *need_rdma(void)
{
	long cnt[RES_N];

	if (rs.tcp)
		return "not applicable to TCP: RDMA resources";
	if (!rs_have_cmd("rdma"))
		return "no rdma tool";
	if (res_read(cnt))
		return "rdma res show has no counts for RS_RDMADEV";
	return NULL;
}

/* One connection's life, ended in one of several ways. */
static void leak_one(struct __test_metadata *_metadata, int c, int s,
		     unsigned int how)
{
	uint64_t k = rs_key(how, 0, 70);
	char buf[16384];	/* fits in the buffers without a reader */

	rs_pat_fill(buf, sizeof(buf), k, 0);
	ASSERT_EQ(sizeof(buf), rs_send_all(c, buf, sizeof(buf), 0));
	ASSERT_EQ(sizeof(buf), rs_recv_all(s, buf, sizeof(buf), 0));
	ASSERT_EQ(sizeof(buf), rs_pat_check(buf, sizeof(buf), k, 0));
	ASSERT_EQ(5, send(s, "reply", 5, 0));
	ASSERT_EQ(5, rs_recv_all(c, buf, 5, 0));
	switch (how % 5) {
	case 0:		/* client closes first */
		close(c);
		close(s);
		break;
	case 1:		/* server closes first */
		close(s);
		close(c);
		break;
	case 2:		/* orderly shutdown, then close */
		shutdown(c, SHUT_WR);
		recv(s, buf, 1, 0);
		shutdown(s, SHUT_WR);
		recv(c, buf, 1, 0);
		close(c);
		close(s);
		break;
	case 3:		/* close with unread data: reset */
		send(c, "unread", 6, 0);
		rs_wait_inq(s, 6, 1000);
		close(s);
		close(c);
		break;
	default:	/* abortive close */
	{
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(c);
		close(s);
	}
	}
}

FIXTURE(res)
{
};

FIXTURE_SETUP(res)
{
}

FIXTURE_TEARDOWN(res)
{
}

TEST_F_TIMEOUT(res, leak, 600)
{
	unsigned int total = rs_env_ulong("RS_LEAK_CONNS", 100);
	unsigned int settle = rs_env_ulong("RS_LEAK_SETTLE", 30);
	long base[RES_N], busy[RES_N], now[RES_N], socks0, socks;
	const char *why = need_rdma();
	struct sockaddr_in sin, dead;
	int c[10], s[10], lfd, hold, fd;
	unsigned int i, j, n = 0;
	char a[128], b[128];
	double end;

	if (why)
		SKIP(return, "%s", why);
	rs_watchdog(600);
	/* one connection first: the device's CQ pool grows once, then stays */
	lfd = rs_listener_opts(_metadata, &sin, 16, 0);
	c[0] = rs_connect(_metadata, &sin);
	s[0] = rs_accept(_metadata, lfd);
	leak_one(_metadata, c[0], s[0], 0);
	close(lfd);
	ASSERT_EQ(0, res_stable(base, 10))
		TH_LOG("resource counts do not settle");
	res_str(base, a, sizeof(a));
	socks0 = rs_proto_sockets();
	rs_info("res_leak: baseline %s, sockets %ld", a, socks0);

	lfd = rs_listener_opts(_metadata, &sin, 16, 0);
	hold = rs_bound(_metadata, 0, &dead);
	while (n < total) {
		/* Ten connections open at once... */
		for (i = 0; i < 10; i++) {
			c[i] = rs_connect(_metadata, &sin);
			s[i] = rs_accept(_metadata, lfd);
		}
		if (!n) {
			ASSERT_EQ(0, res_read(busy));
			res_str(busy, b, sizeof(b));
			rs_info("res_leak: 10 connections open: %s", b);
			/* ...must show up, or we count the wrong thing. */
			ASSERT_GE(busy[RES_QP], base[RES_QP] + 10)
				TH_LOG("QPs of the connections not seen");
			ASSERT_GE(rs_proto_sockets(), socks0 + 20)
				TH_LOG("sockets of the connections not seen");
		}
		for (i = 0; i < 10; i++)
			leak_one(_metadata, c[i], s[i], n + i);
		/* ...and a refused connect for good measure. */
		fd = rs_socket(0);
		ASSERT_GE(fd, 0);
		EXPECT_EQ(-1, connect(fd, (struct sockaddr *)&dead,
				      sizeof(dead)));
		close(fd);
		n += 10;
	}
	close(hold);
	close(lfd);

	/* Everything goes back to where it was. */
	end = rs_now() + settle;
	do {
		rs_msleep(500);
		ASSERT_EQ(0, res_read(now));
		socks = rs_proto_sockets();
		/*
		 * fewer is fine: an earlier test's orphan may have ended, or
		 * its PD stopped lingering (rxe before 6.0, kmod/rs_pd.c)
		 */
		if (res_le(now, base) && socks <= socks0)
			break;
	} while (rs_now() < end);
	res_str(now, b, sizeof(b));
	rs_info("res_leak: after %u connections: %s, sockets %ld", n, b,
		socks);
	EXPECT_GE(socks0, 0);
	EXPECT_LE(socks, socks0)
		TH_LOG("sockets: %ld before, %ld after", socks0, socks);
	for (j = 0; j < RES_N; j++) {
		EXPECT_LE(now[j], base[j])
			TH_LOG("%s: %ld before, %ld after %u s", res_names[j],
			       base[j], now[j], settle);
	}
}

/* ---- tracepoints ---- */

/* A connection's life shows up in the rdmastream trace events. */
TEST(trace_events)
{
	const char *dir;
	char path[256], line[512];
	bool cm = false, state = false, teardown = false;
	int c, s;
	FILE *f;

	RS_SKIP_TCP("module tracepoints");
	rs_watchdog(60);
	dir = rs_tracefs();
	ASSERT_NE(NULL, dir) TH_LOG("no tracefs");
	ASSERT_EQ(0, rs_trace_write("trace", ""));
	ASSERT_EQ(0, rs_trace_write("events/rdmastream/enable", "1"))
		TH_LOG("cannot enable the rdmastream events");
	rs_pair(_metadata, &c, &s);
	close(c);
	close(s);
	rs_msleep(1000);	/* the teardown work runs after close() */
	rs_trace_write("events/rdmastream/enable", "0");
	snprintf(path, sizeof(path), "%s/trace", dir);
	f = fopen(path, "r");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, "rdmastream_cm_event") &&
		    strstr(line, " ESTABLISHED status=0"))
			cm = true;
		if (strstr(line, "rdmastream_state") &&
		    strstr(line, "-> ESTABLISHED"))
			state = true;
		if (strstr(line, "rdmastream_teardown"))
			teardown = true;
	}
	fclose(f);
	EXPECT_TRUE(cm);
	EXPECT_TRUE(state);
	EXPECT_TRUE(teardown);
}

/* ---- module parameters ---- */

/*
 * Writes of a bounded parameter outside its bounds fail with EINVAL and
 * change nothing; good is the largest value it takes.
 */
static void param_bounds(struct __test_metadata *_metadata, const char *name,
			 const char * const *bad, size_t nbad, long good)
{
	char old[32], val[32];
	long was;
	size_t i;

	was = rs_param_get(name);
	ASSERT_LE(0, was) TH_LOG("cannot read %s", name);
	for (i = 0; i < nbad; i++) {
		EXPECT_EQ(EINVAL, rs_param_write(name, bad[i]))
			TH_LOG("%s: writing %s", name, bad[i]);
		EXPECT_EQ(was, rs_param_get(name))
			TH_LOG("%s: after writing %s", name, bad[i]);
	}
	snprintf(val, sizeof(val), "%ld", good);
	EXPECT_EQ(0, rs_param_write(name, val));
	EXPECT_EQ(good, rs_param_get(name));
	snprintf(old, sizeof(old), "%ld", was);
	EXPECT_EQ(0, rs_param_write(name, old));
	EXPECT_EQ(was, rs_param_get(name));
}

/*
 * keepalive_secs can be written at run time; 0 would make every
 * keepalive timer fire each tick, and values beyond TCP's keepalive
 * bound overflow in jiffies. Those writes fail and change nothing.
 */
TEST(keepalive_param)
{
	static const char * const bad[] = { "0", "32768", "4294967295", "-1",
					    "x" };

	RS_SKIP_TCP("module parameter");
	param_bounds(_metadata, "keepalive_secs", bad, ARRAY_SIZE(bad), 32767);
}

/*
 * spin_max_us (adaptive receive polling) is read at every wait: 0 turns
 * it off, more than 10 ms of spinning is refused.
 */
TEST(spin_param)
{
	static const char * const bad[] = { "10001", "4294967295", "-1", "x" };

	long long was = rs_param_get("spin_max_us");

	RS_SKIP_TCP("module parameter");
	param_bounds(_metadata, "spin_max_us", bad, ARRAY_SIZE(bad), 10000);
	EXPECT_EQ(0, rs_param_set("spin_max_us", 0)) TH_LOG("0 turns it off");
	EXPECT_EQ(0, rs_param_get("spin_max_us"));
	EXPECT_EQ(0, rs_param_set("spin_max_us", was));
}

/*
 * The QP ack timeout's floor and first-contact value (docs/
 * lossy-links.md) are exponents of 4.096 us: below 8 (1 ms) or above 20
 * (4.3 s) is refused.
 */
TEST(ack_timeout_params)
{
	static const char * const bad[] = { "7", "21", "4294967295", "-1",
					    "x" };

	RS_SKIP_TCP("module parameter");
	param_bounds(_metadata, "ack_timeout_min", bad, ARRAY_SIZE(bad), 20);
	param_bounds(_metadata, "ack_timeout_first", bad, ARRAY_SIZE(bad), 20);
}

/*
 * A connected pair's RDMASTREAM_INFO (client, server) once both ends
 * have measured a round trip: each sends its SETUP as a sample.
 */
static void pair_info(struct __test_metadata *_metadata,
		      struct rdmastream_info *ci, struct rdmastream_info *si)
{
	double end = rs_now() + 5;
	socklen_t len;
	int cfd, sfd;
	char c = 'x';

	rs_pair(_metadata, &cfd, &sfd);
	ASSERT_EQ(1, send(cfd, &c, 1, 0));
	ASSERT_EQ(1, recv(sfd, &c, 1, 0));
	ASSERT_EQ(1, send(sfd, &c, 1, 0));
	ASSERT_EQ(1, recv(cfd, &c, 1, 0));
	do {
		len = sizeof(*ci);
		ASSERT_EQ(0, getsockopt(cfd, SOL_RDMASTREAM, RDMASTREAM_INFO,
					ci, &len));
		len = sizeof(*si);
		ASSERT_EQ(0, getsockopt(sfd, SOL_RDMASTREAM, RDMASTREAM_INFO,
					si, &len));
		if (ci->rsi_rtt_us && si->rsi_rtt_us)
			break;
		rs_msleep(10);
	} while (rs_now() < end);
	/* a pair within the host is no connection to another host */
	EXPECT_EQ(0, rs_param_get("remote_conns"));
	close(cfd);
	close(sfd);
	rs_info("ack timeout %u/%u us, retry %u/%u, round trip %u/%u us, cached %u+-%u/%u+-%u us",
		ci->rsi_ack_timeout_us, si->rsi_ack_timeout_us,
		ci->rsi_retry_count, si->rsi_retry_count, ci->rsi_rtt_us,
		si->rsi_rtt_us, ci->rsi_base_rtt_us, ci->rsi_base_rttvar_us,
		si->rsi_base_rtt_us, si->rsi_base_rttvar_us);
}

#define EXPECT_ACK(i, floor, first)					\
	EXPECT_EQ(rs_ack_want_us((i).rsi_base_rtt_us,			\
				 (i).rsi_base_rttvar_us, floor, first),	\
		  (i).rsi_ack_timeout_us)

/*
 * Each end of a connection measures round trips (small signalled work
 * requests, post to completion), and the next connection to that peer
 * takes its QP ack timeout from them: the smallest 4.096 us << n that
 * covers SRTT + 4 RTTVAR, at least ack_timeout_min; a peer not yet known
 * gets ack_timeout_first, or less when the handshake shows a shorter
 * round trip (the REQ to REP time on the active side, whose QP reaches
 * RTS at the REP; the REP to RTU time on the passive side, at the RTU). rxe's QPs retry for ever (retry count 7), and
 * their path MTU is the largest RoCE MTU the netdev allows. A peer on the
 * LAN gets well under 268 ms with the module's defaults.
 */
FIXTURE(acks) {
	long long min, first, budget;
	char alias[32];		/* an address the test added, or "" */
};

FIXTURE_SETUP(acks)
{
	self->min = rs_param_get("ack_timeout_min");
	self->first = rs_param_get("ack_timeout_first");
	self->budget = rs_param_get("inflight_max");
}

/* what the test changed goes back even if it stopped on an ASSERT */
FIXTURE_TEARDOWN(acks)
{
	if (self->min >= 0)
		rs_param_set("ack_timeout_min", self->min);
	if (self->first >= 0)
		rs_param_set("ack_timeout_first", self->first);
	if (self->budget >= 0)
		rs_param_set("inflight_max", self->budget);
	if (self->alias[0])
		rs_system("ip addr del %s/32 dev %s", self->alias,
			  rs.netdev ? rs.netdev : "eth0");
}

TEST_F(acks, ack_timeout)
{
	long long min = self->min, first = self->first;
	struct rdmastream_info ci, si;

	RS_SKIP_TCP("module parameter");
	ASSERT_LE(0, min);
	ASSERT_LE(0, first);
	/*
	 * the default floor: 14 (16 before 6.10, where rxe's timer is stale:
	 * docs/lossy-links.md, "The floor"); no in-flight budget by default,
	 * and a loopback pair takes no share of one
	 */
	EXPECT_EQ(rs_kernel_before(6, 10) ? 16 : 14, min);
	EXPECT_EQ(0, rs_param_get("inflight_max"));
	ASSERT_EQ(0, rs_param_set("inflight_max", 256 * 1024));
	pair_info(_metadata, &ci, &si);
	EXPECT_EQ(0, rs_param_set("inflight_max", 0));
	EXPECT_LT(0, ci.rsi_rtt_us) TH_LOG("no round trip measured");
	EXPECT_LT(0, si.rsi_rtt_us);
	EXPECT_EQ(7, ci.rsi_retry_count);
	EXPECT_EQ(7, si.rsi_retry_count);
	EXPECT_EQ(rs_roce_mtu(), ci.rsi_path_mtu);
	EXPECT_EQ(rs_roce_mtu(), si.rsi_path_mtu);
	/*
	 * a first contact: the handshake chose it (REQ to REP on the
	 * client, REP to RTU on the server), between the floor and
	 * ack_timeout_first (how far below depends on how long the
	 * handshake took on this host)
	 */
	if (ci.rsi_base_rtt_us) {
		EXPECT_ACK(ci, min, first);
	} else {
		EXPECT_LE(rs_ack_exp_us(min), ci.rsi_ack_timeout_us);
		EXPECT_GE(rs_ack_exp_us(first), ci.rsi_ack_timeout_us);
	}
	if (si.rsi_base_rtt_us) {
		EXPECT_ACK(si, min, first);
	} else {
		EXPECT_LE(rs_ack_exp_us(min), si.rsi_ack_timeout_us);
		EXPECT_GE(rs_ack_exp_us(first), si.rsi_ack_timeout_us);
	}
	/* rxe loops this pair back: no link queue, no in-flight budget */
	EXPECT_EQ(0, ci.rsi_tx_cap);
	EXPECT_EQ(0, si.rsi_tx_cap);
	/* ...and no cap on its writes' length (write_pkts) */
	EXPECT_EQ(0, ci.rsi_write_cap);
	EXPECT_EQ(0, si.rsi_write_cap);

	/* the peer is known now; other floors and first-contact values */
	ASSERT_EQ(0, rs_param_set("ack_timeout_min", 16));
	ASSERT_EQ(0, rs_param_set("ack_timeout_first", 20));
	pair_info(_metadata, &ci, &si);
	EXPECT_EQ(0, rs_param_set("ack_timeout_min", min));
	EXPECT_EQ(0, rs_param_set("ack_timeout_first", first));
	ASSERT_LT(0, ci.rsi_base_rtt_us) TH_LOG("the first pair not cached");
	ASSERT_LT(0, si.rsi_base_rtt_us);
	EXPECT_ACK(ci, 16, 20);
	EXPECT_ACK(si, 16, 20);
	EXPECT_LE(rs_ack_exp_us(16), ci.rsi_ack_timeout_us);

	ASSERT_EQ(0, rs_param_set("ack_timeout_min", 8));
	pair_info(_metadata, &ci, &si);
	EXPECT_EQ(0, rs_param_set("ack_timeout_min", min));
	EXPECT_ACK(ci, 8, first);
	EXPECT_ACK(si, 8, first);
	EXPECT_GE(ci.rsi_ack_timeout_us, ci.rsi_base_rtt_us);

	/*
	 * with the module's own floor below 16, a loss on this LAN costs less
	 * than 268 ms (until 2026-11-24 it cost at least that: 0.1-0.35x
	 * TCP's throughput at 1 % loss, docs/lossy-links.md "The floor"),
	 * unless TCG made the cached round trip look like a long path's;
	 * before 6.10 the floor is 16, and the timeout at least that
	 */
	pair_info(_metadata, &ci, &si);
	if (min >= 16) {
		EXPECT_LE(rs_ack_exp_us(min), ci.rsi_ack_timeout_us);
		EXPECT_LE(rs_ack_exp_us(min), si.rsi_ack_timeout_us);
		return;
	}
	if (ci.rsi_base_rtt_us + 4ULL * ci.rsi_base_rttvar_us < 100000)
		EXPECT_GT(rs_ack_exp_us(16), ci.rsi_ack_timeout_us)
			TH_LOG("ack_timeout_min %lld", min);
	if (si.rsi_base_rtt_us + 4ULL * si.rsi_base_rttvar_us < 100000)
		EXPECT_GT(rs_ack_exp_us(16), si.rsi_ack_timeout_us)
			TH_LOG("ack_timeout_min %lld", min);
}

/* Has RS_RDMADEV a GID for the IPv4 address a (as ::ffff:a.b.c.d)? */
static bool gid_present(struct in_addr a)
{
	unsigned char *b = (unsigned char *)&a.s_addr;
	char path[256], want[64], got[64];
	bool found = false;
	FILE *f;
	int i;

	snprintf(want, sizeof(want),
		 "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x",
		 b[0], b[1], b[2], b[3]);
	for (i = 0; i < 64 && !found; i++) {
		snprintf(path, sizeof(path),
			 "/sys/class/infiniband/%s/ports/1/gids/%d", rs.rdmadev,
			 i);
		f = fopen(path, "r");
		if (!f)
			continue;
		found = fgets(got, sizeof(got), f) && !strncmp(got, want,
							       strlen(want));
		fclose(f);
	}
	return found;
}

/*
 * A first contact: no round trip is cached for the peer, and each end
 * takes its ack timeout from the handshake: the active side, whose QP
 * reaches RTS at the REP, from the REQ to REP time; the passive side,
 * whose QP reaches RTS at the RTU, from the REP to RTU time (a few ms
 * here), well below a first of 4.3 s. The peer is an address added for
 * the test (nothing connected to it before), the floor 8 (1 ms).
 */
TEST_F(acks, first_contact_from_handshake)
{
	const char *dev = rs.netdev ? rs.netdev : "eth0";
	struct rdmastream_info ci, si;
	struct sockaddr_in sin;
	struct in_addr a;
	int i, lfd, cfd, sfd;
	socklen_t len;

	RS_SKIP_TCP("module parameter");
	/* 198.19.254.0/24: the test ranges, away from the VMs' own */
	snprintf(self->alias, sizeof(self->alias), "198.19.254.%d",
		 1 + getpid() % 250);
	ASSERT_EQ(1, inet_pton(AF_INET, self->alias, &a));
	if (rs_system("ip addr add %s/32 dev %s", self->alias, dev)) {
		self->alias[0] = 0;
		ASSERT_TRUE(0) TH_LOG("cannot add the test's address");
	}
	for (i = 0; i < 100 && !gid_present(a); i++)
		rs_msleep(50);
	ASSERT_TRUE(gid_present(a)) TH_LOG("%s has no GID for %s", rs.rdmadev,
					   self->alias);
	ASSERT_EQ(0, rs_param_set("ack_timeout_min", 8));
	ASSERT_EQ(0, rs_param_set("ack_timeout_first", 20));

	lfd = rs_socket(0);
	ASSERT_LE(0, lfd);
	rs_sin(&sin, a, 0);
	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&sin, sizeof(sin)))
		TH_LOG("bind %s: %s", self->alias, strerror(errno));
	ASSERT_EQ(0, listen(lfd, 4));
	len = sizeof(sin);
	ASSERT_EQ(0, getsockname(lfd, (struct sockaddr *)&sin, &len));
	cfd = rs_connect(_metadata, &sin);
	sfd = rs_accept(_metadata, lfd);
	close(lfd);
	len = sizeof(ci);
	ASSERT_EQ(0, getsockopt(cfd, SOL_RDMASTREAM, RDMASTREAM_INFO, &ci,
				&len));
	len = sizeof(si);
	ASSERT_EQ(0, getsockopt(sfd, SOL_RDMASTREAM, RDMASTREAM_INFO, &si,
				&len));
	close(cfd);
	close(sfd);
	EXPECT_EQ(0, rs_param_set("ack_timeout_min", self->min));
	EXPECT_EQ(0, rs_param_set("ack_timeout_first", self->first));
	rs_info("first contact: client %u us, server %u us", ci.rsi_ack_timeout_us,
		si.rsi_ack_timeout_us);
	ASSERT_FALSE(ci.rsi_flags & RDMASTREAM_INFO_F_FALLBACK);
	ASSERT_EQ(0, ci.rsi_base_rtt_us) TH_LOG("%s was known", self->alias);
	ASSERT_EQ(0, si.rsi_base_rtt_us);
	EXPECT_EQ(7, ci.rsi_retry_count);
	EXPECT_EQ(7, si.rsi_retry_count);
	EXPECT_LE(rs_ack_exp_us(8), ci.rsi_ack_timeout_us);
	EXPECT_LE(rs_ack_exp_us(8), si.rsi_ack_timeout_us);
	/* a handshake of up to 0.7 s (3x: 2.1 s) passes, a first does not */
	EXPECT_GE(rs_ack_exp_us(19), ci.rsi_ack_timeout_us);
	EXPECT_GE(rs_ack_exp_us(19), si.rsi_ack_timeout_us);
}

/* ---- device removal ---- */

struct blocked {
	int fd;
	bool send;
	ssize_t ret;
	int err;
	bool done;		/* __atomic */
	double when;
	pthread_t thr;
};

static void *blocked_fn(void *arg)
{
	struct blocked *b = arg;
	char *buf = calloc(1, RS_MIB);

	if (!buf)
		b->ret = -1;
	else if (b->send)
		b->ret = send(b->fd, buf, RS_MIB, MSG_NOSIGNAL);
	else
		b->ret = recv(b->fd, buf, RS_MIB, 0);
	b->err = buf ? errno : ENOMEM;
	free(buf);
	b->when = rs_now();
	__atomic_store_n(&b->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static bool is_done(struct blocked *b)
{
	return __atomic_load_n(&b->done, __ATOMIC_ACQUIRE);
}

FIXTURE(device)
{
	bool removed;
	int fd[4];	/* c1 s1 c2 s2 */
};

FIXTURE_SETUP(device)
{
	int i;

	rs_watchdog(_metadata->timeout + 30);
	for (i = 0; i < 4; i++)
		self->fd[i] = -1;
}

FIXTURE_TEARDOWN(device)
{
	int i;

	for (i = 0; i < 4; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
	if (self->removed && rs_link_add())
		TH_LOG("could not re-add %s on %s", rs.rdmadev, rs.netdev);
}

/* Connect with retries while the new device's addresses settle. */
static int connect_retry(struct __test_metadata *_metadata,
			 const struct sockaddr_in *sin, unsigned int secs)
{
	double end = rs_now() + secs;
	int fd, err;

	for (;;) {
		fd = rs_socket(0);
		ASSERT_GE(fd, 0);
		if (!connect(fd, (const struct sockaddr *)sin, sizeof(*sin)))
			return fd;
		err = errno;
		close(fd);
		ASSERT_LT(rs_now(), end)
			TH_LOG("connect after re-adding the device: %s",
			       strerror(err));
		rs_msleep(250);
	}
}

TEST_F_TIMEOUT(device, removal, 180)
{
	struct blocked r = { }, w = { };
	struct rdmastream_info info;
	socklen_t ilen = sizeof(info);
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int i, rev, lfd, c, s;
	double t0;
	char buf[64];

	if (rs.tcp)
		SKIP(return, "not applicable to TCP: RDMA device removal");
	if (geteuid())
		SKIP(return, "needs root");
	if (!rs.netdev || !rs_have_cmd("rdma") || !rs_link_exists())
		SKIP(return, "needs RS_NETDEV, the rdma tool and %s",
		     rs.rdmadev);

	/*
	 * Pair 1: a reader blocked (its buffer advertised for a direct
	 * transfer). Pair 2: a writer blocked (full).
	 */
	rs_pair(_metadata, &self->fd[0], &self->fd[1]);
	rs_pair(_metadata, &self->fd[2], &self->fd[3]);
	ASSERT_GT(rs_fill_pipe(self->fd[2], rs_key(0, 0, 71)), 0);
	r.fd = self->fd[1];
	w.fd = self->fd[2];
	w.send = true;
	ASSERT_EQ(0, pthread_create(&r.thr, NULL, blocked_fn, &r));
	ASSERT_EQ(0, pthread_create(&w.thr, NULL, blocked_fn, &w));
	rs_msleep(300);
	ASSERT_FALSE(is_done(&r));
	ASSERT_FALSE(is_done(&w));
	/* the reader's 1 MiB buffer is advertised: pinned, peer-writable */
	ASSERT_EQ(0, getsockopt(r.fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &info,
				&ilen));
	EXPECT_EQ(1, info.rsi_adverts_sent);

	t0 = rs_now();
	self->removed = true;
	ASSERT_EQ(0, rs_system("rdma link delete %s", rs.rdmadev));
	while ((!is_done(&r) || !is_done(&w)) && rs_now() - t0 < fault_sec())
		rs_msleep(50);
	EXPECT_TRUE(is_done(&r)) TH_LOG("recv still blocked after %u s",
				   fault_sec());
	EXPECT_TRUE(is_done(&w)) TH_LOG("send still blocked after %u s",
				   fault_sec());
	ASSERT_TRUE(is_done(&r) && is_done(&w));
	pthread_join(r.thr, NULL);
	pthread_join(w.thr, NULL);
	rs_info("removal: recv %zd (%s) after %.2f s, send %zd (%s) after %.2f s",
		r.ret, strerror(r.err), r.when - t0, w.ret, strerror(w.err),
		w.when - t0);
	EXPECT_EQ(-1, r.ret);
	/* A send that had queued part of its buffer may return that. */
	if (w.ret >= 0) {
		EXPECT_EQ(-1, send(w.fd, buf, sizeof(buf), MSG_NOSIGNAL));
	} else {
		EXPECT_EQ(-1, w.ret);
	}

	/* All four ends are dead and say so. */
	for (i = 0; i < 4; i++) {
		rev = rs_poll(self->fd[i], POLLIN | POLLOUT, 0);
		EXPECT_NE(0, rev & (POLLERR | POLLHUP))
			TH_LOG("fd %d: revents 0x%x", i, rev);
		EXPECT_EQ(-1, send(self->fd[i], "x", 1, MSG_NOSIGNAL))
			TH_LOG("fd %d accepts data", i);
	}
	for (i = 0; i < 4; i++) {
		close(self->fd[i]);
		self->fd[i] = -1;
	}

	/* Device back: new connections work. */
	ASSERT_EQ(0, rs_link_add()) TH_LOG("%s did not come back", rs.rdmadev);
	self->removed = false;
	rs_sin(&sin, rs.addr, 0);
	lfd = -1;
	t0 = rs_now() + 20;
	while (lfd < 0) {
		lfd = rs_socket(0);
		ASSERT_GE(lfd, 0);
		if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) ||
		    listen(lfd, 4)) {
			ASSERT_LT(rs_now(), t0) TH_LOG("listen: %s",
						       strerror(errno));
			close(lfd);
			lfd = -1;
			rs_msleep(250);
		}
	}
	ASSERT_EQ(0, getsockname(lfd, (struct sockaddr *)&sin, &len));
	c = connect_retry(_metadata, &sin, 20);
	s = rs_accept(_metadata, lfd);
	rs_pat_fill(buf, sizeof(buf), 1, 0);
	ASSERT_EQ(sizeof(buf), send(c, buf, sizeof(buf), 0));
	ASSERT_EQ(sizeof(buf), rs_recv_all(s, buf, sizeof(buf), 0));
	ASSERT_EQ(sizeof(buf), rs_pat_check(buf, sizeof(buf), 1, 0));
	close(c);
	close(s);
	close(lfd);
}

/* ---- module unload ---- */

static bool mod_loaded(void)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/module/%s", rs_modname());
	return !access(path, F_OK);
}

/* "a=1 b=x" from /sys/module/NAME/parameters, or RS_MODULE_PARAMS. */
static void mod_params(char *buf, size_t len)
{
	const char *env = getenv("RS_MODULE_PARAMS");
	char dir[256], path[512], val[256];
	struct dirent *de;
	size_t off = 0;
	FILE *f;
	DIR *d;

	buf[0] = 0;
	if (env) {
		snprintf(buf, len, "%s", env);
		return;
	}
	snprintf(dir, sizeof(dir), "/sys/module/%s/parameters", rs_modname());
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(val, sizeof(val), f)) {
			val[strcspn(val, "\n")] = 0;
			if (strcmp(val, "(null)") && off < len)
				off += snprintf(buf + off, len - off,
						strchr(val, ' ') ?
						"%s%s=\"%s\"" : "%s%s=%s",
						off ? " " : "", de->d_name,
						val);
		}
		fclose(f);
	}
	closedir(d);
}

static int mod_unload(void)
{
	return syscall(SYS_delete_module, rs_modname(), O_NONBLOCK);
}

static int mod_load(const char *params)
{
	int fd, ret;

	fd = open(rs.module, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ret = syscall(SYS_finit_module, fd, params, 0);
	close(fd);
	return ret;
}

FIXTURE(module)
{
	char params[1024];
	int fd[3];
	bool unloaded;
};

FIXTURE_VARIANT(module)
{
	int what;	/* 0: a bare socket, 1: a listener, 2: a connection */
};

FIXTURE_VARIANT_ADD(module, socket) { .what = 0 };
FIXTURE_VARIANT_ADD(module, listener) { .what = 1 };
FIXTURE_VARIANT_ADD(module, connection) { .what = 2 };

FIXTURE_SETUP(module)
{
	int i;

	rs_watchdog(_metadata->timeout + 30);
	for (i = 0; i < 3; i++)
		self->fd[i] = -1;
	mod_params(self->params, sizeof(self->params));
}

FIXTURE_TEARDOWN(module)
{
	int i;

	for (i = 0; i < 3; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
	if (self->unloaded && !mod_loaded() && mod_load(self->params))
		TH_LOG("could not reload %s: %s", rs.module, strerror(errno));
}

TEST_F_TIMEOUT(module, unload_busy, 120)
{
	struct sockaddr_in sin;
	double end;
	int ret, i, c, s;

	if (rs.tcp)
		SKIP(return, "not applicable to TCP: module unload");
	if (geteuid())
		SKIP(return, "needs root");
	if (!mod_loaded())
		SKIP(return, "%s is not a loaded module", rs_modname());
	if (!rs.module || access(rs.module, R_OK))
		SKIP(return, "RS_MODULE not readable: cannot reload");
	rs_info("module parameters: %s", self->params[0] ?
		self->params : "(none)");

	switch (variant->what) {
	case 0:
		self->fd[0] = rs_socket(0);
		ASSERT_GE(self->fd[0], 0);
		break;
	case 1:
		self->fd[0] = rs_listener(_metadata, &sin);
		break;
	default:
		rs_pair(_metadata, &self->fd[0], &self->fd[1]);
		ASSERT_EQ(2, send(self->fd[0], "hi", 2, 0));
		break;
	}

	/* In use: refused, and nothing breaks. */
	ret = mod_unload();
	EXPECT_EQ(-1, ret);
	EXPECT_TRUE(errno == EBUSY || errno == EAGAIN)
		TH_LOG("delete_module: %s", strerror(errno));
	if (!ret) {
		self->unloaded = true;
		ASSERT_EQ(0, mod_load(self->params));
		self->unloaded = false;
		ASSERT_TRUE(false) TH_LOG("module unloaded while in use");
	}
	ASSERT_TRUE(mod_loaded());
	if (variant->what == 2) {
		char b[2];

		ASSERT_EQ(2, rs_recv_all(self->fd[1], b, 2, 0));
	}

	/* Closed: it goes, once lingering connections are gone. */
	for (i = 0; i < 3; i++) {
		if (self->fd[i] >= 0)
			close(self->fd[i]);
		self->fd[i] = -1;
	}
	end = rs_now() + 15;
	while ((ret = mod_unload()) && rs_now() < end &&
	       (errno == EBUSY || errno == EAGAIN))
		rs_msleep(200);
	ASSERT_EQ(0, ret) TH_LOG("delete_module after close: %s",
				 strerror(errno));
	self->unloaded = true;
	ASSERT_FALSE(mod_loaded());

	/* And it comes back, working. */
	ASSERT_EQ(0, mod_load(self->params))
		TH_LOG("finit_module %s: %s", rs.module, strerror(errno));
	self->unloaded = false;
	rs_pair(_metadata, &c, &s);
	ASSERT_EQ(2, send(c, "ok", 2, 0));
	ASSERT_EQ(2, rs_recv_all(s, &sin, 2, 0));
	close(c);
	close(s);
}

/* Unload, waiting out connections that still linger (EBUSY). */
static int mod_unload_wait(double secs)
{
	double end = rs_now() + secs;
	int ret;

	while ((ret = mod_unload()) && rs_now() < end &&
	       (errno == EBUSY || errno == EAGAIN))
		rs_msleep(200);
	return ret;
}

/* Load with the parameters now in force plus extra (later ones win). */
static int mod_load_with(const char *params, const char *extra)
{
	char buf[1200];

	snprintf(buf, sizeof(buf), "%s %s", params, extra);
	return mod_load(buf);
}

/* socket(family, SOCK_STREAM, proto): 0 if it works, else errno. */
static int try_socket(int family, int proto)
{
	int fd = socket(family, SOCK_STREAM, proto);

	if (fd < 0)
		return errno;
	if (rs_getint(fd, SOL_SOCKET, SO_PROTOCOL) != proto) {
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

FIXTURE(ipproto)
{
	char params[1024];
};

FIXTURE_SETUP(ipproto)
{
	rs_watchdog(_metadata->timeout + 30);
	mod_params(self->params, sizeof(self->params));
}

FIXTURE_TEARDOWN(ipproto)
{
	if (!mod_loaded() && mod_load(self->params))
		TH_LOG("could not reload %s: %s", rs.module, strerror(errno));
}

/*
 * The IPPROTO route's number is the ipproto parameter: 0 turns the route
 * off (AF_RDMASTREAM stays), a number a kernel uses or may use is refused
 * at load, another free one takes the route's place.
 */
TEST_F_TIMEOUT(ipproto, param, 120)
{
	static const char * const refused[] = {
		"ipproto=256", "ipproto=257", "ipproto=261", "ipproto=262",
		"ipproto=255", "ipproto=263", "ipproto=-1",
	};
	unsigned int i;

	if (rs.tcp)
		SKIP(return, "not applicable to TCP: module parameters");
	ASSERT_EQ(0, geteuid()) TH_LOG("needs root");
	ASSERT_TRUE(mod_loaded());
	ASSERT_EQ(0, access(rs.module, R_OK)) TH_LOG("RS_MODULE not readable");
	ASSERT_EQ(0, try_socket(AF_INET, IPPROTO_RDMASTREAM));
	ASSERT_EQ(0, mod_unload_wait(15)) TH_LOG("unload: %s", strerror(errno));

	/* off: the IP families do not know the number, AF_RDMASTREAM works */
	ASSERT_EQ(0, mod_load_with(self->params, "ipproto=0"))
		TH_LOG("ipproto=0: %s", strerror(errno));
	EXPECT_EQ(EPROTONOSUPPORT, try_socket(AF_INET, IPPROTO_RDMASTREAM));
	EXPECT_EQ(EPROTONOSUPPORT, try_socket(AF_INET6, IPPROTO_RDMASTREAM));
	EXPECT_EQ(0, try_socket(rs_env_ulong("RS_AF", AF_RDMASTREAM), 0));
	ASSERT_EQ(0, mod_unload_wait(15));

	for (i = 0; i < ARRAY_SIZE(refused); i++) {
		EXPECT_EQ(-1, mod_load_with(self->params, refused[i])) {
			TH_LOG("%s was accepted", refused[i]);
			ASSERT_EQ(0, mod_unload_wait(15));
			continue;
		}
		EXPECT_EQ(EINVAL, errno) TH_LOG("%s: %s", refused[i],
						strerror(errno));
		EXPECT_FALSE(mod_loaded());
	}

	/* another free number */
	ASSERT_EQ(0, mod_load_with(self->params, "ipproto=259"));
	EXPECT_EQ(0, try_socket(AF_INET, 259));
	EXPECT_EQ(0, try_socket(AF_INET6, 259));
	EXPECT_EQ(EPROTONOSUPPORT, try_socket(AF_INET, IPPROTO_RDMASTREAM));
	ASSERT_EQ(0, mod_unload_wait(15));
	ASSERT_EQ(0, mod_load(self->params));
	EXPECT_EQ(0, try_socket(AF_INET, IPPROTO_RDMASTREAM));
}

/* /dev/kmsg from its end: only what the kernel logs from now on */
static int kmsg_open(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0)
		lseek(fd, 0, SEEK_END);
	return fd;
}

/* Read records until one contains needle (left in line); false if none. */
static bool kmsg_find(int fd, const char *needle, char *line, size_t len)
{
	ssize_t n;

	while ((n = read(fd, line, len - 1)) > 0 || (n < 0 && errno == EPIPE)) {
		line[n > 0 ? n : 0] = 0;
		if (strstr(line, needle))
			return true;
	}
	return false;
}

FIXTURE(family)
{
	char params[1024];
};

FIXTURE_SETUP(family)
{
	rs_watchdog(_metadata->timeout + 30);
	mod_params(self->params, sizeof(self->params));
}

FIXTURE_TEARDOWN(family)
{
	if (!mod_loaded() && mod_load(self->params))
		TH_LOG("could not reload %s: %s", rs.module, strerror(errno));
}

/*
 * The socket family number on the running kernel (docs/family-number.md,
 * docs/kernels.md): with the module out nothing answers to it, it is
 * below the kernel's AF_MAX (which the out-of-range message names), and a
 * number that is taken or out of range is refused at load, saying so.
 */
TEST_F_TIMEOUT(family, number, 120)
{
	int af = rs_env_ulong("RS_AF", AF_RDMASTREAM), fd, af_max;
	char line[512];

	if (rs.tcp)
		SKIP(return, "not applicable to TCP: module parameters");
	ASSERT_EQ(0, geteuid()) TH_LOG("needs root");
	ASSERT_TRUE(mod_loaded());
	ASSERT_EQ(0, access(rs.module, R_OK)) TH_LOG("RS_MODULE not readable");
	ASSERT_EQ(0, try_socket(af, 0));
	ASSERT_EQ(0, mod_unload_wait(15)) TH_LOG("unload: %s", strerror(errno));
	EXPECT_EQ(EAFNOSUPPORT, try_socket(af, 0));

	fd = kmsg_open();
	ASSERT_LE(0, fd) TH_LOG("/dev/kmsg: %s", strerror(errno));
	EXPECT_EQ(-1, mod_load_with(self->params, "family=2"));
	/* (not EEXIST, which modprobe takes for "already loaded") */
	EXPECT_EQ(EBUSY, errno) TH_LOG("family=2: %s", strerror(errno));
	EXPECT_TRUE(kmsg_find(fd, "socket family 2 is already taken", line,
			      sizeof(line)));
	EXPECT_EQ(-1, mod_load_with(self->params, "family=4096"));
	EXPECT_EQ(EINVAL, errno) TH_LOG("family=4096: %s", strerror(errno));
	ASSERT_TRUE(kmsg_find(fd, "family 4096 out of range 1..", line,
			      sizeof(line)));
	close(fd);
	af_max = atoi(strstr(line, "range 1..") + 9) + 1;
	rs_info("this kernel's AF_MAX is %d; the family is %d", af_max, af);
	EXPECT_LT(af, af_max);
	EXPECT_FALSE(mod_loaded());

	ASSERT_EQ(0, mod_load(self->params));
	EXPECT_EQ(0, try_socket(af, 0));
}

TEST_HARNESS_MAIN
