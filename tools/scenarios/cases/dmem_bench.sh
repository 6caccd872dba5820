# shellcheck shell=dash
# description: what a reserved area is worth: disk reads of a file re-read and a swapping workload whose working sets exceed free memory (config from dmem_bench.config=idle|cma|gcma)
# group: bench
# mem: 512M
# disk: 512M ext2
# disk: 512M
# timeout: 1800
# The demo boots this three times with an area of the same size: idle
# ("gcma=128M gcma.dmem_file=0 gcma.dmem_swap=0"), CMA ("cma=128M") and
# GCMA with its clients on ("gcma=128M").

config=$(cmdline_arg dmem_bench.config unknown)
# Working-set sizes in MiB (file and anonymous alike): one that fits in
# free memory plus the area, one larger than both.
sizes=$(cmdline_arg dmem_bench.sizes 360,440 | tr , ' ')
passes=3

# Sectors read from a disk so far (field 3 of /sys/block/<disk>/stat).
sectors_read() {
	awk '{ print $3 }' /sys/block/$1/stat
}
mib_read_since() {
	echo $((($(sectors_read $1) - $2) / 2048))
}

echo 0 > /sys/block/vdb/queue/rotational
mkswap /dev/vdb >/dev/null
check swapon swapon /dev/vdb
mkdir -p /mnt/data
check mounted mount -t ext2 /dev/vda /mnt/data
log "config $config: MemTotal $(read_counter /proc/meminfo MemTotal) kB, MemAvailable $(read_counter /proc/meminfo MemAvailable) kB"

for mib in $sizes; do
	# File re-read: write the file, drop it from the cache, read it
	# $passes times.  The first pass reads what the write left out of
	# memory; the re-reads are where the area's memory shows.
	dd if=/dev/zero of=/mnt/data/f bs=1M count="$mib" conv=fsync 2>/dev/null
	sync
	echo 3 > /proc/sys/vm/drop_caches
	s0=$(sectors_read vda)
	cat /mnt/data/f > /dev/null
	first=$(mib_read_since vda "$s0")
	s1=$(sectors_read vda)
	i=1
	while [ $i -lt $passes ]; do
		cat /mnt/data/f > /dev/null
		i=$((i + 1))
	done
	reread=$(mib_read_since vda "$s1")
	rm /mnt/data/f
	sync

	# Swapping: a patterned anonymous working set, $passes passes, each
	# one verifying the previous pattern.
	echo 3 > /proc/sys/vm/drop_caches
	s2=$(sectors_read vdb)
	check anon_every_byte_$mib memhog -a "$mib" -n "$passes"
	swapped=$(mib_read_since vdb "$s2")

	echo "DMEM-BENCH config=$config mib=$mib first_read_mib=$first reread_mib=$reread swap_read_mib=$swapped"
done
for c in file swap; do
	d=/sys/kernel/mm/gcma/dmem/$c
	[ -d $d ] && log "dmem $c: $(for k in enabled stores loads misses evictions discards; do printf '%s=%s ' $k "$(cat $d/$k)"; done)"
done
log "vmstat: pswpin=$(read_counter /proc/vmstat pswpin) pswpout=$(read_counter /proc/vmstat pswpout)"
swapoff /dev/vdb
umount /mnt/data
check no_splat no_splat
