/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rdmastream protocol core: cursor, window and credit bookkeeping.
 *
 * Pure C with no kernel dependencies: the module and the user-space unit
 * tests compile the same file. Callers serialise access (the module holds
 * rs_sock.lock). Cursors are 64-bit byte counts that never wrap in
 * practice; ring offsets are cursor & (size - 1), sizes are powers of two.
 */
#ifndef RS_PROTO_H
#define RS_PROTO_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <asm/barrier.h>
#include <linux/compiler.h>
#else
#include <stdbool.h>
#include <stdint.h>
typedef uint64_t u64;
typedef uint32_t u32;
typedef uint16_t u16;
typedef uint8_t u8;
#endif

/*
 * Cursors that are read without the lock (rs_rx_avail(), poll) are
 * published with these: rx_prod with release semantics, rx_cons as a
 * single store.
 */
#ifdef __KERNEL__
/* pairs with the acquire in rs_rx_avail(): the bytes below rx_prod first */
#define RS_STORE_RELEASE(p, v)	smp_store_release(p, v)
#define RS_STORE_ONCE(p, v)	WRITE_ONCE(*(p), v)
#else
#define RS_STORE_RELEASE(p, v)	__atomic_store_n(p, v, __ATOMIC_RELEASE)
#define RS_STORE_ONCE(p, v)	__atomic_store_n(p, v, __ATOMIC_RELAXED)
#endif
#ifdef __KERNEL__
#define RS_LOAD_ONCE(p)		READ_ONCE(*(p))
#else
#define RS_LOAD_ONCE(p)		__atomic_load_n(p, __ATOMIC_RELAXED)
#endif

/* rx_switch while no byte is in a new stream buffer */
#define RS_RX_NO_SWITCH		(~0ULL)

#define RS_PROTO_VERSION	2

/* Immediate data of an indirect RDMA WRITE WITH IMMEDIATE. */
#define RS_IMM_LEN_BITS		24
#define RS_IMM_LEN_MASK		((1U << RS_IMM_LEN_BITS) - 1)
#define RS_IMM_CREDIT_SHIFT	RS_IMM_LEN_BITS
#define RS_IMM_CREDIT_MAX	127U
/*
 * The write's number, modulo 2, between peers that negotiated
 * RS_CM_F_WSEQ; 0 otherwise. Each write's bit differs from the one
 * before it, so a write the transport runs twice in a row is caught.
 */
#define RS_IMM_PARITY		(1U << 31)

/* Receive slots a side must post at the least (see rs_flow_ack_due). */
#define RS_RECV_MIN		4

/* Stream buffers are powers of two between these bounds. */
#define RS_RING_MIN		(16U << 10)
#define RS_RING_MAX		(8U << 20)

/* The largest single WRITE: half the send ring, at most this. */
#define RS_CHUNK_MAX		(256U << 10)

struct rs_flow {
	/* sending side */
	u64 tx_head;		/* bytes queued by the application */
	u64 tx_sent;		/* bytes posted in RDMA WRITEs */
	u64 tx_done;		/* bytes whose WRITE completed: send ring free */
	u64 peer_cons;		/* bytes the peer has consumed (window edge) */
	u32 tx_size;		/* local send ring */
	u32 peer_size;		/* peer's stream buffer */
	u32 credits;		/* peer receive slots we may consume */
	u32 peer_recv;		/* receive slots the peer posts in total */
	u32 max_chunk;		/* largest single WRITE */
	u32 tx_cap;		/* bytes in flight at most (0: no cap), the
				 * share of a device-wide budget (rs_budget.c)
				 */
	u32 write_cap;		/* bytes per indirect write at most, 0: no
				 * cap (rs_cm.c, rs_write_cap_set())
				 */
	u32 tx_writes;		/* indirect writes posted (RS_IMM_PARITY) */
	u32 rx_writes;		/* indirect writes received */
	/* receiving side */
	u64 rx_prod;		/* bytes the peer has written into our ring */
	u64 rx_cons;		/* bytes the application has read */
	u64 rx_announced;	/* rx_cons as last told to the peer */
	u32 rx_size;		/* local stream buffer */
	u32 nr_recv;		/* receive slots we post */
	u32 owed;		/* slots reposted, not yet returned as credits */
	/* stream state */
	bool ready;		/* peer's buffer known, our rings registered */
	bool setup_sent;	/* the peer knows our buffer */
	bool fin_wanted;	/* the application shut down writing */
	bool fin_sent;
	bool tx_paused;		/* no data goes: the send ring is moving */
	bool wseq;		/* both sides number their writes (CM flag) */
	/* stream buffer growth (docs/design.md "Stream buffer autotuning") */
	bool ring_ok;		/* the peer speaks RING (its CM flag) */
	bool shrink_ok;		/* ...and takes a smaller one (its CM flag) */
	bool ring_wanted;	/* receiver: RING to post */
	bool ring_ack_wanted;	/* sender: RING_ACK to post */
	u8 rx_grow;		/* receiver: RS_RXG_* */
	u32 rx_new_size;	/* receiver: the buffer RING offers */
	u32 peer_new_size;	/* sender: the buffer the peer's RING offered */
	u64 rx_switch;		/* the new buffer's first byte once RING_ACK
				 * came; RS_RX_NO_SWITCH otherwise
				 */
	u64 rx_mark;		/* rx_prod when the rate round began */
	u64 rx_mark_us;		/* ...and when, in microseconds (0: not yet) */
	u64 rx_edge;		/* a window announced at rx_edge_us ends... */
	u64 rx_edge_us;		/* ...about here (0: no measurement) */
	u32 rx_rtt_us;		/* round trip as the receiver sees it, least
				 * sample so far (0: none yet)
				 */
};

/* The receiver's stream buffer growth, one move at a time. */
enum rs_rx_grow {
	RS_RXG_NONE,		/* one buffer */
	RS_RXG_OFFERED,		/* a bigger one registered, RING sent or due */
	RS_RXG_SWITCHED,	/* RING_ACK came: bytes from rx_switch on are
				 * in the new buffer, the old one holds the
				 * unread bytes below it
				 */
};

/* What the sender should post next. */
enum rs_tx_action {
	RS_TX_NONE,
	RS_TX_DATA,		/* the chunk filled in */
	RS_TX_FIN,
	RS_TX_ACK,
	RS_TX_RING,		/* RING or RING_ACK (ring_ack_wanted) */
	RS_TX_STALL_WINDOW,	/* data queued, peer's buffer full */
	RS_TX_STALL_CREDIT,	/* something to send, no receive slot */
	RS_TX_STALL_CAP,	/* data may go, but tx_cap bytes are in flight */
};

/* One indirect WRITE: where it reads and where it lands. */
struct rs_chunk {
	u32 len;
	u32 local_off;		/* offset in the send ring */
	u32 remote_off;		/* offset in the peer's stream buffer */
};

void rs_flow_init(struct rs_flow *f, u32 tx_size, u32 rx_size, u32 nr_recv,
		  u32 max_chunk);
void rs_flow_set_peer(struct rs_flow *f, u32 peer_size, u32 peer_recv);

u32 rs_ring_size(u64 want, u32 max);
u32 rs_flow_tx_grow_size(const struct rs_flow *f, u32 max);
void rs_flow_tx_resize(struct rs_flow *f, u32 tx_size);

static inline u32 rs_flow_tx_space(const struct rs_flow *f)
{
	return f->tx_size - (u32)(f->tx_head - f->tx_done);
}

static inline u32 rs_flow_tx_unsent(const struct rs_flow *f)
{
	return (u32)(f->tx_head - f->tx_sent);
}

static inline u32 rs_flow_rx_avail(const struct rs_flow *f)
{
	return (u32)(f->rx_prod - f->rx_cons);
}

/*
 * Room in the peer's stream buffer. Right after the peer's buffer shrank
 * (RING_ACK), the bytes it has not consumed may be more than the new
 * buffer holds: none then, until it reads them.
 */
static inline u32 rs_flow_peer_space(const struct rs_flow *f)
{
	u32 used = (u32)(f->tx_sent - f->peer_cons);

	return used < f->peer_size ? f->peer_size - used : 0;
}

/* Room in our stream buffer (none while a shrunk one is overfull). */
static inline u32 rs_flow_rx_room(const struct rs_flow *f)
{
	u32 avail = rs_flow_rx_avail(f);

	return avail < f->rx_size ? f->rx_size - avail : 0;
}

bool rs_flow_may_send(const struct rs_flow *f, u32 returns);
enum rs_tx_action rs_flow_next(const struct rs_flow *f, struct rs_chunk *c);
u32 rs_flow_take_owed(struct rs_flow *f);
bool rs_flow_next_chunk(const struct rs_flow *f, struct rs_chunk *c);
bool rs_flow_capped(const struct rs_flow *f);
void rs_flow_chunk_sent(struct rs_flow *f, const struct rs_chunk *c);
void rs_flow_msg_sent(struct rs_flow *f);

u32 rs_imm_encode(u32 len, u32 credits);
void rs_imm_decode(u32 imm, u32 *len, u32 *credits);
u32 rs_flow_imm(struct rs_flow *f, u32 len, u32 credits);
bool rs_flow_imm_ok(struct rs_flow *f, u32 imm);

bool rs_flow_on_credits(struct rs_flow *f, u32 credits);
bool rs_flow_on_data(struct rs_flow *f, u32 len);
bool rs_flow_on_window(struct rs_flow *f, u64 cons);
void rs_flow_on_recv_posted(struct rs_flow *f);

void rs_flow_consume(struct rs_flow *f, u32 len);

void rs_flow_rx_rtt_start(struct rs_flow *f, u64 now_us);
bool rs_flow_rx_rate(struct rs_flow *f, u64 now_us);
u32 rs_flow_rx_grow_size(const struct rs_flow *f, u32 max);
u32 rs_flow_rx_shrink_size(const struct rs_flow *f, u32 size);
void rs_flow_rx_offer(struct rs_flow *f, u32 size);
bool rs_flow_on_ring_ack(struct rs_flow *f, u64 at);
u32 rs_flow_rx_piece(const struct rs_flow *f, u64 off, u32 len);
bool rs_flow_rx_retire_due(const struct rs_flow *f);
void rs_flow_rx_retired(struct rs_flow *f);
bool rs_flow_on_ring(struct rs_flow *f, u32 size);
void rs_flow_ring_switch(struct rs_flow *f);

/*
 * Receiver: stream byte off lies in the new buffer. A reader without the
 * lock may see rx_switch late, as RS_RX_NO_SWITCH: harmless, since the
 * release of rx_prod past it publishes it first, and it reads only bytes
 * below rx_prod.
 */
static inline bool rs_flow_rx_in_new(const struct rs_flow *f, u64 off)
{
	return off >= RS_LOAD_ONCE(&f->rx_switch);
}
bool rs_flow_ack_due(const struct rs_flow *f);
bool rs_flow_window_due(const struct rs_flow *f);
void rs_flow_window_sent(struct rs_flow *f);

#endif /* RS_PROTO_H */
