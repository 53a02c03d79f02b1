// SPDX-License-Identifier: GPL-2.0
/*
 * Stress and data integrity of AF_RDMASTREAM.
 *
 * bidir: RS_STRESS_CONNS connections, each carrying a stream in both
 * directions at once (one thread per direction per end), with random
 * write sizes and calls (send, write, writev) and random read sizes and
 * calls (recv, read, readv, recv with MSG_WAITALL) from 1 byte up to
 * RS_STRESS_MAXIO_KB. Every byte is checked against a pattern derived
 * from (connection, direction, offset).
 *
 * policy.{dynamic,direct_only,indirect_only}.bidir: the same, with both
 * ends of every connection set to one transfer policy (the module's
 * direct transfers, docs/direct.md); RS_STRESS_POLICY_MB (64) in total
 * each. Dynamic must have moved bytes both ways: direct and indirect;
 * direct-only some direct, and indirect only after a degradation.
 * policy.sge2_{dynamic,direct_only}: the same on connections made with
 * the module parameter max_send_sge=2, as on a device with few gather
 * entries: a zero-copy send then needs many more WRITEs, which must fit
 * the send queue.
 *
 * churn: RS_CHURN short connections from 4 threads (connect, exchange,
 * close in random order, some with a reset).
 *
 * fanout: RS_FANOUT connections open at once, all used, then closed.
 *
 * Knobs (defaults): RS_STRESS_CONNS (8), RS_STRESS_MB (256, total over all
 * streams), RS_STRESS_POLICY_MB (64), RS_STRESS_MAXIO_KB (4096),
 * RS_STRESS_SEED (1), RS_CHURN (200),
 * RS_FANOUT (64). The results are also written to $RS_OUT/stress.txt.
 */
#include "rs_common.h"

#define MAX_CONNS	256

/* $RS_OUT/stress.txt, appended to, or NULL. */
static FILE *report_open(void)
{
	char path[512];

	if (!rs.out)
		return NULL;
	snprintf(path, sizeof(path), "%s/stress.txt", rs.out);
	return fopen(path, "a");
}

FIXTURE(stress)
{
	FILE *report;
};

FIXTURE_SETUP(stress)
{
	rs_watchdog(_metadata->timeout + 30);
	self->report = report_open();
}

FIXTURE_TEARDOWN(stress)
{
	if (self->report)
		fclose(self->report);
}

#define report(rep, fmt, ...) do {					\
	rs_info(fmt, ##__VA_ARGS__);					\
	if (rep)							\
		fprintf(rep, fmt "\n", ##__VA_ARGS__);			\
} while (0)

static void set_policy(struct __test_metadata *_metadata, int fd, int policy)
{
	if (policy >= 0)
		ASSERT_EQ(0, setsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_POLICY,
					&policy, sizeof(policy)));
}

/* Sum of the direct and the indirect bytes received on fds. */
static void bytes_by_path(int *fds, unsigned int n, uint64_t *direct,
			  uint64_t *indirect, uint64_t *degrades)
{
	struct rdmastream_info info;
	socklen_t len;
	unsigned int i;

	*direct = 0;
	*indirect = 0;
	*degrades = 0;
	for (i = 0; i < n; i++) {
		len = sizeof(info);
		memset(&info, 0, sizeof(info));
		if (getsockopt(fds[i], SOL_RDMASTREAM, RDMASTREAM_INFO, &info,
			       &len))
			continue;
		*direct += info.rsi_direct_bytes_received;
		*indirect += info.rsi_indirect_bytes_received;
		*degrades += info.rsi_direct_degrades;
	}
}

/*
 * Both directions of nconn connections at once, every byte checked; with
 * policy >= 0, both ends set to it.
 */
static void bidir(struct __test_metadata *_metadata, FILE *rep, int policy,
		  uint64_t total)
{
	unsigned int nconn = rs_env_ulong("RS_STRESS_CONNS", 8);
	size_t maxio = rs_env_ulong("RS_STRESS_MAXIO_KB", 4096) * RS_KIB;
	uint64_t seed = rs_env_ulong("RS_STRESS_SEED", 1);
	struct sockaddr_in sin;
	struct rs_xfer *x;
	uint64_t per, moved = 0;
	int *c, *s, lfd;
	unsigned int i, j;
	double t0, dt;

	ASSERT_GT(nconn, 0);
	ASSERT_LE(nconn, MAX_CONNS);
	ASSERT_GT(maxio, 0);
	per = total / (2 * nconn);
	ASSERT_GT(per, 0);
	x = calloc(4 * nconn, sizeof(*x));
	c = calloc(nconn, sizeof(int));
	s = calloc(nconn, sizeof(int));
	ASSERT_NE(NULL, x);
	ASSERT_NE(NULL, c);
	ASSERT_NE(NULL, s);

	lfd = rs_listener_opts(_metadata, &sin, 64, 0);
	set_policy(_metadata, lfd, policy);
	for (i = 0; i < nconn; i++) {
		c[i] = rs_connect(_metadata, &sin);
		set_policy(_metadata, c[i], policy);
		s[i] = rs_accept(_metadata, lfd);
	}
	close(lfd);

	/*
	 * Per connection i: x[4i] client sends, x[4i+1] server receives,
	 * x[4i+2] server sends, x[4i+3] client receives.
	 */
	t0 = rs_now();
	for (i = 0; i < nconn; i++) {
		for (j = 0; j < 4; j++) {
			struct rs_xfer *p = &x[4 * i + j];

			p->fd = j == 0 || j == 3 ? c[i] : s[i];
			p->key = rs_key(i, j / 2, 50);
			p->total = per;
			p->chunk = maxio;
			p->random = true;
			p->seed = rs_mix64(seed * 1000003 + 4 * i + j);
			p->expect_eof = j & 1;
			p->shut_wr = !(j & 1);
			ASSERT_EQ(0, rs_xfer_start(p, j & 1 ? rs_receiver :
						   rs_sender));
		}
	}
	for (i = 0; i < 4 * nconn; i++)
		rs_xfer_join(&x[i]);
	dt = rs_now() - t0;

	for (i = 0; i < nconn; i++) {
		char what[64];

		for (j = 1; j < 4; j += 2) {
			struct rs_xfer *p = &x[4 * i + j];

			snprintf(what, sizeof(what), "conn %u %s", i,
				 j == 1 ? "c->s" : "s->c");
			EXPECT_EQ(0, x[4 * i + j - 1].err)
				TH_LOG("%s: send: %s", what,
				       strerror(x[4 * i + j - 1].err));
			RS_XFER_OK(p, what);
			moved += p->done;
		}
	}
	if (!rs.tcp) {
		uint64_t dc, ic, ds, is, gc, gs;

		bytes_by_path(c, nconn, &dc, &ic, &gc);
		bytes_by_path(s, nconn, &ds, &is, &gs);
		report(rep, "stress.bidir: policy %d: direct %llu MiB, indirect %llu MiB received, %llu direct-only degradations",
		       policy, (unsigned long long)((dc + ds) / RS_MIB),
		       (unsigned long long)((ic + is) / RS_MIB),
		       (unsigned long long)(gc + gs));
		EXPECT_EQ(moved, dc + ic + ds + is);
		/*
		 * Direct-only: indirect only after a sender waited its grace
		 * period for an ADVERT in vain (docs/direct.md).
		 */
		if (policy == RDMASTREAM_POLICY_DIRECT_ONLY) {
			EXPECT_GT(dc + ds, 0);
			if (ic + is) {
				EXPECT_GT(gc + gs, 0);
			}
		}
		if (policy == RDMASTREAM_POLICY_INDIRECT_ONLY)
			EXPECT_EQ(0, dc + ds);
		/*
		 * Dynamic: both paths used, over all connections and both
		 * directions. Senders that never pause leave each direction
		 * to chance (a slow kernel kept one all indirect);
		 * direct.c's switching.*.bidir asserts each direction with
		 * pauses.
		 */
		if (policy == RDMASTREAM_POLICY_DYNAMIC) {
			EXPECT_GT(dc + ds, 0);
			EXPECT_GT(ic + is, 0);
		}
	}
	for (i = 0; i < nconn; i++) {
		close(c[i]);
		close(s[i]);
	}
	report(rep, "stress.bidir: %u conns, %llu MiB verified in %.2f s: %.1f MiB/s (max I/O %zu KiB, seed %llu)",
	       nconn, (unsigned long long)(moved / RS_MIB), dt,
	       moved / RS_MIB / dt, maxio / RS_KIB,
	       (unsigned long long)seed);
	free(x);
	free(c);
	free(s);
}

TEST_F_TIMEOUT(stress, bidir, 900)
{
	bidir(_metadata, self->report, -1,
	      rs_env_ulong("RS_STRESS_MB", 256) * RS_MIB);
}

FIXTURE(policy)
{
	FILE *report;
};

FIXTURE_VARIANT(policy)
{
	int policy;
	int max_sge;		/* module parameter max_send_sge, if set */
};

FIXTURE_VARIANT_ADD(policy, dynamic) {
	.policy = RDMASTREAM_POLICY_DYNAMIC,
};

FIXTURE_VARIANT_ADD(policy, direct_only) {
	.policy = RDMASTREAM_POLICY_DIRECT_ONLY,
};

FIXTURE_VARIANT_ADD(policy, indirect_only) {
	.policy = RDMASTREAM_POLICY_INDIRECT_ONLY,
};

FIXTURE_VARIANT_ADD(policy, sge2_dynamic) {
	.policy = RDMASTREAM_POLICY_DYNAMIC,
	.max_sge = 2,
};

FIXTURE_VARIANT_ADD(policy, sge2_direct_only) {
	.policy = RDMASTREAM_POLICY_DIRECT_ONLY,
	.max_sge = 2,
};

#define MAX_SGE_PARAM	"/sys/module/rdmastream/parameters/max_send_sge"

FIXTURE_SETUP(policy)
{
	rs_watchdog(_metadata->timeout + 30);
	self->report = report_open();
	if (variant->max_sge && !rs.tcp)
		ASSERT_EQ(0, rs_system("echo %d > " MAX_SGE_PARAM,
				       variant->max_sge))
			TH_LOG("cannot set %s", MAX_SGE_PARAM);
}

FIXTURE_TEARDOWN(policy)
{
	if (variant->max_sge && !rs.tcp)
		rs_system("echo 16 > " MAX_SGE_PARAM);
	if (self->report)
		fclose(self->report);
}

TEST_F_TIMEOUT(policy, bidir, 900)
{
	RS_SKIP_TCP("transfer policies are rdmastream's");
	bidir(_metadata, self->report, variant->policy,
	      rs_env_ulong("RS_STRESS_POLICY_MB", 64) * RS_MIB);
}

struct churner {
	struct sockaddr_in sin;
	int lfd;		/* this thread's own listener */
	unsigned int id;
	unsigned int count;
	unsigned int done;
	unsigned int resets;
	int err;
	const char *what;
	pthread_t thr;
};

/* One short connection: client and server both in this thread. */
static int churn_one(struct churner *t, uint64_t *st, unsigned int n)
{
	/* Small enough to sit in the socket buffers without a reader. */
	static __thread char buf[16384];
	uint64_t k = rs_key(t->id, n, 51);
	size_t len = 1 + rs_rand(st) % sizeof(buf);
	int c, s = -1, ret = -1;
	bool reset;

	t->what = "socket";
	c = rs_socket(0);
	if (c < 0)
		return -1;
	t->what = "connect";
	if (connect(c, (struct sockaddr *)&t->sin, sizeof(t->sin)))
		goto out;
	t->what = "accept";
	s = accept(t->lfd, NULL, NULL);
	if (s < 0)
		goto out;
	/* The client speaks and shuts down, the server echoes. */
	rs_pat_fill(buf, len, k, 0);
	t->what = "send";
	if (rs_send_all(c, buf, len, 0) != (ssize_t)len)
		goto out;
	t->what = "shutdown";
	if (shutdown(c, SHUT_WR))
		goto out;
	t->what = "echo";
	for (;;) {
		char tmp[8192];
		ssize_t r = recv(s, tmp, sizeof(tmp), 0);

		if (r < 0)
			goto out;
		if (!r)
			break;
		if (rs_send_all(s, tmp, r, 0) != r)
			goto out;
	}
	t->what = "recv echo";
	memset(buf, 0, len);
	if (rs_recv_all(c, buf, len, 0) != (ssize_t)len)
		goto out;
	t->what = "verify";
	if (rs_pat_check(buf, len, k, 0) != len) {
		errno = EBADMSG;
		goto out;
	}
	/* Close in random order; sometimes with unread data (reset). */
	reset = !(rs_rand(st) % 8);
	if (reset) {
		send(s, "xx", 2, 0);
		t->resets++;
	}
	if (rs_rand(st) & 1) {
		close(c);
		c = -1;
	}
	ret = 0;
out:
	if (s >= 0)
		close(s);
	if (c >= 0)
		close(c);
	return ret;
}

static void *churner_fn(void *arg)
{
	struct churner *t = arg;
	uint64_t st = rs_mix64(t->id + 77);

	for (t->done = 0; t->done < t->count; t->done++) {
		if (churn_one(t, &st, t->done)) {
			t->err = errno;
			break;
		}
	}
	return NULL;
}

TEST_F_TIMEOUT(stress, churn, 600)
{
	unsigned int total = rs_env_ulong("RS_CHURN", 200);
	struct churner t[4] = { };
	unsigned int i, done = 0;
	double t0, dt;

	t0 = rs_now();
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		t[i].lfd = rs_listener_opts(_metadata, &t[i].sin, 4, 0);
		t[i].id = i;
		t[i].count = total / ARRAY_SIZE(t) +
			     (i < total % ARRAY_SIZE(t));
		ASSERT_EQ(0, pthread_create(&t[i].thr, NULL, churner_fn,
					    &t[i]));
	}
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		pthread_join(t[i].thr, NULL);
		EXPECT_EQ(0, t[i].err)
			TH_LOG("thread %u, connection %u: %s: %s", i,
			       t[i].done, t[i].what, strerror(t[i].err));
		done += t[i].done;
		close(t[i].lfd);
	}
	dt = rs_now() - t0;
	EXPECT_EQ(total, done);
	report(self->report, "stress.churn: %u connections in %.2f s: %.1f/s",
	       done, dt, done / dt);
}

TEST_F_TIMEOUT(stress, fanout, 300)
{
	unsigned int n = rs_env_ulong("RS_FANOUT", 64), i;
	const size_t len = 16 * RS_KIB;
	struct sockaddr_in sin;
	int *c, *s, lfd;
	char *buf;
	double t0;

	ASSERT_GT(n, 0);
	c = calloc(n, sizeof(int));
	s = calloc(n, sizeof(int));
	buf = malloc(len);
	ASSERT_NE(NULL, c);
	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, buf);
	t0 = rs_now();
	lfd = rs_listener_opts(_metadata, &sin, 128, 0);
	for (i = 0; i < n; i++) {
		c[i] = rs_connect(_metadata, &sin);
		s[i] = rs_accept(_metadata, lfd);
	}
	close(lfd);
	/* All open at once: every one carries its own data both ways. */
	for (i = 0; i < n; i++) {
		rs_pat_fill(buf, len, rs_key(i, 0, 52), 0);
		ASSERT_EQ((ssize_t)len, rs_send_all(c[i], buf, len, 0));
		rs_pat_fill(buf, len, rs_key(i, 1, 52), 0);
		ASSERT_EQ((ssize_t)len, rs_send_all(s[i], buf, len, 0));
	}
	for (i = 0; i < n; i++) {
		ASSERT_EQ((ssize_t)len, rs_recv_all(s[i], buf, len, 0));
		ASSERT_EQ(len, rs_pat_check(buf, len, rs_key(i, 0, 52), 0))
			TH_LOG("connection %u c->s", i);
		ASSERT_EQ((ssize_t)len, rs_recv_all(c[i], buf, len, 0));
		ASSERT_EQ(len, rs_pat_check(buf, len, rs_key(i, 1, 52), 0))
			TH_LOG("connection %u s->c", i);
	}
	for (i = 0; i < n; i++) {
		close(c[i]);
		close(s[i]);
	}
	report(self->report, "stress.fanout: %u connections open at once, %.2f s",
	       n, rs_now() - t0);
	free(c);
	free(s);
	free(buf);
}

TEST_HARNESS_MAIN
