# Runs at install time (cmake --install, or CPack's staging install), component aggregator:
# installs the systemd unit with the paths of the prefix being installed to, and the example
# config as <confdir>/confluxd.toml unless one is there already (an operator's edits survive a
# re-install). <confdir> is /etc/conflux for the prefix /usr (the Debian packages), else
# <prefix>/etc/conflux, as GNUInstallDirs places SYSCONFDIR. The unit goes to
# <prefix>/lib/systemd/system, which systemd searches for /usr and /usr/local.
# Set by the install(CODE) before this script: CONFLUX_SOURCE_DIR, CONFLUX_BINDIR_REL,
# CONFLUX_DOCDIR_REL.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(CONFLUX_CONFDIR "/etc/conflux")
else()
  set(CONFLUX_CONFDIR "${CMAKE_INSTALL_PREFIX}/etc/conflux")
endif()
set(CONFLUX_BINDIR "${CMAKE_INSTALL_PREFIX}/${CONFLUX_BINDIR_REL}")
set(CONFLUX_DOCDIR "${CMAKE_INSTALL_PREFIX}/${CONFLUX_DOCDIR_REL}")
set(unit_dir "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
set(conf_dir "$ENV{DESTDIR}${CONFLUX_CONFDIR}")

configure_file("${CONFLUX_SOURCE_DIR}/deploy/systemd/confluxd.service.in"
               "${unit_dir}/confluxd.service" @ONLY)
message(STATUS "Installing: ${unit_dir}/confluxd.service")
if(EXISTS "${conf_dir}/confluxd.toml")
  message(STATUS "Up-to-date (kept): ${conf_dir}/confluxd.toml")
else()
  # configure_file, not file(INSTALL), which would prepend DESTDIR a second time.
  configure_file("${CONFLUX_SOURCE_DIR}/deploy/confluxd.example.toml"
                 "${conf_dir}/confluxd.toml" COPYONLY)
  message(STATUS "Installing: ${conf_dir}/confluxd.toml")
endif()
