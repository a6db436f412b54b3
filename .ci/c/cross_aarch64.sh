#!/usr/bin/env bash
# Every Cython kernel compiled for aarch64 by Debian's cross compiler, with
# the flags CMakeLists.txt gives GCC (object files only: linking needs
# aarch64 builds of Python and NumPy's static libraries, which a cross
# machine does not have; the header-only kernels are also run under
# qemu-user by .ci/run). Usage: cross_aarch64.sh OUTDIR, from a venv with
# cython and numpy.
set -euo pipefail
out="$1"
src="$(cd "$(dirname "$0")/../.." && pwd)/csrc"
mkdir -p "$out"
py_inc="$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
np_inc="$(python -c 'import numpy; print(numpy.get_include())')"
one() {
    local pyx="$1" stem
    stem="$(basename "$pyx" .pyx)"
    cython -3 -X boundscheck=False -X wraparound=False -X cdivision=True \
        -X initializedcheck=False -X language_level=3 -I "$src" \
        --module-name "streamfit._kernels.$stem" "$pyx" -o "$out/$stem.c"
    aarch64-linux-gnu-gcc -O2 -fPIC -fopenmp -ffp-contract=off -Werror=implicit-function-declaration \
        -I "$src" -I "$py_inc" -I "$np_inc" -c "$out/$stem.c" -o "$out/$stem.o"
    # an ELF object for machine 183 (EM_AARCH64), read from its header
    python -c 'import sys; h = open(sys.argv[1], "rb").read(20); sys.exit(not (h[:4] == b"\x7fELF" and int.from_bytes(h[18:20], "little") == 183))' \
        "$out/$stem.o" || { echo "$stem.o is not aarch64"; return 1; }
    echo "aarch64: $stem.o"
}
export -f one
export out src py_inc np_inc
ls "$src"/*.pyx | xargs -P 2 -I{} bash -c 'one "$@"' _ {}
