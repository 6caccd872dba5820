# SPDX-License-Identifier: GPL-2.0
# Sourced by the build and test scripts: where things are and how the
# kernel is built.  The rustup rustc that comes first in PATH has no
# rust-src, so the kernel build always names Debian's rustc-web.

RSMM_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RSMM_BUILD="$RSMM_REPO/build"
RSMM_KSRC="$RSMM_BUILD/linux"
export PATH="$HOME/.cargo/bin:$PATH"

# ccache keeps C objects across clean clones on the same machine; paths
# are made relative to the repository so a clone elsewhere still hits.
export CCACHE_BASEDIR="$RSMM_REPO"
export CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
# Depend mode: on a miss ccache compiles once and hashes the headers the
# compiler's own -MMD output names (kbuild passes -Wp,-MMD), instead of
# first running the preprocessor to hash its output.  With a cold cache
# that pass made 40 sampled objects of the test kernel cost 33 CPU
# seconds instead of 25 (depend mode: 25.5, as without ccache); hits are
# found through the manifests as in direct mode.
export CCACHE_DEPEND=${CCACHE_DEPEND:-1}
# Fixed build stamps keep init/version.c and friends identical between runs.
export KBUILD_BUILD_TIMESTAMP="${KBUILD_BUILD_TIMESTAMP:-2026-01-01}"
export KBUILD_BUILD_USER=rsmm KBUILD_BUILD_HOST=rsmm

RSMM_MAKE_OPTS=(LLVM=-16 RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc BINDGEN=bindgen
		CLIPPY_DRIVER=/usr/bin/clippy-driver RUSTFMT=/usr/bin/rustfmt)
# ccache-cc keeps sources that .incbin a file (the compressed kernel in the
# bzImage among them) out of the cache, which cannot tell when that file
# changes.
if command -v ccache >/dev/null 2>&1 && [ "${RSMM_NO_CCACHE:-0}" != 1 ]; then
	RSMM_MAKE_OPTS+=("CC=$RSMM_REPO/tools/build/ccache-cc")
fi
