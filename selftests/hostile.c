// SPDX-License-Identifier: GPL-2.0
/*
 * A hostile peer: a user-space rdma_cm/verbs client that speaks enough of
 * the wire protocol (docs/wire-format.md) to be accepted by an
 * AF_RDMASTREAM listener, learns the stream buffer from the SETUP message,
 * and then tries to write or read where it must not. The module must only
 * expose its stream buffer, for remote write only, and must reset (not
 * crash, not corrupt) on a write that claims more than the buffer holds.
 *
 * legit:      a 5-byte WRITE WITH IMMEDIATE at offset 0 is read by recv()
 *             (proves the harness speaks the protocol).
 * past_end:   a WRITE one byte past the buffer fails remotely.
 * before:     a WRITE a page before the buffer fails remotely.
 * read:       an RDMA READ of the buffer fails remotely (no remote read).
 * bad_rkey:   a WRITE with another rkey fails remotely.
 * overrun:    an immediate that claims more bytes than the buffer holds
 *             resets the socket with EPROTO.
 * imm_empty:  a zero-byte WRITE WITH IMMEDIATE claiming 64 bytes: EPROTO,
 *             not 64 bytes of whatever the buffer held.
 * imm_short:  5 bytes written, 4096 claimed: EPROTO.
 * misplaced:  the bytes go elsewhere in the buffer than the immediate
 *             says: recv() returns bytes nobody wrote, which must be 0.
 * reserved:   a control message with a reserved byte set: EPROTO.
 * flags:      an ACK with a flag set (ACK defines none): EPROTO.
 * iova:       the SETUP address is no DMA address (not a kernel address,
 *             not a low physical one) and differs between connections;
 *             the peer writes through it all the same.
 * Each attack that fails remotely leaves the module's socket with an error.
 *
 * Direct transfers: a blocking recv() with a large buffer advertises it.
 * after:      the peer writes into the ADVERT, says so without
 *             invalidating it, and once recv() has returned the bytes
 *             writes again: that write must fail, the buffer keep the data.
 *             On rxe, which may still copy a packet it checked before
 *             the module's LOCAL_INV, recv() returns only after the MR
 *             is deregistered (rsi_inv_fences), and unpinned.
 * cancel:     recv() times out; the peer answers the CANCEL properly and
 *             then writes into the old ADVERT: refused, buffer untouched.
 * silent:     as cancel, but the peer never answers the CANCEL: recv()
 *             still returns (the module gives up on the peer), and the
 *             late write cannot reach the buffer.
 * bogus:      a DIRECT naming an ADVERT that does not exist: EPROTO.
 * adv_iova:   as after, and the ADVERT address is no DMA address either.
 *
 * pdata_flags: a REQ whose private data sets a flag the module does not
 *             know is rejected.
 * hostile_err.waitall_error_kept: a WAITALL recv() that copied bytes and
 *             then lost its connection (an unanswered CANCEL) returns
 *             them; the next recv() reports the error, not EOF. Found
 *             by fuzz_wire.
 * hostile_err.send_error_kept: the same for a send() that queued bytes
 *             before a reset: the next send() says EPROTO, not EPIPE.
 *
 * RING (a bigger stream buffer, docs/wire-format.md), from a peer that
 * negotiated it (CM flag 0x01):
 * ring.follow:  the module answers RING with RING_ACK naming the bytes it
 *             had sent, and writes the next bytes into the new buffer, at
 *             their offset modulo its size; the old one is left alone.
 * ring.smaller, ring.odd: a RING whose size is not bigger, or not a power
 *             of two: EPROTO.
 * ring.ack:   a RING_ACK for a RING the module never sent: EPROTO.
 * ring.unasked: a RING from a peer that did not negotiate it: EPROTO.
 *
 * Numbered writes (bit 31 of the immediate alternates, CM flag 0x02):
 * wseq.numbered: the REP echoes the flag; the peer's numbered writes are
 *             read in order, and the module's own writes alternate.
 * wseq.twice: the same write run twice in a row, as rxe's go-back-N slip
 *             can (docs/lossy-links.md): EPROTO, and recv() never
 *             returns the second copy's claim (bytes nobody wrote there).
 * wseq.unasked: bit 31 set by a peer that did not negotiate it: EPROTO.
 *
 * Half-open: peers that send their REQ and never complete the handshake
 * (they never read the REP, so no RTU goes out; the CM gives up after
 * tens of seconds) fill the listener's backlog but hold no ring memory
 * (no MR of the module's), a further connect is refused at once, and
 * once they are gone the listener takes connections again.
 */
#include "rs_peer.h"

enum attack { LEGIT, PAST_END, BEFORE, READ, BAD_RKEY, OVERRUN,
	      IMM_EMPTY, IMM_SHORT, MISPLACED, RESERVED, FLAGS, IOVA,
	      ADV_AFTER, ADV_CANCEL, ADV_SILENT, ADV_BOGUS, ADV_IOVA };

/*
 * A buffer address as the module tells it to its peer (SETUP, ADVERT)
 * must not be the buffer's DMA address: on rxe that is a kernel virtual
 * address (upper half), without an IOMMU a physical one (low).
 */
static bool addr_hidden(uint64_t a)
{
	return a >= (1ULL << 32) && a < (1ULL << 63);
}

/*
 * How the module's HCA refused a peer's access: a NAK, so the peer sees
 * IBV_WC_REM_ACCESS_ERR. rxe before 5.13 ("RDMA/rxe: Fix missing acks
 * from responder") moves its QP to error without the NAK, so the peer
 * retries into a dead QP until IBV_WC_RETRY_EXC_ERR; that is a refusal
 * too (the buffer checks that follow are the same).
 */
static bool access_refused(int st)
{
	return st == IBV_WC_REM_ACCESS_ERR ||
	       (st == IBV_WC_RETRY_EXC_ERR && rs_rxe_before(5, 13));
}

struct reader {
	pthread_t thr;
	int fd;
	char *buf;
	ssize_t ret;
	int err;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	r->ret = recv(r->fd, r->buf, ADV_LEN, 0);
	r->err = errno;
	return NULL;
}

FIXTURE(hostile)
{
	int lfd;
	int s;			/* the module's accepted socket */
	struct peer p;
};

FIXTURE_VARIANT(hostile)
{
	enum attack attack;
};

FIXTURE_VARIANT_ADD(hostile, legit) { .attack = LEGIT };
FIXTURE_VARIANT_ADD(hostile, past_end) { .attack = PAST_END };
FIXTURE_VARIANT_ADD(hostile, before) { .attack = BEFORE };
FIXTURE_VARIANT_ADD(hostile, read) { .attack = READ };
FIXTURE_VARIANT_ADD(hostile, bad_rkey) { .attack = BAD_RKEY };
FIXTURE_VARIANT_ADD(hostile, overrun) { .attack = OVERRUN };
FIXTURE_VARIANT_ADD(hostile, imm_empty) { .attack = IMM_EMPTY };
FIXTURE_VARIANT_ADD(hostile, imm_short) { .attack = IMM_SHORT };
FIXTURE_VARIANT_ADD(hostile, misplaced) { .attack = MISPLACED };
FIXTURE_VARIANT_ADD(hostile, reserved) { .attack = RESERVED };
FIXTURE_VARIANT_ADD(hostile, flags) { .attack = FLAGS };
FIXTURE_VARIANT_ADD(hostile, iova) { .attack = IOVA };

/* Accept the hostile peer's connection; it has the SETUP by then. */
static void peer_accept_flags(struct __test_metadata *_metadata, int *lfd,
			      int *s, struct peer *p, uint8_t flags)
{
	struct sockaddr_in sin;

	memset(p, 0, sizeof(*p));
	/*
	 * 268 ms, about 1.9 s for the 7 tries: an attack the module's QP
	 * answers with silence (it went to error) ends in seconds, not the
	 * default's ~16, and a legitimate write is still acknowledged in
	 * time by a loaded TCG host.
	 */
	p->ack_timeout = 16;
	*lfd = -1;
	*s = -1;
	if (rs.tcp)
		return;
	rs_watchdog(120);
	*lfd = rs_listener(_metadata, &sin);
	ASSERT_EQ(0, peer_connect(p, &sin, flags))
		TH_LOG("hostile peer could not connect: %s", strerror(errno));
	*s = rs_accept(_metadata, *lfd);
	ASSERT_EQ(0, peer_setup(p)) TH_LOG("no SETUP from the module");
	ASSERT_GE(p->size, 16384U);
	ASSERT_EQ(0, rs_set_timeo(*s, SO_RCVTIMEO, 10000));
}

static void peer_accept(struct __test_metadata *_metadata, int *lfd,
			int *s, struct peer *p)
{
	peer_accept_flags(_metadata, lfd, s, p, 0);
}

static void peer_release(int lfd, int s, struct peer *p)
{
	peer_close(p);
	if (s >= 0)
		close(s);
	if (lfd >= 0)
		close(lfd);
}

FIXTURE_SETUP(hostile)
{
	peer_accept(_metadata, &self->lfd, &self->s, &self->p);
}

FIXTURE_TEARDOWN(hostile)
{
	peer_release(self->lfd, self->s, &self->p);
}

FIXTURE(hostile_adv)
{
	int lfd;
	int s;
	struct peer p;
};

FIXTURE_VARIANT(hostile_adv)
{
	enum attack attack;
};

FIXTURE_VARIANT_ADD(hostile_adv, after) { .attack = ADV_AFTER };
FIXTURE_VARIANT_ADD(hostile_adv, cancel) { .attack = ADV_CANCEL };
FIXTURE_VARIANT_ADD(hostile_adv, silent) { .attack = ADV_SILENT };
FIXTURE_VARIANT_ADD(hostile_adv, bogus) { .attack = ADV_BOGUS };
FIXTURE_VARIANT_ADD(hostile_adv, iova) { .attack = ADV_IOVA };

FIXTURE_SETUP(hostile_adv)
{
	peer_accept(_metadata, &self->lfd, &self->s, &self->p);
}

FIXTURE_TEARDOWN(hostile_adv)
{
	peer_release(self->lfd, self->s, &self->p);
}

/*
 * The bytes land at half the buffer, the immediate says they are at its
 * start: recv() returns what was there before, which must be nothing of
 * the kernel's. The lengths agree, so this is no protocol error.
 */
static void misplaced(struct __test_metadata *_metadata, int s,
		      struct peer *p)
{
	uint32_t len = p->size / 2 < PEER_BIG ? p->size / 2 : PEER_BIG;
	uint32_t i, dirty = 0;
	unsigned char *got = malloc(len);

	ASSERT_NE(NULL, got);
	ASSERT_EQ(IBV_WC_SUCCESS, peer_write_big(p, p->size / 2, len, len));
	ASSERT_EQ((ssize_t)len, rs_recv_all(s, got, len, 0))
		TH_LOG("recv: %s", strerror(errno));
	for (i = 0; i < len; i++)
		dirty += got[i] != 0;
	EXPECT_EQ(0, dirty)
		TH_LOG("%u of %u bytes nobody wrote are not 0 (%02x %02x ...)",
		       dirty, len, got[0], got[1]);
	free(got);
}

/*
 * SETUP addresses: not DMA addresses, not the same twice; and the peer's
 * writes go where it was told all the same.
 */
static void setup_addrs(struct __test_metadata *_metadata, int lfd,
			struct peer *p)
{
	struct sockaddr_in sin;
	socklen_t slen = sizeof(sin);
	struct peer q = {};
	struct ibv_wc wc;
	char buf[16];
	int s2;

	EXPECT_TRUE(addr_hidden(p->addr))
		TH_LOG("SETUP address %#llx", (unsigned long long)p->addr);
	ASSERT_EQ(0, getsockname(lfd, (struct sockaddr *)&sin, &slen));
	ASSERT_EQ(0, peer_connect(&q, &sin, 0));
	s2 = rs_accept(_metadata, lfd);
	ASSERT_EQ(0, peer_setup(&q));
	EXPECT_TRUE(addr_hidden(q.addr))
		TH_LOG("SETUP address %#llx", (unsigned long long)q.addr);
	EXPECT_NE(p->addr >> 32, q.addr >> 32)
		TH_LOG("two SETUP addresses %#llx %#llx",
		       (unsigned long long)p->addr,
		       (unsigned long long)q.addr);
	ASSERT_EQ(0, peer_post(&q, IBV_WR_RDMA_WRITE_WITH_IMM, q.addr + 0,
			       q.rkey, 5, 5));
	ASSERT_EQ(IBV_WC_SUCCESS, cq_wait(&q, &wc, 10000));
	ASSERT_EQ(0, rs_set_timeo(s2, SO_RCVTIMEO, 10000));
	ASSERT_EQ(5, recv(s2, buf, sizeof(buf), 0));
	EXPECT_EQ(0, memcmp(buf, "hello", 5));
	peer_close(&q);
	close(s2);
}

TEST_F_TIMEOUT(hostile, attack, 120)
{
	struct peer *p = &self->p;
	struct ibv_wc wc;
	char buf[64];
	ssize_t n;
	int st;

	RS_SKIP_TCP("speaks the rdmastream wire protocol");
	switch (variant->attack) {
	case LEGIT:
		ASSERT_EQ(0, peer_post(p, IBV_WR_RDMA_WRITE_WITH_IMM, p->addr,
				       p->rkey, 5, 5));
		ASSERT_EQ(IBV_WC_SUCCESS, cq_wait(p, &wc, 10000));
		n = recv(self->s, buf, sizeof(buf), 0);
		ASSERT_EQ(5, n) TH_LOG("recv: %s", strerror(errno));
		EXPECT_EQ(0, memcmp(buf, "hello", 5));
		return;
	case PAST_END:
		ASSERT_EQ(0, peer_post(p, IBV_WR_RDMA_WRITE,
				       p->addr + p->size, p->rkey, 1, 0));
		break;
	case BEFORE:
		ASSERT_EQ(0, peer_post(p, IBV_WR_RDMA_WRITE, p->addr - 4096,
				       p->rkey, 5, 0));
		break;
	case READ:
		/* put bytes in the buffer, leave them unread, try to read them */
		ASSERT_EQ(0, peer_post(p, IBV_WR_RDMA_WRITE_WITH_IMM, p->addr,
				       p->rkey, 5, 5));
		ASSERT_EQ(IBV_WC_SUCCESS, cq_wait(p, &wc, 10000));
		ASSERT_EQ(0, peer_post(p, IBV_WR_RDMA_READ, p->addr, p->rkey,
				       5, 0));
		/*
		 * Refused, or never answered (on rxe it neither completes
		 * nor fails in 30 s, whatever the peer's ACK timeout): a
		 * READ the module's QP allowed completes in milliseconds.
		 */
		st = cq_wait(p, &wc, 5000);
		EXPECT_NE(IBV_WC_SUCCESS, st);
		EXPECT_NE(0, memcmp(p->buf + SLOTS * MSG, "hello", 5))
			TH_LOG("the stream buffer was readable");
		return;
	case BAD_RKEY:
		ASSERT_EQ(0, peer_post(p, IBV_WR_RDMA_WRITE, p->addr,
				       p->rkey ^ 0x5a5a00, 5, 0));
		break;
	case IMM_EMPTY:
	case IMM_SHORT:
		/* nothing (or 5 bytes) written, 64 (4096) claimed */
		ASSERT_EQ(0, peer_post(p, IBV_WR_RDMA_WRITE_WITH_IMM, p->addr,
				       p->rkey, variant->attack == IMM_EMPTY ?
				       0 : 5, variant->attack == IMM_EMPTY ?
				       64 : 4096));
		ASSERT_EQ(IBV_WC_SUCCESS, cq_wait(p, &wc, 10000));
		n = recv(self->s, buf, sizeof(buf), 0);
		EXPECT_EQ(-1, n) TH_LOG("recv returned %zd unwritten bytes", n);
		EXPECT_EQ(EPROTO, errno);
		return;
	case MISPLACED:
		misplaced(_metadata, self->s, p);
		return;
	case RESERVED:
	case FLAGS:
		/* an ACK, valid but for one reserved byte or one flag */
		peer_ctl_fill(p, T_ACK, 0, 0, 0,
			      variant->attack == FLAGS ? 1 : 0);
		if (variant->attack == RESERVED)
			peer_ctl_buf(p)[MSG - 1] = 1;
		ASSERT_EQ(0, peer_ctl_send(p));
		ASSERT_EQ(0, rs_set_timeo(self->s, SO_RCVTIMEO, 3000));
		n = recv(self->s, buf, sizeof(buf), 0);
		EXPECT_EQ(-1, n);
		EXPECT_EQ(EPROTO, errno) TH_LOG("recv: %s", strerror(errno));
		return;
	case IOVA:
		setup_addrs(_metadata, self->lfd, p);
		return;
	default:
		ASSERT_EQ(0, peer_post(p, IBV_WR_RDMA_WRITE_WITH_IMM, p->addr,
				       p->rkey, 5, p->size + 1));
		ASSERT_EQ(IBV_WC_SUCCESS, cq_wait(p, &wc, 10000));
		n = recv(self->s, buf, sizeof(buf), 0);
		EXPECT_EQ(-1, n);
		EXPECT_EQ(EPROTO, errno);
		return;
	}
	/* the access itself must fail at the module's HCA */
	st = cq_wait(p, &wc, 20000);
	EXPECT_TRUE(access_refused(st))
		TH_LOG("attack completed with %s",
		       st < 0 ? "nothing" : ibv_wc_status_str(st));
	/* and the module's socket learns that the connection is gone */
	n = recv(self->s, buf, sizeof(buf), 0);
	EXPECT_EQ(-1, n);
	EXPECT_TRUE(errno == ECONNRESET || errno == EPROTO)
		TH_LOG("recv: %s", strerror(errno));
}

/*
 * Direct transfers: whatever the peer does, once recv() has returned it
 * cannot write into the application's buffer any more.
 */
/* The process's pinned pages (VmPin, its mm's pinned_vm), in KiB. */
static long vm_pin_kb(void)
{
	char line[128];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/*
 * The module's own LOCAL_INV took the ADVERT back: on rxe, which may
 * still copy a packet it checked before, the MR was deregistered (which
 * waits for that copy) before recv() returned, and the pages are no
 * longer pinned.
 */
static void fenced_before_return(struct __test_metadata *_metadata,
				 const struct rdmastream_info *info, long base)
{
	if (!strncmp(rs.rdmadev, "rxe", 3))
		EXPECT_EQ(1, info->rsi_inv_fences);
	EXPECT_EQ(base, vm_pin_kb()) TH_LOG("the buffer is still pinned");
}

TEST_F_TIMEOUT(hostile_adv, advert, 120)
{
	struct peer *p = &self->p;
	struct reader r = { .fd = self->s };
	struct rdmastream_info info;
	socklen_t len = sizeof(info);
	long base;
	int st;

	RS_SKIP_TCP("speaks the rdmastream wire protocol");
	r.buf = mmap(NULL, ADV_LEN, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, r.buf);
	memset(r.buf, 'A', ADV_LEN);
	base = vm_pin_kb();	/* the peer's own MRs */
	ASSERT_LE(0, base);
	if (variant->attack != ADV_AFTER && variant->attack != ADV_BOGUS &&
	    variant->attack != ADV_IOVA)
		ASSERT_EQ(0, rs_set_timeo(self->s, SO_RCVTIMEO, 500));
	ASSERT_EQ(0, pthread_create(&r.thr, NULL, reader_main, &r));
	ASSERT_EQ(0, peer_advert(p)) TH_LOG("no ADVERT from the module");
	EXPECT_GE(p->adv_len, 32768U);
	if (variant->attack == ADV_IOVA) {
		EXPECT_TRUE(addr_hidden(p->adv_addr))
			TH_LOG("ADVERT address %#llx",
			       (unsigned long long)p->adv_addr);
		/* the page offset is the buffer's: the HCA needs it */
		EXPECT_EQ((uintptr_t)r.buf & 4095, p->adv_addr & 4095);
	}
	switch (variant->attack) {
	case ADV_AFTER:
	case ADV_IOVA:
		ASSERT_EQ(IBV_WC_SUCCESS, peer_write_adv(p));
		/* DIRECT, complete, but no invalidation: the module must */
		ASSERT_EQ(0, peer_ctl(p, T_DIRECT, 5, 0, p->adv_id, 1));
		pthread_join(r.thr, NULL);
		ASSERT_EQ(5, r.ret) TH_LOG("recv: %s", strerror(r.err));
		ASSERT_EQ(0, memcmp(r.buf, "hello", 5));
		memset(r.buf, 'B', 5);
		break;
	case ADV_CANCEL:
		ASSERT_NE(NULL, peer_msg(p, T_CANCEL, 10000));
		ASSERT_EQ(0, peer_ctl(p, T_CANCEL_ACK, 0, 0, 0, 0));
		pthread_join(r.thr, NULL);
		ASSERT_EQ(-1, r.ret);
		ASSERT_EQ(EAGAIN, r.err);
		break;
	case ADV_SILENT:
		ASSERT_NE(NULL, peer_msg(p, T_CANCEL, 10000));
		pthread_join(r.thr, NULL);
		ASSERT_EQ(-1, r.ret);
		break;
	default:
		ASSERT_EQ(0, peer_ctl(p, T_DIRECT, 5, 0, p->adv_id ^ 0x100, 1));
		pthread_join(r.thr, NULL);
		ASSERT_EQ(-1, r.ret);
		ASSERT_EQ(EPROTO, r.err);
		break;
	}
	if (variant->attack == ADV_AFTER || variant->attack == ADV_IOVA) {
		ASSERT_EQ(0, getsockopt(self->s, SOL_RDMASTREAM,
					RDMASTREAM_INFO, &info, &len));
		EXPECT_GE(info.rsi_local_invalidates, 1);
		EXPECT_EQ(5, info.rsi_direct_bytes_received);
		fenced_before_return(_metadata, &info, base);
	}
	/* the late write: refused remotely, or the QP is gone already */
	st = peer_write_adv(p);
	EXPECT_NE(IBV_WC_SUCCESS, st);
	if (variant->attack == ADV_AFTER || variant->attack == ADV_IOVA)
		EXPECT_TRUE(access_refused(st))
			TH_LOG("the late write completed with %s",
			       st < 0 ? "nothing" : ibv_wc_status_str(st));
	EXPECT_EQ(0, memcmp(r.buf, variant->attack == ADV_AFTER ||
			    variant->attack == ADV_IOVA ? "BBBBB" : "AAAAA", 5))
		TH_LOG("the peer wrote into a returned buffer");
	munmap(r.buf, ADV_LEN);
}

/*
 * Found by fuzz_wire: a MSG_WAITALL recv() that has copied some bytes
 * through the ring and then gives up on its ADVERT (the peer never
 * answers the CANCEL: the connection times out) returns those bytes, and
 * the error must be left for the next call, as TCP leaves it. The direct
 * receive consumed it, so the next recv() read a clean EOF and the
 * application never learnt that the stream was cut short.
 */
FIXTURE(hostile_err)
{
	int lfd;
	int s;
	struct peer p;
};

FIXTURE_SETUP(hostile_err)
{
	peer_accept(_metadata, &self->lfd, &self->s, &self->p);
}

FIXTURE_TEARDOWN(hostile_err)
{
	peer_release(self->lfd, self->s, &self->p);
}

static void *reader_waitall(void *arg)
{
	struct reader *r = arg;

	r->ret = recv(r->fd, r->buf, ADV_LEN, MSG_WAITALL);
	r->err = errno;
	return NULL;
}

TEST_F_TIMEOUT(hostile_err, waitall_error_kept, 120)
{
	struct peer *p = &self->p;
	struct reader r = { .fd = self->s };
	struct ibv_wc wc;
	char buf[16];
	ssize_t n;

	RS_SKIP_TCP("speaks the rdmastream wire protocol");
	r.buf = malloc(ADV_LEN);
	ASSERT_NE(NULL, r.buf);
	ASSERT_EQ(0, rs_set_timeo(self->s, SO_RCVTIMEO, 500));
	ASSERT_EQ(0, pthread_create(&r.thr, NULL, reader_waitall, &r));
	/* 5 bytes through the ring; the rest of the recv() is advertised */
	ASSERT_EQ(0, peer_post(p, IBV_WR_RDMA_WRITE_WITH_IMM, p->addr,
			       p->rkey, 5, 5));
	ASSERT_EQ(IBV_WC_SUCCESS, cq_wait(p, &wc, 10000));
	ASSERT_EQ(0, peer_advert(p)) TH_LOG("no ADVERT after 5 bytes");
	/* the receive times out; its CANCEL stays unanswered */
	ASSERT_NE(NULL, peer_msg(p, T_CANCEL, 10000));
	pthread_join(r.thr, NULL);
	EXPECT_EQ(5, r.ret) TH_LOG("recv: %s", strerror(r.err));
	EXPECT_EQ(0, memcmp(r.buf, "hello", 5));
	/* the next call reports the error, the one after it the end */
	n = recv(self->s, buf, sizeof(buf), 0);
	EXPECT_EQ(-1, n) TH_LOG("recv after the timeout returned %zd", n);
	EXPECT_EQ(ETIMEDOUT, errno) TH_LOG("recv: %s", strerror(errno));
	EXPECT_EQ(0, recv(self->s, buf, sizeof(buf), 0));
	free(r.buf);
}

struct sender {
	pthread_t thr;
	int fd;
	char *buf;
	size_t len;
	ssize_t ret;
	int err;
};

static void *sender_main(void *arg)
{
	struct sender *w = arg;

	w->ret = send(w->fd, w->buf, w->len, MSG_NOSIGNAL);
	w->err = errno;
	return NULL;
}

/*
 * The same for send(): one that queued bytes and then meets a reset
 * returns them, and the next send() reports the reset (EPROTO here), not
 * a bare EPIPE: the error was consumed by the call that returned bytes.
 */
TEST_F_TIMEOUT(hostile_err, send_error_kept, 120)
{
	struct sender w = { .fd = self->s, .len = 8 << 20 };
	char b = 0;

	RS_SKIP_TCP("speaks the rdmastream wire protocol");
	w.buf = calloc(1, w.len);
	ASSERT_NE(NULL, w.buf);
	ASSERT_EQ(0, rs_set_timeo(self->s, SO_SNDTIMEO, 20000));
	/* no SETUP from the peer: the send ring fills, the call waits */
	ASSERT_EQ(0, pthread_create(&w.thr, NULL, sender_main, &w));
	rs_msleep(500);
	/* an ACK with a reserved byte set: EPROTO */
	peer_ctl_fill(&self->p, T_ACK, 0, 0, 0, 0);
	peer_ctl_buf(&self->p)[MSG - 1] = 1;
	ASSERT_EQ(0, peer_ctl_send(&self->p));
	pthread_join(w.thr, NULL);
	EXPECT_LT(0, w.ret) TH_LOG("send: %s", strerror(w.err));
	EXPECT_GT((ssize_t)w.len, w.ret);
	EXPECT_EQ(-1, send(self->s, &b, 1, MSG_NOSIGNAL));
	EXPECT_EQ(EPROTO, errno) TH_LOG("send: %s", strerror(errno));
	EXPECT_EQ(-1, send(self->s, &b, 1, MSG_NOSIGNAL));
	EXPECT_EQ(EPIPE, errno) TH_LOG("send: %s", strerror(errno));
	free(w.buf);
}

/*
 * CM private data with a flag the module does not know: a later version
 * may give it a meaning, so the module rejects the REQ rather than guess.
 */
TEST(pdata_flags)
{
	struct sockaddr_in sin;
	struct peer p = {};
	int lfd, s;

	RS_SKIP_TCP("speaks the rdmastream wire protocol");
	lfd = rs_listener(_metadata, &sin);
	EXPECT_NE(0, peer_connect(&p, &sin, 0x80))
		TH_LOG("the module accepted unknown private-data flags");
	EXPECT_EQ(RDMA_CM_EVENT_REJECTED, p.last_event)
		TH_LOG("CM event %s", rdma_event_str(p.last_event));
	/* and nothing reached the accept queue */
	ASSERT_EQ(0, rs_set_nonblock(lfd, true));
	s = accept(lfd, NULL, NULL);
	EXPECT_EQ(-1, s);
	EXPECT_EQ(EAGAIN, errno);
	if (s >= 0)
		close(s);
	peer_close(&p);
	close(lfd);
}

/*
 * The RTU held back: an accepted socket's QP waits in RTR until it comes
 * (docs/design.md, "Who moves the QP"), while its peer, established once
 * it sent the RTU, may already talk. A CANCEL in that window wants a
 * CANCEL_ACK, which the module must hold until its SETUP (a post in RTR
 * fails, and before b0661e9 that reset the new connection). Here the RTU
 * waits for the CANCEL's acknowledgement and half a second more.
 */
FIXTURE(rtu)
{
	int unused;
};

FIXTURE_SETUP(rtu)
{
}

FIXTURE_TEARDOWN(rtu)
{
}

TEST_F_TIMEOUT(rtu, late_cancel, 120)
{
	struct sockaddr_in sin;
	struct peer p = {};
	socklen_t len = sizeof(int);
	int lfd, s, err = -1;

	RS_SKIP_TCP("speaks the rdmastream wire protocol");
	rs_watchdog(120);
	lfd = rs_listener(_metadata, &sin);
	ASSERT_EQ(0, rs_set_timeo(lfd, SO_RCVTIMEO, 10000));
	p.hold_rtu = true;
	p.ack_timeout = 16;
	ASSERT_EQ(0, peer_connect(&p, &sin, 0))
		TH_LOG("peer: no REP (%s)", rdma_event_str(p.last_event));
	/* acknowledged by the module's QP in RTR: its handler has it */
	ASSERT_EQ(0, peer_ctl(&p, T_CANCEL, 0, 0, 1, 0));
	rs_msleep(500);
	ASSERT_EQ(0, peer_rtu(&p))
		TH_LOG("rdma_establish: %s (the module dropped the connection)",
		       strerror(errno));
	s = accept(lfd, NULL, NULL);
	ASSERT_LE(0, s) TH_LOG("accept: %s (the connection was reset)",
			       strerror(errno));
	EXPECT_EQ(0, peer_setup(&p)) TH_LOG("no SETUP from the module");
	EXPECT_NE(NULL, peer_msg(&p, T_CANCEL_ACK, 10000))
		TH_LOG("no CANCEL_ACK after the SETUP");
	EXPECT_EQ(0, getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len));
	EXPECT_EQ(0, err) TH_LOG("SO_ERROR %s", strerror(err));
	close(s);
	peer_close(&p);
	close(lfd);
}

/* ---- half-open connections ---- */

#define HALF_OPEN	4	/* the listener's backlog, all taken */

FIXTURE(halfopen)
{
	int lfd;
	struct peer p[HALF_OPEN];
};

FIXTURE_SETUP(halfopen)
{
	memset(self->p, 0, sizeof(self->p));
	self->lfd = -1;
	rs_watchdog(_metadata->timeout + 30);
}

FIXTURE_TEARDOWN(halfopen)
{
	int i;

	for (i = 0; i < HALF_OPEN; i++)
		peer_close(&self->p[i]);
	if (self->lfd >= 0)
		close(self->lfd);
}

TEST_F_TIMEOUT(halfopen, backlog_without_rings, 120)
{
	struct sockaddr_in sin;
	long mr0, mr1;
	int i, fd, s, err;
	double t0;
	char b = 0;

	RS_SKIP_TCP("the module's half-open connections");
	ASSERT_TRUE(rs_have_cmd("rdma")) TH_LOG("no rdma tool");
	self->lfd = rs_listener_opts(_metadata, &sin, HALF_OPEN, 0);
	mr0 = rs_mr_count();
	ASSERT_GE(mr0, 0) TH_LOG("no MR count for %s", rs.rdmadev);
	for (i = 0; i < HALF_OPEN; i++) {
		self->p[i].half_open = true;
		ASSERT_EQ(0, peer_connect(&self->p[i], &sin, 0))
			TH_LOG("half-open peer %d: %s", i, strerror(errno));
	}
	rs_msleep(1000);	/* the REQs are in, the REPs out */
	mr1 = rs_mr_count();
	rs_info("halfopen: MRs %ld before, %ld with %d half-open peers", mr0,
		mr1, HALF_OPEN);
	/* one MR per peer, its own: the module allocates no rings yet */
	EXPECT_EQ(mr0 + HALF_OPEN, mr1);

	/* The backlog is full of them: refused, and at once. */
	fd = rs_socket(0);
	ASSERT_GE(fd, 0);
	t0 = rs_now();
	EXPECT_EQ(-1, connect(fd, (struct sockaddr *)&sin, sizeof(sin)));
	err = errno;
	EXPECT_EQ(ECONNREFUSED, err) TH_LOG("connect: %s", strerror(err));
	EXPECT_LT(rs_now() - t0, 10);
	close(fd);

	/* They give up (their ids go, with a REJ): room again. */
	for (i = 0; i < HALF_OPEN; i++) {
		peer_close(&self->p[i]);
		memset(&self->p[i], 0, sizeof(self->p[i]));
	}
	t0 = rs_now();
	for (;;) {
		fd = rs_socket(0);
		ASSERT_GE(fd, 0);
		if (!connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
			break;
		err = errno;
		close(fd);
		ASSERT_LT(rs_now() - t0, 30)
			TH_LOG("still refused after the peers left: %s",
			       strerror(err));
		rs_msleep(200);
	}
	rs_info("halfopen: connected %.2f s after the peers left",
		rs_now() - t0);
	s = rs_accept(_metadata, self->lfd);
	ASSERT_EQ(1, send(fd, &b, 1, 0));
	ASSERT_EQ(1, rs_recv_all(s, &b, 1, 0));
	close(s);
	close(fd);
}

/* ---- RING: the peer's stream buffer grows ---- */

enum { T_RING = 9, T_RING_ACK = 10 };
#define PEER_RING_OFF	(512 * 1024)	/* the new buffer, in target */

enum ring_case { RING_FOLLOW, RING_SMALLER, RING_ODD, RING_ACK, RING_UNASKED,
		 RING_SHRINK };

#define RING_F		0x01
#define SHRINK_F	0x04

FIXTURE(ring)
{
	int lfd;
	int s;
	struct peer p;
};

FIXTURE_VARIANT(ring)
{
	enum ring_case what;
};

FIXTURE_VARIANT_ADD(ring, follow) { .what = RING_FOLLOW };
FIXTURE_VARIANT_ADD(ring, smaller) { .what = RING_SMALLER };
FIXTURE_VARIANT_ADD(ring, odd) { .what = RING_ODD };
FIXTURE_VARIANT_ADD(ring, ack) { .what = RING_ACK };
FIXTURE_VARIANT_ADD(ring, unasked) { .what = RING_UNASKED };
FIXTURE_VARIANT_ADD(ring, shrink) { .what = RING_SHRINK };

/* The peer connects with CM flags, and gives its SETUP. */
static void peer_accept_setup(struct __test_metadata *_metadata, int *lfd,
			      int *s, struct peer *p, uint8_t flags)
{
	peer_accept_flags(_metadata, lfd, s, p, flags);
	if (*s >= 0) {
		ASSERT_EQ(0, peer_send_setup(p));
		ASSERT_EQ(0, rs_set_timeo(*s, SO_RCVTIMEO, 3000));
	}
}

/* With RING unless unasked; shrink asks for a smaller RING too. */
FIXTURE_SETUP(ring)
{
	peer_accept_setup(_metadata, &self->lfd, &self->s, &self->p,
			  variant->what == RING_UNASKED ? 0 :
			  variant->what == RING_SHRINK ? RING_F | SHRINK_F :
			  RING_F);
}

FIXTURE_TEARDOWN(ring)
{
	peer_release(self->lfd, self->s, &self->p);
}

/* The module's next WRITE WITH IMMEDIATE into our buffer: its immediate. */
static int64_t peer_next_imm(struct peer *p)
{
	struct ibv_wc wc;

	for (;;) {
		if (cq_wait(p, &wc, 10000) != IBV_WC_SUCCESS)
			return -1;
		if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM)
			return ntohl(wc.imm_data);
	}
}

/* ...and its length. */
static int ring_write_len(struct peer *p)
{
	int64_t imm = peer_next_imm(p);

	return imm < 0 ? -1 : (int)(imm & 0xffffff);
}

/* A RING: size bytes of target from PEER_RING_OFF on. */
static int ring_send(struct peer *p, uint32_t size)
{
	return peer_ctl_mem(p, T_RING, size,
			    (uintptr_t)p->target + PEER_RING_OFF, 0, 0);
}

/* The module writes a new buffer of size bytes after its RING_ACK. */
static void ring_follow(struct __test_metadata *_metadata, int s,
			struct peer *p, uint32_t size)
{
	char a[4096], b[4096];
	const unsigned char *m;
	struct rdmastream_info info;
	socklen_t len = sizeof(info);
	char *nb = p->target + PEER_RING_OFF;

	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	ASSERT_EQ((ssize_t)sizeof(a), send(s, a, sizeof(a), 0));
	ASSERT_EQ((int)sizeof(a), ring_write_len(p));
	ASSERT_EQ(0, memcmp(p->target, a, sizeof(a)));
	ASSERT_EQ(0, ring_send(p, size));
	m = peer_msg(p, T_RING_ACK, 10000);
	ASSERT_NE(NULL, m) TH_LOG("no RING_ACK");
	EXPECT_EQ(sizeof(a), get64(m, 24)) TH_LOG("RING_ACK names the wrong byte");
	ASSERT_EQ(0, getsockopt(s, SOL_RDMASTREAM, RDMASTREAM_INFO, &info,
				&len));
	EXPECT_EQ(size, info.rsi_peer_ring);
	/* byte 4096 of the stream: offset 4096 of the new buffer */
	ASSERT_EQ((ssize_t)sizeof(b), send(s, b, sizeof(b), 0));
	ASSERT_EQ((int)sizeof(b), ring_write_len(p));
	EXPECT_EQ(0, memcmp(nb + sizeof(a), b, sizeof(b)))
		TH_LOG("the bytes after RING_ACK are not in the new buffer");
	EXPECT_EQ(0, memcmp(p->target, a, sizeof(a)));
	EXPECT_EQ(0, p->target[sizeof(a)]) TH_LOG("the old buffer was written");
	EXPECT_EQ(0, nb[0]);
}

/* Indirect bytes the module writes to us within ms; other messages pass. */
static uint32_t ring_written_within(struct peer *p, int ms)
{
	double end = rs_now() + ms / 1000.0;
	uint32_t total = 0;
	struct ibv_wc wc;

	while (rs_now() < end)
		if (cq_wait(p, &wc, 50) == IBV_WC_SUCCESS &&
		    wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM)
			total += ntohl(wc.imm_data) & 0xffffff;
	return total;
}

/*
 * A RING smaller than the bytes the module has written and we have not
 * consumed (40 KiB into 32 KiB): it writes nothing until our window
 * update makes room, and then at the new buffer's offsets (stream byte
 * 40 KiB at offset 8 KiB).
 */
static void ring_shrink(struct __test_metadata *_metadata, int s,
			struct peer *p)
{
	static char a[40 * 1024];
	char b[4096], *nb = p->target + PEER_RING_OFF;
	struct rdmastream_info info;
	socklen_t len = sizeof(info);
	const unsigned char *m;
	uint64_t cons = htobe64(sizeof(a));
	size_t got = 0;
	int n;

	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	ASSERT_EQ((ssize_t)sizeof(a), send(s, a, sizeof(a), 0));
	while (got < sizeof(a)) {
		n = ring_write_len(p);
		ASSERT_GE(n, 0) TH_LOG("%zu of %zu bytes came", got, sizeof(a));
		got += n;
	}
	ASSERT_EQ(0, memcmp(p->target, a, sizeof(a)));
	ASSERT_EQ(0, ring_send(p, 32 * 1024));
	m = peer_msg(p, T_RING_ACK, 10000);
	ASSERT_NE(NULL, m) TH_LOG("no RING_ACK");
	EXPECT_EQ(sizeof(a), get64(m, 24)) TH_LOG("RING_ACK names the wrong byte");
	ASSERT_EQ(0, getsockopt(s, SOL_RDMASTREAM, RDMASTREAM_INFO, &info,
				&len));
	EXPECT_EQ(32 * 1024, info.rsi_peer_ring);
	EXPECT_EQ(0, info.rsi_errors);
	/* 40 KiB unconsumed: no room in 32 KiB, whatever u32 says */
	ASSERT_EQ((ssize_t)sizeof(b), send(s, b, sizeof(b), 0));
	EXPECT_EQ(0, ring_written_within(p, 500))
		TH_LOG("written with no room in the smaller buffer");
	EXPECT_EQ(0, nb[0]);
	/* we read all 40 KiB: the whole new buffer is free */
	peer_ctl_fill(p, T_ACK, 0, 0, 0, 0);
	memcpy(peer_ctl_buf(p) + 8, &cons, 8);
	ASSERT_EQ(0, peer_ctl_send(p));
	EXPECT_EQ((int)sizeof(b), ring_write_len(p));
	EXPECT_EQ(0, memcmp(nb + 8192, b, sizeof(b)))
		TH_LOG("byte 40 KiB is not at 8 KiB of the new buffer");
	EXPECT_EQ(0, nb[0]);
	EXPECT_EQ(0, p->target[sizeof(a)]) TH_LOG("the old buffer was written");
}

TEST_F(ring, wire)
{
	char buf[16];
	ssize_t n;

	RS_SKIP_TCP("speaks the rdmastream wire protocol");
	switch (variant->what) {
	case RING_FOLLOW:
		EXPECT_EQ(RING_F, self->p.rep_flags);
		ring_follow(_metadata, self->s, &self->p, 128 * 1024);
		return;
	case RING_SHRINK:
		/* smaller than the SETUP's buffer, as both ends agreed */
		EXPECT_EQ(RING_F | SHRINK_F, self->p.rep_flags);
		ring_shrink(_metadata, self->s, &self->p);
		return;
	case RING_SMALLER:
		/* ...where only RING was agreed */
		ASSERT_EQ(0, ring_send(&self->p, 32 * 1024));
		break;
	case RING_ODD:
		ASSERT_EQ(0, ring_send(&self->p, 96 * 1024));
		break;
	case RING_ACK:
		peer_ctl_fill(&self->p, T_RING_ACK, 0, 0, 0, 0);
		ASSERT_EQ(0, peer_ctl_send(&self->p));
		break;
	case RING_UNASKED:
		/* the REP offers RING only to a REQ that did: an older peer
		 * refuses any flag
		 */
		EXPECT_EQ(0, self->p.rep_flags);
		ASSERT_EQ(0, ring_send(&self->p, 128 * 1024));
		break;
	}
	n = recv(self->s, buf, sizeof(buf), 0);
	EXPECT_EQ(-1, n);
	EXPECT_EQ(EPROTO, errno) TH_LOG("recv: %s", strerror(errno));
}

/* ---- numbered writes ---- */

#define WSEQ_F		0x02
#define IMM_PARITY	(1U << 31)

enum wseq_case { WSEQ_NUMBERED, WSEQ_TWICE, WSEQ_UNASKED };

FIXTURE(wseq)
{
	int lfd;
	int s;
	struct peer p;
};

FIXTURE_VARIANT(wseq)
{
	enum wseq_case what;
};

FIXTURE_VARIANT_ADD(wseq, numbered) { .what = WSEQ_NUMBERED };
FIXTURE_VARIANT_ADD(wseq, twice) { .what = WSEQ_TWICE };
FIXTURE_VARIANT_ADD(wseq, unasked) { .what = WSEQ_UNASKED };

FIXTURE_SETUP(wseq)
{
	peer_accept_setup(_metadata, &self->lfd, &self->s, &self->p,
			  variant->what == WSEQ_UNASKED ? 0 : WSEQ_F);
}

FIXTURE_TEARDOWN(wseq)
{
	peer_release(self->lfd, self->s, &self->p);
}

/* "hello" at off of the module's stream buffer, with immediate imm. */
static int wseq_write(struct peer *p, uint32_t off, uint32_t imm)
{
	struct ibv_wc wc;

	if (peer_post(p, IBV_WR_RDMA_WRITE_WITH_IMM, p->addr + off, p->rkey,
		      5, imm))
		return -1;
	return cq_wait(p, &wc, 10000);
}

static void wseq_numbered(struct __test_metadata *_metadata, int s,
			  struct peer *p)
{
	char buf[16];
	int64_t imm;
	int i;

	EXPECT_EQ(WSEQ_F, p->rep_flags);
	ASSERT_EQ(IBV_WC_SUCCESS, wseq_write(p, 0, 5));
	ASSERT_EQ(IBV_WC_SUCCESS, wseq_write(p, 5, 5 | IMM_PARITY));
	ASSERT_EQ(IBV_WC_SUCCESS, wseq_write(p, 10, 5));
	ASSERT_EQ(15, rs_recv_all(s, buf, 15, 0))
		TH_LOG("recv: %s", strerror(errno));
	EXPECT_EQ(0, memcmp(buf, "hellohellohello", 15));
	/* one send, one write: their parity bits alternate from 0 */
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(1, send(s, "x", 1, 0));
		imm = peer_next_imm(p);
		ASSERT_LE(0, imm) TH_LOG("no write %d from the module", i);
		EXPECT_EQ(1, imm & 0xffffff);
		EXPECT_EQ(i & 1 ? IMM_PARITY : 0, imm & IMM_PARITY)
			TH_LOG("write %d: immediate %#llx", i, (long long)imm);
	}
}

/* A write run twice: the second copy is refused, never read. */
static void wseq_twice(struct __test_metadata *_metadata, int s,
		       struct peer *p)
{
	char buf[16];
	ssize_t n;

	EXPECT_EQ(WSEQ_F, p->rep_flags);
	ASSERT_EQ(IBV_WC_SUCCESS, wseq_write(p, 0, 5));
	ASSERT_EQ(IBV_WC_SUCCESS, wseq_write(p, 0, 5));
	n = recv(s, buf, sizeof(buf), 0);
	if (n == 5) {
		EXPECT_EQ(0, memcmp(buf, "hello", 5));
		n = recv(s, buf, sizeof(buf), 0);
	}
	EXPECT_EQ(-1, n) TH_LOG("recv returned %zd bytes", n);
	EXPECT_EQ(EPROTO, errno) TH_LOG("recv: %s", strerror(errno));
}

TEST_F(wseq, wire)
{
	char buf[16];
	ssize_t n;

	RS_SKIP_TCP("speaks the rdmastream wire protocol");
	switch (variant->what) {
	case WSEQ_NUMBERED:
		wseq_numbered(_metadata, self->s, &self->p);
		return;
	case WSEQ_TWICE:
		wseq_twice(_metadata, self->s, &self->p);
		return;
	case WSEQ_UNASKED:
		EXPECT_EQ(0, self->p.rep_flags);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  wseq_write(&self->p, 0, 5 | IMM_PARITY));
		n = recv(self->s, buf, sizeof(buf), 0);
		EXPECT_EQ(-1, n) TH_LOG("recv returned %zd bytes", n);
		EXPECT_EQ(EPROTO, errno) TH_LOG("recv: %s", strerror(errno));
		return;
	}
}

TEST_HARNESS_MAIN
