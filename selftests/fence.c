// SPDX-License-Identifier: GPL-2.0
/*
 * Every wait on the HCA ends, and no user page is released while the HCA
 * or a peer may still reach it (docs/security.md, docs/design.md "The
 * fence").
 *
 * fence.*: a hostile verbs peer (rs_peer.h) that stops posting receives
 * and makes every RNR retry wait 491 ms:
 *   zcopy_rnr:   a zero-copy send into the peer's ADVERT returns an error
 *                within the stated bound (the QP gives up after 6 RNR
 *                retries) instead of sleeping forever;
 *   zcopy_kill:  SIGKILL ends that send at once;
 *   advert_rnr:  a receive whose ADVERT the peer will not let us cancel
 *                returns within the bound;
 *   advert_kill: SIGKILL ends that receive at once.
 * Afterwards every page pinned for them has been unpinned (the fence
 * released the orphans): /proc/vmstat nr_foll_pin_acquired equals
 * nr_foll_pin_released again.
 *
 * forever_refused: a peer that asks the module's QP to retry RNR for ever
 * (the IB CM lets each side choose the other's count) is refused.
 *
 * inject.*: the module parameter inject_post makes one work request chain
 * fail part-way, as a device may: ADVERT (LOCAL_INV, REG_MR, SEND),
 * zero-copy (WRITEs, DIRECT) and inline direct (WRITE, DIRECT), at the
 * first, second and last position. The call gets an error, the connection is reset, and
 * the trace shows that no pinned page went back before the QP was drained.
 *
 * txgrow.*: the same for the chain that registers a send ring that grows
 * (LOCAL_INV, REG_MRs); the ring's memory goes back.
 *
 * memlock: a process whose RLIMIT_MEMLOCK is 0 (and no CAP_IPC_LOCK)
 * pins nothing: its large blocking receives do not advertise and the
 * bytes go through the ring, intact; the same receives as root go
 * direct.
 *
 * lazy_mr: a connection that never advertises holds only its two ring
 * MRs; ADVERT MRs appear with the first direct receive.
 *
 * sge2_scattered: with max_send_sge=2 (a device with few gather entries)
 * a zero-copy send from a buffer whose pages are physically scattered
 * needs a WRITE per two pages; it must be cut to fit the send queue, and
 * once send() has returned the buffer is the application's: overwriting
 * it at once must not change what the receiver gets.
 */
#include "rs_peer.h"

#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>

#define BIG		(1024 * 1024)
/* 6 RNR retries of 491 ms, plus a receive timeout and slack */
#define RNR_BOUND	6.0

/*
 * Pages pinned with FOLL_PIN and not yet unpinned, machine-wide. The
 * counters are per-CPU and folded into /proc/vmstat about once a second;
 * vm.stat_refresh folds them now, so that the reading is exact.
 */
static long pins_held(void)
{
	long acq = -1, rel = -1, v;
	char name[64];
	FILE *f = fopen("/proc/sys/vm/stat_refresh", "w");

	if (!f || fputs("1\n", f) < 0 || fclose(f))
		return -1;
	f = fopen("/proc/vmstat", "r");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %ld", name, &v) == 2) {
		if (!strcmp(name, "nr_foll_pin_acquired"))
			acq = v;
		else if (!strcmp(name, "nr_foll_pin_released"))
			rel = v;
	}
	fclose(f);
	return acq < 0 || rel < 0 ? -1 : acq - rel;
}

/*
 * Wait up to 15 s for the pins to come back to base; returns the last.
 * The count is machine-wide and other pinners come and go (7.x releases
 * a page that was pinned before the test began): a leak is more than
 * base, fewer is somebody else's release.
 */
static long pins_settle(long base)
{
	double end = rs_now() + 15;
	long now;

	do {
		now = pins_held();
		if (now >= 0 && now <= base)
			break;
		rs_msleep(200);
	} while (rs_now() < end);
	return now;
}

static int info_get(int fd, struct rdmastream_info *info)
{
	socklen_t len = sizeof(*info);

	memset(info, 0, sizeof(*info));
	return getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, info, &len);
}

/* Wait until fd holds an ADVERT of its peer's. */
static int wait_advert(int fd, int ms)
{
	struct rdmastream_info info;
	double end = rs_now() + ms / 1000.0;

	do {
		if (info_get(fd, &info))
			return -1;
		if (info.rsi_adverts_received > info.rsi_adverts_used +
		    info.rsi_adverts_stale)
			return 0;
		rs_msleep(5);
	} while (rs_now() < end);
	return -1;
}

/* ---- one blocking call in a child process ---- */

struct io_result {
	ssize_t ret;
	int err;
};

struct io_child {
	pid_t pid;
	int pipe;
	int status;
	bool reaped;
};

/* Fork a child that sends or receives len bytes on fd, then reports. */
static int io_start(struct io_child *c, int fd, bool send_it, size_t len)
{
	int p[2];

	memset(c, 0, sizeof(*c));
	if (pipe(p))
		return -1;
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (!c->pid) {
		struct io_result r;
		char *buf = malloc(len);

		close(p[0]);
		if (!buf)
			_exit(2);
		memset(buf, 'x', len);
		r.ret = send_it ? send(fd, buf, len, 0) :
				  recv(fd, buf, len, 0);
		r.err = errno;
		if (write(p[1], &r, sizeof(r)) != sizeof(r))
			_exit(3);
		_exit(0);
	}
	close(p[1]);
	c->pipe = p[0];
	return 0;
}

/* Reap the child within secs; 0 if it ended, -1 if it is still there. */
static int io_reap(struct io_child *c, double secs)
{
	double end = rs_now() + secs;

	if (c->reaped)
		return 0;
	do {
		if (waitpid(c->pid, &c->status, WNOHANG) == c->pid) {
			c->reaped = true;
			return 0;
		}
		rs_msleep(10);
	} while (rs_now() < end);
	return -1;
}

static int io_result(struct io_child *c, struct io_result *r)
{
	int n = read(c->pipe, r, sizeof(*r));

	close(c->pipe);
	return n == sizeof(*r) ? 0 : -1;
}

/* ---- peers that stall ---- */

FIXTURE(fence)
{
	int lfd;
	int s;
	struct peer p;
	long pins;
};

FIXTURE_VARIANT(fence)
{
	bool recv;		/* the module's receive advertises */
	bool kill;		/* SIGKILL the blocked caller */
};

FIXTURE_VARIANT_ADD(fence, zcopy_rnr) { .recv = false, .kill = false };
FIXTURE_VARIANT_ADD(fence, zcopy_kill) { .recv = false, .kill = true };
FIXTURE_VARIANT_ADD(fence, advert_rnr) { .recv = true, .kill = false };
FIXTURE_VARIANT_ADD(fence, advert_kill) { .recv = true, .kill = true };

static long long sq_kicks(int fd)
{
	struct rdmastream_info i;
	socklen_t len = sizeof(i);

	memset(&i, 0, sizeof(i));
	if (getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, &i, &len))
		return -1;
	return i.rsi_sq_kicks;
}

FIXTURE_SETUP(fence)
{
	struct sockaddr_in sin;

	memset(&self->p, 0, sizeof(self->p));
	self->lfd = -1;
	self->s = -1;
	if (rs.tcp)
		return;
	rs_watchdog(120);
	self->pins = pins_held();
	ASSERT_LE(0, self->pins) TH_LOG("no pin counters in /proc/vmstat");
	/* the module's SETUP takes one receive, its ADVERT another */
	self->p.nrecv = variant->recv ? 2 : 1;
	self->lfd = rs_listener(_metadata, &sin);
	ASSERT_EQ(0, peer_connect(&self->p, &sin, 0))
		TH_LOG("hostile peer could not connect: %s", strerror(errno));
	self->s = rs_accept(_metadata, self->lfd);
	ASSERT_EQ(0, peer_setup(&self->p)) TH_LOG("no SETUP from the module");
	ASSERT_EQ(0, peer_slow_rnr(&self->p));
}

FIXTURE_TEARDOWN(fence)
{
	peer_close(&self->p);
	if (self->s >= 0)
		close(self->s);
	if (self->lfd >= 0)
		close(self->lfd);
}

TEST_F_TIMEOUT(fence, stall, 90)
{
	/*
	 * rxe before 6.0 ("RDMA/rxe: Fix rnr retry behavior") retries an
	 * RNR NAK at once instead of after min_rnr_timer: the QP runs out
	 * of RNR retries in milliseconds, nothing stalls and there is no
	 * blocked call to kill. The call must then end by itself, with the
	 * same error and the same pages back.
	 */
	bool stalls = !rs_rxe_before(6, 0);
	struct io_result r;
	struct io_child c;
	long pins;
	double t0;

	RS_SKIP_TCP("speaks the rdmastream wire protocol");
	if (!stalls)
		rs_info("this rxe retries RNR at once: no stall%s",
			variant->kill ? ", no blocked call to kill" : "");
	if (variant->recv) {
		ASSERT_EQ(0, rs_set_timeo(self->s, SO_RCVTIMEO, 500));
		ASSERT_EQ(0, io_start(&c, self->s, false, BIG));
		ASSERT_EQ(0, peer_advert(&self->p))
			TH_LOG("no ADVERT from the module");
	} else {
		ASSERT_EQ(0, peer_send_setup(&self->p));
		ASSERT_EQ(0, peer_send_advert(&self->p, PEER_ADV_MAX));
		ASSERT_EQ(0, wait_advert(self->s, 5000))
			TH_LOG("the module did not take the peer's ADVERT");
		ASSERT_EQ(0, io_start(&c, self->s, true, BIG));
	}
	t0 = rs_now();
	if (variant->kill && stalls) {
		rs_msleep(1500);
		/* still in the module, waiting on the HCA */
		ASSERT_EQ(-1, io_reap(&c, 0))
			TH_LOG("the call ended before the kill (%d)",
			       c.status);
		ASSERT_EQ(0, kill(c.pid, SIGKILL));
		t0 = rs_now();
		EXPECT_EQ(0, io_reap(&c, 1.0))
			TH_LOG("SIGKILL did not end the blocked call in 1 s");
		if (io_reap(&c, 30))
			TH_LOG("the killed caller never ended");
		rs_info("killed caller reaped after %.2f s", rs_now() - t0);
		EXPECT_TRUE(WIFSIGNALED(c.status));
		close(c.pipe);
	} else {
		if (io_reap(&c, RNR_BOUND)) {
			TH_LOG("the call did not end within %.0f s",
			       RNR_BOUND);
			rs_system("cat /proc/%d/stack >&2", c.pid);
		}
		EXPECT_EQ(0, io_reap(&c, 0));
		ASSERT_EQ(0, io_reap(&c, 60));
		rs_info("the call ended after %.2f s", rs_now() - t0);
		ASSERT_EQ(0, io_result(&c, &r));
		EXPECT_EQ(-1, r.ret);
		if (variant->recv) {
			EXPECT_EQ(EAGAIN, r.err) TH_LOG("recv: %s",
							strerror(r.err));
		} else {
			EXPECT_TRUE(r.err == ECONNRESET || r.err == EPIPE ||
				    r.err == ETIMEDOUT)
				TH_LOG("send: %s", strerror(r.err));
			/*
			 * The send queue's watchdog saw a signalled work
			 * request wait a whole second and kicked the QP
			 * (the rescue for rxe's parked requester).
			 */
			if (stalls)
				EXPECT_LE(1, sq_kicks(self->s))
					TH_LOG("no watchdog kick in a %.1f s stall",
					       rs_now() - t0);
		}
	}
	/* the connection is gone, and every page went back */
	peer_close(&self->p);
	memset(&self->p, 0, sizeof(self->p));
	close(self->s);
	self->s = -1;
	pins = pins_settle(self->pins);
	EXPECT_GE(self->pins, pins)
		TH_LOG("%ld pages still pinned", pins - self->pins);
}

/* A peer that asks for endless RNR retries is refused at connect. */
TEST(forever_refused)
{
	struct sockaddr_in sin;
	struct peer p = { .rnr7 = true };
	int lfd, s;

	RS_SKIP_TCP("speaks the rdmastream wire protocol");
	rs_watchdog(60);
	lfd = rs_listener(_metadata, &sin);
	EXPECT_NE(0, peer_connect(&p, &sin, 0));
	peer_close(&p);
	/* and the listener still serves honest peers */
	memset(&p, 0, sizeof(p));
	ASSERT_EQ(0, peer_connect(&p, &sin, 0));
	s = rs_accept(_metadata, lfd);
	EXPECT_EQ(0, peer_setup(&p));
	peer_close(&p);
	close(s);
	close(lfd);
}

/* ---- partial post failures ---- */

struct trace_sum {
	int post_fail;		/* chains that failed part-way */
	int released;		/* pin releases of fenced transfers */
	int unsafe;		/* ...while the HCA could still reach them */
};

static int trace_scan(struct trace_sum *t)
{
	const char *dir = rs_tracefs();
	char line[512];
	FILE *f;

	memset(t, 0, sizeof(*t));
	if (!dir)
		return -1;
	snprintf(line, sizeof(line), "%s/trace", dir);
	f = fopen(line, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, "rdmastream_post_fail:"))
			t->post_fail++;
		if (!strstr(line, "rdmastream_pin_release:") ||
		    !strstr(line, "fenced=1"))
			continue;
		t->released++;
		if (!strstr(line, "drained=1") && !strstr(line, "hca_done=1")) {
			t->unsafe++;
			fprintf(stderr, "# unsafe: %s", line);
		}
	}
	fclose(f);
	return 0;
}

/*
 * The module's trace events, switched on once for the whole binary and
 * off when it ends, not around every test: each switch patches kernel
 * text on every CPU (static calls), and under QEMU's TCG that twice left
 * a vCPU looping on the patch's int3 while the other waited for it (a
 * soft lockup in make check, in inject.*'s setup).
 */
static void trace_events_on(struct __test_metadata *_metadata)
{
	char path[256], v = '0';
	FILE *f;

	ASSERT_NE(NULL, rs_tracefs());
	snprintf(path, sizeof(path), "%s/events/rdmastream/enable",
		 rs_tracefs());
	f = fopen(path, "r");
	if (f) {
		v = fgetc(f);
		fclose(f);
	}
	if (v != '1')
		ASSERT_EQ(0, rs_trace_write("events/rdmastream/enable", "1"));
	ASSERT_EQ(0, rs_trace_write("trace", ""));
}

/* The harness's parent exits here once every test has run. */
static void __attribute__((destructor)) trace_events_off(void)
{
	if (rs_tracefs())
		rs_trace_write("events/rdmastream/enable", "0");
}

FIXTURE(inject)
{
	int c;
	int s;
	long pins;
};

FIXTURE_VARIANT(inject)
{
	int chain;		/* 1 ADVERT, 2 zero-copy, 3 inline direct */
	int pos;		/* 99: the last */
};

FIXTURE_VARIANT_ADD(inject, advert_1) { .chain = 1, .pos = 1 };
FIXTURE_VARIANT_ADD(inject, advert_2) { .chain = 1, .pos = 2 };
FIXTURE_VARIANT_ADD(inject, zcopy_1) { .chain = 2, .pos = 1 };
FIXTURE_VARIANT_ADD(inject, zcopy_2) { .chain = 2, .pos = 2 };
FIXTURE_VARIANT_ADD(inject, zcopy_last) { .chain = 2, .pos = 99 };
FIXTURE_VARIANT_ADD(inject, inline_1) { .chain = 3, .pos = 1 };
FIXTURE_VARIANT_ADD(inject, inline_2) { .chain = 3, .pos = 2 };

FIXTURE_SETUP(inject)
{
	self->c = -1;
	self->s = -1;
	if (rs.tcp)
		return;
	rs_watchdog(120);
	self->pins = pins_held();
	ASSERT_LE(0, self->pins);
	trace_events_on(_metadata);
	rs_pair(_metadata, &self->c, &self->s);
}

FIXTURE_TEARDOWN(inject)
{
	rs_param_set("inject_post", 0);
	if (self->c >= 0)
		close(self->c);
	if (self->s >= 0)
		close(self->s);
}

TEST_F_TIMEOUT(inject, partial_post, 90)
{
	bool adv = variant->chain == 1;
	size_t len = variant->chain == 3 ? 100 : BIG;
	struct trace_sum t;
	struct io_result r;
	struct io_child c;
	char *buf;
	ssize_t n;
	long pins;

	RS_SKIP_TCP("module fault injection");
	buf = calloc(1, BIG);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, rs_set_timeo(self->s, SO_RCVTIMEO, 10000));
	if (adv)
		ASSERT_EQ(0, rs_param_set("inject_post",
				       variant->chain * 100 + variant->pos));
	/* the receiver advertises its 1 MiB buffer */
	ASSERT_EQ(0, io_start(&c, self->s, false, BIG));
	if (!adv) {
		ASSERT_EQ(0, wait_advert(self->c, 5000));
		ASSERT_EQ(0, rs_param_set("inject_post",
				       variant->chain * 100 + variant->pos));
		n = send(self->c, buf, len, 0);
		EXPECT_EQ(-1, n);
		EXPECT_TRUE(errno == ECONNRESET || errno == EPIPE)
			TH_LOG("send: %s", strerror(errno));
	}
	ASSERT_EQ(0, io_reap(&c, 20)) TH_LOG("the receive did not end");
	ASSERT_EQ(0, io_result(&c, &r));
	EXPECT_EQ(-1, r.ret) TH_LOG("recv got %zd bytes", r.ret);
	if (adv) {
		EXPECT_TRUE(r.err == ECONNRESET || r.err == EPIPE)
			TH_LOG("recv: %s", strerror(r.err));
	}
	EXPECT_EQ(0, rs_param_get("inject_post")) TH_LOG("nothing failed");
	close(self->c);
	close(self->s);
	self->c = self->s = -1;
	pins = pins_settle(self->pins);
	EXPECT_GE(self->pins, pins)
		TH_LOG("%ld pages still pinned", pins - self->pins);
	ASSERT_EQ(0, trace_scan(&t));
	EXPECT_EQ(1, t.post_fail);
	if (variant->chain != 3)
		EXPECT_LE(1, t.released);
	EXPECT_EQ(0, t.unsafe);
	free(buf);
}

/*
 * The chain that registers a grown send ring (LOCAL_INV, then a REG_MR
 * per MR) fails to post at its first or second work request, the first
 * time the ring grows: the connection is reset, the sender learns it,
 * and the new ring's memory goes back once both ends are closed.
 */
FIXTURE(txgrow)
{
	int c;
	int s;
};

FIXTURE_VARIANT(txgrow)
{
	int pos;
};

FIXTURE_VARIANT_ADD(txgrow, first) { .pos = 1 };
FIXTURE_VARIANT_ADD(txgrow, second) { .pos = 2 };

FIXTURE_SETUP(txgrow)
{
	self->c = -1;
	self->s = -1;
	if (rs.tcp)
		return;
	rs_watchdog(120);
	trace_events_on(_metadata);
	rs_pair(_metadata, &self->c, &self->s);
}

FIXTURE_TEARDOWN(txgrow)
{
	rs_param_set("inject_post", 0);
	if (self->c >= 0)
		close(self->c);
	if (self->s >= 0)
		close(self->s);
}

TEST_F_TIMEOUT(txgrow, post_fails, 90)
{
	const size_t len = 8 * RS_MIB;
	long long used0, used;
	struct trace_sum t;
	double end;
	char *buf;
	ssize_t n;
	int err;

	RS_SKIP_TCP("module fault injection");
	RS_SKIP_FB("RDMA work requests");
	buf = calloc(1, len);
	ASSERT_NE(NULL, buf);
	used0 = rs_param_get("mem_used");
	ASSERT_GE(used0, 0);
	ASSERT_EQ(0, rs_set_timeo(self->c, SO_SNDTIMEO, 5000));
	ASSERT_EQ(0, rs_param_set("inject_post", 400 + variant->pos));
	/* the peer reads nothing: the ring grows until the post fails */
	n = send(self->c, buf, len, 0);
	err = errno;
	EXPECT_EQ(0, rs_param_get("inject_post")) TH_LOG("nothing failed");
	if (n >= 0)
		n = send(self->c, buf, len, 0);
	EXPECT_EQ(-1, n);
	err = n < 0 ? errno : err;
	EXPECT_TRUE(err == ECONNRESET || err == EPIPE)
		TH_LOG("send: %zd, %s", n, strerror(err));
	ASSERT_EQ(0, trace_scan(&t));
	EXPECT_EQ(1, t.post_fail);
	close(self->c);
	close(self->s);
	self->c = self->s = -1;
	end = rs_now() + 30;
	do {
		used = rs_param_get("mem_used");
		if (used <= used0)
			break;
		rs_msleep(100);
	} while (rs_now() < end);
	EXPECT_LE(used, used0) TH_LOG("mem_used %lld after, %lld before", used,
				      used0);
	free(buf);
}

/* ---- RLIMIT_MEMLOCK ---- */

struct xfer_sum {
	int ok;
	unsigned long long direct, indirect, adverts;
};

struct waitall_rx {
	int fd;
	char *buf;
	ssize_t ret;
	pthread_t thr;
};

static void *waitall_main(void *arg)
{
	struct waitall_rx *r = arg;

	r->ret = recv(r->fd, r->buf, BIG, MSG_WAITALL);
	return NULL;
}

/*
 * Four 1 MiB messages over a fresh pair, each sent once the receiver is
 * blocked in a 1 MiB recv(): then it goes direct if the receiver may pin
 * (the sender waits up to 5 s for the ADVERT; 1 s when none is expected).
 */
static void memlock_xfer(struct __test_metadata *_metadata,
			 struct xfer_sum *sum, bool expect_direct)
{
	struct rdmastream_info ic, is;
	struct waitall_rx r = {};
	char *src = malloc(BIG);
	int c, i;

	r.buf = malloc(BIG);
	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, r.buf);
	rs_pair(_metadata, &c, &r.fd);
	sum->ok = 1;
	for (i = 0; i < 4; i++) {
		rs_pat_fill(src, BIG, 7, (uint64_t)i * BIG);
		ASSERT_EQ(0, pthread_create(&r.thr, NULL, waitall_main, &r));
		wait_advert(c, expect_direct ? 5000 : 1000);
		if (send(c, src, BIG, 0) != BIG)
			sum->ok = 0;
		pthread_join(r.thr, NULL);
		if (r.ret != BIG ||
		    rs_pat_check(r.buf, BIG, 7, (uint64_t)i * BIG) != BIG)
			sum->ok = 0;
	}
	ASSERT_EQ(0, info_get(c, &ic));
	ASSERT_EQ(0, info_get(r.fd, &is));
	sum->direct = is.rsi_direct_bytes_received;
	sum->indirect = is.rsi_indirect_bytes_received;
	sum->adverts = is.rsi_adverts_sent;
	close(c);
	close(r.fd);
	free(src);
	free(r.buf);
}

TEST(memlock)
{
	struct rlimit zero = { 0, 0 };
	struct xfer_sum *sum;
	int status;
	pid_t pid;

	RS_SKIP_TCP("pinning for direct transfers");
	rs_watchdog(120);
	sum = mmap(NULL, 2 * sizeof(*sum), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sum);
	memset(sum, 0, 2 * sizeof(*sum));
	/* as root (CAP_IPC_LOCK): the large receives go direct */
	memlock_xfer(_metadata, &sum[0], true);
	EXPECT_TRUE(sum[0].ok);
	EXPECT_EQ(4ULL * BIG, sum[0].direct);
	/* nobody, RLIMIT_MEMLOCK 0: nothing may be pinned */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		if (setrlimit(RLIMIT_MEMLOCK, &zero) || setgid(65534) ||
		    setuid(65534))
			_exit(2);
		memlock_xfer(_metadata, &sum[1], false);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status));
	EXPECT_TRUE(sum[1].ok) TH_LOG("data did not arrive intact");
	EXPECT_EQ(0, sum[1].adverts) TH_LOG("pinned without RLIMIT_MEMLOCK");
	EXPECT_EQ(0, sum[1].direct);
	EXPECT_EQ(4ULL * BIG, sum[1].indirect);
	munmap(sum, 2 * sizeof(*sum));
}

/* ---- lazy ADVERT MRs ---- */

TEST(lazy_mr)
{
	struct rdmastream_info info;
	long base, idle, used;
	char *buf;
	int c, s;

	RS_SKIP_TCP("verbs resources");
	rs_watchdog(60);
	base = rs_mr_count();
	ASSERT_LE(0, base);
	rs_pair(_metadata, &c, &s);
	ASSERT_EQ(1, rs_send_all(c, "x", 1, 0));
	buf = malloc(BIG);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(1, recv(s, buf, 1, 0));
	/* two rings per socket, nothing else */
	idle = rs_mr_count();
	EXPECT_EQ(base + 4, idle);
	/* a large blocking receive advertises: now one ADVERT MR */
	ASSERT_EQ(0, rs_set_timeo(s, SO_RCVTIMEO, 300));
	EXPECT_EQ(-1, recv(s, buf, BIG, 0));
	ASSERT_EQ(0, info_get(s, &info));
	EXPECT_EQ(1, info.rsi_adverts_sent);
	used = rs_mr_count();
	/*
	 * it keeps its MR for the next ADVERT, unless the module's own
	 * LOCAL_INV (after the CANCEL) was followed by deregistering it,
	 * as on rxe (rsi_inv_fences, docs/security.md)
	 */
	EXPECT_EQ(idle + 1 - (long)info.rsi_inv_fences, used);
	if (!strncmp(rs.rdmadev, "rxe", 3))
		EXPECT_EQ(1, info.rsi_inv_fences);
	close(c);
	close(s);
	free(buf);
}

/* ---- few gather entries ---- */

/*
 * len bytes of user memory whose pages are never physically adjacent in
 * virtual order (a memfd mapped page by page in reverse), so that no two
 * pages merge into one gather entry.
 */
static char *scattered_buf(size_t len)
{
	size_t ps = sysconf(_SC_PAGESIZE), n = len / ps, i;
	int fd = memfd_create("rs-scattered", 0);
	char *va;

	if (fd < 0 || ftruncate(fd, len))
		return NULL;
	va = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	for (i = 0; va != MAP_FAILED && i < n; i++)
		if (mmap(va + i * ps, ps, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, fd, (n - 1 - i) * ps) ==
		    MAP_FAILED)
			va = MAP_FAILED;
	close(fd);
	return va == MAP_FAILED ? NULL : va;
}

TEST(sge2_scattered)
{
	struct rdmastream_info info;
	struct waitall_rx r = {};
	long pins, now;
	size_t bad;
	char *src;
	int c;

	RS_SKIP_TCP("module parameter max_send_sge");
	rs_watchdog(60);
	pins = pins_held();
	ASSERT_LE(0, pins);
	ASSERT_EQ(0, rs_param_set("max_send_sge", 2));
	rs_pair(_metadata, &c, &r.fd);
	src = scattered_buf(BIG);
	r.buf = malloc(BIG);
	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, r.buf);
	rs_pat_fill(src, BIG, 77, 0);
	ASSERT_EQ(0, pthread_create(&r.thr, NULL, waitall_main, &r));
	ASSERT_EQ(0, wait_advert(c, 5000));
	ASSERT_EQ(BIG, send(c, src, BIG, 0));
	/* the buffer is ours again: the receiver must not see this */
	memset(src, 0xff, BIG);
	pthread_join(r.thr, NULL);
	ASSERT_EQ(BIG, r.ret);
	bad = rs_pat_check(r.buf, BIG, 77, 0);
	EXPECT_EQ(BIG, bad) TH_LOG("received data differs at %zu", bad);
	ASSERT_EQ(0, info_get(c, &info));
	EXPECT_EQ(BIG, info.rsi_direct_bytes_sent);
	/* 256 scattered pages, at most 58 WRITEs of 2 per transfer */
	EXPECT_LE(3, info.rsi_zcopy_sends);
	close(c);
	close(r.fd);
	EXPECT_EQ(0, rs_param_set("max_send_sge", 16));
	munmap(src, BIG);
	free(r.buf);
	now = pins_settle(pins);
	EXPECT_GE(pins, now) TH_LOG("%ld pages still pinned", now - pins);
}

TEST_HARNESS_MAIN
