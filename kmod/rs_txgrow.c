// SPDX-License-Identifier: GPL-2.0
/*
 * Send-ring autotuning. A connection starts with an RS_TX_START send ring
 * unless SO_SNDBUF fixed its size, and a writer that finds it full grows
 * it, doubling up to RS_TX_GROW_MAX, when rs_flow_tx_grow_size() says a
 * bigger one helps: a ring smaller than the peer's window, or a peer
 * whose full buffer holds the queued bytes back (a program that writes a
 * whole request before it reads the reply, as TCP's autotuning allows).
 * Idle connections keep the small ring. While ring memory is scarce
 * (rs_mem_pressure()), rings do not grow, and a grown ring that is empty
 * at a send goes back to RS_TX_START (rs_tx_tune(), the same move).
 *
 * The move, by the writer, under lock_sock() (tx_head stands still) and
 * tlock (no teardown meanwhile), without waiting for the network:
 *  1. allocate and map the new ring into rs->tx_new, counted in mem_max
 *     and charged to the owner's memory cgroup (a failure, the cgroup's
 *     limit included, leaves the ring as it is);
 *  2. under rs->lock: pause pushes (flow.tx_paused) and post a LOCAL_INV
 *     and the new ring's REG_MRs (one per MR). WRITEs posted later use
 *     the new MRs; the send queue runs in order, so they find them
 *     registered. rxe (6.1) goes back to the oldest unacknowledged
 *     request when it retransmits and would run a completed REG_MR again,
 *     which fails and stops the QP; it runs a LOCAL_INV only once every
 *     request before it has completed, so nothing before the REG_MRs is
 *     ever sent again (rs_drecv_post_slot() does the same);
 *  3. copy the unsent bytes [tx_sent, tx_head) to their offsets in the
 *     new ring: tx_sent stands still while pushes pause;
 *  4. under rs->lock: swap the rings and resume. The old ring becomes
 *     rs->tx_old: WRITEs posted before the swap may still read it, up to
 *     tx_old_end (tx_sent at the swap);
 *  5. free the old ring once every work request posted up to the chain
 *     has completed (sq_done has reached tx_old_seq; the chain's last
 *     REG_MR is signalled, and only ACKs and probes, which read no ring,
 *     can follow it before the swap): the old ring's WRITEs, and the
 *     LOCAL_INV and REG_MRs that registered it, which rxe may still hold
 *     behind earlier WRITEs when the ring is replaced in turn. At once if
 *     nothing was in flight, else at the next send or growth
 *     (rs_tx_tune()); the completion that allows it wakes writers
 *     (rs_tx_reapable()), since the ring may then grow again.
 * A ring in rs->tx_new whose REG_MRs were posted but that never became
 * rs->tx (the post failed), and a ring in rs->tx_old, are the teardown's:
 * the drain fences the work requests before rs_transport_destroy()
 * deregisters them and rs_transport_free_rings() frees the pages.
 */
#include "rs.h"

/* Several MRs if one cannot map it all (rs_ring_map()). */
static u32 rs_tx_grow_max(struct rs_sock *rs)
{
	return min_t(u64, RS_TX_GROW_MAX,
		     (u64)rs_dev_seg_max(rs->dev) * RS_RING_SEGS);
}

/* Send slots a move needs: the LOCAL_INV and a REG_MR per segment. */
static u32 rs_tx_grow_wrs(struct rs_sock *rs, u32 size)
{
	return 1 + DIV_ROUND_UP(size, rs_dev_seg_max(rs->dev));
}

/*
 * Ring memory is scarce: the rings of all connections take more than
 * three quarters of mem_max (as tcp_mem's pressure threshold lies below
 * its limit). Send rings then neither grow nor stay grown.
 */
bool rs_mem_pressure(void)
{
	return atomic_long_read(&rs_mem_used) >
	       (long)(min_t(unsigned long, READ_ONCE(rs_mem_max), LONG_MAX) /
		      4 * 3);
}

/* SO_SNDBUF, set before connect() or after, ends autotuning (TCP's too). */
static bool rs_tx_autotuned(const struct rs_sock *rs)
{
	return !rs->sndbuf_ring && !(rs->sk.sk_userlocks & SOCK_SNDBUF_LOCK);
}

/* The size to grow to now, or 0. Under lock_sock(). */
static u32 rs_tx_grow_size(struct rs_sock *rs)
{
	u32 size = 0;

	if (!rs_tx_autotuned(rs) || rs->tx_new.vaddr || rs->tx_old.vaddr ||
	    (rs->tx_grow_next && time_before(jiffies, rs->tx_grow_next)) ||
	    rs_mem_pressure())
		return 0;
	spin_lock_bh(&rs->lock);
	if (rs->transport && !rs->dead)
		size = rs_flow_tx_grow_size(&rs->flow, rs_tx_grow_max(rs));
	if (size && rs_sq_free(rs) < rs_tx_grow_wrs(rs, size))
		size = 0;	/* the writer waits for room, as before */
	spin_unlock_bh(&rs->lock);
	return size;
}

/*
 * A ring that replaces another: size bytes in MRs of seg bytes, counted
 * in mem_max and charged to the owner's memory cgroup. Growing is optional,
 * so it fails rather than reclaim hard or OOM-kill. Under tlock: 0, or
 * an errno with nothing left behind.
 */
int rs_ring_new(struct rs_sock *rs, struct rs_ring *r, u32 size,
		enum dma_data_direction dir, u32 seg)
{
	const struct rs_ring *cur = dir == DMA_FROM_DEVICE ? &rs->rx : &rs->tx;
	struct mem_cgroup *old;
	int ret;

	if (!rs->transport || READ_ONCE(rs->dead))
		return -ECONNABORTED;
	/*
	 * A smaller ring (memory pressure) frees more than it takes: it may
	 * pass mem_max for the while, or a host at its limit (the case it
	 * is for) could never shrink one.
	 */
	if (size < cur->size)
		rs_mem_charge_force(size);
	else if (!rs_mem_charge(size))
		return -ENOBUFS;
	old = rs_set_active_memcg(rs->memcg);
	ret = rs_ring_alloc(r, size, __GFP_NORETRY | __GFP_NOWARN);
	rs_set_active_memcg(old);
	if (!ret)
		ret = rs_ring_map(r, rs->dev, rs->pd, dir, seg);
	if (ret) {
		rs_ring_unmap(r, rs->dev, dir);
		rs_ring_free(r);
		memset(r, 0, sizeof(*r));
		rs_mem_uncharge(size);
		return ret;
	}
	rs->mem += size;
	return 0;
}

/*
 * Step 2, under tlock: 0 once the work requests are posted and pushes
 * pause; -EAGAIN when they could not be (no send slot, or the connection
 * died): the ring is still ours; -EIO when the device refused them: the
 * connection is aborted and the ring is the teardown's.
 */
static int rs_tx_new_post(struct rs_sock *rs)
{
	struct ib_reg_wr wr[RS_RING_SEGS] = {};
	struct rs_ring *r = &rs->tx_new;
	struct ib_send_wr inv = {};
	unsigned int i;
	int ret = -EAGAIN;

	inv.opcode = IB_WR_LOCAL_INV;
	inv.ex.invalidate_rkey = r->mr[0]->rkey;
	inv.next = &wr[0].wr;
	ib_update_fast_reg_key(r->mr[0], ib_inc_rkey(r->mr[0]->rkey));
	for (i = 0; i < r->nseg; i++) {
		wr[i].wr.opcode = IB_WR_REG_MR;
		wr[i].wr.next = i + 1 < r->nseg ? &wr[i + 1].wr : NULL;
		wr[i].mr = r->mr[i];
		wr[i].key = r->mr[i]->rkey;
		wr[i].access = IB_ACCESS_LOCAL_WRITE;
	}
	spin_lock_bh(&rs->lock);
	if (!rs->dead && rs_sq_free(rs) > r->nseg) {
		/* signalled: its completion lets the ring it replaces go */
		ret = rs_post_chain(rs, &inv, &rs->tx_reg, RS_CHAIN_TXGROW);
		rs->flow.tx_paused = !ret;
		rs->tx_old_seq = rs->sq_posted;
	}
	spin_unlock_bh(&rs->lock);
	return ret;
}

/* A ring that the HCA cannot reach (any more): unmap, free, uncharge. */
void rs_ring_drop(struct rs_sock *rs, struct rs_ring *r,
		  enum dma_data_direction dir)
{
	u32 size = r->size;

	rs_ring_unmap(r, rs->dev, dir);
	rs_ring_free(r);
	memset(r, 0, sizeof(*r));
	rs->mem -= size;
	rs_mem_uncharge(size);
}

/* Steps 3 and 4, under tlock and lock_sock(), pushes paused. */
static void rs_tx_swap(struct rs_sock *rs)
{
	/* tx_sent cannot move while paused, nor tx_head without lock_sock */
	rs_ring_move(&rs->tx_new, &rs->tx, READ_ONCE(rs->flow.tx_sent),
		     READ_ONCE(rs->flow.tx_head));
	spin_lock_bh(&rs->lock);
	rs->tx_old = rs->tx;
	rs->tx_old_end = rs->flow.tx_sent;
	rs->tx = rs->tx_new;
	memset(&rs->tx_new, 0, sizeof(rs->tx_new));
	rs_flow_tx_resize(&rs->flow, rs->tx.size);
	rs->flow.tx_paused = false;
	rs_push_locked(rs);
	spin_unlock_bh(&rs->lock);
	/* getsockopt(SO_SNDBUF) reports the autotuned size, as TCP's */
	if (READ_ONCE(rs->sk.sk_sndbuf) < (int)rs->tx.size)
		WRITE_ONCE(rs->sk.sk_sndbuf, rs->tx.size);
}

/*
 * Step 5: free the old ring once no work request can use it any more.
 * Under tlock (the teardown may have unmapped it already: then it leaves
 * the pages to rs_transport_free_rings()).
 */
static void rs_tx_reap_tlocked(struct rs_sock *rs)
{
	struct rs_ring old = {};

	spin_lock_bh(&rs->lock);
	if (rs->transport && rs_tx_reapable(rs)) {
		old = rs->tx_old;
		memset(&rs->tx_old, 0, sizeof(rs->tx_old));
	}
	spin_unlock_bh(&rs->lock);
	if (old.vaddr)
		rs_ring_drop(rs, &old, DMA_TO_DEVICE);
}

/*
 * Move the send ring to a new one of size bytes (steps 1-5). Under
 * lock_sock(); false when it could not be done now.
 */
static bool rs_tx_move(struct rs_sock *rs, u32 size)
{
	int ret;

	/* a teardown may hold tlock while it drains: SIGKILL ends the wait */
	if (mutex_lock_killable(&rs->tlock))
		return false;
	ret = rs_ring_new(rs, &rs->tx_new, size, DMA_TO_DEVICE,
			  rs_dev_seg_max(rs->dev));
	if (!ret) {
		ret = rs_tx_new_post(rs);
		if (ret == -EAGAIN)
			rs_ring_drop(rs, &rs->tx_new, DMA_TO_DEVICE);
	}
	if (!ret) {
		rs_tx_swap(rs);
		rs_tx_reap_tlocked(rs);
	} else {
		rs->tx_grow_next = jiffies + RS_TX_GROW_RETRY;
	}
	mutex_unlock(&rs->tlock);
	if (ret)
		return false;
	trace_rdmastream_tx_resize(&rs->sk, rs->tx.size);
	return true;
}

/* An empty grown ring, under pressure: back to RS_TX_START. */
static bool rs_tx_shrink_wanted(struct rs_sock *rs)
{
	bool want;

	if (!rs_tx_autotuned(rs) || rs->tx_new.vaddr || rs->tx_old.vaddr ||
	    (rs->tx_grow_next && time_before(jiffies, rs->tx_grow_next)) ||
	    !rs_mem_pressure())
		return false;
	spin_lock_bh(&rs->lock);
	want = rs->transport && !rs->dead &&
	       rs->flow.tx_head == rs->flow.tx_done &&
	       rs_sq_free(rs) >= rs_tx_grow_wrs(rs, RS_TX_START);
	spin_unlock_bh(&rs->lock);
	return want;
}

/*
 * At a send: free the ring of an earlier move once it may go, and give
 * back a grown ring that is empty while ring memory is scarce (TCP
 * moderates its send buffer under memory pressure too).
 */
void rs_tx_tune(struct rs_sock *rs)
{
	if (likely(!rs->tx_old.vaddr && rs->tx.size <= RS_TX_START))
		return;
	if (rs->tx_old.vaddr && !mutex_lock_killable(&rs->tlock)) {
		rs_tx_reap_tlocked(rs);
		mutex_unlock(&rs->tlock);
	}
	if (rs->tx.size > RS_TX_START && rs_tx_shrink_wanted(rs))
		rs_tx_move(rs, RS_TX_START);
}

/*
 * A writer found the send ring full: grow it if that helps (see the top
 * of this file). True when it grew; false when the writer should wait
 * for room as before. Under lock_sock(); it never sleeps on the network,
 * so non-blocking senders grow too.
 */
bool rs_tx_grow(struct rs_sock *rs)
{
	u32 size;

	rs_tx_tune(rs);
	size = rs_tx_grow_size(rs);
	if (!size || !rs_tx_move(rs, size))
		return false;
	rs_write_space(&rs->sk);
	return true;
}

/*
 * The HCA is done with the send ring's bytes [from, to): hand them back
 * to the CPU, in the old ring below tx_old_end. Under rs->lock.
 */
void rs_tx_sync_done_locked(struct rs_sock *rs, u64 from, u64 to)
{
	struct rs_ring *r;
	u64 end;

	while (from < to) {
		r = &rs->tx;
		end = to;
		if (rs->tx_old.vaddr && from < rs->tx_old_end) {
			r = &rs->tx_old;
			end = min(to, rs->tx_old_end);
		}
		rs_ring_sync(r, (u32)from & (r->size - 1), (u32)(end - from),
			     true);
		from = end;
	}
}
