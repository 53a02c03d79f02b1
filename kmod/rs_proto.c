// SPDX-License-Identifier: GPL-2.0
/*
 * rdmastream protocol core; see rs_proto.h. No kernel dependencies.
 */
#include "rs_proto.h"

static u32 rs_min(u32 a, u32 b)
{
	return a < b ? a : b;
}

void rs_flow_init(struct rs_flow *f, u32 tx_size, u32 rx_size, u32 nr_recv,
		  u32 max_chunk)
{
	*f = (struct rs_flow){
		.tx_size = tx_size,
		.rx_size = rx_size,
		.nr_recv = nr_recv,
		.max_chunk = max_chunk,
		.rx_switch = RS_RX_NO_SWITCH,
	};
}

void rs_flow_set_peer(struct rs_flow *f, u32 peer_size, u32 peer_recv)
{
	f->peer_size = peer_size;
	f->peer_recv = peer_recv;
	f->credits = peer_recv;
}

/* Round a requested buffer size to a power of two in [RS_RING_MIN, max]. */
u32 rs_ring_size(u64 want, u32 max)
{
	u32 size = RS_RING_MIN;

	if (max > RS_RING_MAX)
		max = RS_RING_MAX;
	while (size < want && size < max)
		size <<= 1;
	while (size > max && size > RS_RING_MIN)
		size >>= 1;
	return size;
}

/*
 * The size to grow the send ring to, at most max, when a writer finds it
 * full, or 0 to wait for room instead. Two cases are worth memory:
 *  - the ring is smaller than the peer's stream buffer: it, not the
 *    window, bounds the bytes in flight, so a bigger one moves more;
 *  - the peer's full buffer holds the queued bytes back: the application
 *    may well write a whole request before it reads the reply, as TCP's
 *    autotuned send buffer lets it (up to 4 MiB by default).
 * A ring full of bytes in flight into an open window waits: the device,
 * not the buffer, is what limits that sender.
 */
u32 rs_flow_tx_grow_size(const struct rs_flow *f, u32 max)
{
	u32 unsent = rs_flow_tx_unsent(f);

	if (f->tx_paused || !f->ready || f->tx_size >= max ||
	    rs_flow_tx_space(f))
		return 0;
	if (f->tx_size < f->peer_size ||
	    (unsent && rs_flow_peer_space(f) < unsent))
		return f->tx_size << 1;
	return 0;
}

/*
 * The send ring now has tx_size bytes, and holds the cursors' bytes at
 * the same offsets modulo the new size (the caller copied them there
 * while tx_paused kept them from being sent).
 */
void rs_flow_tx_resize(struct rs_flow *f, u32 tx_size)
{
	RS_STORE_ONCE(&f->tx_size, tx_size);	/* rs_tx_space() reads it */
	f->max_chunk = rs_min(tx_size / 2, RS_CHUNK_MAX);
}

/*
 * Credit rule: one slot is held back for messages that return credits, so
 * both sides can never be left without a slot to announce freed slots.
 */
bool rs_flow_may_send(const struct rs_flow *f, u32 returns)
{
	return f->credits >= 2 || (f->credits == 1 && returns > 0);
}

u32 rs_flow_take_owed(struct rs_flow *f)
{
	u32 n = rs_min(f->owed, RS_IMM_CREDIT_MAX);

	f->owed -= n;
	return n;
}

/*
 * The next WRITE of queued bytes into the peer's stream buffer, or false
 * when nothing may go now (nothing queued, or the peer's buffer is too full
 * to be worth a write: wait for a window update instead of dribbling).
 */
bool rs_flow_next_chunk(const struct rs_flow *f, struct rs_chunk *c)
{
	u32 unsent = rs_flow_tx_unsent(f);
	u32 space = rs_flow_peer_space(f);
	u32 len;

	if (!unsent || !f->peer_size || !space || f->tx_paused ||
	    rs_flow_capped(f))
		return false;
	if (space < unsent && space < f->peer_size / 8)
		return false;
	c->remote_off = (u32)f->tx_sent & (f->peer_size - 1);
	c->local_off = (u32)f->tx_sent & (f->tx_size - 1);
	len = rs_min(unsent, space);
	len = rs_min(len, f->max_chunk);
	if (f->write_cap)
		len = rs_min(len, f->write_cap);
	len = rs_min(len, f->peer_size - c->remote_off);
	if (f->tx_cap)
		len = rs_min(len, f->tx_cap - (u32)(f->tx_sent - f->tx_done));
	c->len = len;
	return true;
}

/*
 * The connection's share of the device's in-flight budget is used up:
 * its WRITEs' completions free it. A cap never stops the first byte: a
 * connection with nothing in flight may always send (tx_cap > 0).
 */
bool rs_flow_capped(const struct rs_flow *f)
{
	return f->tx_cap && (u32)(f->tx_sent - f->tx_done) >= f->tx_cap;
}

static bool rs_flow_ack_wanted(const struct rs_flow *f)
{
	return f->setup_sent &&
	       (rs_flow_ack_due(f) || rs_flow_window_due(f));
}

/*
 * The sender's decision, in priority order: queued data while window and
 * credits allow; FIN once every byte is posted; an ACK when slots are owed
 * or the window moved enough. Data and FIN return owed slots too, so an
 * ACK is only needed when nothing else goes out.
 */
enum rs_tx_action rs_flow_next(const struct rs_flow *f, struct rs_chunk *c)
{
	u32 returns = f->owed < RS_IMM_CREDIT_MAX ? f->owed : RS_IMM_CREDIT_MAX;
	bool may = rs_flow_may_send(f, returns);

	/* a RING_ACK goes before any byte written to the new buffer */
	if (f->setup_sent && (f->ring_wanted || f->ring_ack_wanted))
		return may ? RS_TX_RING : RS_TX_STALL_CREDIT;
	if (f->ready && rs_flow_next_chunk(f, c))
		return may ? RS_TX_DATA : RS_TX_STALL_CREDIT;
	if (f->ready && f->fin_wanted && !f->fin_sent && !rs_flow_tx_unsent(f))
		return may ? RS_TX_FIN : RS_TX_STALL_CREDIT;
	if (rs_flow_ack_wanted(f))
		return may ? RS_TX_ACK : RS_TX_STALL_CREDIT;
	if (f->ready && rs_flow_tx_unsent(f) && !f->tx_paused)
		return rs_flow_capped(f) && rs_flow_peer_space(f) ?
		       RS_TX_STALL_CAP : RS_TX_STALL_WINDOW;
	return RS_TX_NONE;
}

void rs_flow_chunk_sent(struct rs_flow *f, const struct rs_chunk *c)
{
	f->tx_sent += c->len;
	f->credits--;
}

void rs_flow_msg_sent(struct rs_flow *f)
{
	f->credits--;
}

u32 rs_imm_encode(u32 len, u32 credits)
{
	return (credits << RS_IMM_CREDIT_SHIFT) | (len & RS_IMM_LEN_MASK);
}

void rs_imm_decode(u32 imm, u32 *len, u32 *credits)
{
	*len = imm & RS_IMM_LEN_MASK;
	*credits = (imm >> RS_IMM_CREDIT_SHIFT) & RS_IMM_CREDIT_MAX;
}

/*
 * The immediate of the next indirect write, numbered when both sides
 * negotiated it. The caller posts the write in the same critical section,
 * so the numbers go out in the order of the writes.
 */
u32 rs_flow_imm(struct rs_flow *f, u32 len, u32 credits)
{
	u32 imm = rs_imm_encode(len, credits);

	if (f->wseq && (f->tx_writes & 1))
		imm |= RS_IMM_PARITY;
	f->tx_writes++;
	return imm;
}

/*
 * A write received: false if its number is not the next one. A write run
 * twice in a row by the transport (docs/lossy-links.md, the go-back-N
 * slip) carries the number of the one before; without the flag the bit
 * is reserved and must be 0.
 */
bool rs_flow_imm_ok(struct rs_flow *f, u32 imm)
{
	u32 want = f->wseq && (f->rx_writes & 1) ? RS_IMM_PARITY : 0;

	if ((imm & RS_IMM_PARITY) != want)
		return false;
	f->rx_writes++;
	return true;
}

/* Credits returned by the peer; false if it returns more than it has. */
bool rs_flow_on_credits(struct rs_flow *f, u32 credits)
{
	if (credits > f->peer_recv || f->credits + credits > f->peer_recv)
		return false;
	f->credits += credits;
	return true;
}

/* The peer wrote len bytes at rx_prod; false if that overran the ring. */
bool rs_flow_on_data(struct rs_flow *f, u32 len)
{
	if (!len || len > rs_flow_rx_room(f))
		return false;
	RS_STORE_RELEASE(&f->rx_prod, f->rx_prod + len);
	return true;
}

/* The peer has consumed up to cons; false if cons is not plausible. */
bool rs_flow_on_window(struct rs_flow *f, u64 cons)
{
	if (cons < f->peer_cons || cons > f->tx_sent)
		return false;
	f->peer_cons = cons;
	return true;
}

void rs_flow_on_recv_posted(struct rs_flow *f)
{
	f->owed++;
}

void rs_flow_consume(struct rs_flow *f, u32 len)
{
	RS_STORE_ONCE(&f->rx_cons, f->rx_cons + len);
}

/*
 * Enough slots are owed that the peer should hear of them now. An ACK
 * itself takes a slot, so a threshold of one would let two idle ends
 * bounce ACKs forever; from two up, pure ACK traffic dies out.
 */
bool rs_flow_ack_due(const struct rs_flow *f)
{
	u32 half = f->nr_recv / 2;

	return f->owed >= (half < 2 ? 2 : half);
}

/* Enough has been read that the peer should learn of the space. */
bool rs_flow_window_due(const struct rs_flow *f)
{
	return f->rx_cons - f->rx_announced >= f->rx_size / 4;
}

void rs_flow_window_sent(struct rs_flow *f)
{
	f->rx_announced = f->rx_cons;
}

/*
 * The receiver's own round trip estimate, as TCP's tcp_rcv_rtt_measure():
 * from a window announcement (any control message carries cons) to the
 * arrival of the bytes that fill three quarters of the window it opened.
 * A sender that the window holds back writes them as soon as the
 * announcement reaches it, so the time is a round trip; a sender slower
 * than that only makes it longer, so the least sample is kept. (The
 * sender's samples of its own work requests, rs_rtt.c, need an empty send
 * queue, which a busy connection in both directions rarely has.)
 */
void rs_flow_rx_rtt_start(struct rs_flow *f, u64 now_us)
{
	if (f->rx_edge_us)
		return;
	f->rx_edge = f->rx_cons + f->rx_size - f->rx_size / 4;
	f->rx_edge_us = now_us ?: 1;
}

static void rs_flow_rx_rtt_sample(struct rs_flow *f, u64 now_us)
{
	u64 us;

	if (!f->rx_edge_us || f->rx_prod < f->rx_edge)
		return;
	us = now_us > f->rx_edge_us ? now_us - f->rx_edge_us : 1;
	if (us > 0xffffffffULL)
		us = 0xffffffffULL;
	if (!f->rx_rtt_us || us < f->rx_rtt_us)
		f->rx_rtt_us = (u32)us;
	f->rx_edge_us = 0;
}

/*
 * Stream buffer growth, the receiver's side. As TCP grows its receive
 * window to what arrives in a round trip, a receiver whose peer wrote at
 * least half its buffer in the last round trip (rx_rtt_us) offers a
 * buffer twice the size: the window, not the link, was what limited the
 * peer. Called as data arrives (now_us, monotonic); true when a bigger
 * buffer is wanted. A round that lasted longer than four round trips saw
 * the link idle, and says nothing.
 */
bool rs_flow_rx_rate(struct rs_flow *f, u64 now_us)
{
	u64 took, got;
	u32 rtt_us;

	rs_flow_rx_rtt_sample(f, now_us);
	rtt_us = f->rx_rtt_us;
	if (!rtt_us)
		return false;
	if (!f->rx_mark_us) {
		f->rx_mark = f->rx_prod;
		f->rx_mark_us = now_us ?: 1;
		return false;
	}
	took = now_us - f->rx_mark_us;
	if (took < rtt_us)
		return false;
	got = f->rx_prod - f->rx_mark;
	f->rx_mark = f->rx_prod;
	f->rx_mark_us = now_us ?: 1;
	if (took > 4ULL * rtt_us)
		return false;
	/* got per round trip (got * rtt / took) >= half the buffer */
	return got >= (u64)f->rx_size * took / (2ULL * rtt_us);
}

/* The size to offer next, at most max, or 0: none, or one under way. */
u32 rs_flow_rx_grow_size(const struct rs_flow *f, u32 max)
{
	if (!f->ring_ok || !f->setup_sent || f->rx_grow != RS_RXG_NONE ||
	    f->rx_size >= max || f->rx_size >= RS_RING_MAX)
		return 0;
	return f->rx_size << 1;
}

/*
 * Under memory pressure: the size to shrink a grown buffer to (size, the
 * one it started with), or 0: not grown, a move under way, or a peer
 * that takes no smaller RING. Bytes still unread in the old buffer count
 * against the new one's window (rs_flow_rx_room()), so the peer writes
 * no more than it holds.
 */
u32 rs_flow_rx_shrink_size(const struct rs_flow *f, u32 size)
{
	if (!f->ring_ok || !f->shrink_ok || !f->setup_sent ||
	    f->rx_grow != RS_RXG_NONE || f->rx_size <= size ||
	    size < RS_RING_MIN || (size & (size - 1)))
		return 0;
	return size;
}

/* A buffer of size bytes is registered: RING goes to the peer next. */
void rs_flow_rx_offer(struct rs_flow *f, u32 size)
{
	f->rx_new_size = size;
	f->rx_grow = RS_RXG_OFFERED;
	f->ring_wanted = true;
}

/*
 * RING_ACK: the peer writes the new buffer from stream byte at on, and
 * every byte before it has arrived (RC delivers in order: its WRITEs
 * came before this message), so at must be rx_prod. False if it is not,
 * or if no RING went out. The window the peer may fill is the new size
 * from then on: bytes at or past at land at their offset modulo it.
 */
bool rs_flow_on_ring_ack(struct rs_flow *f, u64 at)
{
	if (f->rx_grow != RS_RXG_OFFERED || f->ring_wanted || at != f->rx_prod)
		return false;
	RS_STORE_ONCE(&f->rx_switch, at);
	f->rx_grow = RS_RXG_SWITCHED;
	RS_STORE_ONCE(&f->rx_size, f->rx_new_size);
	return true;
}

/* Of len bytes from stream byte off, how many lie in the same buffer. */
u32 rs_flow_rx_piece(const struct rs_flow *f, u64 off, u32 len)
{
	u64 sw = RS_LOAD_ONCE(&f->rx_switch);

	if (off < sw && sw - off < len)
		return (u32)(sw - off);
	return len;
}

/* Every byte of the old buffer has been read: it may go. */
bool rs_flow_rx_retire_due(const struct rs_flow *f)
{
	return f->rx_cons >= RS_LOAD_ONCE(&f->rx_switch);
}

/* The old buffer is gone: the next growth may start. */
void rs_flow_rx_retired(struct rs_flow *f)
{
	RS_STORE_ONCE(&f->rx_switch, RS_RX_NO_SWITCH);
	f->rx_grow = RS_RXG_NONE;
}

/*
 * The sender's side: RING offered another buffer of size bytes, bigger,
 * or smaller when both ends negotiated that. False if it is not
 * plausible (not a power of two, out of bounds, the same size, smaller
 * unnegotiated, or one is still to be answered). RING_ACK goes out next
 * (rs_flow_next()).
 */
bool rs_flow_on_ring(struct rs_flow *f, u32 size)
{
	if (!f->ring_ok || f->ring_ack_wanted || !f->peer_size ||
	    size == f->peer_size || (size < f->peer_size && !f->shrink_ok) ||
	    size < RS_RING_MIN || size > RS_RING_MAX || (size & (size - 1)))
		return false;
	f->peer_new_size = size;
	f->ring_ack_wanted = true;
	return true;
}

/*
 * RING_ACK is posted, naming tx_sent: from here on bytes go to the new
 * buffer, at their offset modulo its size. The window stays right: the
 * bytes the peer has not consumed yet, in either buffer, all lie in
 * [peer_cons, tx_sent), so the new buffer holds at most tx_sent -
 * peer_cons of them, which is what rs_flow_peer_space() counts (none
 * while a smaller buffer has fewer bytes than that).
 */
void rs_flow_ring_switch(struct rs_flow *f)
{
	f->peer_size = f->peer_new_size;
	f->ring_ack_wanted = false;
}
