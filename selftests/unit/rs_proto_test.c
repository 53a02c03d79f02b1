// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the rdmastream protocol core, run in user space.
 *
 * Besides small checks of the arithmetic, a randomized model runs two
 * endpoints against each other through a simulated RC connection: every
 * message consumes a receive slot on arrival (arriving with none posted
 * would be an RNR error, a protocol bug), RDMA WRITEs place their bytes
 * in the receiver's ring on arrival, and completions and the processing of
 * arrivals are delayed at random. Both directions carry a reference byte
 * stream written and read in random sizes; every byte is checked, and the
 * run must end with every byte and the FIN delivered (no deadlock).
 * Send rings grow at random, and so do stream buffers: RING offers a new
 * buffer, RING_ACK names the byte from which the sender writes there, and
 * each WRITE lands in the buffer the sender addressed (its rkey).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rs_proto.h"
#include "unit.h"

/* The byte at offset off of the stream of direction dir. */
static u8 stream_byte(int dir, u64 off)
{
	u64 x = off * 0x9e3779b97f4a7c15ULL + (u64)dir * 0x12345;

	return (u8)(x >> 29);
}

enum { M_DATA, M_FIN, M_ACK, M_RING, M_RING_ACK };

struct msg {
	int type;
	u32 len, credits, remote_off;
	unsigned int gen;	/* M_DATA: the buffer addressed (its rkey) */
	u64 cons, total, tx_end;
	u8 *payload;
};

#define QMAX 4096

struct queue {
	struct msg m[QMAX];
	unsigned int head, tail;
};

struct end {
	struct rs_flow f;
	u8 *tx, *rx;
	u32 slots_free;		/* receive slots posted and unused */
	struct queue unprocessed; /* arrived, completion not yet handled */
	struct queue completions; /* our sends completed, not yet handled */
	u64 written;		/* stream bytes handed to "sendmsg" */
	u64 read;		/* stream bytes checked by "recvmsg" */
	u64 limit;		/* stream length for this run */
	bool fin_rcvd;
	u32 grow_max;		/* the send ring may grow to this */
	unsigned int grows;
	/* stream buffers: rx (generation rx_gen, rx_cur bytes), rx_new */
	u8 *rx_new;
	u32 rx_cur;
	unsigned int rx_gen;
	unsigned int peer_gen;	/* the peer buffer our WRITEs address */
	u32 rx_max;		/* the stream buffer may grow to this */
	unsigned int rx_grows;
	unsigned int rx_shrinks;
};

static bool q_empty(struct queue *q)
{
	return q->head == q->tail;
}

static int q_push(struct queue *q, struct msg *m)
{
	if (!CHECK(q->tail - q->head < QMAX, "queue overflow"))
		return -1;
	q->m[q->tail++ % QMAX] = *m;
	return 0;
}

static struct msg q_pop(struct queue *q)
{
	return q->m[q->head++ % QMAX];
}

static struct queue wire[2];	/* wire[d]: in flight from end d */
static struct end ends[2];
static unsigned long total_grows, total_rx_grows, total_rx_shrinks;

/* Post everything the core allows, as rs_push_locked() does. */
static int push(int d)
{
	struct end *e = &ends[d];
	struct rs_flow *f = &e->f;
	struct rs_chunk c;
	struct msg m;
	int guard = 0;

	for (;;) {
		enum rs_tx_action act = rs_flow_next(f, &c);

		if (!CHECK(++guard < 100000, "runaway loop"))
			return -1;
		memset(&m, 0, sizeof(m));
		switch (act) {
		case RS_TX_DATA:
			if (!CHECK(!f->tx_paused, "data sent while paused"))
				return -1;
			m.type = M_DATA;
			m.len = c.len;
			m.remote_off = c.remote_off;
			m.gen = e->peer_gen;
			m.payload = malloc(c.len);
			for (u32 i = 0; i < c.len; i++)
				m.payload[i] = e->tx[(c.local_off + i) &
						     (f->tx_size - 1)];
			m.credits = rs_flow_take_owed(f);
			rs_flow_chunk_sent(f, &c);
			m.tx_end = f->tx_sent;
			break;
		case RS_TX_FIN:
		case RS_TX_ACK:
			m.type = act == RS_TX_FIN ? M_FIN : M_ACK;
			m.credits = rs_flow_take_owed(f);
			m.cons = f->rx_cons;
			m.total = f->tx_head;
			m.tx_end = f->tx_sent;
			rs_flow_msg_sent(f);
			rs_flow_window_sent(f);
			if (act == RS_TX_FIN)
				f->fin_sent = true;
			break;
		case RS_TX_RING:
			m.credits = rs_flow_take_owed(f);
			m.cons = f->rx_cons;
			m.tx_end = f->tx_sent;
			if (f->ring_ack_wanted) {
				m.type = M_RING_ACK;
				m.total = f->tx_sent;
				rs_flow_ring_switch(f);
				e->peer_gen++;
			} else {
				m.type = M_RING;
				m.len = f->rx_new_size;
				f->ring_wanted = false;
			}
			rs_flow_msg_sent(f);
			rs_flow_window_sent(f);
			break;
		default:
			return 0;
		}
		if (q_push(&wire[d], &m))
			return -1;
	}
}

/* The head of wire[d] reaches the other end: slot consumed, data placed. */
static int arrive(int d)
{
	struct end *r = &ends[!d];
	struct msg m = q_pop(&wire[d]);

	if (!CHECK(r->slots_free > 0, "message arrived with no receive slot (RNR)"))
		return -1;
	r->slots_free--;
	if (m.type == M_DATA) {
		/* the HCA checks the rkey: one of the two registered buffers */
		u8 *buf = m.gen == r->rx_gen ? r->rx :
			  m.gen == r->rx_gen + 1 ? r->rx_new : NULL;
		u32 size = m.gen == r->rx_gen ? r->rx_cur : r->f.rx_new_size;

		if (!CHECK(buf, "WRITE to buffer %u, %u registered", m.gen,
			   r->rx_gen))
			return -1;
		if (!CHECK(m.remote_off + m.len <= size, "WRITE past the buffer"))
			return -1;
		for (u32 i = 0; i < m.len; i++)
			buf[m.remote_off + i] = m.payload[i];
		free(m.payload);
		m.payload = NULL;
	}
	if (q_push(&r->unprocessed, &m))
		return -1;
	return q_push(&ends[d].completions, &m);
}

/* The receive completion handler of end d. */
static int process(int d)
{
	struct end *e = &ends[d];
	struct msg m = q_pop(&e->unprocessed);
	struct rs_flow *f = &e->f;

	if (!CHECK(rs_flow_on_credits(f, m.credits), "credits beyond slots"))
		return -1;
	if (m.type == M_DATA) {
		if (!CHECK(rs_flow_on_data(f, m.len), "ring overrun"))
			return -1;
	} else {
		if (!CHECK(rs_flow_on_window(f, m.cons), "bad window %llu",
		      (unsigned long long)m.cons))
			return -1;
		if (m.type == M_FIN) {
			if (!CHECK(m.total == f->rx_prod, "FIN before data"))
				return -1;
			e->fin_rcvd = true;
		}
		if (m.type == M_RING &&
		    !CHECK(rs_flow_on_ring(f, m.len), "RING %u refused", m.len))
			return -1;
		if (m.type == M_RING_ACK &&
		    !CHECK(rs_flow_on_ring_ack(f, m.total), "RING_ACK %llu refused",
			   (unsigned long long)m.total))
			return -1;
	}
	e->slots_free++;		/* reposted at once */
	rs_flow_on_recv_posted(f);
	return push(d);
}

/* The send completion handler of end d. */
static int complete(int d)
{
	struct end *e = &ends[d];
	struct msg m = q_pop(&e->completions);

	if (m.tx_end > e->f.tx_done)
		e->f.tx_done = m.tx_end;
	return push(d);
}

/*
 * rs_tx_grow(): a writer found the ring full and the core wants it bigger.
 * Pushes pause (here for a random while, in the kernel while it copies)
 * and the unsent bytes move to their offsets in the new ring; bytes in
 * flight stay where they are (the kernel keeps the old ring until their
 * WRITEs complete; the model's WRITEs carry their bytes).
 */
static int grow_start(int d)
{
	struct rs_flow *f = &ends[d].f;

	if (!rs_flow_tx_grow_size(f, ends[d].grow_max))
		return 0;
	f->tx_paused = true;
	return 0;
}

static int grow_finish(int d)
{
	struct end *e = &ends[d];
	struct rs_flow *f = &e->f;
	u32 size = f->tx_size << 1;
	u8 *ring;

	if (!f->tx_paused)
		return 0;
	ring = calloc(1, size);
	for (u64 i = f->tx_sent; i < f->tx_head; i++)
		ring[i & (size - 1)] = e->tx[i & (f->tx_size - 1)];
	free(e->tx);
	e->tx = ring;
	rs_flow_tx_resize(f, size);
	if (!CHECK(f->max_chunk <= size / 2 && f->max_chunk <= RS_CHUNK_MAX,
		   "chunk %u for a ring of %u", f->max_chunk, size))
		return -1;
	f->tx_paused = false;
	e->grows++;
	return push(d);
}

static int app_write(int d)
{
	struct end *e = &ends[d];
	struct rs_flow *f = &e->f;
	u32 n = rs_flow_tx_space(f);
	u32 want = 1 + rnd(rnd(2) ? 64 : 3 * f->tx_size);

	if (f->tx_paused)
		return grow_finish(d);
	if (!n)
		return grow_start(d);

	if (n > want)
		n = want;
	if (n > e->limit - e->written)
		n = e->limit - e->written;
	for (u32 i = 0; i < n; i++)
		e->tx[(f->tx_head + i) & (f->tx_size - 1)] =
			stream_byte(d, e->written + i);
	e->written += n;
	f->tx_head += n;
	if (e->written == e->limit)
		f->fin_wanted = true;
	return push(d);
}

static int app_read(int d)
{
	struct end *e = &ends[d];
	struct rs_flow *f = &e->f;
	u32 n = rs_flow_rx_avail(f);
	u32 want = 1 + rnd(rnd(2) ? 100 : 2 * f->rx_size);

	if (n > want)
		n = want;
	/* a read stops at the old buffer's end, as rs_rx_copy() does */
	n = rs_flow_rx_piece(f, f->rx_cons, n);
	for (u32 i = 0; i < n; i++) {
		u64 o = f->rx_cons + i;
		u8 b = rs_flow_rx_in_new(f, o) ?
		       e->rx_new[o & (f->rx_size - 1)] :
		       e->rx[o & (e->rx_cur - 1)];

		if (!CHECK(b == stream_byte(!d, e->read + i),
		      "byte %llu of stream %d corrupt",
		      (unsigned long long)(e->read + i), !d))
			return -1;
	}
	e->read += n;
	rs_flow_consume(f, n);
	if (rs_flow_rx_retire_due(f)) {
		/* rs_rx_retire(): the old buffer goes, the new one is rx */
		free(e->rx);
		e->rx = e->rx_new;
		e->rx_new = NULL;
		e->rx_cur = f->rx_size;
		e->rx_gen++;
		rs_flow_rx_retired(f);
	}
	return push(d);
}

/* rs_rx_grow(): register a buffer twice the size and offer it. */
static int rx_grow(int d)
{
	struct end *e = &ends[d];
	u32 size = rs_flow_rx_grow_size(&e->f, e->rx_max);

	if (!size)
		return 0;
	if (!CHECK(size == e->f.rx_size * 2 && !e->rx_new, "grow to %u", size))
		return -1;
	e->rx_new = calloc(1, size);
	rs_flow_rx_offer(&e->f, size);
	e->rx_grows++;
	return push(d);
}

/*
 * rs_rx_grow() under memory pressure: offer a smaller buffer. The bytes
 * still unread in the old one may be more than it holds.
 */
static int rx_shrink(int d)
{
	struct end *e = &ends[d];
	u32 size = rs_flow_rx_shrink_size(&e->f, RS_RING_MIN << rnd(3));

	if (!size)
		return 0;
	if (!CHECK(size < e->f.rx_size && !e->rx_new, "shrink to %u", size))
		return -1;
	e->rx_new = calloc(1, size);
	rs_flow_rx_offer(&e->f, size);
	e->rx_shrinks++;
	return push(d);
}

static void setup(u32 seed)
{
	u32 rings[2], nrecv[2];
	bool ring_ok, shrink_ok;

	rng_state = 0x2545f4914f6cdd1dULL ^ ((u64)seed << 20) ^ seed;
	memset(wire, 0, sizeof(wire));
	ring_ok = rnd(4) != 0;	/* both ends negotiated RING, or neither */
	shrink_ok = ring_ok && rnd(2);	/* ...and shrinking */
	for (int d = 0; d < 2; d++) {
		rings[d] = RS_RING_MIN << rnd(4);
		nrecv[d] = RS_RECV_MIN + rnd(2) * rnd(61);
	}
	for (int d = 0; d < 2; d++) {
		struct end *e = &ends[d];
		u32 tx = RS_RING_MIN << rnd(4);

		free(e->tx);
		free(e->rx);
		free(e->rx_new);
		memset(e, 0, sizeof(*e));
		rs_flow_init(&e->f, tx, rings[d], nrecv[d],
			     1024 << rnd(8));
		rs_flow_set_peer(&e->f, rings[!d], nrecv[!d]);
		e->f.ready = true;
		e->f.setup_sent = true;
		e->tx = calloc(1, tx);
		e->rx = calloc(1, rings[d]);
		e->rx_cur = rings[d];
		e->f.ring_ok = ring_ok;
		e->f.shrink_ok = shrink_ok;
		e->rx_max = rings[d] << rnd(4);
		e->slots_free = nrecv[d];
		e->limit = rnd(4) ? rnd(rnd(8) ? 1 << 17 : 1 << 20) : rnd(64);
		e->f.fin_wanted = !e->limit;
		e->grow_max = rnd(2) ? tx : tx << rnd(5);
	}
}

static bool quiet(void)
{
	for (int d = 0; d < 2; d++)
		if (!q_empty(&wire[d]) || !q_empty(&ends[d].unprocessed) ||
		    !q_empty(&ends[d].completions))
			return false;
	return true;
}

static int step(void)
{
	int d = rnd(2);
	struct end *e = &ends[d];

	switch (rnd(6)) {
	case 0:
		if (!rnd(16))
			return rnd(3) ? rx_grow(d) : rx_shrink(d);
		return e->written < e->limit ? app_write(d) : 0;
	case 1:
		return app_read(d);
	case 2:
		return q_empty(&wire[d]) ? 0 : arrive(d);
	case 3:
		return q_empty(&e->unprocessed) ? 0 : process(d);
	case 4:
		if (q_empty(&e->completions))
			return grow_finish(d);
		return complete(d);
	default:
		/* a burst of network progress keeps runs short */
		for (int i = 0; i < 8 && !q_empty(&wire[d]); i++)
			if (arrive(d))
				return -1;
		return 0;
	}
}

static int run_model(u32 seed)
{
	int rounds;

	setup(seed);
	for (rounds = 0; rounds < 5000000; rounds++) {
		if (step())
			return -1;
		if (quiet() && ends[0].read == ends[1].limit &&
		    ends[1].read == ends[0].limit &&
		    ends[0].written == ends[0].limit &&
		    ends[1].written == ends[1].limit)
			break;
	}
	if (getenv("RS_UNIT_VERBOSE"))
		printf("# seed %u: %d rounds\n", seed, rounds);
	total_grows += ends[0].grows + ends[1].grows;
	total_rx_grows += ends[0].rx_grows + ends[1].rx_grows;
	total_rx_shrinks += ends[0].rx_shrinks + ends[1].rx_shrinks;
	if (!CHECK(rounds < 5000000, "seed %u: no quiescence (livelock)", seed))
		return -1;
	for (int d = 0; d < 2; d++) {
		/* drain: everything in flight, then the applications read */
		for (int i = 0; i < 100000 && !quiet(); i++)
			if (step())
				return -1;
		if (!CHECK(ends[d].written == ends[d].limit, "seed %u: writer %d stuck",
		      seed, d))
			return -1;
		if (!CHECK(ends[!d].read == ends[d].limit,
		      "seed %u: stream %d stuck at %llu of %llu", seed, d,
		      (unsigned long long)ends[!d].read,
		      (unsigned long long)ends[d].limit))
			return -1;
		if (!CHECK(ends[!d].fin_rcvd, "seed %u: no FIN on stream %d", seed, d))
			return -1;
	}
	return 0;
}

static int test_ring_size(void)
{
	if (!CHECK(rs_ring_size(0, 1 << 30) == RS_RING_MIN, "min"))
		return -1;
	if (!CHECK(rs_ring_size(212992, 1 << 30) == 256 << 10, "round up"))
		return -1;
	if (!CHECK(rs_ring_size(1 << 30, 2 << 20) == 2 << 20, "device limit"))
		return -1;
	if (!CHECK(rs_ring_size(1 << 30, 1 << 30) == RS_RING_MAX, "max"))
		return -1;
	if (!CHECK(rs_ring_size(100 << 10, 3 << 20) == 128 << 10, "pow2"))
		return -1;
	return 0;
}

static int test_imm(void)
{
	u32 len, cr;

	rs_imm_decode(rs_imm_encode(RS_IMM_LEN_MASK, RS_IMM_CREDIT_MAX),
		      &len, &cr);
	if (!CHECK(len == RS_IMM_LEN_MASK && cr == RS_IMM_CREDIT_MAX, "max"))
		return -1;
	rs_imm_decode(rs_imm_encode(1, 0), &len, &cr);
	if (!CHECK(len == 1 && cr == 0, "small"))
		return -1;
	if (!CHECK(!(rs_imm_encode(RS_IMM_LEN_MASK, RS_IMM_CREDIT_MAX) &
		RS_IMM_PARITY), "parity bit stays clear"))
		return -1;
	return 0;
}

/* Numbered writes: each one's parity differs from the one before. */
static int test_imm_parity(void)
{
	struct rs_flow tx, rx;
	u32 imm[4], len, cr;
	int i;

	rs_flow_init(&tx, 1 << 16, 1 << 16, 8, 1 << 14);
	rs_flow_init(&rx, 1 << 16, 1 << 16, 8, 1 << 14);
	/* not negotiated: the bit is never set, and refused when it is */
	for (i = 0; i < 3; i++)
		if (!CHECK(rs_flow_imm_ok(&rx, rs_flow_imm(&tx, 100, 3)),
			   "plain write accepted"))
			return -1;
	if (!CHECK(!rs_flow_imm_ok(&rx, 100 | RS_IMM_PARITY), "reserved bit"))
		return -1;
	rs_flow_init(&tx, 1 << 16, 1 << 16, 8, 1 << 14);
	rs_flow_init(&rx, 1 << 16, 1 << 16, 8, 1 << 14);
	tx.wseq = true;
	rx.wseq = true;
	for (i = 0; i < 4; i++)
		imm[i] = rs_flow_imm(&tx, 4096, RS_IMM_CREDIT_MAX);
	rs_imm_decode(imm[1], &len, &cr);
	if (!CHECK(len == 4096 && cr == RS_IMM_CREDIT_MAX, "fields kept"))
		return -1;
	if (!CHECK(!(imm[0] & RS_IMM_PARITY) && (imm[1] & RS_IMM_PARITY) &&
		   !(imm[2] & RS_IMM_PARITY), "alternating"))
		return -1;
	if (!CHECK(rs_flow_imm_ok(&rx, imm[0]) && rs_flow_imm_ok(&rx, imm[1]),
		   "in order"))
		return -1;
	/* imm[1] run a second time: its number is the one before imm[2]'s */
	if (!CHECK(!rs_flow_imm_ok(&rx, imm[1]), "a write run twice"))
		return -1;
	if (!CHECK(rs_flow_imm_ok(&rx, imm[2]), "the next one still fits"))
		return -1;
	/* a write skipped (imm[1] lost): imm[2] cannot follow imm[0] */
	rs_flow_init(&rx, 1 << 16, 1 << 16, 8, 1 << 14);
	rx.wseq = true;
	if (!CHECK(rs_flow_imm_ok(&rx, imm[0]) && !rs_flow_imm_ok(&rx, imm[2]),
		   "a write skipped"))
		return -1;
	return 0;
}

static int test_credits(void)
{
	struct rs_flow f;

	rs_flow_init(&f, 1 << 16, 1 << 16, 8, 1 << 14);
	rs_flow_set_peer(&f, 1 << 16, 8);
	if (!CHECK(f.credits == 8, "initial credits"))
		return -1;
	f.credits = 1;
	if (!CHECK(!rs_flow_may_send(&f, 0), "last slot held back"))
		return -1;
	if (!CHECK(rs_flow_may_send(&f, 1), "last slot returns credits"))
		return -1;
	if (!CHECK(!rs_flow_on_credits(&f, 8), "more than the peer has"))
		return -1;
	if (!CHECK(rs_flow_on_credits(&f, 7) && f.credits == 8, "return"))
		return -1;
	return 0;
}

static int test_window(void)
{
	struct rs_flow f;
	struct rs_chunk c;

	rs_flow_init(&f, 1 << 16, 1 << 16, 8, 1 << 20);
	rs_flow_set_peer(&f, 1 << 14, 8);
	f.ready = true;
	f.tx_head = 1 << 16;
	if (!CHECK(rs_flow_next(&f, &c) == RS_TX_DATA && c.len == 1 << 14,
	      "whole peer buffer"))
		return -1;
	rs_flow_chunk_sent(&f, &c);
	if (!CHECK(rs_flow_next(&f, &c) == RS_TX_STALL_WINDOW, "full"))
		return -1;
	if (!CHECK(!rs_flow_on_window(&f, f.tx_sent + 1), "beyond sent"))
		return -1;
	if (!CHECK(rs_flow_on_window(&f, 100), "small advance"))
		return -1;
	if (!CHECK(rs_flow_next(&f, &c) == RS_TX_STALL_WINDOW, "no dribbling"))
		return -1;
	if (!CHECK(rs_flow_on_window(&f, 4096), "advance"))
		return -1;
	if (!CHECK(rs_flow_next(&f, &c) == RS_TX_DATA && c.len == 4096 &&
	      c.remote_off == 0, "wraps to the start"))
		return -1;
	if (!CHECK(!rs_flow_on_data(&f, f.rx_size + 1), "overrun refused"))
		return -1;
	if (!CHECK(!rs_flow_on_data(&f, 0), "empty write refused"))
		return -1;
	return 0;
}

/*
 * The in-flight budget's share (tx_cap): chunks stop at it, the sender
 * stalls on it (not on the window) while the peer has room, and a
 * completion that frees bytes lets the next chunk go.
 */
static int test_cap(void)
{
	struct rs_flow f;
	struct rs_chunk c;

	rs_flow_init(&f, 1 << 16, 1 << 16, 8, 1 << 15);
	rs_flow_set_peer(&f, 1 << 16, 8);
	f.ready = true;
	f.tx_head = 1 << 16;
	if (!CHECK(!rs_flow_capped(&f), "no cap by default"))
		return -1;
	f.tx_cap = 12 << 10;
	if (!CHECK(rs_flow_next(&f, &c) == RS_TX_DATA && c.len == 12 << 10,
	      "a chunk stops at the cap"))
		return -1;
	rs_flow_chunk_sent(&f, &c);
	if (!CHECK(rs_flow_capped(&f), "capped once the share is in flight"))
		return -1;
	if (!CHECK(rs_flow_next(&f, &c) == RS_TX_STALL_CAP, "stall on the cap"))
		return -1;
	f.tx_done = 4 << 10;
	if (!CHECK(rs_flow_next(&f, &c) == RS_TX_DATA && c.len == 4 << 10 &&
	      c.local_off == 12 << 10, "a completion frees room"))
		return -1;
	rs_flow_chunk_sent(&f, &c);
	/* the share shrank below what is in flight: still a stall */
	f.tx_cap = 4 << 10;
	if (!CHECK(rs_flow_next(&f, &c) == RS_TX_STALL_CAP, "shrunk share"))
		return -1;
	f.tx_done = f.tx_sent;
	if (!CHECK(rs_flow_next(&f, &c) == RS_TX_DATA && c.len == 4 << 10,
	      "nothing in flight: the share goes"))
		return -1;
	/* the peer's full buffer is a window stall, cap or not */
	f.tx_sent = 1 << 16;
	f.tx_done = 8 << 10;
	f.tx_head = f.tx_sent + 4096;
	if (!CHECK(rs_flow_next(&f, &c) == RS_TX_STALL_WINDOW,
	      "the window, not the cap"))
		return -1;
	return 0;
}

/* write_cap: no chunk is longer, and the stream still goes in order. */
static int test_write_cap(void)
{
	struct rs_flow f;
	struct rs_chunk c;
	u32 n = 0;

	rs_flow_init(&f, 1 << 16, 1 << 16, 64, 1 << 15);
	rs_flow_set_peer(&f, 1 << 16, 64);
	f.ready = true;
	f.tx_head = 40000;
	f.write_cap = 8 * 1024;
	while (rs_flow_next(&f, &c) == RS_TX_DATA) {
		if (!CHECK(c.len <= f.write_cap && c.len > 0, "capped"))
			return -1;
		if (!CHECK(c.local_off == (u32)f.tx_sent, "in order"))
			return -1;
		rs_flow_chunk_sent(&f, &c);
		n++;
	}
	if (!CHECK(n == 5 && f.tx_sent == 40000, "all of it in 5 writes"))
		return -1;
	return 0;
}

/* When a full send ring grows, and what a resize does to the chunks. */
static int test_grow(void)
{
	struct rs_flow f;

	rs_flow_init(&f, 64 << 10, 64 << 10, 16, 32 << 10);
	rs_flow_set_peer(&f, 256 << 10, 16);
	f.ready = true;
	if (!CHECK(!rs_flow_tx_grow_size(&f, 4 << 20), "empty ring grows"))
		return -1;
	/* full, all in flight, ring below the peer's window: in flight grows */
	f.tx_head = f.tx_sent = 64 << 10;
	if (!CHECK(rs_flow_tx_grow_size(&f, 4 << 20) == 128 << 10,
		   "in-flight-bound ring does not grow"))
		return -1;
	if (!CHECK(!rs_flow_tx_grow_size(&f, 64 << 10), "grows past max"))
		return -1;
	f.tx_paused = true;
	if (!CHECK(!rs_flow_tx_grow_size(&f, 4 << 20), "grows twice at once"))
		return -1;
	f.tx_paused = false;
	/* as big as the window, all in flight: the device limits, no growth */
	rs_flow_tx_resize(&f, 256 << 10);
	if (!CHECK(f.max_chunk == 128 << 10, "chunk %u", f.max_chunk))
		return -1;
	f.tx_head = f.tx_sent = 256 << 10;
	if (!CHECK(!rs_flow_tx_grow_size(&f, 4 << 20), "device-bound grows"))
		return -1;
	/* the peer read nothing: its window holds the queued bytes back */
	f.tx_done = f.tx_sent;
	f.tx_head += 256 << 10;
	if (!CHECK(rs_flow_tx_grow_size(&f, 4 << 20) == 512 << 10,
		   "a closed window does not grow the ring"))
		return -1;
	/* paused: no data goes, and no window stall is counted */
	{
		struct rs_chunk c;

		f.peer_cons = f.tx_sent;
		f.tx_paused = true;
		if (!CHECK(rs_flow_next(&f, &c) == RS_TX_NONE, "paused sends"))
			return -1;
		f.tx_paused = false;
		if (!CHECK(rs_flow_next(&f, &c) == RS_TX_DATA, "resumed"))
			return -1;
	}
	rs_flow_tx_resize(&f, 4 << 20);
	if (!CHECK(f.max_chunk == RS_CHUNK_MAX, "chunk %u", f.max_chunk))
		return -1;
	/* given back under memory pressure: chunks shrink with it */
	rs_flow_tx_resize(&f, 64 << 10);
	if (!CHECK(f.max_chunk == 32 << 10, "chunk %u", f.max_chunk))
		return -1;
	return 0;
}

/* Stream buffer growth: when it is wanted, and what each end accepts. */
static int test_rx_grow(void)
{
	struct rs_flow r, t;
	struct rs_chunk c;

	rs_flow_init(&r, 64 << 10, 256 << 10, 16, 32 << 10);
	rs_flow_set_peer(&r, 256 << 10, 16);
	r.ready = r.setup_sent = true;
	/* no round trip known: nothing to measure a rate against */
	r.rx_prod += 200 << 10;
	if (!CHECK(!rs_flow_rx_rate(&r, 500) && !r.rx_rtt_us, "no RTT"))
		return -1;
	/* a window announced at 1 ms is three quarters full at 49 ms */
	r.rx_cons = r.rx_prod;
	rs_flow_rx_rtt_start(&r, 1000);
	rs_flow_rx_rtt_start(&r, 5000);		/* one at a time */
	r.rx_prod += 100 << 10;
	rs_flow_rx_rate(&r, 30000);
	if (!CHECK(!r.rx_rtt_us, "sampled early"))
		return -1;
	r.rx_prod += 92 << 10;
	/* the first sample also starts a round */
	if (!CHECK(!rs_flow_rx_rate(&r, 49000) && r.rx_rtt_us == 48000,
		   "rtt %u", r.rx_rtt_us))
		return -1;
	/* a slower fill later does not raise the estimate */
	r.rx_cons = r.rx_prod;
	rs_flow_rx_rtt_start(&r, 50000);
	r.rx_prod += 192 << 10;
	rs_flow_rx_rate(&r, 90000);
	if (!CHECK(r.rx_rtt_us == 40000, "least %u", r.rx_rtt_us))
		return -1;
	r.rx_cons = r.rx_prod;
	rs_flow_rx_rtt_start(&r, 100000);
	r.rx_prod += 192 << 10;
	rs_flow_rx_rate(&r, 300000);
	if (!CHECK(r.rx_rtt_us == 40000, "raised to %u", r.rx_rtt_us))
		return -1;
	/* rounds of 40 ms from here */
	r.rx_mark_us = 0;
	if (!CHECK(!rs_flow_rx_rate(&r, 301000), "first round"))
		return -1;
	r.rx_prod += 100 << 10;
	if (!CHECK(!rs_flow_rx_rate(&r, 330000), "within a round"))
		return -1;
	if (!CHECK(!rs_flow_rx_rate(&r, 341000), "100 KiB per RTT"))
		return -1;
	r.rx_prod += 128 << 10;
	if (!CHECK(rs_flow_rx_rate(&r, 381000), "half the buffer"))
		return -1;
	/* the same bytes over two round trips: half the rate */
	r.rx_prod += 128 << 10;
	if (!CHECK(!rs_flow_rx_rate(&r, 461000), "over two RTTs"))
		return -1;
	/* an idle gap says nothing */
	r.rx_prod += 1 << 20;
	if (!CHECK(!rs_flow_rx_rate(&r, 10000000), "after idle"))
		return -1;
	r.rx_cons = r.rx_prod;
	if (!CHECK(!rs_flow_rx_grow_size(&r, 1 << 20), "peer without RING"))
		return -1;
	r.ring_ok = true;
	if (!CHECK(!rs_flow_rx_grow_size(&r, 256 << 10), "past max"))
		return -1;
	if (!CHECK(rs_flow_rx_grow_size(&r, 1 << 20) == 512 << 10, "doubles"))
		return -1;
	if (!CHECK(!rs_flow_on_ring_ack(&r, r.rx_prod), "RING_ACK unasked"))
		return -1;
	rs_flow_rx_offer(&r, 512 << 10);
	if (!CHECK(!rs_flow_rx_grow_size(&r, 1 << 20), "two at once"))
		return -1;
	if (!CHECK(!rs_flow_on_ring_ack(&r, r.rx_prod), "before the RING"))
		return -1;
	r.ring_wanted = false;
	/* the sender: RING, then RING_ACK before any byte */
	rs_flow_init(&t, 64 << 10, 64 << 10, 16, 32 << 10);
	rs_flow_set_peer(&t, 256 << 10, 16);
	t.ready = t.setup_sent = true;
	t.tx_head = 1 << 20;
	t.tx_sent = t.peer_cons = t.tx_done = r.rx_prod - 4096;
	if (!CHECK(!rs_flow_on_ring(&t, 512 << 10), "RING unnegotiated"))
		return -1;
	t.ring_ok = true;
	if (!CHECK(!rs_flow_on_ring(&t, 256 << 10), "not bigger") ||
	    !CHECK(!rs_flow_on_ring(&t, 768 << 10), "not a power of two") ||
	    !CHECK(!rs_flow_on_ring(&t, RS_RING_MAX * 2), "too big"))
		return -1;
	if (!CHECK(rs_flow_on_ring(&t, 512 << 10), "RING"))
		return -1;
	if (!CHECK(!rs_flow_on_ring(&t, 1 << 20), "second RING unanswered"))
		return -1;
	if (!CHECK(rs_flow_next(&t, &c) == RS_TX_RING, "RING_ACK first"))
		return -1;
	/* the receiver still waits for 4 KiB: a RING_ACK must come after */
	if (!CHECK(!rs_flow_on_ring_ack(&r, t.tx_sent), "bytes missing"))
		return -1;
	t.tx_sent += 4096;
	rs_flow_ring_switch(&t);
	if (!CHECK(t.peer_size == 512 << 10 && !t.ring_ack_wanted, "switch"))
		return -1;
	if (!CHECK(rs_flow_next(&t, &c) == RS_TX_DATA &&
		   c.remote_off == ((u32)t.tx_sent & ((512 << 10) - 1)),
		   "new offsets"))
		return -1;
	r.rx_prod += 4096;
	if (!CHECK(rs_flow_on_ring_ack(&r, r.rx_prod), "RING_ACK"))
		return -1;
	if (!CHECK(r.rx_size == 512 << 10 && r.rx_switch == r.rx_prod,
		   "switched"))
		return -1;
	/* reads stop at the switch; the old buffer goes once read */
	if (!CHECK(rs_flow_rx_piece(&r, r.rx_cons, 1 << 20) == 4096,
		   "piece %u", rs_flow_rx_piece(&r, r.rx_cons, 1 << 20)))
		return -1;
	if (!CHECK(!rs_flow_rx_in_new(&r, r.rx_cons) &&
		   rs_flow_rx_in_new(&r, r.rx_switch), "which buffer"))
		return -1;
	if (!CHECK(!rs_flow_rx_retire_due(&r), "retired unread"))
		return -1;
	rs_flow_consume(&r, 4096);
	if (!CHECK(rs_flow_rx_retire_due(&r), "not retired"))
		return -1;
	rs_flow_rx_retired(&r);
	if (!CHECK(rs_flow_rx_grow_size(&r, 1 << 20) == 1 << 20, "again"))
		return -1;
	return 0;
}

/*
 * Under memory pressure a grown stream buffer offers a smaller one. The
 * bytes still unread in the old buffer count against the new window: the
 * sender has no room, and the receiver takes no byte, until enough are
 * read; the window never goes negative.
 */
static int test_rx_shrink(void)
{
	struct rs_flow r, t;
	struct rs_chunk c;

	rs_flow_init(&r, 64 << 10, 256 << 10, 16, 32 << 10);
	rs_flow_set_peer(&r, 64 << 10, 16);
	r.ready = r.setup_sent = r.ring_ok = true;
	if (!CHECK(!rs_flow_rx_shrink_size(&r, 64 << 10), "unnegotiated"))
		return -1;
	r.shrink_ok = true;
	if (!CHECK(!rs_flow_rx_shrink_size(&r, 256 << 10), "not smaller") ||
	    !CHECK(!rs_flow_rx_shrink_size(&r, 48 << 10), "odd size") ||
	    !CHECK(!rs_flow_rx_shrink_size(&r, 8 << 10), "below the least"))
		return -1;
	if (!CHECK(rs_flow_rx_shrink_size(&r, 64 << 10) == 64 << 10, "shrinks"))
		return -1;
	/* 200 KiB unread when the RING goes */
	r.rx_prod = 200 << 10;
	rs_flow_rx_offer(&r, 64 << 10);
	if (!CHECK(!rs_flow_rx_shrink_size(&r, 64 << 10), "two at once"))
		return -1;
	r.ring_wanted = false;

	/* the sender: a smaller RING only when negotiated */
	rs_flow_init(&t, 256 << 10, 64 << 10, 16, 32 << 10);
	rs_flow_set_peer(&t, 256 << 10, 16);
	t.ready = t.setup_sent = t.ring_ok = true;
	t.tx_head = 1 << 20;
	t.tx_sent = t.tx_done = 200 << 10;
	if (!CHECK(!rs_flow_on_ring(&t, 64 << 10), "smaller unnegotiated"))
		return -1;
	t.shrink_ok = true;
	if (!CHECK(!rs_flow_on_ring(&t, 256 << 10), "same size") ||
	    !CHECK(!rs_flow_on_ring(&t, 8 << 10), "below the least"))
		return -1;
	if (!CHECK(rs_flow_on_ring(&t, 64 << 10), "RING smaller"))
		return -1;
	if (!CHECK(rs_flow_next(&t, &c) == RS_TX_RING, "RING_ACK first"))
		return -1;
	rs_flow_ring_switch(&t);
	/* 200 KiB unconsumed, 64 KiB buffer: no room, not 4 GiB of it */
	if (!CHECK(rs_flow_peer_space(&t) == 0, "space %u",
		   rs_flow_peer_space(&t)))
		return -1;
	if (!CHECK(rs_flow_next(&t, &c) != RS_TX_DATA, "data into no room"))
		return -1;
	if (!CHECK(rs_flow_on_ring_ack(&r, t.tx_sent), "RING_ACK"))
		return -1;
	if (!CHECK(r.rx_size == 64 << 10 && rs_flow_rx_room(&r) == 0,
		   "room %u", rs_flow_rx_room(&r)))
		return -1;
	if (!CHECK(!rs_flow_on_data(&r, 1), "a byte into no room"))
		return -1;
	/* 180 KiB read: 20 KiB unread, 44 KiB room on both sides */
	rs_flow_consume(&r, 180 << 10);
	if (!CHECK(rs_flow_on_window(&t, r.rx_cons), "window"))
		return -1;
	if (!CHECK(rs_flow_peer_space(&t) == 44 << 10 &&
		   rs_flow_rx_room(&r) == 44 << 10, "room %u/%u",
		   rs_flow_peer_space(&t), rs_flow_rx_room(&r)))
		return -1;
	if (!CHECK(!rs_flow_on_data(&r, (44 << 10) + 1), "overrun taken") ||
	    !CHECK(rs_flow_on_data(&r, 44 << 10), "room refused"))
		return -1;
	/* the old buffer goes once its last byte is read */
	rs_flow_consume(&r, 20 << 10);
	if (!CHECK(rs_flow_rx_retire_due(&r), "not retired"))
		return -1;
	rs_flow_rx_retired(&r);
	if (!CHECK(!rs_flow_rx_shrink_size(&r, 64 << 10), "shrinks again"))
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	u32 cases = 3000;
	int n = 0, failed = 0;
	struct {
		const char *name;
		int (*fn)(void);
	} tests[] = {
		{ "ring_size", test_ring_size },
		{ "imm", test_imm },
		{ "imm_parity", test_imm_parity },
		{ "credits", test_credits },
		{ "write_cap", test_write_cap },
		{ "window", test_window },
		{ "cap", test_cap },
		{ "grow", test_grow },
		{ "rx_grow", test_rx_grow },
		{ "rx_shrink", test_rx_shrink },
	};

	if (argc > 1)
		cases = strtoul(argv[1], NULL, 0);
	printf("TAP version 13\n1..%zu\n", ARRAY_SIZE(tests) + 1);
	for (size_t i = 0; i < ARRAY_SIZE(tests); i++) {
		int r = tests[i].fn();

		printf("%s %d %s\n", r ? "not ok" : "ok", ++n, tests[i].name);
		failed += !!r;
	}
	{
		int bad = 0;

		for (u32 s = 1; s <= cases && !bad; s++)
			bad = run_model(s);
		/* the send ring grew in some runs, and no byte suffered */
		if (!bad && cases >= 100 && !total_grows)
			bad = !CHECK(0, "the send ring never grew");
		if (!bad && cases >= 100 && !total_rx_grows)
			bad = !CHECK(0, "no stream buffer ever grew");
		if (!bad && cases >= 100 && !total_rx_shrinks)
			bad = !CHECK(0, "no stream buffer ever shrank");
		printf("# %lu send ring growths, %lu stream buffer growths, %lu shrinks\n",
		       total_grows, total_rx_grows, total_rx_shrinks);
		printf("%s %d random_model (%u cases)\n", bad ? "not ok" : "ok",
		       ++n, cases);
		failed += !!bad;
	}
	printf("# unit: %d passed, %d failed\n", n - failed, failed);
	return failed ? 1 : 0;
}
