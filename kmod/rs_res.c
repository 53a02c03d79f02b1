// SPDX-License-Identifier: GPL-2.0
/*
 * Per-connection verbs resources: PD, CQ from the device's CQ pool, RC QP,
 * receive slots, send slots and the two rings. Created from the rdma_cm
 * handler once the device is known (the rings only when the connection is
 * established); destroyed by rs_transport_destroy(), which drains the QP
 * first so no completion can run afterwards. Ring memory is counted
 * against the module's mem_max and charged to the socket owner's memory
 * cgroup.
 */
#include <linux/slab.h>
#include <linux/dma-mapping.h>
#include <linux/memcontrol.h>
#include <linux/sched/mm.h>

#include "rs.h"

/*
 * QP events may come in any context. A QP that fails fatally flushes its
 * work requests, and the completion handlers reset the connection, so
 * only COMM_EST needs handling here.
 */
static void rs_qp_event(struct ib_event *ev, void *ctx)
{
	struct rs_sock *rs = ctx;
	struct rdma_cm_id *id = READ_ONCE(rs->cm_id);

	if (ev->event == IB_EVENT_COMM_EST && id)
		rdma_notify(id, IB_EVENT_COMM_EST);
}

static int rs_slots_alloc(struct rs_sock *rs)
{
	struct ib_device *dev = rs->dev;
	size_t sbytes = RS_SQ_DEPTH * RS_MSG_SIZE;
	size_t rbytes = RS_RQ_DEPTH * RS_MSG_SIZE;
	int i;

	rs->sends = kcalloc(RS_SQ_DEPTH, sizeof(*rs->sends), GFP_KERNEL);
	rs->recvs = kcalloc(RS_RQ_DEPTH, sizeof(*rs->recvs), GFP_KERNEL);
	rs->send_msgs = kzalloc(sbytes, GFP_KERNEL);
	rs->recv_msgs = kzalloc(rbytes, GFP_KERNEL);
	if (!rs->sends || !rs->recvs || !rs->send_msgs || !rs->recv_msgs)
		return -ENOMEM;
	rs->send_msgs_dma = ib_dma_map_single(dev, rs->send_msgs, sbytes,
					      DMA_TO_DEVICE);
	if (ib_dma_mapping_error(dev, rs->send_msgs_dma)) {
		rs->send_msgs_dma = 0;
		return -ENOMEM;
	}
	rs->recv_msgs_dma = ib_dma_map_single(dev, rs->recv_msgs, rbytes,
					      DMA_FROM_DEVICE);
	if (ib_dma_mapping_error(dev, rs->recv_msgs_dma)) {
		rs->recv_msgs_dma = 0;
		return -ENOMEM;
	}
	for (i = 0; i < RS_SQ_DEPTH; i++) {
		rs->sends[i].cqe.done = rs_send_done;
		rs->sends[i].rs = rs;
		rs->sends[i].msg = &rs->send_msgs[i];
		rs->sends[i].msg_dma = rs->send_msgs_dma + i * RS_MSG_SIZE;
	}
	for (i = 0; i < RS_RQ_DEPTH; i++) {
		struct rs_recv *r = &rs->recvs[i];

		r->cqe.done = rs_recv_done;
		r->rs = rs;
		r->msg = &rs->recv_msgs[i];
		r->sge.addr = rs->recv_msgs_dma + i * RS_MSG_SIZE;
		r->sge.length = RS_MSG_SIZE;
		r->sge.lkey = rs->pd->local_dma_lkey;
	}
	rs->reg_cqe.cqe.done = rs_reg_done;
	rs->reg_cqe.rs = rs;
	return 0;
}

static void rs_slots_free(struct rs_sock *rs)
{
	struct ib_device *dev = rs->dev;

	if (rs->send_msgs_dma)
		ib_dma_unmap_single(dev, rs->send_msgs_dma,
				    RS_SQ_DEPTH * RS_MSG_SIZE, DMA_TO_DEVICE);
	if (rs->recv_msgs_dma)
		ib_dma_unmap_single(dev, rs->recv_msgs_dma,
				    RS_RQ_DEPTH * RS_MSG_SIZE, DMA_FROM_DEVICE);
	rs->send_msgs_dma = 0;
	rs->recv_msgs_dma = 0;
	kfree(rs->sends);
	kfree(rs->recvs);
	kfree(rs->send_msgs);
	kfree(rs->recv_msgs);
	rs->sends = NULL;
	rs->recvs = NULL;
	rs->send_msgs = NULL;
	rs->recv_msgs = NULL;
}

/*
 * The QP, made by the module and moved to INIT: rdma_cm never owns it
 * (rs_qp_move()).
 */
static int rs_qp_create(struct rs_sock *rs, struct rdma_cm_id *id)
{
	struct ib_qp_init_attr attr = {
		.event_handler = rs_qp_event,
		.qp_context = rs,
		.send_cq = rs->cq,
		.recv_cq = rs->cq,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = IB_QPT_RC,
		.cap = {
			/*
			 * one more of each for ib_drain_qp(), and room for
			 * one LOCAL_INV per ADVERT slot
			 */
			.max_send_wr = RS_SQ_DEPTH + RS_ADV_SLOTS + 1,
			.max_recv_wr = RS_RQ_DEPTH + 1,
			.max_send_sge = rs->max_sge,
			.max_recv_sge = 1,
			.max_inline_data = RS_MAX_INLINE,
		},
	};
	struct ib_qp *qp;
	int ret;

	/* one power of two of slots in rxe, not two (rs.h, RS_SQ_DEPTH) */
	BUILD_BUG_ON(RS_SQ_DEPTH + RS_ADV_SLOTS + 1 > 63);
	qp = ib_create_qp(rs->pd, &attr);
	if (IS_ERR(qp) && PTR_ERR(qp) == -EINVAL) {
		attr.cap.max_inline_data = 0;
		qp = ib_create_qp(rs->pd, &attr);
	}
	if (IS_ERR(qp))
		return PTR_ERR(qp);
	rs->qp = qp;
	/* a device may round up; our inline buffers are RS_MAX_INLINE */
	rs->max_inline = min_t(u32, attr.cap.max_inline_data, RS_MAX_INLINE);
	ret = rs_qp_move(rs, id, IB_QPS_INIT);
	if (ret) {
		/* never posted to: nothing to drain */
		ib_destroy_qp(qp);
		rs->qp = NULL;
	}
	return ret;
}

/*
 * Move the QP to state with the attributes rdma_cm gives its own QPs
 * (rdma_init_qp_attr(): from the route, the REQ or REP, and the ack
 * timeout rs_ack_choose() set). The module creates and drives its QPs
 * itself, so that rdma_cm never touches one (docs/design.md, "Who moves
 * the QP").
 */
int rs_qp_move(struct rs_sock *rs, struct rdma_cm_id *id,
	       enum ib_qp_state state)
{
	struct ib_qp_attr attr = { .qp_state = state };
	int mask, ret;

	ret = rdma_init_qp_attr(id, &attr, &mask);
	if (ret)
		return ret;
	return ib_modify_qp(rs->qp, &attr, mask);
}

/*
 * Ready to receive, once the peer's REQ or REP is known: INIT again with
 * the CM's access flags (INIT came from the route alone on the active
 * side), then RTR; rs_qp_ready() goes on to RTS, ready to send. The
 * active side moves to RTS at the REP, the passive side at the RTU.
 */
int rs_qp_rtr(struct rs_sock *rs, struct rdma_cm_id *id)
{
	int ret;

	ret = rs_qp_move(rs, id, IB_QPS_INIT);
	if (!ret)
		ret = rs_qp_move(rs, id, IB_QPS_RTR);
	return ret;
}

int rs_qp_ready(struct rs_sock *rs, struct rdma_cm_id *id)
{
	int ret;

	ret = rs_qp_rtr(rs, id);
	if (!ret)
		ret = rs_qp_move(rs, id, IB_QPS_RTS);
	return ret;
}

/* Stop the QP (rdma_disconnect() does that only to rdma_cm's own). */
void rs_qp_error(struct rs_sock *rs)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };

	if (rs->qp)
		ib_modify_qp(rs->qp, &attr, IB_QP_STATE);
}

static int rs_post_recvs(struct rs_sock *rs)
{
	int i, ret = 0;

	spin_lock_bh(&rs->lock);
	for (i = 0; i < RS_RQ_DEPTH && !ret; i++)
		ret = rs_post_recv_locked(rs, &rs->recvs[i]);
	rs->flow.owed = 0;	/* the initial slots are the peer's credits */
	spin_unlock_bh(&rs->lock);
	return ret;
}

/* Count bytes of ring memory against mem_max; false if over it. */
bool rs_mem_charge(unsigned long bytes)
{
	if (atomic_long_add_return(bytes, &rs_mem_used) <=
	    (long)min_t(unsigned long, READ_ONCE(rs_mem_max), LONG_MAX))
		return true;
	atomic_long_sub(bytes, &rs_mem_used);
	return false;
}

/* Charge bytes whatever mem_max says (a move that frees more). */
void rs_mem_charge_force(unsigned long bytes)
{
	atomic_long_add(bytes, &rs_mem_used);
}

void rs_mem_uncharge(unsigned long bytes)
{
	atomic_long_sub(bytes, &rs_mem_used);
}

/*
 * The largest power of two of bytes one fast-registration MR of dev maps
 * with a spare page list entry (rs_mr_pages(): rxe on 6.1 reads past a
 * full list), up to RS_RING_MAX. rxe allows 512 entries: 1 MiB.
 */
u32 rs_dev_seg_max(struct ib_device *dev)
{
	u32 n = dev->attrs.max_fast_reg_page_list_len;

	if (n < 2)
		return PAGE_SIZE;
	return min_t(u64, RS_RING_MAX,
		     (u64)rounddown_pow_of_two(n - 1) << PAGE_SHIFT);
}

/* The largest ring of one MR: a stream buffer, or a send ring at first. */
u32 rs_dev_ring_max(struct ib_device *dev)
{
	return rs_dev_seg_max(dev);
}

/*
 * The send ring a connection starts with: SO_SNDBUF's size when the
 * application set one (rs_ring_sizes_set()), or RS_TX_START, from which
 * writers grow it as TCP autotunes its send buffer (rs_txgrow.c).
 */
u32 rs_tx_start(const struct rs_sock *rs, u32 max)
{
	return rs_ring_size(rs->sndbuf_ring ?: RS_TX_START, max);
}

/*
 * The stream buffer a connection starts with: SO_RCVBUF's size when the
 * application set one (fixed then), or RS_RX_START, from which it grows
 * as TCP's receive window does (rs_rxgrow.c; a peer without RING keeps
 * it at that).
 */
u32 rs_rx_start(const struct rs_sock *rs, u32 max)
{
	return rs_ring_size(rs->rcvbuf_ring ?: RS_RX_START, max);
}

/* At listen() and connect(): fixed rings for SO_RCVBUF, SO_SNDBUF. */
void rs_ring_sizes_set(struct rs_sock *rs)
{
	struct sock *sk = &rs->sk;

	rs->rcvbuf_ring = sk->sk_userlocks & SOCK_RCVBUF_LOCK ?
			  sk->sk_rcvbuf : 0;
	rs->sndbuf_ring = sk->sk_userlocks & SOCK_SNDBUF_LOCK ?
			  sk->sk_sndbuf : 0;
}

/* Bytes of both rings of a connection of rs on dev, as it starts. */
unsigned long rs_ring_bytes(const struct rs_sock *rs, struct ib_device *dev)
{
	u32 max = rs_dev_ring_max(dev);

	return (unsigned long)rs_rx_start(rs, max) + rs_tx_start(rs, max);
}

/*
 * Gather entries per direct WRITE, from the device's limit (and the
 * max_send_sge module parameter, which tests use to emulate small
 * devices), and the send slots and pages one direct transfer may take:
 * its WRITEs plus the DIRECT must fit in at most half the send queue.
 */
static void rs_dsend_budget(struct rs_sock *rs, struct ib_device *dev)
{
	u32 sge = clamp_t(u32, READ_ONCE(rs_max_send_sge), 2, RS_MAX_SGE);

	rs->max_sge = min_t(u32, dev->attrs.max_send_sge, sge);
	rs->dsend_wrs = min_t(u32, DIV_ROUND_UP(RS_DIRECT_PAGES, rs->max_sge),
			      RS_SQ_DEPTH / 2 - 1) + 1;
	rs->dsend_pages = (rs->dsend_wrs - 1) * rs->max_sge;
}

/*
 * Build the transport on id's device, all but the rings (and the ADVERT
 * MRs), which rs_transport_rings() adds once the connection is
 * established: a half-open connection costs a QP and its slots, no ring
 * memory, though its ring bytes are reserved against mem_max from here
 * on (-ENOBUFS beyond it, and beyond the owner's or the netns's cap on
 * connections, rs_limit.c). On failure everything built so far stays
 * recorded in rs and rs_transport_destroy() releases it. Under tlock.
 */
int rs_transport_create(struct rs_sock *rs, struct rdma_cm_id *id)
{
	struct ib_device *dev = id->device;
	u32 max_ring = rs_dev_ring_max(dev);
	u32 rx_size, tx_size;
	int ret;

	/* iWARP has no RDMA WRITE WITH IMMEDIATE, which indirect data needs */
	if (rdma_protocol_iwarp(dev, id->port_num))
		return -EPROTONOSUPPORT;
	if (dev->attrs.max_send_sge < 2)
		return -EOPNOTSUPP;
	rs_dsend_budget(rs, dev);
	rx_size = rs_rx_start(rs, max_ring);
	tx_size = rs_tx_start(rs, max_ring);
	if (!rs->mem) {
		if (!rs_mem_charge((unsigned long)rx_size + tx_size))
			return -ENOBUFS;
		rs->mem = (unsigned long)rx_size + tx_size;
	}
	ret = rs_limit_charge(rs);	/* released with the transport */
	if (ret)
		return ret;
	rs->dev = dev;
	rs->budgeted = rs_budget_wanted(rs, id);
	rs_budget_join(rs);
	rs->transport = true;
	rs->regs_pending = 1;		/* until rs_reg_done() */
	rs->pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(rs->pd)) {
		ret = PTR_ERR(rs->pd);
		rs->pd = NULL;
		return ret;
	}
	rs->cq_size = RS_SQ_DEPTH + RS_ADV_SLOTS + RS_RQ_DEPTH + 2;
	rs->cq = ib_cq_pool_get(dev, rs->cq_size, -1, IB_POLL_SOFTIRQ);
	if (IS_ERR(rs->cq)) {
		ret = PTR_ERR(rs->cq);
		rs->cq = NULL;
		return ret;
	}
	ret = rs_qp_create(rs, id);
	if (ret)
		return ret;
	ret = rs_slots_alloc(rs);
	if (ret)
		return ret;
	/* the ring sizes are fixed here; the peer learns them in SETUP */
	rs_flow_init(&rs->flow, tx_size, rx_size, RS_RQ_DEPTH,
		     min_t(u32, tx_size / 2, RS_CHUNK_MAX));
	/* both sides post RS_RQ_DEPTH slots (checked in the CM private data) */
	rs_flow_set_peer(&rs->flow, 0, RS_RQ_DEPTH);
	return rs_post_recvs(rs);
}

/*
 * The connection is established: allocate and map the rings (the ADVERT
 * MRs come with the first ADVERT, rs_dslot_mr_prepare()). The pages
 * are charged to the memory cgroup of the socket's creator (a child's:
 * its listener's), whatever thread runs this. The peer cannot write
 * before our SETUP, which follows their registration. Under tlock,
 * before the socket is ESTABLISHED.
 */
int rs_transport_rings(struct rs_sock *rs)
{
	struct mem_cgroup *old = rs_set_active_memcg(rs->memcg);
	int ret;

	ret = rs_ring_alloc(&rs->rx, rs->flow.rx_size, 0);
	if (!ret)
		ret = rs_ring_alloc(&rs->tx, rs->flow.tx_size, 0);
	rs_set_active_memcg(old);
	if (ret)
		return ret;
	/* the reservation was made for these sizes or larger ones */
	if (rs->mem > (unsigned long)rs->rx.size + rs->tx.size) {
		rs_mem_uncharge(rs->mem - rs->rx.size - rs->tx.size);
		rs->mem = (unsigned long)rs->rx.size + rs->tx.size;
	}
	/* one MR each (rs_dev_ring_max()), which rs_post_regs() registers */
	ret = rs_ring_map(&rs->rx, rs->dev, rs->pd, DMA_FROM_DEVICE,
			  rs->rx.size);
	if (ret)
		return ret;
	ret = rs_ring_map(&rs->tx, rs->dev, rs->pd, DMA_TO_DEVICE,
			  rs->tx.size);
	if (ret)
		return ret;
	rs_dslots_init(rs);	/* their MRs come with the first ADVERT */
	return 0;
}

/* Register both rings; the SETUP message follows the completion. */
int rs_post_regs(struct rs_sock *rs)
{
	struct ib_reg_wr wr[2] = {};
	const struct ib_send_wr *bad;
	int ret = -ECONNABORTED;

	spin_lock_bh(&rs->lock);
	if (rs->dead)
		goto out;
	wr[0].wr.opcode = IB_WR_REG_MR;
	wr[0].wr.next = &wr[1].wr;
	wr[0].mr = rs->rx.mr[0];
	wr[0].key = rs->rx.mr[0]->rkey;
	wr[0].access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	wr[0].wr.wr_cqe = &rs->reg_cqe.cqe;
	wr[1].wr.opcode = IB_WR_REG_MR;
	wr[1].mr = rs->tx.mr[0];
	wr[1].key = rs->tx.mr[0]->rkey;
	wr[1].access = IB_ACCESS_LOCAL_WRITE;
	wr[1].wr.wr_cqe = &rs->reg_cqe.cqe;
	wr[1].wr.send_flags = IB_SEND_SIGNALED;
	ret = ib_post_send(rs->qp, &wr[0].wr, &bad);
	if (!ret) {
		rs->sq_posted += 2;
		rs->sq_progress = jiffies;	/* the watchdog's clock */
	}
out:
	spin_unlock_bh(&rs->lock);
	return ret;
}

/*
 * Release all verbs resources. Process context, under tlock but not
 * lock_sock(): a system call may be copying from or to the rings, or
 * sleeping on a direct transfer, meanwhile. Nothing may post any more
 * (rs->dead is set), and every path that touches a verbs resource checks
 * rs->dead, rs->transport or rs->drained under rs->lock first.
 *
 * This is the connection's fence: ib_drain_qp() moves the QP to the error
 * state and waits until every work request has completed or flushed, so
 * no completion handler runs and no peer can reach any of our memory
 * afterwards. Only then are pinned user pages, MRs and rings released,
 * including those of callers that gave up waiting (orphans). The rings'
 * pages and their vmap stay until the socket is freed: data already in
 * the stream buffer can still be read, and a copy in progress never sees
 * them go.
 */
void rs_transport_destroy(struct rs_sock *rs, struct rdma_cm_id *id)
{
	struct ib_device *dev = rs->dev;
	LIST_HEAD(orphans);

	if (!rs->transport)
		return;
	timer_delete_sync(&rs->probe_timer);	/* rs->dead stops re-arming */
	if (rs->qp) {
		ib_drain_qp(rs->qp);
		/* no peer can reach any buffer now: release the HCA's view */
		spin_lock_bh(&rs->lock);
		rs_dslots_unmap_locked(rs);
		rs_zsends_unmap_locked(rs, &orphans);
		rs->drained = true;
		rs_drx_end(&rs->drx);
		spin_unlock_bh(&rs->lock);
		wake_up_all(&rs->dwait);
		/* the fence is done: what callers gave up on may go now */
		rs_zsends_free(rs, &orphans);
		rs_dslots_release_orphans(rs);
		ib_destroy_qp(rs->qp);
		rs->qp = NULL;
	}
	rs_dslots_free(rs);
	rs_ring_unmap(&rs->rx, dev, DMA_FROM_DEVICE);
	rs_ring_unmap(&rs->rx_new, dev, DMA_FROM_DEVICE);
	rs_ring_unmap(&rs->rx_old, dev, DMA_FROM_DEVICE);
	rs_ring_unmap(&rs->tx, dev, DMA_TO_DEVICE);
	rs_ring_unmap(&rs->tx_new, dev, DMA_TO_DEVICE);
	rs_ring_unmap(&rs->tx_old, dev, DMA_TO_DEVICE);
	rs_slots_free(rs);
	if (rs->cq)
		ib_cq_pool_put(rs->cq, rs->cq_size);
	rs->cq = NULL;
	if (rs->pd)
		rs_pd_put(rs->pd);
	rs->pd = NULL;
	spin_lock_bh(&rs->lock);
	rs->transport = false;
	rs_budget_update_locked(rs);	/* no longer counts */
	spin_unlock_bh(&rs->lock);
	rs_budget_leave(rs);
	rs_limit_uncharge(rs);
}

/*
 * The fence, for a caller that gives up on work requests naming its own
 * memory (a wait timed out, it was killed, or a post failed part-way):
 * abort the connection, so that the teardown drains the QP, and wait for
 * the drain, so that neither our HCA nor the peer can touch the memory
 * once the caller returns. The wait is killable and bounded by
 * RS_DRAIN_TIMEOUT; a caller that is being killed does not wait, and its
 * pages stay pinned until the teardown releases them. Returns true once
 * the QP is drained. Called under lock_sock(), without rs->lock.
 */
bool rs_fence(struct rs_sock *rs, int err)
{
	spin_lock_bh(&rs->lock);
	rs_abort_locked(rs, err);
	spin_unlock_bh(&rs->lock);
	if (!READ_ONCE(rs->drained) && !fatal_signal_pending(current))
		rs_dwait(rs, READ_ONCE(rs->drained), RS_DRAIN_TIMEOUT);
	return READ_ONCE(rs->drained);
}

/* The pages, once nobody can copy from or to them; ends the reservation. */
void rs_transport_free_rings(struct rs_sock *rs)
{
	rs_ring_free(&rs->rx);
	rs_ring_free(&rs->rx_new);
	rs_ring_free(&rs->rx_old);
	rs_ring_free(&rs->tx);
	rs_ring_free(&rs->tx_new);
	rs_ring_free(&rs->tx_old);
	rs_mem_uncharge(rs->mem);
	rs->mem = 0;
}
