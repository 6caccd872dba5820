#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Installs and verifies the toolchain this project builds with.  Idempotent:
# packages already present are not reinstalled; every tool is version-checked
# and a failure names the tool and how to fix it.
#
# Usage: tools/build/setup.sh [--check]
#   --check   verify only, install nothing

set -euo pipefail

check_only=0
[ "${1:-}" = "--check" ] && check_only=1

die() { echo "setup: error: $*" >&2; exit 1; }
say() { echo "setup: $*"; }

# Debian packages the build, the kernel tree and the QEMU tiers need.
PKGS=(
	linux-source-6.12 rustc-web rust-web-src rust-web-clippy rustfmt-web
	clang-16 lld-16 llvm-16 libclang-16-dev
	make flex bison bc libelf-dev libssl-dev cpio xz-utils lz4 rsync kmod
	python3 perl git ccache
	qemu-system-x86 busybox-static gcc libc6-dev e2fsprogs
	qemu-system-arm device-tree-compiler gcc-aarch64-linux-gnu libc6-dev-arm64-cross
)
# The arm64 tier's busybox (static, from Debian's arm64 busybox-static).
ARM64_BUSYBOX=/usr/local/lib/rsmm/aarch64/busybox
BINDGEN_VERSION=0.70.1

[ -r /etc/debian_version ] || die "this setup supports Debian bookworm only (no /etc/debian_version)"

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# bindgen: the kernel's Rust bindings need bindgen-cli; 0.70.1 is the verified one.
# On a bare machine cargo compiles it (about 2 minutes) while apt-get
# downloads and unpacks the packages, which leaves the CPUs mostly idle:
# bindgen-cli's default "runtime" feature loads libclang when bindgen
# runs, so its build needs only cargo and a linker (cc).  Without cc, it
# is built after apt-get.
export PATH="$HOME/.cargo/bin:$PATH"
have_bindgen=$(bindgen --version 2>/dev/null | awk '{print $2}' || true)
bindgen_pid=
bindgen_log=
install_bindgen() {
	say "installing bindgen-cli $BINDGEN_VERSION with cargo (about 2 minutes)"
	exec cargo install --locked --quiet bindgen-cli --version "$BINDGEN_VERSION"
}
if [ "$have_bindgen" != "$BINDGEN_VERSION" ] && [ $check_only = 0 ]; then
	command -v cargo >/dev/null || die "cargo not found: install Rust with rustup (host tests need it) or Debian's cargo"
	if command -v cc >/dev/null; then
		bindgen_log=$(mktemp)
		# The job execs cargo, so that an exit on an apt-get failure stops it.
		(install_bindgen) >"$bindgen_log" 2>&1 &
		bindgen_pid=$!
		trap '[ -z "$bindgen_pid" ] || kill "$bindgen_pid" 2>/dev/null; rm -f "$bindgen_log"' EXIT
	fi
fi

if [ ${#missing[@]} -gt 0 ]; then
	[ $check_only = 1 ] && die "missing Debian packages: ${missing[*]} (run: make setup)"
	[ "$(id -u)" = 0 ] || die "missing packages ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}"
	avail_kb=$(df -Pk / | awk 'NR==2 {print $4}')
	[ "$avail_kb" -gt 4000000 ] || die "less than 4 GiB free on / for packages; free some space"
	say "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || die "apt-get update failed; check the Debian mirrors in /etc/apt/sources.list*"
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
		die "apt-get install failed for: ${missing[*]}"
fi

# busybox for the arm64 guests: Debian's own arm64 package, unpacked (not
# installed: it would replace the host's busybox-static).
if [ ! -x "$ARM64_BUSYBOX" ]; then
	[ $check_only = 1 ] && die "$ARM64_BUSYBOX missing (run: make setup)"
	[ "$(id -u)" = 0 ] || die "$ARM64_BUSYBOX missing; run tools/build/setup.sh as root"
	say "unpacking busybox-static:arm64 to $ARM64_BUSYBOX"
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then
		dpkg --add-architecture arm64
		apt-get update -qq || die "apt-get update failed after adding arm64"
	fi
	bb_tmp=$(mktemp -d)
	chmod 755 "$bb_tmp"
	(cd "$bb_tmp" && apt-get download -qq busybox-static:arm64 2>/dev/null) ||
		{ apt-get update -qq && (cd "$bb_tmp" && apt-get download -qq busybox-static:arm64); } ||
		die "apt-get download busybox-static:arm64 failed"
	dpkg-deb -x "$bb_tmp"/busybox-static_*_arm64.deb "$bb_tmp/x" ||
		die "cannot unpack busybox-static:arm64"
	install -D -m 755 "$bb_tmp/x/bin/busybox" "$ARM64_BUSYBOX"
	rm -rf "$bb_tmp"
fi

if [ -n "$bindgen_pid" ]; then
	rc=0
	wait "$bindgen_pid" || rc=$?
	bindgen_pid=
	cat "$bindgen_log"
	[ "$rc" -eq 0 ] || die "cargo install bindgen-cli $BINDGEN_VERSION failed"
elif [ "$have_bindgen" != "$BINDGEN_VERSION" ]; then
	[ $check_only = 1 ] && die "bindgen $BINDGEN_VERSION not found (have '${have_bindgen:-none}'; run: make setup)"
	(install_bindgen) || die "cargo install bindgen-cli $BINDGEN_VERSION failed"
fi

# Version checks.  The rustup rustc that comes first in PATH has no rust-src,
# so the kernel build always names /usr/bin/rustc explicitly.
/usr/bin/rustc --version 2>/dev/null | grep -q '^rustc 1\.9[0-9]' ||
	die "/usr/bin/rustc is not Debian's rustc-web 1.9x: $(/usr/bin/rustc --version 2>&1 || true); apt-get install rustc-web"
sysroot=$(/usr/bin/rustc --print sysroot)
[ -f "$sysroot/lib/rustlib/src/rust/library/core/src/lib.rs" ] ||
	die "rust-src for /usr/bin/rustc is missing under $sysroot/lib/rustlib/src; apt-get install rust-web-src"
/usr/bin/clippy-driver --version 2>/dev/null | grep -q '^clippy 0\.1\.9[0-9]' ||
	die "/usr/bin/clippy-driver is not Debian's rust-web-clippy; apt-get install rust-web-clippy"
/usr/bin/rustfmt --version 2>/dev/null | grep -q '^rustfmt' ||
	die "/usr/bin/rustfmt missing; apt-get install rustfmt-web"
clang-16 --version | grep -q 'version 16\.' || die "clang-16 is not LLVM 16; apt-get install clang-16"
ld.lld-16 --version | grep -q 'LLD 16\.' || die "ld.lld-16 is not LLD 16; apt-get install lld-16"
[ -n "$(ls /usr/lib/llvm-16/lib/libclang*.so* 2>/dev/null)" ] || die "libclang 16 missing; apt-get install libclang-16-dev"
qemu-system-x86_64 --version | grep -qE 'version [7-9]\.' || die "qemu-system-x86_64 7.x or newer required; apt-get install qemu-system-x86"
command -v lz4 >/dev/null || die "lz4 missing (the test kernel's image is LZ4-compressed); apt-get install lz4"
[ -x /bin/busybox ] || die "/bin/busybox missing; apt-get install busybox-static"
ls /usr/src/linux-source-6.12.tar.* >/dev/null 2>&1 || die "no /usr/src/linux-source-6.12.tar.*; apt-get install linux-source-6.12"
qemu-system-aarch64 --version | grep -qE 'version [7-9]\.' || die "qemu-system-aarch64 7.x or newer required; apt-get install qemu-system-arm"
command -v dtc >/dev/null || die "dtc missing (the arm64 tier's device tree); apt-get install device-tree-compiler"
aarch64-linux-gnu-gcc --version >/dev/null 2>&1 || die "aarch64-linux-gnu-gcc missing; apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
command -v cargo >/dev/null || die "cargo not found for host tests: install Rust (rustup) or apt-get install cargo"

say "toolchain ok: $(/usr/bin/rustc --version), bindgen $(bindgen --version | awk '{print $2}'), $(clang-16 --version | head -1), $(qemu-system-x86_64 --version | head -1)"
