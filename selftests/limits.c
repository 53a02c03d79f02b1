// SPDX-License-Identifier: GPL-2.0
/*
 * Many connections at once, and what each costs (docs/limits.md).
 *
 *  scale.small    RS_SCALE_CONNS (2,000) connections in one host, both
 *                 ends here (4,000 sockets), 16 KiB rings (SO_RCVBUF and
 *                 SO_SNDBUF 8 KiB, which the kernel doubles): every one is
 *                 made, every one carries a verified message each way,
 *                 and after they close the module's ring memory, its
 *                 orphans and the device's QPs and MRs are back where
 *                 they were;
 *  scale.defaults RS_SCALE_DEFAULT_CONNS (200) connections with the
 *                 default buffers, the same checks;
 * each prints the memory one connection (both ends) takes from the
 * machine (MemAvailable) and from the module's ring budget (mem_used),
 * for docs/limits.md.
 *
 * Connections are opened in batches of RS_SCALE_BATCH (100; at most a
 * quarter of the device's address handles, which ib_cm's messages use:
 * rxe before 5.15 has 100) non-blocking connects, each batch accepted
 * before the next, so the listener's backlog is never what limits them. Root is needed (RLIMIT_NOFILE,
 * module parameters). Skipped under RS_FAMILY=tcp.
 */
#include "rs_common.h"

#include <infiniband/verbs.h>
#include <sys/resource.h>

struct scale_conn {
	int c, s;
};

/* Lines of `rdma res show TYPE` (one per object), or -1. */
static long scale_res_count(const char *type)
{
	char cmd[128], line[512];
	long n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "rdma res show %s 2>/dev/null", type);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p))
		n += !!strstr(line, "lqpn") || !!strstr(line, "mrn");
	return pclose(p) ? -1 : n;
}

struct scale_base {
	long long mem_used, orphans, avail_kb;
	long qps, mrs;
};

static void scale_snap(struct scale_base *b)
{
	b->mem_used = rs_param_get("mem_used");
	b->orphans = rs_param_get("orphans");
	b->avail_kb = rs_meminfo("MemAvailable:");
	b->qps = scale_res_count("qp");
	b->mrs = scale_res_count("mr");
}

/* Wait (bounded) until the module and the device are back at base. */
static bool scale_settled(const struct scale_base *base, unsigned int secs,
			  struct scale_base *now)
{
	double end = rs_now() + secs;

	for (;;) {
		scale_snap(now);
		if (now->mem_used == base->mem_used &&
		    now->orphans == base->orphans && now->qps == base->qps &&
		    now->mrs == base->mrs)
			return true;
		if (rs_now() > end)
			return false;
		rs_msleep(200);
	}
}

FIXTURE(scale)
{
	int lfd;
	unsigned int n, made;
	struct scale_conn *conn;
	struct scale_base base;
};

FIXTURE_VARIANT(scale)
{
	bool small;		/* 16 KiB buffers, else the defaults */
};

FIXTURE_VARIANT_ADD(scale, small) { .small = true };
FIXTURE_VARIANT_ADD(scale, defaults) { .small = false };

FIXTURE_SETUP(scale)
{
	struct rlimit rl;

	self->lfd = -1;
	self->made = 0;
	self->conn = NULL;
	if (rs.tcp)
		return;
	ASSERT_EQ(0, geteuid()) TH_LOG("needs root");
	self->n = variant->small ? rs_env_ulong("RS_SCALE_CONNS", 2000) :
		  rs_env_ulong("RS_SCALE_DEFAULT_CONNS", 200);
	rl.rlim_cur = rl.rlim_max = 2 * self->n + 256;
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &rl))
		TH_LOG("RLIMIT_NOFILE %u: %s", 2 * self->n + 256,
		       strerror(errno));
	self->conn = calloc(self->n, sizeof(*self->conn));
	ASSERT_NE(NULL, self->conn);
	scale_snap(&self->base);
	ASSERT_LE(0, self->base.mem_used) TH_LOG("no mem_used parameter");
	ASSERT_LE(0, self->base.qps) TH_LOG("rdma res show qp failed");
	rs_watchdog(_metadata->timeout + 30);
}

FIXTURE_TEARDOWN(scale)
{
	for (unsigned int i = 0; i < self->made; i++) {
		close(self->conn[i].c);
		close(self->conn[i].s);
	}
	free(self->conn);
	if (self->lfd >= 0)
		close(self->lfd);
}

/*
 * The device's address handles, or 0 if unknown. ib_cm holds one for
 * every CM message in flight (a REQ until its REP, a REP until its RTU):
 * with both ends on this device a handshake holds two. rxe before 5.15
 * has 100 of them in all; a burst that needs more loses messages and
 * refuses connections (docs/kernels.md).
 */
static unsigned int scale_max_ah(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device_attr attr;
	struct ibv_context *ctx;
	unsigned int n = 0;
	int i;

	for (i = 0; list && list[i]; i++) {
		if (strcmp(ibv_get_device_name(list[i]), rs.rdmadev))
			continue;
		ctx = ibv_open_device(list[i]);
		if (ctx && !ibv_query_device(ctx, &attr) && attr.max_ah > 0)
			n = attr.max_ah;
		if (ctx)
			ibv_close_device(ctx);
	}
	if (list)
		ibv_free_device_list(list);
	return n;
}

/* RS_SCALE_BATCH (100), at most a quarter of the device's AHs */
static unsigned int scale_batch_size(void)
{
	unsigned int batch = rs_env_ulong("RS_SCALE_BATCH", 100);
	unsigned int ah = scale_max_ah();

	if (ah && batch > ah / 4)
		batch = ah / 4 ? ah / 4 : 1;
	return batch;
}

static int scale_socket(int bufsize)
{
	int fd = rs_socket(SOCK_NONBLOCK);

	if (fd >= 0 && bufsize &&
	    (rs_setint(fd, SOL_SOCKET, SO_RCVBUF, bufsize) ||
	     rs_setint(fd, SOL_SOCKET, SO_SNDBUF, bufsize))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Connect n more (non-blocking), accept them; false on any failure. */
static bool scale_batch(struct __test_metadata *_metadata,
			FIXTURE_DATA(scale) *self,
			const struct sockaddr_in *sin, unsigned int n,
			int bufsize)
{
	unsigned int i, first = self->made, got = 0;
	double end = rs_now() + 60;
	int fd;

	for (i = first; i < first + n; i++) {
		fd = scale_socket(bufsize);
		EXPECT_LE(0, fd) TH_LOG("socket %u: %s", i, strerror(errno));
		if (fd < 0)
			return false;
		self->conn[i].c = fd;
		self->conn[i].s = -1;
		if (connect(fd, (const struct sockaddr *)sin, sizeof(*sin)) &&
		    errno != EINPROGRESS) {
			EXPECT_EQ(EINPROGRESS, errno)
				TH_LOG("connect %u: %s", i, strerror(errno));
			close(fd);
			return false;
		}
	}
	while (got < n && rs_now() < end) {
		fd = accept4(self->lfd, NULL, NULL, SOCK_NONBLOCK);
		if (fd >= 0) {
			self->conn[first + got++].s = fd;
			continue;
		}
		EXPECT_EQ(EAGAIN, errno) TH_LOG("accept: %s", strerror(errno));
		if (errno != EAGAIN)
			break;
		rs_poll(self->lfd, POLLIN, 200);
	}
	/* the accepted ends pair up with the connects only in number */
	for (i = first + got; i < first + n; i++)
		self->conn[i].s = -1;
	self->made = first + n;
	EXPECT_EQ(n, got) TH_LOG("accepted %u of %u in 60 s", got, n);
	for (i = first; i < first + n; i++) {
		int err = rs_poll(self->conn[i].c, POLLOUT, 10000) > 0 ?
			  rs_sock_error(self->conn[i].c) : ETIMEDOUT;

		EXPECT_EQ(0, err) TH_LOG("connect %u: %s", i, strerror(err));
		if (err)
			return false;
		rs_set_nonblock(self->conn[i].c, false);
		if (self->conn[i].s >= 0)
			rs_set_nonblock(self->conn[i].s, false);
	}
	return got == n;
}

/* A message of connection idx, direction dir: its index, then a pattern. */
static void scale_msg(char *buf, size_t len, uint32_t idx, unsigned int dir)
{
	memcpy(buf, &idx, sizeof(idx));
	rs_pat_fill(buf + sizeof(idx), len - sizeof(idx), rs_key(idx, dir, 60),
		    0);
}

/*
 * One 64-byte message each way on every connection, verified. Accepted
 * ends pair with the connects only in number, so each message names its
 * connection.
 */
static void scale_traffic(struct __test_metadata *_metadata,
			  FIXTURE_DATA(scale) *self)
{
	char buf[64], want[64];
	unsigned int i, bad = 0;
	uint32_t idx;

	for (i = 0; i < self->made; i++) {
		scale_msg(buf, sizeof(buf), i, 0);
		ASSERT_EQ(sizeof(buf), send(self->conn[i].c, buf, sizeof(buf),
					    0)) TH_LOG("send %u", i);
	}
	for (i = 0; i < self->made; i++) {
		int s = self->conn[i].s;

		ASSERT_EQ(sizeof(buf), rs_recv_all(s, buf, sizeof(buf), 0))
			TH_LOG("recv on accepted end %u", i);
		memcpy(&idx, buf, sizeof(idx));
		if (idx < self->made)
			scale_msg(want, sizeof(want), idx, 0);
		if (idx >= self->made || memcmp(buf, want, sizeof(buf))) {
			bad++;
			continue;
		}
		scale_msg(buf, sizeof(buf), idx, 1);
		ASSERT_EQ(sizeof(buf), send(s, buf, sizeof(buf), 0));
	}
	EXPECT_EQ(0, bad) TH_LOG("%u messages arrived wrong", bad);
	for (i = 0; i < self->made; i++) {
		ASSERT_EQ(sizeof(buf), rs_recv_all(self->conn[i].c, buf,
						   sizeof(buf), 0));
		scale_msg(want, sizeof(want), i, 1);
		EXPECT_EQ(0, memcmp(buf, want, sizeof(buf)))
			TH_LOG("connection %u: wrong reply", i);
	}
}

TEST_F_TIMEOUT(scale, open_all, 900)
{
	unsigned int batch = scale_batch_size(), k;
	/* the kernel doubles it: 16 KiB rings, the smallest there are */
	int bufsize = variant->small ? 8 * RS_KIB : 0;
	struct scale_base full, after;
	struct sockaddr_in sin;
	double t0 = rs_now();
	long long per_kb;

	RS_SKIP_TCP("counts the module's and the device's resources");
	ASSERT_LT(0, self->n);
	self->lfd = rs_listener_opts(_metadata, &sin, batch, bufsize);
	rs_set_nonblock(self->lfd, true);
	rs_info("connecting in batches of %u", batch);
	for (k = 0; k < self->n; k += batch) {
		if (!scale_batch(_metadata, self, &sin,
				 self->n - k < batch ? self->n - k : batch,
				 bufsize)) {
			TH_LOG("after %u connections", self->made);
			ASSERT_TRUE(false);
		}
	}
	scale_snap(&full);
	per_kb = (self->base.avail_kb - full.avail_kb) / (long long)self->n;
	rs_info("%u connections (%s rings) in %.1f s: %lld KiB each of MemAvailable, %lld KiB each of mem_used; %ld QPs, %ld MRs",
		self->n, variant->small ? "16 KiB" : "default",
		rs_now() - t0, per_kb,
		(full.mem_used - self->base.mem_used) / 1024 /
		(long long)self->n, full.qps - self->base.qps,
		full.mrs - self->base.mrs);
	EXPECT_EQ(2 * (long)self->n, full.qps - self->base.qps);
	scale_traffic(_metadata, self);
	for (k = 0; k < self->made; k++) {
		close(self->conn[k].c);
		close(self->conn[k].s);
	}
	self->made = 0;
	EXPECT_TRUE(scale_settled(&self->base, 120, &after))
		TH_LOG("not back at base in 120 s: mem_used %lld (was %lld), orphans %lld (%lld), QPs %ld (%ld), MRs %ld (%ld)",
		       after.mem_used, self->base.mem_used, after.orphans,
		       self->base.orphans, after.qps, self->base.qps,
		       after.mrs, self->base.mrs);
}

TEST_HARNESS_MAIN
