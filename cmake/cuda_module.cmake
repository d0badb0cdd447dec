# cuda_module.cmake: builds the CUDA backend as the run-time module librltrain_cuda.so (included by the
# root CMakeLists.txt when RLT_CUDA is ON).
#
# The module is never linked into librltrain: engine/backend_registry.c finds it next to librltrain (or
# through RLT_CUDA_MODULE) and dlopens it only when a CUDA device is asked for, so the library and the CLI
# start on machines with no GPU, driver or CUDA libraries. The module therefore links the CUDA libraries
# itself and carries its own copy of base/err.c: it must not need any symbol of librltrain, since the
# shared and the static library both load it (checked at link time with --no-undefined).

# Turing to Hopper by default (CUDA 13 supports sm_75 and newer), unless the user chose with
# -DCMAKE_CUDA_ARCHITECTURES or the CUDAARCHS environment variable. Set before enable_language, which
# would otherwise pick the compiler's default.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
  set(CMAKE_CUDA_ARCHITECTURES 75 80 86 89 90 CACHE STRING "CUDA architectures to build the backend module for")
endif()
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

find_package(CUDAToolkit REQUIRED)
# cuDNN is optional: dense networks and fp32 convolutions run on cuBLAS and our own kernels; 16-bit
# convolutions (precision bf16/fp16) need cuDNN on the GPU.
# RLT_CUDNN=OFF builds without it even when it is installed (to test that configuration).
option(RLT_CUDNN "Use cuDNN for the CUDA backend's convolutions when it is found" ON)
if(RLT_CUDNN)
  find_package(CUDNN)
else()
  set(CUDNN_FOUND FALSE)
  set(CUDNN_SUMMARY "off (-DRLT_CUDNN=OFF): fp32 convolutions on our own kernels, 16-bit ones refused")
endif()

file(GLOB RLT_CUDA_SOURCES CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cuda/*.cu
  ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cuda/*.c)

# The convolution ops come from one of two directories, chosen here rather than by #ifdef in the sources:
# cuDNN's implementation, or a stand-in whose ops fail with RLT_EDEVICE and say how to get cuDNN.
if(CUDNN_FOUND)
  file(GLOB RLT_CUDA_CONV_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cuda/cudnn/*.c)
else()
  file(GLOB RLT_CUDA_CONV_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cuda/no_cudnn/*.c)
endif()

add_library(rltrain_cuda MODULE ${RLT_CUDA_SOURCES} ${RLT_CUDA_CONV_SOURCES} ${CMAKE_CURRENT_SOURCE_DIR}/base/err.c)
target_include_directories(rltrain_cuda PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/include
  ${CMAKE_CURRENT_SOURCE_DIR}/base
  ${CMAKE_CURRENT_SOURCE_DIR}/kernels
  ${CMAKE_CURRENT_SOURCE_DIR}/engine
  ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(rltrain_cuda PRIVATE CUDA::cudart CUDA::cublas CUDA::cublasLt ${CMAKE_DL_LIBS})
set(rlt_cuda_rpath "${CUDAToolkit_LIBRARY_DIR}")
if(CUDNN_FOUND)
  target_link_libraries(rltrain_cuda PRIVATE CUDNN::cudnn)
  # Recorded for the log and for anyone reading the build's flags; the sources do not test it.
  target_compile_definitions(rltrain_cuda PRIVATE RLT_HAVE_CUDNN=1)
  get_filename_component(rlt_cudnn_dir "${CUDNN_LIBRARY}" DIRECTORY)
  list(APPEND rlt_cuda_rpath "${rlt_cudnn_dir}")
endif()

# Next to librltrain, where the registry looks first (the directory of the library that holds it).
get_target_property(rlt_lib_dir rltrain LIBRARY_OUTPUT_DIRECTORY)
if(NOT rlt_lib_dir)
  set(rlt_lib_dir ${CMAKE_CURRENT_BINARY_DIR})
endif()

set_target_properties(rltrain_cuda PROPERTIES
  OUTPUT_NAME rltrain_cuda
  PREFIX "lib"
  LIBRARY_OUTPUT_DIRECTORY ${rlt_lib_dir}
  # The shared CUDA runtime: one copy per process, shared with any other CUDA code the host program loads.
  CUDA_RUNTIME_LIBRARY Shared
  # Only rlt_cuda_backend_ops is exported; everything else (our copy of err.c included) stays private, so
  # it neither clashes with nor binds to librltrain's symbols of the same name.
  C_VISIBILITY_PRESET hidden
  CUDA_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON
  INSTALL_RPATH "${rlt_cuda_rpath}")

target_compile_definitions(rltrain_cuda PRIVATE _GNU_SOURCE)
target_compile_options(rltrain_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Werror -Wno-unused-parameter>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter -Werror=all-warnings>
  # No FMA contraction: elementwise ops (Adam's moments, Polyak, td3_target, act_grad, the MSE gradient,
  # bias sums) then round exactly like the CPU twins and agree with them bit for bit. These kernels are
  # memory-bound, so contraction would buy no speed; cuBLAS is a separate library and unaffected.
  $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false>)
target_link_options(rltrain_cuda PRIVATE -Wl,--no-undefined)

install(TARGETS rltrain_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
