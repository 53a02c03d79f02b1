// SPDX-License-Identifier: GPL-2.0
/*
 * Pinning the application's pages for a direct transfer.
 *
 * Only the first segment of a user-space iterator is taken, so a direct
 * transfer always covers one virtually contiguous range. Pages are pinned
 * with FOLL_PIN | FOLL_LONGTERM: an advertised receive may hold its pins
 * for as long as the application blocks, so the pages are first moved out
 * of CMA and ZONE_MOVABLE. A receive pins only anonymous, shmem and
 * hugetlb memory (rs_pin_writable()). Pins are charged to
 * the caller's mm (pinned_vm) against RLIMIT_MEMLOCK unless it has
 * CAP_IPC_LOCK, as ib_umem charges user MRs; over the limit the pin fails
 * with -ENOBUFS and the transfer goes through the rings instead. They are
 * unpinned (dirtied for receives) and uncharged when the transfer is over,
 * which for a transfer whose caller gave up is after the fence.
 * DMA mapping is separate because it happens under rs_sock.lock, where a
 * teardown can undo it (rs_dslots_unmap_locked, rs_zsends_unmap_locked).
 */
#include <linux/hugetlb.h>
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
 * Whether the device may write into [start, end) of mm for as long as a
 * pin lasts: 0 for anonymous memory (which a private file mapping becomes
 * where FOLL_WRITE breaks COW), shmem and hugetlb; -EPERM for a shared
 * mapping of any other file, whose pages are page cache under the file
 * system's writeback that the device would dirty behind its back (GUP
 * refuses such pins itself from 6.5); -EFAULT for a hole. Under mmap_lock.
 */
static int rs_pin_writable(struct mm_struct *mm, unsigned long start,
			   unsigned long end)
{
	struct vm_area_struct *vma;

	for (; start < end; start = vma->vm_end) {
		vma = find_vma(mm, start);
		if (!vma || vma->vm_start > start)
			return -EFAULT;
		if ((vma->vm_flags & VM_SHARED) && vma->vm_file &&
		    !is_vm_hugetlb_page(vma) && !rs_shmem_file(vma->vm_file))
			return -EPERM;
	}
	return 0;
}

/*
 * Pin p->npages from start into p->pages; returns how many or an errno.
 * For a receive the check of the memory and the pin are made under one
 * mmap_lock, so that no mmap() can put a file under the range between.
 */
static long rs_pin_pages(struct rs_pin *p, unsigned long start, bool write)
{
	struct mm_struct *mm = current->mm;
	long got;

	if (!write)
		return pin_user_pages_fast(start, p->npages, FOLL_LONGTERM,
					   p->pages);
	if (mmap_read_lock_killable(mm))
		return -EINTR;
	got = rs_pin_writable(mm, start, start + p->npages * PAGE_SIZE);
	if (!got)
		got = rs_pin_user_pages(start, p->npages,
					FOLL_LONGTERM | FOLL_WRITE, p->pages);
	mmap_read_unlock(mm);
	return got;
}

/*
 * Pin up to max bytes at the iterator's position (which does not move).
 * Returns the bytes pinned or a negative errno (-ENOBUFS: over the
 * caller's RLIMIT_MEMLOCK; -EPERM: a receive into memory the device may
 * not write, rs_pin_writable()); partial pins are undone.
 */
int rs_pin_user(struct rs_pin *p, struct iov_iter *it, u32 max, bool write)
{
	unsigned long addr;
	size_t len;
	long got;
	int ret;

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
	got = rs_pin_pages(p, addr & PAGE_MASK, write);
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
