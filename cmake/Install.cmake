# What `cmake --install` puts where (FHS, GNUInstallDirs), and the Debian
# package CPack builds from it (scripts/package.sh).
include(GNUInstallDirs)

# The man page, from the CLI's own --help.
find_program(HELP2MAN help2man REQUIRED)
add_custom_command(
  OUTPUT ${CMAKE_BINARY_DIR}/airlock.1
  COMMAND ${HELP2MAN} --no-info --no-discard-stderr
          --name "kernel-enforced network egress control for agent sandboxes"
          --version-string ${PROJECT_VERSION}
          --output ${CMAKE_BINARY_DIR}/airlock.1 $<TARGET_FILE:airlock>
  DEPENDS airlock
  COMMENT "airlock.1 from airlock --help")
add_custom_target(airlock_man ALL DEPENDS ${CMAKE_BINARY_DIR}/airlock.1)

# Paths inside the unit are those of this configuration: configure with
# -DCMAKE_INSTALL_PREFIX=/usr for the package (scripts/package.sh), whose
# configuration then goes to /etc.
set(AIRLOCK_BINDIR ${CMAKE_INSTALL_FULL_BINDIR})
set(AIRLOCK_SYSCONFDIR ${CMAKE_INSTALL_FULL_SYSCONFDIR})
set(AIRLOCK_DOCDIR ${CMAKE_INSTALL_FULL_DOCDIR})
configure_file(${CMAKE_SOURCE_DIR}/deploy/systemd/airlock.service.in ${CMAKE_BINARY_DIR}/airlock.service @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/deploy/oci/airlock-hook.json.in ${CMAKE_BINARY_DIR}/airlock-hook.json @ONLY)

install(TARGETS airlock RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_BINARY_DIR}/airlock.service DESTINATION lib/systemd/system)
install(FILES ${CMAKE_BINARY_DIR}/airlock.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
# The OCI hook, where podman and CRI-O look for hooks (and containerd's NRI
# hook injector): it runs for containers annotated io.airlock.policy only.
install(FILES ${CMAKE_BINARY_DIR}/airlock-hook.json DESTINATION ${CMAKE_INSTALL_DATADIR}/containers/oci/hooks.d
  RENAME airlock.json)
install(FILES deploy/bash-completion/airlock DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
install(FILES deploy/airlock/airlock.default.json DESTINATION ${AIRLOCK_SYSCONFDIR}/airlock RENAME airlock.json)
install(FILES policies/default.json DESTINATION ${AIRLOCK_SYSCONFDIR}/airlock/policies)
install(DIRECTORY policies/ DESTINATION ${CMAKE_INSTALL_DATADIR}/airlock/policies FILES_MATCHING PATTERN "*.json")
install(FILES deploy/airlock/airlock.json DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(DIRECTORY dashboards/ DESTINATION ${CMAKE_INSTALL_DATADIR}/airlock/dashboards)
install(DIRECTORY deploy/prometheus/ DESTINATION ${CMAKE_INSTALL_DATADIR}/airlock/prometheus)
install(DIRECTORY deploy/alertmanager/ DESTINATION ${CMAKE_INSTALL_DATADIR}/airlock/alertmanager)
install(DIRECTORY deploy/kubernetes/ DESTINATION ${CMAKE_INSTALL_DATADIR}/airlock/kubernetes)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME airlock)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "airlock maintainers <airlock@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "kernel-enforced network egress control for AI-agent sandboxes")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")  # postinst: the proxy's user
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${CMAKE_SOURCE_DIR}/deploy/debian/conffiles
  ${CMAKE_SOURCE_DIR}/deploy/debian/postinst
  ${CMAKE_SOURCE_DIR}/deploy/debian/prerm
  ${CMAKE_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
