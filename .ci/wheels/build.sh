#!/usr/bin/env bash
# A manylinux_2_28 wheel of streamfit for x86_64 or aarch64, built from the
# sdist and repaired by auditwheel:
#   .ci/wheels/build.sh ARCH SDIST OUTDIR [ARM64_ROOT]
# Run from a virtual environment (it installs the build requirements and
# tools into it); prints the repaired wheel's path as its last line.
#
# The compiler is zig's clang (PyPI's ziglang; .ci/wheels/zigcc), compiling
# and linking against glibc 2.28 whatever this machine's glibc is: so the
# extensions reference no symbol version newer than manylinux_2_28 allows,
# without the manylinux containers (which do not run here). OpenMP is LLVM's
# runtime, libomp, from PyPI's cmeel-libomp (itself a manylinux_2_28 build,
# needing glibc 2.14): auditwheel vendors it into streamfit.libs/, as
# scikit-learn's wheels carry their OpenMP runtime. (GCC here links against
# this machine's glibc 2.36 and its libgomp needs GLIBC_2.34: that wheel
# can only be manylinux_2_35.)
#
# aarch64 is a cross build: zig targets aarch64-linux-gnu.2.28, the target's
# Python headers come from ARM64_ROOT (the Debian arm64 root that
# .ci/aarch64.sh makes and tests in), and the target's numpy -- its headers
# and static npyrandom/npymath, which the kernels link -- from numpy's aarch64
# wheel of the version this build's Python has (CMakeLists.txt:
# STREAMFIT_NUMPY_DIR, SKBUILD_SOABI).
set -euo pipefail
arch="$1" sdist="$2" out="$3" root="${4:-}"
ci="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
case "$arch" in
    x86_64) elf_machine=62 ;;
    aarch64) elf_machine=183; [ -d "$root/usr/include" ] || { echo "aarch64 needs ARM64_ROOT"; exit 2; } ;;
    *) echo "ARCH must be x86_64 or aarch64, not $arch"; exit 2 ;;
esac

# the build requirements the sdist names (a build without isolation, so that
# the target's numpy below is the version the build compiles against)
requires="$(tar -xzOf "$sdist" --wildcards '*/pyproject.toml' | python -c \
    'import sys, tomllib; print("\n".join(tomllib.loads(sys.stdin.read())["build-system"]["requires"]))')"
mapfile -t requires <<< "$requires"
python -m pip install --quiet "${requires[@]}" -r "$ci/requirements.txt"

# the OpenMP runtime for the target, unpacked
fetch() {  # one wheel for the target, unpacked into DIR: DIR, then pip download's arguments
    local dir="$1"; shift
    rm -rf "$dir" "$dir.download"
    python -m pip download --quiet --no-deps --only-binary=:all: \
        --platform "manylinux_2_28_$arch" -d "$dir.download" "$@"
    python -m zipfile -e "$dir.download"/*.whl "$dir"
}
# (pinned: the runtime every wheel carries changes with a reviewed bump)
fetch "$out/libomp-$arch" "cmeel-libomp==21.1.8"
omp="$out/libomp-$arch/cmeel.prefix"

export SF_ZIG SF_ZIG_TARGET="$arch-linux-gnu.2.28" CC="$ci/zigcc"
SF_ZIG="$(python -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')"
# zig's caches in this build's directory: nothing carried over between runs
export ZIG_GLOBAL_CACHE_DIR="$out/zig-cache" ZIG_LOCAL_CACHE_DIR="$out/zig-cache"
settings=(
    "-Ccmake.define.OpenMP_C_FLAGS=-fopenmp -I$omp/include"
    -Ccmake.define.OpenMP_C_LIB_NAMES=omp
    "-Ccmake.define.OpenMP_omp_LIBRARY=$omp/lib/libomp.so"
)
if [ "$arch" = aarch64 ]; then
    pyver="$(python -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    [ -f "$root/usr/include/python$pyver/Python.h" ] \
        || { echo "ARM64_ROOT has no Python $pyver headers (the build's Python is $pyver)"; exit 1; }
    numpy_version="$(python -c 'import numpy; print(numpy.__version__)')"
    tag="cp${pyver/./}"
    fetch "$out/numpy-$arch" "numpy==$numpy_version" --python-version "$pyver" \
        --implementation cp --abi "$tag"
    # scikit-build-core's wheel tag and extension suffix for the target
    export _PYTHON_HOST_PLATFORM=linux-aarch64
    export SETUPTOOLS_EXT_SUFFIX=".cpython-${pyver/./}-aarch64-linux-gnu.so"
    # (Debian's pyconfig.h includes <aarch64-linux-gnu/python3.X/pyconfig.h>;
    # zig's own glibc headers come first)
    export CFLAGS="-idirafter $root/usr/include"
    settings+=(
        "-Ccmake.toolchain-file=$ci/aarch64.cmake"
        "-Ccmake.define.Python_INCLUDE_DIR=$root/usr/include/python$pyver"
        "-Ccmake.define.STREAMFIT_NUMPY_DIR=$out/numpy-$arch/numpy"
    )
fi
rm -rf "$out/raw" "$out/wheelhouse"
python -m pip wheel --quiet --no-cache-dir --no-build-isolation --no-deps -w "$out/raw" "${settings[@]}" "$sdist"
raw="$(ls "$out"/raw/streamfit-*.whl)"

# auditwheel finds libomp on LD_LIBRARY_PATH and vendors it; on x86_64 it is
# asked for the configured tag (it refuses if a symbol needs a newer glibc);
# for another architecture it takes no --plat and names the best tag itself,
# checked below
plat=()
[ "$arch" = x86_64 ] && plat=(--plat manylinux_2_28_x86_64)
LD_LIBRARY_PATH="$omp/lib" python -m auditwheel repair "${plat[@]}" -w "$out/wheelhouse" "$raw" >&2
wheel="$(ls "$out"/wheelhouse/streamfit-*.whl)"
python -m auditwheel show "$wheel" >&2
python - "$wheel" "$arch" "$elf_machine" >&2 <<'PY'
import re, sys, zipfile
wheel, arch, machine = sys.argv[1], sys.argv[2], int(sys.argv[3])
tags = wheel.rsplit("-", 1)[1].removesuffix(".whl").split(".")
glibc = [int(m[1]) for t in tags if (m := re.fullmatch(rf"manylinux_2_(\d+)_{arch}", t))]
assert glibc and min(glibc) <= 28, f"{wheel}: no manylinux_2_28 or older tag for {arch}: {tags}"
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    assert any(re.fullmatch(r"streamfit\.libs/libomp[-.].*\.so.*", n) for n in names), \
        "the wheel does not carry the OpenMP runtime"
    modules = [n for n in names if n.endswith(".so")
               and n.startswith(("streamfit/_kernels/", "streamfit/cython/"))]
    assert modules, "no extension modules"
    for n in modules:
        head = z.read(n)[:20]
        assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == machine, \
            f"{n} is not an {arch} ELF module"
    # the tag's promise checked on the ELF files themselves, independently of
    # auditwheel: no shared object in the wheel (the extensions and the
    # vendored libomp) needs a glibc symbol version newer than 2.28
    import subprocess, tempfile
    newest = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            if re.search(r"\.so(\.|$)", n):
                out = subprocess.run(["readelf", "-V", "--wide", z.extract(n, tmp)],
                                     check=True, capture_output=True, text=True).stdout
                found = [tuple(map(int, v.split("."))) for v in re.findall(r"Name: GLIBC_([\d.]+)", out)]
                newest[n] = max(found, default=(0,))
top = max(newest.values())
print("newest glibc symbol version per shared object: " + ", ".join(
    f"{n.rsplit('/', 1)[1]} {'.'.join(map(str, v))}" for n, v in sorted(newest.items())))
assert top <= (2, 28), f"a shared object needs GLIBC_{'.'.join(map(str, top))} > 2.28: {newest}"
print(f"{wheel.rsplit('/', 1)[1]}: tags {tags}, {len(modules)} {arch} modules, libomp vendored, "
      f"newest glibc symbol GLIBC_{'.'.join(map(str, top))} <= 2.28")
PY
echo "$wheel"
