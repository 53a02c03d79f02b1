// SPDX-License-Identifier: GPL-2.0
/*
 * Pinning the application's pages for a direct transfer.
 *
 * Only the first segment of a user-space iterator is taken, so a direct
 * transfer always covers one virtually contiguous range. Pages are pinned
 * with FOLL_PIN | FOLL_LONGTERM (pin_user_pages_fast): an advertised
 * receive may hold its pins for as long as the application blocks, so the
 * pages are first moved out of CMA and ZONE_MOVABLE. Pins are charged to
 * the caller's mm (pinned_vm) against RLIMIT_MEMLOCK unless it has
 * CAP_IPC_LOCK, as ib_umem charges user MRs; over the limit the pin fails
 * with -ENOBUFS and the transfer goes through the rings instead. They are
 * unpinned (dirtied for receives) and uncharged when the transfer is over,
 * which for a transfer whose caller gave up is after the fence.
 * DMA mapping is separate because it happens under rs_sock.lock, where a
 * teardown can undo it (rs_dslots_unmap_locked, rs_zsends_unmap_locked).
 */
#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/uio.h>

#include "rs.h"

/* Start and length of the iterator's first non-empty user segment. */
static bool rs_iter_first(const struct iov_iter *it, unsigned long *addr,
			  size_t *len)
{
	const struct iovec *iov;
	size_t off;

	if (!user_backed_iter(it) || !iov_iter_count(it))
		return false;
	if (rs_iter_is_ubuf(it)) {
		*addr = (unsigned long)rs_iter_ubuf(it) + it->iov_offset;
		*len = it->count;
		return true;
	}
	if (!iter_is_iovec(it))
		return false;
	off = it->iov_offset;
	for (iov = iter_iov(it); iov < iter_iov(it) + it->nr_segs;
	     iov++, off = 0) {
		if (iov->iov_len <= off)
			continue;
		*addr = (unsigned long)iov->iov_base + off;
		*len = min(iov->iov_len - off, it->count);
		return true;
	}
	return false;
}

/* Charge npages to the caller against RLIMIT_MEMLOCK. */
static int rs_pin_charge(struct rs_pin *p)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	struct mm_struct *mm = current->mm;
	u64 pinned;

	if (!mm)
		return -EOPNOTSUPP;
	pinned = atomic64_add_return(p->npages, &mm->pinned_vm);
	if (pinned > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(p->npages, &mm->pinned_vm);
		return -ENOBUFS;
	}
	mmgrab(mm);
	p->mm = mm;
	return 0;
}

static void rs_pin_uncharge(struct rs_pin *p)
{
	if (!p->mm)
		return;
	atomic64_sub(p->npages, &p->mm->pinned_vm);
	mmdrop(p->mm);
	p->mm = NULL;
}

/*
 * Pin up to max bytes at the iterator's position (which does not move).
 * Returns the bytes pinned or a negative errno (-ENOBUFS: over the
 * caller's RLIMIT_MEMLOCK); partial pins are undone.
 */
int rs_pin_user(struct rs_pin *p, struct iov_iter *it, u32 max, bool write)
{
	unsigned long addr;
	size_t len;
	int got, ret;

	memset(p, 0, sizeof(*p));
	if (!rs_iter_first(it, &addr, &len))
		return -EOPNOTSUPP;
	len = min_t(size_t, len, max);
	if (!len)
		return -EOPNOTSUPP;
	p->npages = DIV_ROUND_UP(offset_in_page(addr) + len, PAGE_SIZE);
	ret = rs_pin_charge(p);
	if (ret)
		return ret;
	p->pages = kvmalloc_array(p->npages, sizeof(*p->pages), GFP_KERNEL);
	if (!p->pages) {
		ret = -ENOMEM;
		goto uncharge;
	}
	got = pin_user_pages_fast(addr & PAGE_MASK, p->npages,
				  FOLL_LONGTERM | (write ? FOLL_WRITE : 0),
				  p->pages);
	if (got != p->npages) {
		if (got > 0)
			unpin_user_pages(p->pages, got);
		ret = got < 0 ? got : -EFAULT;
		goto free;
	}
	ret = sg_alloc_table_from_pages(&p->sgt, p->pages, p->npages,
					offset_in_page(addr), len, GFP_KERNEL);
	if (ret) {
		unpin_user_pages(p->pages, p->npages);
		goto free;
	}
	p->len = len;
	p->dir = write ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
	return len;
free:
	kvfree(p->pages);
	p->pages = NULL;
uncharge:
	rs_pin_uncharge(p);
	return ret;
}

/* DMA-map the pinned pages; callable in atomic context. */
int rs_pin_map(struct rs_pin *p, struct ib_device *dev)
{
	int n = ib_dma_map_sg(dev, p->sgt.sgl, p->sgt.orig_nents, p->dir);

	if (!n)
		return -ENOMEM;
	p->nents = n;
	return 0;
}

void rs_pin_unmap(struct rs_pin *p, struct ib_device *dev)
{
	if (!p->nents)
		return;
	ib_dma_unmap_sg(dev, p->sgt.sgl, p->sgt.orig_nents, p->dir);
	p->nents = 0;
}

/* Unpin (marking received-into pages dirty) and free; must be unmapped. */
void rs_pin_release(struct rs_pin *p)
{
	if (!p->pages)
		return;
	WARN_ON_ONCE(p->nents);
	sg_free_table(&p->sgt);
	if (p->dir == DMA_FROM_DEVICE)
		unpin_user_pages_dirty_lock(p->pages, p->npages, true);
	else
		unpin_user_pages(p->pages, p->npages);
	kvfree(p->pages);
	p->pages = NULL;
	rs_pin_uncharge(p);
}
