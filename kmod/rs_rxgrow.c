// SPDX-License-Identifier: GPL-2.0
/*
 * Stream buffer autotuning. TCP grows its receive window to what arrives
 * in a round trip; a fixed stream buffer caps a connection at one buffer
 * per round trip (256 KiB per 48 ms is 5 MB/s, whatever the link). So a
 * receiver whose peer wrote at least half the buffer in the last round
 * trip (rs_flow_rx_rate(), with the round trip the receiver itself sees:
 * from a window announcement to the bytes that fill it) offers the peer
 * a buffer twice the size, up to
 * RS_RX_GROW_MAX and what one MR maps (the peer knows a buffer by one
 * address and rkey). SO_RCVBUF set by the application before connect()
 * fixes the size; set later, it caps the growth (rs_rx_grow_max()). Both
 * ends must speak RING (CM flag RS_CM_F_RING). Under memory pressure
 * (rs_mem_pressure()) nothing grows, and a grown buffer moves back to
 * RS_RX_START the same way when both ends set RS_CM_F_SHRINK: the bytes
 * still unread in the old buffer then count against the new window, so
 * the peer writes nothing until the reader has made room.
 *
 * The move, by the reader at the end of a recvmsg (lock_sock(), tlock),
 * never waiting for the network:
 *  1. allocate and map the new buffer into rs->rx_new, counted in mem_max
 *     and charged to the owner's memory cgroup (rs_ring_new());
 *  2. under rs->lock, post a LOCAL_INV and its REG_MR with remote write
 *     (the LOCAL_INV keeps rxe from running the REG_MR twice, as in
 *     rs_txgrow.c), and RING with its address, rkey and size behind them;
 *  3. the peer answers RING_ACK, naming the stream byte from which it
 *     writes the new buffer (at its offset modulo the new size): RC
 *     delivers in order, so every byte before it has arrived in the old
 *     buffer, and the completion handler checks it is rx_prod. From then
 *     on rs_rx_ring() finds each byte's buffer by its offset, and reads
 *     stop at the switch (rs_flow_rx_piece());
 *  4. once every byte of the old buffer is read, the reader posts a
 *     signalled LOCAL_INV of its rkey and makes the new buffer rs->rx; the
 *     old one waits in rs->rx_old, where the peer may still write;
 *  5. once the LOCAL_INV has completed (sq_done reaches rx_old_seq) the
 *     peer can reach it no more: the next recvmsg frees it.
 * Steps 4 and 5 need no recvmsg: when the RING_ACK finds every old byte
 * read, or the LOCAL_INV completes, the completion handler queues
 * rx_tune_work, which does them as the reader would.
 * The teardown's drain fences whatever is left: rs_transport_destroy()
 * deregisters rx_new and rx_old and rs_transport_free_rings() frees them
 * with the rest, after any unread bytes have had their chance.
 */
#include "rs.h"

/*
 * The most the stream buffer may grow to: one MR (the peer knows a buffer
 * by one address and rkey), at most RS_RX_GROW_MAX, and the application's
 * SO_RCVBUF if it set one. Set before connect(), SO_RCVBUF sized the
 * buffer (rs_rx_start()), which never grows then; set later (on an
 * accepted socket, say) it caps the growth, as it clamps TCP's window,
 * rather than holding the buffer at the 64 KiB it started with.
 */
static u32 rs_rx_grow_max(struct rs_sock *rs)
{
	u32 max = min_t(u32, RS_RX_GROW_MAX, rs_dev_ring_max(rs->dev));

	if (unlikely(rs->sk.sk_userlocks & SOCK_RCVBUF_LOCK))
		max = rs_ring_size(READ_ONCE(rs->sk.sk_rcvbuf), max);
	return max;
}

/* The stream buffer may grow now, and nobody asked yet. Under rs->lock. */
static bool rs_rx_growing(struct rs_sock *rs)
{
	const struct rs_flow *f = &rs->flow;

	return !rs->rx_grow_want && f->rx_grow == RS_RXG_NONE && f->ring_ok &&
	       f->rx_size < rs_rx_grow_max(rs);
}

/*
 * Indirect bytes arrived: does the rate they come at ask for a bigger
 * buffer? Under rs->lock, in the completion handler.
 */
void rs_rx_rate_locked(struct rs_sock *rs)
{
	struct rs_flow *f = &rs->flow;

	if (likely(!rs_rx_growing(rs)))
		return;
	if (rs_flow_rx_rate(f, div_u64(ktime_get_ns(), NSEC_PER_USEC)))
		rs->rx_grow_want = true;
}

/* A message announced our window: time how soon the peer fills it. */
void rs_rx_announced_locked(struct rs_sock *rs)
{
	if (unlikely(rs_rx_growing(rs) && !rs->flow.rx_edge_us))
		rs_flow_rx_rtt_start(&rs->flow,
				     div_u64(ktime_get_ns(), NSEC_PER_USEC));
}

/* Step 5: free the old buffer once the peer cannot reach it. Under tlock. */
static void rs_rx_reap_tlocked(struct rs_sock *rs)
{
	struct rs_ring old = {};

	spin_lock_bh(&rs->lock);
	if (rs->transport && rs->rx_old.vaddr &&
	    rs->sq_done >= rs->rx_old_seq) {
		old = rs->rx_old;
		memset(&rs->rx_old, 0, sizeof(rs->rx_old));
	}
	spin_unlock_bh(&rs->lock);
	if (old.vaddr)
		rs_ring_drop(rs, &old, DMA_FROM_DEVICE);
}

/*
 * Step 4: every byte of the old buffer is read. Invalidate its rkey and
 * make the new buffer rs->rx. Under tlock; nothing happens when the send
 * queue is full (the next recvmsg tries again) or the connection is dead
 * (the teardown frees both).
 */
static void rs_rx_retire_tlocked(struct rs_sock *rs)
{
	struct ib_send_wr inv = {};

	spin_lock_bh(&rs->lock);
	if (!rs->transport || rs->dead || rs->rx_old.vaddr ||
	    !rs_flow_rx_retire_due(&rs->flow) || !rs_sq_free(rs))
		goto out;
	inv.opcode = IB_WR_LOCAL_INV;
	inv.ex.invalidate_rkey = rs->rx.mr[0]->rkey;
	if (rs_post_chain(rs, &inv, &rs->rx_inv, RS_CHAIN_RXGROW))
		goto out;	/* aborted: both buffers are the teardown's */
	rs->rx_old_seq = rs->sq_posted;
	rs->rx_old = rs->rx;
	rs->rx = rs->rx_new;
	memset(&rs->rx_new, 0, sizeof(rs->rx_new));
	rs_flow_rx_retired(&rs->flow);
	/* getsockopt(SO_RCVBUF) reports the autotuned size, as TCP's */
	if (READ_ONCE(rs->sk.sk_rcvbuf) < (int)rs->rx.size)
		WRITE_ONCE(rs->sk.sk_rcvbuf, rs->rx.size);
out:
	spin_unlock_bh(&rs->lock);
}

/*
 * Under memory pressure a grown stream buffer goes back to RS_RX_START,
 * as TCP's receive buffer is pruned (unless SO_RCVBUF set the size, and
 * not after the peer's FIN). Cheap: at the end of every recvmsg, under
 * lock_sock().
 */
static bool rs_rx_shrink_wanted(struct rs_sock *rs)
{
	return READ_ONCE(rs->flow.rx_size) > RS_RX_START &&
	       READ_ONCE(rs->flow.shrink_ok) && !rs->rcvbuf_ring &&
	       !(rs->sk.sk_userlocks & SOCK_RCVBUF_LOCK) &&
	       !READ_ONCE(rs->fin_rcvd) && !rs->rx_new.vaddr &&
	       !rs->rx_old.vaddr &&
	       !(rs->rx_grow_next && time_before(jiffies, rs->rx_grow_next)) &&
	       rs_mem_pressure();
}

/*
 * The size to move to now, or 0: smaller when shrink (decided once, by
 * rs_rx_tune()), else bigger unless memory is short. Under tlock.
 */
static u32 rs_rx_grow_size(struct rs_sock *rs, bool shrink)
{
	u32 size = 0;

	if (rs->rx_new.vaddr || rs->rx_old.vaddr ||
	    (!shrink && rs_mem_pressure()) ||
	    (rs->rx_grow_next && time_before(jiffies, rs->rx_grow_next)))
		return 0;
	spin_lock_bh(&rs->lock);
	if (rs->transport && !rs->dead && !rs->fin_rcvd &&
	    rs_sq_free(rs) > 2)
		size = shrink ? rs_flow_rx_shrink_size(&rs->flow, RS_RX_START) :
		       rs_flow_rx_grow_size(&rs->flow, rs_rx_grow_max(rs));
	spin_unlock_bh(&rs->lock);
	return size;
}

/*
 * Step 2: register rx_new and offer it. 0 once posted; -EAGAIN when it
 * could not be (the buffer is still ours); -EIO when the device refused
 * the chain (aborted: the buffer is the teardown's).
 */
static int rs_rx_offer(struct rs_sock *rs)
{
	struct ib_mr *mr = rs->rx_new.mr[0];
	struct ib_send_wr inv = {};
	struct ib_reg_wr reg = {};
	int ret = -EAGAIN;

	inv.opcode = IB_WR_LOCAL_INV;
	inv.ex.invalidate_rkey = mr->rkey;
	inv.next = &reg.wr;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	reg.wr.opcode = IB_WR_REG_MR;
	reg.mr = mr;
	reg.key = mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	spin_lock_bh(&rs->lock);
	if (!rs->dead && rs->flow.rx_grow == RS_RXG_NONE && rs_sq_free(rs) > 2) {
		ret = rs_post_chain(rs, &inv, NULL, RS_CHAIN_RXGROW);
		if (!ret) {
			rs_flow_rx_offer(&rs->flow, rs->rx_new.size);
			rs_push_locked(rs);	/* the RING, behind them */
		}
	}
	spin_unlock_bh(&rs->lock);
	return ret;
}

/* Steps 1 and 2, for a bigger buffer or a smaller one. Under tlock. */
static void rs_rx_grow_tlocked(struct rs_sock *rs, bool shrink)
{
	u32 size = rs_rx_grow_size(rs, shrink);
	int ret;

	WRITE_ONCE(rs->rx_grow_want, false);
	if (!size)
		return;
	ret = rs_ring_new(rs, &rs->rx_new, size, DMA_FROM_DEVICE, size);
	if (!ret) {
		ret = rs_rx_offer(rs);
		if (ret == -EAGAIN)
			rs_ring_drop(rs, &rs->rx_new, DMA_FROM_DEVICE);
	}
	if (ret) {
		rs->rx_grow_next = jiffies + RS_TX_GROW_RETRY;
		return;
	}
	trace_rdmastream_rx_resize(&rs->sk, size);
}

/*
 * At the end of a recvmsg: free a buffer read out, retire one whose bytes
 * are all read, grow when the rate asked for it, and shrink under memory
 * pressure. Under lock_sock().
 */
void rs_rx_tune(struct rs_sock *rs)
{
	bool retire = rs->rx_new.vaddr && rs_flow_rx_retire_due(&rs->flow);
	bool shrink = rs_rx_shrink_wanted(rs);

	if (likely(!READ_ONCE(rs->rx_grow_want) && !rs->rx_old.vaddr &&
		   !retire && !shrink))
		return;
	/* torn down: the buffers are the teardown's, and stay till the end */
	if (!READ_ONCE(rs->transport) || READ_ONCE(rs->dead))
		return;
	/* a teardown may hold tlock while it drains: SIGKILL ends the wait */
	if (mutex_lock_killable(&rs->tlock))
		return;
	if (rs->rx_old.vaddr)
		rs_rx_reap_tlocked(rs);
	if (retire)
		rs_rx_retire_tlocked(rs);
	if (rs->rx_old.vaddr)
		rs_rx_reap_tlocked(rs);
	if (shrink || READ_ONCE(rs->rx_grow_want))
		rs_rx_grow_tlocked(rs, shrink);
	mutex_unlock(&rs->tlock);
}

/*
 * A RING_ACK came and no byte of the old buffer is left to read (it may
 * be retired), or its LOCAL_INV has completed (it may be freed). Under
 * rs->lock.
 */
bool rs_rx_settle_due_locked(struct rs_sock *rs)
{
	if (rs->rx_old.vaddr)
		return rs->sq_done >= rs->rx_old_seq;
	return rs->rx_new.vaddr && rs->flow.rx_grow == RS_RXG_SWITCHED &&
	       rs_flow_rx_retire_due(&rs->flow);
}

/*
 * The completion handler found rs_rx_settle_due_locked(): the next
 * recvmsg would retire or free the old buffer, but a connection that has
 * gone quiet (say right after a shrink) may not receive again for long.
 * The work does it, and what else rs_rx_tune() finds to do; a retire it
 * could not post (no send slot) comes due again at the next completion.
 * Under rs->lock; the work holds a reference on the socket.
 */
void rs_rx_tune_later_locked(struct rs_sock *rs)
{
	sock_hold(&rs->sk);
	if (!queue_work(rs_tune_wq, &rs->rx_tune_work))
		sock_put(&rs->sk);
}

void rs_rx_tune_work(struct work_struct *work)
{
	struct rs_sock *rs = container_of(work, struct rs_sock, rx_tune_work);
	struct sock *sk = &rs->sk;

	/*
	 * as a recvmsg would end: a shrink that the memory pressure asked
	 * for while this move was under way starts here too
	 */
	lock_sock(sk);
	rs_rx_tune(rs);
	release_sock(sk);
	sock_put(sk);
}

/*
 * RING from the peer: its bigger buffer. The address and rkey are kept
 * until our RING_ACK makes them the ones WRITEs use (rs_ctrl_sent()). The
 * peer's HCA checks every WRITE against the rkey; we only check that the
 * size is plausible. Under rs->lock.
 */
bool rs_ctrl_ring(struct rs_sock *rs, const struct rs_ctl *m)
{
	if (!rs->peer_ready || !rs_flow_on_ring(&rs->flow, be32_to_cpu(m->len)))
		return false;
	rs->peer_new_addr = be64_to_cpu(m->addr);
	rs->peer_new_rkey = be32_to_cpu(m->rkey);
	return true;
}
