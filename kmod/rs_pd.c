// SPDX-License-Identifier: GPL-2.0
/*
 * Giving a connection's protection domain back (docs/kernels.md).
 *
 * rdma_rxe before 6.0 may run a destroyed QP's cleanup, which drops the
 * QP's reference on its PD, after ib_destroy_qp() has returned: from a
 * work item, once the last skb the QP sent is freed. ib_dealloc_pd()
 * frees the PD at once, so that late drop writes into freed memory
 * ("refcount_t: underflow" in rxe_qp_do_cleanup, seen on 5.10 after rxe
 * cut a connection with retransmissions still queued). From 6.0 rxe
 * waits for every reference before destroy returns ("RDMA/rxe: Stop
 * lookup of partially built objects"). On the older kernels a PD of an
 * rxe device lingers here for RS_PD_LINGER before it is deallocated,
 * and all of a device's go when the device is removed or the module
 * unloaded (an ib_client). A device's removal reaches this client before
 * rdma_cm's (clients go in reverse order of registration), so sockets
 * still give PDs back after it: the client's data on the device, set in
 * add and cleared in remove under rs_pd_lock, says whether a PD may
 * still linger. No header tells rxe's behaviour: the kernel version
 * does (rs_compat.h). Process context throughout (ib_dealloc_pd sleeps).
 */
#include "rs.h"

#ifdef RS_PD_LINGER

struct rs_pd_lingering {
	struct list_head node;
	struct ib_pd *pd;
	unsigned long since;		/* jiffies */
};

static LIST_HEAD(rs_pd_list);
static DEFINE_MUTEX(rs_pd_lock);
static struct ib_client rs_pd_client;

static void rs_pd_reap(struct work_struct *work);
static DECLARE_DELAYED_WORK(rs_pd_work, rs_pd_reap);

/* Deallocate the PDs of dev (all if NULL) that lingered long enough. */
static void rs_pd_flush(struct ib_device *dev, bool all)
{
	struct rs_pd_lingering *l, *tmp;
	bool more = false;
	LIST_HEAD(done);

	mutex_lock(&rs_pd_lock);
	list_for_each_entry_safe(l, tmp, &rs_pd_list, node) {
		if (dev && l->pd->device != dev)
			continue;
		if (all || time_after_eq(jiffies, l->since + RS_PD_LINGER))
			list_move_tail(&l->node, &done);
		else
			more = true;
	}
	mutex_unlock(&rs_pd_lock);
	list_for_each_entry_safe(l, tmp, &done, node) {
		ib_dealloc_pd(l->pd);
		kfree(l);
	}
	if (more && !dev)
		schedule_delayed_work(&rs_pd_work, RS_PD_LINGER);
}

static void rs_pd_reap(struct work_struct *work)
{
	rs_pd_flush(NULL, false);
}

void rs_pd_put(struct ib_pd *pd)
{
	struct rs_pd_lingering *l = NULL;

	if (pd->device->ops.driver_id == RDMA_DRIVER_RXE)
		l = kmalloc(sizeof(*l), GFP_KERNEL);
	if (l) {
		l->pd = pd;
		l->since = jiffies;
		mutex_lock(&rs_pd_lock);
		/* the device is still ours: not removed, not unloading */
		if (ib_get_client_data(pd->device, &rs_pd_client)) {
			list_add_tail(&l->node, &rs_pd_list);
			pd = NULL;
		}
		mutex_unlock(&rs_pd_lock);
	}
	if (pd) {
		kfree(l);
		ib_dealloc_pd(pd);
		return;
	}
	schedule_delayed_work(&rs_pd_work, RS_PD_LINGER);
}

static int rs_pd_add_one(struct ib_device *dev)
{
	ib_set_client_data(dev, &rs_pd_client, &rs_pd_list);
	return 0;
}

/* before the device goes: nothing of it lingers, now or later */
static void rs_pd_remove_one(struct ib_device *dev, void *client_data)
{
	mutex_lock(&rs_pd_lock);
	ib_set_client_data(dev, &rs_pd_client, NULL);
	mutex_unlock(&rs_pd_lock);
	rs_pd_flush(dev, true);
}

static struct ib_client rs_pd_client = {
	.name	= "rdmastream",
	.add	= rs_pd_add_one,
	.remove	= rs_pd_remove_one,
};

int rs_pd_init(void)
{
	return ib_register_client(&rs_pd_client);
}

/* after the last socket: every PD still lingering goes now */
void rs_pd_exit(void)
{
	ib_unregister_client(&rs_pd_client);
	cancel_delayed_work_sync(&rs_pd_work);
	rs_pd_flush(NULL, true);
}

#endif /* RS_PD_LINGER */
