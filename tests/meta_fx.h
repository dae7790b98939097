/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * meta_fx.h - helpers for the C tests that drive the metadata layer
 * (fuse-client/meta) through its operations: make a node, look a name up.
 * Failures are test failures (g_assert).
 */
#ifndef RMEM_TESTS_META_FX_H
#define RMEM_TESTS_META_FX_H

#include <stdint.h>

struct meta;

/* make name in parent (a directory if mode says so, else a node) as root; its ino */
uint64_t tfx_mk(struct meta *m, uint64_t parent, const char *name, uint32_t mode);
/* the ino of name in parent, 0 if there is none */
uint64_t tfx_lookup(struct meta *m, uint64_t parent, const char *name);

#endif /* RMEM_TESTS_META_FX_H */
