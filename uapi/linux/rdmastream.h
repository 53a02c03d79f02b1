/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * rdmastream: reliable byte streams over RDMA through the socket API.
 *
 *	fd = socket(AF_RDMASTREAM, SOCK_STREAM, 0);
 * or, the same protocol for runtimes that know only AF_INET/AF_INET6:
 *	fd = socket(AF_INET, SOCK_STREAM, IPPROTO_RDMASTREAM);
 *
 * Addresses are struct sockaddr_in / sockaddr_in6 of an IP address that
 * belongs to an RDMA-capable netdev (InfiniBand/IPoIB, RoCE or Soft-RoCE).
 * iWARP devices are refused (connect() fails with EPROTONOSUPPORT, and a
 * listener rejects connections that arrive on one): iWARP has no RDMA
 * WRITE WITH IMMEDIATE, which the protocol's stream buffer relies on.
 * Everything else behaves as a TCP socket does.
 */
#ifndef _UAPI_LINUX_RDMASTREAM_H
#define _UAPI_LINUX_RDMASTREAM_H

#include <linux/types.h>

/*
 * Family number. 19 was AF_ECONET, removed from Linux in 3.5; no 6.x kernel
 * implements it. The module parameter "family" of rdmastream.ko overrides
 * the number if a site needs another one; programs then pass that number.
 */
#define AF_RDMASTREAM		19
#define PF_RDMASTREAM		AF_RDMASTREAM

/*
 * The IPPROTO route: a protocol number for AF_INET and AF_INET6 stream
 * sockets, as IPPROTO_MPTCP (262) and IPPROTO_SMC (256) are. Addresses,
 * getsockname() and SO_DOMAIN are then those of the IP family; options,
 * counters and behaviour are AF_RDMASTREAM's. 260 is in Linux's private
 * range above IPPROTO_RAW and below IPPROTO_MAX (263 since 5.6), and no
 * kernel uses it (256 SMC, 257 SMBDIRECT, 261 QUIC and 262 MPTCP are
 * taken or proposed). The module parameter "ipproto" overrides it (0:
 * no IPPROTO route).
 */
#define IPPROTO_RDMASTREAM	260

/* Level for setsockopt/getsockopt of the options below. */
#define SOL_RDMASTREAM		298

/* getsockopt only: struct rdmastream_info, like TCP_INFO. */
#define RDMASTREAM_INFO		1
/*
 * int: how data moves (RDMASTREAM_POLICY_*). Set before or after connect;
 * a connected socket applies it to its next send and receive.
 */
#define RDMASTREAM_POLICY	2
/*
 * int: the smallest receive buffer, in bytes, that a blocking recv()
 * advertises for a direct transfer (policy dynamic). 0 means the module's
 * default (module parameter direct_threshold).
 */
#define RDMASTREAM_DIRECT_THRESHOLD	3
/*
 * int: transparent TCP fallback (docs/fallback.md), RDMASTREAM_FALLBACK_*.
 * Set before connect() or listen(): EISCONN on a connected or connecting
 * socket, EINVAL on a listener. The default is the module parameter
 * "fallback".
 */
#define RDMASTREAM_FALLBACK	4

enum {
	RDMASTREAM_FALLBACK_NEVER = 0,	/* RDMA only: its errors, as ever */
	RDMASTREAM_FALLBACK_AUTO = 1,	/* TCP when RDMA cannot be used */
	RDMASTREAM_FALLBACK_FORCE = 2,	/* always TCP (tests, comparisons) */
};

/* Why a socket runs over TCP: rdmastream_info.rsi_fallback. */
enum {
	RDMASTREAM_FB_NONE = 0,		/* RDMA (or not connected) */
	RDMASTREAM_FB_FORCED = 1,	/* RDMASTREAM_FALLBACK_FORCE */
	RDMASTREAM_FB_NO_DEVICE = 2,	/* no RDMA device on the route */
	RDMASTREAM_FB_REJECTED = 3,	/* the peer's CM: no rdmastream there */
	RDMASTREAM_FB_TIMEOUT = 4,	/* the peer's CM silent (fallback_ms) */
	RDMASTREAM_FB_ACCEPTED = 5,	/* accepted from a TCP client */
};

/*
 * Transfer policies. Dynamic (the default) writes straight into the
 * receiver's buffer when it has advertised one and through the receiver's
 * stream buffer otherwise, switching automatically. Direct-only means
 * "direct whenever the receiver advertises": a receiver advertises every
 * blocking receive whatever its size that finds its stream buffer empty
 * (bytes there come first; with a send slot and a credit free for the
 * ADVERT, else it waits for data as usual), and a blocking sender with no
 * advertised buffer waits for one for a short grace period (10 ms, and
 * never longer than SO_SNDTIMEO) before it sends through the stream
 * buffer instead; a non-blocking send does not wait. A sender that had to
 * do that stays "degraded" (sends as dynamic does, without waiting) until
 * the receiver's next advertisement arrives, so a peer that never
 * advertises (indirect-only, non-blocking or small receives, MSG_PEEK)
 * costs one grace period, not a stall; rsi_direct_degrades counts these.
 * Indirect-only never advertises and never writes direct. The two are the
 * baselines of the MacArthur-Russell evaluation; each end follows its own
 * socket's policy.
 */
enum {
	RDMASTREAM_POLICY_DYNAMIC = 0,
	RDMASTREAM_POLICY_DIRECT_ONLY = 1,
	RDMASTREAM_POLICY_INDIRECT_ONLY = 2,
};

/* Connection states reported in rdmastream_info.rsi_state (TCP numbering). */
enum {
	RDMASTREAM_ESTABLISHED = 1,
	RDMASTREAM_SYN_SENT = 2,
	RDMASTREAM_CLOSE = 7,
	RDMASTREAM_LISTEN = 10,
};

struct rdmastream_info {
	__u8	rsi_state;		/* RDMASTREAM_* */
	__u8	rsi_pad[3];
	__u32	rsi_flags;		/* RDMASTREAM_INFO_F_* */
	__u32	rsi_rx_ring;		/* bytes of the local stream buffer */
	__u32	rsi_tx_ring;		/* bytes of the local send buffer */
	__u32	rsi_peer_ring;		/* bytes of the peer's stream buffer */
	__u32	rsi_credits;		/* receive slots granted by the peer */
	__u32	rsi_max_inline;		/* inline payload limit of the QP */
	__u32	rsi_pad2;
	/* stream totals, direct and indirect together */
	__u64	rsi_bytes_sent;		/* bytes handed to sendmsg and queued */
	__u64	rsi_bytes_acked;	/* bytes the peer has consumed */
	__u64	rsi_bytes_received;	/* bytes that arrived */
	__u64	rsi_bytes_read;		/* bytes the application has read */
	__u64	rsi_writes;		/* RDMA WRITE work requests posted */
	__u64	rsi_inline_writes;	/* ...of which carried their data inline */
	__u64	rsi_ctrl_sent;		/* control messages sent */
	__u64	rsi_ctrl_received;	/* control messages received */
	__u64	rsi_window_stalls;	/* pushes stopped by a full peer buffer */
	__u64	rsi_credit_stalls;	/* pushes stopped by lack of credits */
	__u64	rsi_completions;	/* send completions processed */
	__u64	rsi_probes;		/* zero-length liveness writes posted */
	/* direct transfers; sizes grow only by appending after this point */
	__u32	rsi_policy;		/* RDMASTREAM_POLICY_* in effect */
	__u32	rsi_direct_threshold;	/* bytes, as in effect */
	__u32	rsi_tx_phase;		/* sender's phase: odd = direct */
	__u32	rsi_rx_phase;		/* receiver's phase: odd = direct */
	__u64	rsi_direct_bytes_sent;	/* written straight into peer buffers */
	__u64	rsi_indirect_bytes_sent;	/* sent through the peer's ring */
	__u64	rsi_direct_bytes_received;	/* landed in our own buffers */
	__u64	rsi_indirect_bytes_received;	/* arrived in our stream buffer */
	__u64	rsi_adverts_sent;	/* receive buffers advertised */
	__u64	rsi_adverts_filled;	/* ...that received direct data */
	__u64	rsi_adverts_dead;	/* ...overtaken by indirect data or FIN */
	__u64	rsi_adverts_cancelled;	/* ...withdrawn (timeout, signal) */
	__u64	rsi_adverts_received;	/* peer ADVERTs received */
	__u64	rsi_adverts_used;	/* ...that we wrote into */
	__u64	rsi_adverts_stale;	/* ...thrown away as stale or cancelled */
	__u64	rsi_tx_phase_switches;	/* sender switches direct <-> indirect */
	__u64	rsi_rx_phase_switches;	/* receiver switches */
	__u64	rsi_zcopy_sends;	/* direct writes from pinned user pages */
	__u64	rsi_local_invalidates;	/* buffers we had to invalidate ourselves */
	__u64	rsi_remote_invalidates;	/* buffers the peer's send invalidated */
	__u64	rsi_errors;		/* failed work completions seen */
	/* policy direct-only, sizes grow only by appending after this point */
	__u64	rsi_direct_degrades;	/* times it went indirect: no ADVERT */
	/* sizes grow only by appending after this point */
	__u64	rsi_sq_kicks;		/* send queue silent for a second: kicked */
	/* sizes grow only by appending after this point */
	__u32	rsi_fallback;		/* RDMASTREAM_FB_*: over TCP, and why */
	__u32	rsi_pad3;
	/* adaptive receive polling, sizes grow only by appending after this */
	__u64	rsi_spin_hits;		/* waits whose data came while spinning */
	__u64	rsi_spin_misses;	/* waits that spun, then had to sleep */
	__u32	rsi_spin_est_us;	/* how soon data comes after a wait
					 * begins (smoothed); spins up to twice
					 * that, at most spin_max_us
					 */
	__u32	rsi_pad4;
	/* loss recovery, sizes grow only by appending after this point */
	__u32	rsi_ack_timeout_us;	/* the QP's ack timeout: a loss that
					 * no later packet reveals is resent
					 * after this long
					 */
	__u32	rsi_retry_count;	/* the QP's retries in a row; 7 on
					 * rxe: for ever, the module's own
					 * limit ends a silent connection
					 */
	__u32	rsi_rtt_us;		/* smoothed round trip measured on
					 * this connection (small signalled
					 * work requests, post to completion),
					 * 0: no sample yet
					 */
	__u32	rsi_base_rtt_us;	/* the peer's smoothed round trip
					 * that chose the ack timeout, 0: none
					 * was known (a first contact)
					 */
	__u32	rsi_base_rttvar_us;	/* ...and its mean deviation */
	__u32	rsi_path_mtu;		/* the QP's path MTU, bytes: the
					 * largest RoCE MTU the netdev allows
					 */
	/* in-flight budget, sizes grow only by appending after this point */
	__u32	rsi_tx_cap;		/* bytes this connection may keep in
					 * flight: its share of the module's
					 * inflight_max, 0: no cap
					 */
	__u32	rsi_write_cap;		/* largest indirect write, bytes
					 * (write_pkts times the path MTU,
					 * to another host over rxe), 0: none
					 */
	__u64	rsi_cap_stalls;		/* pushes stopped by that share */
	/* peer access, sizes grow only by appending after this point */
	__u64	rsi_inv_fences;		/* receive buffers taken back by our
					 * own LOCAL_INV whose MR was then
					 * deregistered, on rxe, to wait out
					 * a packet checked before it
					 */
	/* policy dynamic, sizes grow only by appending after this point */
	__u64	rsi_adverts_skipped;	/* waits of receives that did not
					 * advertise: the ADVERTs before
					 * them died empty
					 */
	/* pinning, sizes grow only by appending after this point */
	__u64	rsi_direct_refused;	/* waits of receives that did not
					 * advertise: the buffer is in a
					 * shared file mapping (not shmem
					 * or hugetlb)
					 */
};

#define RDMASTREAM_INFO_F_PEER_READY	(1U << 0) /* peer buffer known */
#define RDMASTREAM_INFO_F_FIN_SENT	(1U << 1)
#define RDMASTREAM_INFO_F_FIN_RCVD	(1U << 2)
#define RDMASTREAM_INFO_F_RESET		(1U << 3)
#define RDMASTREAM_INFO_F_FALLBACK	(1U << 4) /* over TCP (rsi_fallback) */

/*
 * Socket diagnostics (sock_diag, NETLINK_SOCK_DIAG), as ss(8) uses for
 * TCP and unix sockets. A dump request is a SOCK_DIAG_BY_FAMILY message
 * with NLM_F_DUMP (and NLM_F_REQUEST) whose payload is
 * struct rdmastream_diag_req, sdiag_family set to AF_RDMASTREAM (or the
 * module's family= number). It lists every socket of the module in the
 * requester's network namespace: AF_RDMASTREAM sockets and the IPPROTO
 * route's AF_INET/AF_INET6 ones alike; each reply says which family and
 * protocol the socket really has. Requests without NLM_F_DUMP are refused
 * with EOPNOTSUPP, malformed ones (short, non-zero protocol or padding,
 * unknown rdiag_show bits) with EINVAL. Details: docs/diag.md.
 */
struct rdmastream_diag_req {
	__u8	sdiag_family;		/* AF_RDMASTREAM */
	__u8	sdiag_protocol;		/* 0 */
	__u16	rdiag_pad;		/* 0 */
	__u32	rdiag_states;		/* 1 << TCP state, for each wanted */
	__u32	rdiag_ino;		/* 0, or only the socket of this inode */
	__u32	rdiag_show;		/* RDMASTREAM_DIAG_SHOW_* */
};

#define RDMASTREAM_DIAG_SHOW_INFO	(1U << 0) /* RDMASTREAM_DIAG_INFO */

/* One reply message per socket: this, then the attributes below. */
struct rdmastream_diag_msg {
	__u8	rdiag_family;		/* AF_RDMASTREAM, AF_INET or AF_INET6 */
	__u8	rdiag_state;		/* TCP state numbering */
	__u16	rdiag_protocol;		/* 0, or IPPROTO_RDMASTREAM */
	__u8	rdiag_shutdown;		/* RCV_SHUTDOWN 1 | SEND_SHUTDOWN 2 */
	__u8	rdiag_pad[3];
	__u32	rdiag_inode;		/* 0 once closed (orphan) */
	__u32	rdiag_uid;		/* in the requester's user namespace */
	__u32	rdiag_rqueue;		/* unread bytes; listener: accept queue */
	__u32	rdiag_wqueue;		/* unsent bytes (SIOCOUTQ); listener:
					 * backlog
					 */
	__u32	rdiag_cookie[2];	/* SO_COOKIE */
};

/* Attributes of a reply (netlink attributes after the message). */
enum {
	RDMASTREAM_DIAG_UNSPEC,
	RDMASTREAM_DIAG_LOCAL,	/* sockaddr_in/_in6, as getsockname() */
	RDMASTREAM_DIAG_PEER,	/* as getpeername(); only when it succeeds */
	RDMASTREAM_DIAG_INFO,	/* struct rdmastream_info (SHOW_INFO) */
	__RDMASTREAM_DIAG_MAX,
};

#define RDMASTREAM_DIAG_MAX	(__RDMASTREAM_DIAG_MAX - 1)

#endif /* _UAPI_LINUX_RDMASTREAM_H */
