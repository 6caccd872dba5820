#!/bin/sh
# shellcheck shell=dash source-path=SCRIPTDIR
# SPDX-License-Identifier: GPL-2.0
#
# /init of the scenario initramfs (PID 1).  Mounts the usual filesystems,
# runs the scenarios named by "scenario.run=a,b" on the kernel command line,
# keeps the machine up for "scenario.tail=N" seconds so that late kernel
# reports (RCU stalls, hung tasks, kmemleak) still appear, and powers the
# machine off.  Installed by tools/scenarios/run.py.
#
# The kernel console is ttyS0; everything this script and the scenarios
# print goes to ttyS1 (hvc0 on arm64), which the runner reads separately, so that our
# output never interleaves with (and never hides) kernel text.

export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export HOME=/root TMPDIR=/tmp
export SCN_RESULTS=/tmp/scenario-results

msg() {
	printf '# init: %s\n' "$*"
}

mount -t proc proc /proc || msg "cannot mount /proc"
mount -t sysfs sysfs /sys || msg "cannot mount /sys"
if ! mount -t devtmpfs devtmpfs /dev 2>/dev/null; then
	# CONFIG_DEVTMPFS=n: keep the static nodes from the cpio, add the rest.
	msg "devtmpfs unavailable, populating /dev with mdev"
	mdev -s || msg "mdev -s failed"
fi
if [ -d /sys/kernel/debug ]; then
	mount -t debugfs debugfs /sys/kernel/debug || msg "cannot mount debugfs"
else
	msg "no /sys/kernel/debug (CONFIG_DEBUG_FS=n?)"
fi
for d in /tmp /run; do
	mount -t tmpfs -o mode=1777 tmpfs "$d" 2>/dev/null ||
		mount -t ramfs ramfs "$d" || msg "cannot mount $d"
done
# arm64's virt machine has one serial port: the protocol goes to a
# virtio console there (run.py --arch arm64).
if [ -c /dev/ttyS1 ] && : 2>/dev/null >/dev/ttyS1; then
	exec >/dev/ttyS1 2>&1 </dev/null
elif [ -c /dev/hvc0 ] && : 2>/dev/null >/dev/hvc0; then
	exec >/dev/hvc0 2>&1 </dev/null
else
	# Without the protocol channel the runner sees no result: say why.
	msg "no /dev/ttyS1 or /dev/hvc0 for the scenario output; the runner needs a second console"
fi
mkdir -p "$SCN_RESULTS"
hostname scenario 2>/dev/null

# With kmemleak on, its thread scans on its own 60 s after boot and then
# every 10 minutes, holding the scan mutex for the whole scan (many seconds
# under KASAN and TCG).  A scan we ask for (a scenario's, or the tail's
# below) then sleeps uninterruptibly on that mutex, or leaves the thread
# sleeping on it, long enough for the tail's 5 s hung-task timeout to
# report it.  Only the scans we ask for are wanted: stop the thread.
if [ -w /sys/kernel/debug/kmemleak ]; then
	echo scan=off >/sys/kernel/debug/kmemleak 2>/dev/null ||
		msg "cannot stop kmemleak's automatic scans"
fi

list=
tail=0
# shellcheck disable=SC2013 # words, not lines
for word in $(cat /proc/cmdline); do
	case "$word" in
	scenario.run=*) list=${word#scenario.run=} ;;
	scenario.tail=*) tail=${word#scenario.tail=} ;;
	esac
done

run_case() {
	local name file rc
	name=$1
	file=/scenarios/cases/$name.sh
	if [ ! -r "$file" ]; then
		echo "SCENARIO $name FAIL: no such scenario in the initramfs"
		return
	fi
	mkdir -p "/tmp/work/$name"
	echo "# running scenario $name"
	(
		cd "/tmp/work/$name" || exit 1
		SCENARIO=$name
		SCENARIO_FILE=$file
		export SCENARIO SCENARIO_FILE
		# shellcheck source=lib.sh
		. /scenarios/lib.sh
		# shellcheck disable=SC1090
		. "$file"
		finish
	)
	rc=$?
	# shellcheck disable=SC2031 # the subshell's changes are meant to be lost
	if [ ! -e "$SCN_RESULTS/$name" ]; then
		echo "SCENARIO $name FAIL: script exited (status $rc) before reporting a result"
	fi
}

echo "SCENARIO-RUNNER START"
if [ -z "$list" ]; then
	echo "SCENARIO none FAIL: no scenario.run= on the kernel command line"
fi
for name in $(echo "$list" | tr ',' ' '); do
	run_case "$name"
done
echo "SCENARIO-RUNNER DONE"

# The tail.  A task blocked since the scenario is reported once it has been
# blocked for 5 s (writing the sysctl wakes the detector at once); an RCU
# stall within the stall timeout the runner put on the command line.  Then,
# with kmemleak on, one scan: objects unreferenced for 5 s and more are
# reported as "kmemleak: N new suspected memory leaks".
if [ "$tail" -gt 0 ] 2>/dev/null; then
	echo 5 >/proc/sys/kernel/hung_task_timeout_secs 2>/dev/null
	echo 1 >/proc/sys/kernel/hung_task_check_interval_secs 2>/dev/null
	sleep "$tail"
	if [ -w /sys/kernel/debug/kmemleak ] && echo scan >/sys/kernel/debug/kmemleak 2>/dev/null; then
		msg "kmemleak scan done"
	fi
fi
echo "SCENARIO-RUNNER END"

sync
poweroff -f
sleep 5
msg "poweroff failed, trying reboot"
reboot -f
while :; do
	sleep 60
done
