#!/usr/bin/env bash
# The aarch64 wheel, built and tested on aarch64 (emulated):
#   .ci/aarch64.sh WORKDIR SDIST
# as root, from a virtual environment of the Python the wheel is for (the
# build runs in it). Needs Debian's mmdebstrap, arch-test, qemu-user-static
# and binfmt-support (.ci/run, stage 0).
#   1. an arm64 Debian root: its Python (the build's minor version), venv,
#      headers and gcc, extracted from Debian's arm64 packages. Extracted,
#      not installed: nothing runs under emulation to configure them (25 s
#      instead of ~10 min for a full debootstrap);
#   2. the manylinux_2_28 aarch64 wheel, cross-built from the sdist with zig
#      (.ci/wheels/build.sh, against that root's Python headers);
#   3. in the root, every aarch64 program run by qemu-user through binfmt_misc
#      (so that subprocesses, gcc among them, run too): a venv, the wheel
#      installed by the root's own pip (an arm64 pip accepts its tags), the
#      SIMD path asserted (the GCC/Clang vector path compiled to NEON, its
#      multiply-adds fused, as Clang does on aarch64), and a named subset of
#      the suite: every kernel's tests against NumPy (tests/kernels), the
#      stream contract on one configuration per family
#      (.ci/one_config_per_family.py) and the Cython API example
#      (tests/kernels/test_cimport.py, compiled by the root's gcc).
# Nothing is cached between runs; the root is made fresh in WORKDIR.
set -euo pipefail
work="$1" sdist="$2"
ci="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$ci")"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
root="$work/root"
pyver="$(python -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
t0=$SECONDS
step() { printf -- '--- aarch64: %s (%ds)\n' "$1" "$((SECONDS - t0))"; }

step "the arm64 root (Debian $(. /etc/os-release; echo "$VERSION_CODENAME"), python$pyver)"
# this machine's own apt sources: the same mirror and suite as its packages
sources=/etc/apt/sources.list.d/debian.sources
[ -f "$sources" ] || sources=/etc/apt/sources.list
rm -rf "$root"
mmdebstrap --quiet --arch=arm64 --variant=extract \
    --include="python$pyver,python$pyver-venv,libpython$pyver-dev,gcc,dash,coreutils,util-linux" \
    "$(. /etc/os-release; echo "$VERSION_CODENAME")" "$root" "$sources"
# what the packages' scripts would have set up: /bin/sh, the CA bundle the
# root's pip reads; and the mount points below
[ -e "$root/bin/sh" ] || ln -s dash "$root/bin/sh"
mkdir -p "$root/etc/ssl/certs" "$root/proc" "$root/sys" "$root/dev" "$root/tmp" \
    "$root/project" "$root/wheels"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64
grep -qx enabled /proc/sys/fs/binfmt_misc/qemu-aarch64 \
    || { echo "qemu-aarch64 is not registered with binfmt_misc"; exit 1; }

inroot() {  # run a command in the root: /proc, /sys, /dev, a fresh /tmp, the project read-only
    # (a private mount namespace: the mounts end with the command; 30 min at most)
    unshare --mount --propagation private sh -ec '
        root=$1; repo=$2; shift 2
        mount -t proc proc "$root/proc"
        mount --rbind /sys "$root/sys"     # (LLVM libomp reads the CPU topology there)
        mount --rbind /dev "$root/dev"
        mount -t tmpfs tmpfs "$root/tmp"
        mount --bind -o ro "$repo" "$root/project"
        exec env -i PATH=/venv/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root LANG=C.UTF-8 \
            PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONPATH=/project/.ci \
            ${STREAMFIT_EXPECT_SIMD:+STREAMFIT_EXPECT_SIMD=$STREAMFIT_EXPECT_SIMD} \
            timeout 1800 chroot "$root" "$@"' sh "$root" "$repo" "$@"
}
inroot /usr/bin/python3 -c 'import platform, sys; assert platform.machine() == "aarch64", platform.machine(); print("root:", platform.machine(), sys.version.split()[0])'

step "the wheel, cross-built with zig"
wheel="$("$ci/wheels/build.sh" aarch64 "$sdist" "$work/build" "$root" | tail -1)"
cp "$wheel" "$root/wheels/"
name="$(basename "$wheel")"

step "installed in the root by its own pip"
# the test extra's runner, timeout plugin and Cython only (the whole extra
# brings Dask, matplotlib, mypy, river: minutes of emulated installs for tests
# this stage does not run)
mapfile -t tools < <(tar -xzOf "$sdist" --wildcards '*/pyproject.toml' | python -c '
import re, sys, tomllib
test = tomllib.loads(sys.stdin.read())["project"]["optional-dependencies"]["test"]
print("\n".join(r for r in test if re.split(r"[<>=!~\[; ]", r)[0].lower() in
                {"pytest", "pytest-timeout", "cython"}))')
[ "${#tools[@]}" -eq 3 ] || { echo "the test extra names ${tools[*]}"; exit 1; }
inroot "/usr/bin/python$pyver" -m venv /venv
inroot /venv/bin/python -m pip install --quiet --no-compile "/wheels/$name" "${tools[@]}"

step "the SIMD path on aarch64"
inroot /venv/bin/python - <<'PY'
import platform
from streamfit._kernels import _simd
paths = _simd.paths()
print("aarch64 paths:", paths)
assert platform.machine() == "aarch64"
# the vector path (GCC/Clang vector extensions: NEON registers on aarch64),
# none of x86's, and fused multiply-adds (Clang; aarch64 always has FMA)
assert paths["vector"] and not paths["portable"], paths
assert not (paths["clones"] or paths["avx512"] or paths["sse2"] or paths["avx512_active"]), paths
assert paths["fused"], paths
PY
# ... and the kernels' code is NEON's 2-double vector arithmetic (the root's
# own objdump, emulated)
simd_so="$(cd "$root" && ls venv/lib/python"$pyver"/site-packages/streamfit/_kernels/_simd.*.so)"
neon="$(inroot /usr/bin/objdump -d "/$simd_so" | grep -cE $'\t(fmla|fmul|fadd|fsub)\tv[0-9]+\\.2d' || true)"
echo "NEON 2-double vector instructions in _simd: $neon"
[ "$neon" -ge 16 ] || { echo "the vector path did not compile to NEON"; exit 1; }

step "the tests"
STREAMFIT_EXPECT_SIMD=vector inroot /venv/bin/python -m pytest \
    /project/tests/kernels /project/tests/test_estimator_checks.py::test_shipped_estimators_pass \
    -p one_config_per_family -p no:cacheprovider -q -ra
step "done"
