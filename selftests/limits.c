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
 *  cap.per_user   with max_conns_per_user at 4, uid 65534 connects 4
 *                 times to a listener of uid 65532 (whose 4 children put
 *                 it at the cap as well); its 5th connect() fails with
 *                 ENOBUFS and leaves nothing behind; root still connects
 *                 to its own listener, while a connection to the full
 *                 listener is rejected (ECONNREFUSED, conns_refused);
 *                 once one of 65534's connections closes it connects
 *                 again;
 *  cap.per_netns  with max_conns_per_netns at 2 more than now, one
 *                 connection (both ends) fills it: the next connect()
 *                 fails with ENOBUFS for root and for uid 65534 alike,
 *                 and succeeds once the cap is back;
 * both check that hca_conns, mem_used and the device's QPs and MRs go
 * back to where they were.
 *
 * Connections are opened in batches of RS_SCALE_BATCH (100; at most a
 * quarter of the device's address handles, which ib_cm's messages use:
 * rxe before 5.15 has 100) non-blocking connects, each batch accepted
 * before the next, so the listener's backlog is never what limits them. Root is needed (RLIMIT_NOFILE,
 * module parameters). Skipped under RS_FAMILY=tcp.
 */
#include "rs_common.h"

#include <grp.h>
#include <infiniband/verbs.h>
#include <sys/fsuid.h>
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
	long long mem_used, orphans, avail_kb, hca_conns;
	long qps, mrs;
};

static void scale_snap(struct scale_base *b)
{
	b->mem_used = rs_param_get("mem_used");
	b->orphans = rs_param_get("orphans");
	b->hca_conns = rs_param_get("hca_conns");
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
		    now->orphans == base->orphans &&
		    now->hca_conns == base->hca_conns && now->qps == base->qps &&
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
	long long user_max;	/* max_conns_per_user to restore, or -1 */
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
	self->user_max = -1;
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
	/* both ends are root's: 2n transports, beyond the cap if n is raised */
	self->user_max = rs_param_get("max_conns_per_user");
	if (self->user_max <= 0 || self->user_max >= 2 * (long long)self->n)
		self->user_max = -1;
	if (self->user_max > 0)
		ASSERT_EQ(0, rs_param_set("max_conns_per_user", 0));
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
	if (self->user_max > 0)
		rs_param_set("max_conns_per_user", self->user_max);
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

/* ---- caps on connections (max_conns_per_user, max_conns_per_netns) ---- */

#define CAP_USER	4	/* max_conns_per_user under test */
#define CAP_NOBODY	65534	/* the capped user */
#define CAP_OWNER	65532	/* owner of the listener it connects to */

/* A socket of uid's (its creator's fsuid), RDMA only. */
static int cap_socket(uid_t uid)
{
	int mode = RDMASTREAM_FALLBACK_NEVER, fd;
	uid_t old = setfsuid(uid);

	fd = socket(rs.family, SOCK_STREAM, rs.protocol);
	setfsuid(old);
	if (fd >= 0 && setsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_FALLBACK,
				  &mode, sizeof(mode))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A listener of uid's on RS_ADDR, its address in *sin; -1 on failure. */
static int cap_listener(uid_t uid, struct sockaddr_in *sin)
{
	socklen_t len = sizeof(*sin);
	int fd = cap_socket(uid);

	rs_sin(sin, rs.addr, 0);
	if (fd >= 0 && (bind(fd, (struct sockaddr *)sin, sizeof(*sin)) ||
			listen(fd, 16) ||
			getsockname(fd, (struct sockaddr *)sin, &len))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A connected socket of uid's, or -errno. */
static int cap_connect(uid_t uid, const struct sockaddr_in *sin)
{
	int fd = cap_socket(uid), err;

	if (fd < 0)
		return -errno;
	if (!connect(fd, (const struct sockaddr *)sin, sizeof(*sin)))
		return fd;
	err = errno;
	close(fd);
	return -err;
}

/* Wait (at most 30 s) until hca_conns is at most n; whether it was. */
static bool cap_wait_hca(long long n)
{
	double end = rs_now() + 30;

	while (rs_param_get("hca_conns") > n) {
		if (rs_now() > end)
			return false;
		rs_msleep(100);
	}
	return true;
}

FIXTURE(cap)
{
	long long user_max, netns_max;
	struct scale_base base;
	int fds[16];
	unsigned int nfds;
};

FIXTURE_SETUP(cap)
{
	self->nfds = 0;
	self->user_max = self->netns_max = -1;
	if (rs.tcp)
		return;
	ASSERT_EQ(0, geteuid()) TH_LOG("needs root");
	self->user_max = rs_param_get("max_conns_per_user");
	self->netns_max = rs_param_get("max_conns_per_netns");
	ASSERT_LE(0, self->user_max) TH_LOG("no max_conns_per_user parameter");
	ASSERT_LE(0, self->netns_max)
		TH_LOG("no max_conns_per_netns parameter");
	scale_snap(&self->base);
	ASSERT_LE(0, self->base.hca_conns) TH_LOG("no hca_conns parameter");
	ASSERT_LE(0, self->base.qps) TH_LOG("rdma res show qp failed");
	rs_watchdog(_metadata->timeout + 30);
}

FIXTURE_TEARDOWN(cap)
{
	struct scale_base after;

	while (self->nfds)
		close(self->fds[--self->nfds]);
	if (self->user_max >= 0)
		rs_param_set("max_conns_per_user", self->user_max);
	if (self->netns_max >= 0)
		rs_param_set("max_conns_per_netns", self->netns_max);
	if (rs.tcp)
		return;
	EXPECT_TRUE(scale_settled(&self->base, 60, &after))
		TH_LOG("not back in 60 s: hca_conns %lld (was %lld), mem_used %lld (%lld), QPs %ld (%ld), MRs %ld (%ld)",
		       after.hca_conns, self->base.hca_conns, after.mem_used,
		       self->base.mem_used, after.qps, self->base.qps,
		       after.mrs, self->base.mrs);
}

static void cap_keep(FIXTURE_DATA(cap) *self, int fd)
{
	if (fd >= 0 && self->nfds < ARRAY_SIZE(self->fds))
		self->fds[self->nfds++] = fd;
	else if (fd >= 0)
		close(fd);
}

/* A failed step of a child: says what failed, returns step (its exit). */
static int cap_fail(int step, const char *what, int fd)
{
	rs_info("uid %d, step %d: %s: %s", (int)getuid(), step, what,
		fd < 0 ? strerror(-fd) : "connected");
	return step;
}

/*
 * uid 65534's side of cap.per_user, in a child: CAP_USER connects to sin,
 * a refused one, then (once the parent writes a byte on go) one closed
 * and one more. Writes a byte on done when at the cap; exits with the
 * number of the first step that failed, 0 if none.
 */
static int cap_nobody(const struct sockaddr_in *sin, long long full,
		      int go, int done)
{
	int fd[CAP_USER], i, ret;
	char b = 0;

	if (setgroups(0, NULL) || setgid(CAP_NOBODY) || setuid(CAP_NOBODY))
		return cap_fail(1, "setuid", -errno);
	for (i = 0; i < CAP_USER; i++) {
		fd[i] = cap_connect(CAP_NOBODY, sin);
		if (fd[i] < 0)
			return cap_fail(2, "connect within the cap", fd[i]);
	}
	ret = cap_connect(CAP_NOBODY, sin);
	if (ret != -ENOBUFS)
		return cap_fail(3, "connect beyond the cap (want ENOBUFS)",
				ret);
	if (write(done, &b, 1) != 1 || read(go, &b, 1) != 1)
		return cap_fail(4, "pipe", -errno);
	close(fd[0]);
	/* both ends gone: the listener's owner has room again too */
	if (!cap_wait_hca(full - 2))
		return cap_fail(5, "hca_conns after a close", 0);
	fd[0] = cap_connect(CAP_NOBODY, sin);
	if (fd[0] < 0)
		return cap_fail(6, "connect after a close", fd[0]);
	return 0;
}

/* Fork cap_nobody(); its pid, *go and *done the parent's pipe ends. */
static pid_t cap_nobody_start(const struct sockaddr_in *sin, long long full,
			      int *go, int *done)
{
	int p_go[2], p_done[2];
	pid_t pid;

	if (pipe(p_go) || pipe(p_done))
		return -1;
	pid = fork();
	if (!pid) {
		close(p_go[1]);
		close(p_done[0]);
		_exit(cap_nobody(sin, full, p_go[0], p_done[1]));
	}
	close(p_go[0]);
	close(p_done[1]);
	*go = p_go[1];
	*done = p_done[0];
	return pid;
}

static int cap_wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

TEST_F_TIMEOUT(cap, per_user, 300)
{
	/* 65534's connections, both ends: its own and 65532's children */
	long long full = self->base.hca_conns + 2 * CAP_USER, refused;
	struct sockaddr_in full_sin, root_sin;
	int lfull, lroot, cfd, sfd, fd, go = -1, done = -1, st;
	char b = 0;
	pid_t pid;

	RS_SKIP_TCP("counts the module's HCA objects");
	ASSERT_EQ(0, rs_param_set("max_conns_per_user", CAP_USER));
	lfull = cap_listener(CAP_OWNER, &full_sin);
	ASSERT_LE(0, lfull) TH_LOG("listener: %s", strerror(errno));
	cap_keep(self, lfull);
	lroot = cap_listener(0, &root_sin);
	ASSERT_LE(0, lroot) TH_LOG("listener: %s", strerror(errno));
	cap_keep(self, lroot);
	pid = cap_nobody_start(&full_sin, full, &go, &done);
	ASSERT_LT(0, pid);
	if (read(done, &b, 1) != 1) {
		st = cap_wait_child(pid);
		ASSERT_EQ(0, st) TH_LOG("uid %d failed at step %d",
					CAP_NOBODY, st);
	}
	/* at the cap: the refused connect left nothing */
	EXPECT_EQ(full, rs_param_get("hca_conns"));
	EXPECT_EQ(self->base.qps + 2 * CAP_USER, scale_res_count("qp"));
	/* another user still connects */
	cfd = cap_connect(0, &root_sin);
	ASSERT_LE(0, cfd) TH_LOG("root's connect: %s", strerror(-cfd));
	sfd = accept(lroot, NULL, NULL);
	EXPECT_LE(0, sfd) TH_LOG("accept: %s", strerror(errno));
	/* but not to the listener whose owner is at the cap */
	refused = rs_param_get("conns_refused");
	fd = cap_connect(0, &full_sin);
	EXPECT_EQ(-ECONNREFUSED, fd) TH_LOG("to the full listener: %s",
					    fd < 0 ? strerror(-fd) : "connected");
	cap_keep(self, fd);
	EXPECT_EQ(refused + 1, rs_param_get("conns_refused"));
	EXPECT_TRUE(cap_wait_hca(full + 2))
		TH_LOG("hca_conns %lld, want %lld", rs_param_get("hca_conns"),
		       full + 2);
	close(sfd);
	close(cfd);
	EXPECT_TRUE(cap_wait_hca(full))
		TH_LOG("hca_conns %lld, want %lld", rs_param_get("hca_conns"),
		       full);
	/* one of 65534's closes: it connects again */
	EXPECT_EQ(1, write(go, &b, 1));
	st = cap_wait_child(pid);
	EXPECT_EQ(0, st) TH_LOG("uid %d failed at step %d", CAP_NOBODY, st);
	close(go);
	close(done);
}

/* A connect() of uid 65534's in a child: 0 or its errno. */
static int cap_nobody_connect(const struct sockaddr_in *sin)
{
	pid_t pid = fork();
	int fd;

	if (!pid) {
		if (setgroups(0, NULL) || setgid(CAP_NOBODY) ||
		    setuid(CAP_NOBODY))
			_exit(255);
		fd = cap_connect(CAP_NOBODY, sin);
		_exit(fd < 0 ? -fd : 0);
	}
	return pid < 0 ? -1 : cap_wait_child(pid);
}

TEST_F_TIMEOUT(cap, per_netns, 300)
{
	long long refused;
	struct sockaddr_in sin;
	int lfd, fd;

	RS_SKIP_TCP("counts the module's HCA objects");
	/* room for one connection: both of its ends */
	ASSERT_EQ(0, rs_param_set("max_conns_per_netns",
				  self->base.hca_conns + 2));
	lfd = cap_listener(0, &sin);
	ASSERT_LE(0, lfd) TH_LOG("listener: %s", strerror(errno));
	cap_keep(self, lfd);
	fd = cap_connect(0, &sin);
	ASSERT_LE(0, fd) TH_LOG("first connect: %s", strerror(-fd));
	cap_keep(self, fd);
	cap_keep(self, accept(lfd, NULL, NULL));
	refused = rs_param_get("conns_refused");
	fd = cap_connect(0, &sin);
	EXPECT_EQ(-ENOBUFS, fd) TH_LOG("root beyond the cap: %s",
				       fd < 0 ? strerror(-fd) : "connected");
	cap_keep(self, fd);
	fd = cap_nobody_connect(&sin);
	EXPECT_EQ(ENOBUFS, fd) TH_LOG("uid %d beyond the cap: %s", CAP_NOBODY,
				      fd > 0 ? strerror(fd) : "connected");
	EXPECT_EQ(refused + 2, rs_param_get("conns_refused"));
	EXPECT_EQ(self->base.hca_conns + 2, rs_param_get("hca_conns"));
	ASSERT_EQ(0, rs_param_set("max_conns_per_netns", self->netns_max));
	fd = cap_connect(0, &sin);
	EXPECT_LE(0, fd) TH_LOG("with the cap back: %s", strerror(-fd));
	cap_keep(self, fd);
}

TEST_HARNESS_MAIN
