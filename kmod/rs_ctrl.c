// SPDX-License-Identifier: GPL-2.0
/*
 * Control messages: small SENDs, inline where the QP allows, that carry
 * the stream buffer description (SETUP, and RING when it grows, answered
 * by RING_ACK), window and credit updates (ACK) and the end of the stream
 * (FIN). Every message returns the receive
 * slots we owe and the bytes we have consumed.
 */
#include "rs.h"

void rs_ctl_fill(struct rs_sock *rs, struct rs_ctl *m, enum rs_ctl_type type,
		 u32 credits)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->version = RS_PROTO_VERSION;
	m->credits = cpu_to_be16(credits);
	m->cons = cpu_to_be64(rs->flow.rx_cons);
	switch (type) {
	case RS_MSG_SETUP:
		m->addr = cpu_to_be64(rs->rx.mr[0]->iova);
		m->rkey = cpu_to_be32(rs->rx.mr[0]->rkey);
		m->len = cpu_to_be32(rs->rx.size);
		break;
	case RS_MSG_FIN:
		m->addr = cpu_to_be64(rs->flow.tx_head);
		m->seq = cpu_to_be64(rs->dtx.seq);
		break;
	case RS_MSG_RING:
		m->addr = cpu_to_be64(rs->rx_new.mr[0]->iova);
		m->rkey = cpu_to_be32(rs->rx_new.mr[0]->rkey);
		m->len = cpu_to_be32(rs->rx_new.size);
		break;
	case RS_MSG_RING_ACK:
		m->seq = cpu_to_be64(rs->flow.tx_sent);
		break;
	default:
		break;
	}
}

/* Point the work request at slot s's message: inline when the QP can. */
void rs_ctl_sge(struct rs_sock *rs, struct rs_send *s, struct ib_sge *sge,
		struct ib_send_wr *wr)
{
	sge->length = RS_MSG_SIZE;
	if (rs->max_inline >= RS_MSG_SIZE) {
		sge->addr = (uintptr_t)s->msg;
		sge->lkey = 0;
		wr->send_flags |= IB_SEND_INLINE;
	} else {
		sge->addr = s->msg_dma;
		sge->lkey = rs->pd->local_dma_lkey;
		ib_dma_sync_single_for_device(rs->dev, s->msg_dma, RS_MSG_SIZE,
					      DMA_TO_DEVICE);
	}
	wr->sg_list = sge;
	wr->num_sge = 1;
}

static void rs_ctrl_sent(struct rs_sock *rs, enum rs_ctl_type type)
{
	rs_flow_msg_sent(&rs->flow);
	rs_flow_window_sent(&rs->flow);
	rs_rx_announced_locked(rs);
	rs->stats.ctrl_sent++;
	switch (type) {
	case RS_MSG_FIN:
		rs->flow.fin_sent = true;
		/* ADVERTs still queued die at the peer with the FIN */
		rs_dtx_on_cancel(&rs->dtx);
		break;
	case RS_MSG_SETUP:
		rs->flow.setup_sent = true;
		break;
	case RS_MSG_CANCEL:
		rs->cancel_wanted = false;
		break;
	case RS_MSG_CANCEL_ACK:
		rs->cancel_ack_wanted = false;
		break;
	case RS_MSG_RING:
		rs->flow.ring_wanted = false;
		break;
	case RS_MSG_RING_ACK:
		/* WRITEs posted from now on go to the new buffer */
		rs->peer_addr = rs->peer_new_addr;
		rs->peer_rkey = rs->peer_new_rkey;
		rs_flow_ring_switch(&rs->flow);
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
	rs_ctl_sge(rs, s, &sge, &wr);
	wr.opcode = IB_WR_SEND;
	if (rs_post_slot(rs, &wr, type == RS_MSG_FIN, type == RS_MSG_FIN)) {
		rs->flow.owed += credits;
		rs_abort_locked(rs, ECONNRESET);
		return -EIO;
	}
	rs_ctrl_sent(rs, type);
	return 0;
}

static bool rs_ctrl_setup(struct rs_sock *rs, const struct rs_ctl *m)
{
	u32 size = be32_to_cpu(m->len);

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

	if (rs->fin_rcvd || be64_to_cpu(m->addr) != rs->flow.rx_prod ||
	    be64_to_cpu(m->seq) != rs->drx.in)
		return false;
	rs->fin_rcvd = true;
	rs_drx_end(&rs->drx);
	WRITE_ONCE(sk->sk_shutdown, sk->sk_shutdown | RCV_SHUTDOWN);
	if (sk->sk_state == TCP_ESTABLISHED)
		rs_set_state(sk, TCP_CLOSE_WAIT);
	return true;
}

/*
 * The peer withdrew its ADVERTs: drop them and answer; the answer goes
 * behind any DIRECT already posted for them.
 */
static bool rs_ctrl_cancel(struct rs_sock *rs)
{
	if (rs->cancel_ack_wanted)
		return false;	/* one CANCEL at a time */
	rs_dtx_on_cancel(&rs->dtx);
	rs->cancel_ack_wanted = true;
	return true;
}

/*
 * What a message means for sleepers: EPOLLIN for readers (an ADVERT of
 * ours settled or the stream ended), EPOLLOUT for writers (an ADVERT to
 * write into), EPOLLERR for a broken protocol.
 */
static __poll_t rs_ctrl_dispatch(struct rs_sock *rs, const struct rs_ctl *m,
				 const struct ib_wc *wc)
{
	__poll_t in = EPOLLIN | EPOLLRDNORM;

	switch (m->type) {
	case RS_MSG_SETUP:
		return rs_ctrl_setup(rs, m) ? EPOLLOUT : EPOLLERR;
	case RS_MSG_ACK:
		return 0;
	case RS_MSG_FIN:
		return rs_ctrl_fin(rs, m) ? in | EPOLLRDHUP : EPOLLERR;
	case RS_MSG_ADVERT:
		return rs_dsend_on_advert(rs, m) ? EPOLLOUT : EPOLLERR;
	case RS_MSG_DIRECT:
		return rs_drecv_on_direct(rs, m, wc);
	case RS_MSG_CANCEL:
		return rs_ctrl_cancel(rs) ? 0 : EPOLLERR;
	case RS_MSG_CANCEL_ACK:
		return rs_drx_on_cancel_ack(&rs->drx) ? in : EPOLLERR;
	case RS_MSG_RING:
		return rs_ctrl_ring(rs, m) ? 0 : EPOLLERR;
	case RS_MSG_RING_ACK:
		if (!rs_flow_on_ring_ack(&rs->flow, be64_to_cpu(m->seq)))
			return EPOLLERR;
		/* every old byte is read: no recvmsg may come to retire it */
		if (rs_rx_settle_due_locked(rs))
			rs_rx_tune_later_locked(rs);
		return 0;
	default:
		return EPOLLERR;
	}
}

/* The flags a message type may carry; other bits are for later versions. */
static u32 rs_ctl_known_flags(u8 type)
{
	switch (type) {
	case RS_MSG_ADVERT:
		return RS_ADV_F_WAITALL;
	case RS_MSG_DIRECT:
		return RS_DIR_F_COMPLETE;
	default:
		return 0;
	}
}

/*
 * Reserved bytes and flags we do not know must be zero, so that a later
 * version can give them a meaning: a peer that sets them speaks a protocol
 * we do not, and is reset rather than misunderstood.
 */
static bool rs_ctl_reserved_ok(const struct rs_ctl *m)
{
	return !memchr_inv(m->reserved, 0, sizeof(m->reserved)) &&
	       !(be32_to_cpu(m->flags) & ~rs_ctl_known_flags(m->type));
}

/* A control message arrived; rs->lock is held. Returns wake-up events. */
__poll_t rs_ctrl_recv_locked(struct rs_sock *rs, const struct rs_ctl *m,
			     const struct ib_wc *wc)
{
	__poll_t mask;

	rs->stats.ctrl_received++;
	if (m->version != RS_PROTO_VERSION || !rs_ctl_reserved_ok(m) ||
	    !rs_flow_on_credits(&rs->flow, be16_to_cpu(m->credits)) ||
	    !rs_flow_on_window(&rs->flow, be64_to_cpu(m->cons))) {
		rs_abort_locked(rs, EPROTO);
		return EPOLLERR;
	}
	if (m->type != RS_MSG_DIRECT && (wc->wc_flags & IB_WC_WITH_INVALIDATE)) {
		rs_abort_locked(rs, EPROTO);
		return EPOLLERR;
	}
	mask = rs_ctrl_dispatch(rs, m, wc);
	if (mask & EPOLLERR)
		rs_abort_locked(rs, EPROTO);
	return mask;
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
	rs->sq_progress = jiffies;
	rs->regs_pending = 0;
	rs->flow.ready = rs->peer_ready;
	if (!rs->dead && rs_ctrl_post_locked(rs, RS_MSG_SETUP))
		rs_abort_locked(rs, ECONNRESET);
	rs_push_locked(rs);
	spin_unlock(&rs->lock);
}
