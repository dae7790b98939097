/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * notify.h - the service manager's readiness protocol (sd_notify(3)), without
 * libsystemd: one datagram to the socket named by $NOTIFY_SOCKET. Nothing is
 * sent when the variable is unset (not started by systemd with Type=notify).
 */
#ifndef RMEM_MEMSERVER_NOTIFY_H
#define RMEM_MEMSERVER_NOTIFY_H

/* send "STATE\n..." (e.g. "READY=1\nSTATUS=serving ..."); 0, 1 when not asked, or -errno */
int notify_send(const char *state);

#endif /* RMEM_MEMSERVER_NOTIFY_H */
