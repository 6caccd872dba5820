#!/bin/sh
# shellcheck shell=dash source-path=SCRIPTDIR
# SPDX-License-Identifier: GPL-2.0
#
# /init of the scenario initramfs (PID 1).  Mounts the usual filesystems,
# runs the scenarios named by "scenario.run=a,b" on the kernel command line
# and powers the machine off.  Installed by tools/scenarios/run.py.

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
mkdir -p "$SCN_RESULTS"
hostname scenario 2>/dev/null

list=
# shellcheck disable=SC2013 # words, not lines
for word in $(cat /proc/cmdline); do
	case "$word" in
	scenario.run=*) list=${word#scenario.run=} ;;
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

sync
poweroff -f
sleep 5
msg "poweroff failed, trying reboot"
reboot -f
while :; do
	sleep 60
done
