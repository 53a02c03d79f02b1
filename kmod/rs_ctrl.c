// SPDX-License-Identifier: GPL-2.0
/*
 * Control messages: small SENDs, inline where the QP allows, that carry
 * the stream buffer description (SETUP), window and credit updates (ACK)
 * and the end of the stream (FIN). Every message returns the receive
 * slots we owe and the bytes we have consumed.
 */
#include "rs.h"

static void rs_ctl_fill(struct rs_sock *rs, struct rs_ctl *m,
			enum rs_ctl_type type, u32 credits)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->version = RS_PROTO_VERSION;
	m->credits = cpu_to_be16(credits);
	m->cons = cpu_to_be64(rs->flow.rx_cons);
	switch (type) {
	case RS_MSG_SETUP:
		m->addr = cpu_to_be64(rs->rx.mr->iova);
		m->rkey = cpu_to_be32(rs->rx.mr->rkey);
		m->size = cpu_to_be32(rs->rx.size);
		break;
	case RS_MSG_FIN:
		m->addr = cpu_to_be64(rs->flow.tx_head);
		break;
	default:
		break;
	}
}

/* Post a control message if credits and send queue allow it. */
int rs_ctrl_post_locked(struct rs_sock *rs, enum rs_ctl_type type)
{
	struct rs_send *s = &rs->sends[rs->sq_posted % RS_SQ_DEPTH];
	u32 returns = min_t(u32, rs->flow.owed, RS_IMM_CREDIT_MAX);
	struct ib_sge sge;
	struct ib_send_wr wr = {};
	u32 credits;

	if (!rs_sq_free(rs) || !rs_flow_may_send(&rs->flow, returns))
		return -EAGAIN;
	credits = rs_flow_take_owed(&rs->flow);
	rs_ctl_fill(rs, s->msg, type, credits);
	sge.length = RS_MSG_SIZE;
	if (rs->max_inline >= RS_MSG_SIZE) {
		sge.addr = (uintptr_t)s->msg;
		sge.lkey = 0;
		wr.send_flags = IB_SEND_INLINE;
	} else {
		sge.addr = s->msg_dma;
		sge.lkey = rs->pd->local_dma_lkey;
		ib_dma_sync_single_for_device(rs->dev, s->msg_dma, RS_MSG_SIZE,
					      DMA_TO_DEVICE);
	}
	wr.opcode = IB_WR_SEND;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	if (rs_post_slot(rs, &wr, type == RS_MSG_FIN, type == RS_MSG_FIN)) {
		rs->flow.owed += credits;
		rs_abort_locked(rs, ECONNRESET);
		return -EIO;
	}
	rs_flow_msg_sent(&rs->flow);
	rs_flow_window_sent(&rs->flow);
	rs->stats.ctrl_sent++;
	if (type == RS_MSG_FIN)
		rs->flow.fin_sent = true;
	if (type == RS_MSG_SETUP)
		rs->flow.setup_sent = true;
	return 0;
}

static bool rs_ctrl_setup(struct rs_sock *rs, const struct rs_ctl *m)
{
	u32 size = be32_to_cpu(m->size);

	if (rs->peer_ready || size < RS_RING_MIN || size > RS_RING_MAX ||
	    (size & (size - 1)))
		return false;
	rs->peer_addr = be64_to_cpu(m->addr);
	rs->peer_rkey = be32_to_cpu(m->rkey);
	rs->flow.peer_size = size;
	rs->peer_ready = true;
	rs->flow.ready = !rs->regs_pending;
	return true;
}

static bool rs_ctrl_fin(struct rs_sock *rs, const struct rs_ctl *m)
{
	struct sock *sk = &rs->sk;

	if (rs->fin_rcvd || be64_to_cpu(m->addr) != rs->flow.rx_prod)
		return false;
	rs->fin_rcvd = true;
	WRITE_ONCE(sk->sk_shutdown, sk->sk_shutdown | RCV_SHUTDOWN);
	if (sk->sk_state == TCP_ESTABLISHED)
		rs_set_state(sk, TCP_CLOSE_WAIT);
	return true;
}

/* A control message arrived; rs->lock is held. */
void rs_ctrl_recv_locked(struct rs_sock *rs, const struct rs_ctl *m)
{
	bool ok;

	rs->stats.ctrl_received++;
	if (m->version != RS_PROTO_VERSION ||
	    !rs_flow_on_credits(&rs->flow, be16_to_cpu(m->credits)) ||
	    !rs_flow_on_window(&rs->flow, be64_to_cpu(m->cons))) {
		rs_abort_locked(rs, EPROTO);
		return;
	}
	switch (m->type) {
	case RS_MSG_SETUP:
		ok = rs_ctrl_setup(rs, m);
		break;
	case RS_MSG_ACK:
		ok = true;
		break;
	case RS_MSG_FIN:
		ok = rs_ctrl_fin(rs, m);
		break;
	default:
		ok = false;
		break;
	}
	if (!ok)
		rs_abort_locked(rs, EPROTO);
}

/* Both rings are registered: tell the peer where to write. */
void rs_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rs_reg *r = container_of(wc->wr_cqe, struct rs_reg, cqe);
	struct rs_sock *rs = r->rs;

	spin_lock(&rs->lock);
	if (wc->status != IB_WC_SUCCESS) {
		rs_wc_error_locked(rs, wc);
		spin_unlock(&rs->lock);
		return;
	}
	if (rs->sq_done < 2)
		rs->sq_done = 2;
	if (rs->sq_signaled < 1)
		rs->sq_signaled = 1;
	rs->regs_pending = 0;
	rs->flow.ready = rs->peer_ready;
	if (!rs->dead && rs_ctrl_post_locked(rs, RS_MSG_SETUP))
		rs_abort_locked(rs, ECONNRESET);
	rs_push_locked(rs);
	spin_unlock(&rs->lock);
}
