/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A user-space rdma_cm/verbs peer that speaks enough of the wire protocol
 * (docs/wire-format.md) to be accepted by an AF_RDMASTREAM listener and
 * then misbehave on purpose: hostile.c attacks the module's memory with
 * it, fence.c stalls the module's transfers with it.
 */
#ifndef RS_PEER_H
#define RS_PEER_H

#include "rs_common.h"

#include <rdma/rdma_cma.h>
#include <infiniband/verbs.h>

#define SLOTS		64	/* RS_RQ_DEPTH: both sides post this many */
#define MSG		64
#define WIRE_VERSION	2

/* Control message types and offsets (docs/wire-format.md). */
enum { T_SETUP = 1, T_ACK = 2, T_ADVERT = 5, T_DIRECT = 6, T_CANCEL = 7,
       T_CANCEL_ACK = 8 };
#define ADV_LEN		(256 * 1024)	/* above the default threshold */
#define PEER_ADV_MAX	(1024 * 1024)	/* the peer's own ADVERT target */
#define PEER_BIG	16384	/* the peer's source of big writes */

struct peer {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[SLOTS * MSG + 4096 + PEER_BIG];
	uint64_t addr;		/* the module's stream buffer */
	uint32_t rkey, size;
	uint64_t adv_addr;	/* the last ADVERT */
	uint32_t adv_rkey, adv_len, adv_id;
	int last_event;		/* of the CM, as cm_wait() saw it */
	int rep_flags;		/* flags of the module's REP, -1: none seen */
	struct ibv_qp *qp;	/* rdma_cm's, or our own with hold_rtu */
	bool half_open;		/* send the REQ only, never complete */
	/*
	 * our own QP: peer_connect() returns at the REP, in RTS, and the
	 * RTU waits for peer_rtu()
	 */
	bool hold_rtu;
	unsigned int nrecv;	/* receives to post: 0 means SLOTS */
	bool rnr7;		/* ask the module to retry RNR for ever */
	uint8_t ack_timeout;	/* our QP's ACK timeout exponent (4.096 us
				 * << n), so that a write the module's QP
				 * never answers fails soon; 0: rdma_cm's */
	char *target;		/* our memory for the module to write into */
	struct ibv_mr *tmr;
};

static inline int cm_wait(struct peer *p, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	int ok;

	if (rdma_get_cm_event(p->ch, &ev))
		return -1;
	p->last_event = ev->event;
	if ((ev->event == RDMA_CM_EVENT_ESTABLISHED ||
	     ev->event == RDMA_CM_EVENT_CONNECT_RESPONSE) &&
	    ev->param.conn.private_data_len >= 2)
		p->rep_flags =
			((const uint8_t *)ev->param.conn.private_data)[1];
	ok = ev->event == want;
	if (!ok)
		fprintf(stderr, "# cm event %s, wanted %s\n",
			rdma_event_str(ev->event), rdma_event_str(want));
	rdma_ack_cm_event(ev);
	return ok ? 0 : -1;
}

/* Poll one completion, up to ms; returns its status or -1. */
static inline int cq_wait(struct peer *p, struct ibv_wc *wc, int ms)
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

/* hold_rtu: move our own QP as rdma_cm would move its own */
static inline int peer_qp_move(struct peer *p, enum ibv_qp_state state)
{
	struct ibv_qp_attr a = { .qp_state = state };
	int mask;

	if (rdma_init_qp_attr(p->id, &a, &mask))
		return -1;
	return ibv_modify_qp(p->qp, &a, mask);
}

static inline int peer_connect(struct peer *p, const struct sockaddr_in *sin,
			uint8_t pdata_flags)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 8, .max_recv_wr = SLOTS,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	/* private data: version 2, 64 receive slots, 64 KiB (informative) */
	uint8_t pdata[8] = { WIRE_VERSION, pdata_flags, 0, SLOTS, 0, 1, 0, 0 };
	struct rdma_conn_param cp = {
		.private_data = pdata, .private_data_len = sizeof(pdata),
		.retry_count = 6, .rnr_retry_count = p->rnr7 ? 7 : 6,
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
	if (p->ack_timeout &&
	    rdma_set_option(p->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			    &p->ack_timeout, sizeof(p->ack_timeout)))
		return -1;
	p->pd = ibv_alloc_pd(p->id->verbs);
	p->cq = ibv_create_cq(p->id->verbs, SLOTS + 16, NULL, NULL, 0);
	if (!p->pd || !p->cq)
		return -1;
	qa.send_cq = p->cq;
	qa.recv_cq = p->cq;
	if (p->hold_rtu) {
		p->qp = ibv_create_qp(p->pd, &qa);
		if (!p->qp || peer_qp_move(p, IBV_QPS_INIT))
			return -1;
		cp.qp_num = p->qp->qp_num;
	} else {
		if (rdma_create_qp(p->id, p->pd, &qa))
			return -1;
		p->qp = p->id->qp;
	}
	p->mr = ibv_reg_mr(p->pd, p->buf, sizeof(p->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	if (!p->mr)
		return -1;
	for (i = 0; i < (int)(p->nrecv ? p->nrecv : SLOTS); i++) {
		sge.addr = (uintptr_t)p->buf + i * MSG;
		sge.length = MSG;
		sge.lkey = p->mr->lkey;
		rwr = (struct ibv_recv_wr){ .wr_id = i, .sg_list = &sge,
					    .num_sge = 1 };
		if (ibv_post_recv(p->qp, &rwr, &bad))
			return -1;
	}
	p->rep_flags = -1;
	if (rdma_connect(p->id, &cp))
		return -1;
	/* INIT again: its access flags come from the REP */
	if (p->hold_rtu)
		return cm_wait(p, RDMA_CM_EVENT_CONNECT_RESPONSE) ||
		       peer_qp_move(p, IBV_QPS_INIT) ||
		       peer_qp_move(p, IBV_QPS_RTR) ||
		       peer_qp_move(p, IBV_QPS_RTS) ? -1 : 0;
	if (!p->half_open && cm_wait(p, RDMA_CM_EVENT_ESTABLISHED))
		return -1;
	return 0;
}

/* hold_rtu: the RTU at last; the module's side becomes established. */
static inline int peer_rtu(struct peer *p)
{
	return rdma_establish(p->id);
}

/* The module's first message is SETUP: where its stream buffer is. */
static inline int peer_setup(struct peer *p)
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

static inline int peer_post(struct peer *p, enum ibv_wr_opcode op, uint64_t addr,
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
	return ibv_post_send(p->qp, &wr, &bad);
}

static inline uint32_t get32(const unsigned char *m, int off)
{
	uint32_t v;

	memcpy(&v, m + off, 4);
	return ntohl(v);
}

static inline uint64_t get64(const unsigned char *m, int off)
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

static inline int peer_advert(struct peer *p)
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

/* Where control messages are built before they are sent. */
static unsigned char *peer_ctl_buf(struct peer *p)
{
	return (unsigned char *)p->buf + SLOTS * MSG + 2048;
}

/* Send the control message in peer_ctl_buf(). */
static inline int peer_ctl_send(struct peer *p)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)peer_ctl_buf(p), .length = MSG,
		.lkey = p->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;

	if (ibv_post_send(p->qp, &wr, &bad))
		return -1;
	return cq_wait(p, &wc, 10000) == IBV_WC_SUCCESS ? 0 : -1;
}

/* Build a control message: type, length, stream offset, ADVERT id, flags. */
static inline void peer_ctl_fill(struct peer *p, int type, uint32_t len,
			  uint64_t seq, uint32_t id, uint32_t flags)
{
	unsigned char *m = peer_ctl_buf(p);
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
}

static inline int peer_ctl(struct peer *p, int type, uint32_t len, uint64_t seq,
		    uint32_t id, uint32_t flags)
{
	peer_ctl_fill(p, type, len, seq, id, flags);
	return peer_ctl_send(p);
}

/* Write len bytes of 'x' at off in the stream buffer, claiming imm. */
static inline int peer_write_big(struct peer *p, uint32_t off, uint32_t len,
			  uint32_t imm)
{
	char *src = p->buf + SLOTS * MSG + 4096;
	struct ibv_sge sge = {
		.addr = (uintptr_t)src, .length = len, .lkey = p->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = p->addr + off, .rkey = p->rkey },
	}, *bad;
	struct ibv_wc wc;

	memset(src, 'x', len);
	wr.imm_data = htonl(imm);
	if (ibv_post_send(p->qp, &wr, &bad))
		return -1;
	return cq_wait(p, &wc, 10000);
}

/* Write 5 bytes into the ADVERT; returns the completion status. */
static inline int peer_write_adv(struct peer *p)
{
	struct ibv_wc wc;

	if (peer_post(p, IBV_WR_RDMA_WRITE, p->adv_addr, p->adv_rkey, 5, 0))
		return -1;
	return cq_wait(p, &wc, 20000);
}

static inline void peer_close(struct peer *p)
{
	if (p->id && p->qp)
		rdma_disconnect(p->id);
	if (p->id && p->id->qp)
		rdma_destroy_qp(p->id);
	else if (p->qp)
		ibv_destroy_qp(p->qp);
	if (p->mr)
		ibv_dereg_mr(p->mr);
	if (p->tmr)
		ibv_dereg_mr(p->tmr);
	free(p->target);
	if (p->cq)
		ibv_destroy_cq(p->cq);
	if (p->pd)
		ibv_dealloc_pd(p->pd);
	if (p->id)
		rdma_destroy_id(p->id);
	if (p->ch)
		rdma_destroy_event_channel(p->ch);
}

/* Our own memory for the module to write into: ring and ADVERT target. */
static inline int peer_target(struct peer *p)
{
	if (p->target)
		return 0;
	p->target = calloc(1, PEER_ADV_MAX);
	if (!p->target)
		return -1;
	p->tmr = ibv_reg_mr(p->pd, p->target, PEER_ADV_MAX,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	return p->tmr ? 0 : -1;
}

/* Send a control message with an address, rkey, phase and id. */
static inline int peer_ctl_mem(struct peer *p, int type, uint32_t len,
			       uint64_t addr, uint32_t phase, uint32_t id)
{
	unsigned char *m = peer_ctl_buf(p);
	uint64_t v64;
	uint32_t v;

	peer_ctl_fill(p, type, len, 0, id, 0);
	v64 = htobe64(addr);
	memcpy(m + 16, &v64, 8);
	v = htonl(p->tmr->rkey);
	memcpy(m + 32, &v, 4);
	v = htonl(phase);
	memcpy(m + 36, &v, 4);
	return peer_ctl_send(p);
}

/* Tell the module where our stream buffer is, so that it may send. */
static inline int peer_send_setup(struct peer *p)
{
	if (peer_target(p))
		return -1;
	return peer_ctl_mem(p, T_SETUP, 65536, (uintptr_t)p->target, 0, 0);
}

/*
 * Advertise a buffer of len bytes (<= PEER_ADV_MAX) of our own, as a
 * receiver blocked in recv() would: the module may write into it. Phase
 * 1 is the first direct phase.
 */
static inline int peer_send_advert(struct peer *p, uint32_t len)
{
	if (peer_target(p))
		return -1;
	return peer_ctl_mem(p, T_ADVERT, len, (uintptr_t)p->target, 1, 1);
}

/*
 * Answer every SEND with receiver-not-ready, each time making the sender
 * wait min_rnr_timer (31: 491 ms, the longest) before it tries again:
 * the receives posted at connect time are all the module ever gets.
 */
static inline int peer_slow_rnr(struct peer *p)
{
	struct ibv_qp_attr a = { .min_rnr_timer = 31 };

	return ibv_modify_qp(p->qp, &a, IBV_QP_MIN_RNR_TIMER);
}

#endif /* RS_PEER_H */
