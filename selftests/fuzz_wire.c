// SPDX-License-Identifier: GPL-2.0
/*
 * A wire fuzzer: the hostile user-space verbs peer of rs_peer.h, made to
 * mutate what it sends. Each connection it makes (to a listener of the
 * module) or takes (the module's socket connects to it) starts with a
 * handshake, usually valid, and goes on with a seeded random mix of
 *
 *   data     valid indirect data (pattern bytes, right place, right
 *            immediate) and valid direct data into the module's ADVERTs;
 *   ctl      a valid control message with one field mutated (type,
 *            version, credits, cons, addr, seq, len, rkey, phase, id,
 *            flags, reserved), or a short SEND;
 *   imm      WRITE WITH IMMEDIATE with a random or lying immediate
 *            (length, credits, the write's number: its parity bit,
 *            reserved unless the handshake numbered the writes);
 *   ring     plain RDMA WRITEs anywhere inside the stream buffer;
 *   direct   DIRECTs out of order, replayed, or claiming other lengths;
 *   advert   ADVERTs of the fuzzer's own memory, valid or mutated;
 *   outside  writes before or past the stream buffer, past an ADVERT's
 *            length, with a stale rkey, or an RDMA READ: each must fail
 *            at the module's HCA (and ends the connection);
 *   pdata    malformed CM private data (short, long, wrong version,
 *            flags, receive slots, ring size), an RNR retry count of 7
 *            (refused) and a retry count of 7 (accepted). Half of the
 *            valid handshakes number the writes (flag 0x02), both ways.
 *
 * The module's socket side, in threads of this program, reads into
 * buffers with guard bytes before and after (a write outside the range
 * the module advertised would show there) and checks every byte against
 * the pattern as long as no mutation could legitimately have changed
 * the stream (a peer may overwrite its own unread bytes); it also sends
 * pattern data, which the fuzzer checks where it lands. Per connection
 * the module must go on correctly or reset it (ECONNRESET, EPROTO,
 * ETIMEDOUT); beside it a pair of module sockets moves verified data all
 * along and must not notice anything. Kernel reports are caught by
 * vm-run's log scan.
 *
 * Knobs: RS_FUZZ_SECS (default 30), RS_FUZZ_SEED (default: from the
 * clock; always printed), RS_FUZZ_FIRST and RS_FUZZ_CONNS (replay
 * connections FIRST.. of a seed, e.g. the one a failure names).
 * See docs/fuzzing.md, "Wire fuzzer".
 */
#include "rs_peer.h"

#define FZ_SRC		(256 * 1024)	/* our source of data writes */
#define FZ_GUARD	4096		/* guard bytes around each recv */
#define FZ_CANARY	0xc5
#define FZ_RBUF_MAX	(512 * 1024)	/* largest recv of the socket side */
#define FZ_ADV_MAX	8
#define FZ_OUR_RING	65536		/* what our SETUP announces */
#define FZ_STALE	32

/* The immediate of an indirect write (docs/wire-format.md). */
#define RS_IMM_LEN_MASK		0xffffffU
#define RS_IMM_CREDIT_SHIFT	24
#define RS_IMM_CREDIT_MAX	127U
#define RS_IMM_PARITY		(1U << 31)
#define FZ_F_KNOWN		0x07	/* RING, WSEQ, SHRINK */
#define FZ_F_RING		0x01
#define FZ_F_WSEQ		0x02
#define FZ_F_SHRINK		0x04

enum fz_kind {
	K_DATA, K_DDATA, K_CTL, K_SHORT, K_IMM, K_RING, K_DIRECT, K_ADVERT,
	K_OUTSIDE, K_PDATA, K_FIN, K_NR
};

static const char *const fz_kind_name[K_NR] = {
	"data", "direct-data", "ctl-field", "ctl-short", "imm", "ring-write",
	"direct-mut", "advert", "outside", "pdata", "fin",
};

enum fz_field {
	F_TYPE, F_VERSION, F_CREDITS, F_CONS, F_ADDR, F_SEQ, F_LEN, F_RKEY,
	F_PHASE, F_ID, F_FLAGS, F_RESERVED, F_NR
};

static const char *const fz_field_name[F_NR] = {
	"type", "version", "credits", "cons", "addr", "seq", "len", "rkey",
	"phase", "id", "flags", "reserved",
};

struct fz_stats {
	unsigned long conns, client, server, refused, resets, survived;
	unsigned long eof, kind[K_NR], field[F_NR], violations;
	unsigned long hca_refused, bytes_in, bytes_out, hs_failed;
	unsigned long stale, stale_used;
};

static struct fz_stats fz_st;
static uint64_t fz_seed;
static unsigned long fz_cur;	/* connection being fuzzed */
static bool fz_verbose;		/* RS_FUZZ_VERBOSE: a line per connection */

/* A rule the module broke: say which connection, for replay. */
#define FZ_VIOLATION(fmt, ...) do {					\
	__atomic_add_fetch(&fz_st.violations, 1, __ATOMIC_RELAXED);	\
	rs_info("VIOLATION conn %lu (RS_FUZZ_SEED=%#llx RS_FUZZ_FIRST=%lu RS_FUZZ_CONNS=1): " fmt, \
		fz_cur, (unsigned long long)fz_seed, fz_cur, ##__VA_ARGS__); \
} while (0)

struct fz_adv {
	uint64_t addr, seq;
	uint32_t rkey, len, id, filled, flags;
	bool live;
};

/* An rkey that must not work any more once recv count passes 'after'. */
struct fz_stale {
	uint32_t rkey;
	uint64_t addr, after;
};

struct fz {
	struct peer p;
	uint64_t rnd;
	int s;			/* the module's socket */
	char *src;
	struct ibv_mr *smr;
	/* what we sent */
	uint64_t tx;		/* stream bytes, both paths */
	uint64_t ring_tx;	/* indirect bytes */
	uint64_t peer_cons;	/* module's cons: our window edge */
	uint32_t credits;	/* module's receive slots we may use */
	uint32_t owed;		/* our reposted slots not yet returned */
	uint64_t key;		/* pattern of our stream */
	/* what the module sent us */
	uint64_t rx;		/* bytes into our ring */
	uint64_t rx_stream;	/* stream bytes, both paths */
	uint64_t rkey_key;	/* pattern of the module's stream */
	struct fz_adv adv[FZ_ADV_MAX];
	struct fz_stale stale[FZ_STALE];
	int nstale;
	bool cancel_ack_due;	/* the module sent a CANCEL */
	unsigned int mut;	/* per mille of steps that mutate */
	bool taint_in;		/* our ring may hold bytes not the module's */
	uint64_t last_direct[8];	/* a DIRECT to replay */
	bool have_direct;
	bool dead;		/* our QP failed or the module went away */
	bool fin_sent;
	uint32_t our_adv_id;
	bool wseq;		/* writes numbered, both ways (CM flag) */
	uint32_t tx_writes;	/* our indirect writes the module took */
	uint32_t rx_writes;	/* the module's indirect writes */
	/* shared with the socket-side threads */
	volatile bool tainted;	/* the stream may differ from the pattern */
	volatile bool stop;
	volatile bool sock_done;
	bool lived;		/* the socket side was up after the last step */
	uint64_t sock_got;	/* bytes the socket side read */
	uint64_t nrecv;		/* recv() calls the socket side finished */
	int sock_err;		/* errno of its end, 0 for EOF */
	int wr_err;		/* errno that ended the writer */
	bool sock_eof;
	pthread_t rthr, wthr;
	uint64_t wsent;
};

static uint64_t fz_rand(struct fz *f)
{
	return rs_rand(&f->rnd);
}

static uint32_t fz_below(struct fz *f, uint32_t n)
{
	return n ? fz_rand(f) % n : 0;
}

/* An "interesting" 64-bit value around base. */
static uint64_t fz_value(struct fz *f, uint64_t base)
{
	switch (fz_below(f, 8)) {
	case 0: return 0;
	case 1: return ~0ULL;
	case 2: return base + 1;
	case 3: return base - 1;
	case 4: return base ^ (1ULL << fz_below(f, 64));
	case 5: return 1ULL << fz_below(f, 64);
	case 6: return base + fz_below(f, 1 << 20);
	default: return fz_rand(f);
	}
}

/* ---- the socket side: a guarded reader and a writer ---- */

static bool fz_reset_errno(int e)
{
	return e == ECONNRESET || e == EPROTO || e == ETIMEDOUT ||
	       e == EPIPE;
}

static void *fz_reader(void *arg)
{
	struct fz *f = arg;
	uint64_t st = f->key ^ 0x77;
	size_t len, bad, i;
	unsigned char *mem, *buf;
	ssize_t n;

	mem = malloc(FZ_RBUF_MAX + 2 * FZ_GUARD);
	if (!mem)
		return NULL;
	buf = mem + FZ_GUARD;
	while (!f->stop || f->sock_got < f->tx) {
		/* small reads go through the ring, large ones advertise */
		len = rs_rand(&st) & 1 ? 1 + rs_rand(&st) % 8192 :
		      ADV_LEN + rs_rand(&st) % (FZ_RBUF_MAX - ADV_LEN);
		memset(mem, FZ_CANARY, FZ_GUARD);
		memset(buf + len, FZ_CANARY, FZ_GUARD);
		n = recv(f->s, buf, len, rs_rand(&st) % 4 ? 0 : MSG_WAITALL);
		for (i = 0; i < FZ_GUARD; i++)
			if (mem[i] != FZ_CANARY || buf[len + i] != FZ_CANARY)
				break;
		if (i < FZ_GUARD) {
			FZ_VIOLATION("recv(%zu) wrote outside its buffer (%s guard byte %zu)",
				     len, mem[i] != FZ_CANARY ? "front" :
				     "back", i);
			break;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (f->stop && (f->dead || f->tainted))
				break;
			continue;
		}
		if (n < 0) {
			f->sock_err = errno;
			break;
		}
		if (!n) {
			f->sock_eof = true;
			break;
		}
		if (!f->tainted) {
			bad = rs_pat_check(buf, n, f->key, f->sock_got);
			if (bad != (size_t)n && !f->tainted) {
				FZ_VIOLATION("stream byte %llu is %#x, not %#x",
					     (unsigned long long)(f->sock_got +
								  bad),
					     buf[bad],
					     rs_pat_byte(f->key,
							 f->sock_got + bad));
				break;
			}
		}
		__atomic_add_fetch(&f->sock_got, n, __ATOMIC_RELEASE);
		__atomic_add_fetch(&f->nrecv, 1, __ATOMIC_RELEASE);
	}
	free(mem);
	f->sock_done = true;
	return NULL;
}

static void *fz_writer(void *arg)
{
	struct fz *f = arg;
	uint64_t st = f->key ^ 0x99;
	char buf[8192];
	size_t len;
	ssize_t n;

	while (!f->stop) {
		len = 1 + rs_rand(&st) % sizeof(buf);
		rs_pat_fill(buf, len, f->rkey_key, f->wsent);
		n = send(f->s, buf, len, MSG_DONTWAIT);
		if (n > 0) {
			f->wsent += n;
			continue;
		}
		if (n < 0 && errno != EAGAIN) {
			f->wr_err = errno;
			break;
		}
		rs_msleep(20 + rs_rand(&st) % 50);
	}
	return NULL;
}

/* ---- the verbs side ---- */

static void fz_repost(struct fz *f, uint64_t slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)f->p.buf + slot * MSG, .length = MSG,
		.lkey = f->p.mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	if (!ibv_post_recv(f->p.id->qp, &wr, &bad))
		f->owed++;
}

/* The parity bit the next write must carry (0 unless numbered). */
static uint32_t fz_parity(bool wseq, uint32_t writes)
{
	return wseq && (writes & 1) ? RS_IMM_PARITY : 0;
}

/* The module wrote len bytes of its stream into our ring. */
static void fz_on_data(struct fz *f, uint32_t imm, uint32_t byte_len)
{
	uint32_t len = imm & RS_IMM_LEN_MASK, off = f->rx % FZ_OUR_RING;
	size_t bad;

	if ((imm & RS_IMM_PARITY) != fz_parity(f->wseq, f->rx_writes))
		FZ_VIOLATION("module's write %u (numbered: %d) has parity bit %u",
			     f->rx_writes, f->wseq, imm >> 31);
	f->rx_writes++;
	f->credits += (imm >> RS_IMM_CREDIT_SHIFT) & RS_IMM_CREDIT_MAX;
	if (len != byte_len || off + len > FZ_OUR_RING) {
		FZ_VIOLATION("module wrote %u bytes claiming %u at %u", byte_len,
			     len, off);
		return;
	}
	bad = rs_pat_check(f->p.target + off, len, f->rkey_key, f->rx_stream);
	if (bad != len && !f->taint_in)
		FZ_VIOLATION("module's stream byte %llu is wrong",
			     (unsigned long long)(f->rx_stream + bad));
	f->rx += len;
	f->rx_stream += len;
	fz_st.bytes_in += len;
}

/* The ADVERT is dead: its rkey must stop working once recv() returns. */
static void fz_kill_adv(struct fz *f, struct fz_adv *a)
{
	if (a->live && f->nstale < FZ_STALE)
		f->stale[f->nstale++] = (struct fz_stale){
			.rkey = a->rkey, .addr = a->addr,
			.after = __atomic_load_n(&f->nrecv, __ATOMIC_ACQUIRE),
		};
	a->live = false;
}

static void fz_on_ctl(struct fz *f, const unsigned char *m)
{
	uint32_t id, i;

	f->credits += get32(m, 0) & 0xffff;
	if (get64(m, 8) > f->peer_cons)
		f->peer_cons = get64(m, 8);
	switch (m[0]) {
	case T_ADVERT:
		id = get32(m, 40);
		i = id % FZ_ADV_MAX;
		f->adv[i] = (struct fz_adv){
			.addr = get64(m, 16), .rkey = get32(m, 32),
			.len = get32(m, 4), .id = id, .seq = get64(m, 24),
			.flags = get32(m, 44), .live = true,
		};
		break;
	case T_CANCEL:
		/* answered by the action loop, rarely not at all */
		for (i = 0; i < FZ_ADV_MAX; i++)
			fz_kill_adv(f, &f->adv[i]);
		f->cancel_ack_due = fz_below(f, 16);
		break;
	case 6:	/* DIRECT into our ADVERT: the module's stream bytes */
		f->rx_stream += get32(m, 4);
		fz_st.bytes_in += get32(m, 4);
		break;
	default:
		break;
	}
}

/*
 * Process completions for up to ms; returns the status of the send
 * completion with wr_id want (or -1 when it did not come).
 */
static int fz_poll(struct fz *f, uint64_t want, int ms)
{
	double end = rs_now() + ms / 1000.0;
	struct ibv_wc wc;
	int n, ret = -1;

	for (;;) {
		n = ibv_poll_cq(f->p.cq, 1, &wc);
		if (n < 0)
			return -1;
		if (!n) {
			if (ret >= 0 || rs_now() > end)
				return ret;
			/* the module reset us: our QP may retry a while */
			if (f->sock_done && end - rs_now() > 2)
				end = rs_now() + 2;
			if (ms)
				rs_msleep(1);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			f->dead = true;
			if (wc.wr_id == want)
				ret = wc.status;
			continue;
		}
		if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
			fz_on_data(f, ntohl(wc.imm_data), wc.byte_len);
			fz_repost(f, wc.wr_id);
		} else if (wc.opcode == IBV_WC_RECV) {
			fz_on_ctl(f, (unsigned char *)f->p.buf +
				  wc.wr_id * MSG);
			fz_repost(f, wc.wr_id);
		} else if (wc.wr_id == want) {
			ret = wc.status;
		}
	}
}

static uint64_t fz_wr_id = 1ULL << 32;

/* Post one send work request and wait for its completion. */
static int fz_post(struct fz *f, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	if (f->dead)
		return -1;
	wr->wr_id = ++fz_wr_id;
	wr->send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(f->p.id->qp, wr, &bad)) {
		f->dead = true;
		return -1;
	}
	return fz_poll(f, wr->wr_id, 20000);
}

/* RDMA WRITE (WITH IMM) of len bytes at src_off of our source. */
static int fz_write(struct fz *f, enum ibv_wr_opcode op, uint64_t addr,
		    uint32_t rkey, uint32_t src_off, uint32_t len, uint32_t imm)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)f->src + src_off, .length = len,
		.lkey = f->smr->lkey,
	};
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = len ? 1 : 0, .opcode = op,
		.wr.rdma = { .remote_addr = addr, .rkey = rkey },
	};

	wr.imm_data = htonl(imm);
	return fz_post(f, &wr);
}

/* Send the 64-byte message in peer_ctl_buf(), or its first len bytes. */
static int fz_send_ctl(struct fz *f, uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)peer_ctl_buf(&f->p), .length = len,
		.lkey = f->p.mr->lkey,
	};
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = len ? 1 : 0,
		.opcode = IBV_WR_SEND,
	};

	return fz_post(f, &wr);
}

static void put32(unsigned char *m, int off, uint32_t v)
{
	v = htonl(v);
	memcpy(m + off, &v, 4);
}

static void put64(unsigned char *m, int off, uint64_t v)
{
	v = htobe64(v);
	memcpy(m + off, &v, 8);
}

/* A valid message of type with our credits and cons; consumes one credit. */
static unsigned char *fz_ctl(struct fz *f, int type)
{
	unsigned char *m = peer_ctl_buf(&f->p);
	uint32_t cr = f->owed > 0xffff ? 0xffff : f->owed;

	peer_ctl_fill(&f->p, type, 0, 0, 0, 0);
	m[2] = cr >> 8;
	m[3] = cr;
	f->owed -= cr;
	put64(m, 8, f->rx);
	if (f->credits)
		f->credits--;
	return m;
}

/* Room for len indirect bytes: module credits and window. */
static bool fz_room(struct fz *f, uint32_t len)
{
	double end = rs_now() + 2;

	while (!f->dead) {
		fz_poll(f, 0, 0);
		if (f->credits > 1 &&
		    f->ring_tx + len - f->peer_cons <= f->p.size)
			return true;
		if (rs_now() > end)
			return false;
		rs_msleep(2);
	}
	return false;
}

/* Valid indirect data: the next len pattern bytes, where they belong. */
static void fz_data(struct fz *f)
{
	uint32_t len = 1 + fz_below(f, fz_below(f, 2) ? 512 : 16384);
	uint32_t off = f->ring_tx & (f->p.size - 1), cr;

	if (len > f->p.size - off)
		len = f->p.size - off;
	if (!fz_room(f, len))
		return;
	rs_pat_fill(f->src, len, f->key, f->tx);
	cr = f->owed > RS_IMM_CREDIT_MAX ? RS_IMM_CREDIT_MAX : f->owed;
	f->owed -= cr;
	f->credits--;
	fz_st.kind[K_DATA]++;
	if (fz_write(f, IBV_WR_RDMA_WRITE_WITH_IMM, f->p.addr + off, f->p.rkey,
		     0, len, len | cr << RS_IMM_CREDIT_SHIFT |
		     fz_parity(f->wseq, f->tx_writes)))
		return;
	f->tx_writes++;
	f->ring_tx += len;
	f->tx += len;
	fz_st.bytes_out += len;
	/* indirect bytes kill the module's outstanding ADVERTs */
	for (int i = 0; i < FZ_ADV_MAX; i++)
		fz_kill_adv(f, &f->adv[i]);
}

static struct fz_adv *fz_live_adv(struct fz *f)
{
	for (int i = 0; i < FZ_ADV_MAX; i++)
		if (f->adv[i].live)
			return &f->adv[i];
	return NULL;
}

/* Valid direct data into a live ADVERT of the module, and its DIRECT. */
static void fz_ddata(struct fz *f)
{
	struct fz_adv *a = fz_live_adv(f);
	uint32_t len, left;
	unsigned char *m;
	bool complete;

	if (!a || !f->credits)
		return;
	/*
	 * The sender's rule (rs_dtx_pick()): an ADVERT that asks for other
	 * bytes than the next of our stream is stale, from before indirect
	 * bytes the module had not seen yet; those bytes killed it there.
	 * Writing into it anyway is a mutation: the module may already be
	 * giving the buffer back, and rxe lets a WRITE whose rkey it checked
	 * land after a LOCAL_INV completed (docs/fuzzing.md, loose ends).
	 */
	if (a->seq + a->filled != f->tx) {
		fz_st.stale++;
		if (fz_below(f, 4)) {
			fz_kill_adv(f, a);
			return;
		}
		fz_st.stale_used++;
		f->tainted = true;
	}
	left = a->len - a->filled;
	len = 1 + fz_below(f, left < FZ_SRC ? left : FZ_SRC);
	/* a plain ADVERT takes one transfer, a WAITALL one until full */
	if (!(a->flags & 1))
		len = left < FZ_SRC ? left : FZ_SRC;
	complete = len == left || !(a->flags & 1);
	rs_pat_fill(f->src, len, f->key, f->tx);
	fz_st.kind[K_DDATA]++;
	if (fz_write(f, IBV_WR_RDMA_WRITE, a->addr + a->filled, a->rkey, 0,
		     len, 0))
		return;
	m = fz_ctl(f, T_DIRECT);
	put32(m, 4, len);
	put64(m, 24, f->tx);
	put32(m, 40, a->id);
	put32(m, 44, complete);
	memcpy(f->last_direct, m, MSG);
	f->have_direct = true;
	if (fz_send_ctl(f, MSG))
		return;
	f->tx += len;
	a->filled += len;
	fz_st.bytes_out += len;
	if (complete)
		fz_kill_adv(f, a);
}

/* A valid-looking message of a random type with one field mutated. */
static void fz_ctl_field(struct fz *f)
{
	static const int types[] = { T_SETUP, T_ACK, 3, T_ADVERT, T_DIRECT,
				     T_CANCEL, T_CANCEL_ACK };
	int type = types[fz_below(f, 7)];
	enum fz_field fld = fz_below(f, F_NR);
	struct fz_adv *a = fz_live_adv(f);
	unsigned char *m = fz_ctl(f, type);
	int off;

	/* start from what would be valid for the type */
	switch (type) {
	case T_SETUP:
		put32(m, 4, f->p.size);
		put64(m, 16, f->p.addr);
		put32(m, 32, f->p.rkey);
		break;
	case 3:		/* FIN */
		put64(m, 16, f->ring_tx);
		put64(m, 24, f->tx);
		break;
	case T_ADVERT:
		put32(m, 4, 4096);
		put64(m, 16, (uintptr_t)f->p.target + FZ_OUR_RING);
		put32(m, 32, f->p.tmr->rkey);
		put32(m, 36, 1);
		put32(m, 40, ++f->our_adv_id);
		put64(m, 24, f->rx_stream);
		break;
	case T_DIRECT:
		put32(m, 4, a ? 1 : 0);
		put64(m, 24, f->tx);
		put32(m, 40, a ? a->id : 0);
		put32(m, 44, 1);
		break;
	default:
		break;
	}
	fz_st.kind[K_CTL]++;
	fz_st.field[fld]++;
	switch (fld) {
	case F_TYPE:
		m[0] = fz_below(f, 2) ? fz_below(f, 256) : fz_below(f, 10);
		break;
	case F_VERSION:
		m[1] = fz_value(f, WIRE_VERSION);
		break;
	case F_CREDITS:
		off = fz_value(f, f->owed);
		m[2] = off >> 8;
		m[3] = off;
		break;
	case F_CONS:
		put64(m, 8, fz_value(f, f->rx));
		break;
	case F_ADDR:
		put64(m, 16, fz_value(f, get64(m, 16)));
		break;
	case F_SEQ:
		put64(m, 24, fz_value(f, get64(m, 24)));
		break;
	case F_LEN:
		put32(m, 4, fz_value(f, get32(m, 4)));
		break;
	case F_RKEY:
		put32(m, 32, fz_value(f, get32(m, 32)));
		break;
	case F_PHASE:
		put32(m, 36, fz_value(f, get32(m, 36)));
		break;
	case F_ID:
		put32(m, 40, fz_value(f, get32(m, 40)));
		break;
	case F_FLAGS:
		put32(m, 44, fz_value(f, get32(m, 44)));
		break;
	default:
		m[48 + fz_below(f, 16)] = 1 + fz_below(f, 255);
		break;
	}
	/* the module may write our ADVERT's memory (or anywhere) */
	if (m[0] == T_ADVERT)
		f->taint_in = true;
	/*
	 * a DIRECT or FIN that the module takes may change the stream, and
	 * so may a RING_ACK (10) it takes (it then reads a buffer we do not
	 * write)
	 */
	if (m[0] == T_DIRECT || m[0] == 3 || m[0] == T_CANCEL_ACK ||
	    m[0] == 10)
		f->tainted = true;
	if (m[0] == 3)
		f->fin_sent = true;
	fz_send_ctl(f, MSG);
}

/* A SEND shorter than a control message (or empty). */
static void fz_short(struct fz *f)
{
	fz_ctl(f, T_ACK);
	fz_st.kind[K_SHORT]++;
	fz_send_ctl(f, fz_below(f, MSG));
}

/* WRITE WITH IMMEDIATE whose immediate is random or lies. */
static void fz_imm(struct fz *f)
{
	uint32_t off = f->ring_tx & (f->p.size - 1), len, imm;
	uint32_t par = fz_parity(f->wseq, f->tx_writes);

	len = fz_below(f, 4) ? 1 + fz_below(f, 4096) : 0;
	if (len > f->p.size - off)
		len = f->p.size - off;
	switch (fz_below(f, 5)) {
	case 0:
		imm = fz_rand(f);
		break;
	case 1:		/* the length lies */
		imm = (fz_value(f, len) & RS_IMM_LEN_MASK) | par;
		break;
	case 2:		/* credits out of range */
		imm = len | (uint32_t)fz_below(f, 128) << RS_IMM_CREDIT_SHIFT |
		      par;
		break;
	case 3:		/* the wrong number: a write run twice, or skipped */
		imm = len | (par ^ RS_IMM_PARITY);
		break;
	default:	/* more than the ring holds */
		imm = (f->p.size + 1 + fz_below(f, 4096)) | par;
		break;
	}
	rs_pat_fill(f->src, len, f->key, f->tx);
	fz_st.kind[K_IMM]++;
	f->tainted = true;
	if (!fz_write(f, IBV_WR_RDMA_WRITE_WITH_IMM, f->p.addr + off,
		      f->p.rkey, 0, len, imm) &&
	    (imm & RS_IMM_LEN_MASK) == len && (imm & RS_IMM_PARITY) == par) {
		f->ring_tx += len;	/* the module may have taken it */
		f->tx += len;
		f->tx_writes++;
	}
}

/* A plain RDMA WRITE anywhere inside the stream buffer. */
static void fz_ring(struct fz *f)
{
	uint32_t off = fz_below(f, f->p.size);
	uint32_t len = 1 + fz_below(f, f->p.size - off);
	int st;

	if (len > FZ_SRC)
		len = FZ_SRC;
	memset(f->src, 0xee, len);
	fz_st.kind[K_RING]++;
	f->tainted = true;
	st = fz_write(f, IBV_WR_RDMA_WRITE, f->p.addr + off, f->p.rkey, 0, len,
		      0);
	/* refused for its place, not because the module reset us before */
	if (st == IBV_WC_REM_ACCESS_ERR)
		FZ_VIOLATION("write of %u bytes at %u inside the ring (%u) refused: %s",
			     len, off, f->p.size, ibv_wc_status_str(st));
}

/* DIRECTs out of order, replayed, or with lying lengths. */
static void fz_direct(struct fz *f)
{
	struct fz_adv *a = fz_live_adv(f);
	unsigned char *m;

	fz_st.kind[K_DIRECT]++;
	f->tainted = true;
	if (f->have_direct && fz_below(f, 2)) {
		fz_ctl(f, T_DIRECT);	/* replay, credits and all */
		memcpy(peer_ctl_buf(&f->p), f->last_direct, MSG);
		fz_send_ctl(f, MSG);
		return;
	}
	m = fz_ctl(f, T_DIRECT);
	put32(m, 4, a && fz_below(f, 2) ? a->len - a->filled + fz_below(f, 3)
		      : fz_value(f, 1));
	put64(m, 24, fz_below(f, 2) ? f->tx : fz_value(f, f->tx));
	put32(m, 40, a ? a->id : fz_rand(f));
	put32(m, 44, fz_below(f, 2));
	fz_send_ctl(f, MSG);
}

/* An ADVERT of our memory, valid or not: the module's sender uses it. */
static void fz_advert(struct fz *f)
{
	unsigned char *m = fz_ctl(f, T_ADVERT);

	fz_st.kind[K_ADVERT]++;
	/* past our ring in the target: the module's direct bytes land there */
	put32(m, 4, fz_below(f, 4) ? 1 + fz_below(f, PEER_ADV_MAX -
						  2 * FZ_OUR_RING) :
		    (uint32_t)fz_rand(f));
	put64(m, 16, (uintptr_t)f->p.target + FZ_OUR_RING +
		     (fz_below(f, 4) ? 0 : fz_rand(f)));
	put32(m, 32, fz_below(f, 4) ? f->p.tmr->rkey : (uint32_t)fz_rand(f));
	put32(m, 36, fz_below(f, 4) ? 1 + 2 * fz_below(f, 4) : fz_rand(f));
	put32(m, 40, ++f->our_adv_id);
	put64(m, 24, fz_below(f, 2) ? f->rx_stream : fz_rand(f));
	put32(m, 44, fz_below(f, 2));
	/* the module's direct bytes are not checked: and if it takes a bad
	 * address, they may land in our ring
	 */
	f->taint_in = true;
	fz_send_ctl(f, MSG);
}

/* The ring of the connection before: another PD, never valid here. */
static uint64_t fz_prev_addr;
static uint32_t fz_prev_rkey;

/* A dead rkey: an ADVERT whose recv() has returned, or the last ring. */
static bool fz_stale_pick(struct fz *f, uint64_t *addr, uint32_t *rkey)
{
	uint64_t done = __atomic_load_n(&f->nrecv, __ATOMIC_ACQUIRE);
	int i = f->nstale ? fz_below(f, f->nstale) : 0;

	if (f->nstale && f->stale[i].after < done) {
		*addr = f->stale[i].addr;
		*rkey = f->stale[i].rkey;
		return true;
	}
	if (fz_prev_rkey) {
		*addr = fz_prev_addr;
		*rkey = fz_prev_rkey;
		return true;
	}
	return false;
}

/* Writes the module never allowed: each must fail at its HCA. */
static void fz_outside(struct fz *f)
{
	struct fz_adv *a = fz_live_adv(f);
	uint32_t len = 1 + fz_below(f, 64), rkey = f->p.rkey;
	enum ibv_wr_opcode op = IBV_WR_RDMA_WRITE;
	uint64_t addr;
	const char *what;
	int st;

	switch (fz_below(f, a ? 6 : 4)) {
	case 0:
		addr = f->p.addr + f->p.size + fz_below(f, 8192);
		what = "past the ring";
		break;
	case 1:
		addr = f->p.addr - 1 - fz_below(f, 8192);
		what = "before the ring";
		break;
	case 2:
		if (fz_stale_pick(f, &addr, &rkey)) {
			what = "a stale rkey";
		} else {
			addr = f->p.addr;
			rkey = f->p.rkey ^ (1 + fz_below(f, 0xffff)) << 8;
			what = "a wrong rkey";
		}
		break;
	case 3:
		addr = f->p.addr + fz_below(f, f->p.size - 64);
		op = IBV_WR_RDMA_READ;
		what = "an RDMA READ of the ring";
		break;
	default:
		addr = a->addr + a->len - fz_below(f, len);
		if (fz_below(f, 2))
			addr = a->addr - 1 - fz_below(f, 4096);
		rkey = a->rkey;
		what = "outside an ADVERT";
		break;
	}
	memset(f->src, 0xdd, len);
	fz_st.kind[K_OUTSIDE]++;
	f->tainted = true;
	st = fz_write(f, op, addr, rkey, 0, len, 0);
	if (!st)
		FZ_VIOLATION("%s succeeded (%u bytes at %#llx rkey %#x)", what,
			     len, (unsigned long long)addr, rkey);
	else if (st > 0)
		fz_st.hca_refused++;
	f->dead = true;
}

/* A valid FIN: everything we sent, then the module's socket reads EOF. */
static void fz_fin(struct fz *f)
{
	unsigned char *m = fz_ctl(f, 3);

	put64(m, 16, f->ring_tx);
	put64(m, 24, f->tx);
	fz_st.kind[K_FIN]++;
	f->fin_sent = true;
	fz_send_ctl(f, MSG);
}

/* ---- connections ---- */

/* Private data for the handshake, valid or (when bad) malformed. */
static uint8_t fz_pdata(struct fz *f, uint8_t *pd, bool bad, uint8_t *rnr,
			uint8_t *retry, int *must_fail)
{
	uint8_t len = 8;

	memset(pd, 0, 56);
	pd[0] = WIRE_VERSION;
	pd[3] = SLOTS;
	put32(pd, 4, 65536);
	*rnr = 6;
	*retry = 6;
	*must_fail = 0;
	if (fz_below(f, 2))
		pd[1] = FZ_F_WSEQ;
	if (!bad)
		return len;
	fz_st.kind[K_PDATA]++;
	switch (fz_below(f, 8)) {
	case 0:
		/* the CM pads it with zeroes: only version or slots missing tell */
		len = fz_below(f, 8);
		*must_fail = len < 4;
		break;
	case 1:
		len = 9 + fz_below(f, 48);
		for (int i = 8; i < len; i++)
			pd[i] = fz_rand(f);
		break;
	case 2:
		pd[0] = fz_value(f, WIRE_VERSION);
		*must_fail = pd[0] != WIRE_VERSION;
		break;
	case 3:
		/*
		 * 0x01 says we take RING (we ignore it), 0x02 that we number
		 * our writes (we do), 0x04 that we take a smaller RING
		 * (ignored too); others are unknown
		 */
		pd[1] = 1 + fz_below(f, 255);
		*must_fail = (pd[1] & ~FZ_F_KNOWN) != 0;
		break;
	case 4:
		put32(pd, 2, 0);
		pd[2] = fz_below(f, 256);
		pd[3] = fz_below(f, 256);
		*must_fail = pd[2] || pd[3] != SLOTS;
		put32(pd, 4, 65536);
		break;
	case 5:		/* ring size: information only */
		put32(pd, 4, fz_value(f, 65536));
		break;
	case 6:
		*rnr = 7;
		*must_fail = 1;
		break;
	default:
		/* accepted: on rxe the module's own REQs carry it (retry
		 * for ever, bounded by its watchdog); a REP's is not used
		 */
		*retry = 7;
		break;
	}
	return len;
}

static uint8_t fz_ack_timeout = 16;

/* Our side of the QP, on p->id, and the receives. */
static int fz_qp(struct fz *f)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 16, .max_recv_wr = SLOTS,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct peer *p = &f->p;
	int i;

	p->pd = ibv_alloc_pd(p->id->verbs);
	p->cq = p->pd ? ibv_create_cq(p->id->verbs, SLOTS + 32, NULL, NULL,
				      0) : NULL;
	if (!p->cq)
		return -1;
	qa.send_cq = p->cq;
	qa.recv_cq = p->cq;
	if (rdma_create_qp(p->id, p->pd, &qa))
		return -1;
	p->qp = p->id->qp;	/* peer_close() */
	/* about 270 ms (7 tries: 2 s): a module that reset us fails our
	 * sends soon, and a slow (debug) kernel still acks in time
	 */
	rdma_set_option(p->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			&fz_ack_timeout, sizeof(fz_ack_timeout));
	p->mr = ibv_reg_mr(p->pd, p->buf, sizeof(p->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	f->smr = ibv_reg_mr(p->pd, f->src, FZ_SRC, IBV_ACCESS_LOCAL_WRITE);
	if (!p->mr || !f->smr || peer_target(p))
		return -1;
	for (i = 0; i < SLOTS; i++)
		fz_repost(f, i);
	f->owed = 0;
	return 0;
}

/* Accept our own connection: its peer port is our id's. */
static int fz_accept(struct fz *f, int lfd)
{
	struct sockaddr_in sin;
	socklen_t len;
	int i;

	rs_set_timeo(lfd, SO_RCVTIMEO, 10000);
	for (i = 0; i < 20; i++) {
		f->s = accept(lfd, NULL, NULL);
		if (f->s < 0) {
			rs_info("conn %lu: accept: %s", fz_cur, strerror(errno));
			return -1;
		}
		len = sizeof(sin);
		if (!getpeername(f->s, (struct sockaddr *)&sin, &len) &&
		    sin.sin_port == rdma_get_src_port(f->p.id))	/* __be16 */
			return 0;
		rs_info("conn %lu: accepted port %u, ours is %u", fz_cur,
			ntohs(sin.sin_port), ntohs(rdma_get_src_port(f->p.id)));
		close(f->s);	/* an earlier one's, left over */
		f->s = -1;
	}
	return -1;
}

/* We connect to the module's listener. 1: refused as it should be. */
static int fz_client(struct fz *f, int lfd, const struct sockaddr_in *sin,
		     bool bad)
{
	struct peer *p = &f->p;
	uint8_t pd[56], rnr, retry, len;
	struct rdma_conn_param cp = {
		.initiator_depth = 1, .responder_resources = 1,
	};
	int must_fail, ret;

	len = fz_pdata(f, pd, bad, &rnr, &retry, &must_fail);
	cp.private_data = pd;
	cp.private_data_len = len;
	cp.retry_count = retry;
	cp.rnr_retry_count = rnr;
	p->ch = rdma_create_event_channel();
	if (!p->ch || rdma_create_id(p->ch, &p->id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(p->id, NULL, (struct sockaddr *)sin, 2000) ||
	    cm_wait(p, RDMA_CM_EVENT_ADDR_RESOLVED) ||
	    rdma_resolve_route(p->id, 2000) ||
	    cm_wait(p, RDMA_CM_EVENT_ROUTE_RESOLVED) || fz_qp(f) ||
	    rdma_connect(p->id, &cp))
		return -1;
	ret = cm_wait(p, RDMA_CM_EVENT_ESTABLISHED);
	if (must_fail) {
		if (!ret) {
			FZ_VIOLATION("malformed REQ accepted (len %u ver %u flags %u slots %u rnr %u retry %u)",
				     len, pd[0], pd[1], pd[2] << 8 | pd[3],
				     rnr, retry);
			fz_accept(f, lfd);
		} else if (p->last_event != RDMA_CM_EVENT_REJECTED)
			FZ_VIOLATION("malformed REQ: CM event %s",
				     rdma_event_str(p->last_event));
		return 1;
	}
	if (ret)
		return -1;
	/*
	 * the module numbers its writes exactly when we offered to, and
	 * takes a smaller RING only when we offered RING and that
	 */
	if ((p->rep_flags & FZ_F_WSEQ) != (pd[1] & FZ_F_WSEQ) ||
	    !(p->rep_flags & FZ_F_SHRINK) !=
	    ((pd[1] & (FZ_F_RING | FZ_F_SHRINK)) !=
	     (FZ_F_RING | FZ_F_SHRINK)))
		FZ_VIOLATION("REP flags %#x to REQ flags %#x", p->rep_flags,
			     pd[1]);
	f->wseq = pd[1] & FZ_F_WSEQ;
	return fz_accept(f, lfd);
}

struct fz_listen {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct sockaddr_in sin;
};

struct fz_connector {
	pthread_t thr;
	struct sockaddr_in sin;
	int fd, err;
};

static void *fz_connector_main(void *arg)
{
	struct fz_connector *c = arg;

	c->err = connect(c->fd, (struct sockaddr *)&c->sin, sizeof(c->sin)) ?
		 errno : 0;
	return NULL;
}

static int fz_listen_init(struct fz_listen *l)
{
	socklen_t len = sizeof(l->sin);

	l->ch = rdma_create_event_channel();
	if (!l->ch || rdma_create_id(l->ch, &l->id, NULL, RDMA_PS_TCP))
		return -1;
	rs_sin(&l->sin, rs.addr, 0);
	if (rdma_bind_addr(l->id, (struct sockaddr *)&l->sin) ||
	    rdma_listen(l->id, 8))
		return -1;
	memcpy(&l->sin, rdma_get_local_addr(l->id), len);
	return 0;
}

/* The module's socket connects to us. 1: it refused us as it should. */
static int fz_server(struct fz *f, struct fz_listen *l, bool bad)
{
	struct fz_connector c = { .sin = l->sin };
	struct rdma_conn_param cp = {
		.initiator_depth = 1, .responder_resources = 1,
	};
	struct peer *p = &f->p;
	struct rdma_cm_event *ev;
	uint8_t pd[56], rnr, retry, len;
	int must_fail, ret = -1;

	len = fz_pdata(f, pd, bad, &rnr, &retry, &must_fail);
	cp.private_data = pd;
	cp.private_data_len = len;
	cp.retry_count = retry;
	cp.rnr_retry_count = rnr;
	c.fd = rs_socket(0);
	if (c.fd < 0 || pthread_create(&c.thr, NULL, fz_connector_main, &c))
		return -1;
	if (rdma_get_cm_event(l->ch, &ev))
		goto out;
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		rdma_ack_cm_event(ev);
		goto out;
	}
	p->id = ev->id;
	if (ev->param.conn.private_data_len < 2 ||
	    !(((const uint8_t *)ev->param.conn.private_data)[1] & FZ_F_WSEQ))
		FZ_VIOLATION("the module's REQ does not number its writes");
	rdma_ack_cm_event(ev);
	p->ch = rdma_create_event_channel();
	if (!p->ch || rdma_migrate_id(p->id, p->ch) || fz_qp(f) ||
	    rdma_accept(p->id, &cp))
		goto out;
	ret = cm_wait(p, RDMA_CM_EVENT_ESTABLISHED) ? -1 : 0;
out:
	if (ret < 0 && p->id && !p->ch) {
		rdma_reject(p->id, NULL, 0);
		rdma_destroy_id(p->id);
		p->id = NULL;
	}
	pthread_join(c.thr, NULL);
	if (must_fail) {
		if (!c.err)
			FZ_VIOLATION("malformed REP accepted (len %u ver %u flags %u slots %u rnr %u)",
				     len, pd[0], pd[1], pd[2] << 8 | pd[3],
				     rnr);
		else if (c.err != EPROTO && c.err != ECONNREFUSED &&
			 c.err != ECONNRESET)
			FZ_VIOLATION("malformed REP: connect %s",
				     strerror(c.err));
		close(c.fd);
		return 1;
	}
	if (ret || c.err) {
		rs_info("conn %lu: server handshake failed: connect %s",
			fz_cur, strerror(c.err));
		close(c.fd);
		return -1;
	}
	f->s = c.fd;
	f->wseq = pd[1] & FZ_F_WSEQ;
	return 0;
}

/* Wait for the module's SETUP (processing whatever comes before). */
static int fz_setup(struct fz *f)
{
	double end = rs_now() + 10;
	struct ibv_wc wc;
	const unsigned char *m;
	int n;

	while (rs_now() < end) {
		n = ibv_poll_cq(f->p.cq, 1, &wc);
		if (n < 0)
			return -1;
		if (!n) {
			rs_msleep(1);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV)
			return -1;
		m = (const unsigned char *)f->p.buf + wc.wr_id * MSG;
		fz_repost(f, wc.wr_id);
		if (m[0] != T_SETUP || m[1] != WIRE_VERSION)
			return -1;
		f->credits = SLOTS + (get32(m, 0) & 0xffff);
		f->p.size = get32(m, 4);
		f->p.addr = get64(m, 16);
		f->p.rkey = get32(m, 32);
		return 0;
	}
	return -1;
}

/* Our SETUP: our ring is p->target, FZ_OUR_RING bytes. */
static int fz_send_setup(struct fz *f)
{
	unsigned char *m = fz_ctl(f, T_SETUP);

	put32(m, 4, FZ_OUR_RING);
	put64(m, 16, (uintptr_t)f->p.target);
	put32(m, 32, f->p.tmr->rkey);
	return fz_send_ctl(f, MSG);
}

static void fz_ack(struct fz *f)
{
	fz_ctl(f, T_ACK);
	fz_send_ctl(f, MSG);
}

/* What an honest peer does: data by both paths, ACKs, pauses. */
static void fz_honest(struct fz *f)
{
	unsigned int r = fz_below(f, 100);

	if (r < 50 || (r < 85 && !fz_live_adv(f)))
		fz_data(f);
	else if (r < 85)
		fz_ddata(f);
	else if (r < 92)
		rs_msleep(fz_below(f, 30));	/* let a reader advertise */
	else
		fz_ack(f);
}

static void fz_act(struct fz *f)
{
	unsigned int r = fz_below(f, 1000);

	fz_poll(f, 0, 0);
	if (f->cancel_ack_due) {
		f->cancel_ack_due = false;
		fz_ctl(f, T_CANCEL_ACK);
		fz_send_ctl(f, MSG);
		return;
	}
	if (fz_below(f, 1000) >= f->mut) {
		fz_honest(f);
		return;
	}
	if (r < 400)
		fz_ctl_field(f);
	else if (r < 440)
		fz_short(f);
	else if (r < 560)
		fz_imm(f);
	else if (r < 640)
		fz_ring(f);
	else if (r < 760)
		fz_direct(f);
	else if (r < 860)
		fz_advert(f);
	else if (r < 920)
		fz_outside(f);
	else if (r < 950)
		fz_fin(f);
	else
		fz_honest(f);
}

/* The socket side must end: reset, EOF after our FIN, or all bytes read. */
static void fz_settle(struct fz *f)
{
	double end = rs_now() + 20;
	bool clean = !f->tainted && !f->dead && !f->fin_sent;

	/* an honest peer's last bytes must all arrive */
	while (clean && !f->sock_done && rs_now() < end &&
	       __atomic_load_n(&f->sock_got, __ATOMIC_ACQUIRE) < f->tx) {
		fz_poll(f, 0, 0);
		/* a blocked reader's ADVERT: fill it with what is left */
		if (fz_live_adv(f))
			rs_msleep(1);
		rs_msleep(1);
		/* keep the window moving for the module's writer too */
		if (f->owed > SLOTS / 2 && f->credits > 1) {
			fz_ctl(f, T_ACK);
			fz_send_ctl(f, MSG);
		}
	}
	if (clean && !f->sock_done && f->sock_got < f->tx)
		FZ_VIOLATION("an honest peer's bytes stalled: %llu of %llu read",
			     (unsigned long long)f->sock_got,
			     (unsigned long long)f->tx);
	/* did the connection live through all its steps? */
	f->lived = !f->sock_done && !f->dead;
	/* a reader's CANCEL still owed its answer gets it (mostly) */
	end = rs_now() + 0.05;
	while (!f->dead && rs_now() < end) {
		fz_poll(f, 0, 1);
		if (f->cancel_ack_due) {
			f->cancel_ack_due = false;
			fz_ctl(f, T_CANCEL_ACK);
			fz_send_ctl(f, MSG);
		}
	}
	f->stop = true;
	/* our end goes away: the module must notice, then the reader ends */
	if (f->p.id && f->p.id->qp)
		rdma_disconnect(f->p.id);
	end = rs_now() + 30;
	while (!f->sock_done && rs_now() < end)
		rs_msleep(5);
	if (!f->sock_done) {
		FZ_VIOLATION("the module's socket did not notice the end within 30 s");
		shutdown(f->s, SHUT_RDWR);
	}
	pthread_join(f->rthr, NULL);
	pthread_join(f->wthr, NULL);
	if (f->sock_err && !fz_reset_errno(f->sock_err))
		FZ_VIOLATION("the module's socket failed with %s",
			     strerror(f->sock_err));
	if (f->wr_err && !fz_reset_errno(f->wr_err))
		FZ_VIOLATION("the module's socket failed send() with %s",
			     strerror(f->wr_err));
	/* as with TCP, one call reports the error, the others see the end */
	if (f->sock_eof && !f->fin_sent && !f->wr_err)
		FZ_VIOLATION("EOF without a FIN");
	if (f->lived)
		fz_st.survived++;
	else if (f->sock_err || (f->sock_eof && f->wr_err))
		fz_st.resets++;
	else
		fz_st.eof++;
}

static void fz_free(struct fz *f)
{
	if (f->smr)
		ibv_dereg_mr(f->smr);
	peer_close(&f->p);
	free(f->src);
	if (f->s >= 0)
		close(f->s);
}

/* One connection, from seed; false if it could not even be set up. */
static void fz_conn(struct __test_metadata *_metadata, struct fz *f,
		    int lfd, const struct sockaddr_in *sin,
		    struct fz_listen *l)
{
	bool server = fz_below(f, 2), bad = !fz_below(f, 8);
	static const unsigned int rates[] = { 0, 5, 20, 100, 400 };
	int steps = 10 + fz_below(f, 300), i, ret;
	double t0 = rs_now(), t1;

	f->s = -1;
	f->mut = rates[fz_below(f, 5)];
	f->src = calloc(1, FZ_SRC);
	ASSERT_NE(NULL, f->src);
	f->key = rs_key(fz_cur, 0, 0xf2);
	f->rkey_key = rs_key(fz_cur, 1, 0xf2);
	ret = server ? fz_server(f, l, bad) : fz_client(f, lfd, sin, bad);
	fz_st.conns++;
	if (server)
		fz_st.server++;
	else
		fz_st.client++;
	if (ret > 0) {
		fz_st.refused++;
		return;
	}
	if (ret) {
		/* counted; too many of them fail the run */
		rs_info("conn %lu: handshake failed", fz_cur);
		fz_st.hs_failed++;
		return;
	}
	ASSERT_EQ(0, fz_setup(f)) TH_LOG("conn %lu: no SETUP", fz_cur);
	ASSERT_EQ(0, rs_set_timeo(f->s, SO_RCVTIMEO, 300));
	ASSERT_EQ(0, fz_send_setup(f));
	ASSERT_EQ(0, pthread_create(&f->rthr, NULL, fz_reader, f));
	ASSERT_EQ(0, pthread_create(&f->wthr, NULL, fz_writer, f));
	for (i = 0; i < steps && !f->dead && !f->sock_done; i++)
		fz_act(f);
	/* an honest peer ends with a FIN now and then */
	if (!f->mut && !fz_below(f, 3))
		fz_fin(f);
	t1 = rs_now();
	fz_settle(f);
	if (fz_verbose || rs_now() - t0 > 5)
		rs_info("conn %lu: %s, mutating %u/1000, %d of %d steps in %.1f s, end %.1f s: sent %llu read %llu, %s%s%s%s",
			fz_cur, server ? "server" : "client", f->mut, i, steps,
			t1 - t0, rs_now() - t1, (unsigned long long)f->tx,
			(unsigned long long)f->sock_got,
			f->sock_err ? strerror(f->sock_err) :
			f->sock_eof ? "EOF" : "open",
			f->tainted ? ", tainted" : "", f->dead ? ", dead" : "",
			f->fin_sent ? ", FIN" : "");
	fz_prev_addr = f->p.addr;
	fz_prev_rkey = f->p.rkey;
}

/* ---- the connection beside: verified data all along ---- */

struct fz_bystander {
	int a, b;
	volatile bool stop;
	pthread_t thr;
	uint64_t bytes;
	unsigned int rounds;
	bool bad;
	char what[160];
};

static void *fz_bystander_main(void *arg)
{
	struct fz_bystander *y = arg;
	struct rs_xfer tx, rx;

	while (!y->stop) {
		tx = (struct rs_xfer){ .fd = y->a, .total = 256 << 10,
				       .key = rs_key(y->rounds, 0, 0xb5),
				       .chunk = 65536, .random = true,
				       .seed = y->rounds + 1 };
		rx = tx;
		rx.fd = y->b;
		rs_xfer_start(&tx, rs_sender);
		rs_xfer_start(&rx, rs_receiver);
		rs_xfer_join(&tx);
		rs_xfer_join(&rx);
		if (tx.err || rx.err || rx.mismatch || rx.done != rx.total) {
			snprintf(y->what, sizeof(y->what),
				 "round %u: send %s, recv %s, %llu of %llu bytes%s",
				 y->rounds, strerror(tx.err), strerror(rx.err),
				 (unsigned long long)rx.done,
				 (unsigned long long)rx.total,
				 rx.mismatch ? ", data mismatch" : "");
			y->bad = true;
			break;
		}
		y->bytes += rx.done;
		y->rounds++;
		/* busy all along, but leave the CPU to the fuzzer mostly */
		rs_msleep(20);
	}
	return NULL;
}

FIXTURE(fuzz)
{
	int lfd;
	struct fz_listen l;
	struct fz_bystander y;
};

FIXTURE_SETUP(fuzz)
{
	memset(&self->l, 0, sizeof(self->l));
	memset(&self->y, 0, sizeof(self->y));
	self->lfd = -1;
	self->y.a = self->y.b = -1;
}

FIXTURE_TEARDOWN(fuzz)
{
	if (self->lfd >= 0)
		close(self->lfd);
	if (self->y.a >= 0)
		close(self->y.a);
	if (self->y.b >= 0)
		close(self->y.b);
	if (self->l.id)
		rdma_destroy_id(self->l.id);
	if (self->l.ch)
		rdma_destroy_event_channel(self->l.ch);
}

static void fz_report(double secs)
{
	int i;

	rs_info("fuzz_wire: seed %#llx, %.0f s: %lu connections (%lu client, %lu server), %lu refused at the handshake, %lu reset, %lu ended by a FIN, %lu lived through all their steps",
		(unsigned long long)fz_seed, secs, fz_st.conns, fz_st.client,
		fz_st.server, fz_st.refused, fz_st.resets, fz_st.eof,
		fz_st.survived);
	for (i = 0; i < K_NR; i++)
		rs_info("fuzz_wire:   %-12s %lu", fz_kind_name[i],
			fz_st.kind[i]);
	for (i = 0; i < F_NR; i++)
		rs_info("fuzz_wire:   field %-9s %lu", fz_field_name[i],
			fz_st.field[i]);
	rs_info("fuzz_wire: %lu stale ADVERTs (%lu written into anyway)",
		fz_st.stale, fz_st.stale_used);
	rs_info("fuzz_wire: %lu handshakes failed, %lu refused by the HCA, %llu KiB sent, %llu KiB received, %lu violations",
		fz_st.hs_failed, fz_st.hca_refused,
		(unsigned long long)fz_st.bytes_out >> 10,
		(unsigned long long)fz_st.bytes_in >> 10, fz_st.violations);
}

TEST_F_TIMEOUT(fuzz, wire, 7200)
{
	unsigned long secs = rs_env_ulong("RS_FUZZ_SECS", 30);
	unsigned long first = rs_env_ulong("RS_FUZZ_FIRST", 0);
	unsigned long conns = rs_env_ulong("RS_FUZZ_CONNS", ~0UL);
	struct sockaddr_in sin;
	double t0 = rs_now();
	struct fz *f;

	RS_SKIP_TCP("speaks the rdmastream wire protocol");
	fz_seed = rs_env_ulong("RS_FUZZ_SEED", 0);
	fz_verbose = rs_env_ulong("RS_FUZZ_VERBOSE", 0);
	if (!fz_seed)
		fz_seed = rs_mix64(time(NULL) ^ getpid());
	rs_info("fuzz_wire: seed %#llx (replay: RS_FUZZ_SEED=%#llx), %lu s",
		(unsigned long long)fz_seed, (unsigned long long)fz_seed,
		secs);
	rs_watchdog(secs + 600);
	self->lfd = rs_listener_opts(_metadata, &sin, 16, 0);
	ASSERT_EQ(0, fz_listen_init(&self->l)) TH_LOG("rdma_listen: %s",
						     strerror(errno));
	rs_pair(_metadata, &self->y.a, &self->y.b);
	ASSERT_EQ(0, pthread_create(&self->y.thr, NULL, fz_bystander_main,
				    &self->y));
	f = malloc(sizeof(*f));
	ASSERT_NE(NULL, f);
	for (fz_cur = first; fz_cur - first < conns &&
	     rs_now() - t0 < secs && !self->y.bad; fz_cur++) {
		memset(f, 0, sizeof(*f));
		f->rnd = rs_mix64(fz_seed ^ rs_mix64(fz_cur));
		fz_conn(_metadata, f, self->lfd, &sin, &self->l);
		fz_free(f);
		if (_metadata->passed == 0)
			break;
	}
	free(f);
	self->y.stop = true;
	pthread_join(self->y.thr, NULL);
	fz_report(rs_now() - t0);
	rs_info("fuzz_wire: beside it, %u rounds, %llu KiB verified",
		self->y.rounds, (unsigned long long)self->y.bytes >> 10);
	EXPECT_FALSE(self->y.bad) TH_LOG("the connection beside: %s",
					 self->y.what);
	EXPECT_EQ(0, fz_st.violations);
	EXPECT_GE(fz_st.conns / 10, fz_st.hs_failed)
		TH_LOG("%lu of %lu handshakes failed", fz_st.hs_failed,
		       fz_st.conns);
	EXPECT_LT(0, fz_st.survived + fz_st.resets + fz_st.eof);
}

TEST_HARNESS_MAIN
