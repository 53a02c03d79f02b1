// SPDX-License-Identifier: GPL-2.0
/*
 * The connection lifecycle under pressure: what a user relies on when
 * other users (or peers) misbehave.
 *
 *  storm     1,000 connects against a listener that never accepts: each
 *            is refused (ECONNREFUSED) or admitted promptly, at most the
 *            backlog is admitted, the ring memory stays bounded, and the
 *            listener still works afterwards;
 *  memcg     the rings of a connection made inside a memory cgroup are
 *            charged to that cgroup (cgroup v2 memory.current), whether
 *            the process connects or accepts;
 *  mem_max   the module's ring-memory limit refuses connections cleanly
 *            (connect() ENOBUFS, a listener rejects: ECONNREFUSED) and
 *            connections work again once others have closed; under
 *            pressure a grown send ring goes back to 16 KiB and a grown
 *            stream buffer to 64 KiB;
 *  orphans   beyond max_orphans, close() with unsent data resets the
 *            connection instead of leaving it to linger;
 *  uffd      a recv() blocked in its copy to a userfaultfd page that is
 *            never served does not stop "rdma link delete" (device
 *            removal), and the recv returns its data once served.
 *
 * All of it is about the module's resources: skipped under RS_FAMILY=tcp.
 * Root is needed (module parameters, cgroups, rdma link). Knobs:
 * RS_STORM_CONNS (1000), RS_STORM_BATCH (50), RS_FAULT_SEC (10),
 * RS_MODNAME (rdmastream).
 */
#include "rs_common.h"

#include <linux/userfaultfd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static unsigned int fault_sec(void)
{
	return rs_env_ulong("RS_FAULT_SEC", 10);
}

/* ---- module parameters ---- */

#define NEED_PARAM(name) ({						\
	long long __v = rs_param_get(name);				\
	ASSERT_GE(__v, 0)						\
		TH_LOG("module parameter %s missing", name);		\
	__v; })

static void need_root(struct __test_metadata *_metadata)
{
	/* a skip here would only leave this helper: fail instead */
	ASSERT_EQ(0, geteuid()) TH_LOG("needs root");
}

/* Wait until mem_used is at most want; returns the last value. */
static long long mem_used_settle(long long want, unsigned int secs)
{
	double end = rs_now() + secs;
	long long v;

	while ((v = rs_param_get("mem_used")) > want && rs_now() < end)
		rs_msleep(100);
	return v;
}

/* mem_used once it has not moved for a second. */
static long long mem_used_stable(unsigned int secs)
{
	double end = rs_now() + secs;
	long long a, b = rs_param_get("mem_used");

	do {
		a = b;
		rs_msleep(1000);
		b = rs_param_get("mem_used");
	} while (a != b && rs_now() < end);
	return b;
}

/* ---- what an idle connection costs ---- */

#define IDLE_CONNS	32
#define IDLE_KMEM_MAX	256	/* KiB of slab + vmalloc per connection */

/* Kernel memory besides the rings, as rsbench -m idle reports it. */
static long long idle_kmem_kib(void)
{
	long long slab = rs_meminfo("Slab:"), vm = rs_meminfo("VmallocUsed:");

	return slab < 0 || vm < 0 ? -1 : slab + vm;
}

FIXTURE(idle)
{
	int c[IDLE_CONNS], s[IDLE_CONNS];
};

FIXTURE_SETUP(idle)
{
	for (int i = 0; i < IDLE_CONNS; i++)
		self->c[i] = self->s[i] = -1;
}

/* and leave the next test a module with nothing reserved by us */
FIXTURE_TEARDOWN(idle)
{
	for (int i = 0; i < IDLE_CONNS; i++) {
		if (self->c[i] >= 0)
			close(self->c[i]);
		if (self->s[i] >= 0)
			close(self->s[i]);
	}
	mem_used_stable(fault_sec());
}

/*
 * An idle connection (both ends on this host, default buffers) holds
 * 160 KiB of rings: each end's stream buffer starts at 64 KiB and its
 * send ring at 16 KiB, and both grow only with use. Everything else it
 * allocates (rxe's queues, QP and MR state, sockets) stays under
 * IDLE_KMEM_MAX: about 185 KiB since the send queue fits rxe's 64 slots
 * (270 KiB with 128 slots, 400-491 KiB with 256; the rings were 256 KiB
 * with a 64 KiB send ring, 640 KiB before 2026-11-24). (A debug kernel's
 * allocations carry KASAN and kmemleak metadata: there only the rings
 * are checked.)
 */
TEST_F_TIMEOUT(idle, memory, 180)
{
	long long used0, used1, k0, k1;
	bool debug = !access("/sys/kernel/debug/kmemleak", F_OK);
	char b = 'x';
	int i;

	RS_SKIP_TCP("the module's ring memory");
	used0 = rs_param_get("mem_used");
	ASSERT_LE(0, used0) TH_LOG("module parameter mem_used missing");
	/* per-device objects, caches: not what a connection costs */
	rs_pair(_metadata, &self->c[0], &self->s[0]);
	close(self->c[0]);
	close(self->s[0]);
	self->c[0] = self->s[0] = -1;
	/* the warm-up pair's rings, and any earlier test's, are freed */
	mem_used_settle(used0, fault_sec());
	used0 = mem_used_stable(fault_sec());
	k0 = idle_kmem_kib();
	ASSERT_LE(0, k0) TH_LOG("no Slab or VmallocUsed in /proc/meminfo");
	for (i = 0; i < IDLE_CONNS; i++) {
		rs_pair(_metadata, &self->c[i], &self->s[i]);
		ASSERT_EQ(1, send(self->c[i], &b, 1, 0));
		ASSERT_EQ(1, rs_recv_all(self->s[i], &b, 1, 0));
		ASSERT_EQ(1, send(self->s[i], &b, 1, 0));
		ASSERT_EQ(1, rs_recv_all(self->c[i], &b, 1, 0));
	}
	rs_msleep(1000);
	k1 = idle_kmem_kib();
	used1 = rs_param_get("mem_used");
	rs_info("idle: %d connections: rings %lld KiB each, slab+vmalloc %lld KiB each%s",
		IDLE_CONNS, (used1 - used0) / 1024 / IDLE_CONNS,
		(k1 - k0) / IDLE_CONNS, debug ? " (debug kernel)" : "");
	EXPECT_EQ((long long)IDLE_CONNS * (160 << 10), used1 - used0);
	if (!debug)
		EXPECT_GT(IDLE_KMEM_MAX * IDLE_CONNS, k1 - k0);
}

/* ---- connect storm ---- */

enum { STORM_PENDING, STORM_OK, STORM_REFUSED, STORM_OTHER };

struct storm_conn {
	int fd;
	int state;
	int err;
};

/* Start a non-blocking connect; the fd stays blocking-free afterwards. */
static int storm_start(struct __test_metadata *_metadata,
		       const struct sockaddr_in *sin, struct storm_conn *c)
{
	c->fd = rs_socket(SOCK_NONBLOCK);
	ASSERT_GE(c->fd, 0) TH_LOG("socket: %s", strerror(errno));
	c->state = STORM_PENDING;
	c->err = 0;
	if (!connect(c->fd, (const struct sockaddr *)sin, sizeof(*sin))) {
		c->state = STORM_OK;
	} else if (errno != EINPROGRESS) {
		c->err = errno;
		c->state = errno == ECONNREFUSED ? STORM_REFUSED : STORM_OTHER;
	}
	return 0;
}

/* Wait until every connect of the batch has an outcome, or the deadline. */
static unsigned int storm_wait(struct storm_conn *c, unsigned int n,
			       double end)
{
	struct pollfd pfd[n];
	unsigned int i, left;
	int err;

	for (;;) {
		left = 0;
		for (i = 0; i < n; i++) {
			pfd[i].fd = c[i].state == STORM_PENDING ? c[i].fd : -1;
			pfd[i].events = POLLOUT;
			pfd[i].revents = 0;
			left += c[i].state == STORM_PENDING;
		}
		if (!left || rs_now() >= end)
			return left;
		if (poll(pfd, n, 100) < 0 && errno != EINTR)
			return left;
		for (i = 0; i < n; i++) {
			if (!pfd[i].revents)
				continue;
			err = rs_sock_error(c[i].fd);
			c[i].err = err;
			if (!err)
				c[i].state = STORM_OK;
			else if (err == ECONNREFUSED)
				c[i].state = STORM_REFUSED;
			else
				c[i].state = STORM_OTHER;
		}
	}
}

/* Ring bytes of one end of a connection (both rings), from its info. */
static long long end_ring_bytes(struct __test_metadata *_metadata, int fd)
{
	struct rdmastream_info info;
	socklen_t len = sizeof(info);

	ASSERT_EQ(0, getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &info,
				&len)) TH_LOG("RDMASTREAM_INFO: %s", strerror(errno));
	return (long long)info.rsi_rx_ring + info.rsi_tx_ring;
}

FIXTURE(storm)
{
	int lfd;
	unsigned int n;
	struct storm_conn *c;
};

FIXTURE_SETUP(storm)
{
	self->lfd = -1;
	self->n = rs_env_ulong("RS_STORM_CONNS", 1000);
	self->c = calloc(self->n, sizeof(*self->c));
	ASSERT_NE(NULL, self->c);
	for (unsigned int i = 0; i < self->n; i++)
		self->c[i].fd = -1;
	rs_watchdog(_metadata->timeout + 30);
}

FIXTURE_TEARDOWN(storm)
{
	for (unsigned int i = 0; i < self->n; i++)
		if (self->c[i].fd >= 0)
			close(self->c[i].fd);
	free(self->c);
	if (self->lfd >= 0)
		close(self->lfd);
}

/* Accept whatever is queued now; returns how many, all closed. */
static unsigned int accept_all(int lfd)
{
	unsigned int n = 0;
	int fd;

	rs_set_nonblock(lfd, true);
	while ((fd = accept(lfd, NULL, NULL)) >= 0) {
		close(fd);
		n++;
	}
	rs_set_nonblock(lfd, false);
	return n;
}

TEST_F_TIMEOUT(storm, never_accepted, 900)
{
	const unsigned int backlog = 16;
	unsigned int batch = rs_env_ulong("RS_STORM_BATCH", 50);
	unsigned int i, j, n, cnt[4] = { }, late = 0, queued;
	long long used0, used, peak, per_end, bound;
	long long avail0, avail, avail_min;
	struct sockaddr_in sin;
	int c, s, fd[16];
	double t0, worst = 0;
	char b;

	RS_SKIP_TCP("the module's admission and ring memory");
	used0 = rs_param_get("mem_used");
	/* go on without it: admission is checked all the same */
	EXPECT_GE(used0, 0) TH_LOG("module parameter mem_used missing");
	/* what one end of a connection with default buffers reserves */
	rs_pair(_metadata, &c, &s);
	per_end = end_ring_bytes(_metadata, c);
	close(c);
	close(s);
	if (used0 >= 0)
		used0 = mem_used_settle(used0, fault_sec());
	peak = used0;
	avail0 = rs_meminfo("MemAvailable:");
	avail_min = avail0;
	self->lfd = rs_listener_opts(_metadata, &sin, backlog, 0);
	if (!batch || batch > 256)
		batch = 50;

	for (i = 0; i < self->n; i += n) {
		n = self->n - i < batch ? self->n - i : batch;
		for (j = 0; j < n; j++)
			storm_start(_metadata, &sin, &self->c[i + j]);
		t0 = rs_now();
		late += storm_wait(&self->c[i], n, t0 + fault_sec());
		if (rs_now() - t0 > worst)
			worst = rs_now() - t0;
		used = rs_param_get("mem_used");
		if (used > peak)
			peak = used;
		avail = rs_meminfo("MemAvailable:");
		if (avail < avail_min)
			avail_min = avail;
		for (j = i; j < i + n; j++) {
			cnt[self->c[j].state]++;
			if (self->c[j].state == STORM_OTHER && cnt[STORM_OTHER] < 5)
				rs_info("connect %u: %s", j,
					strerror(self->c[j].err));
			if (self->c[j].state == STORM_OK)
				continue;
			close(self->c[j].fd);
			self->c[j].fd = -1;
		}
	}
	rs_info("storm: %u connects, %u admitted, %u refused, %u other, %u undecided; slowest batch %.2f s",
		self->n, cnt[STORM_OK], cnt[STORM_REFUSED], cnt[STORM_OTHER],
		late, worst);
	rs_info("storm: ring memory %lld before, peak %lld (one end: %lld); MemAvailable %lld kB before, lowest %lld kB",
		used0, peak, per_end, avail0, avail_min);
	EXPECT_EQ(0, late) TH_LOG("connects neither refused nor admitted within %u s",
				  fault_sec());
	EXPECT_EQ(0, cnt[STORM_OTHER]) TH_LOG("refusals other than ECONNREFUSED");
	EXPECT_GE(cnt[STORM_OK], 1);
	EXPECT_LE(cnt[STORM_OK], backlog)
		TH_LOG("more connections admitted than the backlog");
	/*
	 * Bounded: the admitted connections (both ends here) and the
	 * connecting clients of this batch and of the one before (closed,
	 * their teardown may still run), whatever the number of attempts.
	 */
	bound = (2LL * backlog + 2 * batch) * per_end;
	if (used0 >= 0) {
		EXPECT_LE(peak - used0, bound)
			TH_LOG("ring memory grew by %lld, bound %lld",
			       peak - used0, bound);
	}

	/* Exactly the admitted ones are queued, and they are usable. */
	queued = accept_all(self->lfd);
	EXPECT_EQ(cnt[STORM_OK], queued);
	for (i = 0; i < self->n; i++) {
		if (self->c[i].fd >= 0)
			close(self->c[i].fd);
		self->c[i].fd = -1;
	}

	/* The listener still takes a full backlog, and serves it. */
	for (i = 0; i < backlog; i++)
		fd[i] = rs_connect(_metadata, &sin);
	for (i = 0; i < backlog; i++) {
		s = rs_accept(_metadata, self->lfd);
		ASSERT_EQ(1, send(s, "x", 1, 0));
		close(s);
	}
	for (i = 0; i < backlog; i++) {
		EXPECT_EQ(1, rs_recv_all(fd[i], &b, 1, 0));
		close(fd[i]);
	}
	close(self->lfd);
	self->lfd = -1;

	/* And every reservation is returned. */
	if (used0 >= 0) {
		used = mem_used_settle(used0, 30);
		EXPECT_LE(used, used0)
			TH_LOG("ring memory %lld before, %lld after", used0,
			       used);
	}
}

/* ---- memory cgroup ---- */

static char cg_dir[300];

/* The cgroup v2 root with the memory controller enabled for children. */
static int cg2_root(char *root, size_t len)
{
	char dev[256], dir[256], type[64], path[320];
	bool found = false;
	FILE *f;
	int fd;

	f = fopen("/proc/mounts", "r");
	if (!f)
		return -1;
	while (fscanf(f, "%255s %255s %63s %*[^\n]", dev, dir, type) == 3) {
		if (!strcmp(type, "cgroup2")) {
			snprintf(root, len, "%s", dir);
			found = true;
			break;
		}
	}
	fclose(f);
	if (!found) {
		snprintf(root, len, "/sys/fs/cgroup");
		mkdir(root, 0755);
		if (mount("cgroup2", root, "cgroup2", 0, NULL))
			return -1;
	}
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", root);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	if (write(fd, "+memory", 7) != 7) {
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int cg_write(const char *dir, const char *file, long long v)
{
	char path[400], val[32];
	int fd, n, ret;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	n = snprintf(val, sizeof(val), "%lld\n", v);
	ret = write(fd, val, n) == n ? 0 : -1;
	close(fd);
	return ret;
}

static long long cg_read(const char *dir, const char *file)
{
	char path[400];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

FIXTURE(memcg)
{
	char root[256];
	bool joined;
	int fd[3];
};

FIXTURE_VARIANT(memcg)
{
	bool accepting;		/* the process in the cgroup accepts */
};

FIXTURE_VARIANT_ADD(memcg, connecting) { .accepting = false };
FIXTURE_VARIANT_ADD(memcg, accepting) { .accepting = true };

FIXTURE_SETUP(memcg)
{
	for (int i = 0; i < 3; i++)
		self->fd[i] = -1;
	self->joined = false;
	cg_dir[0] = 0;
	rs_watchdog(_metadata->timeout + 30);
}

FIXTURE_TEARDOWN(memcg)
{
	for (int i = 0; i < 3; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
	if (self->joined)
		cg_write(self->root, "cgroup.procs", getpid());
	if (cg_dir[0])
		rmdir(cg_dir);
}

/* A socket with both buffers forced to size (root only). */
static int big_socket(struct __test_metadata *_metadata, int size)
{
	int fd = rs_socket(0);

	ASSERT_GE(fd, 0);
	ASSERT_EQ(0, rs_setint(fd, SOL_SOCKET, SO_SNDBUFFORCE, size));
	ASSERT_EQ(0, rs_setint(fd, SOL_SOCKET, SO_RCVBUFFORCE, size));
	return fd;
}

TEST_F_TIMEOUT(memcg, rings_charged, 120)
{
	long long m0, m1, m2, ring;
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	double end;
	char b = 0;
	int *c = &self->fd[0], *s = &self->fd[1], *l = &self->fd[2];

	RS_SKIP_TCP("the module charges its rings up front");
	need_root(_metadata);
	ASSERT_EQ(0, cg2_root(self->root, sizeof(self->root)))
		TH_LOG("no cgroup v2 memory controller: %s", strerror(errno));
	snprintf(cg_dir, sizeof(cg_dir), "%s/rs-lifecycle-%d", self->root,
		 getpid());
	ASSERT_EQ(0, mkdir(cg_dir, 0755)) TH_LOG("mkdir %s: %s", cg_dir,
						 strerror(errno));

	/* the end outside the cgroup exists before we join it */
	if (variant->accepting)
		*c = rs_socket(0);
	else
		*l = rs_listener(_metadata, &sin);
	ASSERT_EQ(0, cg_write(cg_dir, "cgroup.procs", getpid()));
	self->joined = true;
	m0 = cg_read(cg_dir, "memory.current");
	ASSERT_GE(m0, 0);

	if (variant->accepting) {
		*l = big_socket(_metadata, 1 << 20);
		rs_sin(&sin, rs.addr, 0);
		ASSERT_EQ(0, bind(*l, (struct sockaddr *)&sin, sizeof(sin)));
		ASSERT_EQ(0, listen(*l, 4));
		ASSERT_EQ(0, getsockname(*l, (struct sockaddr *)&sin, &len));
		ASSERT_EQ(0, connect(*c, (struct sockaddr *)&sin, sizeof(sin)))
			TH_LOG("connect: %s", strerror(errno));
		*s = rs_accept(_metadata, *l);
	} else {
		*c = big_socket(_metadata, 1 << 20);
		ASSERT_EQ(0, connect(*c, (struct sockaddr *)&sin, sizeof(sin)))
			TH_LOG("connect: %s", strerror(errno));
		*s = rs_accept(_metadata, *l);
	}
	ASSERT_EQ(1, send(*c, &b, 1, 0));
	ASSERT_EQ(1, rs_recv_all(*s, &b, 1, 0));
	ring = end_ring_bytes(_metadata, variant->accepting ? *s : *c);
	m1 = cg_read(cg_dir, "memory.current");
	/* out again: what we do from now on is not charged there */
	ASSERT_EQ(0, cg_write(self->root, "cgroup.procs", getpid()));
	self->joined = false;
	rs_info("memcg: memory.current %lld -> %lld with %lld bytes of rings",
		m0, m1, ring);
	EXPECT_GE(ring, 2 << 20);
	EXPECT_GE(m1 - m0, ring * 9 / 10)
		TH_LOG("the cgroup was charged %lld for %lld bytes of rings",
		       m1 - m0, ring);
	/* only this end's rings: the other end belongs elsewhere */
	EXPECT_LE(m1 - m0, ring + ring / 2);

	/* closed and torn down: the charge goes */
	close(*c);
	close(*s);
	*c = *s = -1;
	end = rs_now() + fault_sec();
	do {
		rs_msleep(200);
		m2 = cg_read(cg_dir, "memory.current");
	} while (m1 - m2 < ring * 3 / 4 && rs_now() < end);
	rs_info("memcg: memory.current %lld after close", m2);
	/*
	 * the rings' charge goes; a few hundred KiB of other memory charged
	 * meanwhile (the accepting side's listener stays) may stay: with
	 * rxe's 1 MiB rings that is more than a tenth of them
	 */
	EXPECT_GE(m1 - m2, ring * 3 / 4);
}

/* ---- global ring memory limit ---- */

FIXTURE(mem_max)
{
	long long orig;
	int fd[5];
};

FIXTURE_SETUP(mem_max)
{
	self->orig = -1;
	for (int i = 0; i < 5; i++)
		self->fd[i] = -1;
	rs_watchdog(_metadata->timeout + 30);
}

FIXTURE_TEARDOWN(mem_max)
{
	for (int i = 0; i < 5; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
	if (self->orig >= 0 && rs_param_set("mem_max", self->orig))
		TH_LOG("could not restore mem_max=%lld", self->orig);
}

TEST_F_TIMEOUT(mem_max, refuse_and_recover, 120)
{
	long long used0, used1, pair, per_end;
	struct sockaddr_in sin;
	double t0;
	int *fd = self->fd, c, s, err;
	char b = 0;

	RS_SKIP_TCP("the module's ring memory limit");
	need_root(_metadata);
	self->orig = NEED_PARAM("mem_max");
	used0 = mem_used_stable(15);
	ASSERT_GE(used0, 0);

	/* The counter counts exactly the rings of both ends. */
	rs_pair(_metadata, &fd[0], &fd[1]);
	used1 = rs_param_get("mem_used");
	per_end = end_ring_bytes(_metadata, fd[0]);
	pair = per_end + end_ring_bytes(_metadata, fd[1]);
	rs_info("mem_max: used %lld, with one connection %lld (%lld)", used0,
		used1, pair);
	EXPECT_EQ(pair, used1 - used0);

	/* Room for less than one end. */
	ASSERT_EQ(0, rs_param_set("mem_max", used1 + per_end / 2));
	fd[2] = rs_listener(_metadata, &sin);
	fd[3] = rs_socket(0);
	ASSERT_GE(fd[3], 0);
	t0 = rs_now();
	EXPECT_EQ(-1, connect(fd[3], (struct sockaddr *)&sin, sizeof(sin)));
	err = errno;
	EXPECT_EQ(ENOBUFS, err) TH_LOG("connect: %s", strerror(err));
	EXPECT_LT(rs_now() - t0, fault_sec());
	close(fd[3]);

	/* A small client fits; the listener's end does not: rejected. */
	fd[3] = rs_socket(0);
	ASSERT_GE(fd[3], 0);
	ASSERT_EQ(0, rs_setint(fd[3], SOL_SOCKET, SO_SNDBUF, 4096));
	ASSERT_EQ(0, rs_setint(fd[3], SOL_SOCKET, SO_RCVBUF, 4096));
	t0 = rs_now();
	EXPECT_EQ(-1, connect(fd[3], (struct sockaddr *)&sin, sizeof(sin)));
	err = errno;
	EXPECT_EQ(ECONNREFUSED, err) TH_LOG("connect: %s", strerror(err));
	EXPECT_LT(rs_now() - t0, fault_sec());
	close(fd[3]);
	fd[3] = -1;

	/* The first connection closes: there is room again. */
	close(fd[0]);
	close(fd[1]);
	fd[0] = fd[1] = -1;
	EXPECT_LE(mem_used_settle(used0, fault_sec()), used0);
	c = rs_connect(_metadata, &sin);
	fd[0] = c;
	s = rs_accept(_metadata, fd[2]);
	fd[1] = s;
	ASSERT_EQ(1, send(c, &b, 1, 0));
	ASSERT_EQ(1, rs_recv_all(s, &b, 1, 0));
}

/* The send ring of fd, or -1. */
static long long tx_ring_of(int fd)
{
	struct rdmastream_info info;
	socklen_t len = sizeof(info);

	if (getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &info, &len))
		return -1;
	return info.rsi_tx_ring;
}

/*
 * Queue bytes the peer does not read until the socket stays full, then
 * read them all back intact and wait for the send ring to empty.
 */
static ssize_t fill_and_drain(struct __test_metadata *_metadata, int c,
			      int s, uint64_t key)
{
	struct rs_xfer rx = { .fd = s, .key = key, .chunk = RS_MIB };
	double end;
	ssize_t n;
	int v = -1;

	n = rs_fill_pipe(c, key);
	EXPECT_GT(n, 0);
	rx.total = n > 0 ? n : 0;
	EXPECT_EQ(0, rs_xfer_start(&rx, rs_receiver));
	rs_xfer_join(&rx);
	RS_XFER_OK(&rx, "drain");
	end = rs_now() + 10;
	while (!ioctl(c, SIOCOUTQ, &v) && v && rs_now() < end)
		rs_msleep(20);
	EXPECT_EQ(0, v) TH_LOG("SIOCOUTQ %d: the send ring is not empty", v);
	return n;
}

/*
 * Ring memory under pressure (mem_used above three quarters of mem_max):
 * a send ring that grew goes back to its start size (16 KiB) at its
 * socket's next send, and mem_used drops by the difference at a send
 * once the old ring is fenced (its LOCAL_INV completed); rings do not
 * grow meanwhile, and grow again once the pressure is gone.
 */
TEST_F_TIMEOUT(mem_max, grown_ring_shrinks, 120)
{
	long long grown, used, after, small;
	int *fd = self->fd;
	double end;
	char b = 'x';

	RS_SKIP_TCP("the module's ring memory limit");
	need_root(_metadata);
	self->orig = NEED_PARAM("mem_max");
	rs_pair(_metadata, &fd[0], &fd[1]);
	small = tx_ring_of(fd[0]);
	fill_and_drain(_metadata, fd[0], fd[1], 41);
	grown = tx_ring_of(fd[0]);
	rs_info("mem_max: send ring %lld -> %lld", small, grown);
	ASSERT_GT(grown, small) TH_LOG("the send ring did not grow");

	used = rs_param_get("mem_used");
	ASSERT_EQ(0, rs_param_set("mem_max", used + used / 4));
	ASSERT_EQ(1, send(fd[0], &b, 1, 0));
	ASSERT_EQ(1, rs_recv_all(fd[1], &b, 1, 0));
	EXPECT_EQ(small, tx_ring_of(fd[0]));
	/*
	 * the big ring goes at a send after the LOCAL_INV that fences it
	 * has completed: under load that is a later send than the one that
	 * moved the bytes (CI once read mem_used 64 KiB higher, not lower)
	 */
	end = rs_now() + fault_sec();
	for (;;) {
		after = rs_param_get("mem_used");
		if (after <= used - (grown - small) || rs_now() > end)
			break;
		rs_msleep(50);
		ASSERT_EQ(1, send(fd[0], &b, 1, 0));
		ASSERT_EQ(1, rs_recv_all(fd[1], &b, 1, 0));
	}
	rs_info("mem_max: under pressure, mem_used %lld -> %lld", used,
		after);
	EXPECT_LE(after, used - (grown - small));
	/* no growth while it lasts: the writer waits for the reader */
	ASSERT_EQ(0, rs_param_set("mem_max", after + after / 4));
	fill_and_drain(_metadata, fd[0], fd[1], 42);
	EXPECT_EQ(small, tx_ring_of(fd[0]));

	ASSERT_EQ(0, rs_param_set("mem_max", self->orig));
	fill_and_drain(_metadata, fd[0], fd[1], 43);
	EXPECT_GT(tx_ring_of(fd[0]), small) TH_LOG("no growth after");
}

static long long rx_ring_of(int fd, long long *peer)
{
	struct rdmastream_info info;
	socklen_t len = sizeof(info);

	if (getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &info, &len))
		return -1;
	if (peer)
		*peer = info.rsi_peer_ring;
	return info.rsi_rx_ring;
}

/* total bytes c -> s, every byte checked */
static void stream(struct __test_metadata *_metadata, int c, int s,
		   uint64_t total, uint64_t key)
{
	struct rs_xfer tx = { .fd = c, .key = key, .total = total,
			      .chunk = RS_MIB };
	struct rs_xfer rx = { .fd = s, .key = key, .total = total,
			      .chunk = RS_MIB };

	ASSERT_EQ(0, rs_xfer_start(&rx, rs_receiver));
	ASSERT_EQ(0, rs_xfer_start(&tx, rs_sender));
	rs_xfer_join(&tx);
	rs_xfer_join(&rx);
	EXPECT_EQ(0, tx.err) TH_LOG("send: %s", strerror(tx.err));
	RS_XFER_OK(&rx, "stream");
}

/*
 * The stream buffer under pressure, as TCP prunes its receive buffer: one
 * that grew goes back to its start size (64 KiB) at its socket's next
 * receive, the peer learns the new size, and mem_used drops by the
 * difference once the old buffer is read out and fenced, with no other
 * call; bytes move intact meanwhile, the buffer does not grow while the
 * pressure lasts, and grows again after.
 */
TEST_F_TIMEOUT(mem_max, grown_stream_buffer_shrinks, 180)
{
	long long start, grown, used, after, now, peer = 0;
	int *fd = self->fd, sndbuf = 4 << 20;
	double end;
	char b = 'x';

	RS_SKIP_TCP("the module's ring memory limit");
	need_root(_metadata);
	self->orig = NEED_PARAM("mem_max");
	rs_pair(_metadata, &fd[0], &fd[1]);
	start = rx_ring_of(fd[1], NULL);
	end = rs_now() + 60;
	do
		stream(_metadata, fd[0], fd[1], 32 * RS_MIB, rs_key(7, 0, 44));
	while (rx_ring_of(fd[1], NULL) <= start && rs_now() < end);
	grown = rx_ring_of(fd[1], NULL);
	rs_info("mem_max: stream buffer %lld -> %lld", start, grown);
	ASSERT_GT(grown, start) TH_LOG("the stream buffer did not grow");

	/*
	 * fd[0]'s send ring grew too, and under pressure would go back to
	 * 16 KiB at its next send, and the pressure with it: SO_SNDBUF
	 * ends its autotuning and keeps it as it is.
	 */
	ASSERT_EQ(0, setsockopt(fd[0], SOL_SOCKET, SO_SNDBUF, &sndbuf,
				sizeof(sndbuf)));
	/*
	 * mem_max at mem_used: the pressure (above three quarters) holds
	 * even when the buffer of the last growth goes first (half the
	 * grown one); the smaller buffer is charged past the limit
	 */
	used = rs_param_get("mem_used");
	ASSERT_EQ(0, rs_param_set("mem_max", used));
	ASSERT_EQ(1, send(fd[0], &b, 1, 0));
	ASSERT_EQ(1, rs_recv_all(fd[1], &b, 1, 0));
	/*
	 * That receive sent the RING; its RING_ACK, the old buffer's
	 * LOCAL_INV and its free follow without another call: a connection
	 * that goes quiet after its last read gives the memory back too.
	 */
	end = rs_now() + fault_sec();
	for (;;) {
		now = rx_ring_of(fd[1], NULL);
		rx_ring_of(fd[0], &peer);
		after = rs_param_get("mem_used");
		if ((now == start && peer == start &&
		     after <= used - (grown - start)) || rs_now() > end)
			break;
		rs_msleep(20);
	}
	rs_info("mem_max: under pressure, stream buffer %lld, mem_used %lld -> %lld",
		now, used, after);
	EXPECT_EQ(start, now) TH_LOG("the stream buffer did not shrink");
	EXPECT_EQ(start, peer) TH_LOG("the peer writes a %lld byte buffer",
				      peer);
	EXPECT_LE(after, used - (grown - start));

	/* bytes move through the small buffer, which does not grow now */
	after = rs_param_get("mem_used");
	ASSERT_EQ(0, rs_param_set("mem_max", after));
	stream(_metadata, fd[0], fd[1], 16 * RS_MIB, rs_key(7, 0, 45));
	EXPECT_EQ(start, rx_ring_of(fd[1], NULL));

	ASSERT_EQ(0, rs_param_set("mem_max", self->orig));
	end = rs_now() + 60;
	do
		stream(_metadata, fd[0], fd[1], 32 * RS_MIB, rs_key(7, 0, 46));
	while (rx_ring_of(fd[1], NULL) <= start && rs_now() < end);
	EXPECT_GT(rx_ring_of(fd[1], NULL), start) TH_LOG("no growth after");
}

/* ---- orphans ---- */

FIXTURE(orphans)
{
	long long orig;
	int c, s;
};

FIXTURE_VARIANT(orphans)
{
	bool capped;		/* max_orphans=0: no closed socket lingers */
};

FIXTURE_VARIANT_ADD(orphans, lingering) { .capped = false };
FIXTURE_VARIANT_ADD(orphans, capped) { .capped = true };

FIXTURE_SETUP(orphans)
{
	self->orig = -1;
	self->c = self->s = -1;
	rs_watchdog(_metadata->timeout + 30);
}

FIXTURE_TEARDOWN(orphans)
{
	if (self->c >= 0)
		close(self->c);
	if (self->s >= 0)
		close(self->s);
	if (self->orig >= 0 && rs_param_set("max_orphans", self->orig))
		TH_LOG("could not restore max_orphans=%lld", self->orig);
}

TEST_F_TIMEOUT(orphans, close_with_unsent, 120)
{
	uint64_t key = rs_key(7, 0, 80);
	static char buf[64 * 1024];
	size_t got = 0, bad;
	ssize_t total, n;
	int err = 0;

	RS_SKIP_TCP("the module's max_orphans");
	need_root(_metadata);
	self->orig = NEED_PARAM("max_orphans");
	if (variant->capped) {
		ASSERT_EQ(0, rs_param_set("max_orphans", 0));
	} else {
		ASSERT_GT(self->orig, rs_param_get("orphans"));
	}

	rs_pair(_metadata, &self->c, &self->s);
	total = rs_fill_pipe(self->c, key);
	ASSERT_GT(total, 0);
	/* unsent data: the reader's buffer is full, the sender's too */
	close(self->c);
	self->c = -1;
	ASSERT_EQ(0, rs_set_timeo(self->s, SO_RCVTIMEO, fault_sec() * 1000));
	for (;;) {
		n = recv(self->s, buf, sizeof(buf), 0);
		if (n <= 0) {
			err = n ? errno : 0;
			break;
		}
		bad = rs_pat_check(buf, n, key, got);
		ASSERT_EQ((size_t)n, bad) TH_LOG("mismatch at %zu", got + bad);
		got += n;
	}
	rs_info("orphans: %zd sent, %zu received, then %s", total, got,
		err ? strerror(err) : "end of stream");
	if (variant->capped) {
		EXPECT_EQ(ECONNRESET, err);
		EXPECT_LT(got, (size_t)total);
	} else {
		EXPECT_EQ(0, err);
		EXPECT_EQ((size_t)total, got);
	}
}

/* ---- device removal while a copy is blocked ---- */

struct uffd_recv {
	int fd;
	void *buf;
	size_t len;
	ssize_t ret;
	int err;
	bool done;		/* __atomic */
	pthread_t thr;
};

static void *uffd_recv_fn(void *arg)
{
	struct uffd_recv *r = arg;

	r->ret = recv(r->fd, r->buf, r->len, 0);
	r->err = errno;
	__atomic_store_n(&r->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static bool uffd_done(struct uffd_recv *r)
{
	return __atomic_load_n(&r->done, __ATOMIC_ACQUIRE);
}

/* Wait for a child process until the deadline; its status, or -1. */
static int wait_child(pid_t pid, double end)
{
	int status;

	for (;;) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
		if (rs_now() >= end)
			return -1;
		rs_msleep(50);
	}
}

FIXTURE(uffd)
{
	int c, s, uffd;
	bool removed, started;
	pid_t rdma;
	struct uffd_recv r;
};

FIXTURE_SETUP(uffd)
{
	self->c = self->s = self->uffd = -1;
	self->removed = self->started = false;
	self->rdma = -1;
	rs_watchdog(_metadata->timeout + 30);
}

FIXTURE_TEARDOWN(uffd)
{
	/* closing the uffd ends a fault still pending: the recv returns */
	if (self->uffd >= 0)
		close(self->uffd);
	if (self->started)
		pthread_join(self->r.thr, NULL);
	if (self->rdma > 0)
		wait_child(self->rdma, rs_now() + 60);
	if (self->c >= 0)
		close(self->c);
	if (self->s >= 0)
		close(self->s);
	if (self->removed && rs_link_add())
		TH_LOG("could not re-add %s on %s", rs.rdmadev, rs.netdev);
}

TEST_F_TIMEOUT(uffd, link_delete_during_copy, 180)
{
	uint64_t key = rs_key(9, 0, 81);
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { };
	struct uffdio_copy cp = { };
	struct uffd_msg msg;
	long page = sysconf(_SC_PAGESIZE);
	struct pollfd pfd;
	double t0, tdel, t1 = 0;
	char *region, *src;
	int status;

	RS_SKIP_TCP("RDMA device removal");
	need_root(_metadata);
	ASSERT_TRUE(rs.netdev && rs_have_cmd("rdma") && rs_link_exists())
		TH_LOG("needs RS_NETDEV, the rdma tool and %s", rs.rdmadev);

	/* a page of data waits in the stream buffer */
	rs_pair(_metadata, &self->c, &self->s);
	rs_send_pat(_metadata, self->c, page, key, 0);
	ASSERT_EQ(page, rs_wait_inq(self->s, page, 5000));

	/* the recv copies it into a page nobody serves */
	self->uffd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	ASSERT_GE(self->uffd, 0) TH_LOG("userfaultfd: %s", strerror(errno));
	ASSERT_EQ(0, ioctl(self->uffd, UFFDIO_API, &api));
	region = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, region);
	reg.range.start = (unsigned long)region;
	reg.range.len = 2 * page;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	ASSERT_EQ(0, ioctl(self->uffd, UFFDIO_REGISTER, &reg));
	self->r.fd = self->s;
	self->r.buf = region;
	self->r.len = page;
	ASSERT_EQ(0, pthread_create(&self->r.thr, NULL, uffd_recv_fn,
				    &self->r));
	self->started = true;
	pfd.fd = self->uffd;
	pfd.events = POLLIN;
	ASSERT_EQ(1, poll(&pfd, 1, 5000)) TH_LOG("the recv did not fault");
	ASSERT_EQ(sizeof(msg), read(self->uffd, &msg, sizeof(msg)));
	ASSERT_EQ(UFFD_EVENT_PAGEFAULT, msg.event);
	rs_msleep(200);
	ASSERT_FALSE(uffd_done(&self->r));

	/* the device goes while the copy is stuck */
	tdel = rs_now();
	self->removed = true;
	self->rdma = fork();
	ASSERT_GE(self->rdma, 0);
	if (!self->rdma) {
		execlp("rdma", "rdma", "link", "delete", rs.rdmadev,
		       (char *)NULL);
		_exit(127);
	}
	status = wait_child(self->rdma, tdel + fault_sec());
	if (status >= 0) {
		self->rdma = -1;
		t1 = rs_now();
	}
	EXPECT_EQ(0, status) TH_LOG("rdma link delete: %s after %u s",
				    status < 0 ? "still running" : "failed",
				    fault_sec());

	/* served: the copy goes on and the recv returns its data */
	src = aligned_alloc(page, page);
	ASSERT_NE(NULL, src);
	memset(src, 0x5a, page);
	cp.dst = msg.arg.pagefault.address & ~(page - 1);
	cp.src = (unsigned long)src;
	cp.len = page;
	ASSERT_EQ(0, ioctl(self->uffd, UFFDIO_COPY, &cp));
	free(src);
	t0 = rs_now();
	while (!uffd_done(&self->r) && rs_now() - t0 < fault_sec())
		rs_msleep(50);
	ASSERT_TRUE(uffd_done(&self->r)) TH_LOG("recv still blocked");
	pthread_join(self->r.thr, NULL);
	self->started = false;
	rs_info("uffd: link delete took %.2f s, recv returned %zd (%s)",
		t1 ? t1 - tdel : -1.0, self->r.ret,
		self->r.ret < 0 ? strerror(self->r.err) : "ok");
	EXPECT_EQ(page, self->r.ret);
	if (self->r.ret == page) {
		EXPECT_EQ((size_t)page, rs_pat_check(region, page, key, 0));
	}
}

TEST_HARNESS_MAIN
