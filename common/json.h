/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * json.h - the one piece of JSON output the programs share: a string literal.
 * The documents themselves are printed with fprintf by whoever owns them.
 */
#ifndef RMEM_JSON_H
#define RMEM_JSON_H

#include <stdio.h>

/* s as a JSON string literal, quotes included ("" for NULL) */
void json_write_string(FILE *f, const char *s);

#endif /* RMEM_JSON_H */
