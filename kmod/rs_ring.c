// SPDX-License-Identifier: GPL-2.0
/*
 * Stream and send rings: order-0 pages, mapped contiguously for the CPU
 * with vmap() and for the HCA with one fast-registration MR. No high-order
 * allocation is ever needed, whatever the ring size.
 */
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/uio.h>

#include "rs.h"

int rs_ring_alloc(struct rs_ring *r, u32 size)
{
	unsigned int i;

	memset(r, 0, sizeof(*r));
	r->npages = size >> PAGE_SHIFT;
	r->size = size;
	r->pages = kcalloc(r->npages, sizeof(*r->pages), GFP_KERNEL);
	if (!r->pages)
		return -ENOMEM;
	for (i = 0; i < r->npages; i++) {
		r->pages[i] = alloc_page(GFP_KERNEL | __GFP_ACCOUNT);
		if (!r->pages[i])
			goto fail;
	}
	r->vaddr = vmap(r->pages, r->npages, VM_MAP, PAGE_KERNEL);
	if (!r->vaddr)
		goto fail;
	return 0;
fail:
	rs_ring_free(r);
	return -ENOMEM;
}

void rs_ring_free(struct rs_ring *r)
{
	unsigned int i;

	if (r->vaddr)
		vunmap(r->vaddr);
	r->vaddr = NULL;
	if (r->pages) {
		for (i = 0; i < r->npages; i++)
			if (r->pages[i])
				__free_page(r->pages[i]);
		kfree(r->pages);
	}
	r->pages = NULL;
}

/* DMA-map the pages and map them into a fresh MR, ready for IB_WR_REG_MR. */
int rs_ring_map(struct rs_ring *r, struct ib_device *dev, struct ib_pd *pd,
		enum dma_data_direction dir)
{
	int ret, n;

	ret = sg_alloc_table_from_pages(&r->sgt, r->pages, r->npages, 0,
					r->size, GFP_KERNEL);
	if (ret)
		return ret;
	ret = ib_dma_map_sgtable_attrs(dev, &r->sgt, dir, 0);
	if (ret)
		goto free_sgt;
	r->dma_mapped = true;
	r->mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, r->npages);
	if (IS_ERR(r->mr)) {
		ret = PTR_ERR(r->mr);
		r->mr = NULL;
		goto unmap;
	}
	n = ib_map_mr_sg(r->mr, r->sgt.sgl, r->sgt.nents, NULL, PAGE_SIZE);
	if (n != r->sgt.nents) {
		ret = n < 0 ? n : -EINVAL;
		goto dereg;
	}
	return 0;
dereg:
	ib_dereg_mr(r->mr);
	r->mr = NULL;
unmap:
	ib_dma_unmap_sgtable_attrs(dev, &r->sgt, dir, 0);
	r->dma_mapped = false;
free_sgt:
	sg_free_table(&r->sgt);
	return ret;
}

void rs_ring_unmap(struct rs_ring *r, struct ib_device *dev,
		   enum dma_data_direction dir)
{
	if (r->mr)
		ib_dereg_mr(r->mr);
	r->mr = NULL;
	if (r->dma_mapped) {
		ib_dma_unmap_sgtable_attrs(dev, &r->sgt, dir, 0);
		sg_free_table(&r->sgt);
	}
	r->dma_mapped = false;
}

/* Copy len bytes from the user into the ring at off, wrapping at the end. */
int rs_ring_copy_in(struct rs_ring *r, u32 off, struct iov_iter *from,
		    u32 len)
{
	u32 first = min(len, r->size - off);

	if (WARN_ON_ONCE(len > r->size))
		return -EFAULT;
	if (copy_from_iter(r->vaddr + off, first, from) != first)
		return -EFAULT;
	if (len > first &&
	    copy_from_iter(r->vaddr, len - first, from) != len - first)
		return -EFAULT;
	return 0;
}

int rs_ring_copy_out(struct rs_ring *r, u32 off, struct iov_iter *to,
		     u32 len)
{
	u32 first = min(len, r->size - off);

	if (WARN_ON_ONCE(len > r->size))
		return -EFAULT;

	if (copy_to_iter(r->vaddr + off, first, to) != first)
		return -EFAULT;
	if (len > first &&
	    copy_to_iter(r->vaddr, len - first, to) != len - first)
		return -EFAULT;
	return 0;
}
