# Sourced by the build scripts: AIRLOCK_CCACHE holds the CMake options that
# compile through ccache when it is installed (nothing otherwise).
# CCACHE_BASEDIR makes the paths it hashes relative to the source tree, so
# that another clone of the same sources hits, and CCACHE_NOHASHDIR that
# another build directory does (the debug information then names the first
# build directory as where a file was compiled).
# CCACHE_DISABLE=1 compiles everything afresh.
AIRLOCK_CCACHE=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
  AIRLOCK_CCACHE=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
