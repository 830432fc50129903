# Installs the exported Ember libraries with a CMake package config, so that a
# downstream project can `find_package(ember)` and link `ember::engine`.
include(CMakePackageConfigHelpers)

get_property(ember_targets GLOBAL PROPERTY EMBER_EXPORTED_TARGETS)

# A static library's private dependencies end up in the exported link
# interface ($<LINK_ONLY:...>), so the package config must find every package
# an exported target links, CUDA::* included once a layer links the CUDA
# runtime. EMBER_PACKAGE_NEEDS_CUDA tells emberConfig.cmake to find it.
set(EMBER_PACKAGE_NEEDS_CUDA OFF)
foreach(target IN LISTS ember_targets)
  get_target_property(libs ${target} LINK_LIBRARIES)
  get_target_property(interface_libs ${target} INTERFACE_LINK_LIBRARIES)
  if("${libs};${interface_libs}" MATCHES "CUDA::")
    set(EMBER_PACKAGE_NEEDS_CUDA ON)
  endif()
endforeach()
install(TARGETS ${ember_targets} ember_concurrentqueue
  EXPORT ember-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT ember-targets
  NAMESPACE ember::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ember)

configure_package_config_file(cmake/emberConfig.cmake.in
  ${PROJECT_BINARY_DIR}/emberConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ember)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/emberConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/emberConfig.cmake ${PROJECT_BINARY_DIR}/emberConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ember)
