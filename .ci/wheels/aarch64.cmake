# CMake toolchain for the aarch64 wheel (.ci/wheels/build.sh): the compiler
# is zig's clang targeting aarch64-linux-gnu.2.28 (CC=.ci/wheels/zigcc); this
# only tells CMake that the target is another machine, so that it runs none of
# the target's programs and CMakeLists.txt takes the target's SOABI and numpy.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
