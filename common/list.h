/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * list.h - intrusive doubly-linked lists: the node carries its own prev/next
 * pointers (named by the caller), the list is a head pointer.
 */
#ifndef RMEM_LIST_H
#define RMEM_LIST_H

/* take node out of the list at head; node's own pointers are left as they were */
#define LIST_UNLINK(head, node, prev, next)                                                        \
	do {                                                                                       \
		if ((node)->prev)                                                                  \
			(node)->prev->next = (node)->next;                                         \
		else                                                                               \
			(head) = (node)->next;                                                     \
		if ((node)->next)                                                                  \
			(node)->next->prev = (node)->prev;                                         \
	} while (0)

#endif /* RMEM_LIST_H */
