// SPDX-License-Identifier: GPL-2.0
/*
 * Send-ring autotuning. A connection starts with an RS_TX_START send ring
 * unless SO_SNDBUF fixed its size, and a writer that finds it full grows
 * it, doubling up to RS_TX_GROW_MAX, when rs_flow_tx_grow_size() says a
 * bigger one helps: a ring smaller than the peer's window, or a peer
 * whose full buffer holds the queued bytes back (a program that writes a
 * whole request before it reads the reply, as TCP's autotuning allows).
 * Idle connections keep the small ring.
 *
 * The move, by the writer, under lock_sock() (tx_head stands still):
 *  1. under tlock (no teardown meanwhile): allocate and map the new ring
 *     into rs->tx_new, charged to mem_max and the owner's memory cgroup;
 *  2. under rs->lock: pause pushes (flow.tx_paused) and post the REG_MRs
 *     of the new ring (one per MR: a ring that one MR cannot map has
 *     several), the last signalled. It completes after every WRITE
 *     posted before it, and moves tx_done to tx_sent: its completion
 *     says the HCA is done with the old ring;
 *  3. wait for that, bounded and killable, with lock_sock() released:
 *     other writers may queue more unsent bytes in the old ring;
 *  4. under tlock: copy the unsent bytes [tx_sent, tx_head) to their
 *     offsets in the new ring; swap the rings under rs->lock and resume;
 *  5. unmap and free the old ring: nothing refers to it any more.
 * Once posted, a ring in rs->tx_new that does not become rs->tx is the
 * teardown's: the drain fences its REG_MR before rs_transport_destroy()
 * unmaps it, and rs_transport_free_rings() frees its pages.
 */
#include "rs.h"

/* Several MRs if one cannot map it all (rs_ring_map()). */
static u32 rs_tx_grow_max(struct rs_sock *rs)
{
	return min_t(u64, RS_TX_GROW_MAX,
		     (u64)rs_dev_seg_max(rs->dev) * RS_RING_SEGS);
}

/* The size to grow to now, or 0. Under lock_sock(). */
static u32 rs_tx_grow_size(struct rs_sock *rs)
{
	u32 size = 0;

	if (rs->sndbuf_ring || rs->tx_new.vaddr ||
	    time_before(jiffies, rs->tx_grow_next))
		return 0;
	spin_lock_bh(&rs->lock);
	if (rs->transport && !rs->dead)
		size = rs_flow_tx_grow_size(&rs->flow, rs_tx_grow_max(rs));
	spin_unlock_bh(&rs->lock);
	return size;
}

/* Step 1, under tlock: 0, or an errno with nothing left behind. */
static int rs_tx_new_alloc(struct rs_sock *rs, u32 size)
{
	struct mem_cgroup *old;
	int ret;

	if (!rs->transport || READ_ONCE(rs->dead))
		return -ECONNABORTED;
	if (!rs_mem_charge(size))
		return -ENOBUFS;
	old = rs_set_active_memcg(rs->memcg);
	ret = rs_ring_alloc(&rs->tx_new, size);
	rs_set_active_memcg(old);
	if (!ret)
		ret = rs_ring_map(&rs->tx_new, rs->dev, rs->pd, DMA_TO_DEVICE,
				  rs_dev_seg_max(rs->dev));
	if (ret) {
		rs_ring_unmap(&rs->tx_new, rs->dev, DMA_TO_DEVICE);
		rs_ring_free(&rs->tx_new);
		memset(&rs->tx_new, 0, sizeof(rs->tx_new));
		rs_mem_uncharge(size);
		return ret;
	}
	rs->mem += size;
	return 0;
}

/*
 * Step 2, under tlock: 0 once the REG_MR is posted and pushes pause;
 * -EAGAIN when it could not be (no send slot, or the connection died):
 * the ring is still ours; -EIO when the device refused it: the
 * connection is aborted and the ring is the teardown's.
 */
static int rs_tx_new_post(struct rs_sock *rs)
{
	struct ib_reg_wr wr[RS_RING_SEGS] = {};
	struct rs_ring *r = &rs->tx_new;
	unsigned int i;
	int ret = -EAGAIN;

	for (i = 0; i < r->nseg; i++) {
		wr[i].wr.opcode = IB_WR_REG_MR;
		wr[i].wr.next = i + 1 < r->nseg ? &wr[i + 1].wr : NULL;
		wr[i].mr = r->mr[i];
		wr[i].key = r->mr[i]->rkey;
		wr[i].access = IB_ACCESS_LOCAL_WRITE;
	}
	spin_lock_bh(&rs->lock);
	if (!rs->dead && rs_sq_free(rs) >= r->nseg) {
		ret = rs_post_chain(rs, &wr[0].wr, &rs->tx_reg,
				    RS_CHAIN_TXGROW);
		rs->flow.tx_paused = !ret;
	}
	spin_unlock_bh(&rs->lock);
	return ret;
}

/* Not posted: the ring is ours to release. Under tlock. */
static void rs_tx_new_drop(struct rs_sock *rs)
{
	u32 size = rs->tx_new.size;

	rs_ring_unmap(&rs->tx_new, rs->dev, DMA_TO_DEVICE);
	rs_ring_free(&rs->tx_new);
	memset(&rs->tx_new, 0, sizeof(rs->tx_new));
	rs->mem -= size;
	rs_mem_uncharge(size);
}

/*
 * Steps 4 and 5, under tlock and lock_sock(): the REG_MR completed, so
 * the HCA is done with the old ring and pushes are still paused. False
 * when the move cannot end (the REG_MR failed, or the connection died
 * before it completed): the new ring is the teardown's.
 */
static bool rs_tx_swap(struct rs_sock *rs)
{
	struct rs_ring old;
	bool ok;

	spin_lock_bh(&rs->lock);
	ok = rs->transport && rs->tx_reg.done &&
	     rs->tx_reg.status == IB_WC_SUCCESS &&
	     !WARN_ON_ONCE(rs->flow.tx_done != rs->flow.tx_sent);
	if (!ok)
		rs->flow.tx_paused = false;
	spin_unlock_bh(&rs->lock);
	if (!ok)
		return false;
	/* tx_sent cannot move while paused, nor tx_head without lock_sock */
	rs_ring_move(&rs->tx_new, &rs->tx, rs->flow.tx_sent,
		     READ_ONCE(rs->flow.tx_head));
	spin_lock_bh(&rs->lock);
	old = rs->tx;
	rs->tx = rs->tx_new;
	memset(&rs->tx_new, 0, sizeof(rs->tx_new));
	rs_flow_tx_resize(&rs->flow, rs->tx.size);
	rs->flow.tx_paused = false;
	rs->stats.tx_grows++;
	rs_push_locked(rs);
	spin_unlock_bh(&rs->lock);
	/* getsockopt(SO_SNDBUF) reports the autotuned size, as TCP's */
	if (READ_ONCE(rs->sk.sk_sndbuf) < (int)rs->tx.size)
		WRITE_ONCE(rs->sk.sk_sndbuf, rs->tx.size);
	rs_ring_unmap(&old, rs->dev, DMA_TO_DEVICE);
	rs_ring_free(&old);
	rs->mem -= old.size;
	rs_mem_uncharge(old.size);
	return true;
}

/*
 * A writer found the send ring full: grow it if that helps (see the top
 * of this file). True when it grew; false when the writer should wait
 * for room as before. Under lock_sock(), which it drops while the REG_MR
 * runs. A timed-out wait means a wedged QP: the connection is aborted. A
 * killed writer leaves the move unfinished and pushes resumed; the new
 * ring then stays with the teardown, and the ring grows no further.
 */
bool rs_tx_grow(struct rs_sock *rs)
{
	u32 size = rs_tx_grow_size(rs);
	bool grown = false;
	long left;
	int ret;

	if (!size)
		return false;
	mutex_lock(&rs->tlock);
	if (rs_tx_new_alloc(rs, size)) {
		rs->tx_grow_next = jiffies + RS_TX_GROW_RETRY;
		mutex_unlock(&rs->tlock);
		return false;
	}
	ret = rs_tx_new_post(rs);
	if (ret == -EAGAIN)
		rs_tx_new_drop(rs);
	mutex_unlock(&rs->tlock);
	if (ret)
		return false;

	left = rs_dwait_progress(rs, READ_ONCE(rs->tx_reg.done),
				 RS_DRAIN_TIMEOUT);
	mutex_lock(&rs->tlock);
	if (READ_ONCE(rs->tx_reg.done)) {
		grown = rs_tx_swap(rs);
	} else {
		spin_lock_bh(&rs->lock);
		if (!left)
			rs_abort_locked(rs, ETIMEDOUT);
		rs->flow.tx_paused = false;
		rs_push_locked(rs);
		spin_unlock_bh(&rs->lock);
	}
	mutex_unlock(&rs->tlock);
	if (grown) {
		trace_rdmastream_tx_grow(&rs->sk, rs->flow.tx_size);
		rs_write_space(&rs->sk);
	}
	return grown;
}
