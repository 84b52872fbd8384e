// SPDX-License-Identifier: Apache-2.0
// confluxd: the Conflux aggregator daemon. Exit codes: 0 after SIGTERM/SIGINT, 1 when it
// cannot start (e.g. a port in use), 2 on a configuration error. SIGHUP reloads the
// configuration (the live keys; control/reload.cc).
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "aggregator/config.h"
#include "aggregator/control/fd_budget.h"
#include "aggregator/daemon/daemon.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  using namespace conflux::agg;
  std::vector<std::string> args(argv + 1, argv + argc);
  Config cfg;
  std::string message;
  switch (load_config(args, process_env, &cfg, &message)) {
    case LoadStatus::kExitSuccess:
      std::fputs(message.c_str(), stdout);
      return 0;
    case LoadStatus::kError:
      std::fprintf(stderr, "confluxd: configuration error: %s\n", message.c_str());
      return 2;
    case LoadStatus::kOk:
      break;
  }
  setup_logging(cfg.log_level);
  // Before anything opens a descriptor: the control plane sizes its limits from it.
  raise_nofile_soft_limit();

  // Every thread inherits this mask; the main thread takes the signals with sigwait().
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::string err;
  auto daemon = Daemon::create(cfg, &err);
  if (daemon == nullptr) {
    spdlog::critical("cannot start: {}", err);
    return 1;
  }
  // SIGHUP and `conflux reload`: the same arguments and environment, read again.
  daemon->set_reload_source([args](Config* fresh) -> conflux::Status {
    std::string why;
    if (load_config(args, process_env, fresh, &why) == LoadStatus::kOk) return {};
    return conflux::invalid_argument(why.empty() ? "cannot load" : why);
  });
  if (const conflux::Status st = daemon->start(); !st.ok()) {
    spdlog::critical("cannot start: {}", st.message());
    return 1;
  }
  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) {
    spdlog::info("SIGHUP: reloading the configuration");
    daemon->request_reload();
  }
  spdlog::info("signal {} received: stopping", sig);
  daemon->request_stop();
  daemon->wait();
  return 0;
}
