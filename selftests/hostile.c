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
 * Each attack that fails remotely leaves the module's socket with an error.
 *
 * Direct transfers: a blocking recv() with a large buffer advertises it.
 * after:      the peer writes into the ADVERT, says so without
 *             invalidating it, and once recv() has returned the bytes
 *             writes again: that write must fail, the buffer keep the data.
 * cancel:     recv() times out; the peer answers the CANCEL properly and
 *             then writes into the old ADVERT: refused, buffer untouched.
 * silent:     as cancel, but the peer never answers the CANCEL: recv()
 *             still returns (the module gives up on the peer), and the
 *             late write cannot reach the buffer.
 * bogus:      a DIRECT naming an ADVERT that does not exist: EPROTO.
 *
 * Half-open: peers that send their REQ and never complete the handshake
 * (they never read the REP, so no RTU goes out; the CM gives up after
 * tens of seconds) fill the listener's backlog but hold no ring memory
 * (no MR of the module's), a further connect is refused at once, and
 * once they are gone the listener takes connections again.
 */
#include "rs_common.h"

#include <rdma/rdma_cma.h>
#include <infiniband/verbs.h>

#define SLOTS		64	/* RS_RQ_DEPTH: both sides post this many */
#define MSG		64
#define WIRE_VERSION	2

enum attack { LEGIT, PAST_END, BEFORE, READ, BAD_RKEY, OVERRUN,
	      ADV_AFTER, ADV_CANCEL, ADV_SILENT, ADV_BOGUS };

/* Control message types and offsets (docs/wire-format.md). */
enum { T_SETUP = 1, T_ADVERT = 5, T_DIRECT = 6, T_CANCEL = 7,
       T_CANCEL_ACK = 8 };
#define ADV_LEN		(256 * 1024)	/* above the default threshold */

struct peer {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[SLOTS * MSG + 4096];
	uint64_t addr;		/* the module's stream buffer */
	uint32_t rkey, size;
	uint64_t adv_addr;	/* the last ADVERT */
	uint32_t adv_rkey, adv_len, adv_id;
	bool half_open;		/* send the REQ only, never complete */
};

static int cm_wait(struct peer *p, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	int ok;

	if (rdma_get_cm_event(p->ch, &ev))
		return -1;
	ok = ev->event == want;
	if (!ok)
		fprintf(stderr, "# cm event %s, wanted %s\n",
			rdma_event_str(ev->event), rdma_event_str(want));
	rdma_ack_cm_event(ev);
	return ok ? 0 : -1;
}

/* Poll one completion, up to ms; returns its status or -1. */
static int cq_wait(struct peer *p, struct ibv_wc *wc, int ms)
{
	double end = rs_now() + ms / 1000.0;
	int n;

	do {
		n = ibv_poll_cq(p->cq, 1, wc);
		if (n > 0)
			return wc->status;
		if (n < 0)
			return -1;
		rs_msleep(1);
	} while (rs_now() < end);
	return -1;
}

static int peer_connect(struct peer *p, const struct sockaddr_in *sin)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 8, .max_recv_wr = SLOTS,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	/* private data: version 2, 64 receive slots, 64 KiB (informative) */
	uint8_t pdata[8] = { WIRE_VERSION, 0, 0, SLOTS, 0, 1, 0, 0 };
	struct rdma_conn_param cp = {
		.private_data = pdata, .private_data_len = sizeof(pdata),
		.retry_count = 6, .rnr_retry_count = 7,
		.initiator_depth = 1, .responder_resources = 1,
	};
	struct ibv_recv_wr rwr, *bad;
	struct ibv_sge sge;
	int i;

	p->ch = rdma_create_event_channel();
	if (!p->ch || rdma_create_id(p->ch, &p->id, NULL, RDMA_PS_TCP))
		return -1;
	if (rdma_resolve_addr(p->id, NULL, (struct sockaddr *)sin, 2000) ||
	    cm_wait(p, RDMA_CM_EVENT_ADDR_RESOLVED) ||
	    rdma_resolve_route(p->id, 2000) ||
	    cm_wait(p, RDMA_CM_EVENT_ROUTE_RESOLVED))
		return -1;
	p->pd = ibv_alloc_pd(p->id->verbs);
	p->cq = ibv_create_cq(p->id->verbs, SLOTS + 16, NULL, NULL, 0);
	if (!p->pd || !p->cq)
		return -1;
	qa.send_cq = p->cq;
	qa.recv_cq = p->cq;
	if (rdma_create_qp(p->id, p->pd, &qa))
		return -1;
	p->mr = ibv_reg_mr(p->pd, p->buf, sizeof(p->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	if (!p->mr)
		return -1;
	for (i = 0; i < SLOTS; i++) {
		sge.addr = (uintptr_t)p->buf + i * MSG;
		sge.length = MSG;
		sge.lkey = p->mr->lkey;
		rwr = (struct ibv_recv_wr){ .wr_id = i, .sg_list = &sge,
					    .num_sge = 1 };
		if (ibv_post_recv(p->id->qp, &rwr, &bad))
			return -1;
	}
	if (rdma_connect(p->id, &cp) ||
	    (!p->half_open && cm_wait(p, RDMA_CM_EVENT_ESTABLISHED)))
		return -1;
	return 0;
}

/* The module's first message is SETUP: where its stream buffer is. */
static int peer_setup(struct peer *p)
{
	const unsigned char *m;
	struct ibv_wc wc;
	uint32_t be32;
	uint64_t be64;

	if (cq_wait(p, &wc, 10000) != IBV_WC_SUCCESS ||
	    wc.opcode != IBV_WC_RECV)
		return -1;
	m = (const unsigned char *)p->buf + wc.wr_id * MSG;
	if (m[0] != 1 || m[1] != WIRE_VERSION)
		return -1;
	memcpy(&be32, m + 4, 4);
	p->size = ntohl(be32);
	memcpy(&be64, m + 16, 8);
	p->addr = be64toh(be64);
	memcpy(&be32, m + 32, 4);
	p->rkey = ntohl(be32);
	return 0;
}

static int peer_post(struct peer *p, enum ibv_wr_opcode op, uint64_t addr,
		     uint32_t rkey, uint32_t len, uint32_t imm)
{
	char *src = p->buf + SLOTS * MSG;
	struct ibv_sge sge = {
		.addr = (uintptr_t)src, .length = len, .lkey = p->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = len ? 1 : 0, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = addr, .rkey = rkey },
	}, *bad;

	/* a READ lands here: start from zeroes to see whether it did */
	if (op == IBV_WR_RDMA_READ)
		memset(src, 0, 16);
	else
		memcpy(src, "hello", 5);
	wr.imm_data = htonl(imm);
	return ibv_post_send(p->id->qp, &wr, &bad);
}

static uint32_t get32(const unsigned char *m, int off)
{
	uint32_t v;

	memcpy(&v, m + off, 4);
	return ntohl(v);
}

static uint64_t get64(const unsigned char *m, int off)
{
	uint64_t v;

	memcpy(&v, m + off, 8);
	return be64toh(v);
}

/* Wait for a message of the given type from the module, up to ms. */
static const unsigned char *peer_msg(struct peer *p, int type, int ms)
{
	const unsigned char *m;
	struct ibv_wc wc;

	for (;;) {
		if (cq_wait(p, &wc, ms) != IBV_WC_SUCCESS)
			return NULL;
		if (wc.opcode != IBV_WC_RECV)
			continue;
		m = (const unsigned char *)p->buf + wc.wr_id * MSG;
		if (m[0] == type)
			return m;
	}
}

static int peer_advert(struct peer *p)
{
	const unsigned char *m = peer_msg(p, T_ADVERT, 10000);

	if (!m)
		return -1;
	p->adv_len = get32(m, 4);
	p->adv_addr = get64(m, 16);
	p->adv_rkey = get32(m, 32);
	p->adv_id = get32(m, 40);
	return 0;
}

/* Send a control message: type, length, stream offset, ADVERT id, flags. */
static int peer_ctl(struct peer *p, int type, uint32_t len, uint64_t seq,
		    uint32_t id, uint32_t flags)
{
	unsigned char *m = (unsigned char *)p->buf + SLOTS * MSG + 2048;
	struct ibv_sge sge = {
		.addr = (uintptr_t)m, .length = MSG, .lkey = p->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;
	uint32_t v;

	memset(m, 0, MSG);
	m[0] = type;
	m[1] = WIRE_VERSION;
	v = htonl(len);
	memcpy(m + 4, &v, 4);
	seq = htobe64(seq);
	memcpy(m + 24, &seq, 8);
	v = htonl(id);
	memcpy(m + 40, &v, 4);
	v = htonl(flags);
	memcpy(m + 44, &v, 4);
	if (ibv_post_send(p->id->qp, &wr, &bad))
		return -1;
	return cq_wait(p, &wc, 10000) == IBV_WC_SUCCESS ? 0 : -1;
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

/* Write 5 bytes into the ADVERT; returns the completion status. */
static int peer_write_adv(struct peer *p)
{
	struct ibv_wc wc;

	if (peer_post(p, IBV_WR_RDMA_WRITE, p->adv_addr, p->adv_rkey, 5, 0))
		return -1;
	return cq_wait(p, &wc, 20000);
}

static void peer_close(struct peer *p)
{
	if (p->id && p->id->qp)
		rdma_disconnect(p->id);
	if (p->id && p->id->qp)
		rdma_destroy_qp(p->id);
	if (p->mr)
		ibv_dereg_mr(p->mr);
	if (p->cq)
		ibv_destroy_cq(p->cq);
	if (p->pd)
		ibv_dealloc_pd(p->pd);
	if (p->id)
		rdma_destroy_id(p->id);
	if (p->ch)
		rdma_destroy_event_channel(p->ch);
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

/* Accept the hostile peer's connection; it has the SETUP by then. */
static void peer_accept(struct __test_metadata *_metadata, int *lfd,
			  int *s, struct peer *p)
{
	struct sockaddr_in sin;

	memset(p, 0, sizeof(*p));
	*lfd = -1;
	*s = -1;
	if (rs.tcp)
		return;
	rs_watchdog(120);
	*lfd = rs_listener(_metadata, &sin);
	ASSERT_EQ(0, peer_connect(p, &sin))
		TH_LOG("hostile peer could not connect: %s", strerror(errno));
	*s = rs_accept(_metadata, *lfd);
	ASSERT_EQ(0, peer_setup(p)) TH_LOG("no SETUP from the module");
	ASSERT_GE(p->size, 16384U);
	ASSERT_EQ(0, rs_set_timeo(*s, SO_RCVTIMEO, 10000));
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

FIXTURE_SETUP(hostile_adv)
{
	peer_accept(_metadata, &self->lfd, &self->s, &self->p);
}

FIXTURE_TEARDOWN(hostile_adv)
{
	peer_release(self->lfd, self->s, &self->p);
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
		/* refused, or never answered until the peer gives up */
		st = cq_wait(p, &wc, 30000);
		EXPECT_NE(IBV_WC_SUCCESS, st);
		EXPECT_NE(0, memcmp(p->buf + SLOTS * MSG, "hello", 5))
			TH_LOG("the stream buffer was readable");
		return;
	case BAD_RKEY:
		ASSERT_EQ(0, peer_post(p, IBV_WR_RDMA_WRITE, p->addr,
				       p->rkey ^ 0x5a5a00, 5, 0));
		break;
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
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, st)
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
TEST_F_TIMEOUT(hostile_adv, advert, 120)
{
	struct peer *p = &self->p;
	struct reader r = { .fd = self->s };
	struct rdmastream_info info;
	socklen_t len = sizeof(info);
	int st;

	RS_SKIP_TCP("speaks the rdmastream wire protocol");
	r.buf = mmap(NULL, ADV_LEN, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, r.buf);
	memset(r.buf, 'A', ADV_LEN);
	if (variant->attack != ADV_AFTER && variant->attack != ADV_BOGUS)
		ASSERT_EQ(0, rs_set_timeo(self->s, SO_RCVTIMEO, 500));
	ASSERT_EQ(0, pthread_create(&r.thr, NULL, reader_main, &r));
	ASSERT_EQ(0, peer_advert(p)) TH_LOG("no ADVERT from the module");
	EXPECT_GE(p->adv_len, 32768U);
	switch (variant->attack) {
	case ADV_AFTER:
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
	if (variant->attack == ADV_AFTER) {
		ASSERT_EQ(0, getsockopt(self->s, SOL_RDMASTREAM,
					RDMASTREAM_INFO, &info, &len));
		EXPECT_GE(info.rsi_local_invalidates, 1);
		EXPECT_EQ(5, info.rsi_direct_bytes_received);
	}
	/* the late write: refused remotely, or the QP is gone already */
	st = peer_write_adv(p);
	EXPECT_NE(IBV_WC_SUCCESS, st);
	if (variant->attack == ADV_AFTER)
		EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, st);
	EXPECT_EQ(0, memcmp(r.buf, variant->attack == ADV_AFTER ?
			    "BBBBB" : "AAAAA", 5))
		TH_LOG("the peer wrote into a returned buffer");
	munmap(r.buf, ADV_LEN);
}

/* ---- half-open connections ---- */

/* The MRs of RS_RDMADEV from `rdma res show`, or -1. */
static long mr_count(void)
{
	char line[1024], dev[64], *p;
	long n = -1;
	FILE *f;

	snprintf(dev, sizeof(dev), " %s: ", rs.rdmadev);
	f = popen("rdma res show 2>/dev/null", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, dev))
			continue;
		p = strstr(line, " mr ");
		if (p)
			n = strtol(p + 4, NULL, 10);
	}
	pclose(f);
	return n;
}

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
	if (!rs_have_cmd("rdma"))
		SKIP(return, "no rdma tool");
	self->lfd = rs_listener_opts(_metadata, &sin, HALF_OPEN, 0);
	mr0 = mr_count();
	ASSERT_GE(mr0, 0) TH_LOG("no MR count for %s", rs.rdmadev);
	for (i = 0; i < HALF_OPEN; i++) {
		self->p[i].half_open = true;
		ASSERT_EQ(0, peer_connect(&self->p[i], &sin))
			TH_LOG("half-open peer %d: %s", i, strerror(errno));
	}
	rs_msleep(1000);	/* the REQs are in, the REPs out */
	mr1 = mr_count();
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

TEST_HARNESS_MAIN
