# libdeflate (Debian: libdeflate-dev), for its CRC-32 (src/core/crc32.cc). Its own CMake package exists
# only from 1.15 (Debian 12 has 1.14), so: that package when there is one, else the header and library
# found where pkg-config's libdeflate.pc says (or on CMAKE_PREFIX_PATH, a machine without pkg-config).
# Defines the target Libdeflate::Libdeflate.
find_package(libdeflate CONFIG QUIET)
if(TARGET libdeflate::libdeflate_shared OR TARGET libdeflate::libdeflate_static)
  add_library(Libdeflate::Libdeflate INTERFACE IMPORTED)
  if(TARGET libdeflate::libdeflate_shared)
    target_link_libraries(Libdeflate::Libdeflate INTERFACE libdeflate::libdeflate_shared)
  else()
    target_link_libraries(Libdeflate::Libdeflate INTERFACE libdeflate::libdeflate_static)
  endif()
  set(Libdeflate_FOUND TRUE)
  return()
endif()
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_LIBDEFLATE QUIET libdeflate)
endif()
find_path(LIBDEFLATE_INCLUDE_DIR libdeflate.h HINTS ${PC_LIBDEFLATE_INCLUDE_DIRS})
find_library(LIBDEFLATE_LIBRARY NAMES deflate HINTS ${PC_LIBDEFLATE_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Libdeflate REQUIRED_VARS LIBDEFLATE_LIBRARY LIBDEFLATE_INCLUDE_DIR
                                  VERSION_VAR PC_LIBDEFLATE_VERSION)
if(Libdeflate_FOUND AND NOT TARGET Libdeflate::Libdeflate)
  add_library(Libdeflate::Libdeflate UNKNOWN IMPORTED)
  set_target_properties(Libdeflate::Libdeflate PROPERTIES IMPORTED_LOCATION "${LIBDEFLATE_LIBRARY}"
                                                          INTERFACE_INCLUDE_DIRECTORIES "${LIBDEFLATE_INCLUDE_DIR}")
endif()
