/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Where a task sleeps: the tests that hold a task at a given point (a
 * folio lock, an I/O throttle) check that it really waits there before
 * they act, by the function its /proc wchan file names.
 */
#ifndef SCENARIO_WCHAN_H
#define SCENARIO_WCHAN_H

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/*
 * Whether the wchan file at @path (/proc/PID/wchan, or a thread's
 * /proc/self/task/TID/wchan) names a function whose name contains @what.
 * A task that is running, or gone, waits nowhere: 0.
 */
static inline int wchan_has(const char *path, const char *what)
{
	char buf[128];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return strstr(buf, what) != NULL;
}

#endif
