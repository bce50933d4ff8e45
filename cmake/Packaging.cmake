# Installation and Debian packages: stripped binaries, man pages and the files of their examples, shell
# completions, JSON Schemas, and CPack .debs split so that `ckpt` installs without LibTorch and
# `ckpt-torch` pulls it in.
include(GNUInstallDirs)

# A Release (or MinSizeRel) install strips the binaries as `cmake --install --strip` would: ckpt is
# 45 MB with debug info and 1.3 MB without. RelWithDebInfo and Debug keep theirs, since that is why
# one builds them. The install script checks CMAKE_INSTALL_DO_STRIP when it runs, so setting it
# first here is the same as passing --strip; `-DCMAKE_INSTALL_DO_STRIP=0` to the script still wins.
if(CMAKE_BUILD_TYPE MATCHES "^(Release|MinSizeRel)$")
  set(_ckpt_strip_default ON)
else()
  set(_ckpt_strip_default OFF)
endif()
option(CKPT_INSTALL_STRIP "Strip the binaries at install time" ${_ckpt_strip_default})
set(_ckpt_components ckpt)
if(TARGET ckpt-torch)
  list(APPEND _ckpt_components torch)
endif()
if(CKPT_INSTALL_STRIP)
  # install(CODE) belongs to one component; CPack installs per component, so each gets its own copy.
  foreach(_c IN LISTS _ckpt_components)
    install(CODE "if(NOT DEFINED CMAKE_INSTALL_DO_STRIP)\n  set(CMAKE_INSTALL_DO_STRIP 1)\nendif()"
            COMPONENT ${_c})
  endforeach()
endif()

install(TARGETS ckpt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ckpt)
if(TARGET ckpt-torch)
  install(TARGETS ckpt-torch RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT torch)
endif()

# Completions are generated from `ckpt --help` and `ckpt CMD --help` after each link, so they list
# exactly the subcommands and options of the binary being installed (tests/completions_test.py
# checks them against --help in each shell).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  # The manual pages are generated from the reference in docs/ (man/pages.txt names the pages, ckpt(1)
  # and one per command and topic, and the sections of each), so they say what the docs say; no copy
  # is kept by hand. Reconfigured when pages.txt changes, since its PAGE lines name the outputs.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/man/pages.txt)
  file(GLOB _ckpt_doc_pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
  file(STRINGS ${PROJECT_SOURCE_DIR}/man/pages.txt _ckpt_man_lines REGEX "^PAGE ")
  set(CKPT_MAN_DIR ${PROJECT_BINARY_DIR}/man)
  set(CKPT_MAN_PAGES "")
  foreach(_line IN LISTS _ckpt_man_lines)
    if(NOT _line MATCHES "^PAGE +([^ ]+) +([0-9])")
      message(FATAL_ERROR "man/pages.txt: cannot read '${_line}'")
    endif()
    list(APPEND CKPT_MAN_PAGES ${CKPT_MAN_DIR}/${CMAKE_MATCH_1}.${CMAKE_MATCH_2})
  endforeach()
  list(GET CKPT_MAN_PAGES 0 CKPT_MAN_PAGE)  # ckpt.1, the summary page
  list(TRANSFORM CKPT_MAN_PAGES APPEND .gz OUTPUT_VARIABLE _ckpt_man_gz)
  add_custom_command(
    OUTPUT ${CKPT_MAN_PAGES} ${CKPT_MAN_DIR}/examples-used.txt
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/man/md2man.py --pages ${PROJECT_SOURCE_DIR}/man/pages.txt
            --version ${PROJECT_VERSION} --out-dir ${CKPT_MAN_DIR}
            --examples-used ${CKPT_MAN_DIR}/examples-used.txt
    DEPENDS ${PROJECT_SOURCE_DIR}/man/md2man.py ${PROJECT_SOURCE_DIR}/man/pages.txt ${_ckpt_doc_pages}
    COMMENT "Generating the manual pages ckpt(1), ckpt-summary(1), ... from docs/")
  # Installed gzip-compressed as Debian policy 12.1 asks (gzip -9n: no name, no time, so reproducible);
  # build/man/*.N stay plain for `man -l`.
  add_custom_command(
    OUTPUT ${_ckpt_man_gz}
    COMMAND ${Python3_EXECUTABLE} -c
            "import gzip, sys; [open(p + '.gz', 'wb').write(gzip.compress(open(p, 'rb').read(), 9, mtime=0)) for p in sys.argv[1:]]"
            ${CKPT_MAN_PAGES}
    DEPENDS ${CKPT_MAN_PAGES}
    COMMENT "Compressing the manual pages"
    VERBATIM)
  add_custom_target(ckpt_man ALL DEPENDS ${CKPT_MAN_PAGES} ${_ckpt_man_gz})
  foreach(_gz IN LISTS _ckpt_man_gz)
    string(REGEX MATCH "\\.([0-9])\\.gz$" _ ${_gz})
    install(FILES ${_gz} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${CMAKE_MATCH_1} COMPONENT ckpt)
  endforeach()

  set(_ckpt_comp_dir ${PROJECT_BINARY_DIR}/completions)
  set(_ckpt_comp_files ${_ckpt_comp_dir}/ckpt ${_ckpt_comp_dir}/_ckpt ${_ckpt_comp_dir}/ckpt.fish)
  add_custom_command(
    OUTPUT ${_ckpt_comp_files}
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/completions/generate.py
            --ckpt $<TARGET_FILE:ckpt> --out ${_ckpt_comp_dir}
    DEPENDS ckpt ${PROJECT_SOURCE_DIR}/completions/generate.py
    COMMENT "Generating bash, zsh and fish completions from ckpt --help")
  add_custom_target(ckpt_completions ALL DEPENDS ${_ckpt_comp_files})
  install(FILES ${_ckpt_comp_dir}/ckpt
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions COMPONENT ckpt)
  install(FILES ${_ckpt_comp_dir}/_ckpt
          DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions COMPONENT ckpt)
  install(FILES ${_ckpt_comp_dir}/ckpt.fish
          DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d COMPONENT ckpt)
else()
  message(STATUS "ckpt: no python3, so no man page and no shell completions are generated or installed")
endif()

# The example files that the manual pages' examples read (man/examples.txt), so that they run from an
# installed copy: testdata/X and tests/cli/data/X are both PREFIX/share/ckpt/examples/X. A source
# tree without testdata/ (the Docker build context leaves it out: .dockerignore) installs none.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/man/examples.txt)
if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/testdata)
  file(STRINGS ${PROJECT_SOURCE_DIR}/man/examples.txt _ckpt_examples REGEX "^[^#]")
else()
  set(_ckpt_examples "")
  message(STATUS "ckpt: no testdata/, so the files of the manual's examples are not installed")
endif()
foreach(_ex IN LISTS _ckpt_examples)
  string(STRIP "${_ex}" _ex)
  string(REGEX REPLACE "^(testdata|tests/cli/data)/" "" _rel "${_ex}")
  get_filename_component(_dir "${CMAKE_INSTALL_DATADIR}/ckpt/examples/${_rel}" DIRECTORY)
  if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/${_ex})
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${_ex} DESTINATION ${_dir} COMPONENT ckpt)
  elseif(EXISTS ${PROJECT_SOURCE_DIR}/${_ex})
    install(FILES ${PROJECT_SOURCE_DIR}/${_ex} DESTINATION ${_dir} COMPONENT ckpt)
  else()
    message(FATAL_ERROR "man/examples.txt: no such file or folder: ${_ex}")
  endif()
endforeach()

# JSON Schemas of the ckpt.*/1 outputs, when the tree has them.
if(EXISTS ${PROJECT_SOURCE_DIR}/schemas)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/schemas/ DESTINATION ${CMAKE_INSTALL_DATADIR}/ckpt/schemas
          COMPONENT ckpt)
endif()

# `cpack -G DEB` in the build directory: ckpt_VERSION_ARCH.deb and, with LibTorch, ckpt-torch_….deb.
# Depends come from dpkg-shlibdeps on the stripped binaries, so they name the Debian packages that
# provide the shared libraries actually linked (libfmt9, zlib1g, libdeflate0, libc6, … and for ckpt-torch
# Debian's libtorch1.13); ckpt-torch also depends on the same version of ckpt (its `load` and man page).
set(CPACK_PACKAGE_NAME ckpt)
set(CPACK_PACKAGE_VENDOR "ckpt")
# The Maintainer field of the .debs: whoever builds a package for others sets it (-DCKPT_PACKAGE_CONTACT=...).
set(CKPT_PACKAGE_CONTACT "ckpt maintainers <ckpt@localhost>" CACHE STRING "Maintainer of the Debian packages")
set(CPACK_PACKAGE_CONTACT "${CKPT_PACKAGE_CONTACT}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "inspect PyTorch checkpoints without Python")
set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL ${_ckpt_components})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_CKPT_PACKAGE_NAME ckpt)
# libcurl is opened on first use of a URL (src/remote/http.cc), so shlibdeps does not see it.
set(CPACK_DEBIAN_CKPT_PACKAGE_RECOMMENDS "libcurl4")
set(CPACK_DEBIAN_CKPT_DESCRIPTION
    "inspect PyTorch checkpoints without Python\n ckpt summary, check and diff read torch.save files, Lightning checkpoints,\n TorchScript and torch.export archives, safetensors and sharded checkpoints with\n their own readers, never running a pickle; no LibTorch needed.")
set(CPACK_DEBIAN_TORCH_PACKAGE_NAME ckpt-torch)
set(CPACK_DEBIAN_TORCH_DESCRIPTION
    "ckpt load with LibTorch\n ckpt-torch is the LibTorch half of ckpt: `ckpt load` and example-input forward\n passes run it to materialize tensors on the meta device, the CPU or a GPU.")
include(CPack)
cpack_add_component(ckpt DISPLAY_NAME "ckpt" DESCRIPTION "ckpt without LibTorch")
if(TARGET ckpt-torch)
  cpack_add_component(torch DISPLAY_NAME "ckpt-torch" DESCRIPTION "ckpt-torch, with LibTorch" DEPENDS ckpt)
endif()
