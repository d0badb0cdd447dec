# test_install.cmake: the ctest test "install_and_example", run as cmake -P with
#   -DSRC=<source dir> -DBIN=<build dir> -DCC=<C compiler> [-DCUDA_MODULE=0|1]
# Installs the build tree into a fresh prefix, checks the installed files, builds examples/ against it
# through find_package(rltrain) (shared and static targets) and runs them, then compiles the example
# again with the installed rltrain.pc (cc $(pkg-config --cflags --libs rltrain)) and runs that too.
# Everything runs with LD_LIBRARY_PATH unset: the installed CLI, the CMake-package programs and the
# pkg-config program must find librltrain (and it its own dependencies) through their RUNPATHs. Then the
# prefix is moved and the CLI, the pkg-config build and the CMake-package build are done again from the
# new place, as the relocatable rltrain.pc and CMake package promise. Last, an install into /usr (under
# DESTDIR) must get a rltrain.pc without an rpath, since the loader searches /usr/lib anyway.
foreach(var SRC BIN CC)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "test_install.cmake needs -D${var}=...")
  endif()
endforeach()

# A program that starts only because LD_LIBRARY_PATH happens to name the library would pass here and
# fail for a user, so the variable is removed for every command below.
unset(ENV{LD_LIBRARY_PATH})

set(work "${BIN}/install-test")
set(prefix "${work}/prefix")
file(REMOVE_RECURSE "${work}")
file(MAKE_DIRECTORY "${work}")

# Runs a command, echoing it; stops the test with its output when it fails.
function(step what)
  message(STATUS "${what}: ${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step("install" "${CMAKE_COMMAND}" --install "${BIN}" --prefix "${prefix}")

# The installed CLI: librltrain through its RUNPATH ($ORIGIN/../lib), a dry run plans without writing.
function(check_cli where)
  step("${where}: rltrain --help" "${where}/bin/rltrain" --help)
  if(NOT step_output MATCHES "usage: rltrain")
    message(FATAL_ERROR "${where}/bin/rltrain --help printed no usage:\n${step_output}")
  endif()
  step("${where}: rltrain --dry-run" "${where}/bin/rltrain" --config "${SRC}/configs/td3_pendulum.yaml" --dry-run)
  if(NOT step_output MATCHES "dry run: the plan fits")
    message(FATAL_ERROR "${where}/bin/rltrain --dry-run did not plan:\n${step_output}")
  endif()
endfunction()

# Relative install dirs as the build chose them (GNUInstallDirs may pick lib64 or a multiarch dir).
file(GLOB_RECURSE pc_files "${prefix}/*/rltrain.pc")
list(LENGTH pc_files n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one installed rltrain.pc, found: ${pc_files}")
endif()
get_filename_component(libdir "${pc_files}" DIRECTORY)
get_filename_component(libdir "${libdir}" DIRECTORY)
set(expected
  "${prefix}/include/rltrain.h" "${libdir}/librltrain.so" "${libdir}/librltrain.a"
  "${libdir}/cmake/rltrain/rltrainConfig.cmake" "${libdir}/cmake/rltrain/rltrainConfigVersion.cmake"
  "${libdir}/cmake/rltrain/rltrainTargets.cmake" "${prefix}/bin/rltrain"
  "${prefix}/share/rltrain/configs/td3_pendulum.yaml" "${prefix}/share/rltrain/configs/dqn_cartpole.yaml")
if(CUDA_MODULE)
  list(APPEND expected "${libdir}/librltrain_cuda.so")
endif()
foreach(f ${expected})
  if(NOT EXISTS "${f}")
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
# The CUDA module is only dlopened on a GPU run, so without a GPU this is the check that the installed
# module finds the CUDA libraries through its own RUNPATH.
find_program(LDD ldd)
if(CUDA_MODULE AND LDD)
  step("ldd librltrain_cuda.so" "${LDD}" "${libdir}/librltrain_cuda.so")
  if(step_output MATCHES "not found")
    message(FATAL_ERROR "the installed CUDA module misses libraries without LD_LIBRARY_PATH:\n${step_output}")
  endif()
endif()
check_cli("${prefix}")

# The CMake package: a separate project finds it through CMAKE_PREFIX_PATH only.
step("configure examples" "${CMAKE_COMMAND}" -S "${SRC}/examples" -B "${work}/examples"
  "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_C_COMPILER=${CC}" -DCMAKE_BUILD_TYPE=Release)
step("build examples" "${CMAKE_COMMAND}" --build "${work}/examples")
foreach(exe embed_pendulum embed_pendulum_static embed_trainer)
  if(NOT EXISTS "${work}/examples/${exe}")
    message(FATAL_ERROR "examples/ did not build ${exe}")
  endif()
endforeach()
step("run embed_pendulum" "${work}/examples/embed_pendulum" 2000)
if(NOT step_output MATCHES "final return -?[0-9]")
  message(FATAL_ERROR "embed_pendulum printed no final return:\n${step_output}")
endif()
string(REGEX MATCH "final return [^\n]*" line "${step_output}")
message(STATUS "embed_pendulum (shared): ${line}")
step("run embed_pendulum_static" "${work}/examples/embed_pendulum_static" 2000)
string(REGEX MATCH "final return [^\n]*" line_static "${step_output}")
message(STATUS "embed_pendulum (static): ${line_static}")
# The same program with the same seed: the two libraries must agree exactly.
if(NOT line STREQUAL line_static)
  message(FATAL_ERROR "shared and static builds disagree: '${line}' vs '${line_static}'")
endif()
# The trainer driving the example's own environment (1,000 steps: random actions, then one evaluation).
step("run embed_trainer" "${work}/examples/embed_trainer" 1000 "${work}/embed_trainer_run")
if(NOT step_output MATCHES "final return -?[0-9]" OR NOT step_output MATCHES " 0 allocations after init")
  message(FATAL_ERROR "embed_trainer did not finish as expected:\n${step_output}")
endif()
if(NOT EXISTS "${work}/embed_trainer_run/summary.json" OR NOT EXISTS "${work}/embed_trainer_run/final.ckpt")
  message(FATAL_ERROR "embed_trainer wrote no summary.json/final.ckpt in ${work}/embed_trainer_run")
endif()
string(REGEX MATCH "final return [^\n]*" line_trainer "${step_output}")
message(STATUS "embed_trainer: ${line_trainer}")

# pkg-config: shared (the usual command line), then static (Libs.private and Requires.private).
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} "${libdir}/pkgconfig")
step("pkg-config" "${PKG_CONFIG}" --cflags --libs rltrain)
# The README's `cc app.c $(pkg-config --cflags --libs rltrain)` links a program that calls libm (sinf, cosf).
if(NOT step_output MATCHES "-lm")
  message(FATAL_ERROR "pkg-config --libs rltrain has no -lm: ${step_output}")
endif()
string(STRIP "${step_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
# The prefix is not a system library directory, so Libs carries the rpath that lets the program start.
if(NOT flags MATCHES "-Wl,-rpath,")
  message(FATAL_ERROR "pkg-config --libs rltrain gives no rpath for a private prefix: ${flags}")
endif()
step("cc with pkg-config" "${CC}" -std=c11 -O2 -Wall -Wextra -Werror "${SRC}/examples/embed_pendulum.c" ${flags} -lm
  -o "${work}/embed_pendulum_pc")
step("run embed_pendulum_pc" "${work}/embed_pendulum_pc" 2000)
string(REGEX MATCH "final return [^\n]*" line_pc "${step_output}")
if(NOT line STREQUAL line_pc)
  message(FATAL_ERROR "the pkg-config build disagrees: '${line}' vs '${line_pc}'")
endif()

step("pkg-config --static" "${PKG_CONFIG}" --static --cflags --libs rltrain)
string(STRIP "${step_output}" sflags)
string(REGEX REPLACE "(^| )-lrltrain( |$)" "\\1-l:librltrain.a\\2" sflags "${sflags}")
separate_arguments(sflags UNIX_COMMAND "${sflags}")
step("cc static with pkg-config" "${CC}" -std=c11 -O2 "${SRC}/examples/embed_pendulum.c" ${sflags} -lm
  -o "${work}/embed_pendulum_pc_static")
step("run embed_pendulum_pc_static" "${work}/embed_pendulum_pc_static" 200)

# Relocation: the prefix moved (so nothing can still load from the old place) serves the CLI and programs
# built after the move. Programs built before it keep the old path in their RUNPATH, as with any rpath.
set(moved "${work}/moved/prefix")
file(MAKE_DIRECTORY "${work}/moved")
file(RENAME "${prefix}" "${moved}")
string(REPLACE "${prefix}" "${moved}" moved_libdir "${libdir}")
check_cli("${moved}")
set(ENV{PKG_CONFIG_PATH} "${moved_libdir}/pkgconfig")
step("pkg-config (moved)" "${PKG_CONFIG}" --cflags --libs rltrain)
string(STRIP "${step_output}" mflags)
string(FIND "${mflags}" "-Wl,-rpath,${moved}/" at)
if(at LESS 0)
  message(FATAL_ERROR "pkg-config --libs rltrain does not follow the moved prefix: ${mflags}")
endif()
separate_arguments(mflags UNIX_COMMAND "${mflags}")
step("cc with pkg-config (moved)" "${CC}" -std=c11 -O2 "${SRC}/examples/embed_pendulum.c" ${mflags} -lm
  -o "${work}/embed_pendulum_pc_moved")
step("run embed_pendulum_pc_moved" "${work}/embed_pendulum_pc_moved" 2000)
string(REGEX MATCH "final return [^\n]*" line_moved "${step_output}")
if(NOT line STREQUAL line_moved)
  message(FATAL_ERROR "the pkg-config build from the moved prefix disagrees: '${line}' vs '${line_moved}'")
endif()
step("configure examples (moved)" "${CMAKE_COMMAND}" -S "${SRC}/examples" -B "${work}/examples_moved"
  "-DCMAKE_PREFIX_PATH=${moved}" "-DCMAKE_C_COMPILER=${CC}" -DCMAKE_BUILD_TYPE=Release)
step("build embed_pendulum (moved)" "${CMAKE_COMMAND}" --build "${work}/examples_moved" --target embed_pendulum)
step("run embed_pendulum (moved)" "${work}/examples_moved/embed_pendulum" 2000)
string(REGEX MATCH "final return [^\n]*" line_moved "${step_output}")
if(NOT line STREQUAL line_moved)
  message(FATAL_ERROR "the CMake-package build from the moved prefix disagrees: '${line}' vs '${line_moved}'")
endif()

# A system prefix: the loader searches its library directory anyway, so rltrain.pc sets no rpath there.
set(ENV{DESTDIR} "${work}/destdir")
step("install into /usr under DESTDIR" "${CMAKE_COMMAND}" --install "${BIN}" --prefix /usr)
unset(ENV{DESTDIR})
file(GLOB_RECURSE sys_pc "${work}/destdir/usr/*/rltrain.pc")
if(NOT sys_pc)
  message(FATAL_ERROR "the DESTDIR install wrote no rltrain.pc under ${work}/destdir/usr")
endif()
file(READ "${sys_pc}" sys_pc_text)
if(sys_pc_text MATCHES "\nLibs:[^\n]*rpath")
  message(FATAL_ERROR "rltrain.pc for prefix /usr sets an rpath:\n${sys_pc_text}")
endif()
message(STATUS "install, CLI, CMake package, pkg-config (shared and static), moved prefix, system prefix: all passed")
