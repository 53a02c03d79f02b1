// SPDX-License-Identifier: GPL-2.0
/*
 * Systematic allocation-failure injection (debug kernel only).
 *
 * syscall.*  For each operation, N = 1, 2, ...: set up its preconditions,
 *            write N to /proc/thread-self/fail-nth (the Nth slab or page
 *            allocation this thread makes from then on fails), make the
 *            call, read fail-nth back (0: the fault was injected) and go
 *            on until the call succeeds without the fault having fired.
 *            Operations: socket, bind, listen, connect (the active end's
 *            system call), accept, setsockopt (each SOL_RDMASTREAM
 *            option, TCP_NODELAY, SO_RCVBUF, SO_SNDBUF), sendmsg and
 *            recvmsg on the indirect path (small writes, policy
 *            indirect-only) and on the direct path (page-aligned 256 KiB
 *            buffers, policy direct-only: the receiver has advertised
 *            before the send, the sender sends once the receive is
 *            advertised).
 * sys.*      Most of a connection is built outside the caller's thread:
 *            the passive end's CONNECT_REQUEST and both ends' ESTABLISHED
 *            run in rdma_cm's work queue, completions in softirq, rxe's
 *            packets in tasklets. fail-nth cannot reach those, so these
 *            variants fail one allocation system-wide: failslab (or
 *            fail_page_alloc) with probability 100, times 1 and a "space"
 *            budget S (bytes, or pages): the first allocation after S
 *            bytes have been allocated anywhere fails. One calibration
 *            window without a fault measures what the window allocates;
 *            S then walks from 0 to that total in RS_FAILNTH_SYS_POINTS
 *            steps. Windows: a connect() and its accept() (both ends'
 *            handlers), or a transfer on an established pair (direct one
 *            way, indirect the other).
 *
 * After every injected failure: the call gave a clean errno (ENOMEM,
 * ENOBUFS, what TCP gives, or a reset of that connection), and the socket
 * (or, after a reset, a fresh one) carries a verified transfer. At the end
 * of each test, after everything is closed: the module's mem_used and
 * orphans, its sockets in /proc/net/protocols and `rdma res show`'s pd,
 * cq, qp, cm_id and mr counts are back to where they were before it;
 * kmemleak is the run's (scripts/vm-kmemleak). Each test prints how many
 * failure points fired ("# failnth: <op>: N points ...").
 *
 * Fault injection exists only on the debug kernel (make check-debug):
 * without /proc/thread-self/fail-nth every test FAILS, it does not skip.
 * Root is needed (debugfs).
 *
 * Knobs: RS_FAILNTH_FIRST, RS_FAILNTH_LAST (N range of the syscall tests,
 * default 1..2000: one point is reproduced with FIRST=LAST=N),
 * RS_FAILNTH_SYS_POINTS (walk steps of the sys tests, 60),
 * RS_FAILNTH_SYS_FIRST, RS_FAILNTH_SYS_LAST (step range of the walk),
 * RS_FAILNTH_VERBOSE (failslab/fail_page_alloc verbose: 0; 2 prints each
 * injected failure's stack), RS_TIMEOUT_SCALE (waits), RS_MODNAME.
 */
#include "rs_common.h"

#include <dirent.h>
#include <sys/mount.h>

#define FN_DBG		"/sys/kernel/debug"
#define FN_NTH		"/proc/thread-self/fail-nth"
#define FN_SMALL	1000		/* indirect writes */
#define FN_DIRECT	(256 * 1024)	/* direct transfers */
#define FN_VERIFY	8192		/* bytes each way after a failure */

static unsigned int fn_scale(void)
{
	return rs_env_ulong("RS_TIMEOUT_SCALE", 1) ?: 1;
}

/* ---- debugfs fault-injection knobs ---- */

static int fn_knob(const char *dir, const char *knob, const char *val)
{
	char path[256];
	int fd, ret;

	snprintf(path, sizeof(path), FN_DBG "/%s/%s", dir, knob);
	fd = open(path, O_WRONLY | O_TRUNC);
	if (fd < 0)
		return -1;
	ret = write(fd, val, strlen(val)) == (ssize_t)strlen(val) ? 0 : -1;
	close(fd);
	return ret;
}

static long long fn_knob_get(const char *dir, const char *knob)
{
	char path[256];
	long long v = LLONG_MIN;
	FILE *f;

	snprintf(path, sizeof(path), FN_DBG "/%s/%s", dir, knob);
	f = fopen(path, "r");
	if (!f)
		return v;
	if (fscanf(f, "%lld", &v) != 1)
		v = LLONG_MIN;
	fclose(f);
	return v;
}

/*
 * fail-nth applies to an allocation only if the capability's filters let
 * it through: GFP_KERNEL ones need ignore-gfp-wait=N, order-0 pages
 * min-order=0, GFP_HIGHUSER ones ignore-gfp-highmem=N. Probability 0:
 * nothing fails but what fail-nth (or a sys test's window) asks for.
 */
static int fn_knobs_setup(void)
{
	char verbose[16];
	int err = 0;

	if (access(FN_DBG "/failslab", F_OK))
		mount("debugfs", FN_DBG, "debugfs", 0, NULL);
	snprintf(verbose, sizeof(verbose), "%lu",
		 rs_env_ulong("RS_FAILNTH_VERBOSE", 0));
	err |= fn_knob("failslab", "probability", "0");
	err |= fn_knob("failslab", "ignore-gfp-wait", "N");
	err |= fn_knob("failslab", "task-filter", "N");
	err |= fn_knob("failslab", "interval", "1");
	err |= fn_knob("failslab", "space", "0");
	err |= fn_knob("failslab", "verbose", verbose);
	err |= fn_knob("fail_page_alloc", "probability", "0");
	err |= fn_knob("fail_page_alloc", "ignore-gfp-wait", "N");
	err |= fn_knob("fail_page_alloc", "ignore-gfp-highmem", "N");
	err |= fn_knob("fail_page_alloc", "min-order", "0");
	err |= fn_knob("fail_page_alloc", "task-filter", "N");
	err |= fn_knob("fail_page_alloc", "interval", "1");
	err |= fn_knob("fail_page_alloc", "space", "0");
	err |= fn_knob("fail_page_alloc", "verbose", verbose);
	return err;
}

/* Back to the kernel's defaults: nothing fails. */
static void fn_knobs_restore(void)
{
	fn_knob("failslab", "probability", "0");
	fn_knob("failslab", "space", "0");
	fn_knob("failslab", "ignore-gfp-wait", "Y");
	fn_knob("fail_page_alloc", "probability", "0");
	fn_knob("fail_page_alloc", "space", "0");
	fn_knob("fail_page_alloc", "ignore-gfp-wait", "Y");
	fn_knob("fail_page_alloc", "ignore-gfp-highmem", "Y");
	fn_knob("fail_page_alloc", "min-order", "1");
}

/* ---- fail-nth ---- */

static void fn_arm(int nth, unsigned int n)
{
	char b[16];
	int len = snprintf(b, sizeof(b), "%u", n);

	if (pwrite(nth, b, len, 0) != len)
		abort();
}

/* Disarm; true if the armed fault was injected. */
static bool fn_disarm(int nth)
{
	char b[16] = "";
	bool fired;

	if (pread(nth, b, sizeof(b) - 1, 0) <= 0)
		abort();
	fired = strtoul(b, NULL, 10) == 0;
	if (pwrite(nth, "0", 1, 0) != 1)
		abort();
	return fired;
}

/* ---- baseline: the module's counts and the device's resources ---- */

struct fn_counts {
	long long mem_used, orphans, sockets;
	long pd, cq, qp, cm_id, mr;
};

static long fn_res_field(const char *line, const char *name)
{
	char key[32];
	const char *p;

	snprintf(key, sizeof(key), " %s ", name);
	p = strstr(line, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

static void fn_counts_read(struct fn_counts *c)
{
	char line[1024], dev[64];
	FILE *f;

	memset(c, 0xff, sizeof(*c));
	c->mem_used = rs_param_get("mem_used");
	c->orphans = rs_param_get("orphans");
	c->sockets = rs_proto_sockets();
	snprintf(dev, sizeof(dev), " %s: ", rs.rdmadev);
	f = popen("rdma res show 2>/dev/null", "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, dev))
			continue;
		c->pd = fn_res_field(line, "pd");
		c->cq = fn_res_field(line, "cq");
		c->qp = fn_res_field(line, "qp");
		c->cm_id = fn_res_field(line, "cm_id");
		c->mr = fn_res_field(line, "mr");
	}
	pclose(f);
}

/*
 * The CQs come from the device's CQ pool (ib_cq_pool_get()), which keeps
 * them until the device goes: more may exist afterwards, never fewer.
 */
static bool fn_counts_eq(const struct fn_counts *a, const struct fn_counts *b)
{
	return a->mem_used == b->mem_used && a->orphans == b->orphans &&
	       a->sockets == b->sockets && a->pd == b->pd && a->qp == b->qp &&
	       a->cm_id == b->cm_id && a->mr == b->mr && a->cq >= b->cq;
}

static void fn_counts_log(const char *what, const struct fn_counts *c)
{
	rs_info("%s: mem_used %lld orphans %lld sockets %lld pd %ld cq %ld qp %ld cm_id %ld mr %ld",
		what, c->mem_used, c->orphans, c->sockets, c->pd, c->cq,
		c->qp, c->cm_id, c->mr);
}

/* ---- connections and verified transfers ---- */

static void fn_timeouts(int fd)
{
	unsigned int ms = 20000 * fn_scale();

	rs_set_timeo(fd, SO_RCVTIMEO, ms);
	rs_set_timeo(fd, SO_SNDTIMEO, ms);
}

/* A listener on RS_ADDR, any port; -1 on failure. */
static int fn_listener(struct sockaddr_in *sin)
{
	socklen_t len = sizeof(*sin);
	int fd = rs_socket(0);

	if (fd < 0)
		return -1;
	rs_sin(sin, rs.addr, 0);
	if (bind(fd, (struct sockaddr *)sin, sizeof(*sin)) ||
	    listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)sin, &len)) {
		close(fd);
		return -1;
	}
	fn_timeouts(fd);
	return fd;
}

/* Accept one connection within the receive timeout; -1 with errno. */
static int fn_accept(int lfd)
{
	int fd = accept(lfd, NULL, NULL);

	if (fd >= 0)
		fn_timeouts(fd);
	return fd;
}

/* Connect a fresh socket to sin; -1 with errno. */
static int fn_connect(const struct sockaddr_in *sin, int policy)
{
	int fd = rs_socket(0), err;

	if (fd < 0)
		return -1;
	fn_timeouts(fd);
	if (policy >= 0)
		rs_setint(fd, SOL_RDMASTREAM, RDMASTREAM_POLICY, policy);
	if (connect(fd, (const struct sockaddr *)sin, sizeof(*sin))) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

/*
 * One verified transfer each way; 0, or the errno of the first failed
 * call (ETIMEDOUT for a short read or a mismatch: the data did not come).
 */
static int fn_exchange(int a, int b, size_t n, unsigned int salt)
{
	static char buf[FN_VERIFY];
	int i, from, to;

	if (n > sizeof(buf))
		n = sizeof(buf);
	for (i = 0; i < 2; i++) {
		from = i ? b : a;
		to = i ? a : b;
		rs_pat_fill(buf, n, rs_key(salt, i, 9), 0);
		if (rs_send_all(from, buf, n, 0) != (ssize_t)n)
			return errno ?: EIO;
		memset(buf, 0, n);
		if (rs_recv_all(to, buf, n, 0) != (ssize_t)n)
			return errno ?: ETIMEDOUT;
		if (rs_pat_check(buf, n, rs_key(salt, i, 9), 0) != n)
			return EILSEQ;
	}
	return 0;
}

/* A fresh pair on lfd (or a new listener), a verified transfer; 0 or errno */
static int fn_fresh_pair_ok(int lfd, unsigned int salt)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int c, s, err, own = -1;

	if (lfd < 0) {
		own = lfd = fn_listener(&sin);
		if (lfd < 0)
			return errno;
	} else if (getsockname(lfd, (struct sockaddr *)&sin, &len)) {
		return errno;
	}
	c = fn_connect(&sin, -1);
	if (c < 0) {
		err = errno;
		goto out;
	}
	s = fn_accept(lfd);
	if (s < 0) {
		err = errno;
		close(c);
		goto out;
	}
	err = fn_exchange(c, s, FN_VERIFY, salt);
	close(c);
	close(s);
out:
	if (own >= 0)
		close(own);
	return err;
}

/* errno a failed call may give under an allocation failure */
static bool fn_errno_ok(int err, bool conn)
{
	switch (err) {
	case ENOMEM:
	case ENOBUFS:
	case ENFILE:	/* sock_alloc(): "socket: no more sockets", as TCP */
		return true;
	case ECONNRESET:
	case EPIPE:
	case ECONNABORTED:
	case ETIMEDOUT:
	case ECONNREFUSED:
	case EHOSTUNREACH:
	case ENETUNREACH:
		return conn;
	default:
		return false;
	}
}

/*
 * RS_FAILNTH_ONLY="socket,bind,sys.slab_connect" (commas or spaces): run
 * only those (for
 * reproducing one failure by hand; run-tests and check-debug never set it,
 * and then nothing is skipped).
 */
static bool fn_selected(const char *name)
{
	const char *only = getenv("RS_FAILNTH_ONLY");
	size_t len = strlen(name);
	const char *p;

	if (!only || !*only)
		return true;
	for (p = only; (p = strstr(p, name)); p += len)
		if ((p == only || p[-1] == ' ' || p[-1] == ',') &&
		    (!p[len] || p[len] == ' ' || p[len] == ','))
			return true;
	return false;
}

#define FN_SELECT(name) do {						\
	if (!fn_selected(name))						\
		SKIP(return, "not in RS_FAILNTH_ONLY");			\
} while (0)

/* ---- the fixture ---- */

FIXTURE(failnth)
{
	int nth;		/* /proc/thread-self/fail-nth */
	struct fn_counts base;
	unsigned int first, last;
	unsigned int points;	/* N values that fired */
	unsigned int resets;	/* of those, the ones that reset the conn */
	unsigned int ok_anyway;	/* fired, the call succeeded all the same */
	int fd[4];
	char *buf;		/* FN_DIRECT bytes, page aligned */
	char *buf2;
};

FIXTURE_SETUP(failnth)
{
	int i;

	for (i = 0; i < 4; i++)
		self->fd[i] = -1;
	self->buf = MAP_FAILED;
	self->buf2 = MAP_FAILED;
	rs_watchdog(_metadata->timeout + 30);
	self->nth = open(FN_NTH, O_RDWR);
	ASSERT_GE(self->nth, 0)
		TH_LOG("%s: %s: not a kernel with CONFIG_FAULT_INJECTION (run this on the debug kernel: make check-debug)",
		       FN_NTH, strerror(errno));
	ASSERT_FALSE(rs.tcp) TH_LOG("the module's allocations are tested");
	ASSERT_EQ(0, geteuid()) TH_LOG("needs root (debugfs)");
	ASSERT_EQ(0, fn_knobs_setup())
		TH_LOG("debugfs failslab/fail_page_alloc knobs: %s",
		       strerror(errno));
	self->first = rs_env_ulong("RS_FAILNTH_FIRST", 1) ?: 1;
	self->last = rs_env_ulong("RS_FAILNTH_LAST", 2000);
	self->buf = mmap(NULL, FN_DIRECT, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	self->buf2 = mmap(NULL, FN_DIRECT, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	ASSERT_NE(MAP_FAILED, self->buf);
	ASSERT_NE(MAP_FAILED, self->buf2);
	/* no page fault may allocate while a fault is armed */
	memset(self->buf, 1, FN_DIRECT);
	memset(self->buf2, 1, FN_DIRECT);
	fn_counts_read(&self->base);
	fn_counts_log("baseline", &self->base);
}

FIXTURE_TEARDOWN(failnth)
{
	int i;

	fn_knobs_restore();
	for (i = 0; i < 4; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
	if (self->buf != MAP_FAILED)
		munmap(self->buf, FN_DIRECT);
	if (self->buf2 != MAP_FAILED)
		munmap(self->buf2, FN_DIRECT);
	if (self->nth >= 0)
		close(self->nth);
}

static void fn_close_all(FIXTURE_DATA(failnth) *self)
{
	int i;

	for (i = 0; i < 4; i++) {
		if (self->fd[i] >= 0)
			close(self->fd[i]);
		self->fd[i] = -1;
	}
}

/* Everything closed: all counts back to the baseline within a bound. */
static void fn_settle(struct __test_metadata *_metadata,
		      FIXTURE_DATA(failnth) *self, const char *op)
{
	double end = rs_now() + 60.0 * fn_scale();
	struct fn_counts now;

	fn_knobs_restore();
	fn_close_all(self);
	do {
		fn_counts_read(&now);
		if (fn_counts_eq(&now, &self->base))
			break;
		rs_msleep(200);
	} while (rs_now() < end);
	fn_counts_log("after", &now);
	rs_info("failnth: %s: %u points fired (%u reset the connection, %u succeeded anyway)",
		op, self->points, self->resets, self->ok_anyway);
	EXPECT_TRUE(fn_counts_eq(&now, &self->base))
		TH_LOG("%s: module counts or rdma resources not back to the baseline",
		       op);
}

/* Record one fired point; check the errno of a failed call. */
static void fn_point(struct __test_metadata *_metadata,
		     FIXTURE_DATA(failnth) *self, const char *op,
		     unsigned int n, long ret, int err, bool conn)
{
	self->points++;
	if (ret >= 0) {
		self->ok_anyway++;
		return;
	}
	EXPECT_TRUE(fn_errno_ok(err, conn))
		TH_LOG("%s: fail-nth %u: errno %d (%s)", op, n, err,
		       strerror(err));
}

/* ---- socket, bind, listen, connect, accept ---- */

TEST_F_TIMEOUT(failnth, socket, 600)
{
	FN_SELECT(_metadata->name);
	unsigned int n;
	bool fired;
	int fd, err;

	for (n = self->first; n <= self->last; n++) {
		fn_arm(self->nth, n);
		fd = rs_socket(0);
		err = errno;
		fired = fn_disarm(self->nth);
		if (fd >= 0)
			close(fd);
		if (!fired) {
			ASSERT_GE(fd, 0) TH_LOG("socket: %s", strerror(err));
			break;
		}
		fn_point(_metadata, self, "socket", n, fd, err, false);
	}
	ASSERT_EQ(0, fn_fresh_pair_ok(-1, 1));
	fn_settle(_metadata, self, "socket");
}

TEST_F_TIMEOUT(failnth, bind, 900)
{
	FN_SELECT(_metadata->name);
	struct sockaddr_in sin;
	unsigned int n;
	bool fired;
	int ret, err;
	int *fd = &self->fd[0];

	for (n = self->first; n <= self->last; n++) {
		*fd = rs_socket(0);
		ASSERT_GE(*fd, 0);
		rs_sin(&sin, rs.addr, 0);
		fn_arm(self->nth, n);
		ret = bind(*fd, (struct sockaddr *)&sin, sizeof(sin));
		err = errno;
		fired = fn_disarm(self->nth);
		if (fired)
			fn_point(_metadata, self, "bind", n, ret, err, false);
		/* the socket is still usable: bind again, listen, connect */
		if (ret)
			ASSERT_EQ(0, bind(*fd, (struct sockaddr *)&sin,
					  sizeof(sin)))
				TH_LOG("bind after fail-nth %u: %s", n,
				       strerror(errno));
		ASSERT_EQ(0, listen(*fd, 4)) TH_LOG("fail-nth %u", n);
		fn_timeouts(*fd);
		ASSERT_EQ(0, fn_fresh_pair_ok(*fd, n))
			TH_LOG("bind fail-nth %u: the socket does not work", n);
		close(*fd);
		*fd = -1;
		if (!fired) {
			ASSERT_EQ(0, ret) TH_LOG("bind: %s", strerror(err));
			break;
		}
	}
	fn_settle(_metadata, self, "bind");
}

TEST_F_TIMEOUT(failnth, listen, 900)
{
	FN_SELECT(_metadata->name);
	struct sockaddr_in sin;
	unsigned int n;
	bool fired;
	int ret, err;
	int *fd = &self->fd[0];

	for (n = self->first; n <= self->last; n++) {
		*fd = rs_socket(0);
		ASSERT_GE(*fd, 0);
		rs_sin(&sin, rs.addr, 0);
		ASSERT_EQ(0, bind(*fd, (struct sockaddr *)&sin, sizeof(sin)));
		fn_arm(self->nth, n);
		ret = listen(*fd, 4);
		err = errno;
		fired = fn_disarm(self->nth);
		if (fired)
			fn_point(_metadata, self, "listen", n, ret, err, false);
		if (ret)
			ASSERT_EQ(0, listen(*fd, 4))
				TH_LOG("listen after fail-nth %u: %s", n,
				       strerror(errno));
		fn_timeouts(*fd);
		ASSERT_EQ(0, fn_fresh_pair_ok(*fd, n))
			TH_LOG("listen fail-nth %u: the listener does not work",
			       n);
		close(*fd);
		*fd = -1;
		if (!fired) {
			ASSERT_EQ(0, ret) TH_LOG("listen: %s", strerror(err));
			break;
		}
	}
	fn_settle(_metadata, self, "listen");
}

TEST_F_TIMEOUT(failnth, connect, 1200)
{
	FN_SELECT(_metadata->name);
	struct sockaddr_in sin;
	int *l = &self->fd[0], *c = &self->fd[1], *s = &self->fd[2];
	unsigned int n;
	bool fired;
	int ret, err;

	*l = fn_listener(&sin);
	ASSERT_GE(*l, 0);
	for (n = self->first; n <= self->last; n++) {
		*c = rs_socket(0);
		ASSERT_GE(*c, 0);
		fn_timeouts(*c);
		fn_arm(self->nth, n);
		ret = connect(*c, (struct sockaddr *)&sin, sizeof(sin));
		err = errno;
		fired = fn_disarm(self->nth);
		if (fired)
			fn_point(_metadata, self, "connect", n, ret, err, true);
		if (ret) {
			/* as TCP: the same socket may try again */
			ASSERT_EQ(0, connect(*c, (struct sockaddr *)&sin,
					     sizeof(sin)))
				TH_LOG("connect again after fail-nth %u: %s",
				       n, strerror(errno));
		}
		*s = fn_accept(*l);
		ASSERT_GE(*s, 0) TH_LOG("accept after connect fail-nth %u: %s",
					n, strerror(errno));
		ASSERT_EQ(0, fn_exchange(*c, *s, FN_VERIFY, n))
			TH_LOG("connect fail-nth %u: no transfer", n);
		close(*c);
		close(*s);
		*c = *s = -1;
		if (!fired) {
			ASSERT_EQ(0, ret) TH_LOG("connect: %s", strerror(err));
			break;
		}
	}
	fn_settle(_metadata, self, "connect");
}

TEST_F_TIMEOUT(failnth, accept, 1200)
{
	FN_SELECT(_metadata->name);
	struct sockaddr_in sin;
	int *l = &self->fd[0], *c = &self->fd[1], *s = &self->fd[2];
	unsigned int n;
	bool fired;
	int err;

	*l = fn_listener(&sin);
	ASSERT_GE(*l, 0);
	for (n = self->first; n <= self->last; n++) {
		*c = fn_connect(&sin, -1);
		ASSERT_GE(*c, 0) TH_LOG("connect: %s", strerror(errno));
		ASSERT_EQ(POLLIN, rs_poll(*l, POLLIN, 20000 * fn_scale()));
		fn_arm(self->nth, n);
		*s = accept(*l, NULL, NULL);
		err = errno;
		fired = fn_disarm(self->nth);
		if (fired)
			fn_point(_metadata, self, "accept", n, *s, err, false);
		if (*s < 0) {
			/* the connection stays queued for the next accept */
			*s = fn_accept(*l);
			ASSERT_GE(*s, 0)
				TH_LOG("accept again after fail-nth %u: %s",
				       n, strerror(errno));
		}
		fn_timeouts(*s);
		ASSERT_EQ(0, fn_exchange(*c, *s, FN_VERIFY, n))
			TH_LOG("accept fail-nth %u: no transfer", n);
		close(*c);
		close(*s);
		*c = *s = -1;
		if (!fired)
			break;
	}
	fn_settle(_metadata, self, "accept");
}

/* ---- setsockopt ---- */

static const struct {
	const char *name;
	int level, opt, val;
} fn_opts[] = {
	{ "RDMASTREAM_POLICY", SOL_RDMASTREAM, RDMASTREAM_POLICY,
	  RDMASTREAM_POLICY_DIRECT_ONLY },
	{ "RDMASTREAM_DIRECT_THRESHOLD", SOL_RDMASTREAM,
	  RDMASTREAM_DIRECT_THRESHOLD, 65536 },
	{ "TCP_NODELAY", SOL_TCP, TCP_NODELAY, 1 },
	{ "SO_RCVBUF", SOL_SOCKET, SO_RCVBUF, 128 * 1024 },
	{ "SO_SNDBUF", SOL_SOCKET, SO_SNDBUF, 128 * 1024 },
	{ "SO_KEEPALIVE", SOL_SOCKET, SO_KEEPALIVE, 1 },
};

TEST_F_TIMEOUT(failnth, setsockopt, 900)
{
	FN_SELECT(_metadata->name);
	struct sockaddr_in sin;
	int *l = &self->fd[0], *c = &self->fd[1], *s = &self->fd[2];
	unsigned int i, n, pts;
	bool fired;
	int ret, err;

	*l = fn_listener(&sin);
	ASSERT_GE(*l, 0);
	*c = rs_socket(0);
	ASSERT_GE(*c, 0);
	fn_timeouts(*c);
	for (i = 0; i < sizeof(fn_opts) / sizeof(fn_opts[0]); i++) {
		pts = self->points;
		for (n = self->first; n <= self->last; n++) {
			fn_arm(self->nth, n);
			ret = rs_setint(*c, fn_opts[i].level, fn_opts[i].opt,
					fn_opts[i].val);
			err = errno;
			fired = fn_disarm(self->nth);
			if (!fired) {
				ASSERT_EQ(0, ret)
					TH_LOG("%s: %s", fn_opts[i].name,
					       strerror(err));
				break;
			}
			fn_point(_metadata, self, fn_opts[i].name, n, ret,
				 err, false);
		}
		rs_info("failnth: setsockopt %s: %u points", fn_opts[i].name,
			self->points - pts);
	}
	/* the options are in effect on the connection */
	ASSERT_EQ(0, connect(*c, (struct sockaddr *)&sin, sizeof(sin)));
	*s = fn_accept(*l);
	ASSERT_GE(*s, 0);
	EXPECT_EQ(RDMASTREAM_POLICY_DIRECT_ONLY,
		  rs_getint(*c, SOL_RDMASTREAM, RDMASTREAM_POLICY));
	EXPECT_EQ(65536, rs_getint(*c, SOL_RDMASTREAM,
				   RDMASTREAM_DIRECT_THRESHOLD));
	EXPECT_EQ(1, rs_getint(*c, SOL_TCP, TCP_NODELAY));
	EXPECT_EQ(256 * 1024, rs_getint(*c, SOL_SOCKET, SO_RCVBUF));
	ASSERT_EQ(0, fn_exchange(*c, *s, FN_VERIFY, 7));
	fn_settle(_metadata, self, "setsockopt");
}

/* ---- sendmsg and recvmsg ---- */

struct fn_stream {
	int l, c, s;		/* listener, sender, receiver */
	int policy;
	uint64_t key, tx, rx;	/* stream c -> s: bytes sent, verified */
	unsigned int gen;
};

/* Rings that hold a whole direct transfer: no send waits for a reader. */
static void fn_bigbufs(int fd)
{
	rs_setint(fd, SOL_SOCKET, SO_SNDBUFFORCE, 1 << 20);
	rs_setint(fd, SOL_SOCKET, SO_RCVBUFFORCE, 1 << 20);
}

/*
 * Accept c's connection from l, or learn that c's connection failed;
 * -1 with errno (EAGAIN: neither happened in time).
 */
static int fn_accept_or_err(int l, int c)
{
	double end = rs_now() + 20.0 * fn_scale();
	struct pollfd p[2] = {
		{ .fd = l, .events = POLLIN },
		{ .fd = c, .events = POLLRDHUP },
	};

	while (rs_now() < end) {
		p[0].revents = p[1].revents = 0;
		if (poll(p, 2, 100) < 0 && errno != EINTR)
			return -1;
		if (p[0].revents & POLLIN)
			return fn_accept(l);
		if (p[1].revents & (POLLERR | POLLHUP | POLLRDHUP)) {
			errno = rs_sock_error(c) ?: ECONNRESET;
			return -1;
		}
	}
	errno = EAGAIN;
	return -1;
}

static int fn_stream_open(struct fn_stream *st)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd;

	if (getsockname(st->l, (struct sockaddr *)&sin, &len))
		return -1;
	/* what earlier failed attempts left queued */
	while (rs_poll(st->l, POLLIN, 0) > 0 &&
	       (fd = accept(st->l, NULL, NULL)) >= 0)
		close(fd);
	st->c = rs_socket(0);
	if (st->c < 0)
		return -1;
	fn_timeouts(st->c);
	fn_bigbufs(st->c);
	if (st->policy >= 0)
		rs_setint(st->c, SOL_RDMASTREAM, RDMASTREAM_POLICY, st->policy);
	if (connect(st->c, (struct sockaddr *)&sin, sizeof(sin)))
		return -1;
	st->s = fn_accept_or_err(st->l, st->c);
	if (st->s < 0)
		return -1;
	if (st->policy >= 0)
		rs_setint(st->s, SOL_RDMASTREAM, RDMASTREAM_POLICY, st->policy);
	st->key = rs_key(++st->gen, 0, 0xf9);
	st->tx = st->rx = 0;
	return 0;
}

static int fn_big_listener(void)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd = rs_socket(0);

	if (fd < 0)
		return -1;
	fn_bigbufs(fd);
	rs_sin(&sin, rs.addr, 0);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)&sin, &len)) {
		close(fd);
		return -1;
	}
	fn_timeouts(fd);
	return fd;
}

static void fn_stream_close(struct fn_stream *st)
{
	if (st->c >= 0)
		close(st->c);
	if (st->s >= 0)
		close(st->s);
	st->c = st->s = -1;
}

/* Read what was sent and not yet verified; 0 or errno. */
static int fn_stream_drain(struct fn_stream *st, char *buf)
{
	size_t n;
	ssize_t r;

	while (st->rx < st->tx) {
		n = st->tx - st->rx;
		if (n > FN_DIRECT)
			n = FN_DIRECT;
		r = recv(st->s, buf, n, 0);
		if (r < 0)
			return errno;
		if (!r)
			return ECONNRESET;
		if (rs_pat_check(buf, r, st->key, st->rx) != (size_t)r)
			return EILSEQ;
		st->rx += r;
	}
	return 0;
}

/*
 * After a fired point: the stream is intact up to what was sent and still
 * carries data, or the connection was reset (a call said so) and a new
 * one works. Returns false if the connection was replaced.
 */
static bool fn_stream_check(struct __test_metadata *_metadata,
			    struct fn_stream *st, char *buf, const char *op,
			    unsigned int n, int callerr)
{
	int err = 0;

	if (!callerr || !fn_errno_ok(callerr, true) || callerr == ENOMEM ||
	    callerr == ENOBUFS) {
		err = fn_stream_drain(st, buf);
		if (!err)
			err = fn_exchange(st->c, st->s, 512, n);
		if (!err)
			return true;
	}
	/* the connection is gone: only a reset may say so */
	EXPECT_TRUE(fn_errno_ok(callerr ?: err, true) &&
		    (callerr ?: err) != ENOMEM && (callerr ?: err) != ENOBUFS)
		TH_LOG("%s: fail-nth %u: stream broken: call %s, then %s",
		       op, n, strerror(callerr), strerror(err));
	EXPECT_NE(EILSEQ, err) TH_LOG("%s: fail-nth %u: data corrupted",
				      op, n);
	fn_stream_close(st);
	err = fn_stream_open(st) ? errno :
	      fn_exchange(st->c, st->s, FN_VERIFY, n);
	EXPECT_EQ(0, err) TH_LOG("%s: fail-nth %u: a new connection: %s",
				 op, n, strerror(err));
	return false;
}

/* A peer's ADVERTs received so far (RDMASTREAM_INFO). */
static unsigned long long fn_adverts(int fd)
{
	struct rdmastream_info i;
	socklen_t len = sizeof(i);

	memset(&i, 0, sizeof(i));
	getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &i, &len);
	return i.rsi_adverts_received;
}

static bool fn_wait_advert(int fd, unsigned long long before,
			   volatile bool *stop)
{
	double end = rs_now() + 10.0 * fn_scale();

	while (fn_adverts(fd) <= before) {
		if ((stop && *stop) || rs_now() > end)
			return false;
		rs_msleep(1);
	}
	return true;
}

/* The helper thread's side of a direct transfer. */
struct fn_peer {
	struct fn_stream *st;
	char *buf;
	uint64_t off;		/* stream offset of its bytes */
	size_t len;
	unsigned long long adverts;	/* sender: wait for one more */
	volatile bool stop;	/* sender: the receive has returned */
	volatile bool hold;	/* receiver: wait for go */
	volatile bool go;
	ssize_t done;
	int err;
	pthread_t thr;
};

/* Receive len bytes (blocking, MSG_WAITALL: one ADVERT) and verify. */
static void *fn_peer_recv(void *arg)
{
	struct fn_peer *p = arg;
	ssize_t r;

	while (p->hold && !p->go)
		rs_msleep(1);
	p->done = 0;
	while ((size_t)p->done < p->len) {
		r = recv(p->st->s, p->buf + p->done, p->len - p->done,
			 MSG_WAITALL);
		if (r <= 0) {
			p->err = r ? errno : ECONNRESET;
			return NULL;
		}
		p->done += r;
	}
	if (rs_pat_check(p->buf, p->len, p->st->key, p->off) != p->len)
		p->err = EILSEQ;
	return NULL;
}

/* Send len bytes once the receiver has advertised (or has returned). */
static void *fn_peer_send(void *arg)
{
	struct fn_peer *p = arg;

	fn_wait_advert(p->st->c, p->adverts, &p->stop);
	rs_pat_fill(p->buf, p->len, p->st->key, p->off);
	p->done = rs_send_all(p->st->c, p->buf, p->len, 0);
	if (p->done < 0)
		p->err = errno;
	return NULL;
}

enum fn_io { FN_SEND, FN_RECV };

/* One sendmsg or recvmsg under fail-nth n; returns whether it fired. */
static bool fn_io_indirect(struct __test_metadata *_metadata,
			   FIXTURE_DATA(failnth) *self, struct fn_stream *st,
			   enum fn_io io, unsigned int n, const char *op)
{
	char *buf = self->buf;
	ssize_t r;
	bool fired;
	int err;

	rs_pat_fill(buf, FN_SMALL, st->key, st->tx);
	if (io == FN_RECV) {
		/* the bytes wait in the stream buffer */
		EXPECT_EQ(FN_SMALL, rs_send_all(st->c, buf, FN_SMALL, 0));
		st->tx += FN_SMALL;
		EXPECT_EQ(FN_SMALL, rs_wait_inq(st->s, FN_SMALL,
						20000 * fn_scale()));
		memset(buf, 0, FN_SMALL);
	}
	fn_arm(self->nth, n);
	if (io == FN_SEND)
		r = send(st->c, buf, FN_SMALL, 0);
	else
		r = recv(st->s, buf, FN_SMALL, 0);
	err = r < 0 ? errno : 0;
	fired = fn_disarm(self->nth);
	if (io == FN_SEND && r > 0)
		st->tx += r;
	if (io == FN_RECV && r > 0) {
		EXPECT_EQ(r, (ssize_t)rs_pat_check(buf, r, st->key, st->rx))
			TH_LOG("%s: fail-nth %u: data corrupted", op, n);
		st->rx += r;
	}
	if (fired) {
		fn_point(_metadata, self, op, n, r, err, true);
		if (!fn_stream_check(_metadata, st, self->buf2, op, n, err))
			self->resets++;
	} else {
		EXPECT_EQ(FN_SMALL, r) TH_LOG("%s: %s", op, strerror(err));
		EXPECT_EQ(0, fn_stream_drain(st, self->buf2));
	}
	return fired;
}

static bool fn_io_direct(struct __test_metadata *_metadata,
			 FIXTURE_DATA(failnth) *self, struct fn_stream *st,
			 enum fn_io io, unsigned int n, const char *op)
{
	struct fn_peer p = { .st = st, .len = FN_DIRECT, .off = st->tx };
	ssize_t r, more;
	bool fired;
	int err;

	if (io == FN_SEND) {
		/* the receiver advertises first: the send goes direct */
		p.buf = self->buf2;
		p.adverts = fn_adverts(st->c);
		ASSERT_EQ(0, pthread_create(&p.thr, NULL, fn_peer_recv, &p));
		EXPECT_TRUE(fn_wait_advert(st->c, p.adverts, NULL))
			TH_LOG("%s: no ADVERT", op);
		rs_pat_fill(self->buf, FN_DIRECT, st->key, st->tx);
		fn_arm(self->nth, n);
		r = send(st->c, self->buf, FN_DIRECT, 0);
		err = r < 0 ? errno : 0;
		fired = fn_disarm(self->nth);
		/* what the failed call left unsent, without a fault */
		more = rs_send_all(st->c, self->buf + (r > 0 ? r : 0),
				   FN_DIRECT - (r > 0 ? r : 0), 0);
		if (more < 0 && !err)
			err = errno;
		pthread_join(p.thr, NULL);
		if (!p.err)
			st->tx = st->rx = st->tx + FN_DIRECT;
	} else {
		/* the sender sends once this receive has advertised */
		p.buf = self->buf2;
		p.adverts = fn_adverts(st->c);
		ASSERT_EQ(0, pthread_create(&p.thr, NULL, fn_peer_send, &p));
		memset(self->buf, 0, FN_DIRECT);
		fn_arm(self->nth, n);
		r = recv(st->s, self->buf, FN_DIRECT, MSG_WAITALL);
		err = r < 0 ? errno : 0;
		fired = fn_disarm(self->nth);
		p.stop = true;
		pthread_join(p.thr, NULL);
		if (p.done == FN_DIRECT)
			st->tx += FN_DIRECT;
		if (r > 0) {
			EXPECT_EQ(r, (ssize_t)rs_pat_check(self->buf, r,
							   st->key, st->rx))
				TH_LOG("%s: fail-nth %u: data corrupted", op,
				       n);
			st->rx += r;
		}
		p.err = 0;
	}
	if (fired) {
		fn_point(_metadata, self, op, n, r, err, true);
		if (!fn_stream_check(_metadata, st, self->buf2, op, n,
				     err ?: p.err))
			self->resets++;
	} else {
		EXPECT_EQ(FN_DIRECT, r) TH_LOG("%s: %s", op, strerror(err));
		EXPECT_EQ(0, p.err) TH_LOG("%s: peer: %s", op,
					   strerror(p.err));
		EXPECT_EQ(0, fn_stream_drain(st, self->buf2));
	}
	return fired;
}

static void fn_io_test(struct __test_metadata *_metadata,
		       FIXTURE_DATA(failnth) *self, enum fn_io io, bool direct,
		       const char *op)
{
	struct fn_stream st = { .c = -1, .s = -1 };
	unsigned int n;
	bool fired;

	st.policy = direct ? RDMASTREAM_POLICY_DIRECT_ONLY :
			     RDMASTREAM_POLICY_INDIRECT_ONLY;
	st.l = self->fd[0] = fn_big_listener();
	ASSERT_GE(st.l, 0);
	ASSERT_EQ(0, fn_stream_open(&st)) TH_LOG("%s", strerror(errno));
	for (n = self->first; n <= self->last; n++) {
		self->fd[1] = st.c;
		self->fd[2] = st.s;
		if (direct)
			fired = fn_io_direct(_metadata, self, &st, io, n, op);
		else
			fired = fn_io_indirect(_metadata, self, &st, io, n, op);
		self->fd[1] = st.c;
		self->fd[2] = st.s;
		if (!fired || _metadata->passed == 0)
			break;
	}
	EXPECT_EQ(0, fn_exchange(st.c, st.s, FN_VERIFY, 3));
	fn_settle(_metadata, self, op);
}

TEST_F_TIMEOUT(failnth, sendmsg_indirect, 1200)
{
	FN_SELECT(_metadata->name);
	fn_io_test(_metadata, self, FN_SEND, false, "sendmsg indirect");
}

TEST_F_TIMEOUT(failnth, recvmsg_indirect, 1200)
{
	FN_SELECT(_metadata->name);
	fn_io_test(_metadata, self, FN_RECV, false, "recvmsg indirect");
}

TEST_F_TIMEOUT(failnth, sendmsg_direct, 1800)
{
	FN_SELECT(_metadata->name);
	fn_io_test(_metadata, self, FN_SEND, true, "sendmsg direct");
}

TEST_F_TIMEOUT(failnth, recvmsg_direct, 1800)
{
	FN_SELECT(_metadata->name);
	fn_io_test(_metadata, self, FN_RECV, true, "recvmsg direct");
}

/* ---- system-wide: the handlers, work queues and completions ---- */

static void fn_sys_arm(const char *cap, long long space);
static long long fn_sys_disarm(const char *cap);

/*
 * The window, with cap armed at space: a connect() and its accept(), or
 * a transfer each way on st. Returns 0 if it completed with verified
 * data, else the errno that ended it (a reset of the connection, or the
 * failed connect's errno); *left as fn_sys_disarm().
 */
static int fn_sys_window(char *buf, char *buf2, struct fn_stream *st,
			 bool transfer, const char *cap, long long space,
			 long long *left)
{
	struct fn_peer p = { .st = st, .len = FN_DIRECT, .off = st->tx };
	int err;

	if (!transfer) {
		fn_stream_close(st);
		fn_sys_arm(cap, space);
		err = fn_stream_open(st) ? errno : 0;
		*left = fn_sys_disarm(cap);
		return err;
	}
	/* the receiving thread exists before the window opens */
	p.buf = buf2;
	p.adverts = fn_adverts(st->c);
	p.hold = true;
	rs_pat_fill(buf, FN_DIRECT, st->key, st->tx);
	if (pthread_create(&p.thr, NULL, fn_peer_recv, &p))
		return EAGAIN;
	rs_msleep(20);
	fn_sys_arm(cap, space);
	/* direct c -> s (the receiver advertises first) ... */
	p.go = true;
	fn_wait_advert(st->c, p.adverts, NULL);
	err = rs_send_all(st->c, buf, FN_DIRECT, 0) < 0 ? errno : 0;
	if (err)
		shutdown(st->s, SHUT_RDWR);
	pthread_join(p.thr, NULL);
	if (!err && !p.err) {
		st->tx = st->rx = st->tx + FN_DIRECT;
		/* ... and small writes s -> c through the stream buffer */
		err = fn_exchange(st->c, st->s, FN_VERIFY, st->gen);
	}
	*left = fn_sys_disarm(cap);
	return err ?: p.err;
}

FIXTURE(sys)
{
	struct fn_counts base;
	int fd[4];
	char *buf, *buf2;
};

FIXTURE_VARIANT(sys)
{
	const char *name;
	const char *cap;	/* failslab or fail_page_alloc */
	bool transfer;		/* window: transfer (else connect) */
};

FIXTURE_VARIANT_ADD(sys, slab_connect) { "sys.slab_connect", "failslab", false };
FIXTURE_VARIANT_ADD(sys, page_connect) { "sys.page_connect", "fail_page_alloc", false };
FIXTURE_VARIANT_ADD(sys, slab_transfer) { "sys.slab_transfer", "failslab", true };
FIXTURE_VARIANT_ADD(sys, page_transfer) { "sys.page_transfer", "fail_page_alloc", true };

FIXTURE_SETUP(sys)
{
	int i;

	for (i = 0; i < 4; i++)
		self->fd[i] = -1;
	rs_watchdog(_metadata->timeout + 30);
	ASSERT_EQ(0, access(FN_NTH, F_OK))
		TH_LOG("%s: not a kernel with CONFIG_FAULT_INJECTION (run this on the debug kernel: make check-debug)",
		       FN_NTH);
	ASSERT_FALSE(rs.tcp);
	ASSERT_EQ(0, geteuid()) TH_LOG("needs root (debugfs)");
	ASSERT_EQ(0, fn_knobs_setup());
	self->buf = mmap(NULL, FN_DIRECT, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	self->buf2 = mmap(NULL, FN_DIRECT, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	ASSERT_NE(MAP_FAILED, self->buf);
	ASSERT_NE(MAP_FAILED, self->buf2);
	memset(self->buf, 1, FN_DIRECT);
	memset(self->buf2, 1, FN_DIRECT);
	fn_counts_read(&self->base);
	fn_counts_log("baseline", &self->base);
}

FIXTURE_TEARDOWN(sys)
{
	int i;

	fn_knobs_restore();
	for (i = 0; i < 4; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
	munmap(self->buf, FN_DIRECT);
	munmap(self->buf2, FN_DIRECT);
}

/*
 * Who may fail in a window: this process (its threads inherit the flag)
 * and the kernel's work queue threads (kworker/...; kthreadd too, so
 * that workers created during the window inherit it), where rdma_cm,
 * ib_cm and our teardown run. Not softirq: with task-filter=Y nothing
 * fails there (should_fail() wants in_task()), and that must stay so:
 * rxe sends the CM's MADs on QP1 from a tasklet, and a failed skb
 * allocation there moves QP1 to the error state for good, so that no
 * connection to this device is ever made again (rxe's, not ours: see
 * docs/debug-kernel.md).
 */
static void fn_make_it_fail(int on)
{
	char path[300], comm[64];
	struct dirent *de;
	FILE *f;
	DIR *d;

	d = opendir("/proc");
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		fclose(f);
		if (atoi(de->d_name) != getpid() &&
		    strncmp(comm, "kworker/", 8) && strcmp(comm, "kthreadd\n"))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/make-it-fail",
			 de->d_name);
		f = fopen(path, "w");
		if (!f)
			continue;
		fprintf(f, "%d", on);
		fclose(f);
	}
	closedir(d);
}

/* Open the window: the first allocation after space units fails. */
static void fn_sys_arm(const char *cap, long long space)
{
	char v[32];

	snprintf(v, sizeof(v), "%lld", space);
	fn_make_it_fail(1);
	fn_knob(cap, "task-filter", "Y");
	fn_knob(cap, "times", "1");
	fn_knob(cap, "space", v);
	fn_knob(cap, "probability", "100");
}

/* Close it; returns the space left (-1 if the fault was injected). */
static long long fn_sys_disarm(const char *cap)
{
	long long left;

	fn_knob(cap, "probability", "0");
	fn_make_it_fail(0);
	left = fn_knob_get(cap, "space");
	if (fn_knob_get(cap, "times") == 0)
		return -1;
	return left;
}

TEST_F_TIMEOUT(sys, walk, 3600)
{
	struct fn_stream st = { .c = -1, .s = -1 };
	const char *cap = variant->cap;
	unsigned int step_n, first, last, fired = 0, broken = 0, i;
	long long total, space, left, big = 1LL << 30;	/* an atomic_t */
	struct fn_counts now;
	double end;
	int err;

	FN_SELECT(variant->name);
	first = rs_env_ulong("RS_FAILNTH_SYS_FIRST", 0);
	last = rs_env_ulong("RS_FAILNTH_SYS_LAST", ~0U);
	step_n = rs_env_ulong("RS_FAILNTH_SYS_POINTS", 60) ?: 1;
	st.policy = variant->transfer ? RDMASTREAM_POLICY_DIRECT_ONLY : -1;
	st.l = self->fd[0] = fn_big_listener();
	ASSERT_GE(st.l, 0);
	ASSERT_EQ(0, fn_stream_open(&st)) TH_LOG("%s", strerror(errno));

	/* calibration: what one window allocates, with nothing failing */
	err = fn_sys_window(self->buf, self->buf2, &st, variant->transfer,
			    cap, big, &left);
	ASSERT_EQ(0, err) TH_LOG("calibration window: %s", strerror(err));
	ASSERT_GE(left, 0);
	total = big - left;
	rs_info("failnth: sys %s %s: a window allocates %lld %s", cap,
		variant->transfer ? "transfer" : "connect", total,
		strcmp(cap, "failslab") ? "pages" : "bytes");

	for (i = first; i < step_n && i <= last; i++) {
		space = total * i / step_n;
		self->fd[1] = st.c;
		self->fd[2] = st.s;
		err = fn_sys_window(self->buf, self->buf2, &st,
				    variant->transfer, cap, space, &left);
		if (left < 0)
			fired++;
		if (err) {
			broken++;
			EXPECT_TRUE(fn_errno_ok(err, true))
				TH_LOG("space %lld: window ended with %s",
				       space, strerror(err));
			EXPECT_TRUE(left < 0)
				TH_LOG("space %lld: %s without a fault", space,
				       strerror(err));
		}
		if (err || left < 0) {
			/* whatever happened, a new connection works */
			fn_stream_close(&st);
			err = fn_stream_open(&st) ? errno :
			      fn_exchange(st.c, st.s, FN_VERIFY, i);
			EXPECT_EQ(0, err) TH_LOG("space %lld: afterwards: %s",
						 space, strerror(err));
		}
		self->fd[1] = st.c;
		self->fd[2] = st.s;
		if (!_metadata->passed) {
			i++;
			break;
		}
	}
	fn_stream_close(&st);
	fn_knobs_restore();
	close(self->fd[0]);
	self->fd[0] = self->fd[1] = self->fd[2] = -1;
	end = rs_now() + 60.0 * fn_scale();
	do {
		fn_counts_read(&now);
		if (fn_counts_eq(&now, &self->base))
			break;
		rs_msleep(200);
	} while (rs_now() < end);
	fn_counts_log("after", &now);
	rs_info("failnth: sys %s %s: %u steps, %u injected, %u ended the connection",
		cap, variant->transfer ? "transfer" : "connect",
		i - first, fired, broken);
	EXPECT_TRUE(fn_counts_eq(&now, &self->base))
		TH_LOG("module counts or rdma resources not back to the baseline");
}

TEST_HARNESS_MAIN
