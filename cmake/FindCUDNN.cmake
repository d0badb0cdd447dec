# FindCUDNN.cmake: finds NVIDIA cuDNN and provides the imported target CUDNN::cudnn.
#
# CMake ships no cuDNN module, and the CUDA toolkit does not always hold cuDNN (Debian/Ubuntu packages put
# it under /usr/include/x86_64-linux-gnu and /usr/lib/x86_64-linux-gnu; NVIDIA's tarballs and pip wheels
# put it anywhere), so we search, in order: CUDNN_ROOT (CMake variable or environment variable), the CUDA
# toolkit's directories, then the system paths.
#
# Sets:
#   CUDNN_FOUND          true when both cudnn.h and libcudnn were found
#   CUDNN_INCLUDE_DIR    directory holding cudnn.h
#   CUDNN_LIBRARY        the libcudnn shared library
#   CUDNN_VERSION        "MAJOR.MINOR.PATCH" parsed from cudnn_version.h (or cudnn.h before cuDNN 8)
#   CUDNN_SUMMARY        one line for the configuration summary ("found 9.14.0 (/usr/lib/...)" or
#                        "not found (...)")
# Imported target:
#   CUDNN::cudnn
#
# Not finding cuDNN is not an error unless the caller says find_package(CUDNN REQUIRED): the dense (MLP)
# agents need only cuBLAS; cuDNN is for convolutional networks.

set(_cudnn_hints)
if(CUDNN_ROOT)
  list(APPEND _cudnn_hints "${CUDNN_ROOT}")
endif()
if(DEFINED ENV{CUDNN_ROOT})
  list(APPEND _cudnn_hints "$ENV{CUDNN_ROOT}")
endif()
if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _cudnn_hints "${CUDAToolkit_LIBRARY_ROOT}")
endif()
if(CUDAToolkit_INCLUDE_DIRS)
  foreach(_d ${CUDAToolkit_INCLUDE_DIRS})
    get_filename_component(_p "${_d}" DIRECTORY)
    list(APPEND _cudnn_hints "${_p}")
  endforeach()
endif()
if(CUDAToolkit_LIBRARY_DIR)
  get_filename_component(_p "${CUDAToolkit_LIBRARY_DIR}" DIRECTORY)
  list(APPEND _cudnn_hints "${_p}")
endif()

find_path(CUDNN_INCLUDE_DIR cudnn.h
  HINTS ${_cudnn_hints}
  PATH_SUFFIXES include include/x86_64-linux-gnu include/aarch64-linux-gnu)
find_library(CUDNN_LIBRARY NAMES cudnn
  HINTS ${_cudnn_hints}
  PATH_SUFFIXES lib64 lib lib/x64 lib/x86_64-linux-gnu lib/aarch64-linux-gnu)

set(CUDNN_VERSION "")
if(CUDNN_INCLUDE_DIR)
  # cuDNN 8 and later keep the version in cudnn_version.h; older releases in cudnn.h.
  set(_cudnn_vfile "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
  if(NOT EXISTS "${_cudnn_vfile}")
    set(_cudnn_vfile "${CUDNN_INCLUDE_DIR}/cudnn.h")
  endif()
  file(STRINGS "${_cudnn_vfile}" _cudnn_vlines REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL)[ \t]+[0-9]+")
  foreach(_part MAJOR MINOR PATCHLEVEL)
    string(REGEX MATCH "CUDNN_${_part}[ \t]+([0-9]+)" _m "${_cudnn_vlines}")
    set(_cudnn_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  if(NOT _cudnn_MAJOR STREQUAL "")
    set(CUDNN_VERSION "${_cudnn_MAJOR}.${_cudnn_MINOR}.${_cudnn_PATCHLEVEL}")
  endif()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN
  REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR
  VERSION_VAR CUDNN_VERSION)
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)

if(CUDNN_FOUND)
  if(NOT TARGET CUDNN::cudnn)
    add_library(CUDNN::cudnn SHARED IMPORTED)
    set_target_properties(CUDNN::cudnn PROPERTIES
      IMPORTED_LOCATION "${CUDNN_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
  endif()
  set(CUDNN_SUMMARY "found ${CUDNN_VERSION} (${CUDNN_LIBRARY})")
else()
  set(CUDNN_SUMMARY "not found (set CUDNN_ROOT to enable it; only 16-bit convolutions need it)")
endif()
