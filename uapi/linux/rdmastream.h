/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * rdmastream: reliable byte streams over RDMA through the socket API.
 *
 *	fd = socket(AF_RDMASTREAM, SOCK_STREAM, 0);
 *
 * Addresses are struct sockaddr_in / sockaddr_in6 of an IP address that
 * belongs to an RDMA-capable netdev (RoCE, iWARP, IPoIB or Soft-RoCE).
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

/* Level for setsockopt/getsockopt of the options below. */
#define SOL_RDMASTREAM		298

/* getsockopt only: struct rdmastream_info, like TCP_INFO. */
#define RDMASTREAM_INFO		1

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
	__u64	rsi_bytes_sent;		/* bytes handed to sendmsg and queued */
	__u64	rsi_bytes_acked;	/* bytes the peer has consumed */
	__u64	rsi_bytes_received;	/* bytes that arrived in the stream buffer */
	__u64	rsi_bytes_read;		/* bytes the application has read */
	__u64	rsi_writes;		/* RDMA WRITE work requests posted */
	__u64	rsi_inline_writes;	/* ...of which carried their data inline */
	__u64	rsi_ctrl_sent;		/* control messages sent */
	__u64	rsi_ctrl_received;	/* control messages received */
	__u64	rsi_window_stalls;	/* pushes stopped by a full peer buffer */
	__u64	rsi_credit_stalls;	/* pushes stopped by lack of credits */
	__u64	rsi_completions;	/* send completions processed */
	__u64	rsi_probes;		/* zero-length liveness writes posted */
};

#define RDMASTREAM_INFO_F_PEER_READY	(1U << 0) /* peer buffer known */
#define RDMASTREAM_INFO_F_FIN_SENT	(1U << 1)
#define RDMASTREAM_INFO_F_FIN_RCVD	(1U << 2)
#define RDMASTREAM_INFO_F_RESET		(1U << 3)

#endif /* _UAPI_LINUX_RDMASTREAM_H */
