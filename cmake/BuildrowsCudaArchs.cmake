# BuildrowsCudaArchs.cmake - the GPU architecture guard of buildrows (SPEC §4, §5). CMake 3.25+.
#
# Injected by the rendered presets through CMAKE_PROJECT_TOP_LEVEL_INCLUDES, so it runs inside the
# first project() call before any language is enabled (a project may also include() it before
# enabling CUDA). It:
#   1. turns TORCH_CUDA_ARCH_LIST (a CMake variable, else the environment variable) into
#      CMAKE_CUDA_ARCHITECTURES: 7.5;9.0+PTX -> 75-real;90-real;90-virtual. A list with PTX but no
#      cubin for an architecture (120-virtual) cannot be said there: a row with one comes as
#      CMAKE_CUDA_ARCHITECTURES with TORCH_CUDA_ARCH_LIST empty, and compute_120 or 12.0-virtual in
#      TORCH_CUDA_ARCH_LIST is refused rather than read as a cubin;
#   2. stops configuration with FATAL_ERROR when CUDA is requested and no list is given, or the
#      list asks CMake to choose (native, all, all-major): a wheel must never carry code for
#      whatever GPU the builder happened to have;
#   3. at the end of the top-level directory, stops a build that enabled the CUDA language
#      without a list, or that enabled it in a row declared CPU (BUILDROWS_CUDA=OFF).
#
# "CUDA requested" means: BUILDROWS_CUDA is ON (the presets set it), or the project's CUDA option
# named by BUILDROWS_CUDA_OPTION (e.g. EXECUTORCH_BUILD_CUDA) is ON, or $ENV{BUILDROWS_CUDA} is ON.

include_guard(GLOBAL)

# Read the variables the presets pass for this module (CMake warns about unread -D variables).
set(_buildrows_row "${BUILDROWS_ROW}")
set(_buildrows_option "${BUILDROWS_CUDA_OPTION}")

function(_buildrows_fail what)
  if(DEFINED BUILDROWS_ROW)
    set(_where "row ${BUILDROWS_ROW}: ")
  else()
    set(_where "")
  endif()
  message(FATAL_ERROR "buildrows: ${_where}${what}\n"
    "buildrows never falls back to detecting the builder's GPU. Fix: render the row's presets "
    "(`buildrows render ROW`) or set TORCH_CUDA_ARCH_LIST (e.g. `buildrows env ROW`), and give "
    "the row an archs list in buildrows.toml.")
endfunction()

# --- 1. Is CUDA requested? --------------------------------------------------------------------
set(_buildrows_cuda_requested OFF)
set(_buildrows_cuda_why "")
if(DEFINED BUILDROWS_CUDA)
  if(BUILDROWS_CUDA)
    set(_buildrows_cuda_requested ON)
    set(_buildrows_cuda_why "BUILDROWS_CUDA=${BUILDROWS_CUDA}")
  endif()
elseif(DEFINED BUILDROWS_CUDA_OPTION AND DEFINED ${BUILDROWS_CUDA_OPTION})
  if(${${BUILDROWS_CUDA_OPTION}})
    set(_buildrows_cuda_requested ON)
    set(_buildrows_cuda_why "${BUILDROWS_CUDA_OPTION}=${${BUILDROWS_CUDA_OPTION}}")
  endif()
elseif(DEFINED ENV{BUILDROWS_CUDA})
  if("$ENV{BUILDROWS_CUDA}")
    set(_buildrows_cuda_requested ON)
    set(_buildrows_cuda_why "the environment's BUILDROWS_CUDA=$ENV{BUILDROWS_CUDA}")
  endif()
endif()

# --- 2. The list: TORCH_CUDA_ARCH_LIST (variable, else environment) -------------------------
# A CPU row (BUILDROWS_CUDA=OFF) ignores any list the builder's environment carries: the
# row builds no device code, and the end-of-configure check refuses CUDA if the project enables it.
set(_buildrows_cpu_row OFF)
if(DEFINED BUILDROWS_CUDA AND NOT BUILDROWS_CUDA)
  set(_buildrows_cpu_row ON)
endif()
set(_buildrows_list "")
set(_buildrows_list_from "")
if(_buildrows_cpu_row)
  # nothing to convert
elseif(DEFINED TORCH_CUDA_ARCH_LIST AND NOT "${TORCH_CUDA_ARCH_LIST}" STREQUAL "")
  set(_buildrows_list "${TORCH_CUDA_ARCH_LIST}")
  set(_buildrows_list_from "the TORCH_CUDA_ARCH_LIST variable")
elseif(DEFINED ENV{TORCH_CUDA_ARCH_LIST} AND NOT "$ENV{TORCH_CUDA_ARCH_LIST}" STREQUAL "")
  set(_buildrows_list "$ENV{TORCH_CUDA_ARCH_LIST}")
  set(_buildrows_list_from "the environment's TORCH_CUDA_ARCH_LIST")
endif()

set(_buildrows_converted "")
if(NOT _buildrows_list STREQUAL "")
  string(REPLACE " " ";" _buildrows_tokens "${_buildrows_list}")
  string(REPLACE "," ";" _buildrows_tokens "${_buildrows_tokens}")
  set(_buildrows_real "")
  set(_buildrows_virtual "")
  foreach(_tok IN LISTS _buildrows_tokens)
    if(_tok STREQUAL "")
      continue()
    endif()
    if(_tok MATCHES "^([1-9][0-9]?)\\.([0-9])([af]?)(\\+PTX)?$")
      set(_num "${CMAKE_MATCH_1}${CMAKE_MATCH_2}${CMAKE_MATCH_3}")
      list(APPEND _buildrows_real "${_num}-real")
      if(CMAKE_MATCH_4)
        list(APPEND _buildrows_virtual "${_num}-virtual")
      endif()
    elseif(_tok MATCHES "^compute_[0-9]+[af]?$" OR _tok MATCHES "-virtual$")
      # PTX without a cubin: PyTorch reads this variable too and has no way to say it (X.Y+PTX is always
      # a cubin and its PTX), so it is never converted into something else.
      _buildrows_fail("'${_tok}' in ${_buildrows_list_from} ('${_buildrows_list}'): TORCH_CUDA_ARCH_LIST cannot say PTX without a cubin (X.Y+PTX always builds the cubin too). Give the list as CMAKE_CUDA_ARCHITECTURES (e.g. 120-virtual) and leave TORCH_CUDA_ARCH_LIST empty, as `buildrows render` does for such a row.")
    elseif(_tok MATCHES "\\+[pP][tT][xX]$" AND NOT _tok MATCHES "\\+PTX$")
      _buildrows_fail("'${_tok}' in ${_buildrows_list_from} ('${_buildrows_list}'): write PTX as '+PTX' in capitals; PyTorch ignores any other spelling and would ship no PTX.")
    else()
      _buildrows_fail("'${_tok}' in ${_buildrows_list_from} ('${_buildrows_list}') is not a GPU architecture such as 8.0, 9.0a or 12.0+PTX (native, all and Auto are refused).")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _buildrows_real)
  list(REMOVE_DUPLICATES _buildrows_virtual)
  set(_buildrows_converted ${_buildrows_real} ${_buildrows_virtual})
endif()

# --- 3. Reconcile with a CMAKE_CUDA_ARCHITECTURES already given (the preset's cache variable) --
set(_buildrows_given "")
if(_buildrows_cpu_row)
  # nothing to reconcile
elseif(DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(_buildrows_given "${CMAKE_CUDA_ARCHITECTURES}")
elseif(DEFINED ENV{CUDAARCHS})
  set(_buildrows_given "$ENV{CUDAARCHS}")
endif()
if(_buildrows_given MATCHES "^(native|all|all-major)$" OR _buildrows_given MATCHES "^(ON|OFF|TRUE|FALSE)$")
  _buildrows_fail("CMAKE_CUDA_ARCHITECTURES='${_buildrows_given}' asks CMake to choose the GPU architectures; a row must name them.")
endif()

if(_buildrows_converted)
  if(NOT _buildrows_given STREQUAL "")
    set(_a ${_buildrows_given})
    set(_b ${_buildrows_converted})
    list(SORT _a)
    list(SORT _b)
    if(NOT "${_a}" STREQUAL "${_b}")
      _buildrows_fail("CMAKE_CUDA_ARCHITECTURES='${_buildrows_given}' disagrees with ${_buildrows_list_from} '${_buildrows_list}' (which means '${_buildrows_converted}'); PyTorch's CMake reads the latter, so both must name the same list.")
    endif()
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${_buildrows_converted}" CACHE STRING "GPU architectures, from TORCH_CUDA_ARCH_LIST (buildrows)" FORCE)
  set(_buildrows_have_list ON)
elseif(NOT _buildrows_given STREQUAL "")
  set(_buildrows_have_list ON)
else()
  set(_buildrows_have_list OFF)
endif()

if(_buildrows_cuda_requested AND NOT _buildrows_have_list)
  _buildrows_fail("CUDA is requested (${_buildrows_cuda_why}) but no GPU architecture list was given: TORCH_CUDA_ARCH_LIST and CMAKE_CUDA_ARCHITECTURES are both unset.")
endif()
if(_buildrows_have_list)
  message(STATUS "buildrows: CMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES}")
endif()

# --- 4. At the end of the top-level directory: did the project enable CUDA anyway? ------------
set_property(GLOBAL PROPERTY _BUILDROWS_HAVE_LIST "${_buildrows_have_list}")
function(_buildrows_check_languages)
  get_property(_langs GLOBAL PROPERTY ENABLED_LANGUAGES)
  get_property(_have GLOBAL PROPERTY _BUILDROWS_HAVE_LIST)
  if(NOT "CUDA" IN_LIST _langs)
    return()
  endif()
  if(DEFINED BUILDROWS_CUDA AND NOT BUILDROWS_CUDA)
    _buildrows_fail("this is a CPU row (BUILDROWS_CUDA=OFF), yet the project enabled the CUDA language; make the project's CUDA option (BUILDROWS_CUDA_OPTION='${BUILDROWS_CUDA_OPTION}') turn CUDA off.")
  endif()
  if(NOT _have)
    _buildrows_fail("the project enabled the CUDA language but no GPU architecture list was given (TORCH_CUDA_ARCH_LIST and CMAKE_CUDA_ARCHITECTURES were unset when configuration began).")
  endif()
endfunction()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _buildrows_check_languages)

# --- 4. The row's interpreter ------------------------------------------------------------------
# The presets pin the row's Python (Python_EXECUTABLE, Python3_EXECUTABLE and its version in
# BUILDROWS_PYTHON). Reading them here keeps CMake from warning in projects that never look for
# Python. At the end of the top-level directory, a FindPython/FindPython3 result of another
# version than the row's stops the configuration: a cp311 module built under a py312 row's name
# is the mistake this prevents.
set(_buildrows_python_pins "${Python_EXECUTABLE};${Python3_EXECUTABLE};${BUILDROWS_PYTHON}")
# Whether the presets (or the user) pinned an interpreter before the project looked for one.
if(Python_EXECUTABLE OR Python3_EXECUTABLE)
  set(_buildrows_python_pinned ON)
else()
  set(_buildrows_python_pinned OFF)
endif()
function(_buildrows_check_python)
  if(NOT BUILDROWS_PYTHON)
    return()
  endif()
  string(REGEX REPLACE "t$" "" _want "${BUILDROWS_PYTHON}")
  # The rendered presets pin the row's interpreter only when this machine had one at render time;
  # either way, any FindPython, FindPython3 or (legacy) FindPythonInterp result is held to the row.
  if(_buildrows_python_pinned)
    set(_fix "keep the preset's Python_EXECUTABLE (`buildrows render ROW` pins the row's interpreter)")
  else()
    string(CONCAT _fix "get Python ${BUILDROWS_PYTHON} (`buildrows doctor ROW` prints the command), then "
           "`buildrows render ROW` again: the presets then pin it")
  endif()
  foreach(_p Python Python3 PYTHON)
    if(DEFINED ${_p}_VERSION_MAJOR AND DEFINED ${_p}_VERSION_MINOR)
      set(_got "${${_p}_VERSION_MAJOR}.${${_p}_VERSION_MINOR}")
      if(NOT _got STREQUAL _want)
        message(FATAL_ERROR "buildrows: row ${BUILDROWS_ROW}: the project found Python ${_got} "
          "(${${_p}_EXECUTABLE}), but the row is Python ${BUILDROWS_PYTHON}; its module would carry "
          "the wrong tag. Fix: ${_fix}.")
      endif()
    endif()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _buildrows_check_python)
