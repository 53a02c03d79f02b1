// SPDX-License-Identifier: GPL-2.0
/*
 * sendfile() into the socket and splice() out of it (and into it), as
 * programs such as nginx and haproxy use them. On 6.1 sendfile() and
 * splice(pipe -> socket) reach the socket's ->sendpage; splice(socket ->
 * pipe) its ->splice_read (or, without one, the generic path through
 * ->recvmsg with a pipe iterator). The expectations are TCP's: run
 * tcp:splice to check them.
 *
 * Covered: sendfile() from tmpfs (memfd) and from a file with holes, at
 * offsets and counts that are not page aligned, with a NULL offset (the
 * file position moves), count 0, at and past EOF, a file larger than the
 * send ring verified byte for byte, a non-blocking socket (partial counts
 * then EAGAIN); splice() socket -> pipe -> file and pipe -> socket, with
 * SPLICE_F_NONBLOCK on an empty socket (EAGAIN), SO_RCVTIMEO (EAGAIN),
 * after the peer's FIN (0) and after a reset (ECONNRESET, then 0); and
 * data integrity while the other direction goes direct (advertised
 * receives), for each policy variant.
 *
 * Knobs: RS_SPLICE_MB (32), the large sendfile.
 */
#include "rs_common.h"

#include <sys/sendfile.h>

#define PIPE_SZ		(1024 * 1024)

static size_t big_mb(void)
{
	return rs_env_ulong("RS_SPLICE_MB", 32);
}

/* A tmpfs file (memfd) of len bytes of pattern key. */
static int pat_memfd(struct __test_metadata *_metadata, size_t len,
		     uint64_t key)
{
	size_t off, n;
	char *buf;
	int fd;

	fd = memfd_create("rs_splice", 0);
	ASSERT_GE(fd, 0) TH_LOG("memfd_create: %s", strerror(errno));
	buf = malloc(RS_MIB);
	ASSERT_NE(NULL, buf);
	for (off = 0; off < len; off += n) {
		n = len - off < RS_MIB ? len - off : RS_MIB;
		rs_pat_fill(buf, n, key, off);
		ASSERT_EQ((ssize_t)n, pwrite(fd, buf, n, off));
	}
	free(buf);
	return fd;
}

/* An empty regular file in TMPDIR (or /tmp), already unlinked. */
static int tmp_file(struct __test_metadata *_metadata)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/rs_splice.XXXXXX",
		 rs_env_str("TMPDIR", "/tmp"));
	fd = mkstemp(path);
	ASSERT_GE(fd, 0) TH_LOG("mkstemp %s: %s", path, strerror(errno));
	unlink(path);
	return fd;
}

/* RDMASTREAM_INFO of fd: 0, or -1 with errno. */
static int get_info(int fd, struct rdmastream_info *i)
{
	socklen_t len = sizeof(*i);

	memset(i, 0, sizeof(*i));
	return getsockopt(fd, SOL_RDMASTREAM, RDMASTREAM_INFO, i, &len);
}

/* Receive exactly len bytes and check them against key at off. */
static void recv_check(struct __test_metadata *_metadata, int fd, size_t len,
		       uint64_t key, uint64_t off)
{
	char *buf = malloc(len ?: 1);
	ssize_t n;
	size_t bad;

	ASSERT_NE(NULL, buf);
	n = rs_recv_all(fd, buf, len, 0);
	ASSERT_EQ((ssize_t)len, n) TH_LOG("recv: %zd (%s)", n,
					  strerror(errno));
	bad = rs_pat_check(buf, len, key, off);
	free(buf);
	ASSERT_EQ(len, bad) TH_LOG("byte %zu of %zu differs", bad, len);
}

/* Nothing more is queued on fd (within a short wait). */
static void assert_empty(struct __test_metadata *_metadata, int fd)
{
	char b;

	ASSERT_EQ(0, rs_poll(fd, POLLIN, 200));
	ASSERT_EQ(-1, recv(fd, &b, 1, MSG_DONTWAIT));
	ASSERT_EQ(EAGAIN, errno);
}

/* sendfile() until count bytes went or an error; returns bytes sent. */
static ssize_t sendfile_all(int out, int in, off_t *off, size_t count)
{
	size_t done = 0;
	ssize_t n;

	while (done < count) {
		n = sendfile(out, in, off, count - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return done ? (ssize_t)done : n;
		done += n;
	}
	return done;
}

/* Move all of a pipe's n bytes into fd (a file or a socket). */
static int drain_pipe(int rd, int fd, size_t n)
{
	ssize_t r;

	while (n) {
		r = splice(rd, NULL, fd, NULL, n, SPLICE_F_MOVE);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r ? -errno : -EIO;
		n -= r;
	}
	return 0;
}

static void set_policy(struct __test_metadata *_metadata, int fd, int policy)
{
	if (rs.tcp)
		return;
	ASSERT_EQ(0, rs_setint(fd, SOL_RDMASTREAM, RDMASTREAM_POLICY, policy))
		TH_LOG("RDMASTREAM_POLICY: %s", strerror(errno));
}

/* A connected pair and a 1 MiB pipe. */
struct conn {
	int c, s;
	int p[2];
};

static void conn_open(struct __test_metadata *_metadata, struct conn *self)
{
	rs_watchdog(240);
	rs_pair(_metadata, &self->c, &self->s);
	ASSERT_EQ(0, pipe(self->p));
	ASSERT_LE(0, fcntl(self->p[0], F_SETPIPE_SZ, PIPE_SZ));
}

static void conn_close(struct conn *self)
{
	if (self->c >= 0)
		close(self->c);
	if (self->s >= 0)
		close(self->s);
	close(self->p[0]);
	close(self->p[1]);
}

/* The module's default policy. */
FIXTURE(sp) {
	int c, s;
	int p[2];
};

FIXTURE_SETUP(sp)
{
	conn_open(_metadata, (struct conn *)self);
}

FIXTURE_TEARDOWN(sp)
{
	conn_close((struct conn *)self);
}

/* Both ends set to a policy. */
FIXTURE(pol) {
	int c, s;
	int p[2];
};

FIXTURE_VARIANT(pol) {
	int policy;
};

FIXTURE_VARIANT_ADD(pol, dynamic) {
	.policy = RDMASTREAM_POLICY_DYNAMIC,
};

FIXTURE_VARIANT_ADD(pol, direct_only) {
	.policy = RDMASTREAM_POLICY_DIRECT_ONLY,
};

FIXTURE_VARIANT_ADD(pol, indirect_only) {
	.policy = RDMASTREAM_POLICY_INDIRECT_ONLY,
};

FIXTURE_SETUP(pol)
{
	conn_open(_metadata, (struct conn *)self);
	set_policy(_metadata, self->c, variant->policy);
	set_policy(_metadata, self->s, variant->policy);
}

FIXTURE_TEARDOWN(pol)
{
	conn_close((struct conn *)self);
}

/* ---- sendfile ---- */

TEST_F(sp, sendfile_unaligned)
{
	uint64_t key = rs_key(1, 0, 1);
	int f = pat_memfd(_metadata, RS_MIB + 1000, key);
	off_t off = 4097;

	ASSERT_EQ(300001, sendfile(self->c, f, &off, 300001));
	ASSERT_EQ(4097 + 300001, off);
	/* an offset pointer leaves the file position alone */
	ASSERT_EQ(0, lseek(f, 0, SEEK_CUR));
	recv_check(_metadata, self->s, 300001, key, 4097);

	/* NULL offset: from the file position, which moves */
	ASSERT_EQ(12345, lseek(f, 12345, SEEK_SET));
	ASSERT_EQ(5003, sendfile(self->c, f, NULL, 5003));
	ASSERT_EQ(12345 + 5003, lseek(f, 0, SEEK_CUR));
	recv_check(_metadata, self->s, 5003, key, 12345);

	/* one byte, and the file's last bytes */
	off = 77;
	ASSERT_EQ(1, sendfile(self->c, f, &off, 1));
	off = RS_MIB + 1000 - 999;
	ASSERT_EQ(999, sendfile(self->c, f, &off, 999));
	recv_check(_metadata, self->s, 1, key, 77);
	recv_check(_metadata, self->s, 999, key, RS_MIB + 1);
	assert_empty(_metadata, self->s);
	close(f);
}

TEST_F(sp, sendfile_count0_and_eof)
{
	uint64_t key = rs_key(2, 0, 1);
	int f = pat_memfd(_metadata, 10000, key);
	off_t off = 100;

	ASSERT_EQ(0, sendfile(self->c, f, &off, 0));
	ASSERT_EQ(100, off);
	/* past EOF and at EOF: 0, nothing sent, offset unchanged */
	off = 10005;
	ASSERT_EQ(0, sendfile(self->c, f, &off, 100));
	ASSERT_EQ(10005, off);
	off = 10000;
	ASSERT_EQ(0, sendfile(self->c, f, &off, 100));
	ASSERT_EQ(10000, off);
	assert_empty(_metadata, self->s);
	/* across EOF: what is there */
	off = 9000;
	ASSERT_EQ(1000, sendfile(self->c, f, &off, 5000));
	ASSERT_EQ(10000, off);
	recv_check(_metadata, self->s, 1000, key, 9000);
	assert_empty(_metadata, self->s);
	close(f);
}

/* A thread receiving len bytes into buf. */
struct collector {
	int fd;
	char *buf;
	size_t len;
	ssize_t ret;
	int err;
	pthread_t thr;
};

static void *collect(void *arg)
{
	struct collector *c = arg;

	c->ret = rs_recv_all(c->fd, c->buf, c->len, 0);
	c->err = errno;
	return NULL;
}

/* A sparse regular file: holes read as zeroes. */
TEST_F(sp, sendfile_holes)
{
	const size_t size = 3 * RS_MIB + 777, d1 = 100 * 4096 + 13;
	const size_t n1 = 5000, d2 = size - 100;
	uint64_t key = rs_key(3, 0, 1);
	char *data = malloc(n1), *buf = malloc(size);
	int f = tmp_file(_metadata);
	struct collector col;
	off_t off = 1;
	size_t i;

	ASSERT_NE(NULL, data);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, ftruncate(f, size));
	rs_pat_fill(data, n1, key, 0);
	ASSERT_EQ((ssize_t)n1, pwrite(f, data, n1, d1));
	ASSERT_EQ(100, pwrite(f, data, 100, d2));
	col.fd = self->s;
	col.buf = buf;
	col.len = size - 1;
	ASSERT_EQ(0, pthread_create(&col.thr, NULL, collect, &col));
	ASSERT_EQ((ssize_t)size - 1, sendfile_all(self->c, f, &off, size));
	ASSERT_EQ((off_t)size, off);
	pthread_join(col.thr, NULL);
	ASSERT_EQ((ssize_t)size - 1, col.ret) TH_LOG("recv: %s",
						     strerror(col.err));
	/* buf[i] is the file's byte i + 1 */
	for (i = 0; i < size - 1; i++) {
		char want = 0;

		if (i + 1 >= d1 && i + 1 < d1 + n1)
			want = data[i + 1 - d1];
		else if (i + 1 >= d2)
			want = data[i + 1 - d2];
		if (buf[i] != want)
			break;
	}
	ASSERT_EQ(size - 1, i) TH_LOG("file byte %zu differs", i + 1);
	free(data);
	free(buf);
	close(f);
}

/* Larger than the send ring and the peer's buffer, verified as it comes. */
TEST_F_TIMEOUT(sp, sendfile_large, 180)
{
	size_t len = big_mb() * RS_MIB;
	uint64_t key = rs_key(4, 0, 1);
	struct rs_xfer rx = {
		.fd = self->s, .total = len, .key = key, .chunk = 256 * RS_KIB,
		.expect_eof = true,
	};
	int f = pat_memfd(_metadata, len, key);
	struct rdmastream_info i;
	off_t off = 0;
	double t0;
	ssize_t n;

	ASSERT_EQ(0, rs_xfer_start(&rx, rs_receiver));
	t0 = rs_now();
	n = sendfile_all(self->c, f, &off, len);
	EXPECT_EQ((ssize_t)len, n) TH_LOG("sendfile: %s", strerror(errno));
	shutdown(self->c, SHUT_WR);
	rs_xfer_join_watch(&rx, 1, 30);
	rs_info("%zu MiB by sendfile in %.2f s", len / RS_MIB, rs_now() - t0);
	if (!rs.tcp && !get_info(self->c, &i) && i.rsi_writes)
		rs_info("%llu RDMA WRITEs, %llu bytes each on average",
			(unsigned long long)i.rsi_writes,
			(unsigned long long)(i.rsi_bytes_sent / i.rsi_writes));
	EXPECT_EQ(0, rx.err) TH_LOG("recv: %s", strerror(rx.err));
	EXPECT_FALSE(rx.mismatch) TH_LOG("byte %llu differs",
					 (unsigned long long)rx.bad_off);
	EXPECT_FALSE(rx.short_eof);
	EXPECT_FALSE(rx.bad_eof);
	EXPECT_EQ(len, rx.done);
	close(f);
}

/*
 * Non-blocking: partial counts while there is room, then EAGAIN with the
 * offset where it stopped; what went is intact.
 */
TEST_F(sp, sendfile_nonblock)
{
	const size_t len = 8 * RS_MIB;
	uint64_t key = rs_key(5, 0, 1);
	int f = pat_memfd(_metadata, len, key);
	size_t sent = 0, calls = 0;
	off_t off = 0;
	ssize_t n;

	ASSERT_EQ(0, rs_set_nonblock(self->c, true));
	for (;;) {
		n = sendfile(self->c, f, &off, len - off);
		if (n < 0)
			break;
		ASSERT_GT(n, 0);
		calls++;
		sent += n;
		ASSERT_EQ((off_t)sent, off);
		if (calls == 1) {
			ASSERT_LT((size_t)n, len) TH_LOG("all %zu sent at once",
							  len);
		}
		if (n < 64 * 1024)
			rs_msleep(20);	/* let queued bytes reach the peer */
		ASSERT_LT(sent, len);
	}
	ASSERT_EQ(EAGAIN, errno) TH_LOG("sendfile: %s", strerror(errno));
	ASSERT_EQ((off_t)sent, off);
	ASSERT_EQ(0, rs_poll(self->c, POLLOUT, 0) & POLLOUT);
	rs_info("%zu bytes in %zu non-blocking calls, then EAGAIN", sent,
		calls);
	recv_check(_metadata, self->s, sent, key, 0);
	assert_empty(_metadata, self->s);
	close(f);
}

/* ---- splice ---- */

/* socket -> pipe -> file, to EOF */
TEST_F(sp, splice_to_file)
{
	const size_t len = 4 * RS_MIB + 4321;
	uint64_t key = rs_key(6, 0, 1);
	struct rs_xfer tx = {
		.fd = self->c, .total = len, .key = key, .chunk = 100000,
		.random = true, .shut_wr = true,
	};
	int f = tmp_file(_metadata);
	size_t got = 0, bad;
	char *buf;
	ssize_t n;

	ASSERT_EQ(0, rs_xfer_start(&tx, rs_sender));
	for (;;) {
		n = splice(self->s, NULL, self->p[1], NULL, 200000,
			   SPLICE_F_MOVE);
		if (n < 0 && errno == EINTR)
			continue;
		ASSERT_LE(0, n) TH_LOG("splice: %s", strerror(errno));
		if (!n)
			break;
		ASSERT_EQ(0, drain_pipe(self->p[0], f, n));
		got += n;
	}
	pthread_join(tx.thr, NULL);
	ASSERT_EQ(0, tx.err) TH_LOG("send: %s", strerror(tx.err));
	ASSERT_EQ(len, got);
	/* EOF stays EOF */
	ASSERT_EQ(0, splice(self->s, NULL, self->p[1], NULL, 100, 0));
	buf = malloc(len);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ((ssize_t)len, pread(f, buf, len, 0));
	bad = rs_pat_check(buf, len, key, 0);
	free(buf);
	ASSERT_EQ(len, bad) TH_LOG("file byte %zu differs", bad);
	close(f);
}

struct pipe_writer {
	int fd;
	size_t len;
	uint64_t key;
	int err;
	pthread_t thr;
};

static void *pipe_write(void *arg)
{
	struct pipe_writer *w = arg;
	size_t off = 0, n;
	char buf[65536];
	ssize_t r;

	while (off < w->len) {
		n = w->len - off < sizeof(buf) - 1 ? w->len - off :
						     sizeof(buf) - 1;
		rs_pat_fill(buf, n, w->key, off);
		r = write(w->fd, buf, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			w->err = r ? errno : EIO;
			break;
		}
		off += r;
	}
	close(w->fd);
	return NULL;
}

/* pipe -> socket (->sendpage), in odd sizes, to EOF of the pipe */
TEST_F(sp, splice_from_pipe)
{
	const size_t len = 4 * RS_MIB + 99;
	uint64_t key = rs_key(7, 0, 1);
	struct pipe_writer w = { .fd = self->p[1], .len = len, .key = key };
	struct rs_xfer rx = {
		.fd = self->s, .total = len, .key = key, .chunk = 128 * RS_KIB,
		.random = true, .expect_eof = true,
	};
	size_t sent = 0;
	ssize_t n;

	ASSERT_EQ(0, rs_xfer_start(&rx, rs_receiver));
	ASSERT_EQ(0, pthread_create(&w.thr, NULL, pipe_write, &w));
	for (;;) {
		n = splice(self->p[0], NULL, self->c, NULL, 77777,
			   SPLICE_F_MOVE | SPLICE_F_MORE);
		if (n < 0 && errno == EINTR)
			continue;
		ASSERT_LE(0, n) TH_LOG("splice: %s", strerror(errno));
		if (!n)
			break;
		sent += n;
	}
	pthread_join(w.thr, NULL);
	self->p[1] = dup(self->p[0]);	/* closed by the writer */
	ASSERT_EQ(0, w.err);
	ASSERT_EQ(len, sent);
	ASSERT_EQ(0, shutdown(self->c, SHUT_WR));
	rs_xfer_join_watch(&rx, 1, 30);
	EXPECT_EQ(0, rx.err) TH_LOG("recv: %s", strerror(rx.err));
	EXPECT_FALSE(rx.mismatch) TH_LOG("byte %llu differs",
					 (unsigned long long)rx.bad_off);
	EXPECT_EQ(len, rx.done);
	EXPECT_FALSE(rx.bad_eof);
}

TEST_F(sp, splice_empty)
{
	double t0;

	/* a non-blocking socket: EAGAIN, with or without the flag */
	ASSERT_EQ(0, rs_set_nonblock(self->s, true));
	ASSERT_EQ(-1, splice(self->s, NULL, self->p[1], NULL, 4096,
			     SPLICE_F_NONBLOCK));
	ASSERT_EQ(EAGAIN, errno) TH_LOG("splice: %s", strerror(errno));
	ASSERT_EQ(-1, splice(self->s, NULL, self->p[1], NULL, 4096, 0));
	ASSERT_EQ(EAGAIN, errno) TH_LOG("splice: %s", strerror(errno));
	ASSERT_EQ(0, rs_set_nonblock(self->s, false));

	/* blocking with SO_RCVTIMEO: EAGAIN when it expires */
	ASSERT_EQ(0, rs_set_timeo(self->s, SO_RCVTIMEO, 300));
	t0 = rs_now();
	ASSERT_EQ(-1, splice(self->s, NULL, self->p[1], NULL, 4096,
			     SPLICE_F_NONBLOCK));
	ASSERT_EQ(EAGAIN, errno) TH_LOG("splice: %s", strerror(errno));
	t0 = rs_now() - t0;
	/* it waited (jiffies and the VM's clock may disagree a little) */
	ASSERT_LE(150, (int)(t0 * 1000)) TH_LOG("returned after %.3f s", t0);

	/* data makes it readable; the pipe holds what was spliced */
	ASSERT_EQ(5, send(self->c, "hello", 5, 0));
	ASSERT_EQ(5, splice(self->s, NULL, self->p[1], NULL, 4096,
			    SPLICE_F_NONBLOCK));
	{
		char b[8];

		ASSERT_EQ(5, read(self->p[0], b, sizeof(b)));
		ASSERT_EQ(0, memcmp(b, "hello", 5));
	}
}

TEST_F(sp, splice_after_fin)
{
	char b[16];

	ASSERT_EQ(10, send(self->c, "0123456789", 10, 0));
	ASSERT_EQ(0, shutdown(self->c, SHUT_WR));
	ASSERT_EQ(10, rs_wait_inq(self->s, 10, 5000));
	ASSERT_EQ(10, splice(self->s, NULL, self->p[1], NULL, 4096, 0));
	ASSERT_EQ(0, splice(self->s, NULL, self->p[1], NULL, 4096, 0));
	ASSERT_EQ(0, splice(self->s, NULL, self->p[1], NULL, 4096,
			    SPLICE_F_NONBLOCK));
	ASSERT_EQ(10, read(self->p[0], b, sizeof(b)));
	ASSERT_EQ(0, memcmp(b, "0123456789", 10));
}

TEST_F(sp, splice_after_reset)
{
	ssize_t n;

	/* closing with unread data resets the connection */
	ASSERT_EQ(6, send(self->c, "unread", 6, 0));
	ASSERT_EQ(6, rs_wait_inq(self->s, 6, 5000));
	close(self->s);
	self->s = -1;
	ASSERT_EQ(POLLERR, rs_poll(self->c, POLLIN, 5000) & POLLERR);
	n = splice(self->c, NULL, self->p[1], NULL, 4096, 0);
	ASSERT_EQ(-1, n);
	ASSERT_EQ(ECONNRESET, errno) TH_LOG("splice: %s", strerror(errno));
	/* reported once; then EOF */
	ASSERT_EQ(0, splice(self->c, NULL, self->p[1], NULL, 4096, 0));
	/* and sendfile into the dead socket: EPIPE */
	{
		int f = pat_memfd(_metadata, 100, 1);
		off_t off = 0;

		ASSERT_EQ(-1, sendfile(self->c, f, &off, 100));
		ASSERT_EQ(EPIPE, errno) TH_LOG("sendfile: %s",
					       strerror(errno));
		close(f);
	}
}

/* ---- both directions ---- */

struct sf_job {
	int out, in;
	size_t len;
	ssize_t ret;
	int err;
	pthread_t thr;
};

static void *sf_run(void *arg)
{
	struct sf_job *j = arg;
	off_t off = 0;

	j->ret = sendfile_all(j->out, j->in, &off, j->len);
	j->err = j->ret < 0 ? errno : 0;
	shutdown(j->out, SHUT_WR);
	return NULL;
}

/*
 * Wait until fd holds an ADVERT from its peer. A direct-only sender that
 * finds none waits only a short grace period (10 ms) and then sends
 * through the stream buffer until the receiver next finds it empty; under
 * emulation the receiver's first ADVERT (pin, register, send) can take
 * longer than that, and the whole stream may then go indirect.
 */
static void await_advert(struct __test_metadata *_metadata, int fd)
{
	double end = rs_now() + rs_env_ulong("RS_FAULT_SEC", 10);
	struct rdmastream_info i;

	if (rs.tcp || rs_fb_forced())
		return;
	for (;;) {
		ASSERT_EQ(0, get_info(fd, &i));
		if (i.rsi_adverts_received)
			return;
		ASSERT_LT(rs_now(), end) TH_LOG("no ADVERT from the receiver");
		usleep(1000);
	}
}

/*
 * c -> s by sendfile, spliced out at s and checked from the pipe, while
 * s -> c goes by send() into c's blocking 1 MiB receives, which advertise
 * under the dynamic policy (direct). Both streams stay intact; the
 * counters show which path each took.
 */
TEST_F_TIMEOUT(pol, bidir_with_direct, 180)
{
	const size_t len = 8 * RS_MIB;
	uint64_t key_cs = rs_key(8, 0, 1), key_sc = rs_key(8, 1, 1);
	int f = pat_memfd(_metadata, len, key_cs);
	struct sf_job sf = { .out = self->c, .in = f, .len = len };
	struct rs_xfer tx = {
		.fd = self->s, .total = len, .key = key_sc, .chunk = RS_MIB,
		.shut_wr = true,
	};
	struct rs_xfer rx = {
		.fd = self->c, .total = len, .key = key_sc, .chunk = RS_MIB,
		.expect_eof = true,
	};
	struct rdmastream_info ci, si;
	size_t got = 0, bad, k, m;
	char *buf = malloc(PIPE_SZ);
	ssize_t n;

	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, rs_xfer_start(&rx, rs_receiver));
	if (variant->policy == RDMASTREAM_POLICY_DIRECT_ONLY)
		await_advert(_metadata, self->s);
	ASSERT_EQ(0, rs_xfer_start(&tx, rs_sender));
	ASSERT_EQ(0, pthread_create(&sf.thr, NULL, sf_run, &sf));
	for (;;) {
		n = splice(self->s, NULL, self->p[1], NULL, PIPE_SZ, 0);
		if (n < 0 && errno == EINTR)
			continue;
		ASSERT_LE(0, n) TH_LOG("splice: %s", strerror(errno));
		if (!n)
			break;
		for (k = 0; k < (size_t)n; k += m) {
			m = read(self->p[0], buf, n - k);
			ASSERT_LT(0, (ssize_t)m);
			bad = rs_pat_check(buf, m, key_cs, got);
			ASSERT_EQ(m, bad) TH_LOG("c->s byte %zu differs",
						 got + bad);
			got += m;
		}
	}
	pthread_join(sf.thr, NULL);
	pthread_join(tx.thr, NULL);
	pthread_join(rx.thr, NULL);
	free(buf);
	close(f);
	EXPECT_EQ((ssize_t)len, sf.ret) TH_LOG("sendfile: %s",
					       strerror(sf.err));
	EXPECT_EQ(len, got);
	EXPECT_EQ(0, tx.err);
	EXPECT_EQ(0, rx.err) TH_LOG("recv: %s", strerror(rx.err));
	EXPECT_FALSE(rx.mismatch) TH_LOG("s->c byte %llu differs",
					 (unsigned long long)rx.bad_off);
	EXPECT_EQ(len, rx.done);
	/* over TCP (fb:splice) there are no direct and indirect bytes */
	if (rs.tcp || rs_fb_forced())
		return;
	ASSERT_EQ(0, get_info(self->c, &ci));
	ASSERT_EQ(0, get_info(self->s, &si));
	rs_info("s->c direct %llu indirect %llu; c->s direct %llu indirect %llu",
		(unsigned long long)ci.rsi_direct_bytes_received,
		(unsigned long long)ci.rsi_indirect_bytes_received,
		(unsigned long long)si.rsi_direct_bytes_received,
		(unsigned long long)si.rsi_indirect_bytes_received);
	/* a pipe is never advertised: c->s all indirect */
	EXPECT_EQ(0, si.rsi_direct_bytes_received);
	EXPECT_EQ(0, si.rsi_adverts_sent);
	EXPECT_EQ(len, si.rsi_indirect_bytes_received);
	/*
	 * s->c: direct-only advertises every blocking receive that finds
	 * the stream buffer empty, and the first one was in place before
	 * s sent (await_advert); dynamic
	 * goes direct only when c's receives find the ring empty, which a
	 * sender that never pauses may not allow (direct.c's switching).
	 */
	if (variant->policy == RDMASTREAM_POLICY_INDIRECT_ONLY)
		EXPECT_EQ(0, ci.rsi_direct_bytes_received);
	if (variant->policy == RDMASTREAM_POLICY_DIRECT_ONLY)
		EXPECT_LT(0, ci.rsi_direct_bytes_received);
	EXPECT_EQ(len, ci.rsi_direct_bytes_received +
		       ci.rsi_indirect_bytes_received);
}

TEST_HARNESS_MAIN
